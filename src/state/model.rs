//! The typed model of a state file (DESIGN §3). Every struct denies unknown fields so that a
//! typo in a state file is an error that names the field and its path.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_false(b: &bool) -> bool {
    !*b
}

/// A whole state file: one app thread, its providers, runs, handoffs and the run about to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    pub thread: Thread,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Caps>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_threads: Vec<ProviderThread>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<Handoff>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<Transfer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    pub request: Request,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Thread {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_summary_through: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
    /// The workspace root (the directory the agents work in), when the app knows it: file
    /// changes under it are listed by their path relative to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// Lineage of a forked thread: the parent thread and the run the fork was taken at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParentRef {
    pub thread: String,
    pub run: u32,
}

/// Provider capabilities as written in a state file; unset fields take the documented defaults
/// (see [`crate::state::caps_for`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    description = "Provider capabilities; an unset field takes the provider's default (docs/state.md#providers)."
)]
pub struct Caps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_fork: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepts_handoff: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_channel: Option<HandoffChannel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_read: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarize: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_chars_per_turn: Option<u64>,
}

/// Capabilities with every field resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedCaps {
    pub resume: bool,
    pub native_fork: bool,
    pub rollback: bool,
    pub accepts_handoff: bool,
    pub handoff_channel: HandoffChannel,
    pub file_read: bool,
    pub summarize: bool,
    pub max_input_chars_per_turn: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffChannel {
    System,
    Developer,
    User,
    Preamble,
}

impl HandoffChannel {
    pub const NAMES: &'static [&'static str] = &["system", "developer", "user", "preamble"];
    /// The channel named `s` (one of [`HandoffChannel::NAMES`]).
    pub fn parse(s: &str) -> Option<HandoffChannel> {
        Some(match s {
            "system" => HandoffChannel::System,
            "developer" => HandoffChannel::Developer,
            "user" => HandoffChannel::User,
            "preamble" => HandoffChannel::Preamble,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffChannel::System => "system",
            HandoffChannel::Developer => "developer",
            HandoffChannel::User => "user",
            HandoffChannel::Preamble => "preamble",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderThread {
    pub id: String,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_mode: Option<String>,
    #[serde(default)]
    pub status: ProviderThreadStatus,
    #[serde(default, skip_serializing_if = "is_false")]
    pub resume_failed: bool,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ProviderThreadStatus {
    #[default]
    Active,
    Divergent,
    RolledBack,
    Closed,
}

impl ProviderThreadStatus {
    pub const NAMES: &'static [&'static str] = &["active", "divergent", "rolled_back", "closed"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Divergent => "divergent",
            Self::RolledBack => "rolled_back",
            Self::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub ordinal: u32,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_thread: Option<String>,
    #[serde(default)]
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Item>,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Completed,
    Failed,
    Interrupted,
    Running,
    RolledBack,
}

impl RunStatus {
    pub const NAMES: &'static [&'static str] = &[
        "completed",
        "failed",
        "interrupted",
        "running",
        "rolled_back",
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::Running => "running",
            Self::RolledBack => "rolled_back",
        }
    }
}

/// One step of a plan item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    pub text: String,
    #[serde(default)]
    pub status: StepStatus,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Done,
    InProgress,
    #[default]
    Pending,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::InProgress => "in_progress",
            Self::Pending => "pending",
        }
    }
}

