//! The store's PostgreSQL backend (feature `postgres`, docs/store.md#postgresql): a database
//! several `baton` processes and servers share.
//!
//! [`PgStore`] connects (`postgres://` or `postgresql://` URL), creates and migrates the schema
//! (its versions count as SQLite's; `src/store/pg/schema.rs`), and gives the backend's
//! concurrency primitives: a transaction that holds a thread's lock ([`PgStore::with_thread`]:
//! an advisory transaction lock keyed by the thread id, so writers of one thread serialize and
//! writers of different threads never wait for each other), retried a bounded number of times
//! on a serialization failure or a deadlock, and the pre-grants ([`GrantStore`]), whose one-shot
//! use is one conditional `UPDATE ... RETURNING`. A thread's import and export
//! ([`PgStore::import`], [`PgStore::export`]) and a whole database's copy between the backends
//! ([`PgStore::copy_from_sqlite`], [`PgStore::copy_to_sqlite`]) go through the SQLite store's
//! own row code. Every error is a [`PgError`] naming the URL without its password.

mod copy;
mod schema;
mod stage;

pub use copy::{CopyError, CopyReport};
#[cfg(feature = "unstable")]
pub use stage::staging_counts;
pub(crate) use stage::{LogRows, Plan};

/// The rust-postgres client this backend is built on, for callers of
/// [`PgStore::with_thread`] (whose operation gets a [`postgres::Transaction`]).
pub use postgres;

use super::url::redact_url;
use crate::deliver::{DeliveryError, Grant, GrantStore};
use postgres::error::SqlState;
use postgres::{Client, NoTls, Transaction};
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// How many times a transaction that failed on a serialization failure or a deadlock is run
/// again before [`PgError::Conflict`].
pub const MAX_TRIES: u32 = 5;

/// The advisory lock key of schema migrations (two servers starting at once migrate once).
const MIGRATION_LOCK: i64 = 0x6261_746f_6e5f_6462; // "baton_db"

/// Everything that can go wrong on the PostgreSQL backend. `Display` is the message (what
/// happened, and what to do about the server or the data); the URL (its password replaced by
/// `***`) is a field, the error's [`Located::location`](crate::Located::location).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The URL is not a PostgreSQL connection string.
    #[error(
        "not a PostgreSQL URL: {reason}; write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE"
    )]
    BadUrl {
        /// The URL, without its password.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server cannot be reached, or refused the connection.
    #[error("cannot connect to the PostgreSQL server: {reason}; check that the server is running and that the URL's host, port, user, password and database are right")]
    Unreachable {
        /// The URL, without its password.
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// The connection was lost during an operation; its transaction was rolled back by the
    /// server, so nothing of it was written.
    #[error("the connection to the PostgreSQL server was lost while {during}; nothing of it was recorded (the server rolled the transaction back); run it again when the server is reachable")]
    Lost {
        /// The URL, without its password.
        url: String,
        /// What the store was doing.
        during: String,
    },
    /// The database's schema is newer than this baton's.
    #[error("database schema version {found} is newer than this baton supports ({supported}); upgrade baton")]
    TooNew {
        /// The URL, without its password.
        url: String,
        /// The version found in `baton_schema`.
        found: i64,
        /// [`crate::store::SCHEMA_VERSION`].
        supported: i64,
    },
    /// The database's schema is older than this baton's and the open may not migrate it.
    #[error("database schema version {found} is older than this baton's ({supported})")]
    NeedsMigration {
        /// The URL, without its password.
        url: String,
        /// The version found (0: no baton tables).
        found: i64,
        /// [`crate::store::SCHEMA_VERSION`].
        supported: i64,
    },
    /// Concurrent transactions kept conflicting (serialization failures or deadlocks) for
    /// [`MAX_TRIES`] tries; each try was rolled back.
    #[error("{during} conflicted with concurrent writers {tries} times (serialization failure or deadlock) and was given up; nothing of it was recorded; run it again")]
    Conflict {
        /// The URL, without its password.
        url: String,
        /// What the store was doing.
        during: String,
        /// How many times it was tried.
        tries: u32,
    },
    /// A stored value this baton cannot read or carry between the backends.
    #[error("stored row is unreadable: {what}: {why}")]
    Corrupt {
        /// The URL, without its password.
        url: String,
        /// Which table and column, or which row.
        what: String,
        /// Why.
        why: String,
    },
    /// Any other error of the server or the client.
    #[error("database error while {during}: {source}")]
    Sql {
        /// The URL, without its password.
        url: String,
        /// What the store was doing.
        during: String,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
}

impl PgError {
    /// The database's URL, without its password.
    pub fn url(&self) -> &str {
        match self {
            PgError::BadUrl { url, .. }
            | PgError::Unreachable { url, .. }
            | PgError::Lost { url, .. }
            | PgError::TooNew { url, .. }
            | PgError::NeedsMigration { url, .. }
            | PgError::Conflict { url, .. }
            | PgError::Corrupt { url, .. }
            | PgError::Sql { url, .. } => url,
        }
    }

    /// Whether running the whole transaction again may succeed (a serialization failure or a
    /// deadlock: the server rolled it back and nothing of it is left).
    fn retryable(&self) -> bool {
        match self {
            PgError::Sql { source, .. } => matches!(
                source.code(),
                Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED
            ),
            _ => false,
        }
    }
}

/// A PostgreSQL error is located at its database's URL (without its password).
impl crate::error::Located for PgError {
    fn location(&self) -> Option<String> {
        Some(self.url().to_string()).filter(|u| !u.is_empty())
    }
}

/// A connection to a baton database on PostgreSQL.
pub struct PgStore {
    client: RefCell<Client>,
    url: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.url).finish()
    }
}

