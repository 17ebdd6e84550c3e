//! Lifecycle operations on stored threads (DESIGN §8). Each is one `BEGIN IMMEDIATE`
//! transaction that loads the thread inside the transaction, so two callers racing on the
//! same thread serialize: the second sees everything the first recorded.

use super::grants::SqlGrants;
use super::io::{Cx, HandoffRow};
use super::replay::DecisionInput;
use super::{fault, sql_err, Store, StoreError};
use crate::decision::{Decision, ThreadAction};
use crate::eval::{DecisionContext, EvalOptions, RecordIn};
use crate::pipeline::Outcome;
use crate::policy::{Policy, Strategy};
use crate::render::RenderOptions;
use crate::select::PolicySizer;
use crate::state::*;
use rusqlite::params;
use serde::Serialize;
use std::path::PathBuf;

/// What `dispatch` needs besides the stored thread.
#[derive(Debug, Clone, Default)]
pub struct DispatchRequest {
    pub thread: String,
    pub target: String,
    pub message: Option<String>,
    pub model: Option<String>,
    pub runtime_mode: Option<String>,
    pub clean_context: bool,
    /// Root of the off-band document directory (default: `<tmp>/baton-<uid>`).
    pub handoff_dir: Option<PathBuf>,
    pub templates_dir: Option<PathBuf>,
    /// Compiled templates to render with (an [`crate::Engine`]'s, see
    /// [`crate::Engine::templates`]); when set, `templates_dir` is not read.
    pub templates: Option<crate::render::TemplateSet>,
}

/// Options of the operations that make a handoff without starting a run of their own
/// (`regenerate`, `merge_back`).
#[derive(Debug, Clone, Default)]
pub struct HandoffOptions {
    pub message: Option<String>,
    pub handoff_dir: Option<PathBuf>,
    pub templates_dir: Option<PathBuf>,
    /// Compiled templates to render with; when set, `templates_dir` is not read.
    pub templates: Option<crate::render::TemplateSet>,
}

/// A handoff as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HandoffRecord {
    pub id: String,
    /// The off-band document, when delivery is off-band.
    pub document_path: Option<PathBuf>,
    /// The first-turn prompt.
    pub inline: String,
    pub status: HandoffStatus,
    pub covered: RunRange,
    /// The thread whose runs `covered` numbers, when it is not the thread holding the
    /// handoff: the fork, for a merge-back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered_thread: Option<String>,
    pub strategy: HandoffStrategy,
    pub transfer: Option<String>,
    pub supersedes: Option<String>,
}

/// The outcome of a dispatch (and of `regenerate` / `merge_back`).
#[derive(Debug, Clone, Serialize)]
pub struct Dispatched {
    pub decision: Decision,
    /// The run started (for `merge_back`: the parent's next run, which the handoff is for).
    pub run: u32,
    /// The provider thread the run uses (its new id when one was created); none when the
    /// decision is `unsupported` and no run was started.
    pub provider_thread: Option<String>,
    pub handoff: Option<HandoffRecord>,
    /// Whether a run was recorded (false for `unsupported`, `regenerate` and `merge_back`).
    pub started: bool,
    /// A fork's merge-back this run takes as well as a handoff of its own (`handoff`); when
    /// the run makes no handoff of its own, the merge-back is `handoff` and this is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_back: Option<HandoffRecord>,
}

/// The outcome of `complete_run`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completed {
    pub thread: String,
    pub run: u32,
    pub status: RunStatus,
    /// Items appended.
    pub items: usize,
    /// The handoff the run consumed (`runs[].handoff`); its transfer is now `consumed`. The
    /// handoff's own status stays `ready` (DESIGN §3 vocabulary).
    pub handoff_consumed: Option<String>,
}

/// A provider thread whose status a rollback changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderThreadChange {
    pub id: String,
    pub provider: String,
    pub status: ProviderThreadStatus,
}

/// The outcome of `rollback`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RollbackReport {
    pub thread: String,
    pub to: u32,
    pub runs_rolled_back: Vec<u32>,
    pub handoffs_superseded: Vec<String>,
    pub provider_threads: Vec<ProviderThreadChange>,
    /// The thread's compaction summary was dropped: it covered a rolled-back run (or did not
    /// say which runs it covers), so it would describe undone work.
    pub compact_summary_dropped: bool,
}

