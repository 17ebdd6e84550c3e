//! Merge a fork back into its parent.

use super::{
    commit, decide, next_run, next_transfer_id, pending_merge_back, record_handoff, refuse_running,
    require_handoff, Dispatched, HandoffOptions, NewHandoff,
};
use crate::eval::{DecisionContext, RecordIn};
use crate::pipeline::Outcome;
use crate::policy::Policy;
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError};

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
        history: None,
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
        fork_point: None,
    })
}
