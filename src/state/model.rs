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
    /// Format version (`version`); `1`.
    pub version: u32,
    /// The app thread (`thread`).
    pub thread: Thread,
    /// Capability overrides by provider name (`providers`); an unset field, or an undeclared
    /// provider, takes the defaults of [`crate::state::default_caps`]. Empty when none is declared.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Caps>,
    /// The provider-native threads opened so far (`provider_threads`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_threads: Vec<ProviderThread>,
    /// The runs so far, in ordinal order (`runs`); empty for a new thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
    /// Handoff documents made so far (`handoffs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<Handoff>,
    /// Forks, provider handoffs and merge-backs so far (`transfers`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<Transfer>,
    /// Checkpoints the app took after runs (`checkpoints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// The run about to start (`request`).
    pub request: Request,
}

/// The app thread (`thread` in DESIGN §3): one conversation, whatever providers ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Thread {
    /// The thread's id (`"th_1"`); not empty, not `.`/`..`, no `/` or `\`: it names the directory
    /// of the thread's off-band documents.
    pub id: String,
    /// Shown in the handoff document's heading; `None` when the app has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The app's latest compaction summary of the thread, if it keeps one (the fact
    /// `thread.has_compact_summary`, the synthetic `compact_summary` item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_summary: Option<String>,
    /// The last run ordinal `compact_summary` covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_summary_through: Option<u32>,
    /// For a forked thread, the parent thread and the fork point; `None` otherwise.
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
    /// The parent thread's id.
    pub thread: String,
    /// The parent's run ordinal the fork was taken at (the fork point).
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
    /// Its threads can be resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<bool>,
    /// It can fork a thread natively.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_fork: Option<bool>,
    /// It can roll a thread back (else a rollback leaves the thread `divergent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<bool>,
    /// It accepts a handoff at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepts_handoff: Option<bool>,
    /// Where the first-turn prompt goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_channel: Option<HandoffChannel>,
    /// Its agent can read a file (needed for off-band delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_read: Option<bool>,
    /// It can summarise a thread itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarize: Option<bool>,
    /// Its per-turn input budget, in characters (e.g. `16000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_chars_per_turn: Option<u64>,
}

/// Capabilities with every field resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedCaps {
    /// Its threads can be resumed (`target.caps.resume`).
    pub resume: bool,
    /// It can fork a thread natively (`target.caps.native_fork`).
    pub native_fork: bool,
    /// It can roll a thread back (`target.caps.rollback`).
    pub rollback: bool,
    /// It accepts a handoff at all (`target.caps.accepts_handoff`).
    pub accepts_handoff: bool,
    /// Where the first-turn prompt goes (`target.caps.handoff_channel`).
    pub handoff_channel: HandoffChannel,
    /// Its agent can read a file (`target.caps.file_read`).
    pub file_read: bool,
    /// It can summarise a thread itself (`target.caps.summarize`).
    pub summarize: bool,
    /// Its per-turn input budget in characters (`target.caps.max_input_chars_per_turn`).
    pub max_input_chars_per_turn: u64,
}

/// Where a provider takes the first-turn prompt (`providers.*.handoff_channel`,
/// `target.caps.handoff_channel`). baton sends nothing itself: the app puts the prompt there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandoffChannel {
    /// The system prompt (`system`; claude's default).
    System,
    /// A developer message (`developer`; codex's default).
    Developer,
    /// The user's first message (`user`; cursor's, copilot's and an unknown provider's default).
    User,
    /// A preamble (`preamble`).
    Preamble,
}

impl HandoffChannel {
    /// Every channel name, as serialized.
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
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffChannel::System => "system",
            HandoffChannel::Developer => "developer",
            HandoffChannel::User => "user",
            HandoffChannel::Preamble => "preamble",
        }
    }
}

