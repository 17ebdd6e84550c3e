//! The decision (DESIGN §4, contract): what `baton explain --json` prints.

use crate::state::{HandoffStrategy, RunRange};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod trace;
pub use crate::facts::Value;
pub use crate::policy::Strategy;
pub use trace::{Trace, ValueName};

/// How the next run of a thread starts on a target provider, and what context it receives: the
/// decision contract of DESIGN §4, what `baton explain --json` prints ([`Decision::to_json`]).
/// A pure function of (policy sha256, state): the same inputs give the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Decision {
    /// The policy that decided (`policy`: its name and the sha256 of its source set).
    pub policy: PolicyRef,
    /// The target provider the run starts on (`target`), e.g. `"codex"`.
    pub target: String,
    /// The ladder's choice (`strategy`): `no_handoff`, `delta_existing`, `full_existing`,
    /// `full_new`, `native_fork` or `unsupported`.
    pub strategy: Strategy,
    /// The kind of handoff document (`handoff_strategy`), e.g. `delta_since_target_last_seen`;
    /// `None` (JSON null) when no document is needed: `no_handoff`, `native_fork`, `unsupported`,
    /// or no eligible run to hand over.
    pub handoff_strategy: Option<HandoffStrategy>,
    /// Which provider thread the run uses (`provider_thread`: resume, create, fork natively, none).
    pub provider_thread: ProviderThreadAction,
    /// The run ordinals the handoff covers, inclusive (`covered_runs`, e.g. `{"from": 6, "to": 8}`);
    /// `None` when there is no handoff.
    pub covered_runs: Option<RunRange>,
    /// Names of the staleness signals that held, in policy order (`stale`, e.g.
    /// `["resume_failed"]`); empty when none held.
    pub stale: Vec<String>,
    /// How the handoff document reaches the agent (`delivery`); `None` when the run takes no
    /// handoff (or none fits its budget: strategy `unsupported`). A run with no handoff of its
    /// own that takes a waiting merge-back carries that handoff's delivery.
    pub delivery: Option<Delivery>,
    /// The narrow read permission for the off-band document (`pregrant`); `None` unless delivery
    /// is off-band and a `pregrant` rule matched.
    pub pregrant: Option<Pregrant>,
    /// Ordinal of the run about to start.
    pub run: u32,
    /// Id the new handoff gets when one is made.
    pub handoff_id: Option<String>,
    /// The ladder rule that decided.
    pub decided_by: DecidedBy,
    /// The budget the handoff was fitted to (set once the handoff is rendered; absent for a
    /// decision without one, and from `decide` alone). Additive to DESIGN §4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    /// What the clock and the workspace say about the target thread (docs/facts.md, "Time and
    /// workspace"): one line for people and why some facts are unknown; absent when the state
    /// has no time or workspace field. Additive to DESIGN §4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceReport>,
    /// What secret redaction replaced in the handoff (docs/redaction.md): per rule, the
    /// number of distinct secrets and the ids of the items that held them, never a secret.
    /// Set once the handoff is rendered; empty (and absent from the JSON) when nothing was
    /// redacted. Additive to DESIGN §4.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<crate::redact::RedactionReport>,
    /// Every rule evaluated, in evaluation order, with the values of the facts it read (`trace`).
    /// It reads as a slice of [`TraceEntry`]; its text is formatted when it is first read.
    #[schemars(with = "Vec<TraceEntry>")]
    pub trace: Trace,
}

/// The time and workspace facts of a decision, as `baton explain` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceReport {
    /// "idle 3 d 4 h; HEAD moved a1b2c3d -> e4f5g6h (14 commits), 23 files changed outside
    /// the thread"; `None` when nothing is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// Why a fact is null or bounded ("request.at \"yesterday\" is not an RFC 3339 date").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The workspace note to send with the run's first turn when the target thread saw every
    /// run but the workspace moved under it (strategy `no_handoff`, a policy whose summary
    /// includes `workspace`): HEAD from -> to, commits, files changed outside the thread,
    /// dirty files, within the target's per-turn budget. `None` otherwise (a handoff document
    /// carries it as its `workspace` section instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How a handoff was fitted to its budget (docs/rendering.md#budgets): recorded in the
