//! Facts: the typed, lazily computed view of a thread for one target provider (DESIGN §6).
//!
//! The checker types every name against [`Fact::ALL`]; the evaluator asks a [`Facts`] for the
//! values. Facts that need work (coverage, summary sizes) are computed on first read and
//! cached. `docs/facts.md` is tested against [`Fact::ALL`].

mod compute;
mod history;
mod problems;
mod value;
pub mod workspace;

pub use compute::{
    find_target_thread, item_contexts, run_of, synthetic_item, Facts, ItemCtx, RunCtx, Sizer,
    SummarySizer,
};
#[cfg(any(feature = "unstable", feature = "cli"))]
pub use compute::compact_summary_rolled_back;
#[cfg(any(feature = "unstable", feature = "store"))]
pub use compute::coverage;
#[cfg(feature = "unstable")]
pub use compute::{Coverage, CoveredBy};
pub use history::{History, Window};
#[cfg(any(feature = "unstable", feature = "store"))]
pub use history::{PrefixRun, Tally};
pub use problems::is_test_command;
#[cfg(feature = "unstable")]
pub use problems::failed;
pub use value::{Type, Value};

use crate::state::{AnchorRole, HandoffChannel, ProviderThreadStatus, RequestKind, RunStatus};

/// Where a fact may be read: only where what it depends on is already known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Anywhere: it depends on the state alone.
    Thread,
    /// In `eligible` (about one run).
    Run,
    /// In `include`/`exclude` rules (about one item).
    Item,
    /// Anywhere but `eligible`: it depends on which runs are eligible.
    Eligibility,
    /// In `stale`, `strategy`, `delivery` and `pregrant`: it runs the summary rules.
    Summary,
    /// In `delivery` and `pregrant`: it depends on the strategy chosen.
    Strategy,
    /// In `pregrant`: it depends on the delivery chosen.
    Delivery,
}

impl Scope {
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Thread => "everywhere",
            Scope::Run => "in `eligible` rules",
            Scope::Item => "in `summary` include/exclude rules",
            Scope::Eligibility => "everywhere but `eligible` (it depends on which runs are eligible)",
            Scope::Summary => "in `stale`, `strategy`, `delivery` and `pregrant` rules (it runs the summary rules)",
            Scope::Strategy => "in `delivery` and `pregrant` rules",
            Scope::Delivery => "in `pregrant` rules",
        }
    }
}

macro_rules! facts {
    ($( $variant:ident => $name:literal, $ty:expr, $nullable:literal, $scope:ident, $doc:literal; )*) => {
        /// Every fact a policy can read.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Fact { $( $variant, )* }

        /// The static description of a fact.
        #[derive(Debug, Clone, Copy)]
        pub struct FactDef {
            pub fact: Fact,
            pub name: &'static str,
            pub ty: Type,
            pub nullable: bool,
            pub scope: Scope,
            pub doc: &'static str,
        }

        impl Fact {
            pub const ALL: &'static [FactDef] = &[
                $( FactDef { fact: Fact::$variant, name: $name, ty: $ty, nullable: $nullable, scope: Scope::$scope, doc: $doc }, )*
            ];
            pub fn name(self) -> &'static str {
                match self { $( Fact::$variant => $name, )* }
            }
        }
    };
}

const RUN_STATUSES: &[&str] = RunStatus::NAMES;
const PT_STATUSES: &[&str] = ProviderThreadStatus::NAMES;
const REQUEST_KINDS: &[&str] = RequestKind::NAMES;
const CHANNELS: &[&str] = HandoffChannel::NAMES;
const ANCHOR_ROLES: &[&str] = AnchorRole::NAMES;
pub const STRATEGIES: &[&str] = &[
    "no_handoff",
    "delta_existing",
    "full_existing",
    "full_new",
    "native_fork",
    "unsupported",
];
const ITEM_KINDS: &[&str] = crate::state::ITEM_KINDS;
const DELIVERY_MODES: &[&str] = &["off_band", "inline"];