/// A provider-native thread opened for the app thread (`provider_threads[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderThread {
    /// The provider's own thread id (`"C1"`), unique in the state.
    pub id: String,
    /// The provider it belongs to (`"codex"`).
    pub provider: String,
    /// The model the thread runs (`stale model_changed` compares it with `request.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The runtime mode it runs in (`"full_access"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_mode: Option<String>,
    /// Where it stands; `active` when absent.
    #[serde(default)]
    pub status: ProviderThreadStatus,
    /// The last attempt to resume it failed (`target.thread.resume_failed`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub resume_failed: bool,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
/// The status of a provider thread (`provider_threads[].status`).
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderThreadStatus {
    /// In use (`active`, the default).
    #[default]
    Active,
    /// It saw runs that were rolled back and its provider cannot roll back (`divergent`).
    Divergent,
    /// It saw runs that were rolled back, and was rolled back with them (`rolled_back`).
    RolledBack,
    /// Closed by the app (`closed`).
    Closed,
}

impl ProviderThreadStatus {
    /// Every status name, as serialized.
    pub const NAMES: &'static [&'static str] = &["active", "divergent", "rolled_back", "closed"];
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Divergent => "divergent",
            Self::RolledBack => "rolled_back",
            Self::Closed => "closed",
        }
    }
}

/// One run of the thread: one turn of work on one provider (`runs[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// Its position: 1, 2, 3, ... in order, without gaps.
    pub ordinal: u32,
    /// The provider that ran it (`"claude"`).
    pub provider: String,
    /// The provider thread it ran in (a `provider_threads` id of the same provider); `None` when the
    /// app does not know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_thread: Option<String>,
    /// How it ended; `completed` when absent.
    #[serde(default)]
    pub status: RunStatus,
    /// The handoff this run consumed (a `handoffs` id); `None` when it started without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    /// What happened in the run, in source order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Item>,
    /// When the run started (RFC 3339, `2026-01-05T10:00:00Z`); `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the run ended (RFC 3339); `None` when unknown or still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The workspace the run ran in (its directory and git state when it ended); `None` when
    /// unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
}

/// Where a run ran, or where the requested run starts (`runs[].workspace`,
/// `request.workspace`): the working directory and its git state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// The working directory (an absolute path); `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Its git state; `None` when unknown or not a repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSnapshot>,
    /// Why `git` is missing or partial (`/tmp/x is not in a git repository`), as baton's
    /// workspace step found it; shown by `baton explain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The git state of a workspace (`workspace.git`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitSnapshot {
    /// The commit HEAD pointed at (a full or abbreviated hex id); `None` when unknown (an
    /// unborn branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The checked-out branch (`main`); `None` for a detached HEAD or when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Files with uncommitted changes (paths relative to the repository root), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirty: Vec<String>,
    /// More dirty files than `dirty` lists (it was cut at a bound); 0 when it lists them all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dirty_more: u64,
    /// Precomputed history, for `request.workspace` only: what changed between an earlier
    /// HEAD (the target thread's last run's) and `head`. baton's workspace step fills it from
    /// the repository; an app that knows it may write it itself. Decisions read it, never the
    /// repository, so they replay from the logged state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<GitSince>,
}

/// What changed in a repository between two commits (`request.workspace.git.since`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitSince {
    /// The earlier commit these changes start from (the target thread's last run's HEAD).
    pub head: String,
    /// Commits reachable from `head` of the snapshot but not from this one; `None` when the
    /// earlier commit is not in the repository (rebased away, a shallow clone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<u64>,
    /// Files changed between the two commits (paths relative to the repository root), newest
    /// change first; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// More changed files than `files` lists (it was cut at a bound); 0 when it lists them all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_more: u64,
    /// Why a value is missing or bounded (`the earlier HEAD a1b2c3d is not in the repository`),
    /// shown by `baton explain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
