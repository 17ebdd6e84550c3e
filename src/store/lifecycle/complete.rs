//! Complete a running run.

use super::{commit, Completed};
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError, StoreErrorKind};
use rusqlite::{params, OptionalExtension};

/// Finish a running run: append its items and mark it completed, failed or interrupted.
/// The handoff it consumed becomes `consumed` (and its transfer too), so the provider
/// thread's coverage now includes the handoff's runs and this run.
///
/// The cost follows the run, not the thread's history: the run's row, the ids of the new
/// items (looked up in the `items_by_id` index) and the rows it changes are all it reads.
pub fn complete_run(
    store: &mut Store,
    thread: &str,
    run: u32,
    items: Vec<Item>,
    status: RunStatus,
) -> Result<Completed, StoreError> {
    complete_run_with(store, thread, run, items, status, &super::RunEnd::default())
}

/// [`complete_run`] that also records when the run ended and the workspace it ended in
/// (`runs[].ended_at`, `runs[].workspace`; what is `None` in `end` is left as it was).
pub fn complete_run_with(
    store: &mut Store,
    thread: &str,
    run: u32,
    items: Vec<Item>,
    status: RunStatus,
    end: &super::RunEnd,
) -> Result<Completed, StoreError> {
    let (tx, path, busy) = store.begin("completing a run")?;
    let cx = Cx::new(&tx, &path, busy);
    if !matches!(
        status,
        RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
    ) {
        return Err(StoreError::new(
            path,
            StoreErrorKind::BadRunStatus {
                thread: thread.into(),
                run,
                status: status.as_str().into(),
            },
        ));
    }
    if !cx.thread_exists(thread)? {
        return Err(cx.not_found(thread));
    }
    let during = "loading the run";
    let row: Option<(String, Option<String>)> = tx
        .query_row(
            "SELECT status, handoff FROM runs WHERE thread = ?1 AND ordinal = ?2",
            params![thread, run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| cx.err(during, e))?;
    let Some((stored_status, handoff_consumed)) = row else {
        let runs: u32 = tx
            .query_row(
                "SELECT COALESCE(MAX(ordinal), 0) FROM runs WHERE thread = ?1",
                [thread],
                |r| r.get(0),
            )
            .map_err(|e| cx.err(during, e))?;
        return Err(StoreError::new(
            path,
            StoreErrorKind::RunNotFound {
                thread: thread.into(),
                run,
                runs,
            },
        ));
    };
    if stored_status != RunStatus::Running.as_str() {
        return Err(StoreError::new(
            path,
            StoreErrorKind::RunNotRunning {
                thread: thread.into(),
                run,
                status: stored_status,
            },
        ));
    }
    let first: usize = tx
        .query_row(
            "SELECT COUNT(*) FROM items WHERE thread = ?1 AND run = ?2",
            params![thread, run],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .map_err(|e| cx.err(during, e))?;
    // The new items must keep the thread valid: their ids unique in the thread.
    check_item_ids(&cx, thread, run, first, &items)?;
    cx.insert_items(thread, run, first, &items)?;
    cx.exec(
        "completing the run",
        "UPDATE runs SET status = ?3, ended_at = COALESCE(?4, ended_at),
             workspace = COALESCE(?5, workspace)
         WHERE thread = ?1 AND ordinal = ?2",
        params![
            thread,
            run,
            status.as_str(),
            end.ended_at,
            cx.workspace_json(end.workspace.as_ref())?
        ],
    )?;
    // What the run took (its handoff, and a merge-back alongside it) is consumed: the
    // transfers say so; the handoffs stay `ready`, and the run names the one it consumed.
    // The `status IN (...)` term repeats the condition of the partial index `transfers_open`
    // (schema 8): SQLite uses a partial index only when the query names its condition.
    cx.exec(
        "consuming the transfers",
        "UPDATE transfers SET status = 'consumed'
         WHERE thread = ?1 AND type IN ('provider_handoff', 'merge_back')
           AND status = 'resolved_portable' AND status IN ('resolved_native', 'resolved_portable')
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

/// The place (`run`, `n`: the item's 1-based index) whose generated id `id` is, when it has
/// the generated form `r<run>.<n>` (decimal numbers as `state::item_id` writes them).
pub(crate) fn generated_place(id: &str) -> Option<(u32, i64)> {
    fn number<T: std::str::FromStr>(s: &str) -> Option<T> {
        let plain = !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'));
        plain.then(|| s.parse().ok()).flatten()
    }
    let (run, n) = id.strip_prefix('r')?.split_once('.')?;
    let run: u32 = number(run)?;
    let n: i64 = number(n)?;
    (n >= 1).then_some((run, n))
}

/// Refuse new items of `run` (appended after its `first` stored ones) whose ids are already
/// taken in the thread or repeat among themselves, with the validator's message
/// (`runs[i].items[j].id: duplicate item id "x" (also at runs[k].items[l])`).
fn check_item_ids(
    cx: &Cx<'_>,
    thread: &str,
    run: u32,
    first: usize,
    items: &[Item],
) -> Result<(), StoreError> {
    let at = |ordinal: u32, idx: usize| {
        format!(
            "runs[{}].items[{idx}]",
            (ordinal as usize).saturating_sub(1)
        )
    };
    // An item whose id is the one generated for its place (`r<run>.<n>`) is not in the index
    // `items_by_id` (schema 8): an id of that form is looked up at that place.
    let mut named = cx
        .conn
        .prepare_cached(
            "SELECT run, idx FROM items WHERE thread = ?1 AND item_id = ?2
               AND item_id <> 'r' || run || '.' || (idx + 1)
             ORDER BY run DESC, idx DESC LIMIT 1",
        )
        .map_err(|e| cx.err("checking the items' ids", e))?;
    let mut placed = cx
        .conn
        .prepare_cached(
            "SELECT run, idx FROM items WHERE thread = ?1 AND run = ?2 AND idx = ?3
               AND item_id = ?4",
        )
        .map_err(|e| cx.err("checking the items' ids", e))?;
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut problems = Vec::new();
    for (j, item) in items.iter().enumerate() {
        let idx = first.saturating_add(j);
        let id = item_id(item, run, idx);
        let mut stored: Option<(u32, i64)> = named
            .query_row(params![thread, id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| cx.err("checking the items' ids", e))?;
        if let Some((r, n)) = generated_place(&id) {
            let at_place: Option<(u32, i64)> = placed
                .query_row(params![thread, r, n.saturating_sub(1), id], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
                .map_err(|e| cx.err("checking the items' ids", e))?;
            stored = stored.max(at_place);
        }
        // As the validator does: the latest earlier item with the same id.
        let prev = match seen.get(&id) {
            Some(&k) => Some(at(run, k)),
            None => stored.map(|(r, i)| at(r, usize::try_from(i).unwrap_or(usize::MAX))),
        };
        let here = at(run, idx);
        if let Some(prev) = prev {
            problems.push(StateProblem {
                at: format!("{here}.id"),
                line: None,
                column: None,
                message: format!("duplicate item id \"{id}\" (also at {prev})"),
            });
        }
        seen.insert(id, idx);
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(StoreError::new(
        cx.path.clone(),
        StoreErrorKind::InvalidState {
            thread: thread.into(),
            source: Box::new(StateError {
                file: format!("{}#{thread}", cx.path),
                problems,
            }),
        },
    ))
}
