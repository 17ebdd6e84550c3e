//! Roll a thread back to an earlier run.

use super::{commit, ProviderThreadChange, RollbackReport};
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError, StoreErrorKind};
use rusqlite::params;

/// Roll the thread back to run `to`: later runs become `rolled_back`, handoffs covering any
/// of them or taken by any of them `superseded`, and provider threads that saw them
/// `rolled_back` when their provider can roll back, `divergent` otherwise (the next dispatch
/// sees the `diverged` signal).
pub fn rollback(store: &mut Store, thread: &str, to: u32) -> Result<RollbackReport, StoreError> {
    let (tx, path, busy) = store.begin("rolling back")?;
    let cx = Cx::new(&tx, &path, busy);
    let state = cx.load(thread)?;
    let n = u32::try_from(state.runs.len()).unwrap_or(u32::MAX);
    let refuse = |why: String| {
        StoreError::new(
            path.clone(),
            StoreErrorKind::BadRollback {
                thread: thread.into(),
                to,
                why,
            },
        )
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
            // A handoff goes with the run that took it: once that run is undone, the provider
            // thread it went into no longer holds it (one still waiting for its run stays).
            let taken_by_undone_run = h.target_run.is_some_and(|t| runs.contains(&t));
            h.status != HandoffStatus::Superseded
                && (taken_by_undone_run
                    // A merge-back covers its fork's runs, not this thread's.
                    || (h.covers_own_runs(thread) && h.covered.to > to))
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
            let own = |r: &&Run| r.provider_thread.as_deref() == Some(pt.id.as_str());
            let live = |r: &&Run| r.status != RunStatus::RolledBack;
            changes.push(ProviderThreadChange {
                id: pt.id.clone(),
                provider: pt.provider.clone(),
                status,
                runs_undone: state
                    .runs
                    .iter()
                    .filter(|r| runs.contains(&r.ordinal) && own(r))
                    .map(|r| r.ordinal)
                    .collect(),
                turns_kept: u32::try_from(
                    state
                        .runs
                        .iter()
                        .filter(|r| r.ordinal <= to && own(r) && live(r))
                        .count(),
                )
                .unwrap_or(u32::MAX),
                app_action: super::rollback_advice::default_action(status),
                next_run: None,
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
