//! Dispatch: decide, render and record the next run of a stored thread.

use super::rebind::{self, Rebound};
use super::recheck::{prepare_then_record, Reads, Steps};
use super::{
    commit, logged_input, next_id, next_run, next_transfer_id, pending_merge_back, pipeline_err,
    record_handoff, refuse_running, setup, DispatchRequest, Dispatched, ForkPoint, NewHandoff,
};
use crate::decision::{Decision, ThreadAction};
use crate::engine::Engine;
use crate::eval::DecisionContext;
use crate::policy::{Policy, Strategy};
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{fault, Store, StoreError};
use rusqlite::params;

/// Decide, render and record the next run of a stored thread: the run (status `running`),
/// the provider thread it resumes or creates, the handoff and its transfer, and a
/// decision-log row. A thread whose last run is still running is refused. At a fork's first
/// dispatch its pending fork transfer resolves (`resolved_native` or `resolved_portable`).
///
/// When the policy names an external summarizer, the decision and the summary are made in a
/// read transaction, with no write lock held, and recorded in a write transaction afterwards
/// if the thread has not changed meanwhile (see [`dispatch_with_writer`]).
pub fn dispatch(
    store: &mut Store,
    engine: &Engine,
    req: &DispatchRequest,
) -> Result<Dispatched, StoreError> {
    dispatch_with_writer(store, engine, req, || ())
}

/// [`dispatch`], holding the guard `writer` returns only while the write transaction is open
/// (the service passes its writer lock, so a summarizer never holds it).
///
/// Without an external summarizer, everything happens in one write transaction. With one,
/// the dispatch decides, selects and runs the summarizer in a read transaction (a snapshot,
/// no lock), then opens the write transaction and checks that the thread is as it was read:
/// its runs, provider threads, handoffs, transfers, checkpoints, thread record and item count.
/// If it changed, the dispatch starts over once (running the summarizer again); if it changed
/// again, nothing is recorded and the error is [`StoreErrorKind::ThreadMoved`](crate::store::StoreErrorKind::ThreadMoved), naming what
/// changed.
pub fn dispatch_with_writer<G>(
    store: &mut Store,
    engine: &Engine,
    req: &DispatchRequest,
    writer: impl Fn() -> G,
) -> Result<Dispatched, StoreError> {
    let steps = Steps {
        at_once: "starting a dispatch",
        deciding: "deciding a dispatch",
        recording: "recording a dispatch",
        again: "dispatch again",
    };
    prepare_then_record(
        store,
        engine.policy(),
        &steps,
        writer,
        |cx, path, reads| prepare(cx, path, engine, req, reads),
        |tx, path, busy, prepared| record(tx, path, busy, (engine, req), prepared),
    )
}

/// A decided, rendered dispatch, not yet recorded.
struct Prepared {
    state: State,
    pending_fork: Option<usize>,
    pending_merge: Option<(String, String)>,
    /// The waiting merge-back made again for this run (it was made for another provider or
    /// provider thread).
    rebound: Option<Rebound>,
    outcome: crate::pipeline::Outcome,
    input: serde_json::Value,
}

