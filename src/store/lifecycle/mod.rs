//! Lifecycle operations on stored threads (DESIGN §8). Each is one `BEGIN IMMEDIATE`
//! transaction that loads the thread inside the transaction, so two callers racing on the
//! same thread serialize: the second sees everything the first recorded.

mod complete;
mod dispatch;
mod fork;
mod merge_back;
mod rebind;
mod recheck;
mod regenerate;
mod rollback;
mod rollback_advice;

use super::grants::SqlGrants;
use super::io::{Cx, HandoffRow};
use super::replay::DecisionInput;
use super::{sql_err, StoreError, StoreErrorKind};
use crate::decision::Decision;
use crate::engine::Engine;
use crate::eval::DecisionContext;
use crate::pipeline::Outcome;
use crate::pipeline::Setup;
use crate::state::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[cfg(feature = "postgres")]
pub(crate) use complete::generated_place;
pub use complete::{complete_run, complete_run_with};
#[cfg(feature = "postgres")]
pub(crate) use dispatch::policy_reads_old_items;
pub use dispatch::{dispatch, dispatch_with_writer};
pub use fork::{fork, ForkRefusal};
pub use merge_back::{merge_back, merge_back_with_writer};
pub use regenerate::{regenerate, regenerate_with_writer, RegenerateRefusal};
pub use rollback::rollback;
pub use rollback_advice::advise_rollback;

/// What `dispatch` needs besides the stored thread and the engine (whose policy, compiled
/// templates and off-band root every operation uses): what is particular to this run.
#[derive(Debug, Clone, Default)]
pub struct DispatchRequest {
    /// The stored thread's id.
    pub thread: String,
    /// The provider the run starts on (`request.provider`), e.g. `"codex"`.
    pub target: String,
    /// The user's message for the run (`request.message`); never cut from the handoff.
    pub message: Option<String>,
    /// The requested model (`request.model`); `None` when the app does not say.
    pub model: Option<String>,
    /// The requested runtime mode (`request.runtime_mode`).
    pub runtime_mode: Option<String>,
    /// The user asked for a clean context (`request.clean_context`, `stale clean_context`).
    pub clean_context: bool,
    /// When the run is requested (`request.at`, RFC 3339); recorded as the run's
    /// `started_at`. The store never reads the clock: the caller (the CLI, the service) sets
    /// it.
    pub at: Option<String>,
    /// The workspace the run starts in (`request.workspace`); its git state and history since
    /// the target's last run are read from the repository when absent
    /// ([`crate::workspace::enrich`]).
    pub workspace: Option<crate::state::Workspace>,
}

/// How a run ended, besides its items and status (`complete_run_with`).
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    /// When it ended (`runs[].ended_at`, RFC 3339).
    pub ended_at: Option<String>,
    /// The workspace it ended in (`runs[].workspace`).
    pub workspace: Option<crate::state::Workspace>,
}

/// Options of the operations that make a handoff without starting a run of their own
/// (`regenerate`, `merge_back`): what is particular to the call (the engine brings the
/// policy, the templates and the off-band root).
#[derive(Debug, Clone, Default)]
pub struct HandoffOptions {
    /// The user's message to carry (`request.message`); when `None`, `regenerate` keeps the
    /// stored request's message and `merge_back` carries none.
    pub message: Option<String>,
}

/// A handoff as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HandoffRecord {
    /// The handoff id (`"H3"`).
    pub id: String,
    /// The off-band document, when delivery is off-band.
    pub document_path: Option<PathBuf>,
    /// The first-turn prompt.
    pub inline: String,
    /// Its status as recorded (`ready` for a new handoff).
    pub status: HandoffStatus,
    /// The runs it covers.
    pub covered: RunRange,
    /// The thread whose runs `covered` numbers, when it is not the thread holding the
    /// handoff: the fork, for a merge-back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered_thread: Option<String>,
    /// How it was made (the decision's `handoff_strategy`).
    pub strategy: HandoffStrategy,
    /// The transfer it belongs to (`"T2"`), when there is one.
    pub transfer: Option<String>,
    /// The handoff it replaced (a regenerated handoff, a repeated merge-back); `None` otherwise.
    pub supersedes: Option<String>,
}

