//! A store error's fields as data: which database, thread, run and handoff it is about, and
//! its stable code, for the service's error data and any caller that handles errors by kind.

use super::{StoreError, StoreErrorKind};

impl StoreError {
    /// The stable code of this error (`baton::store::thread_not_found`, ...): the variant's
    /// name, which does not change when its message does.
    pub fn code(&self) -> &'static str {
        match self.kind() {
            StoreErrorKind::Open { .. } => "baton::store::open",
            StoreErrorKind::TooNew { .. } => "baton::store::too_new",
            StoreErrorKind::ReadOnly { .. } => "baton::store::read_only",
            StoreErrorKind::NeedsMigration { .. } => "baton::store::needs_migration",
            StoreErrorKind::Busy { .. } => "baton::store::busy",
            StoreErrorKind::Sqlite { .. } => "baton::store::sqlite",
            StoreErrorKind::Corrupt { .. } => "baton::store::corrupt",
            StoreErrorKind::ThreadNotFound { .. } => "baton::store::thread_not_found",
            StoreErrorKind::ThreadExists { .. } => "baton::store::thread_exists",
            StoreErrorKind::RunNotFound { .. } => "baton::store::run_not_found",
            StoreErrorKind::RunNotRunning { .. } => "baton::store::run_not_running",
            StoreErrorKind::BadRunStatus { .. } => "baton::store::bad_run_status",
            StoreErrorKind::RunInProgress { .. } => "baton::store::run_in_progress",
            StoreErrorKind::BadForkPoint { .. } => "baton::store::bad_fork_point",
            StoreErrorKind::BadRollback { .. } => "baton::store::bad_rollback",
            StoreErrorKind::NotAFork { .. } => "baton::store::not_a_fork",
            StoreErrorKind::NothingToMerge { .. } => "baton::store::nothing_to_merge",
            StoreErrorKind::MergeBackWaiting { .. } => "baton::store::merge_back_waiting",
            StoreErrorKind::BadMergeBack { .. } => "baton::store::bad_merge_back",
            StoreErrorKind::HandoffNotFound { .. } => "baton::store::handoff_not_found",
            StoreErrorKind::NotRegenerable { .. } => "baton::store::not_regenerable",
            StoreErrorKind::Pipeline { .. } => "baton::store::pipeline",
            StoreErrorKind::NoHandoff { .. } => "baton::store::no_handoff",
            StoreErrorKind::ThreadMoved { .. } => "baton::store::thread_moved",
            StoreErrorKind::InvalidState { .. } => "baton::store::invalid_state",
        }
    }

    /// The thread the error is about, when it is about one.
    pub fn thread(&self) -> Option<&str> {
        match self.kind() {
            StoreErrorKind::ThreadNotFound { thread, .. }
            | StoreErrorKind::ThreadExists { thread, .. }
            | StoreErrorKind::RunNotFound { thread, .. }
            | StoreErrorKind::RunNotRunning { thread, .. }
            | StoreErrorKind::BadRunStatus { thread, .. }
            | StoreErrorKind::RunInProgress { thread, .. }
            | StoreErrorKind::BadForkPoint { thread, .. }
            | StoreErrorKind::BadRollback { thread, .. }
            | StoreErrorKind::NotAFork { thread, .. }
            | StoreErrorKind::NothingToMerge { thread, .. }
            | StoreErrorKind::MergeBackWaiting { thread, .. }
            | StoreErrorKind::BadMergeBack { thread, .. }
            | StoreErrorKind::HandoffNotFound { thread, .. }
            | StoreErrorKind::NotRegenerable { thread, .. }
            | StoreErrorKind::Pipeline { thread, .. }
            | StoreErrorKind::NoHandoff { thread, .. }
            | StoreErrorKind::ThreadMoved { thread, .. }
            | StoreErrorKind::InvalidState { thread, .. } => Some(thread),
            _ => None,
        }
    }

    /// The run the error is about, when it is about one.
    pub fn run(&self) -> Option<u32> {
        match self.kind() {
            StoreErrorKind::RunNotFound { run, .. }
            | StoreErrorKind::RunNotRunning { run, .. }
            | StoreErrorKind::BadRunStatus { run, .. }
            | StoreErrorKind::RunInProgress { run, .. }
            | StoreErrorKind::BadForkPoint { run, .. }
            | StoreErrorKind::BadMergeBack { run, .. } => Some(*run),
            StoreErrorKind::BadRollback { to, .. } => Some(*to),
            StoreErrorKind::NothingToMerge { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// The handoff the error is about, when it is about one.
    pub fn handoff(&self) -> Option<&str> {
        match self.kind() {
            StoreErrorKind::MergeBackWaiting { handoff, .. }
            | StoreErrorKind::HandoffNotFound { handoff, .. }
            | StoreErrorKind::NotRegenerable { handoff, .. } => Some(handoff),
            _ => None,
        }
    }
}
