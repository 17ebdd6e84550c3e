//! Complete a running run.

use super::{commit, validated, Completed};
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError};
use rusqlite::params;

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
    let n = u32::try_from(state.runs.len()).unwrap_or(u32::MAX);
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
