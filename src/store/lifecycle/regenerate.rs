//! Regenerate the handoff of a running run.

use super::recheck::{prepare_then_record, Reads, Steps};
use super::{
    commit, decide, record_handoff, require_handoff, Dispatched, HandoffOptions, NewHandoff,
};
use crate::engine::Engine;
use crate::eval::DecisionContext;
use crate::pipeline::Outcome;
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError, StoreErrorKind};
use rusqlite::params;

/// Why a handoff cannot be regenerated ([`StoreErrorKind::NotRegenerable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegenerateRefusal {
    /// A later handoff already replaced it.
    #[error("it is already superseded")]
    Superseded,
    /// It is a merge-back handoff from a fork.
    #[error("it is a merge-back from fork \"{fork}\"; merge the fork back again instead")]
    MergeBack {
        /// The fork it merged back.
        fork: String,
    },
    /// It was not made for a run of this thread.
    #[error("it is not for a run of this thread")]
    NotForARun,
    /// Its run is not running, or consumes another handoff.
    #[error("run {run} is not a running run that consumes it; only the handoff of the running run can be regenerated")]
    NotRunning {
        /// The run it was made for.
        run: u32,
    },
}

/// Make a new handoff for the running run that consumes `handoff`, superseding it. The old
/// row keeps everything but its status (`superseded`); the new one names it in `supersedes`.
///
/// When the policy names an external summarizer, the decision and the summary are made in a
/// read transaction, with no write lock held, and recorded in a write transaction afterwards
/// if the thread has not changed meanwhile (see [`regenerate_with_writer`]).
pub fn regenerate(
    store: &mut Store,
    engine: &Engine,
    thread: &str,
    handoff: &str,
    opts: &HandoffOptions,
) -> Result<Dispatched, StoreError> {
    regenerate_with_writer(store, engine, thread, handoff, opts, || ())
}

/// [`regenerate`], holding the guard `writer` returns only while the write transaction is
/// open (the service passes its writer lock, so a summarizer never holds it).
///
/// Without an external summarizer, everything happens in one write transaction. With one, it
/// is prepared and recorded as a dispatch is ([`crate::store::dispatch_with_writer`]): decided,
/// summarized and rendered in a read transaction, recorded after the thread is found as it was
/// read, prepared once more if it changed, and refused with [`StoreErrorKind::ThreadMoved`] if it
/// changed again.
pub fn regenerate_with_writer<G>(
    store: &mut Store,
    engine: &Engine,
    thread: &str,
    handoff: &str,
    opts: &HandoffOptions,
    writer: impl Fn() -> G,
) -> Result<Dispatched, StoreError> {
    let steps = Steps {
        at_once: "regenerating a handoff",
        deciding: "deciding a regeneration",
        recording: "recording a regeneration",
        again: "regenerate again",
    };
    prepare_then_record(
        store,
        engine.policy(),
        &steps,
        writer,
        |cx, path, reads| prepare(cx, path, engine, thread, handoff, opts, reads),
        |tx, path, busy, prepared| record(tx, path, busy, thread, handoff, engine, prepared),
    )
}

/// A decided, rendered regeneration, not yet recorded.
struct Prepared {
    /// The thread as it was before the run's dispatch, the old handoff superseded.
    state: State,
    /// The old handoff.
    old: Handoff,
    /// The run that consumes it.
    run: u32,
    provider_thread: Option<String>,
    outcome: Outcome,
    input: serde_json::Value,
}

/// Load the thread, check the handoff can be regenerated, decide, select, summarize and
/// render: everything before the first write.
fn prepare(
    cx: &Cx<'_>,
    path: &str,
    engine: &Engine,
    thread: &str,
    handoff: &str,
    opts: &HandoffOptions,
    reads: &mut Reads,
) -> Result<Prepared, StoreError> {
    let path = path.to_string();
    let mut state = reads.load(cx, thread)?;
    let refuse = |why: RegenerateRefusal| {
        StoreError::new(
            path.clone(),
            StoreErrorKind::NotRegenerable {
                thread: thread.into(),
                handoff: handoff.into(),
                why,
            },
        )
    };
    let Some(old) = state.handoffs.iter().find(|h| h.id == handoff).cloned() else {
        return Err(StoreError::new(
            path,
            StoreErrorKind::HandoffNotFound {
                thread: thread.into(),
                handoff: handoff.into(),
            },
        ));
    };
    if old.status == HandoffStatus::Superseded {
        return Err(refuse(RegenerateRefusal::Superseded));
    }
    if let Some(fork) = old.covered_thread.as_deref().filter(|f| *f != thread) {
        return Err(refuse(RegenerateRefusal::MergeBack { fork: fork.into() }));
    }
    let Some(t) = old.target_run else {
        return Err(refuse(RegenerateRefusal::NotForARun));
    };
    let run = state
        .runs
        .get((t as usize).wrapping_sub(1))
        .cloned()
        .filter(|r| r.status == RunStatus::Running && r.handoff.as_deref() == Some(handoff));
    let Some(run) = run else {
        return Err(refuse(RegenerateRefusal::NotRunning { run: t }));
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
    let (outcome, input) = decide(
        engine,
        &state,
        &run.provider,
        &path,
        &DecisionContext::default(),
    )?;
    require_handoff(
        &outcome,
        &path,
        thread,
        &format!("handoff {handoff} was left as it is"),
    )?;
    Ok(Prepared {
        state,
        old,
        run: t,
        provider_thread: pt,
        outcome,
        input,
    })
}

/// Record a prepared regeneration in the write transaction `tx` and commit it.
fn record(
    tx: rusqlite::Transaction<'_>,
    path: &str,
    busy: std::time::Duration,
    thread: &str,
    handoff: &str,
    engine: &Engine,
    prepared: Prepared,
) -> Result<Dispatched, StoreError> {
    let cx = Cx::new(&tx, path, busy);
    let Prepared {
        state,
        old,
        run: t,
        provider_thread: pt,
        mut outcome,
        input,
    } = prepared;
    // The transfer stays: it is relinked to the new handoff below.
    cx.supersede_handoff(thread, handoff, false)?;
    let new = NewHandoff {
        transfer: old.transfer.clone(),
        supersedes: Some(handoff.to_string()),
        ..NewHandoff::own(&state, &outcome, t, pt.clone())
    };
    let record = record_handoff(&cx, &mut outcome, engine.document_root(), new)?;
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
    commit(tx, path, busy, "committing the regeneration")?;
    let prompt = record.as_ref().map(|h| h.inline.clone());
    Ok(Dispatched {
        decision: outcome.decision,
        run: t,
        provider_thread: pt,
        handoff: record,
        started: false,
        merge_back: None,
        fork_point: None,
        prompt,
    })
}
