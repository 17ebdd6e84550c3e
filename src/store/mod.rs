//! The SQLite store (DESIGN §8): threads, runs, items, provider threads, handoffs, transfers,
//! checkpoints, grants and a decision log in one database file.
//!
//! Public entry point: [`Store`] (open, import, export/load) and the lifecycle operations in
//! [`lifecycle`] ([`dispatch`], [`complete_run`], [`regenerate`], [`rollback`], [`fork`],
//! [`merge_back`]). Every multi-row change is one `BEGIN IMMEDIATE` transaction that reloads
//! the thread inside the transaction, so concurrent callers serialize. Every decision is logged
//! with what it was decided from ([`DecisionInput`]); [`replay()`] decides the log again.

mod collect;
mod db;
mod error;
mod error_data;
pub use error::{StoreError, StoreErrorKind};
mod grants;
pub mod hint;
pub use crate::deliver::leftovers::STALE_GRACE;
pub use crate::deliver::{GcReport, HandoffLiveness, OffbandStore, Retention};
pub use crate::eval::{DecisionContext, EvalOptions, RecordIn, Waiting};
pub use crate::facts::{History, PrefixRun, Tally};
mod input_log;
mod io;
pub mod lifecycle;
#[cfg(feature = "postgres")]
mod log_refs;
mod packed;
mod partial;
mod patch;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod replay;
pub mod report;
mod row_error;
mod schema;
#[cfg(feature = "postgres")]
pub(crate) mod summarized;
mod trace_log;
mod url;
mod window;

use crate::state::State;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use db::{Db, DbError};
pub use lifecycle::{
    advise_rollback, complete_run, complete_run_with, dispatch, dispatch_with_writer, fork,
    merge_back, merge_back_with_writer, regenerate, regenerate_with_writer, rollback, AppAction,
    Completed, DispatchRequest, Dispatched, ForkPoint, ForkRefusal, ForkReport, HandoffOptions,
    HandoffRecord, NextRun, ProviderThreadChange, RegenerateRefusal, RollbackReport, RunEnd,
};
pub use replay::{
    decide_input, replay, DecisionInput, LoggedDecision, ReplayDifference, ReplayFilter,
    ReplayReport, ReplaySkipped,
};
pub use report::{DispatchReport, ImportReport, Recorded};
pub use schema::SCHEMA_VERSION;
pub use url::DbUrl;

