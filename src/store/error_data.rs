//! A store error's fields as data: which database, thread, run and handoff it is about, and
//! its stable code, for the service's error data and any caller that handles errors by kind.

use super::StoreError;

impl StoreError {
    /// The stable code of this error (`baton::store::thread_not_found`, ...): the variant's
    /// name, which does not change when its message does.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Open { .. } => "baton::store::open",
            StoreError::TooNew { .. } => "baton::store::too_new",
            StoreError::ReadOnly { .. } => "baton::store::read_only",
            StoreError::NeedsMigration { .. } => "baton::store::needs_migration",
            StoreError::Busy { .. } => "baton::store::busy",
            StoreError::Sqlite { .. } => "baton::store::sqlite",
            StoreError::Corrupt { .. } => "baton::store::corrupt",
            StoreError::ThreadNotFound { .. } => "baton::store::thread_not_found",
            StoreError::ThreadExists { .. } => "baton::store::thread_exists",
            StoreError::RunNotFound { .. } => "baton::store::run_not_found",
            StoreError::RunNotRunning { .. } => "baton::store::run_not_running",
            StoreError::BadRunStatus { .. } => "baton::store::bad_run_status",
            StoreError::RunInProgress { .. } => "baton::store::run_in_progress",
            StoreError::BadForkPoint { .. } => "baton::store::bad_fork_point",
            StoreError::BadRollback { .. } => "baton::store::bad_rollback",
            StoreError::NotAFork { .. } => "baton::store::not_a_fork",
            StoreError::NothingToMerge { .. } => "baton::store::nothing_to_merge",
            StoreError::MergeBackWaiting { .. } => "baton::store::merge_back_waiting",
            StoreError::BadMergeBack { .. } => "baton::store::bad_merge_back",
            StoreError::HandoffNotFound { .. } => "baton::store::handoff_not_found",
            StoreError::NotRegenerable { .. } => "baton::store::not_regenerable",
            StoreError::Pipeline { .. } => "baton::store::pipeline",
            StoreError::NoHandoff { .. } => "baton::store::no_handoff",
            StoreError::ThreadMoved { .. } => "baton::store::thread_moved",
            StoreError::InvalidState { .. } => "baton::store::invalid_state",
        }
    }

    /// The database the error is about, as given (`baton.db`), or `:memory:`.
    pub fn database(&self) -> &str {
        match self {
            StoreError::Open { path, .. }
            | StoreError::TooNew { path, .. }
            | StoreError::ReadOnly { path, .. }
            | StoreError::NeedsMigration { path, .. }
            | StoreError::Busy { path, .. }
            | StoreError::Sqlite { path, .. }
            | StoreError::Corrupt { path, .. }
            | StoreError::ThreadNotFound { path, .. }
            | StoreError::ThreadExists { path, .. }
            | StoreError::RunNotFound { path, .. }
            | StoreError::RunNotRunning { path, .. }
            | StoreError::BadRunStatus { path, .. }
            | StoreError::RunInProgress { path, .. }
            | StoreError::BadForkPoint { path, .. }
            | StoreError::BadRollback { path, .. }
            | StoreError::NotAFork { path, .. }
            | StoreError::NothingToMerge { path, .. }
            | StoreError::MergeBackWaiting { path, .. }
            | StoreError::BadMergeBack { path, .. }
            | StoreError::HandoffNotFound { path, .. }
            | StoreError::NotRegenerable { path, .. }
            | StoreError::Pipeline { path, .. }
            | StoreError::NoHandoff { path, .. }
            | StoreError::ThreadMoved { path, .. }
            | StoreError::InvalidState { path, .. } => path,
        }
    }

    /// The thread the error is about, when it is about one.
    pub fn thread(&self) -> Option<&str> {
        match self {
            StoreError::ThreadNotFound { thread, .. }
            | StoreError::ThreadExists { thread, .. }
            | StoreError::RunNotFound { thread, .. }
            | StoreError::RunNotRunning { thread, .. }
            | StoreError::BadRunStatus { thread, .. }
            | StoreError::RunInProgress { thread, .. }
            | StoreError::BadForkPoint { thread, .. }
            | StoreError::BadRollback { thread, .. }
            | StoreError::NotAFork { thread, .. }
            | StoreError::NothingToMerge { thread, .. }
            | StoreError::MergeBackWaiting { thread, .. }
            | StoreError::BadMergeBack { thread, .. }
            | StoreError::HandoffNotFound { thread, .. }
            | StoreError::NotRegenerable { thread, .. }
            | StoreError::Pipeline { thread, .. }
            | StoreError::NoHandoff { thread, .. }
            | StoreError::ThreadMoved { thread, .. }
            | StoreError::InvalidState { thread, .. } => Some(thread),
            _ => None,
        }
    }

    /// The run the error is about, when it is about one.
    pub fn run(&self) -> Option<u32> {
        match self {
            StoreError::RunNotFound { run, .. }
            | StoreError::RunNotRunning { run, .. }
            | StoreError::BadRunStatus { run, .. }
            | StoreError::RunInProgress { run, .. }
            | StoreError::BadForkPoint { run, .. }
            | StoreError::BadMergeBack { run, .. } => Some(*run),
            StoreError::BadRollback { to, .. } => Some(*to),
            StoreError::NothingToMerge { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// The handoff the error is about, when it is about one.
    pub fn handoff(&self) -> Option<&str> {
        match self {
            StoreError::MergeBackWaiting { handoff, .. }
            | StoreError::HandoffNotFound { handoff, .. }
            | StoreError::NotRegenerable { handoff, .. } => Some(handoff),
            _ => None,
        }
    }
}
