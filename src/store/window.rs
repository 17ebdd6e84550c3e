//! A dispatch's window: the runs after the target's last clean native run (and the handoffs
//! they need), plus a [`History`] of the runs before, read from the `run_tally` table that
//! triggers on `runs` keep up to date (schema 7). What a window leaves out, and why the facts
//! computed on it are those of the whole thread, is in `facts::History`; the facts say when
//! they fall short, and the dispatch then loads the whole thread.

use super::io::Cx;
use super::StoreError;
use crate::facts::{History, PrefixRun, Tally};
use crate::state::{ProviderThreadStatus, RunStatus, State};
use rusqlite::params;

/// Statuses of the runs a history lists one by one (every status but `completed`).
const LISTED: [RunStatus; 4] = [
    RunStatus::Failed,
    RunStatus::Interrupted,
    RunStatus::Running,
    RunStatus::RolledBack,
];

fn status_of(s: &str) -> Option<RunStatus> {
    [RunStatus::Completed]
        .into_iter()
        .chain(LISTED)
        .find(|x| x.as_str() == s)
}

/// Where a window starts ([`Cx::window_base`]).
pub(crate) struct WindowBase {
    /// The thread's runs, tallied.
    pub(crate) tally: Vec<Tally>,
    /// The last run before the window.
    pub(crate) base: u32,
    /// The thread's last run.
    pub(crate) last: u32,
}

impl Cx<'_> {
    /// The tally of a thread's runs.
    fn tally(&self, thread: &str) -> Result<Option<Vec<Tally>>, StoreError> {
        let raw = self.rows(
            "reading the runs' tally",
            "SELECT provider_thread, provider, status, has_handoff, runs, first, last
             FROM run_tally WHERE thread = ?1
             ORDER BY provider, provider_thread, status, has_handoff",
            [thread],
            |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, u32>(4)?,
                    r.get::<_, u32>(5)?,
                    r.get::<_, u32>(6)?,
                ))
            },
        )?;
        let mut out = Vec::with_capacity(raw.len());
        for (provider_thread, provider, status, has_handoff, runs, first, last) in raw {
            // A status this baton does not write: no window.
            let Some(status) = status_of(&status) else {
                return Ok(None);
            };
            out.push(Tally {
                provider_thread,
                provider,
                status,
                has_handoff,
                runs,
                first,
                last,
            });
        }
        Ok(Some(out))
    }

    /// The runs at or before `base` that are not completed, oldest first.
    fn prefix(
        &self,
        thread: &str,
        tally: &[Tally],
        base: u32,
    ) -> Result<Vec<PrefixRun>, StoreError> {
        let mut out = Vec::new();
        for t in tally
            .iter()
            .filter(|t| t.status != RunStatus::Completed && t.first <= base)
        {
            let ordinals = self.rows(
                "reading the runs before the window",
                "SELECT ordinal FROM runs INDEXED BY runs_by_key
                 WHERE thread = ?1 AND provider_thread IS ?2 AND provider = ?3 AND status = ?4
                   AND (handoff IS NOT NULL) = ?5 AND ordinal <= ?6",
                params![
                    thread,
                    t.provider_thread,
                    t.provider,
                    t.status.as_str(),
                    t.has_handoff,
                    base
                ],
                |r| r.get::<_, u32>(0),
            )?;
            out.extend(ordinals.into_iter().map(|ordinal| PrefixRun {
                ordinal,
                provider: t.provider.clone(),
                status: t.status,
                has_handoff: t.has_handoff,
            }));
        }
        out.sort_by_key(|p| p.ordinal);
        Ok(out)
    }

    /// The id the thread's next handoff gets, as `eval::next_handoff_id` gives it on the whole
    /// thread: `H<n>` for the smallest n above the number of handoffs that is not taken.
    fn next_handoff_id(&self, thread: &str) -> Result<String, StoreError> {
        if let Some(id) = super::partial::next_handoff_id(thread) {
            return Ok(id);
        }
        let count: u64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM handoffs WHERE thread = ?1",
                [thread],
                |r| r.get(0),
            )
            .map_err(|e| self.err("counting handoffs", e))?;
        let mut n = count.saturating_add(1);
        loop {
            let id = format!("H{n}");
            let free = self
                .rows(
                    "numbering a handoff",
                    "SELECT 1 FROM handoffs WHERE thread = ?1 AND id = ?2",
                    params![thread, id],
                    |_| Ok(()),
                )?
                .is_empty();
            if free {
                return Ok(id);
            }
            n = n.saturating_add(1);
        }
    }

    /// Where a dispatch's window of `thread` for `target` starts: the target's last clean
    /// native run (`base`; the window is the runs after it), the thread's last run and its
    /// tally. `None` when a window would not help (no such run, a fork) or the tally does not
    /// add up. What the window holds is [`Cx::load_window`]'s; the PostgreSQL backend asks
    /// this first to stage only what the window reads.
    pub(crate) fn window_base(
        &self,
        thread: &str,
        target: &str,
    ) -> Result<Option<WindowBase>, StoreError> {
        if self.parent_of(thread)?.is_some() {
            return Ok(None);
        }
        let Some(tally) = self.tally(thread)? else {
            return Ok(None);
        };
        let last = tally.iter().map(|t| t.last).max().unwrap_or(0);
        let count: u64 = tally.iter().map(|t| u64::from(t.runs)).sum();
        if count != u64::from(last) {
            return Ok(None);
        }
        // The target's thread, as the facts find it: the newest run of the target on an open
        // thread of its own.
        let pts = self.provider_threads(thread)?;
        let closed = |id: &str| {
            pts.iter().any(|p| {
                p.id == id && p.provider == target && p.status == ProviderThreadStatus::Closed
            })
        };
        let pt = tally
            .iter()
            .filter(|t| t.provider == target)
            .filter_map(|t| Some((t.last, t.provider_thread.as_deref()?)))
            .filter(|(_, id)| !closed(id))
            .max_by_key(|(last, _)| *last)
            .map(|(_, id)| id.to_string());
        let Some(pt) = pt else {
            return Ok(None);
        };
        // Its last clean native run (a guess: the policy's `eligible` decides; the facts check).
        let base = tally
            .iter()
            .filter(|t| {
                t.provider_thread.as_deref() == Some(pt.as_str())
                    && !t.has_handoff
                    && matches!(
                        t.status,
                        RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
                    )
            })
            .map(|t| t.last)
            .max()
            .unwrap_or(0)
            .min(last.saturating_sub(1));
        if base == 0 {
            return Ok(None);
        }
        Ok(Some(WindowBase { tally, base, last }))
    }

    /// The thread as a dispatch to `target` needs it: its runs after the target's last clean
    /// native run (no items yet), the handoffs those runs and the target's coverage need,
    /// every provider thread, transfer and checkpoint, and the [`History`] of the runs before.
    /// `None` when a window would not help (no such run, a fork) or the tally does not add
    /// up; the caller loads the whole thread then.
    pub(crate) fn load_window(
        &self,
        thread: &str,
        target: &str,
    ) -> Result<Option<(State, History)>, StoreError> {
        let Some(WindowBase { tally, base, last }) = self.window_base(thread, target)? else {
            return Ok(None);
        };
        let state = self.load_range(thread, base, u32::MAX, Some(base))?;
        let contiguous = state.runs.first().map(|r| r.ordinal) == Some(base.saturating_add(1))
            && state.runs.last().map(|r| r.ordinal) == Some(last)
            && u64::try_from(state.runs.len()).ok() == Some(u64::from(last.saturating_sub(base)));
        // Every handoff a run of the window took is in the window.
        let handoffs_in = state.runs.iter().all(|r| {
            r.handoff
                .as_deref()
                .is_none_or(|h| state.handoffs.iter().any(|x| x.id == h))
        });
        if !contiguous || !handoffs_in {
            return Ok(None);
        }
        let history = History {
            base,
            prefix: self.prefix(thread, &tally, base)?,
            tally,
            next_handoff_id: self.next_handoff_id(thread)?,
            first_run: self
                .runs_upto(thread, 0, 1)?
                .into_iter()
                .find(|r| r.started_at.is_some() || r.status == RunStatus::RolledBack),
            target_last: self
                .runs_upto(thread, base.saturating_sub(1), base)?
                .into_iter()
                .find(|r| r.started_at.is_some() || r.ended_at.is_some() || r.workspace.is_some()),
        };
        Ok(Some((state, history)))
    }
}