/// The outcome of a dispatch (and of `regenerate` / `merge_back`). It serializes as
/// [`super::DispatchReport`], the one JSON shape of `baton dispatch --json` and the service.
#[derive(Debug, Clone, Serialize)]
#[serde(into = "super::report::DispatchReport")]
pub struct Dispatched {
    /// The decision, as recorded in the decision log.
    pub decision: Decision,
    /// The run started (for `merge_back`: the parent's next run, which the handoff is for).
    pub run: u32,
    /// The provider thread the run uses (its new id when one was created); none when the
    /// decision is `unsupported` and no run was started.
    pub provider_thread: Option<String>,
    /// The handoff the run takes; `None` when the decision makes none.
    pub handoff: Option<HandoffRecord>,
    /// Whether a run was recorded (false for `unsupported`, `regenerate` and `merge_back`).
    pub started: bool,
    /// A fork's merge-back this run takes as well as a handoff of its own (`handoff`); when
    /// the run makes no handoff of its own, the merge-back is `handoff` and this is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_back: Option<HandoffRecord>,
    /// For a fork's first run that forks natively (`provider_thread.action` `fork_native`):
    /// where the app calls the provider's fork API. Null otherwise.
    pub fork_point: Option<ForkPoint>,
    /// The run's one first-turn prompt, what the app sends as the run's first message: the
    /// handoff's prompt; with a merge-back beside a handoff of its own, the merge-back's
    /// prompt then the handoff's, the run's message once at the end; with no handoff, the
    /// run's message (none when there is none). For `merge_back` and `regenerate`, the
    /// handoff's prompt.
    pub prompt: Option<String>,
}

/// Where a native fork forks the parent's provider thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ForkPoint {
    /// The parent thread the fork was made from.
    pub parent_thread: String,
    /// The parent's provider thread to fork (the decision's `provider_thread.id`).
    pub provider_thread: String,
    /// The parent's run the fork was made at: the fork keeps runs 1 to `run`.
    pub run: u32,
    /// The provider thread's turn to fork at: how many of its turns (its live runs up to
    /// `run`) the fork keeps. Fork after this turn; the provider thread's later turns are not
    /// the fork's.
    pub turn: u32,
}

/// The outcome of `complete_run`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Completed {
    /// The thread id.
    pub thread: String,
    /// The completed run's ordinal.
    pub run: u32,
    /// The status the run ended with (`completed`, `failed` or `interrupted`).
    pub status: RunStatus,
    /// Items appended.
    pub items: usize,
    /// The handoff the run consumed (`runs[].handoff`); its transfer is now `consumed`. The
    /// handoff's own status stays `ready` (DESIGN §3 vocabulary).
    pub handoff_consumed: Option<String>,
}

/// A provider thread whose status a rollback changed, and what the app must do with it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProviderThreadChange {
    /// The provider thread id.
    pub id: String,
    /// Its provider.
    pub provider: String,
    /// `rolled_back` when the provider can roll back (`caps.rollback`), else `divergent`.
    pub status: ProviderThreadStatus,
    /// The rolled-back runs this provider thread ran: its turns that were undone.
    pub runs_undone: Vec<u32>,
    /// How many of its turns stay (its live runs up to the rollback point): to roll the
    /// provider thread back, keep this many turns.
    pub turns_kept: u32,
    /// What the app does with the provider thread (see [`AppAction`]).
    pub app_action: AppAction,
    /// What the next run on this provider does, as the policy decides it on the rolled-back
    /// thread (a `baton dispatch` with no model, runtime mode or clean-context request). Null
    /// when the rollback was made without a policy (the library's [`rollback`]; see
    /// [`advise_rollback`]).
    pub next_run: Option<NextRun>,
}

/// What the app must do with a provider thread after a rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AppAction {
    /// Roll the provider thread back with the provider's own rollback, keeping `turns_kept`
    /// turns: the next run on the provider resumes it.
    RollBack,
    /// Stop using the provider thread: it holds undone turns, and the next run on the
    /// provider does not resume it (it starts a new thread).
    Discard,
    /// The policy resumes it as it is, undone turns included (a policy without a
    /// `diverged` signal): nothing to do, but its provider still remembers the undone turns.
    Keep,
}

