//! The store's error: the database it is about, once, and what went wrong as a
//! [`StoreErrorKind`] with its own fields (thread, run, handoff, ...). `Display` is the
//! message only (`no thread "t1" in the database`); the shells put the database in front
//! (`baton.db: error: ...`) and add their advice.

use super::{ForkRefusal, RegenerateRefusal};

/// Everything that can go wrong in the store: the database ([`StoreError::database`]) and
/// what went wrong ([`StoreError::kind`]), each kind naming the thread, run or handoff it
/// refers to.
#[derive(Debug)]
pub struct StoreError {
    database: String,
    kind: StoreErrorKind,
}

impl StoreError {
    /// An error about `database` (the path as given, `baton.db`, a URL, or `:memory:`).
    pub fn new(database: impl Into<String>, kind: StoreErrorKind) -> StoreError {
        StoreError {
            database: database.into(),
            kind,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> &StoreErrorKind {
        &self.kind
    }

    /// What went wrong, by value.
    pub fn into_kind(self) -> StoreErrorKind {
        self.kind
    }

    /// The database the error is about, as given (`baton.db`), or `:memory:`.
    pub fn database(&self) -> &str {
        &self.database
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// What went wrong in the store; the database is [`StoreError::database`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The database file cannot be created or opened.
    #[error("cannot open database: {reason}")]
    Open {
        /// Why it cannot be opened.
        reason: String,
    },
    /// The database was written by a newer baton (its schema version is above [`SCHEMA_VERSION`](super::SCHEMA_VERSION)).
    #[error("database schema version {found} is newer than this baton supports ({supported}); upgrade baton")]
    TooNew {
        /// The schema version found in the file (`PRAGMA user_version`).
        found: i64,
        /// The schema version this baton writes ([`SCHEMA_VERSION`](super::SCHEMA_VERSION)).
        supported: i64,
    },
    /// A write on a database opened with [`Store::open_read_only`](super::Store::open_read_only), or on a read-only file
    /// or filesystem.
    #[error("the database is read-only here, so it cannot be written while {during}; check the file's permissions and its filesystem")]
    ReadOnly {
        /// What the store was doing, e.g. `completing the run`.
        during: String,
    },
    /// A read-only open of a database with an older schema, which only a writable open can
    /// migrate.
    #[error("database schema version {found} is older than this baton's ({supported}), and a read-only open cannot migrate it")]
    NeedsMigration {
        /// The schema version found in the file (`PRAGMA user_version`).
        found: i64,
        /// The schema version this baton writes ([`SCHEMA_VERSION`](super::SCHEMA_VERSION)).
        supported: i64,
    },
    /// Another process held the database lock for longer than the busy timeout.
    #[error("the database is locked by another process (still busy after {waited_ms} ms while {during}); try again when it has finished")]
    Busy {
        /// What the store was doing, e.g. `completing the run`.
        during: String,
        /// How long the lock was waited for, in milliseconds.
        waited_ms: u64,
    },
    /// Any other SQLite error.
    #[error("database error while {during}: {source}")]
    Sqlite {
        /// What the store was doing, e.g. `completing the run`.
        during: String,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A stored row cannot be read back (a bad enum name, bad JSON, ...).
    #[error("stored row is unreadable: {what}: {why}")]
    Corrupt {
        /// Which row or value, e.g. `handoff H1: strategy`.
        what: String,
        /// Why it cannot be read.
        why: String,
    },
    /// No thread with this id in the database.
    #[error("no thread \"{thread}\" in the database")]
    ThreadNotFound {
        /// The thread id.
        thread: String,
    },
    /// An import of a thread that is already stored, without `replace`.
    #[error("thread \"{thread}\" is already in the database")]
    ThreadExists {
        /// The thread id.
        thread: String,
    },
    /// The thread has no run with this ordinal.
    #[error("thread \"{thread}\" has no run {run} (it has {runs} runs)")]
    RunNotFound {
        /// The thread id.
        thread: String,
        /// The run ordinal.
        run: u32,
        /// How many runs the thread has.
        runs: u32,
    },
    /// [`complete_run`](super::complete_run) on a run that is not `running`.
    #[error("run {run} of thread \"{thread}\" is {status}, not running; only a running run can be completed")]
    RunNotRunning {
        /// The thread id.
        thread: String,
        /// The run ordinal.
        run: u32,
        /// The run's current status.
        status: String,
    },
    /// [`complete_run`](super::complete_run) with a status a run cannot end in (not completed, failed or
    /// interrupted).
    #[error("run {run} of thread \"{thread}\" cannot end as `{status}`; a run ends as completed, failed or interrupted")]
    BadRunStatus {
        /// The thread id.
        thread: String,
        /// The run ordinal.
        run: u32,
        /// The status asked for.
        status: String,
    },
    /// A dispatch (or another operation that starts a run) while the last run is still running.
    #[error(
        "run {run} of thread \"{thread}\" is still running; complete it before dispatching again"
    )]
    RunInProgress {
        /// The thread id.
        thread: String,
        /// The run ordinal.
        run: u32,
    },
    /// [`fork`](super::fork()) at a run the thread cannot be forked at.
    #[error("cannot fork thread \"{thread}\" at run {run}: {why}")]
    BadForkPoint {
        /// The thread id.
        thread: String,
        /// The run ordinal.
        run: u32,
        /// Why it is refused.
        why: ForkRefusal,
    },
    /// [`rollback`](super::rollback()) to a run the thread cannot be rolled back to.
    #[error("cannot roll thread \"{thread}\" back to run {to}: {why}")]
    BadRollback {
        /// The thread id.
        thread: String,
        /// The run asked to roll back to.
        to: u32,
        /// Why it is refused.
        why: String,
    },
    /// [`merge_back`](super::merge_back()) on a thread that is not a fork.
    #[error("thread \"{thread}\" is not a fork, so it has nothing to merge back")]
    NotAFork {
        /// The thread that is not a fork.
        thread: String,
    },
    /// [`merge_back`](super::merge_back()) of a fork with no runs of its own after the fork point.
    #[error("fork \"{thread}\" has no runs of its own after the fork point (run {at}); nothing to merge back")]
    NothingToMerge {
        /// The fork.
        thread: String,
        /// The fork point (the parent's run the fork was taken at).
        at: u32,
    },
    /// [`merge_back`](super::merge_back()) while another fork's merge-back still waits for the parent's next run.
    #[error("thread \"{thread}\" already has a merge-back from fork \"{fork}\" (handoff {handoff}) waiting for its next run; dispatch it first, then merge this fork back")]
    MergeBackWaiting {
        /// The parent thread.
        thread: String,
        /// The merge-back handoff that waits.
        handoff: String,
        /// The fork whose merge-back is waiting.
        fork: String,
    },
    /// A pending merge-back transfer names no ready handoff for the run it was made for.
    #[error("thread \"{thread}\": merge-back transfer {transfer} is pending, but it names no ready handoff for run {run}; supersede the transfer or merge the fork back again")]
    BadMergeBack {
        /// The thread id.
        thread: String,
        /// The transfer id.
        transfer: String,
        /// The run the transfer's handoff was made for.
        run: u32,
    },
    /// The thread has no handoff with this id.
    #[error("thread \"{thread}\" has no handoff \"{handoff}\"")]
    HandoffNotFound {
        /// The thread id.
        thread: String,
        /// The handoff id.
        handoff: String,
    },
    /// [`regenerate`](super::regenerate()) of a handoff that cannot be made again: already superseded, a merge-back,
    /// or not the handoff of the thread's running run.
    #[error("cannot regenerate handoff \"{handoff}\" of thread \"{thread}\": {why}")]
    NotRegenerable {
        /// The thread id.
        thread: String,
        /// The handoff id.
        handoff: String,
        /// Why it is refused.
        why: RegenerateRefusal,
    },
    /// Deciding or rendering failed inside a lifecycle operation; `source` keeps its own
    /// located error (an evaluation or a render error).
    #[error("thread \"{thread}\": {source}")]
    Pipeline {
        /// The thread id.
        thread: String,
        /// The pipeline's own error.
        #[source]
        source: Box<crate::pipeline::PipelineError>,
    },
    /// An operation that needs a handoff (regenerate, merge-back) got a decision that makes
    /// none.
    #[error("thread \"{thread}\": the policy's decision for {target} is `{strategy}`, which makes no handoff; {why}")]
    NoHandoff {
        /// The thread id.
        thread: String,
        /// The target provider of the decision.
        target: String,
        /// The strategy the policy decided (`no_handoff`, `native_fork`, `unsupported`).
        strategy: String,
        /// What the operation needed a handoff for (`nothing was merged back`).
        why: String,
    },
    /// The thread changed while a dispatch, a regeneration or a merge-back ran its external
    /// summarizer outside the write transaction, and changed again when the operation decided
    /// once more; nothing was written.
    #[error("thread \"{thread}\" changed while its summarizer ran ({what}), and again after a second try; nothing was recorded: {again} when the thread's other writers have finished")]
    ThreadMoved {
        /// The thread id.
        thread: String,
        /// What changed, e.g. `its runs: 2 runs (last: run 2 running), now 3 runs (last: run 3 running)`.
        what: String,
        /// What to do instead: `dispatch again`, `regenerate again`, `merge back again`.
        again: String,
    },
    /// The thread would not validate after the operation (or as imported); nothing was written.
    #[error("thread \"{thread}\" would be invalid: {source}")]
    InvalidState {
        /// The thread id.
        thread: String,
        /// Every validation problem, located in the state.
        #[source]
        source: Box<crate::state::StateError>,
    },
}

/// The database is the location; a decision or template failure inside an operation gives
/// its own location inside the message (`thread "t": policy.policy:4:3: error: ...`).
impl crate::error::Located for StoreError {
    fn location(&self) -> Option<String> {
        Some(self.database.clone())
    }

    fn message(&self) -> String {
        match &self.kind {
            StoreErrorKind::Pipeline { thread, source } => {
                format!(
                    "thread \"{thread}\": {}",
                    crate::error::located(source.as_ref())
                )
            }
            _ => self.kind.to_string(),
        }
    }
}