/// How long a busy database is retried before [`StoreErrorKind::Busy`] (overridden by
/// `$BATON_BUSY_TIMEOUT_MS`).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A baton database.
pub struct Store {
    conn: Connection,
    path: Option<PathBuf>,
    busy: Duration,
    /// The name in messages of an in-memory store that stands for another database (the
    /// PostgreSQL backend's staging store names its server's URL).
    label: Option<String>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if needed) the database at `path` and migrate it to the current schema.
    /// WAL mode, foreign keys on, busy timeout [`DEFAULT_BUSY_TIMEOUT`].
    ///
    /// A database file this creates has mode 0600 (its `-wal` and `-shm` files take the same
    /// mode): it holds the same text as the 0600 off-band documents. An existing file keeps its
    /// mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Self::open_with_busy_timeout(path, DEFAULT_BUSY_TIMEOUT)
    }

    /// [`Store::open`] with another busy timeout (the `baton` command passes
    /// `$BATON_BUSY_TIMEOUT_MS`; the library reads no environment).
    pub fn open_with_busy_timeout(path: &Path, busy: Duration) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        create_private(path).map_err(|e| {
            StoreError::new(
                name.clone(),
                StoreErrorKind::Open {
                    reason: format!("cannot create the file: {e}"),
                },
            )
        })?;
        let conn = Connection::open(path).map_err(|e| {
            StoreError::new(name.clone(), StoreErrorKind::Open {
            reason: match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::CannotOpen) => {
                    "cannot create or open the file (does its directory exist, and is it writable?)"
                        .to_string()
                }
                _ => e.to_string(),
            },
        })
        })?;
        Self::setup(conn, Some(path.to_path_buf()), busy)
    }

    /// Open an existing database for reading only: nothing is written, not even a migration,
    /// so it works on a read-only file or filesystem. A database that would need a migration
    /// is refused with [`StoreErrorKind::NeedsMigration`], one newer than this baton with
    /// [`StoreErrorKind::TooNew`]. Every writing operation on it fails with
    /// [`StoreErrorKind::ReadOnly`] before it changes anything.
    ///
    /// A WAL database needs its `-shm` file to be read; where that cannot be created (a
    /// read-only directory), the file is opened as immutable, which is right as long as no
    /// one else can write it either.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let name = path.display().to_string();
        if !path.is_file() {
            return Err(StoreError::new(
                name,
                StoreErrorKind::Open {
                    reason: "no database file here".into(),
                },
            ));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open_err = |e: rusqlite::Error| {
            StoreError::new(
                name.clone(),
                StoreErrorKind::Open {
                    reason: e.to_string(),
                },
            )
        };
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        let conn = match schema::user_version(&conn) {
            Ok(_) => conn,
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen) => {
                drop(conn);
                Connection::open_with_flags(immutable_uri(path), flags).map_err(open_err)?
            }
            Err(e) => {
                return Err(sql_err(
                    &name,
                    DEFAULT_BUSY_TIMEOUT,
                    "configuring the connection",
                    e,
                ))
            }
        };
        let store = Store {
            conn,
            path: Some(path.to_path_buf()),
            busy: DEFAULT_BUSY_TIMEOUT,
            label: None,
        };
        store.apply_busy_timeout()?;
        let found = store.schema_version()?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::new(
                name,
                StoreErrorKind::TooNew {
                    found,
                    supported: SCHEMA_VERSION,
                },
            ));
        }
        if found < SCHEMA_VERSION {
            return Err(StoreError::new(
                name,
                StoreErrorKind::NeedsMigration {
                    found,
                    supported: SCHEMA_VERSION,
                },
            ));
        }
        Ok(store)
    }

    /// A private in-memory database (tests, one-shot tools).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| {
            StoreError::new(
                ":memory:",
                StoreErrorKind::Open {
                    reason: e.to_string(),
                },
            )
        })?;
        Self::setup(conn, None, DEFAULT_BUSY_TIMEOUT)
    }

    fn setup(conn: Connection, path: Option<PathBuf>, busy: Duration) -> Result<Store, StoreError> {
        let mut store = Store {
            conn,
            path,
            busy,
            label: None,
        };
        store.apply_busy_timeout()?;
        let name = store.name();
        let during = "configuring the connection";
        if store.path.is_some() {
            store
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
                .map_err(|e| {
                    // A read-only file or filesystem: SQLite opened the file read-only and
                    // cannot create the WAL's `-shm` next to it.
                    if store
                        .conn
                        .is_readonly(rusqlite::DatabaseName::Main)
                        .unwrap_or(false)
                    {
                        StoreError::new(
                            store.name(),
                            StoreErrorKind::ReadOnly {
                                during: "opening it for writing".into(),
                            },
                        )
                    } else {
                        store.err(during, e)
                    }
                })?;
            store
                .conn
                .execute_batch("PRAGMA synchronous=NORMAL")
                .map_err(|e| store.err(during, e))?;
        }
        store
            .conn
            .execute_batch("PRAGMA foreign_keys=ON")
            .map_err(|e| store.err(during, e))?;
        schema::migrate(&mut store.conn, &name, store.busy)?;
        Ok(store)
    }

    /// Change how long a busy database is retried before [`StoreErrorKind::Busy`].
    pub fn set_busy_timeout(&mut self, t: Duration) -> Result<(), StoreError> {
        self.busy = t;
        self.apply_busy_timeout()
    }

    fn apply_busy_timeout(&self) -> Result<(), StoreError> {
        self.conn
            .busy_timeout(self.busy)
            .map_err(|e| self.err("setting the busy timeout", e))
    }

    /// The database file (none in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        schema::user_version(&self.conn).map_err(|e| self.err("reading the schema version", e))
    }

    /// The database's name in messages.
    pub(crate) fn name(&self) -> String {
        match (&self.label, &self.path) {
            (Some(l), _) => l.clone(),
            (None, Some(p)) => p.display().to_string(),
            (None, None) => ":memory:".into(),
        }
    }

    /// A private in-memory database whose messages name `label` (another database it stands
    /// for: the PostgreSQL backend stages a unit of work in one).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn open_staging(label: &str) -> Result<Store, StoreError> {
        let mut store = Self::open_in_memory()?;
        store.label = Some(label.to_string());
        Ok(store)
    }

    pub(crate) fn err(&self, during: &str, e: rusqlite::Error) -> StoreError {
        sql_err(&self.name(), self.busy, during, e)
    }

    /// The raw connection, for tests and benchmarks that inspect the schema.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Import a state file's thread. Fails when the thread is already stored.
    pub fn import(&mut self, state: &State) -> Result<(), StoreError> {
        self.import_with(state, false)
    }

    /// Import a thread, replacing a stored thread of the same id when `replace` holds.
    pub fn import_with(&mut self, state: &State, replace: bool) -> Result<(), StoreError> {
        lifecycle::validated(state, &self.name())?;
        let (tx, name, busy) = self.begin("importing a thread")?;
        let cx = io::Cx::new(&tx, &name, busy);
        if cx.thread_exists(&state.thread.id)? {
            if !replace {
                return Err(StoreError::new(
                    name,
                    StoreErrorKind::ThreadExists {
                        thread: state.thread.id.clone(),
                    },
                ));
            }
            cx.delete_thread(&state.thread.id)?;
        }
        cx.insert_state(state)?;
        tx.commit()
            .map_err(|e| sql_err(&name, busy, "committing the import", e))
    }

    /// The stored thread as a state file (the same as [`Store::load`]).
    pub fn export(&self, thread: &str) -> Result<State, StoreError> {
        self.load(thread)
    }

    /// Load a thread as a [`State`].
    pub fn load(&self, thread: &str) -> Result<State, StoreError> {
        io::Cx::new(&self.conn, &self.name(), self.busy).load(thread)
    }

    /// Load a thread with the items of runs after `after` only; earlier runs carry their
    /// metadata (provider, provider thread, status, handoff) and no items. What dispatch
    /// reads for a delta; `load_items_after(t, u32::MAX)` loads no items at all.
    pub fn load_items_after(&self, thread: &str, after: u32) -> Result<State, StoreError> {
        io::Cx::new(&self.conn, &self.name(), self.busy).load_items_after(thread, after)
    }

    /// The thread `thread` was forked from, if it is a stored fork (`None` for a thread with
    /// no parent or one not stored). One indexed row read.
    pub fn parent_of(&self, thread: &str) -> Result<Option<String>, StoreError> {
        io::Cx::new(&self.conn, &self.name(), self.busy).parent_of(thread)
    }

    /// Every stored thread id, sorted.
    pub fn threads(&self) -> Result<Vec<String>, StoreError> {
        io::Cx::new(&self.conn, &self.name(), self.busy).threads()
    }

    /// `BEGIN IMMEDIATE`: take the write lock now (waiting up to the busy timeout), so that a
    /// read-then-write operation cannot interleave with another writer. Returns the
    /// transaction with the database's name and busy timeout, which its errors need.
    /// A read transaction (`BEGIN DEFERRED`): a snapshot of the database that takes no write
    /// lock, for deciding before [`Store::begin`] records.
    pub(crate) fn begin_read(
        &mut self,
        during: &str,
    ) -> Result<(rusqlite::Transaction<'_>, String, Duration), StoreError> {
        let name = self.name();
        let busy = self.busy;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)
            .map_err(|e| sql_err(&name, busy, during, e))?;
        Ok((tx, name, busy))
    }

    /// Refuse before anything happens: a read-only database must not let an operation get
    /// as far as writing an off-band document (or running a summarizer) it can then not record.
    pub(crate) fn refuse_read_only(&self, during: &str) -> Result<(), StoreError> {
        if self
            .conn
            .is_readonly(rusqlite::DatabaseName::Main)
            .unwrap_or(false)
        {
            return Err(StoreError::new(
                self.name(),
                StoreErrorKind::ReadOnly {
                    during: during.to_string(),
                },
            ));
        }
        Ok(())
    }

    pub(crate) fn begin(
        &mut self,
        during: &str,
    ) -> Result<(rusqlite::Transaction<'_>, String, Duration), StoreError> {
        self.refuse_read_only(during)?;
        let name = self.name();
        let busy = self.busy;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| sql_err(&name, busy, during, e))?;
        Ok((tx, name, busy))
    }
}