impl AppAction {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AppAction::RollBack => "roll_back",
            AppAction::Discard => "discard",
            AppAction::Keep => "keep",
        }
    }
}

/// The next run on a provider, as decided right after a rollback.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NextRun {
    /// The run's ordinal.
    pub run: u32,
    /// The strategy the policy decides for it.
    pub strategy: crate::policy::Strategy,
    /// The provider thread it resumes, creates or forks.
    pub provider_thread: crate::decision::ProviderThreadAction,
    /// The staleness signals that held.
    pub stale: Vec<String>,
    /// The deciding rule's reason.
    pub because: Option<String>,
}

/// The outcome of `rollback`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RollbackReport {
    /// The thread id.
    pub thread: String,
    /// The run rolled back to: it and the runs before it stay.
    pub to: u32,
    /// Ordinals of the runs now `rolled_back` (the runs after `to`).
    pub runs_rolled_back: Vec<u32>,
    /// Ids of the handoffs now `superseded` because they covered a rolled-back run.
    pub handoffs_superseded: Vec<String>,
    /// Provider threads that had seen a rolled-back run, with their new status.
    pub provider_threads: Vec<ProviderThreadChange>,
    /// The thread's compaction summary was dropped: it covered a rolled-back run (or did not
    /// say which runs it covers), so it would describe undone work.
    pub compact_summary_dropped: bool,
}

/// The outcome of `fork`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ForkReport {
    /// The thread forked from.
    pub parent: String,
    /// The new fork thread's id.
    pub child: String,
    /// The fork point: the parent's run the fork was taken at.
    pub at: u32,
    /// The pending fork transfer (in the child), resolved at the child's first dispatch.
    pub transfer: String,
}

fn commit(
    tx: rusqlite::Transaction<'_>,
    cx_path: &str,
    busy: std::time::Duration,
    during: &str,
) -> Result<(), StoreError> {
    tx.commit().map_err(|e| sql_err(cx_path, busy, during, e))
}