/// How a run ended (`runs[].status`).
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// It finished (`completed`, the default).
    #[default]
    Completed,
    /// It failed (`failed`).
    Failed,
    /// It was stopped before it finished (`interrupted`).
    Interrupted,
    /// The run in progress (`running`).
    Running,
    /// Undone by a rollback (`rolled_back`): never handed over, never counted as coverage.
    RolledBack,
}

impl RunStatus {
    /// Every status name, as serialized.
    pub const NAMES: &'static [&'static str] = &[
        "completed",
        "failed",
        "interrupted",
        "running",
        "rolled_back",
    ];
    /// The snake_case name, as serialized.
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// What the step does.
    pub text: String,
    /// Where it stands; `pending` when absent.
    #[serde(default)]
    pub status: StepStatus,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
/// The status of a plan step.
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepStatus {
    /// Done (`done`).
    Done,
    /// Being worked on (`in_progress`).
    InProgress,
    /// Not started (`pending`, the default).
    #[default]
    Pending,
}

impl StepStatus {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::InProgress => "in_progress",
            Self::Pending => "pending",
        }
    }
}

/// One item of a run, in source order. `id` is optional and defaults to `r<ordinal>.<index>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Item {
    /// A message from the user (`user_message`).
    UserMessage {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The message.
        text: String,
    },
    /// A message from the agent to the user (`assistant_message`).
    AssistantMessage {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The message.
        text: String,
    },
    /// Hidden chain-of-thought (`reasoning`): never handed over, whatever the policy says.
    Reasoning {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The reasoning text.
        text: String,
    },
    /// A visible narration segment of the agent (`narration`): "Looking at the router now."
    Narration {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The narration.
        text: String,
    },
    /// A shell command the agent ran (`command`).
    Command {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The command line (`cargo test`).
        command: String,
        /// Its exit code; `None` when unknown (still running, or not reported).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        /// Its output, when the app keeps it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    /// A file the agent changed (`file_change`).
    FileChange {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The file's path (shown relative to `thread.workspace` when under it).
        path: String,
        /// What happened to it; `None` when unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        change: Option<FileChangeKind>,
        /// The size of the diff in lines (`item.diff_lines`), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff_lines: Option<i64>,
        /// The diff itself, when the app keeps it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A tool the agent called (`tool_call`).
    ToolCall {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool's name (`Read`).
        tool: String,
        /// Its input, as text (`src/auth.rs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<String>,
        /// How the call ended; `None` when unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolStatus>,
        /// Its output, when the app keeps it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    /// The agent's plan (`plan`).
    Plan {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The plan's steps, in order.
        steps: Vec<PlanStep>,
    },
    /// A request for the user's approval (`approval`).
    Approval {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// What was asked (`Allow writing .env?`).
        text: String,
        /// Whether the user decided it (`item.resolved`); false when absent.
        #[serde(default, skip_serializing_if = "is_false")]
        resolved: bool,
    },
    /// A question to the user (`question`).
    Question {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The question.
        text: String,
        /// Whether it was answered (`item.answered`); false when absent.
        #[serde(default, skip_serializing_if = "is_false")]
        answered: bool,
    },
    /// A decision taken in the thread (`decision`): "Use the oauth2 crate."
    Decision {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The decision.
        text: String,
    },
    /// An error the run met (`error`).
    Error {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The error message.
        text: String,
    },
    /// What a subagent reported back (`subagent_result`).
    SubagentResult {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The subagent's name (`reviewer`).
        agent: String,
        /// Its report.
        text: String,
    },
    /// Provider protocol noise (`protocol`), e.g. `codex/event: turn.started`.
    Protocol {
        /// The item's id, unique in the state; when `None` it is `r<ordinal>.<n>` (the n-th item of
        /// its run, from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The protocol line.
        text: String,
    },
}

/// What happened to a changed file (`file_change.change`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileChangeKind {
    /// The file was created (`created`).
    Created,
    /// The file was modified (`modified`).
    Modified,
    /// The file was deleted (`deleted`).
    Deleted,
    /// The file was renamed (`renamed`).
    Renamed,
}

impl FileChangeKind {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Renamed => "renamed",
        }
    }
}