/// Map a rusqlite error: busy/locked becomes [`StoreErrorKind::Busy`].
pub(crate) fn sql_err(path: &str, busy: Duration, during: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::new(
            path.to_string(),
            StoreErrorKind::Busy {
                during: during.to_string(),
                waited_ms: u64::try_from(busy.as_millis()).unwrap_or(u64::MAX),
            },
        ),
        Some(ErrorCode::ReadOnly) => StoreError::new(
            path.to_string(),
            StoreErrorKind::ReadOnly {
                during: during.to_string(),
            },
        ),
        _ => StoreError::new(
            path.to_string(),
            StoreErrorKind::Sqlite {
                during: during.to_string(),
                source: e,
            },
        ),
    }
}

static FAULT_HOOK: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Test-only fault injection: install `hook`, which the store calls with the name of each
/// crash point it passes (`dispatch:after_decide`, `dispatch:after_handoff`,
/// `dispatch:after_commit`). A hook that aborts the process there shows what a `kill -9` at
/// that point would leave. On PostgreSQL an `*:after_commit` point is passed once the server
/// has committed (the staging store's own commit is not the database's). The first hook
/// installed stays; the library installs none (the debug build of the `baton` command installs
/// one from `$BATON_FAULT`).
#[doc(hidden)]
pub fn set_fault_hook(hook: fn(&str)) {
    let _ = FAULT_HOOK.set(hook);
}

