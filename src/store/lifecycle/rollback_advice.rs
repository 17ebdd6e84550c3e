//! What the app must do with each provider thread a rollback changed: the next run on its
//! provider, decided by the policy on the rolled-back thread exactly as `dispatch` would decide
//! it, and the action that follows from it (roll the provider thread back, discard it, or keep
//! it). Reporting only: nothing is written.

use super::{AppAction, NextRun, RollbackReport};
use crate::decision::ThreadAction;
use crate::state::{ProviderThreadStatus, Request, RequestKind, TransferStatus, TransferType};
use crate::store::{Store, StoreError};
use crate::summarize::Deterministic;
use crate::Engine;

/// The action when no policy was asked: a provider that can roll back rolls its thread back,
/// any other thread is discarded.
pub(super) fn default_action(status: ProviderThreadStatus) -> AppAction {
    if status == ProviderThreadStatus::RolledBack {
        AppAction::RollBack
    } else {
        AppAction::Discard
    }
}

/// Fill in `next_run` and `app_action` of every provider thread in `report`: the policy
/// decides the next run on each one's provider on the stored, rolled-back thread, as a
/// `dispatch` with no model, runtime mode or clean-context request would. The thread's
/// provider thread is `roll_back` when that run resumes it and its provider rolled back,
/// `keep` when it resumes it anyway (a policy without a `diverged` signal), and `discard`
/// when the run starts or resumes another thread. A decision the policy cannot make leaves the
/// thread's default action and no `next_run` (the dispatch would fail the same way).
///
/// The decision goes through the one path ([`Engine::plan`], [`Engine::finish`]), fitted to
/// the target's budget as the dispatch's is, with the engine's off-band root and templates
/// (those the dispatch would use) and no external summarizer.
pub fn advise_rollback(
    store: &Store,
    engine: &Engine,
    report: &mut RollbackReport,
) -> Result<(), StoreError> {
    if report.provider_threads.is_empty() {
        return Ok(());
    }
    let mut state = store.load(&report.thread)?;
    // As in dispatch: a fork whose first run has not started decides a `kind: fork` request.
    let pending_fork = state.thread.parent.is_some()
        && state.transfers.iter().any(|t| {
            t.kind == TransferType::Fork
                && t.status == TransferStatus::Pending
                && t.target_thread.as_deref() == Some(report.thread.as_str())
        });
    let anchor = state.request.fork_anchor.take();
    for change in &mut report.provider_threads {
        state.request = Request {
            provider: change.provider.clone(),
            model: None,
            runtime_mode: None,
            clean_context: false,
            message: None,
            kind: if pending_fork {
                RequestKind::Fork
            } else {
                RequestKind::Dispatch
            },
            fork_anchor: if pending_fork { anchor.clone() } else { None },
            at: None,
            workspace: None,
        };
        let decided = engine
            .plan(
                &state,
                Some(&change.provider),
                &crate::engine::Context::default(),
            )
            .and_then(|plan| engine.finish(plan, &Deterministic));
        let Ok(outcome) = decided else {
            continue;
        };
        let d = outcome.decision;
        let resumes = d.provider_thread.action == ThreadAction::Resume
            && d.provider_thread.id.as_deref() == Some(change.id.as_str());
        change.app_action = match (resumes, change.status) {
            (true, ProviderThreadStatus::RolledBack) => AppAction::RollBack,
            (true, _) => AppAction::Keep,
            (false, _) => AppAction::Discard,
        };
        change.next_run = Some(NextRun {
            run: d.run,
            strategy: d.strategy,
            provider_thread: d.provider_thread,
            stale: d.stale,
            because: d.decided_by.because,
        });
    }
    Ok(())
}