/// How a tool call ended (`tool_call.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolStatus {
    /// It completed (`completed`).
    Completed,
    /// It failed (`failed`).
    Failed,
    /// Still running (`running`).
    Running,
    /// The user declined it (`declined`).
    Declined,
}

impl ToolStatus {
    /// The snake_case name, as serialized.
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
    "workspace",
];

impl Item {
    /// The item's kind as the state file and the policy write it (`"user_message"`).
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

    /// The id written in the state, if any (see [`crate::state::item_id`] for the default).
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

/// An inclusive range of run ordinals (`{"from": 6, "to": 8}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRange {
    /// The first run ordinal.
    pub from: u32,
    /// The last run ordinal (`from <= to`).
    pub to: u32,
}

/// A handoff document made so far (`handoffs[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// Unique among handoffs (`"H1"`).
    pub id: String,
    /// The transfer it belongs to (a `transfers` id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<String>,
    /// The run it was made for (an existing ordinal); `None` when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_run: Option<u32>,
    /// Provider threads whose runs it summarises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_provider_threads: Vec<String>,
    /// The provider thread it was handed to; `None` when not known yet (a new thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_provider_thread: Option<String>,
    /// The runs it covers.
    pub covered: RunRange,
    /// The thread whose runs `covered` numbers, when it is not this thread: a merge-back
    /// handoff into a parent covers runs of the fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_thread: Option<String>,
    /// How it was made.
    pub strategy: HandoffStrategy,
    /// Where it stands; only a `ready` handoff counts toward coverage.
    pub status: HandoffStatus,
    /// Who made it (a policy reference, an app name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Its text, when the app keeps it (shown as a prior handoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The handoff it replaced (a `handoffs` id).
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

/// The kind of handoff document (`handoff_strategy`; DESIGN §3 vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandoffStrategy {
    /// The eligible runs after `target.last_seen`, the runs the target thread has not seen
    /// (`delta_since_target_last_seen`; the default of `delta_existing`).
    DeltaSinceTargetLastSeen,
    /// Every eligible run (`full_thread_summary`; the default of `full_existing` and `full_new`).
    FullThreadSummary,
    /// The fork's runs after the fork point (`fork_delta_summary`; used for every merge-back).
    ForkDeltaSummary,
    /// The eligible runs up to the latest checkpoint (`checkpoint_summary`).
    CheckpointSummary,
    /// Context the app made itself (`manual_context`): recorded as given, with its own covered
    /// runs.
    ManualContext,
}

impl HandoffStrategy {
    /// Every strategy name, as serialized.
    pub const NAMES: &'static [&'static str] = &[
        "delta_since_target_last_seen",
        "full_thread_summary",
        "fork_delta_summary",
        "checkpoint_summary",
        "manual_context",
    ];
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeltaSinceTargetLastSeen => "delta_since_target_last_seen",
            Self::FullThreadSummary => "full_thread_summary",
            Self::ForkDeltaSummary => "fork_delta_summary",
            Self::CheckpointSummary => "checkpoint_summary",
            Self::ManualContext => "manual_context",
        }
    }
    /// The strategy of a snake_case name; `None` for an unknown name.
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

/// The status of a handoff (`handoffs[].status`; DESIGN §3 vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandoffStatus {
    /// Being made (`pending`).
    Pending,
    /// Made and current (`ready`): the only status that counts toward coverage.
    Ready,
    /// Could not be made (`failed`).
    Failed,
    /// Replaced by a newer handoff, or covering rolled-back runs (`superseded`).
    Superseded,
}