/// The outcome of `fork`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForkReport {
    pub parent: String,
    pub child: String,
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
    (count + 1..)
        .map(|n| format!("{prefix}{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| format!("{prefix}{}", count + 1))
}

fn next_transfer_id(state: &State) -> String {
    next_id("T", state.transfers.len(), |id| {
        state.transfers.iter().any(|t| t.id == id)
    })
}

/// The id of a new provider thread of `provider`: a letter per provider (the provider's own
/// earlier threads' letter, else the first letter of its name no other provider uses: codex
/// `C`, then claude `L`) and the next free number: `C1`, `L1`, `C2`, ...
fn new_provider_thread_id(state: &State, provider: &str) -> String {
    let prefix_of = |id: &str| -> Option<String> {
        let letters: String = id.chars().take_while(|c| c.is_ascii_uppercase()).collect();
        let rest = &id[letters.len()..];
        (!letters.is_empty() && !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()))
            .then_some(letters)
    };
    let own = state
        .provider_threads
        .iter()
        .filter(|p| p.provider == provider)
        .find_map(|p| prefix_of(&p.id));
    let others: Vec<String> = state
        .provider_threads
        .iter()
        .filter(|p| p.provider != provider)
        .filter_map(|p| prefix_of(&p.id))
        .collect();
    let prefix = own.unwrap_or_else(|| {
        provider
            .chars()
            .filter(|c| c.is_ascii_alphabetic())
            .map(|c| c.to_ascii_uppercase().to_string())
            .find(|l| !others.contains(l))
            .unwrap_or_else(|| provider.to_ascii_uppercase())
    });
    let count = state
        .provider_threads
        .iter()
        .filter(|p| prefix_of(&p.id).as_deref() == Some(prefix.as_str()))
        .count();
    next_id(&prefix, count, |id| {
        state.provider_threads.iter().any(|p| p.id == id)
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
    move |source| StoreError::Pipeline {
        path: path.clone(),
        thread: thread.clone(),
        source: Box::new(source),
    }
}

/// Where the documents of an operation go and which templates render them.
#[derive(Clone, Copy)]
struct Dirs<'a> {
    handoff: Option<&'a PathBuf>,
    templates: Option<&'a PathBuf>,
    compiled: Option<&'a crate::render::TemplateSet>,
}

impl HandoffOptions {
    fn dirs(&self) -> Dirs<'_> {
        Dirs {
            handoff: self.handoff_dir.as_ref(),
            templates: self.templates_dir.as_ref(),
            compiled: self.templates.as_ref(),
        }
    }
}

impl DispatchRequest {
    fn dirs(&self) -> Dirs<'_> {
        Dirs {
            handoff: self.handoff_dir.as_ref(),
            templates: self.templates_dir.as_ref(),
            compiled: self.templates.as_ref(),
        }
    }
}

/// The pipeline's options for a decision for `target`.
fn options(target: &str, dirs: Dirs<'_>) -> (EvalOptions, RenderOptions) {
    let eval = EvalOptions {
        target: Some(target.to_string()),
        document_root: dirs.handoff.cloned(),
    };
    let render = RenderOptions {
        templates: dirs.compiled.cloned(),
        templates_dir: dirs.templates.cloned(),
        document_root: dirs.handoff.cloned(),
        ..Default::default()
    };
    (eval, render)
}

/// Decide (and render) for `target` on `state` in `context`. Returns the outcome and what
/// it was decided from (a [`DecisionInput`] as JSON) for the decision log.
fn decide(
    policy: &Policy,
    state: &State,
    target: &str,
    dirs: Dirs<'_>,
    path: &str,
    context: &DecisionContext,
) -> Result<(Outcome, serde_json::Value), StoreError> {
    let (eval, render) = options(target, dirs);
    let err = pipeline_err(path, &state.thread.id);
    let sizer = PolicySizer { policy };
    let (decision, facts) = crate::eval::evaluate_in(policy, state, &eval, context, &sizer)
        .map_err(|e| err(e.into()))?;
    let input = logged_input(state, target, dirs, context, path)?;
    let outcome = crate::pipeline::finish(policy, state, decision, &facts, &render).map_err(err)?;
    Ok((outcome, input))
}