/// Load the thread, decide, select, summarize and render: everything before the first write.
fn prepare(
    cx: &Cx<'_>,
    path: &str,
    engine: &Engine,
    req: &DispatchRequest,
    reads: &mut Reads,
) -> Result<Prepared, StoreError> {
    let policy = engine.policy();
    let path = path.to_string();
    let thread = req.thread.as_str();
    let partial = !policy_reads_old_items(policy);
    // Without a re-check, decide on a window of the thread when its facts are the whole
    // thread's; else (or when they fall short) on the whole thread.
    if partial && !reads.rechecks() {
        if let Some(prepared) = prepare_windowed(cx, &path, engine, req)? {
            return Ok(prepared);
        }
    }
    // Run metadata, provider threads and handoffs in full; items only after `bound`.
    let mut state = reads.meta(cx, thread)?;
    let mut bound = 0;
    if partial {
        bound = items_bound(&state, &req.target);
    }
    cx.fill_items(thread, bound, &mut state.runs)?;
    refuse_running(&state, &path)?;
    let pending_fork = state.thread.parent.as_ref().and_then(|_| {
        state.transfers.iter().position(|t| {
            t.kind == TransferType::Fork
                && t.status == TransferStatus::Pending
                && t.target_thread.as_deref() == Some(thread)
        })
    });
    let pending_merge = pending_merge_back(&state, &path, next_run(&state))?;
    let context = context(cx, thread, &pending_merge, None)?;
    let anchor = state.request.fork_anchor.take();
    state.request = request(req, pending_fork.is_some().then_some(anchor));
    crate::workspace::enrich(&mut state, &req.target);
    // Decide on the loaded items; when the decision reaches before them (or a fork resolves),
    // load every item and decide again. Only the final decision is rendered.
    let err = pipeline_err(&path, thread);
    let reaches_back = |d: &Decision| d.covered_runs.as_ref().is_some_and(|c| c.from <= bound);
    let mut plan = crate::pipeline::plan(policy, &state, &setup(engine, &req.target, &context))
        .map_err(|e| err(e.into()))?;
    if bound > 0 && (pending_fork.is_some() || reaches_back(plan.evaluated())) {
        drop(plan);
        for r in &mut state.runs {
            r.items.clear();
        }
        cx.fill_items(thread, 0, &mut state.runs)?;
        plan = crate::pipeline::plan(policy, &state, &setup(engine, &req.target, &context))
            .map_err(|e| err(e.into()))?;
    }
    // A merge-back waiting for this run but made for another provider or provider thread is
    // made again for the run; the run is decided with that one waiting.
    let rebound = match &pending_merge {
        Some((tid, hid)) => {
            let decision = plan.evaluated();
            let run_pt = rebind::run_provider_thread(decision, || {
                new_provider_thread_id(&state, &req.target)
            });
            rebind::rebind(
                cx,
                &path,
                engine,
                req,
                &state,
                decision,
                run_pt.as_deref(),
                (tid, hid),
            )?
        }
        None => None,
    };
    let (plan, context) = match rebound.as_ref().and_then(Rebound::waiting) {
        Some(waiting) => {
            drop(plan);
            let context = DecisionContext {
                waiting: Some(waiting),
                ..context
            };
            let plan = crate::pipeline::plan(policy, &state, &setup(engine, &req.target, &context))
                .map_err(|e| err(e.into()))?;
            (plan, context)
        }
        None => (plan, context),
    };
    let input = logged_input(engine, &state, &req.target, &context, &path)?;
    let outcome = crate::pipeline::finish(plan, &crate::deliver::CommandRunner).map_err(&err)?;
    Ok(Prepared {
        state,
        pending_fork,
        pending_merge,
        rebound,
        outcome,
        input,
    })
}

/// The decision context of a dispatch: a merge-back waiting for this run, as its own decision
/// delivered it, and the history of a windowed thread.
fn context(
    cx: &Cx<'_>,
    thread: &str,
    pending_merge: &Option<(String, String)>,
    history: Option<crate::facts::History>,
) -> Result<DecisionContext, StoreError> {
    Ok(DecisionContext {
        record_in: None,
        waiting: match pending_merge {
            Some((_, hid)) => Some(cx.waiting(thread, hid)?),
            None => None,
        },
        history,
    })
}

/// The request a dispatch decides on; `fork` is the fork's anchor when the run resolves a
/// pending fork.
fn request(req: &DispatchRequest, fork: Option<Option<ForkAnchor>>) -> Request {
    Request {
        provider: req.target.clone(),
        model: req.model.clone(),
        runtime_mode: req.runtime_mode.clone(),
        clean_context: req.clean_context,
        message: req.message.clone(),
        kind: if fork.is_some() {
            RequestKind::Fork
        } else {
            RequestKind::Dispatch
        },
        fork_anchor: fork.flatten(),
        at: req.at.clone(),
        workspace: req.workspace.clone(),
    }
}

