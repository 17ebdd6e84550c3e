//! Fork a thread at a run.

use super::{commit, fork_anchor, next_id, validated, ForkReport};
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{Store, StoreError, StoreErrorKind};

/// Why a thread cannot be forked at a run ([`StoreErrorKind::BadForkPoint`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkRefusal {
    /// The thread has no such run.
    #[error("the thread has {runs} runs")]
    NoSuchRun {
        /// How many runs it has.
        runs: usize,
    },
    /// The run is still running.
    #[error("the run is still running; complete it first")]
    Running,
    /// The run was rolled back.
    #[error("the run was rolled back")]
    RolledBack,
    /// The child's id is taken.
    #[error("a thread \"{child}\" is already in the database; name another child, or none for a fresh id")]
    ChildExists {
        /// The child id asked for (or generated).
        child: String,
    },
}

/// The fork's state: `parent`'s runs 1..=`at` (`source` is run `at`) with the handoffs,
/// transfers, provider threads and checkpoints they keep, lineage `parent: {thread, run: at}`,
/// a `kind: fork` request, and a new `pending` fork transfer, whose id is returned with it.
fn child_state(parent: &State, source: &Run, at: u32, child_id: &str) -> (State, String) {
    let thread = parent.thread.id.as_str();
    // Run `at` exists (checked by the caller), so this is runs 1..=at.
    let runs: Vec<Run> = parent.runs.get(..at as usize).unwrap_or_default().to_vec();
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
            id: child_id.to_string(),
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
            at: None,
            workspace: None,
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
        target_thread: Some(child_id.to_string()),
        source_run: Some(at),
        resolution: None,
        handoff: None,
    });
    state.transfers = transfers;
    (state, tid)
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
    let refuse = |why: ForkRefusal| {
        StoreError::new(
            path.clone(),
            StoreErrorKind::BadForkPoint {
                thread: thread.into(),
                run: at,
                why,
            },
        )
    };
    let Some(source) = parent.runs.get((at as usize).wrapping_sub(1)) else {
        return Err(refuse(ForkRefusal::NoSuchRun {
            runs: parent.runs.len(),
        }));
    };
    match source.status {
        RunStatus::Running => {
            return Err(refuse(ForkRefusal::Running));
        }
        RunStatus::RolledBack => return Err(refuse(ForkRefusal::RolledBack)),
        _ => {}
    }
    let child_id = match child {
        Some(c) => c.to_string(),
        None => {
            let mut k = 1u32;
            loop {
                let id = format!("{thread}-fork{k}");
                if !cx.thread_exists(&id)? {
                    break id;
                }
                k = k.saturating_add(1);
            }
        }
    };
    if cx.thread_exists(&child_id)? {
        return Err(refuse(ForkRefusal::ChildExists { child: child_id }));
    }
    let (state, tid) = child_state(&parent, source, at, &child_id);
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