impl HandoffStatus {
    /// The snake_case name, as serialized.
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

/// A fork, provider handoff or merge-back (`transfers[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    /// Unique among transfers (`"T1"`).
    pub id: String,
    /// What moved (`type` in the file).
    #[serde(rename = "type")]
    pub kind: TransferType,
    /// Where it stands.
    pub status: TransferStatus,
    /// The thread it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_thread: Option<String>,
    /// The thread it goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_thread: Option<String>,
    /// The run it was taken at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run: Option<u32>,
    /// How it was resolved (free text, e.g. `portable_context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// The handoff that carries it (a `handoffs` id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
}

/// What a transfer moves (`transfers[].type`; DESIGN §3 vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TransferType {
    /// A fork of the thread (`fork`).
    Fork,
    /// A switch to another provider (`provider_handoff`).
    ProviderHandoff,
    /// A fork's work merged back into its parent (`merge_back`).
    MergeBack,
    /// A subagent started (`subagent_spawn`).
    SubagentSpawn,
    /// A subagent's result coming back (`subagent_result`).
    SubagentResult,
}

impl TransferType {
    /// The snake_case name, as serialized.
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

/// The status of a transfer (`transfers[].status`; DESIGN §3 vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TransferStatus {
    /// Not resolved yet (`pending`); a fork's transfer is resolved at its first dispatch.
    Pending,
    /// Resolved by the provider natively (`resolved_native`), e.g. a native fork.
    ResolvedNative,
    /// Resolved with a portable handoff document (`resolved_portable`).
    ResolvedPortable,
    /// Could not be resolved (`failed`).
    Failed,
    /// The run it was made for completed and took it (`consumed`).
    Consumed,
    /// Replaced (`superseded`).
    Superseded,
}

impl TransferStatus {
    /// The snake_case name, as serialized.
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

/// A checkpoint the app took after a run (`checkpoints[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The run after which it was taken.
    pub run: u32,
    /// How many files changed (`checkpoint.files_changed`); 0 when absent.
    #[serde(default)]
    pub files_changed: u32,
    /// A short summary of the diff (`src/auth.rs +40 -2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_summary: Option<String>,
}

/// The run about to start (`request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The provider the run starts on (`request.provider`); a decision for another target
    /// overrides it.
    pub provider: String,
    /// The requested model (`gpt-5-codex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The requested runtime mode (`full_access`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_mode: Option<String>,
    /// The user asked for a clean context (`stale clean_context`); false when absent.
    #[serde(default, skip_serializing_if = "is_false")]
    pub clean_context: bool,
    /// The user's message for the run; never cut from the handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What starts the run; `dispatch` when absent.
    #[serde(default)]
    pub kind: RequestKind,
    /// For a fork: the message the fork was taken from; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_anchor: Option<ForkAnchor>,
    /// When the run is requested (RFC 3339). Whoever builds the request sets it; baton never
    /// reads the clock while deciding, so a decision replays exactly. `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The workspace the run starts in; `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
/// What starts a run (`request.kind`).
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestKind {
    /// The next run of the thread (`dispatch`, the default).
    #[default]
    Dispatch,
    /// The first run of a fork (`fork`).
    Fork,
    /// A fork's work merged back into its parent (`merge_back`).
    MergeBack,
}

impl RequestKind {
    /// Every kind name, as serialized.
    pub const NAMES: &'static [&'static str] = &["dispatch", "fork", "merge_back"];
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dispatch => "dispatch",
            Self::Fork => "fork",
            Self::MergeBack => "merge_back",
        }
    }
}

/// The message a fork was taken from (`request.fork_anchor`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkAnchor {
    /// Who wrote it (`fork.anchor_role`).
    pub role: AnchorRole,
    /// Its text.
    pub text: String,
}

/// Who wrote a fork anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AnchorRole {
    /// The user (`user`).
    User,
    /// The agent (`assistant`).
    Assistant,
}

impl AnchorRole {
    /// Every role name, as serialized.
    pub const NAMES: &'static [&'static str] = &["user", "assistant"];
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}