impl PgStore {
    /// Connect to `url` and migrate its schema to [`crate::store::SCHEMA_VERSION`] (creating
    /// it in an empty database). Two processes opening one database at once migrate it once.
    pub fn open(url: &str) -> Result<PgStore, PgError> {
        let store = Self::connect(url)?;
        store.migrate()?;
        Ok(store)
    }

    /// Connect to `url` without migrating; a database whose schema is not this baton's is
    /// refused ([`PgError::NeedsMigration`], [`PgError::TooNew`]).
    pub fn open_existing(url: &str) -> Result<PgStore, PgError> {
        let store = Self::connect(url)?;
        let found = store.schema_version()?;
        store.check_version(found)?;
        if found < crate::store::SCHEMA_VERSION {
            return Err(PgError::NeedsMigration {
                url: store.url.clone(),
                found,
                supported: crate::store::SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    fn connect(url: &str) -> Result<PgStore, PgError> {
        let shown = redact_url(url);
        let config: postgres::Config =
            url.parse().map_err(|e: postgres::Error| PgError::BadUrl {
                url: shown.clone(),
                reason: e.to_string(),
            })?;
        let client = config.connect(NoTls).map_err(|e| PgError::Unreachable {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
        Ok(PgStore {
            client: RefCell::new(client),
            url: shown,
        })
    }

    /// The URL, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the connection to the server is gone (a pool drops such a connection instead
    /// of handing it out again).
    pub fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    fn err(&self, during: &str, e: postgres::Error) -> PgError {
        sql_err(&self.url, during, e)
    }

    fn check_version(&self, found: i64) -> Result<(), PgError> {
        if found > crate::store::SCHEMA_VERSION {
            return Err(PgError::TooNew {
                url: self.url.clone(),
                found,
                supported: crate::store::SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    /// The schema version of the database (0 when it has no baton tables).
    pub fn schema_version(&self) -> Result<i64, PgError> {
        let during = "reading the schema version";
        let mut client = self.client.borrow_mut();
        read_version(&mut *client).map_err(|e| self.err(during, e))
    }

    /// Bring the schema up to [`crate::store::SCHEMA_VERSION`]: the pending migrations in one
    /// transaction, under an advisory lock that a second migrating process waits for. Returns
    /// the version it found.
    pub fn migrate(&self) -> Result<i64, PgError> {
        let during = "migrating the schema";
        let mut client = self.client.borrow_mut();
        let mut tx = client.transaction().map_err(|e| self.err(during, e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|e| self.err(during, e))?;
        let found = read_version(&mut tx).map_err(|e| self.err(during, e))?;
        self.check_version(found)?;
        if found == crate::store::SCHEMA_VERSION {
            return Ok(found);
        }
        if found == 0 {
            tx.batch_execute("CREATE TABLE baton_schema (version BIGINT NOT NULL)")
                .map_err(|e| self.err(during, e))?;
            tx.execute("INSERT INTO baton_schema (version) VALUES (0)", &[])
                .map_err(|e| self.err(during, e))?;
        }
        for (i, sql) in schema::MIGRATIONS.iter().enumerate() {
            let to = schema::FIRST_VERSION.saturating_add(i64::try_from(i).unwrap_or(i64::MAX));
            if to <= found {
                continue;
            }
            let during = format!("migrating the schema to version {to}");
            tx.batch_execute(sql).map_err(|e| self.err(&during, e))?;
            tx.execute("UPDATE baton_schema SET version = $1", &[&to])
                .map_err(|e| self.err(&during, e))?;
        }
        tx.commit()
            .map_err(|e| self.err("committing the schema migration", e))?;
        Ok(found)
    }

    /// Run `op` in one transaction that holds `thread`'s lock
    /// (`pg_advisory_xact_lock(hashtextextended(thread, 0))`, released at commit or rollback)
    /// at READ COMMITTED: every statement after the lock sees what the thread's previous
    /// writers committed, and no other writer of the thread runs until this one ends. Writers
    /// of other threads do not wait (a hash collision only makes two threads share a lock).
    ///
    /// A serialization failure or a deadlock rolls the transaction back and runs `op` again,
    /// at most [`MAX_TRIES`] times; `op` must therefore do nothing outside the transaction.
    /// Any other error rolls it back: nothing of `op` is written.
    pub fn with_thread<T>(
        &self,
        thread: &str,
        during: &str,
        mut op: impl FnMut(&mut Transaction<'_>) -> Result<T, postgres::Error>,
    ) -> Result<T, PgError> {
        let mut client = self.client.borrow_mut();
        for _ in 0..MAX_TRIES {
            let attempt = (|| {
                let mut tx = client.transaction()?;
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                    &[&thread],
                )?;
                let out = op(&mut tx)?;
                tx.commit()?;
                Ok(out)
            })()
            .map_err(|e| self.err(during, e));
            match attempt {
                Err(e) if e.retryable() => continue,
                other => return other,
            }
        }
        Err(PgError::Conflict {
            url: self.url.clone(),
            during: during.to_string(),
            tries: MAX_TRIES,
        })
    }

    /// Every stored thread id, sorted.
    pub fn threads(&self) -> Result<Vec<String>, PgError> {
        let mut client = self.client.borrow_mut();
        let rows = client
            .query("SELECT id FROM threads ORDER BY id", &[])
            .map_err(|e| self.err("listing the threads", e))?;
        rows.iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(|e| self.err("listing the threads", e))
    }

    /// The thread `thread` was forked from (`None` for a thread that is not a fork, or no
    /// such thread): one indexed read, as on SQLite.
    pub fn parent_of(&self, thread: &str) -> Result<Option<String>, PgError> {
        let during = "reading a thread's parent";
        let row = self
            .client
            .borrow_mut()
            .query_opt(
                "SELECT parent_thread FROM threads WHERE id = $1",
                &[&thread],
            )
            .map_err(|e| self.err(during, e))?;
        match row {
            Some(r) => r.try_get(0).map_err(|e| self.err(during, e)),
            None => Ok(None),
        }
    }

    /// The first `<thread>-fork<n>` no stored thread has (a fork named by none).
    pub(crate) fn free_fork_id(&self, thread: &str) -> Result<String, PgError> {
        let during = "naming a fork";
        let mut client = self.client.borrow_mut();
        let mut k = 1u32;
        loop {
            let id = format!("{thread}-fork{k}");
            let taken = client
                .query_opt("SELECT 1 FROM threads WHERE id = $1", &[&id])
                .map_err(|e| self.err(during, e))?
                .is_some();
            if !taken {
                return Ok(id);
            }
            k = k.saturating_add(1);
        }
    }

    /// For off-band GC: whether `thread`'s handoff is live, superseded or unknown, read after
    /// the thread's writers have finished: the lookup takes the thread's advisory lock shared
    /// (`pg_advisory_xact_lock_shared`), which waits for a writer holding it (a delivery in
    /// progress commits its handoff row or rolls back first) and makes no writer of another
    /// thread wait.
    pub fn handoff_liveness(
        &self,
        thread: &str,
        handoff: &str,
    ) -> Result<crate::deliver::HandoffLiveness, PgError> {
        use crate::deliver::HandoffLiveness;
        let during = "looking up a handoff";
        let mut client = self.client.borrow_mut();
        let mut tx = client.transaction().map_err(|e| self.err(during, e))?;
        tx.execute(
            "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))",
            &[&thread],
        )
        .map_err(|e| self.err(during, e))?;
        let status: Option<String> = tx
            .query_opt(
                "SELECT status FROM handoffs WHERE thread = $1 AND id = $2",
                &[&thread, &handoff],
            )
            .and_then(|r| r.map(|r| r.try_get(0)).transpose())
            .map_err(|e| self.err(during, e))?;
        tx.commit().map_err(|e| self.err(during, e))?;
        Ok(match status.as_deref() {
            None => HandoffLiveness::Unknown,
            Some("superseded") => HandoffLiveness::Superseded,
            Some(_) => HandoffLiveness::Live,
        })
    }

    fn grant_err(&self, e: postgres::Error) -> DeliveryError {
        DeliveryError::Store(self.err("using a pre-grant", e).to_string())
    }
}

/// The version in `baton_schema`, 0 when the table does not exist.
fn read_version(client: &mut impl postgres::GenericClient) -> Result<i64, postgres::Error> {
    let exists: bool = client
        .query_one("SELECT to_regclass('baton_schema') IS NOT NULL", &[])?
        .try_get(0)?;
    if !exists {
        return Ok(0);
    }
    let row = client.query_opt("SELECT version FROM baton_schema", &[])?;
    match row {
        Some(r) => r.try_get(0),
        None => Ok(0),
    }
}

/// Map a client error: a closed connection becomes [`PgError::Lost`].
fn sql_err(url: &str, during: &str, e: postgres::Error) -> PgError {
    let lost = e.is_closed()
        || e.code() == Some(&SqlState::ADMIN_SHUTDOWN)
        || e.code() == Some(&SqlState::CONNECTION_FAILURE)
        || std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some();
    if lost {
        PgError::Lost {
            url: url.to_string(),
            during: during.to_string(),
        }
    } else {
        PgError::Sql {
            url: url.to_string(),
            during: during.to_string(),
            source: e,
        }
    }
}

fn turn(run: u32) -> i64 {
    i64::from(run)
}

impl GrantStore for PgStore {
    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError> {
        let mut client = self.client.borrow_mut();
        let rows = client
            .query(
                "SELECT tool, path, uses_left, handoff FROM grants
                 WHERE thread = $1 AND run = $2 ORDER BY id",
                &[&thread, &turn(run)],
            )
            .map_err(|e| self.grant_err(e))?;
        rows.iter()
            .map(|r| {
                let uses: i64 = r.try_get(2)?;
                Ok(Grant {
                    thread: thread.to_string(),
                    run,
                    tool: r.try_get(0)?,
                    path: PathBuf::from(r.try_get::<_, String>(1)?),
                    uses_left: u32::try_from(uses.max(0)).unwrap_or(u32::MAX),
                    handoff: r.try_get(3)?,
                })
            })
            .collect::<Result<_, postgres::Error>>()
            .map_err(|e| self.grant_err(e))
    }

    /// One statement: at READ COMMITTED, a second use racing for the last one waits for the
    /// first's row lock, then re-checks `uses_left > 0` on the row as committed, so it cannot
    /// also win.
    fn consume(&mut self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError> {
        let mut client = self.client.borrow_mut();
        let rows = client
            .query(
                "UPDATE grants SET uses_left = uses_left - 1
                 WHERE id = (SELECT id FROM grants WHERE thread = $1 AND run = $2 AND path = $3
                             AND uses_left > 0 ORDER BY id LIMIT 1)
                   AND uses_left > 0
                 RETURNING id",
                &[&thread, &turn(run), &path.to_string_lossy().as_ref()],
            )
            .map_err(|e| self.grant_err(e))?;
        Ok(rows.len() == 1)
    }

    fn insert(&mut self, g: Grant) -> Result<(), DeliveryError> {
        let mut client = self.client.borrow_mut();
        client
            .execute(
                "INSERT INTO grants (thread, run, tool, path, uses_left, handoff)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &g.thread,
                    &turn(g.run),
                    &g.tool,
                    &g.path.to_string_lossy().as_ref(),
                    &i64::from(g.uses_left),
                    &g.handoff,
                ],
            )
            .map(|_| ())
            .map_err(|e| self.grant_err(e))
    }
}