facts! {
    ThreadId => "thread.id", Type::Str, false, Thread, "The app thread's id.";
    ThreadTitle => "thread.title", Type::Str, true, Thread, "The thread's title, if any.";
    ThreadRuns => "thread.runs", Type::Int, false, Thread, "Number of runs in the thread before the requested one.";
    ThreadEligibleRuns => "thread.eligible_runs", Type::Int, false, Eligibility, "Number of runs the `eligible` rule admits.";
    ThreadLastRun => "thread.last_run", Type::Int, false, Eligibility, "Ordinal of the newest eligible run (0 when none).";
    ThreadProviders => "thread.providers", Type::StrList, false, Eligibility, "Providers that ran eligible runs, in order of first use.";
    ThreadIsFork => "thread.is_fork", Type::Bool, false, Thread, "Whether the thread was forked from another (`thread.parent` is set).";
    ThreadHasCompactSummary => "thread.has_compact_summary", Type::Bool, false, Thread, "Whether the app keeps a compaction summary for the thread that covers no rolled-back run.";
    RequestProvider => "request.provider", Type::Str, false, Thread, "Provider of the run about to start (as written in the state file).";
    RequestModel => "request.model", Type::Str, true, Thread, "Model requested for the run.";
    RequestRuntimeMode => "request.runtime_mode", Type::Str, true, Thread, "Runtime mode requested for the run.";
    RequestCleanContext => "request.clean_context", Type::Bool, false, Thread, "Whether the user asked for a clean context.";
    RequestKind => "request.kind", Type::Enum(REQUEST_KINDS), false, Thread, "`dispatch`, `fork` (first run of a fork) or `merge_back`.";
    RequestMessageChars => "request.message_chars", Type::Int, false, Thread, "Characters in the user's message (0 when absent).";
    RequestRun => "request.run", Type::Int, false, Thread, "Ordinal the requested run will get.";
    TargetProvider => "target.provider", Type::Str, false, Thread, "The provider being entered (`--target` or `request.provider`).";
    TargetHasThread => "target.has_thread", Type::Bool, false, Thread, "Whether the target provider has a provider thread in this app thread (closed ones do not count).";
    TargetThreadId => "target.thread.id", Type::Str, true, Thread, "The target provider thread's id (the newest one used).";
    TargetThreadModel => "target.thread.model", Type::Str, true, Thread, "Model of the target provider thread.";
    TargetThreadRuntimeMode => "target.thread.runtime_mode", Type::Str, true, Thread, "Runtime mode of the target provider thread.";
    TargetThreadStatus => "target.thread.status", Type::Enum(PT_STATUSES), true, Thread, "Status of the target provider thread.";
    TargetThreadResumeFailed => "target.thread.resume_failed", Type::Bool, true, Thread, "Whether resuming the target provider thread failed.";
    TargetThreadFirstRun => "target.thread.first_run", Type::Int, true, Thread, "Ordinal of the first run on the target provider thread, whatever its status (null when there is no thread or no run used it); `request.run - target.thread.first_run` is the thread's age in runs.";
    TargetIdleSeconds => "target.idle_seconds", Type::Int, true, Thread, "Seconds from the end of the target thread's last run (`runs[].ended_at`) to `request.at` (null when either is unknown or they are out of order).";
    ThreadAgeSeconds => "thread.age_seconds", Type::Int, true, Thread, "Seconds from the start of the thread's first run (`runs[].started_at`) to `request.at` (null when either is unknown or they are out of order).";
    WorkspaceCwdChanged => "workspace.cwd_changed", Type::Bool, true, Thread, "The request's working directory differs from the one the target thread's last run ran in (null when either is unknown).";
    WorkspaceBranchChanged => "workspace.branch_changed", Type::Bool, true, Thread, "The request's git branch differs from the one the target thread's last run ran on (null when either is unknown or HEAD is detached).";
    WorkspaceHeadMoved => "workspace.head_moved", Type::Bool, true, Thread, "The request's git HEAD differs from the one at the end of the target thread's last run (null when either is unknown).";
    WorkspaceCommitsSinceTarget => "workspace.commits_since_target", Type::Int, true, Thread, "Commits between the HEAD at the target thread's last run and the request's HEAD (0 when HEAD did not move; null when unknown).";
    WorkspaceFilesChangedOutside => "workspace.files_changed_outside", Type::StrList, true, Thread, "Files changed between the target thread's last HEAD and now, or dirty now, that no run of the thread since then changed; newest first, at most 1,000 (null when unknown).";
    WorkspaceFilesChangedOutsideCount => "workspace.files_changed_outside_count", Type::Int, true, Thread, "How many files `workspace.files_changed_outside` holds, with those past its bound (null when unknown).";
    TargetLastSeen => "target.last_seen", Type::Int, false, Eligibility, "Highest run the target thread covers, natively or through a live handoff (0 when none).";
    TargetRunsSinceLastSeen => "target.runs_since_last_seen", Type::Int, false, Eligibility, "Eligible runs after `target.last_seen`.";
    TargetOffProviderRuns => "target.off_provider_runs", Type::Int, false, Eligibility, "Eligible runs on other providers since the target thread's last native run (0 when the target has no thread).";
    TargetNativeRuns => "target.native_runs", Type::Int, false, Eligibility, "Eligible runs the target thread ran itself.";
    TargetChainedHandoffs => "target.chained_handoffs", Type::Int, false, Eligibility, "Live handoffs into the target thread since its last native run that took no handoff (the delta chain).";
    TargetCapsResume => "target.caps.resume", Type::Bool, false, Thread, "The target provider can resume a thread.";
    TargetCapsNativeFork => "target.caps.native_fork", Type::Bool, false, Thread, "The target provider can fork a thread natively.";
    TargetCapsRollback => "target.caps.rollback", Type::Bool, false, Thread, "The target provider can roll a thread back.";
    TargetCapsAcceptsHandoff => "target.caps.accepts_handoff", Type::Bool, false, Thread, "The target provider can take handoff context.";
    TargetCapsHandoffChannel => "target.caps.handoff_channel", Type::Enum(CHANNELS), false, Thread, "Where handoff context goes: `system`, `developer`, `user` or `preamble`.";
    TargetCapsFileRead => "target.caps.file_read", Type::Bool, false, Thread, "The target provider's agent can read a file (needed for off-band delivery).";
    TargetCapsSummarize => "target.caps.summarize", Type::Bool, false, Thread, "The target provider can summarise its own session.";
    TargetCapsMaxInputChars => "target.caps.max_input_chars_per_turn", Type::Int, false, Thread, "Most characters the target provider takes in one turn.";
    SummaryDeltaChars => "summary.delta_chars", Type::Int, false, Summary, "Characters of the summary of the runs after `target.last_seen` (computed only when read).";
    SummaryFullChars => "summary.full_chars", Type::Int, false, Summary, "Characters of the summary of every eligible run (computed only when read).";
    CheckpointLatest => "checkpoint.latest", Type::Int, false, Thread, "Run of the newest checkpoint of a live run (0 when none).";
    CheckpointFilesChanged => "checkpoint.files_changed", Type::Int, false, Thread, "Files changed at the newest checkpoint (0 when none).";
    ForkAnchorRole => "fork.anchor_role", Type::Enum(ANCHOR_ROLES), true, Thread, "Role of the fork anchor message (`user` or `assistant`), for `kind: fork`.";
    ForkSourceRun => "fork.source_run", Type::Int, false, Thread, "The run the thread was forked at (0 when not a fork).";
    ForkSourceProvider => "fork.source_provider", Type::Str, true, Thread, "Provider of the fork's source run.";
    ForkNativePossible => "fork.native_possible", Type::Bool, false, Thread, "The target is the source run's provider, can fork natively, and the source provider thread is healthy.";
    RunOrdinal => "run.ordinal", Type::Int, false, Run, "The run's ordinal.";
    RunProvider => "run.provider", Type::Str, false, Run, "The run's provider.";
    RunStatus => "run.status", Type::Enum(RUN_STATUSES), false, Run, "`completed`, `failed`, `interrupted`, `running` or `rolled_back`.";
    RunItems => "run.items", Type::Int, false, Run, "Number of items in the run.";
    RunHasHandoff => "run.has_handoff", Type::Bool, false, Run, "Whether the run consumed a handoff.";
    ItemKind => "item.kind", Type::Enum(ITEM_KINDS), false, Item, "The item's kind.";
    ItemId => "item.id", Type::Str, false, Item, "The item's id (`r<run>.<n>` unless the state names it).";
    ItemRun => "item.run", Type::Int, false, Item, "Ordinal of the item's run.";
    ItemSuperseded => "item.superseded", Type::Bool, false, Item, "A later command ran the same command line, or a later tool call re-ran the same tool on the same input.";
    ItemLatest => "item.latest", Type::Bool, false, Item, "The item is the newest of its kind in the covered runs.";
    ItemRecency => "item.recency", Type::Int, false, Item, "0 for the newest item of its kind in the covered runs, 1 for the one before, and so on.";
    ItemChars => "item.chars", Type::Int, false, Item, "Characters the item carries (text, output, diff).";
    ItemOutputChars => "item.output_chars", Type::Int, true, Item, "Characters of a command's or tool call's output (0 when it has none; null for other items).";
    ItemDiffLines => "item.diff_lines", Type::Int, true, Item, "Lines in a file change's diff.";
    ItemResolved => "item.resolved", Type::Bool, true, Item, "Whether a problem item was resolved: an approval decided, a question answered, a failing command or tool call run again successfully, a failed edit's files changed later, or a finished plan after it (null for items that are no problem).";
    ItemOpen => "item.open", Type::Bool, false, Item, "The item is an open problem: an undecided approval, an unanswered question, or a failing command or tool call that no later item resolved or re-ran.";
    ItemIsTest => "item.is_test", Type::Bool, false, Item, "A command whose command line runs tests (a word such as `test`, `pytest`, `jest`, `vitest`).";
    ItemAnswered => "item.answered", Type::Bool, true, Item, "Whether a question was answered.";
    ItemExitCode => "item.exit_code", Type::Int, true, Item, "A command's exit code.";
    ItemFailed => "item.failed", Type::Bool, false, Item, "A failing command or tool call ([Open problems](#open-problems): a non-zero exit code, except a search that found nothing or a command stopped by a signal; a failed tool call, except a lookup).";
    ItemTool => "item.tool", Type::Str, true, Item, "A tool call's tool name.";
    ItemPath => "item.path", Type::Str, true, Item, "A file change's path.";
    ItemAgent => "item.agent", Type::Str, true, Item, "A subagent result's agent name.";
    DecisionStrategy => "decision.strategy", Type::Enum(STRATEGIES), false, Strategy, "The strategy the ladder chose.";
    DeliveryOffBand => "delivery.off_band", Type::Bool, false, Delivery, "Delivery chose the off-band document.";
    DeliveryInline => "delivery.inline", Type::Bool, false, Delivery, "Delivery chose inline context.";
    DeliveryMode => "delivery.mode", Type::Enum(DELIVERY_MODES), true, Delivery, "`off_band` or `inline` (null when there is no handoff).";
}