/// decision, in `handoff.json` and, step by step, in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BudgetReport {
    /// What is measured against `limit`: `first_turn` (the inline prompt, document included)
    /// or `document` (the off-band document).
    pub scope: String,
    /// The limit in characters.
    pub limit: usize,
    /// The first-turn message's limit: the target's `max_input_chars_per_turn`, or the
    /// policy's `turn max` (`first_turn_source` says which).
    pub first_turn_limit: usize,
    /// Where `first_turn_limit` comes from: `turn_max` (the policy's `turn max N`) or
    /// `turn_max_none` (the policy's `turn max none`: no per-turn limit); absent when it is
    /// the target's `max_input_chars_per_turn` (`target`), so that decisions logged before
    /// this field replay identically. Additive to DESIGN §4.
    #[serde(skip_serializing_if = "FirstTurnSource::is_target")]
    pub first_turn_source: FirstTurnSource,
    /// The policy's off-band document budget (`document max`).
    pub document_limit: usize,
    /// A full handoff that replaces an `over_budget` delta is held to the delta's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_chars: Option<usize>,
    /// Characters of what `scope` measures, before and after degradation.
    pub before: usize,
    /// Characters after degradation (see `before`).
    pub after: usize,
    /// Characters of the first-turn prompt as sent.
    pub first_turn: usize,
    /// Every degradation step taken, in order.
    pub steps: Vec<BudgetStep>,
    /// Whether the handoff is within its limits.
    pub kept: bool,
    /// Why it is not, or why delivery changed: `must_keep_over_budget`,
    /// `request_over_budget`, `moved_off_band`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Changed files the handoff counts per directory instead of naming (`degrade count
    /// file_change`): even grouped by directory, their names do not fit the limit
    /// (docs/limits.md#rendering). Absent when every changed file is named. Additive to
    /// DESIGN §4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_counted: Option<FilesCounted>,
    /// What the handoff could not keep that a reader relies on, in words (today: changed files
    /// counted, not named, and where they are). Empty (and absent) when nothing. Additive to
    /// DESIGN §4.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Changed files a handoff counts per directory instead of naming (`budget.files_counted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FilesCounted {
    /// Distinct files counted, not named.
    pub counted: usize,
    /// Distinct files grouped by directory (named or counted).
    pub grouped: usize,
}

/// Where a budget's first-turn limit comes from (docs/rendering.md#budgets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FirstTurnSource {
    /// The target's `max_input_chars_per_turn` (the policy sets no `turn max`).
    Target,
    /// The policy's `turn max N`.
    TurnMax,
    /// The policy's `turn max none`: no per-turn limit.
    TurnMaxNone,
}

impl FirstTurnSource {
    /// The target's own cap (absent from the decision's JSON).
    pub fn is_target(&self) -> bool {
        *self == FirstTurnSource::Target
    }
}

/// One degradation step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BudgetStep {
    /// The step as the policy writes it (`drop narration`, `drop_oldest_runs`, ...) or
    /// `must_keep_only`.
    pub step: String,
    /// Characters measured before this step.
    pub before: usize,
    /// Characters measured after this step.
    pub after: usize,
    /// Items this step left out.
    pub dropped: Vec<String>,
}

/// The policy behind a decision (`policy` in DESIGN §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PolicyRef {
    /// The name in the policy's `policy "NAME" { ... }` block, e.g. `"default"`.
    pub name: String,
    /// Lowercase hex sha256 of the policy source set: the text of every source in load order,
    /// bases reached through `extends` included (docs/policy-language.md#the-sha256).
    pub sha256: String,
}

/// What happens to the target's provider thread (`provider_thread.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ThreadAction {
    /// Resume the target's existing provider thread (`resume`).
    Resume,
    /// Start a new provider thread (`create`); the id is not known yet.
    Create,
    /// Fork the source provider thread with the provider's native fork (`fork_native`).
    ForkNative,
    /// No provider thread is used (`none`): the strategy is `unsupported`.
    None,
}

impl ThreadAction {
    /// The snake_case name, as serialized (`"resume"`, `"create"`, `"fork_native"`, `"none"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadAction::Resume => "resume",
            ThreadAction::Create => "create",
            ThreadAction::ForkNative => "fork_native",
            ThreadAction::None => "none",
        }
    }
}

/// The provider thread the run uses (`provider_thread` in DESIGN §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ProviderThreadAction {
    /// What happens to the thread.
    pub action: ThreadAction,
    /// The provider thread id (`"C1"`): the one resumed or forked from; `None` when one is created
    /// or none is used.
    pub id: Option<String>,
}

impl ProviderThreadAction {
    /// An action on the provider thread `id`.
    pub fn new(action: ThreadAction, id: Option<&str>) -> ProviderThreadAction {
        ProviderThreadAction {
            action,
            id: id.map(str::to_string),
        }
    }
}

/// How the handoff document is delivered (`delivery.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeliveryMode {
    /// Written to a private file the agent reads (with the pre-grant); the first turn carries a
    /// short prompt naming it (`off_band`).
    OffBand,
    /// Carried in the first turn itself (`inline`).
    Inline,
}

impl DeliveryMode {
    /// `OffBand` when `off_band` holds, else `Inline`.
    pub fn of(off_band: bool) -> DeliveryMode {
        if off_band {
            DeliveryMode::OffBand
        } else {
            DeliveryMode::Inline
        }
    }

    /// The snake_case name, as serialized (`"off_band"`, `"inline"`).
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryMode::OffBand => "off_band",
            DeliveryMode::Inline => "inline",
        }
    }
}