impl super::Store {
    /// The decision `engine` makes for the request of stored `thread` on `target` (`None`: the
    /// request's provider): the decision [`crate::Engine::decide`] makes on [`Self::load`]'s
    /// state, with its `budget`, read from a window of the thread when that decides the same
    /// (docs/store.md#speed), else from the whole thread. What `baton explain --db --thread`
    /// and the service's `explain` of a stored thread answer. The outer error is the store's
    /// (no such thread, an unreadable row), the inner one the decision's.
    pub fn decide(
        &self,
        engine: &crate::Engine,
        thread: &str,
        target: Option<&str>,
    ) -> Result<Result<crate::Decision, crate::Error>, StoreError> {
        let name = self.name();
        let during = "reading a thread to decide";
        // One snapshot for the tally, the window and (when it falls short) the whole thread.
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| super::sql_err(&name, self.busy, during, e))?;
        let cx = Cx::new(&tx, &name, self.busy);
        let provider = match target {
            Some(t) => Some(t.to_string()),
            None => tx
                .query_row(
                    "SELECT json_extract(request, '$.provider') FROM threads WHERE id = ?1",
                    [thread],
                    |r| r.get::<_, Option<String>>(0),
                )
                .ok()
                .flatten(),
        };
        if let Some(provider) = provider {
            if let Some((mut state, history)) = cx.load_window(thread, &provider)? {
                cx.fill_items(thread, history.base, &mut state.runs)?;
                settle_request(&mut state);
                if let Some(o) = crate::pipeline::explain_windowed(
                    engine.policy(),
                    &state,
                    &engine.setup(target, &crate::engine::Context::default()),
                    &history,
                    &crate::summarize::Deterministic,
                ) {
                    return Ok(Ok(o.decision));
                }
            }
        }
        let mut state = cx.load(thread)?;
        settle_request(&mut state);
        Ok(engine.decide(&state, target))
    }
}

/// A fork's stored request says `kind: fork` after its first dispatch too (the record of what
/// that dispatch decided); deciding again, once no fork transfer to the thread is pending, is
/// a plain dispatch, as `dispatch` itself decides it.
pub(crate) fn settle_request(state: &mut crate::state::State) {
    use crate::state::{RequestKind, TransferStatus, TransferType};
    if state.request.kind != RequestKind::Fork {
        return;
    }
    let id = state.thread.id.as_str();
    let pending = state.transfers.iter().any(|t| {
        t.kind == TransferType::Fork
            && t.status == TransferStatus::Pending
            && t.target_thread.as_deref() == Some(id)
    });
    if !pending {
        state.request.kind = RequestKind::Dispatch;
        state.request.fork_anchor = None;
    }
}
