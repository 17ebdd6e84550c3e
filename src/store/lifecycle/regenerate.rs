//! Regenerate the handoff of a running run.

use super::{
    commit, decide, record_handoff, require_handoff, Dispatched, HandoffOptions, NewHandoff,
};
use crate::eval::DecisionContext;
use crate::policy::Policy;
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError};
use rusqlite::params;

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
            "it is a merge-back from fork \"{fork}\"; merge the fork back again instead: `baton merge-back --db {} --thread {}`",
            crate::store::hint::sh(&path),
            crate::store::hint::sh(fork)
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
    state.runs.truncate((t as usize).saturating_sub(1));
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
        fork_point: None,
    })
}