/// How the handoff reaches the agent (`delivery` in DESIGN §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivery {
    /// Off-band or inline: the first matching `delivery` rule; inline when none matched. The
    /// budget fitting may move an inline handoff off-band.
    pub mode: DeliveryMode,
    /// The policy's `inline_limit`: the characters the first-turn prompt of an off-band handoff
    /// aims to stay within (e.g. `500`).
    pub inline_limit: usize,
    /// The off-band document's stable path (null when inline).
    pub document: Option<String>,
    /// Why delivery is not what the policy chose (an off-band write that failed, ...): the
    /// error's message, which names the path and says the fact (never a command to run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// What kind of failure `fallback_reason` is (`disk_full`, `not_writable`, ...), so a
    /// reader picks its advice by kind (the `baton` command adds "run `baton gc`" to a
    /// `disk_full` one). Absent when delivery did not fall back, and in decisions recorded
    /// before baton recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_kind: Option<FallbackKind>,
    /// Set when the inline prompt cannot fit `inline_limit` (the message is never cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_note: Option<String>,
}

/// Why an off-band delivery fell back to inline (`delivery.fallback_kind`): one per kind of
/// delivery error, with the names `DeliveryError::kind` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FallbackKind {
    /// A thread id, handoff id or file name could not be used as a path component.
    InvalidId,
    /// The handoff directory is not writable (permission denied, read-only filesystem).
    NotWritable,
    /// The filesystem is full (ENOSPC, EDQUOT).
    DiskFull,
    /// The handoff directory is not safe to use (a symlink, another owner, open modes).
    UnsafePath,
    /// Any other I/O error.
    Io,
    /// The pre-grant could not be issued.
    InvalidGrant,
    /// The grant store failed.
    Store,
}

impl FallbackKind {
    /// The snake_case name, as serialized (`"disk_full"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackKind::InvalidId => "invalid_id",
            FallbackKind::NotWritable => "not_writable",
            FallbackKind::DiskFull => "disk_full",
            FallbackKind::UnsafePath => "unsafe_path",
            FallbackKind::Io => "io",
            FallbackKind::InvalidGrant => "invalid_grant",
            FallbackKind::Store => "store",
        }
    }
}

/// The scoped pre-grant (`pregrant` in DESIGN §4): one tool may read one canonical path, for a
/// number of turns and uses, so the agent can read the off-band document without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pregrant {
    /// The tool granted, as the policy names it, e.g. `"Read"`.
    pub tool: String,
    /// The off-band document path the grant covers (the same as `delivery.document`).
    pub path: String,
    /// How many turns the grant lasts (the policy's `turns`; default `1`).
    pub turns: u32,
    /// How many times the grant may be used (the policy's `uses`; default `1`).
    pub uses: u32,
}

/// The ladder rule that decided the strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DecidedBy {
    /// The rule's label, `strategy <name>` (e.g. `"strategy full_new"`), `"budget unsupported"`
    /// when the handoff cannot fit its budget, or `"strategy (none matched)"`.
    pub rule: String,
    /// Where the rule is written, `file:line:col` (e.g. `"default.policy:14:3"`); empty when no
    /// ladder rule matched. A `budget unsupported` decision points at the policy's summary block.
    pub at: String,
    /// The rule's `because` text; `None` when it has none. A decision recorded in another thread
    /// (a merge-back or fork) says here which view it was decided on.
    pub because: Option<String>,
}

/// Whether a traced rule's condition held (a trace entry's `outcome`).
// Not the main path's result, which is `crate::Outcome`; the doc comment above is also the
// schema's description, so it names no Rust item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
// The schema keeps the name it has always had (`baton schema decision`).
#[schemars(rename = "Outcome")]
#[non_exhaustive]
pub enum RuleOutcome {
    /// The condition held (`matched`).
    Matched,
    /// The condition did not hold (`not_matched`).
    NotMatched,
}

impl RuleOutcome {
    /// `Matched` when `matched` holds, else `NotMatched`.
    pub fn of(matched: bool) -> RuleOutcome {
        if matched {
            RuleOutcome::Matched
        } else {
            RuleOutcome::NotMatched
        }
    }
}

/// One evaluated rule with the values of the facts it read.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TraceEntry {
    /// The rule's label: `eligible`, `stale <signal>`, `strategy <name>`, `delivery <mode>`,
    /// `pregrant <tool>`, `budget <scope>`, `degrade <step>`, ...
    pub rule: String,
    /// Where the rule is written, `file:line:col`; budget and degradation entries point at the
    /// policy's summary block.
    pub at: String,
    /// Whether the rule's condition held.
    pub outcome: RuleOutcome,
    /// The facts the rule read, with their values (plain JSON values).
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub values: BTreeMap<String, Value>,
    /// The rule as written in the policy, on one line; `None` for budget and degradation
    /// entries, which are not rules of their own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// The rule's `because` text, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

impl Decision {
    /// The trace entry of the ladder rule that decided (the last evaluation of it), with the
    /// values it read. `explain` and `baton test` show it.
    pub fn deciding_entry(&self) -> Option<&TraceEntry> {
        self.trace
            .iter()
            .rev()
            .find(|t| t.rule == self.decided_by.rule && t.at == self.decided_by.at)
    }

    /// The decision as pretty JSON (deterministic: same policy and state, same bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Whether a handoff document is part of this decision.
    pub fn needs_handoff(&self) -> bool {
        self.handoff_strategy.is_some()
    }
}