/// `H<n>`-style ids: the smallest free `<prefix><n>` from `count + 1`.
fn next_id(prefix: &str, count: usize, taken: impl Fn(&str) -> bool) -> String {
    (count.saturating_add(1)..)
        .map(|n| format!("{prefix}{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| format!("{prefix}{}", count.saturating_add(1)))
}

fn next_transfer_id(state: &State) -> String {
    next_id("T", state.transfers.len(), |id| {
        state.transfers.iter().any(|t| t.id == id)
    })
}

/// Provider threads of the runs in `covered`, in order of first appearance.
fn from_provider_threads(state: &State, covered: &RunRange) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &state.runs {
        if r.ordinal < covered.from || r.ordinal > covered.to {
            continue;
        }
        if let Some(pt) = &r.provider_thread {
            if !out.contains(pt) {
                out.push(pt.clone());
            }
        }
    }
    out
}

fn pipeline_err(path: &str, thread: &str) -> impl Fn(crate::pipeline::PipelineError) -> StoreError {
    let path = path.to_string();
    let thread = thread.to_string();
    move |source| {
        StoreError::new(
            path.clone(),
            StoreErrorKind::Pipeline {
                thread: thread.clone(),
                source: Box::new(source),
            },
        )
    }
}

/// The setup of a decision for `target` in `context`: the engine's off-band root (resolved
/// once, when the engine was built) and compiled templates.
fn setup(engine: &Engine, target: &str, context: &DecisionContext) -> Setup {
    engine.setup_in(Some(target), context)
}

/// Decide (and render) for `target` on `state` in `context`, through the one path
/// ([`crate::pipeline::plan`], [`crate::pipeline::finish`] with the policy's summarizer).
/// Returns the outcome and what it was decided from (a [`DecisionInput`] as JSON) for the
/// decision log.
fn decide(
    engine: &Engine,
    state: &State,
    target: &str,
    path: &str,
    context: &DecisionContext,
) -> Result<(Outcome, serde_json::Value), StoreError> {
    let err = pipeline_err(path, &state.thread.id);
    let plan = crate::pipeline::plan(engine.policy(), state, &setup(engine, target, context))
        .map_err(|e| err(e.into()))?;
    let input = logged_input(engine, state, target, context, path)?;
    let outcome = crate::pipeline::finish(plan, &crate::deliver::CommandRunner).map_err(err)?;
    Ok((outcome, input))
}

/// What a decision was made from, as JSON for the decision log.
fn logged_input(
    engine: &Engine,
    state: &State,
    target: &str,
    context: &DecisionContext,
    path: &str,
) -> Result<serde_json::Value, StoreError> {
    let input = DecisionInput::new(state, target, engine.document_root(), context);
    serde_json::to_value(&input).map_err(|e| {
        StoreError::new(
            path.to_string(),
            StoreErrorKind::Corrupt {
                what: "decision input".into(),
                why: e.to_string(),
            },
        )
    })
}

/// Refuse an operation that needs a handoff when the decision makes none.
fn require_handoff(
    outcome: &Outcome,
    path: &str,
    thread: &str,
    why: &str,
) -> Result<(), StoreError> {
    if outcome.decision.needs_handoff() {
        return Ok(());
    }
    Err(StoreError::new(
        path.to_string(),
        StoreErrorKind::NoHandoff {
            thread: thread.into(),
            target: outcome.decision.target.clone(),
            strategy: outcome.decision.strategy.as_str().into(),
            why: why.into(),
        },
    ))
}

/// Refuse an operation on a thread whose last run is still running.
fn refuse_running(state: &State, path: &str) -> Result<(), StoreError> {
    match state.runs.last().filter(|r| r.status == RunStatus::Running) {
        Some(last) => Err(StoreError::new(
            path.to_string(),
            StoreErrorKind::RunInProgress {
                thread: state.thread.id.clone(),
                run: last.ordinal,
            },
        )),
        None => Ok(()),
    }
}

/// Validate a thread about to be stored.
pub(super) fn validated(state: &State, path: &str) -> Result<(), StoreError> {
    crate::state::validate(state, &format!("{path}#{}", state.thread.id)).map_err(|source| {
        StoreError::new(
            path.to_string(),
            StoreErrorKind::InvalidState {
                thread: state.thread.id.clone(),
                source: Box::new(source),
            },
        )
    })
}

/// The delivery stage, the single place a rendered handoff is delivered: the off-band
/// document is written and its pre-grant inserted into `grants` inside the caller's
/// transaction (a failed write falls back to inline, and the decision says so). Returns the
/// document's path; either way the handoff is `ready` (the document is in place, or the
/// prompt carries it inline).
fn deliver_stage(
    cx: &Cx<'_>,
    outcome: &mut Outcome,
    thread: &str,
    handoff_dir: Option<&Path>,
) -> Option<PathBuf> {
    let offband = crate::deliver::OffbandStore::new(handoff_dir.map(Path::to_path_buf));
    let mut grants = SqlGrants {
        conn: cx.conn,
        path: cx.path.clone(),
    };
    crate::deliver::deliver(outcome, &offband, thread, &mut grants).document_path
}

/// Where a new handoff row goes and what it links to.
struct NewHandoff {
    /// The thread that holds the row (and the document and the grant).
    thread: String,
    target_run: Option<u32>,
    to_provider_thread: Option<String>,
    transfer: Option<String>,
    supersedes: Option<String>,
    /// The thread whose runs `covered` numbers, when it is not `thread` (merge-back).
    covered_thread: Option<String>,
    from_provider_threads: Vec<String>,
    /// The handoff's `summary`, which later handoffs covering the run that consumed it carry
    /// (a merge-back's content is found in no run of the thread).
    summary: Option<String>,
}

impl NewHandoff {
    /// A handoff of `state` into one of its own runs.
    fn own(state: &State, outcome: &Outcome, target_run: u32, to: Option<String>) -> NewHandoff {
        let from = outcome
            .decision
            .covered_runs
            .as_ref()
            .map(|c| from_provider_threads(state, c))
            .unwrap_or_default();
        NewHandoff {
            thread: state.thread.id.clone(),
            target_run: Some(target_run),
            to_provider_thread: to,
            transfer: None,
            supersedes: None,
            covered_thread: None,
            from_provider_threads: from,
            summary: None,
        }
    }
}

/// Record the handoff of `outcome` (delivering it first). Returns the record.
fn record_handoff(
    cx: &Cx<'_>,
    outcome: &mut Outcome,
    handoff_dir: Option<&Path>,
    new: NewHandoff,
) -> Result<Option<HandoffRecord>, StoreError> {
    let (Some(hid), Some(covered), Some(strategy)) = (
        outcome.decision.handoff_id.clone(),
        outcome.decision.covered_runs.clone(),
        outcome.decision.handoff_strategy,
    ) else {
        return Ok(None);
    };
    if outcome.rendered.is_none() {
        return Ok(None);
    }
    let document_path = deliver_stage(cx, outcome, &new.thread, handoff_dir);
    let status = HandoffStatus::Ready;
    let Some(rendered) = outcome.rendered.as_ref() else {
        return Ok(None);
    };
    let handoff = Handoff {
        id: hid.clone(),
        transfer: new.transfer.clone(),
        target_run: new.target_run,
        from_provider_threads: new.from_provider_threads,
        to_provider_thread: new.to_provider_thread,
        covered: covered.clone(),
        covered_thread: new.covered_thread.clone(),
        strategy,
        status,
        created_by: Some(rendered.provenance.created_by.clone()),
        summary: new.summary,
        supersedes: new.supersedes.clone(),
    };
    let seq = cx.next_seq("handoffs", &new.thread)?;
    cx.insert_handoff(
        &new.thread,
        seq,
        &HandoffRow {
            handoff,
            document_path: document_path.as_ref().map(|p| p.display().to_string()),
            document: Some(rendered.document.clone()),
            inline: Some(rendered.inline.clone()),
        },
    )?;
    Ok(Some(HandoffRecord {
        id: hid,
        document_path,
        inline: rendered.inline.clone(),
        status,
        covered,
        covered_thread: new.covered_thread,
        strategy,
        transfer: new.transfer,
        supersedes: new.supersedes,
    }))
}

/// The fork anchor of a fork at `run`: its last assistant message, else its last user message.
fn fork_anchor(run: &Run) -> Option<ForkAnchor> {
    let last = |want: &str| {
        run.items
            .iter()
            .rev()
            .find(|i| i.kind() == want)
            .map(|i| i.primary_text().to_string())
    };
    last("assistant_message")
        .map(|text| ForkAnchor {
            role: AnchorRole::Assistant,
            text,
        })
        .or_else(|| {
            last("user_message").map(|text| ForkAnchor {
                role: AnchorRole::User,
                text,
            })
        })
}

/// The ordinal of the thread's next run.
fn next_run(state: &State) -> u32 {
    // Runs are contiguous: the last one's ordinal is their number (a window's too).
    state
        .runs
        .last()
        .map(|r| r.ordinal)
        .unwrap_or(0)
        .saturating_add(1)
}

/// The merge-back waiting in `state` for its next run `run`: its transfer and handoff ids.
fn pending_merge_back(
    state: &State,
    path: &str,
    run: u32,
) -> Result<Option<(String, String)>, StoreError> {
    let thread = state.thread.id.as_str();
    let Some(t) = state.transfers.iter().find(|t| {
        t.kind == TransferType::MergeBack
            && t.status == TransferStatus::Pending
            && t.target_thread.as_deref() == Some(thread)
    }) else {
        return Ok(None);
    };
    let h = t
        .handoff
        .as_deref()
        .and_then(|hid| state.handoffs.iter().find(|h| h.id == hid))
        .filter(|h| h.status == HandoffStatus::Ready && h.target_run == Some(run));
    match h {
        Some(h) => Ok(Some((t.id.clone(), h.id.clone()))),
        None => Err(StoreError::new(
            path.to_string(),
            StoreErrorKind::BadMergeBack {
                thread: thread.to_string(),
                transfer: t.id.clone(),
                run,
            },
        )),
    }
}