/// [`prepare`] on a window of the thread (`store::window`): the runs after the target's last
/// clean native run and a history of those before. `None` when the thread has no window or
/// the decision on it could differ from the decision on the whole thread: its facts fall
/// short ([`crate::facts::Facts::window_short`]), its covered runs reach before the window,
/// or it fails (the whole thread then decides, and fails, as it would have).
fn prepare_windowed(
    cx: &Cx<'_>,
    path: &str,
    engine: &Engine,
    req: &DispatchRequest,
) -> Result<Option<Prepared>, StoreError> {
    let policy = engine.policy();
    let thread = req.thread.as_str();
    let Some((mut state, history)) = cx.load_window(thread, &req.target)? else {
        return Ok(None);
    };
    let base = history.base;
    cx.fill_items(thread, base, &mut state.runs)?;
    if refuse_running(&state, path).is_err() {
        return Ok(None);
    }
    // A waiting merge-back may have to be made again for this run (`rebind`), which needs
    // the whole thread's handoffs: the whole thread decides.
    match pending_merge_back(&state, path, next_run(&state)) {
        Ok(None) => {}
        Ok(Some(_)) | Err(_) => return Ok(None),
    }
    let pending_merge = None;
    let anchors: Vec<crate::state::Run> = history.target_last.iter().cloned().collect();
    let context = context(cx, thread, &pending_merge, Some(history))?;
    // Forks are never windowed: this is a plain dispatch.
    state.request = request(req, None);
    crate::workspace::enrich_before(&mut state, &anchors, &req.target);
    let Ok(plan) = crate::pipeline::plan(policy, &state, &setup(engine, &req.target, &context))
    else {
        return Ok(None);
    };
    let reaches_back = plan
        .evaluated()
        .covered_runs
        .as_ref()
        .is_some_and(|c| c.from <= base);
    if plan.window_short() || reaches_back {
        return Ok(None);
    }
    let input = logged_input(engine, &state, &req.target, &context, path)?;
    let Ok(finished) = crate::pipeline::finish_full(plan, &crate::deliver::CommandRunner) else {
        return Ok(None);
    };
    if finished.window_short {
        return Ok(None);
    }
    let outcome = finished.outcome;
    Ok(Some(Prepared {
        state,
        pending_fork: None,
        pending_merge,
        rebound: None,
        outcome,
        input,
    }))
}