impl Fact {
    /// Look a fact up by its dotted name.
    pub fn by_name(name: &str) -> Option<&'static FactDef> {
        Fact::ALL.iter().find(|d| d.name == name)
    }

    pub fn def(self) -> &'static FactDef {
        // The macro lists ALL in declaration order, so the discriminant is the index.
        #[allow(clippy::indexing_slicing)] // ALL has one entry per variant: always in bounds.
        &Fact::ALL[self as usize]
    }
}

/// The prefix of the provider capability facts; a policy's `providers` block sets the facts
/// under it by their last part (`file_read` sets `target.caps.file_read`).
pub const CAP_PREFIX: &str = "target.caps.";

impl FactDef {
    /// The key a `providers` block sets this fact with (`file_read`), for the provider
    /// capability facts (`target.caps.*`); `None` for every other fact.
    pub fn cap_key(&self) -> Option<&'static str> {
        self.name.strip_prefix(CAP_PREFIX)
    }
}

impl Fact {
    /// The provider capability facts, in catalogue order: the keys of a policy's `providers`
    /// block. The catalogue is the one source of these keys, their types and their docs for
    /// the checker, the docs and the editor.
    pub fn caps() -> impl Iterator<Item = &'static FactDef> {
        Fact::ALL.iter().filter(|d| d.cap_key().is_some())
    }

    /// The capability fact a `providers` block key names (`file_read`).
    pub fn by_cap_key(key: &str) -> Option<&'static FactDef> {
        Fact::caps().find(|d| d.cap_key() == Some(key))
    }
}

/// Grant targets a `pregrant` rule can name.
pub const GRANT_TARGETS: &[&str] = &["handoff.document"];

#[cfg(test)]
mod doc_tests;
#[cfg(all(test, feature = "store"))]
mod seed_built_tests;