/// Create `path` with mode 0600 if it does not exist (SQLite would create it 0644). Another
/// process creating it first is fine.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        // The umask can only clear bits; make the mode exactly 0600.
        Ok(f) => f.set_permissions(std::fs::Permissions::from_mode(0o600)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        // Let SQLite report a missing directory or a read-only filesystem in its own words.
        Err(_) => Ok(()),
    }
}

/// `file:<path>?immutable=1`, with the characters a URI path cannot hold escaped.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

pub(crate) fn fault(step: &str) {
    // Inside a staged PostgreSQL unit, the staging store's commit is not the database's: a
    // crash point after it is passed once the server has committed (`hold_commit_faults`).
    let held = HELD_FAULTS.with(|h| match h.borrow_mut().as_mut() {
        Some(held) if step.ends_with(":after_commit") => {
            held.push(step.to_string());
            true
        }
        _ => false,
    });
    if held {
        return;
    }
    if let Some(hook) = FAULT_HOOK.get() {
        hook(step);
    }
}

thread_local! {
    /// The `*:after_commit` crash points an operation on a staging store passed, held until
    /// the PostgreSQL transaction commits; `None` outside a staged unit.
    static HELD_FAULTS: std::cell::RefCell<Option<Vec<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// Run `op` (an operation on a staging store) with its `*:after_commit` crash points held
/// back; returns its result and the crash points to pass once the database has committed.
#[cfg(feature = "postgres")]
pub(crate) fn hold_commit_faults<T>(op: impl FnOnce() -> T) -> (T, Vec<String>) {
    let outer = HELD_FAULTS.with(|h| h.replace(Some(Vec::new())));
    let out = op();
    let held = HELD_FAULTS.with(|h| h.replace(outer)).unwrap_or_default();
    (out, held)
}

#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod store_tests;