/// One item of a run, in source order. `id` is optional and defaults to `r<ordinal>.<index>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Item {
    UserMessage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    AssistantMessage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    Reasoning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    Narration {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    Command {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    FileChange {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        change: Option<FileChangeKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff_lines: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    ToolCall {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolStatus>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    Plan {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        steps: Vec<PlanStep>,
    },
    Approval {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
        #[serde(default, skip_serializing_if = "is_false")]
        resolved: bool,
    },
    Question {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
        #[serde(default, skip_serializing_if = "is_false")]
        answered: bool,
    },
    Decision {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    SubagentResult {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        agent: String,
        text: String,
    },
    Protocol {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileChangeKind {
    Created,
    Modified,
    Deleted,
    Renamed,
}

impl FileChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Renamed => "renamed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Completed,
    Failed,
    Running,
    Declined,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Running => "running",
            Self::Declined => "declined",
        }
    }
}

/// Every item kind, in the order the docs list them. `checkpoint`, `handoff`,
/// `compact_summary` and `fork_anchor` are synthetic kinds: the selector presents the thread's
/// checkpoints, prior handoffs, compaction summary and fork anchor as items too.
pub const ITEM_KINDS: &[&str] = &[
    "user_message",
    "assistant_message",
    "reasoning",
    "narration",
    "command",
    "file_change",
    "tool_call",
    "plan",
    "approval",
    "question",
    "decision",
    "error",
    "subagent_result",
    "protocol",
    "checkpoint",
    "handoff",
    "compact_summary",
    "fork_anchor",
];

impl Item {
    pub fn kind(&self) -> &'static str {
        match self {
            Item::UserMessage { .. } => "user_message",
            Item::AssistantMessage { .. } => "assistant_message",
            Item::Reasoning { .. } => "reasoning",
            Item::Narration { .. } => "narration",
            Item::Command { .. } => "command",
            Item::FileChange { .. } => "file_change",
            Item::ToolCall { .. } => "tool_call",
            Item::Plan { .. } => "plan",
            Item::Approval { .. } => "approval",
            Item::Question { .. } => "question",
            Item::Decision { .. } => "decision",
            Item::Error { .. } => "error",
            Item::SubagentResult { .. } => "subagent_result",
            Item::Protocol { .. } => "protocol",
        }
    }

    pub fn id(&self) -> Option<&str> {
        match self {
            Item::UserMessage { id, .. }
            | Item::AssistantMessage { id, .. }
            | Item::Reasoning { id, .. }
            | Item::Narration { id, .. }
            | Item::Command { id, .. }
            | Item::FileChange { id, .. }
            | Item::ToolCall { id, .. }
            | Item::Plan { id, .. }
            | Item::Approval { id, .. }
            | Item::Question { id, .. }
            | Item::Decision { id, .. }
            | Item::Error { id, .. }
            | Item::SubagentResult { id, .. }
            | Item::Protocol { id, .. } => id.as_deref(),
        }
    }

    /// The item's main text: the message, the command line, the file path, the tool name.
    pub fn primary_text(&self) -> &str {
        match self {
            Item::UserMessage { text, .. }
            | Item::AssistantMessage { text, .. }
            | Item::Reasoning { text, .. }
            | Item::Narration { text, .. }
            | Item::Approval { text, .. }
            | Item::Question { text, .. }
            | Item::Decision { text, .. }
            | Item::Error { text, .. }
            | Item::SubagentResult { text, .. }
            | Item::Protocol { text, .. } => text,
            Item::Command { command, .. } => command,
            Item::FileChange { path, .. } => path,
            Item::ToolCall { tool, .. } => tool,
            Item::Plan { .. } => "",
        }
    }

    /// A rough size in characters of everything the item carries (used for summary sizes).
    pub fn char_len(&self) -> usize {
        let c = |s: &str| s.chars().count();
        let o = |s: &Option<String>| s.as_deref().map(c).unwrap_or(0);
        match self {
            Item::Command {
                command, output, ..
            } => c(command).saturating_add(o(output)),
            Item::FileChange { path, diff, .. } => c(path).saturating_add(o(diff)),
            Item::ToolCall {
                tool,
                input,
                output,
                ..
            } => c(tool).saturating_add(o(input)).saturating_add(o(output)),
            Item::Plan { steps, .. } => steps.iter().fold(0usize, |n, s| {
                n.saturating_add(c(&s.text)).saturating_add(2)
            }),
            Item::SubagentResult { agent, text, .. } => c(agent).saturating_add(c(text)),
            other => c(other.primary_text()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRange {
    pub from: u32,
    pub to: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_run: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_provider_threads: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_provider_thread: Option<String>,
    pub covered: RunRange,
    /// The thread whose runs `covered` numbers, when it is not this thread: a merge-back
    /// handoff into a parent covers runs of the fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_thread: Option<String>,
    pub strategy: HandoffStrategy,
    pub status: HandoffStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

impl Handoff {
    /// Whether `covered` numbers runs of the thread `own` (the thread holding the handoff):
    /// false for a merge-back handoff, whose coverage is the fork's runs.
    pub fn covers_own_runs(&self, own: &str) -> bool {
        self.covered_thread.as_deref().is_none_or(|t| t == own)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStrategy {
    DeltaSinceTargetLastSeen,
    FullThreadSummary,
    ForkDeltaSummary,
    CheckpointSummary,
    ManualContext,
}

impl HandoffStrategy {
    pub const NAMES: &'static [&'static str] = &[
        "delta_since_target_last_seen",
        "full_thread_summary",
        "fork_delta_summary",
        "checkpoint_summary",
        "manual_context",
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeltaSinceTargetLastSeen => "delta_since_target_last_seen",
            Self::FullThreadSummary => "full_thread_summary",
            Self::ForkDeltaSummary => "fork_delta_summary",
            Self::CheckpointSummary => "checkpoint_summary",
            Self::ManualContext => "manual_context",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "delta_since_target_last_seen" => Self::DeltaSinceTargetLastSeen,
            "full_thread_summary" => Self::FullThreadSummary,
            "fork_delta_summary" => Self::ForkDeltaSummary,
            "checkpoint_summary" => Self::CheckpointSummary,
            "manual_context" => Self::ManualContext,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStatus {
    Pending,
    Ready,
    Failed,
    Superseded,
}

impl HandoffStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Superseded => "superseded",
        }
    }
    /// Whether the handoff counts toward its provider thread's coverage. That a run consumed
    /// it is recorded on the run (`runs[].handoff`) and the transfer (`consumed`), never here.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Ready)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: TransferType,
    pub status: TransferStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_thread: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_thread: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferType {
    Fork,
    ProviderHandoff,
    MergeBack,
    SubagentSpawn,
    SubagentResult,
}

impl TransferType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::ProviderHandoff => "provider_handoff",
            Self::MergeBack => "merge_back",
            Self::SubagentSpawn => "subagent_spawn",
            Self::SubagentResult => "subagent_result",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    Pending,
    ResolvedNative,
    ResolvedPortable,
    Failed,
    Consumed,
    Superseded,
}

impl TransferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::ResolvedNative => "resolved_native",
            Self::ResolvedPortable => "resolved_portable",
            Self::Failed => "failed",
            Self::Consumed => "consumed",
            Self::Superseded => "superseded",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub run: u32,
    #[serde(default)]
    pub files_changed: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_mode: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub clean_context: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub kind: RequestKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_anchor: Option<ForkAnchor>,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    #[default]
    Dispatch,
    Fork,
    MergeBack,
}

impl RequestKind {
    pub const NAMES: &'static [&'static str] = &["dispatch", "fork", "merge_back"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dispatch => "dispatch",
            Self::Fork => "fork",
            Self::MergeBack => "merge_back",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkAnchor {
    pub role: AnchorRole,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnchorRole {
    User,
    Assistant,
}

impl AnchorRole {
    pub const NAMES: &'static [&'static str] = &["user", "assistant"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}
