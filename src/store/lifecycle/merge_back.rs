//! Merge a fork back into its parent.

use super::recheck::{prepare_then_record, Reads, Steps};
use super::{
    commit, decide, next_run, next_transfer_id, pending_merge_back, record_handoff, refuse_running,
    require_handoff, Dispatched, HandoffOptions, NewHandoff,
};
use crate::engine::Engine;
use crate::eval::{DecisionContext, RecordIn};
use crate::pipeline::Outcome;
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError, StoreErrorKind};

/// A merge-back's `summary`: the fork and its runs, then the text of every entry the policy
/// selected, in document order.
pub(super) fn merge_back_summary(child: &str, outcome: &Outcome) -> String {
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
///
/// When the policy names an external summarizer, the decision and the summary are made in a
/// read transaction, with no write lock held, and recorded in a write transaction afterwards
/// if neither the fork nor its parent has changed meanwhile (see [`merge_back_with_writer`]).
pub fn merge_back(
    store: &mut Store,
    engine: &Engine,
    child: &str,
    opts: &HandoffOptions,
) -> Result<Dispatched, StoreError> {
    merge_back_with_writer(store, engine, child, opts, || ())
}

/// [`merge_back`], holding the guard `writer` returns only while the write transaction is
/// open (the service passes its writer lock, so a summarizer never holds it).
///
/// Without an external summarizer, everything happens in one write transaction. With one, it
/// is prepared and recorded as a dispatch is ([`crate::store::dispatch_with_writer`]): decided,
/// summarized and rendered in a read transaction, recorded after the fork and the parent are
/// found as they were read, prepared once more if either changed, and refused with
/// [`StoreErrorKind::ThreadMoved`] (naming the thread that changed) if one changed again.
pub fn merge_back_with_writer<G>(
    store: &mut Store,
    engine: &Engine,
    child: &str,
    opts: &HandoffOptions,
    writer: impl Fn() -> G,
) -> Result<Dispatched, StoreError> {
    let steps = Steps {
        at_once: "merging back",
        deciding: "deciding a merge-back",
        recording: "recording a merge-back",
        again: "merge back again",
    };
    prepare_then_record(
        store,
        engine.policy(),
        &steps,
        writer,
        |cx, path, reads| prepare(cx, path, engine, child, opts, reads),
        |tx, path, busy, prepared| record(tx, path, busy, child, engine, prepared),
    )
}

/// The fork as `target`, the parent's provider, sees it: none of the fork's provider threads
/// are the parent's, so the whole delta since the fork point is handed over.
pub(super) fn fork_view(fork: &State, target: &str, message: Option<String>) -> State {
    let mut view = fork.clone();
    for p in &mut view.provider_threads {
        p.status = ProviderThreadStatus::Closed;
    }
    view.request = Request {
        provider: target.to_string(),
        model: None,
        runtime_mode: None,
        clean_context: false,
        message,
        kind: RequestKind::MergeBack,
        fork_anchor: None,
        at: fork.request.at.clone(),
        workspace: fork.request.workspace.clone(),
    };
    view
}

/// A decided, rendered merge-back, not yet recorded.
struct Prepared {
    /// The fork's last run.
    source_run: Option<u32>,
    /// The parent's id.
    parent_id: String,
    /// The parent's next run, which the handoff is for.
    run: u32,
    /// The provider thread the parent's next run would resume.
    parent_pt: Option<String>,
    /// The merge-back already waiting in the parent (this fork's), which this one supersedes.
    waiting: Option<String>,
    /// The parent's next transfer id.
    tid: String,
    hid: String,
    outcome: Outcome,
    input: serde_json::Value,
}

/// Load the fork and its parent, check the fork can be merged back, decide, select,
/// summarize and render: everything before the first write.
fn prepare(
    cx: &Cx<'_>,
    path: &str,
    engine: &Engine,
    child: &str,
    opts: &HandoffOptions,
    reads: &mut Reads,
) -> Result<Prepared, StoreError> {
    let path = path.to_string();
    let state = reads.load(cx, child)?;
    // A thread named as its own parent is no fork: merging it "back" would write into itself.
    let Some(parent_ref) = state.thread.parent.clone().filter(|p| p.thread != child) else {
        return Err(StoreError::new(
            path,
            StoreErrorKind::NotAFork {
                thread: child.into(),
            },
        ));
    };
    refuse_running(&state, &path)?;
    let own = state
        .runs
        .iter()
        .any(|r| r.ordinal > parent_ref.run && r.status != RunStatus::RolledBack);
    if !own {
        return Err(StoreError::new(
            path,
            StoreErrorKind::NothingToMerge {
                thread: child.into(),
                at: parent_ref.run,
            },
        ));
    }
    let parent = reads.load(cx, &parent_ref.thread)?;
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
            return Err(StoreError::new(
                path,
                StoreErrorKind::MergeBackWaiting {
                    thread: parent_id,
                    handoff: hid.clone(),
                    fork: from.clone(),
                },
            ));
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
    let view = fork_view(&state, &target, opts.message.clone());
    // The handoff is the parent's: its id, its next run, its document directory, and the
    // provider thread that run would resume. The evaluation numbers and names it so.
    let hid = crate::eval::next_handoff_id(&parent);
    let context = DecisionContext {
        record_in: Some(RecordIn {
            thread: parent_id.clone(),
            run,
            handoff_id: hid.clone(),
            provider_thread: parent_pt.clone(),
            // The run that takes it binds it (see `rebind`).
            bound_by_run: true,
        }),
        waiting: None,
        history: None,
    };
    let (outcome, input) = decide(engine, &view, &target, &path, &context)?;
    require_handoff(&outcome, &path, child, "nothing was merged back")?;
    Ok(Prepared {
        source_run: state.runs.last().map(|r| r.ordinal),
        parent_id,
        run,
        parent_pt,
        waiting: waiting.map(|(_, old)| old),
        tid: next_transfer_id(&parent),
        hid,
        outcome,
        input,
    })
}

/// Record a prepared merge-back in the parent, in the write transaction `tx`, and commit it.
fn record(
    tx: rusqlite::Transaction<'_>,
    path: &str,
    busy: std::time::Duration,
    child: &str,
    engine: &Engine,
    prepared: Prepared,
) -> Result<Dispatched, StoreError> {
    let cx = Cx::new(&tx, path, busy);
    let Prepared {
        source_run,
        parent_id,
        run,
        parent_pt,
        waiting,
        tid,
        hid,
        mut outcome,
        input,
    } = prepared;
    let supersedes = match waiting {
        Some(old) => {
            cx.supersede_handoff(&parent_id, &old, true)?;
            Some(old)
        }
        None => None,
    };
    let t = Transfer {
        id: tid.clone(),
        kind: TransferType::MergeBack,
        status: TransferStatus::Pending,
        source_thread: Some(child.to_string()),
        target_thread: Some(parent_id.clone()),
        source_run,
        resolution: None,
        handoff: Some(hid.clone()),
    };
    cx.insert_transfer(&parent_id, cx.next_seq("transfers", &parent_id)?, &t)?;
    let summary = merge_back_summary(child, &outcome);
    let record = record_handoff(
        &cx,
        &mut outcome,
        engine.document_root(),
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
    commit(tx, path, busy, "committing the merge-back")?;
    let prompt = record.as_ref().map(|h| h.inline.clone());
    Ok(Dispatched {
        decision: outcome.decision,
        run,
        provider_thread: parent_pt,
        handoff: record,
        started: false,
        merge_back: None,
        fork_point: None,
        prompt,
    })
}