/// What a decision was made from, as JSON for the decision log.
fn logged_input(
    state: &State,
    target: &str,
    dirs: Dirs<'_>,
    context: &DecisionContext,
    path: &str,
) -> Result<serde_json::Value, StoreError> {
    let input = DecisionInput::new(state, target, dirs.handoff, context);
    serde_json::to_value(&input).map_err(|e| StoreError::Corrupt {
        path: path.to_string(),
        what: "decision input".into(),
        why: e.to_string(),
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
    Err(StoreError::NoHandoff {
        path: path.to_string(),
        thread: thread.into(),
        target: outcome.decision.target.clone(),
        strategy: outcome.decision.strategy.as_str().into(),
        why: why.into(),
    })
}

/// Refuse an operation on a thread whose last run is still running.
fn refuse_running(state: &State, path: &str) -> Result<(), StoreError> {
    match state.runs.last().filter(|r| r.status == RunStatus::Running) {
        Some(last) => Err(StoreError::RunInProgress {
            path: path.to_string(),
            thread: state.thread.id.clone(),
            run: last.ordinal,
        }),
        None => Ok(()),
    }
}

/// Validate a thread about to be stored.
pub(super) fn validated(state: &State, path: &str) -> Result<(), StoreError> {
    crate::state::validate(state, &format!("{path}#{}", state.thread.id)).map_err(|source| {
        StoreError::InvalidState {
            path: path.to_string(),
            thread: state.thread.id.clone(),
            source: Box::new(source),
        }
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
    handoff_dir: Option<&PathBuf>,
) -> Option<PathBuf> {
    let offband = crate::deliver::OffbandStore::new(handoff_dir.cloned());
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
    handoff_dir: Option<&PathBuf>,
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

/// Whether a policy reads facts that depend on the items of runs the target has already
/// seen (`run.items` in any rule, `summary.full_chars`): then dispatch loads every item.
fn policy_reads_old_items(policy: &Policy) -> bool {
    use crate::facts::Fact;
    use crate::policy::CExpr;
    fn reads(e: &CExpr) -> bool {
        match e {
            CExpr::Fact(f) => matches!(f, Fact::RunItems | Fact::SummaryFullChars),
            CExpr::List(xs) | CExpr::And(xs) | CExpr::Or(xs) => xs.iter().any(reads),
            CExpr::Not(x) => reads(x),
            CExpr::Cmp(a, _, b) => reads(a) || reads(b),
            CExpr::Sum(xs) => xs.iter().any(|(_, x)| reads(x)),
            CExpr::Const(_) | CExpr::Let(..) | CExpr::Signal(..) | CExpr::AnyStale => false,
        }
    }
    let opt = |e: &Option<CExpr>| e.as_ref().map(reads).unwrap_or(false);
    policy
        .eligible
        .as_ref()
        .map(|(_, e)| reads(e))
        .unwrap_or(false)
        || policy.stales.iter().any(|s| reads(&s.when))
        || policy.ladder.iter().any(|r| opt(&r.when))
        || policy.delivery.rules.iter().any(|r| opt(&r.when))
        || policy
            .pregrant
            .as_ref()
            .map(|p| p.grants.iter().any(|g| opt(&g.when)))
            .unwrap_or(false)
}

/// The run up to which `target`'s provider thread has seen the thread (from run metadata and
/// handoffs alone): a delta decision needs no item at or before it.
fn items_bound(state: &State, target: &str) -> u32 {
    crate::facts::find_target_thread(state, target)
        .map(|pt| crate::facts::coverage(state, &pt.id, |_| true).last_seen)
        .unwrap_or(0)
}

/// A first-turn prompt rendered before its run (a fork's merge-back) with that run's own
/// `message` after it, where the inline template puts the message: last, after a blank line,
/// or on the next line when the prompt ends with a label for it (`User message:`).
fn with_message(prompt: &str, message: &str) -> String {
    let head = prompt.trim_end();
    match head {
        "" => message.to_string(),
        h if h.ends_with(':') => format!("{h}\n{message}"),
        h => format!("{h}\n\n{message}"),
    }
}

/// The ordinal of the thread's next run.
fn next_run(state: &State) -> u32 {
    state.runs.len() as u32 + 1
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
        None => Err(StoreError::BadMergeBack {
            path: path.to_string(),
            thread: thread.to_string(),
            transfer: t.id.clone(),
            run,
        }),
    }
}

/// Decide, render and record the next run of a stored thread: the run (status `running`),
/// the provider thread it resumes or creates, the handoff and its transfer, and a
/// decision-log row. A thread whose last run is still running is refused. At a fork's first
/// dispatch its pending fork transfer resolves (`resolved_native` or `resolved_portable`).
pub fn dispatch(
    store: &mut Store,
    policy: &Policy,
    req: &DispatchRequest,
) -> Result<Dispatched, StoreError> {
    let (tx, path, busy) = store.begin("starting a dispatch")?;
    let cx = Cx::new(&tx, &path, busy);
    let thread = req.thread.as_str();
    let partial = !policy_reads_old_items(policy);
    // Run metadata, provider threads and handoffs in full; items only after `bound`.
    let mut state = cx.load_items_after(thread, if partial { u32::MAX } else { 0 })?;
    let mut bound = 0;
    if partial {
        bound = items_bound(&state, &req.target);
        cx.fill_items(thread, bound, &mut state.runs)?;
    }
    refuse_running(&state, &path)?;
    let pending_fork = state.thread.parent.as_ref().and_then(|_| {
        state.transfers.iter().position(|t| {
            t.kind == TransferType::Fork
                && t.status == TransferStatus::Pending
                && t.target_thread.as_deref() == Some(thread)
        })
    });
    let pending_merge = pending_merge_back(&state, &path, next_run(&state))?;
    // A merge-back waiting for this run, as its own decision delivered it.
    let context = DecisionContext {
        record_in: None,
        waiting: match &pending_merge {
            Some((_, hid)) => Some(cx.waiting(thread, hid)?),
            None => None,
        },
    };
    let anchor = state.request.fork_anchor.take();
    state.request = Request {
        provider: req.target.clone(),
        model: req.model.clone(),
        runtime_mode: req.runtime_mode.clone(),
        clean_context: req.clean_context,
        message: req.message.clone(),
        kind: if pending_fork.is_some() {
            RequestKind::Fork
        } else {
            RequestKind::Dispatch
        },
        fork_anchor: if pending_fork.is_some() { anchor } else { None },
    };
    // Decide on the loaded items; when the decision reaches before them (or a fork resolves),
    // load every item and decide again. Only the final decision is rendered.
    let (eval, render) = options(&req.target, req.dirs());
    let err = pipeline_err(&path, thread);
    let sizer = PolicySizer { policy };
    let mut evaluated = crate::eval::evaluate_in(policy, &state, &eval, &context, &sizer)
        .map_err(|e| err(e.into()))?;
    let reaches_back = |d: &Decision| d.covered_runs.as_ref().is_some_and(|c| c.from <= bound);
    if bound > 0 && (pending_fork.is_some() || reaches_back(&evaluated.0)) {
        drop(evaluated);
        for r in &mut state.runs {
            r.items.clear();
        }
        cx.fill_items(thread, 0, &mut state.runs)?;
        evaluated = crate::eval::evaluate_in(policy, &state, &eval, &context, &sizer)
            .map_err(|e| err(e.into()))?;
    }
    let (decision, facts) = evaluated;
    let input = logged_input(&state, &req.target, req.dirs(), &context, &path)?;
    let mut outcome =
        crate::pipeline::finish(policy, &state, decision, &facts, &render).map_err(&err)?;
    fault("dispatch:after_decide");
    let run = outcome.decision.run;
    if outcome.decision.strategy == Strategy::Unsupported {
        cx.log_decision(thread, "dispatch", &outcome.decision, input)?;
        // Nothing starts: the decision is logged and returned.
        commit(tx, &path, busy, "committing the dispatch")?;
        return Ok(Dispatched {
            decision: outcome.decision,
            run,
            provider_thread: None,
            handoff: None,
            started: false,
            merge_back: None,
        });
    }

    // A fork's first dispatch: the parent's provider threads copied into the fork belong to
    // the parent; the fork gets a thread of its own (forked natively or created).
    if pending_fork.is_some() {
        cx.exec(
            "closing the parent's provider threads in the fork",
            "UPDATE provider_threads SET status = 'closed' WHERE thread = ?1",
            [thread],
        )?;
    }
    let action = outcome.decision.provider_thread.clone();
    let provider_thread = match action.action {
        ThreadAction::Resume => action.id.clone(),
        ThreadAction::Create | ThreadAction::ForkNative => {
            let id = new_provider_thread_id(&state, &req.target);
            // A native fork inherits what the request does not say from the thread it forks.
            let source = (action.action == ThreadAction::ForkNative)
                .then(|| {
                    state
                        .provider_threads
                        .iter()
                        .find(|p| Some(&p.id) == action.id.as_ref())
                })
                .flatten();
            let pt = ProviderThread {
                id: id.clone(),
                provider: req.target.clone(),
                model: req
                    .model
                    .clone()
                    .or_else(|| source.and_then(|p| p.model.clone())),
                runtime_mode: req
                    .runtime_mode
                    .clone()
                    .or_else(|| source.and_then(|p| p.runtime_mode.clone())),
                status: ProviderThreadStatus::Active,
                resume_failed: false,
            };
            cx.insert_provider_thread(thread, cx.next_seq("provider_threads", thread)?, &pt)?;
            state.provider_threads.push(pt);
            Some(id)
        }
        ThreadAction::None => None,
    };

    // The transfer: the fork's pending one resolves; a provider handoff gets a new one.
    let native = outcome.decision.strategy == Strategy::NativeFork;
    let transfer = match pending_fork.map(|i| state.transfers[i].id.clone()) {
        Some(tid) => {
            cx.exec(
                "resolving the fork transfer",
                "UPDATE transfers SET status = ?3, resolution = ?4, handoff = ?5
                 WHERE thread = ?1 AND id = ?2",
                params![
                    thread,
                    tid,
                    if native {
                        "resolved_native"
                    } else {
                        "resolved_portable"
                    },
                    if native {
                        "native_fork"
                    } else {
                        "portable_context"
                    },
                    outcome.decision.handoff_id
                ],
            )?;
            Some(tid)
        }
        None if outcome.decision.needs_handoff() => {
            let tid = next_transfer_id(&state);
            let t = Transfer {
                id: tid.clone(),
                kind: TransferType::ProviderHandoff,
                status: TransferStatus::ResolvedPortable,
                source_thread: Some(thread.to_string()),
                target_thread: Some(thread.to_string()),
                source_run: outcome.decision.covered_runs.as_ref().map(|c| c.to),
                resolution: Some("portable_context".into()),
                handoff: outcome.decision.handoff_id.clone(),
            };
            cx.insert_transfer(thread, cx.next_seq("transfers", thread)?, &t)?;
            Some(tid)
        }
        None => None,
    };
    let new = NewHandoff {
        transfer,
        ..NewHandoff::own(&state, &outcome, run, provider_thread.clone())
    };
    let handoff = record_handoff(&cx, &mut outcome, req.handoff_dir.as_ref(), new)?;
    // A fork's merge-back waiting for this run: the run takes it, as its handoff when it
    // makes none of its own, else alongside its own.
    let merge_back = match &pending_merge {
        Some((tid, hid)) => {
            cx.exec(
                "taking the merge-back",
                "UPDATE transfers SET status = 'resolved_portable', resolution = 'portable_context'
                 WHERE thread = ?1 AND id = ?2",
                params![thread, tid],
            )?;
            Some(cx.handoff_record(thread, hid)?)
        }
        None => None,
    };
    let (handoff, merge_back) = match (handoff, merge_back) {
        // The merge-back is the run's handoff: its first-turn prompt carries the run's own
        // message after the merge-back's.
        (None, Some(mut m)) => {
            if let Some(msg) = req.message.as_deref().filter(|m| !m.trim().is_empty()) {
                m.inline = with_message(&m.inline, msg);
            }
            (Some(m), None)
        }
        (h, m) => (h, m),
    };
    cx.insert_run(
        thread,
        &Run {
            ordinal: run,
            provider: req.target.clone(),
            provider_thread: provider_thread.clone(),
            status: RunStatus::Running,
            handoff: handoff.as_ref().map(|h| h.id.clone()),
            items: Vec::new(),
        },
    )?;
    // Logged after delivery: a fallback to inline is part of the decision.
    cx.log_decision(thread, "dispatch", &outcome.decision, input)?;
    let request = cx.json("request", &state.request)?;
    cx.exec(
        "recording the request",
        "UPDATE threads SET request = ?2 WHERE id = ?1",
        params![thread, request],
    )?;
    fault("dispatch:after_handoff");
    commit(tx, &path, busy, "committing the dispatch")?;
    fault("dispatch:after_commit");
    Ok(Dispatched {
        decision: outcome.decision,
        run,
        provider_thread,
        handoff,
        started: true,
        merge_back,
    })
}

/// Finish a running run: append its items and mark it completed, failed or interrupted.
/// The handoff it consumed becomes `consumed` (and its transfer too), so the provider
/// thread's coverage now includes the handoff's runs and this run.
pub fn complete_run(
    store: &mut Store,
    thread: &str,
    run: u32,
    items: Vec<Item>,
    status: RunStatus,
) -> Result<Completed, StoreError> {
    let (tx, path, busy) = store.begin("completing a run")?;
    let cx = Cx::new(&tx, &path, busy);
    if !matches!(
        status,
        RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
    ) {
        return Err(StoreError::BadRunStatus {
            path,
            thread: thread.into(),
            run,
            status: status.as_str().into(),
        });
    }
    let mut state = cx.load(thread)?;
    let n = state.runs.len() as u32;
    let Some(r) = state.runs.get_mut((run as usize).wrapping_sub(1)) else {
        return Err(StoreError::RunNotFound {
            path,
            thread: thread.into(),
            run,
            runs: n,
        });
    };
    if r.status != RunStatus::Running {
        return Err(StoreError::RunNotRunning {
            path,
            thread: thread.into(),
            run,
            status: r.status.as_str().into(),
        });
    }
    let first = r.items.len();
    r.items.extend(items.iter().cloned());
    r.status = status;
    let handoff_consumed = r.handoff.clone();
    // The new items must keep the thread valid (item ids unique, ...).
    validated(&state, &path)?;
    cx.insert_items(thread, run, first, &items)?;
    cx.exec(
        "completing the run",
        "UPDATE runs SET status = ?3 WHERE thread = ?1 AND ordinal = ?2",
        params![thread, run, status.as_str()],
    )?;
    // What the run took (its handoff, and a merge-back alongside it) is consumed: the
    // transfers say so; the handoffs stay `ready`, and the run names the one it consumed.
    cx.exec(
        "consuming the transfers",
        "UPDATE transfers SET status = 'consumed'
         WHERE thread = ?1 AND type IN ('provider_handoff', 'merge_back')
           AND status = 'resolved_portable'
           AND handoff IN (SELECT id FROM handoffs
                           WHERE thread = ?1 AND target_run = ?2 AND status = 'ready')",
        params![thread, run],
    )?;
    // A fork's first run took the fork's transfer (resolved natively or portably at its
    // dispatch): it is consumed now, as t3code's is.
    cx.exec(
        "consuming the fork transfer",
        "UPDATE transfers SET status = 'consumed'
         WHERE thread = ?1 AND type = 'fork' AND target_thread = ?1
           AND status IN ('resolved_native', 'resolved_portable') AND source_run + 1 = ?2",
        params![thread, run],
    )?;
    // The run's pre-grants end with it, used or not (Mcode clears grants at turn end).
    cx.exec(
        "ending the run's pre-grants",
        "DELETE FROM grants WHERE thread = ?1 AND run = ?2",
        params![thread, run],
    )?;
    commit(tx, &path, busy, "committing the run completion")?;
    Ok(Completed {
        thread: thread.into(),
        run,
        status,
        items: items.len(),
        handoff_consumed,
    })
}

/// Make a new handoff for the running run that consumes `handoff`, superseding it. The old
/// row keeps everything but its status (`superseded`); the new one names it in `supersedes`.
pub fn regenerate(
    store: &mut Store,
    policy: &Policy,
    thread: &str,
    handoff: &str,
    opts: &HandoffOptions,
) -> Result<Dispatched, StoreError> {
    let (tx, path, busy) = store.begin("regenerating a handoff")?;
    let cx = Cx::new(&tx, &path, busy);
    let mut state = cx.load(thread)?;
    let refuse = |why: String| StoreError::NotRegenerable {
        path: path.clone(),
        thread: thread.into(),
        handoff: handoff.into(),
        why,
    };
    let Some(old) = state.handoffs.iter().find(|h| h.id == handoff).cloned() else {
        return Err(StoreError::HandoffNotFound {
            path,
            thread: thread.into(),
            handoff: handoff.into(),
        });
    };
    if old.status == HandoffStatus::Superseded {
        return Err(refuse("it is already superseded".into()));
    }
    if let Some(fork) = old.covered_thread.as_deref().filter(|f| *f != thread) {
        return Err(refuse(format!(
            "it is a merge-back from fork \"{fork}\"; merge the fork back again instead"
        )));
    }
    let Some(t) = old.target_run else {
        return Err(refuse("it is not for a run of this thread".into()));
    };
    let run = state
        .runs
        .get((t as usize).wrapping_sub(1))
        .cloned()
        .filter(|r| r.status == RunStatus::Running && r.handoff.as_deref() == Some(handoff));
    let Some(run) = run else {
        return Err(refuse(format!(
            "run {t} is not a running run that consumes it; only the handoff of the running run can be regenerated"
        )));
    };
    // The thread as it was before that run's dispatch, with the old handoff out of the way.
    state.runs.truncate(t as usize - 1);
    for h in &mut state.handoffs {
        if h.id == handoff {
            h.status = HandoffStatus::Superseded;
        }
    }
    let pt = run.provider_thread.clone();
    if let Some(pt) = &pt {
        let used_before = state
            .runs
            .iter()
            .any(|r| r.provider_thread.as_deref() == Some(pt.as_str()));
        if !used_before {
            state.provider_threads.retain(|p| &p.id != pt);
        }
    }
    if opts.message.is_some() {
        state.request.message = opts.message.clone();
    }
    let (mut outcome, input) = decide(
        policy,
        &state,
        &run.provider,
        opts.dirs(),
        &path,
        &DecisionContext::default(),
    )?;
    require_handoff(
        &outcome,
        &path,
        thread,
        &format!("handoff {handoff} was left as it is"),
    )?;
    // The transfer stays: it is relinked to the new handoff below.
    cx.supersede_handoff(thread, handoff, false)?;
    let new = NewHandoff {
        transfer: old.transfer.clone(),
        supersedes: Some(handoff.to_string()),
        ..NewHandoff::own(&state, &outcome, t, pt.clone())
    };
    let record = record_handoff(&cx, &mut outcome, opts.handoff_dir.as_ref(), new)?;
    cx.log_decision(thread, "regenerate", &outcome.decision, input)?;
    if let Some(rec) = &record {
        cx.exec(
            "linking the run to the new handoff",
            "UPDATE runs SET handoff = ?3 WHERE thread = ?1 AND ordinal = ?2",
            params![thread, t, rec.id],
        )?;
        if let Some(tid) = &old.transfer {
            cx.exec(
                "linking the transfer to the new handoff",
                "UPDATE transfers SET handoff = ?3 WHERE thread = ?1 AND id = ?2",
                params![thread, tid, rec.id],
            )?;
        }
    }
    commit(tx, &path, busy, "committing the regeneration")?;
    Ok(Dispatched {
        decision: outcome.decision,
        run: t,
        provider_thread: pt,
        handoff: record,
        started: false,
        merge_back: None,
    })
}

/// Roll the thread back to run `to`: later runs become `rolled_back`, handoffs covering any
/// of them `superseded`, and provider threads that saw them `rolled_back` when their provider
/// can roll back, `divergent` otherwise (the next dispatch sees the `diverged` signal).
pub fn rollback(store: &mut Store, thread: &str, to: u32) -> Result<RollbackReport, StoreError> {
    let (tx, path, busy) = store.begin("rolling back")?;
    let cx = Cx::new(&tx, &path, busy);
    let state = cx.load(thread)?;
    let n = state.runs.len() as u32;
    let refuse = |why: String| StoreError::BadRollback {
        path: path.clone(),
        thread: thread.into(),
        to,
        why,
    };
    if to > n {
        return Err(refuse(format!("the thread has {n} runs")));
    }
    let runs: Vec<u32> = state
        .runs
        .iter()
        .filter(|r| r.ordinal > to && r.status != RunStatus::RolledBack)
        .map(|r| r.ordinal)
        .collect();
    if runs.is_empty() {
        return Err(refuse(format!("no live run after run {to}")));
    }
    let handoffs: Vec<&Handoff> = state
        .handoffs
        .iter()
        .filter(|h| {
            h.status != HandoffStatus::Superseded
                && if h.covers_own_runs(thread) {
                    h.covered.to > to
                } else {
                    // A merge-back covers its fork's runs: it goes with the run that took it
                    // (one still waiting for the next run stays).
                    h.target_run.is_some_and(|t| runs.contains(&t))
                }
        })
        .collect();
    let mut changes = Vec::new();
    for pt in &state.provider_threads {
        if pt.status == ProviderThreadStatus::Closed {
            continue;
        }
        let ran = state.runs.iter().any(|r| {
            runs.contains(&r.ordinal) && r.provider_thread.as_deref() == Some(pt.id.as_str())
        });
        let handed = handoffs
            .iter()
            .any(|h| h.status.is_live() && h.to_provider_thread.as_deref() == Some(pt.id.as_str()));
        if ran || handed {
            let status = if caps_for(&state, &pt.provider).rollback {
                ProviderThreadStatus::RolledBack
            } else {
                ProviderThreadStatus::Divergent
            };
            changes.push(ProviderThreadChange {
                id: pt.id.clone(),
                provider: pt.provider.clone(),
                status,
            });
        }
    }
    cx.exec(
        "rolling back runs",
        "UPDATE runs SET status = 'rolled_back'
         WHERE thread = ?1 AND ordinal > ?2 AND status <> 'rolled_back'",
        params![thread, to],
    )?;
    for h in &handoffs {
        cx.supersede_handoff(thread, &h.id, true)?;
    }
    // A rolled-back run's pre-grants end with it (a merge-back still waiting for the next
    // run keeps its own).
    cx.exec(
        "ending the rolled-back runs' pre-grants",
        "DELETE FROM grants WHERE thread = ?1 AND run > ?2 AND run <= ?3",
        params![thread, to, n],
    )?;
    // A compaction summary that covers a rolled-back run describes undone work: drop it, as a
    // fork does not inherit one that reaches past the fork point.
    let compact_summary_dropped = state.thread.compact_summary.is_some()
        && state.thread.compact_summary_through.is_none_or(|t| t > to);
    if compact_summary_dropped {
        cx.exec(
            "dropping the compaction summary",
            "UPDATE threads SET compact_summary = NULL, compact_summary_through = NULL
             WHERE id = ?1",
            params![thread],
        )?;
    }
    for c in &changes {
        cx.exec(
            "marking provider threads",
            "UPDATE provider_threads SET status = ?3 WHERE thread = ?1 AND id = ?2",
            params![thread, c.id, c.status.as_str()],
        )?;
    }
    commit(tx, &path, busy, "committing the rollback")?;
    Ok(RollbackReport {
        thread: thread.into(),
        to,
        runs_rolled_back: runs,
        handoffs_superseded: handoffs.iter().map(|h| h.id.clone()).collect(),
        provider_threads: changes,
        compact_summary_dropped,
    })
}

/// Fork the thread at run `at`: a child thread (id `child`, else `<thread>-fork<n>`) that
/// inherits runs 1..at, with lineage `parent: {thread, run: at}` and a `pending` fork
/// transfer. Nothing provider-specific is chosen here; the child's first dispatch decides.
pub fn fork(
    store: &mut Store,
    thread: &str,
    at: u32,
    child: Option<&str>,
) -> Result<ForkReport, StoreError> {
    let (tx, path, busy) = store.begin("forking")?;
    let cx = Cx::new(&tx, &path, busy);
    let parent = cx.load(thread)?;
    let refuse = |why: String| StoreError::BadForkPoint {
        path: path.clone(),
        thread: thread.into(),
        run: at,
        why,
    };
    let Some(source) = parent.runs.get((at as usize).wrapping_sub(1)) else {
        return Err(refuse(format!("the thread has {} runs", parent.runs.len())));
    };
    match source.status {
        RunStatus::Running => {
            return Err(refuse("the run is still running; complete it first".into()))
        }
        RunStatus::RolledBack => return Err(refuse("the run was rolled back".into())),
        _ => {}
    }
    let child_id = match child {
        Some(c) => c.to_string(),
        None => {
            let mut k = 1;
            loop {
                let id = format!("{thread}-fork{k}");
                if !cx.thread_exists(&id)? {
                    break id;
                }
                k += 1;
            }
        }
    };
    if cx.thread_exists(&child_id)? {
        return Err(StoreError::ThreadExists {
            path,
            thread: child_id,
        });
    }
    let runs: Vec<Run> = parent.runs[..at as usize].to_vec();
    let handoffs: Vec<Handoff> = parent
        .handoffs
        .iter()
        .filter(|h| {
            // A merge-back's range numbers its fork's runs: only the run that took it counts.
            (!h.covers_own_runs(thread) || h.covered.to <= at)
                && h.target_run.map(|t| t <= at).unwrap_or(false)
        })
        .cloned()
        .collect();
    let kept = |id: &str| handoffs.iter().any(|h| h.id == id);
    let mut transfers: Vec<Transfer> = parent
        .transfers
        .iter()
        .filter(|t| t.handoff.as_deref().map(kept).unwrap_or(false))
        .cloned()
        .collect();
    let handoffs: Vec<Handoff> = handoffs
        .iter()
        .cloned()
        .map(|mut h| {
            if h.transfer
                .as_deref()
                .map(|t| !transfers.iter().any(|x| x.id == t))
                .unwrap_or(false)
            {
                h.transfer = None;
            }
            if h.supersedes.as_deref().map(|s| !kept(s)).unwrap_or(false) {
                h.supersedes = None;
            }
            h
        })
        .collect();
    let runs: Vec<Run> = runs
        .into_iter()
        .map(|mut r| {
            if r.handoff.as_deref().map(|h| !kept(h)).unwrap_or(false) {
                r.handoff = None;
            }
            r
        })
        .collect();
    let used = |pt: &ProviderThread| {
        runs.iter()
            .any(|r| r.provider_thread.as_deref() == Some(pt.id.as_str()))
            || handoffs.iter().any(|h| {
                h.to_provider_thread.as_deref() == Some(pt.id.as_str())
                    || h.from_provider_threads.contains(&pt.id)
            })
    };
    let provider_threads: Vec<ProviderThread> = parent
        .provider_threads
        .iter()
        .filter(|p| used(p))
        .cloned()
        .collect();
    let source_pt = source
        .provider_thread
        .as_deref()
        .and_then(|id| provider_threads.iter().find(|p| p.id == id));
    let mut state = State {
        version: parent.version,
        thread: Thread {
            id: child_id.clone(),
            title: parent.thread.title.clone(),
            compact_summary: parent
                .thread
                .compact_summary_through
                .filter(|t| *t <= at)
                .and(parent.thread.compact_summary.clone()),
            compact_summary_through: parent.thread.compact_summary_through.filter(|t| *t <= at),
            parent: Some(ParentRef {
                thread: thread.to_string(),
                run: at,
            }),
            workspace: parent.thread.workspace.clone(),
        },
        providers: parent.providers.clone(),
        provider_threads: provider_threads.clone(),
        runs,
        handoffs,
        transfers: Vec::new(),
        checkpoints: parent
            .checkpoints
            .iter()
            .filter(|c| c.run <= at)
            .cloned()
            .collect(),
        request: Request {
            provider: source.provider.clone(),
            model: source_pt.and_then(|p| p.model.clone()),
            runtime_mode: source_pt.and_then(|p| p.runtime_mode.clone()),
            clean_context: false,
            message: None,
            kind: RequestKind::Fork,
            fork_anchor: fork_anchor(source),
        },
    };
    let tid = next_id("T", transfers.len(), |id| {
        transfers.iter().any(|t| t.id == id)
    });
    transfers.push(Transfer {
        id: tid.clone(),
        kind: TransferType::Fork,
        status: TransferStatus::Pending,
        source_thread: Some(thread.to_string()),
        target_thread: Some(child_id.clone()),
        source_run: Some(at),
        resolution: None,
        handoff: None,
    });
    state.transfers = transfers;
    validated(&state, &path)?;
    cx.insert_state(&state)?;
    commit(tx, &path, busy, "committing the fork")?;
    Ok(ForkReport {
        parent: thread.into(),
        child: child_id,
        at,
        transfer: tid,
    })
}

/// A merge-back's `summary`: the fork and its runs, then the text of every entry the policy
/// selected, in document order.
fn merge_back_summary(child: &str, outcome: &Outcome) -> String {
    let runs = outcome
        .decision
        .covered_runs
        .as_ref()
        .map(|c| format!("runs {}-{}", c.from, c.to))
        .unwrap_or_default();
    let entries: Vec<&str> = outcome
        .summary
        .iter()
        .flat_map(|s| &s.sections)
        .flat_map(|s| &s.entries)
        .map(|e| e.text.as_str())
        .collect();
    format!("merge-back of fork {child}, {runs}: {}", entries.join("; "))
}

/// Merge a fork back: the fork's runs since the fork point as a `fork_delta_summary` handoff
/// **into the parent**, for the parent's next run, with a `pending` `merge_back` transfer in
/// the parent (source: the fork; target: the parent). The handoff is rendered for the provider
/// of the parent's latest live run, delivered (off-band document and pre-grant for the parent's
/// next run) and recorded in the parent with `covered_thread` naming the fork, whose ordinals
/// `covered` counts. The parent's next dispatch takes it: its run names it as `handoff` (or
/// carries it beside a handoff of its own), the transfer resolves, and it is `consumed` when
/// that run completes. Merging the same fork back again before then supersedes the waiting
/// handoff; a merge-back from another fork is refused until the parent has taken the first.
/// The fork itself is left unchanged. The returned `run` and `provider_thread` are the
/// parent's next run and the provider thread that run would resume.
pub fn merge_back(
    store: &mut Store,
    policy: &Policy,
    child: &str,
    opts: &HandoffOptions,
) -> Result<Dispatched, StoreError> {
    let (tx, path, busy) = store.begin("merging back")?;
    let cx = Cx::new(&tx, &path, busy);
    let state = cx.load(child)?;
    // A thread named as its own parent is no fork: merging it "back" would write into itself.
    let Some(parent_ref) = state.thread.parent.clone().filter(|p| p.thread != child) else {
        return Err(StoreError::NotAFork {
            path,
            thread: child.into(),
        });
    };
    refuse_running(&state, &path)?;
    let own = state
        .runs
        .iter()
        .any(|r| r.ordinal > parent_ref.run && r.status != RunStatus::RolledBack);
    if !own {
        return Err(StoreError::NothingToMerge {
            path,
            thread: child.into(),
            at: parent_ref.run,
        });
    }
    let parent = cx.load(&parent_ref.thread)?;
    let parent_id = parent.thread.id.clone();
    let run = next_run(&parent);
    // A merge-back already waiting: this fork's is superseded; another fork's goes first.
    let waiting = pending_merge_back(&parent, &path, run)?;
    let waiting_from = waiting.as_ref().and_then(|(tid, _)| {
        parent
            .transfers
            .iter()
            .find(|t| &t.id == tid)
            .and_then(|t| t.source_thread.clone())
    });
    if let (Some((_, hid)), Some(from)) = (&waiting, &waiting_from) {
        if from != child {
            return Err(StoreError::MergeBackWaiting {
                path,
                thread: parent_id,
                handoff: hid.clone(),
                fork: from.clone(),
            });
        }
    }
    let target = parent
        .runs
        .iter()
        .rev()
        .find(|r| r.status != RunStatus::RolledBack)
        .map(|r| r.provider.clone())
        .unwrap_or_else(|| parent.request.provider.clone());
    let parent_pt = crate::facts::find_target_thread(&parent, &target).map(|p| p.id.clone());
    // Decide on the fork as the parent's provider sees it: none of the fork's provider
    // threads are the parent's, so the whole delta since the fork point is handed over.
    let mut view = state.clone();
    for p in &mut view.provider_threads {
        p.status = ProviderThreadStatus::Closed;
    }
    view.request = Request {
        provider: target.clone(),
        model: None,
        runtime_mode: None,
        clean_context: false,
        message: opts.message.clone(),
        kind: RequestKind::MergeBack,
        fork_anchor: None,
    };
    // The handoff is the parent's: its id, its next run, its document directory, and the
    // provider thread that run would resume. The evaluation numbers and names it so.
    let hid = crate::eval::next_handoff_id(&parent);
    let context = DecisionContext {
        record_in: Some(RecordIn {
            thread: parent_id.clone(),
            run,
            handoff_id: hid.clone(),
            provider_thread: parent_pt.clone(),
        }),
        waiting: None,
    };
    let (mut outcome, input) = decide(policy, &view, &target, opts.dirs(), &path, &context)?;
    require_handoff(&outcome, &path, child, "nothing was merged back")?;
    let supersedes = match waiting {
        Some((_, old)) => {
            cx.supersede_handoff(&parent_id, &old, true)?;
            Some(old)
        }
        None => None,
    };
    let tid = next_transfer_id(&parent);
    let t = Transfer {
        id: tid.clone(),
        kind: TransferType::MergeBack,
        status: TransferStatus::Pending,
        source_thread: Some(child.to_string()),
        target_thread: Some(parent_id.clone()),
        source_run: state.runs.last().map(|r| r.ordinal),
        resolution: None,
        handoff: Some(hid.clone()),
    };
    cx.insert_transfer(&parent_id, cx.next_seq("transfers", &parent_id)?, &t)?;
    let summary = merge_back_summary(child, &outcome);
    let record = record_handoff(
        &cx,
        &mut outcome,
        opts.handoff_dir.as_ref(),
        NewHandoff {
            thread: parent_id.clone(),
            target_run: Some(run),
            to_provider_thread: parent_pt.clone(),
            transfer: Some(tid),
            supersedes,
            covered_thread: Some(child.to_string()),
            // The fork's provider threads are the fork's, unknown in the parent.
            from_provider_threads: Vec::new(),
            summary: Some(summary),
        },
    )?;
    cx.log_decision(&parent_id, "merge_back", &outcome.decision, input)?;
    commit(tx, &path, busy, "committing the merge-back")?;
    Ok(Dispatched {
        decision: outcome.decision,
        run,
        provider_thread: parent_pt,
        handoff: record,
        started: false,
        merge_back: None,
    })
}