/// Record a prepared dispatch in the write transaction `tx` and commit it.
fn record(
    tx: rusqlite::Transaction<'_>,
    path: &str,
    busy: std::time::Duration,
    (engine, req): (&Engine, &DispatchRequest),
    prepared: Prepared,
) -> Result<Dispatched, StoreError> {
    let cx = Cx::new(&tx, path, busy);
    let thread = req.thread.as_str();
    let Prepared {
        mut state,
        pending_fork,
        pending_merge,
        rebound,
        mut outcome,
        input,
    } = prepared;
    fault("dispatch:after_decide");
    let run = outcome.decision.run;
    if outcome.decision.strategy == Strategy::Unsupported {
        cx.log_decision(thread, "dispatch", &outcome.decision, input)?;

        // Nothing starts: the decision is logged and returned.
        commit(tx, path, busy, "committing the dispatch")?;
        return Ok(Dispatched {
            decision: outcome.decision,
            run,
            provider_thread: None,
            handoff: None,
            started: false,
            merge_back: None,
            fork_point: None,
            prompt: None,
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
    let provider_thread =
        open_provider_thread(&cx, &mut state, req, &outcome.decision.provider_thread)?;

    // The transfer: the fork's pending one resolves; a provider handoff gets a new one.
    let transfer = record_transfer(&cx, &state, thread, pending_fork, &outcome.decision)?;
    let new = NewHandoff {
        transfer,
        ..NewHandoff::own(&state, &outcome, run, provider_thread.clone())
    };
    let handoff = record_handoff(&cx, &mut outcome, engine.document_root(), new)?;
    // A merge-back made again for this run: recorded into the run's provider thread,
    // superseding the waiting one, its transfer re-linked, its decision logged.
    let pending_merge = rerecord_merge_back(
        &cx,
        (engine, req),
        run,
        provider_thread.as_deref(),
        pending_merge,
        rebound,
    )?;
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
    let prompt = rebind::one_prompt(
        handoff.as_ref(),
        merge_back.as_ref(),
        req.message.as_deref(),
    );
    cx.insert_run(
        thread,
        &Run {
            ordinal: run,
            provider: req.target.clone(),
            provider_thread: provider_thread.clone(),
            status: RunStatus::Running,
            handoff: handoff.as_ref().map(|h| h.id.clone()),
            items: Vec::new(),
            started_at: req.at.clone(),
            ended_at: None,
            workspace: None,
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
    commit(tx, path, busy, "committing the dispatch")?;
    fault("dispatch:after_commit");
    let fork_point = fork_point(&state, &outcome.decision);
    Ok(Dispatched {
        decision: outcome.decision,
        run,
        provider_thread,
        handoff,
        started: true,
        merge_back,
        fork_point,
        prompt,
    })
}

/// The provider thread a dispatch's run goes into (`action`): the one it resumes, or a new
/// one it creates or forks natively, recorded in `state` and the store.
fn open_provider_thread(
    cx: &Cx<'_>,
    state: &mut State,
    req: &DispatchRequest,
    action: &crate::decision::ProviderThreadAction,
) -> Result<Option<String>, StoreError> {
    let thread = req.thread.as_str();
    Ok(match action.action {
        ThreadAction::Resume => action.id.clone(),
        ThreadAction::Create | ThreadAction::ForkNative => {
            let id = new_provider_thread_id(state, &req.target);
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
    })
}

/// The transfer a dispatch records: a fork's pending one (`pending_fork`, its index in
/// `state.transfers`) resolves, natively or portably; a provider handoff gets a new one.
fn record_transfer(
    cx: &Cx<'_>,
    state: &State,
    thread: &str,
    pending_fork: Option<usize>,
    decision: &Decision,
) -> Result<Option<String>, StoreError> {
    let native = decision.strategy == Strategy::NativeFork;
    Ok(
        match pending_fork
            .and_then(|i| state.transfers.get(i))
            .map(|t| t.id.clone())
        {
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
                        decision.handoff_id
                    ],
                )?;
                Some(tid)
            }
            None if decision.needs_handoff() => {
                let tid = next_transfer_id(state);
                let t = Transfer {
                    id: tid.clone(),
                    kind: TransferType::ProviderHandoff,
                    status: TransferStatus::ResolvedPortable,
                    source_thread: Some(thread.to_string()),
                    target_thread: Some(thread.to_string()),
                    source_run: decision.covered_runs.as_ref().map(|c| c.to),
                    resolution: Some("portable_context".into()),
                    handoff: decision.handoff_id.clone(),
                };
                cx.insert_transfer(thread, cx.next_seq("transfers", thread)?, &t)?;
                Some(tid)
            }
            None => None,
        },
    )
}

/// A merge-back made again for this run (`rebound`): recorded into the run's provider thread,
/// superseding the waiting one, its transfer re-linked, its decision logged. Returns the
/// merge-back the run takes (transfer, handoff), if one waits (`pending_merge`).
fn rerecord_merge_back(
    cx: &Cx<'_>,
    (engine, req): (&Engine, &DispatchRequest),
    run: u32,
    provider_thread: Option<&str>,
    pending_merge: Option<(String, String)>,
    rebound: Option<Rebound>,
) -> Result<Option<(String, String)>, StoreError> {
    let thread = req.thread.as_str();
    Ok(match (pending_merge, rebound) {
        (Some((tid, _)), Some(mut rb)) => {
            let new = NewHandoff {
                thread: thread.to_string(),
                target_run: Some(run),
                to_provider_thread: provider_thread.map(str::to_string),
                transfer: Some(tid.clone()),
                supersedes: Some(rb.old.clone()),
                covered_thread: Some(rb.fork.clone()),
                // The fork's provider threads are the fork's, unknown in the parent.
                from_provider_threads: Vec::new(),
                summary: Some(rebind::summary(&rb)),
            };
            let old = rb.old.clone();
            match record_handoff(cx, &mut rb.outcome, engine.document_root(), new)? {
                Some(rec) => {
                    cx.supersede_handoff(thread, &old, false)?;
                    cx.exec(
                        "linking the merge-back to its new handoff",
                        "UPDATE transfers SET handoff = ?3 WHERE thread = ?1 AND id = ?2",
                        params![thread, tid, rec.id],
                    )?;
                    cx.log_decision(thread, "merge_back", &rb.outcome.decision, rb.input)?;
                    Some((tid, rec.id))
                }
                None => Some((tid, old)),
            }
        }
        (pending, _) => pending,
    })
}

/// Where a native fork forks: the parent's provider thread the decision names, the fork
/// point, and how many of that provider thread's turns (its live runs up to the fork point,
/// which the fork's state holds as the parent's) come with it.
fn fork_point(state: &State, decision: &Decision) -> Option<ForkPoint> {
    if decision.provider_thread.action != ThreadAction::ForkNative {
        return None;
    }
    let parent = state.thread.parent.as_ref()?;
    let source = decision.provider_thread.id.clone()?;
    let turns = state
        .runs
        .iter()
        .filter(|r| {
            r.ordinal <= parent.run
                && r.status != RunStatus::RolledBack
                && r.provider_thread.as_deref() == Some(source.as_str())
        })
        .count();
    Some(ForkPoint {
        parent_thread: parent.thread.clone(),
        provider_thread: source,
        run: parent.run,
        turn: u32::try_from(turns).unwrap_or(u32::MAX),
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

/// Whether a policy reads facts that depend on the items of runs the target has already
/// seen (`run.items` in any rule, `summary.full_chars`): then dispatch loads every item.
pub(crate) fn policy_reads_old_items(policy: &Policy) -> bool {
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

#[cfg(test)]
mod window_tests {
    //! A dispatch decided on a window of the thread decides, renders and logs what the same
    //! dispatch decides on the whole thread.
    use super::*;
    use crate::store::{complete_run, fork, merge_back, regenerate, rollback, HandoffOptions};

    const TARGETS: [&str; 4] = ["claude", "codex", "cursor", "copilot"];
    const POLICIES: [&str; 4] = ["default", "mcode", "t3code", "t3code-legacy"];

    /// The engine a store operation takes: `policy`, the embedded templates, documents under
    /// `root`.
    fn engine_at(policy: &Policy, root: std::path::PathBuf) -> Engine {
        Engine::from_parts(
            std::sync::Arc::new(policy.clone()),
            crate::render::TemplateSet::embedded(),
            Some(root),
        )
        .expect("builds")
    }

    /// [`engine_at`] the test's documents directory.
    fn window_test_engine(policy: &Policy) -> Engine {
        engine_at(policy, std::env::temp_dir().join("baton-window-test"))
    }

    /// The dispatch of `thread` to `target` prepared on its window and on the whole thread;
    /// `None` when there is no window or it falls short (the dispatch decides on the whole
    /// thread then).
    fn both_ways(
        store: &Store,
        policy: &Policy,
        thread: &str,
        target: &str,
    ) -> Option<(String, String)> {
        let cx = Cx::new(&store.conn, "test.db", std::time::Duration::ZERO);
        let req = DispatchRequest {
            thread: thread.into(),
            target: target.into(),
            message: Some("Carry on.".into()),
            ..Default::default()
        };
        let engine = engine_at(policy, "/tmp/baton-window-test".into());
        let windowed = prepare_windowed(&cx, "test.db", &engine, &req).expect("prepares")?;
        // With a re-check, prepare reads the whole thread.
        let whole =
            prepare(&cx, "test.db", &engine, &req, &mut Reads::rechecking()).expect("prepares");
        let show = |p: &Prepared| {
            format!(
                "{}\n{:?}",
                serde_json::to_string_pretty(&p.outcome.decision).expect("json"),
                p.outcome.rendered
            )
        };
        Some((show(&windowed), show(&whole)))
    }

    /// Compare both ways for every policy and target; how many were windowed. The stored
    /// explain (`Store::decide`) is compared with the engine's decision on the whole thread too.
    fn compare_all(store: &Store, thread: &str, what: &str) -> usize {
        let mut windowed = 0;
        let mut whole = store.load(thread).expect("loads");
        // Explain decides a fork after its first dispatch as a plain dispatch, as dispatch
        // itself does (`window::settle_request`).
        crate::store::window::settle_request(&mut whole);
        for name in POLICIES {
            let policy = crate::policy::load(name).expect("policy");
            let engine = crate::Engine::new(name).expect("engine");
            for target in TARGETS.iter().copied().map(Some).chain([None]) {
                if let Some(target) = target {
                    if let Some((w, f)) = both_ways(store, &policy, thread, target) {
                        assert_eq!(w, f, "{what}: {name} to {target}");
                        windowed += 1;
                    }
                }
                let stored = store.decide(&engine, thread, target).expect("reads");
                let direct = engine.decide(&whole, target);
                let show = |d: Result<crate::Decision, crate::Error>| match d {
                    Ok(d) => serde_json::to_string_pretty(&d).expect("json"),
                    Err(e) => format!("error: {e}"),
                };
                assert_eq!(
                    show(stored),
                    show(direct),
                    "{what}: explain, {name} to {target:?}"
                );
            }
        }
        windowed
    }

    fn files(dir: &str) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![std::path::PathBuf::from(dir)];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.extension().is_some_and(|x| x == "yaml") {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn every_example_decides_the_same_on_its_window() {
        let mut windowed = 0;
        for dir in ["examples", "docs/examples", "tests/fixtures"] {
            for path in files(dir) {
                let Ok(state) = crate::state::load_file(&path) else {
                    continue;
                };
                let mut store = Store::open_in_memory().expect("store");
                if store.import(&state).is_err() {
                    continue;
                }
                windowed += compare_all(&store, &state.thread.id, &path.display().to_string());
            }
        }
        assert!(windowed > 50, "only {windowed} dispatches were windowed");
    }

    fn items(o: u32) -> Vec<Item> {
        vec![
            Item::UserMessage {
                id: None,
                text: format!("Step {o}: keep going."),
            },
            Item::Command {
                id: None,
                command: "cargo test".into(),
                exit_code: Some(i64::from(o % 2)),
                output: Some(format!("run {o}")),
            },
            Item::AssistantMessage {
                id: None,
                text: format!("Run {o} done."),
            },
        ]
    }

    /// Dispatch to `target` and complete the run with `status`.
    fn turn(store: &mut Store, policy: &Policy, thread: &str, target: &str, status: RunStatus) {
        let req = DispatchRequest {
            thread: thread.into(),
            target: target.into(),
            message: Some("Next.".into()),
            ..Default::default()
        };
        let d = dispatch(store, &window_test_engine(policy), &req).expect("dispatches");
        if d.started {
            complete_run(store, thread, d.run, items(d.run), status).expect("completes");
        }
    }

    #[test]
    fn lifecycle_sequences_decide_the_same_on_their_window() {
        let policy = crate::policy::load("default").expect("policy");
        let state = crate::state::load_file(std::path::Path::new("examples/seed-switch.yaml"))
            .expect("loads");
        let mut store = Store::open_in_memory().expect("store");
        store.import(&state).expect("imports");
        let t = state.thread.id.clone();
        let mut windowed = 0;
        let statuses = [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Completed,
            RunStatus::Interrupted,
        ];
        for i in 0..24usize {
            let target = ["codex", "codex", "claude", "claude", "claude", "cursor"][i % 6];
            let status = statuses.get(i % 4).copied().unwrap_or_default();
            turn(&mut store, &policy, &t, target, status);
            windowed += compare_all(&store, &t, &format!("turn {i}"));
        }
        // Roll back the last four runs, then go on.
        let last = store.load(&t).expect("loads").runs.len() as u32;
        rollback(&mut store, &t, last - 4).expect("rolls back");
        windowed += compare_all(&store, &t, "after the rollback");
        for i in 0..6usize {
            turn(
                &mut store,
                &policy,
                &t,
                ["claude", "codex"][i % 2],
                RunStatus::Completed,
            );
            windowed += compare_all(&store, &t, &format!("after the rollback, turn {i}"));
        }
        // Regenerate the newest handoff.
        let newest = store
            .load(&t)
            .expect("loads")
            .handoffs
            .iter()
            .rev()
            .find(|h| h.status == HandoffStatus::Ready && h.covered_thread.is_none())
            .map(|h| h.id.clone());
        if let Some(h) = newest {
            let opts = HandoffOptions::default();
            if regenerate(&mut store, &window_test_engine(&policy), &t, &h, &opts).is_ok() {
                windowed += compare_all(&store, &t, "after regenerating");
            }
        }
        // Fork, work in the fork, merge back, go on in the parent.
        let at = store.load(&t).expect("loads").runs.len() as u32 - 2;
        let child = fork(&mut store, &t, at, Some("th_child"))
            .expect("forks")
            .child;
        for i in 0..4usize {
            turn(
                &mut store,
                &policy,
                &child,
                ["codex", "claude"][i % 2],
                RunStatus::Completed,
            );
        }
        let opts = HandoffOptions::default();
        merge_back(&mut store, &window_test_engine(&policy), &child, &opts).expect("merges back");
        windowed += compare_all(&store, &t, "with a merge-back waiting");
        for i in 0..4usize {
            turn(
                &mut store,
                &policy,
                &t,
                ["claude", "codex"][i % 2],
                RunStatus::Completed,
            );
            windowed += compare_all(&store, &t, &format!("after the merge-back, turn {i}"));
        }
        // Replaced by an import: the tally starts over.
        store.import_with(&state, true).expect("replaces");
        windowed += compare_all(&store, &t, "after import --replace");
        for i in 0..6usize {
            turn(
                &mut store,
                &policy,
                &t,
                ["codex", "claude"][i % 2],
                RunStatus::Completed,
            );
            windowed += compare_all(&store, &t, &format!("after the replace, turn {i}"));
        }
        assert!(windowed > 100, "only {windowed} dispatches were windowed");
    }

    /// A row of the tally: provider thread, provider, status, took a handoff, runs, first, last.
    type TallyRow = (Option<String>, String, String, bool, u32, u32, u32);

    /// The tally the triggers keep is the tally of the runs, after every kind of change.
    #[test]
    fn the_tally_follows_the_runs() {
        let policy = crate::policy::load("default").expect("policy");
        let state = crate::state::load_file(std::path::Path::new("examples/seed-switch.yaml"))
            .expect("loads");
        let mut store = Store::open_in_memory().expect("store");
        store.import(&state).expect("imports");
        let t = state.thread.id.clone();
        let check = |store: &Store, what: &str| {
            let q = |sql: &str| -> Vec<TallyRow> {
                let mut st = store.conn.prepare(sql).expect("prepares");
                st.query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                    ))
                })
                .expect("queries")
                .collect::<Result<_, _>>()
                .expect("rows")
            };
            let kept = q(
                "SELECT thread || ':' || COALESCE(provider_thread, '-'), provider, status,
                    has_handoff, runs, first, last
                 FROM run_tally ORDER BY 1, 2, 3, 4",
            );
            let counted = q(
                "SELECT thread || ':' || COALESCE(provider_thread, '-'), provider, status,
                    handoff IS NOT NULL, COUNT(*), MIN(ordinal), MAX(ordinal)
                 FROM runs GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
            );
            assert_eq!(kept, counted, "{what}");
        };
        check(&store, "imported");
        for i in 0..8usize {
            turn(
                &mut store,
                &policy,
                &t,
                ["codex", "claude"][i % 2],
                RunStatus::Completed,
            );
            check(&store, &format!("turn {i}"));
        }
        let last = store.load(&t).expect("loads").runs.len() as u32;
        rollback(&mut store, &t, last - 3).expect("rolls back");
        check(&store, "rolled back");
        fork(&mut store, &t, 2, Some("th_f")).expect("forks");
        check(&store, "forked");
        store.import_with(&state, true).expect("replaces");
        check(&store, "replaced");
    }
}
