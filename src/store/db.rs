//! [`Db`]: one handle on a baton database, whichever backend holds it (docs/store.md), with
//! the store's operations under the same names as the SQLite free functions. The CLI and the
//! service open one from a [`DbUrl`] and do not care which backend answers.
//!
//! On SQLite each operation is the free function ([`super::dispatch`], ...). On PostgreSQL
//! (feature `postgres`) each runs the same function on a staging store inside one transaction
//! holding the locks of the threads it touches (`store::pg::stage`).

use super::{
    lifecycle, replay, Completed, DispatchRequest, Dispatched, ForkReport, HandoffOptions,
    ReplayFilter, ReplayReport, RollbackReport, RunEnd, Store, StoreError,
};
use crate::deliver::{DeliveryError, GcReport, OffbandStore, Retention};
use crate::policy::Policy;
use crate::state::{Item, RunStatus, State};
use std::time::{Duration, SystemTime};

#[cfg(feature = "postgres")]
use super::pg::PgStore;
use super::DbUrl;

/// A baton database on either backend.
#[derive(Debug)]
#[non_exhaustive]
pub enum Db {
    /// A SQLite file (or an in-memory database).
    Sqlite(Store),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
}

/// What can go wrong on a [`Db`]: the store's own error (the same on both backends: a thread
/// not found, a run still running, ...; on PostgreSQL it names the URL) or the backend's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// The store's error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The PostgreSQL backend's error (unreachable, lost, conflicting, ...).
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] super::pg::PgError),
    /// A `postgres://` URL given to a baton built without the `postgres` feature.
    #[error("this baton was built without PostgreSQL support")]
    NoPostgres {
        /// The URL, without its password.
        url: String,
    },
}

#[cfg(feature = "postgres")]
impl From<super::pg::CopyError> for DbError {
    fn from(e: super::pg::CopyError) -> DbError {
        use super::pg::{CopyError, PgError};
        match e {
            CopyError::Postgres(e) => DbError::Postgres(e),
            CopyError::Sqlite(e) => DbError::Store(e),
            CopyError::Value {
                db,
                table,
                column,
                why,
            } => DbError::Postgres(PgError::Corrupt {
                url: db,
                what: format!("{table}.{column}"),
                why,
            }),
            other => DbError::Postgres(PgError::Corrupt {
                url: other.database().to_string(),
                what: "a row".into(),
                why: other.to_string(),
            }),
        }
    }
}

impl DbError {
    /// The store's error, when it is one (the CLI and the service map it to their codes).
    pub fn as_store(&self) -> Option<&StoreError> {
        match self {
            DbError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// A store error is located at its database, a PostgreSQL backend's error and a refused URL
/// at the URL (without its password).
impl crate::error::Located for DbError {
    fn location(&self) -> Option<String> {
        match self {
            DbError::Store(e) => crate::error::Located::location(e),
            #[cfg(feature = "postgres")]
            DbError::Postgres(e) => crate::error::Located::location(e),
            DbError::NoPostgres { url } => Some(url.clone()),
        }
    }

    fn message(&self) -> String {
        match self {
            DbError::Store(e) => crate::error::Located::message(e),
            _ => self.to_string(),
        }
    }
}

/// Run `op` in the staged unit of work `staged` makes; when `policy` runs an external
/// summarizer, first once on a snapshot of `threads` (no lock) so that the summarizer runs
/// there, its result reused by the unit of work and any retry of it (`store::summarized`).
#[cfg(feature = "postgres")]
fn summarized_first<T>(
    p: &PgStore,
    policy: &Policy,
    threads: &[&str],
    mut op: impl FnMut(&mut Store) -> Result<T, super::StoreError>,
    staged: impl FnOnce(
        &mut dyn FnMut(&mut Store) -> Result<T, super::StoreError>,
    ) -> Result<T, DbError>,
) -> Result<T, DbError> {
    if !crate::deliver::runs_command(policy) {
        return staged(&mut op);
    }
    super::summarized::remembering(|| {
        // What this run records is thrown away; an error here is the unit of work's to report.
        if let Ok(mut mem) = p.staged_read(Some(threads), "summarizing before the lock") {
            let _ = op(&mut mem);
        }
        staged(&mut op)
    })
}

#[cfg(feature = "postgres")]
mod threads {
    //! Which other threads an operation reads, found under the locks of those it has
    //! (`PgStore::staged`'s `also`).
    use postgres::Transaction;

    /// None.
    pub(super) fn none(_: &mut Transaction<'_>, _: &str) -> Result<Vec<String>, postgres::Error> {
        Ok(Vec::new())
    }

    /// The forks whose merge-back waits for `thread`'s next run (a dispatch makes one again
    /// from its fork when the run goes elsewhere).
    pub(super) fn merge_sources(
        tx: &mut Transaction<'_>,
        thread: &str,
    ) -> Result<Vec<String>, postgres::Error> {
        tx.query(
            "SELECT source_thread FROM transfers
             WHERE thread = $1 AND type = 'merge_back' AND status = 'pending'
               AND source_thread IS NOT NULL",
            &[&thread],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect()
    }

    /// The thread `thread` was forked from.
    pub(super) fn parent(
        tx: &mut Transaction<'_>,
        thread: &str,
    ) -> Result<Vec<String>, postgres::Error> {
        tx.query(
            "SELECT parent_thread FROM threads WHERE id = $1 AND parent_thread IS NOT NULL",
            &[&thread],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect()
    }
}

impl Db {
    /// Open (creating and migrating) the database `url` names, with `busy` as SQLite's busy
    /// timeout.
    pub fn open(url: &DbUrl, busy: Duration) -> Result<Db, DbError> {
        match url {
            DbUrl::Sqlite(path) => Ok(Db::Sqlite(Store::open_with_busy_timeout(path, busy)?)),
            #[cfg(feature = "postgres")]
            DbUrl::Postgres(u) => Ok(Db::Postgres(PgStore::open(u)?)),
            #[cfg(not(feature = "postgres"))]
            DbUrl::Postgres(_) => Err(DbError::NoPostgres {
                url: url.redacted(),
            }),
        }
    }

    /// Open an existing database for reading: a SQLite file read-only
    /// ([`Store::open_read_only`]), a PostgreSQL database without migrating it
    /// (`PgStore::open_existing`, feature `postgres`).
    pub fn open_existing(url: &DbUrl) -> Result<Db, DbError> {
        match url {
            DbUrl::Sqlite(path) => Ok(Db::Sqlite(Store::open_read_only(path)?)),
            #[cfg(feature = "postgres")]
            DbUrl::Postgres(u) => Ok(Db::Postgres(PgStore::open_existing(u)?)),
            #[cfg(not(feature = "postgres"))]
            DbUrl::Postgres(_) => Err(DbError::NoPostgres {
                url: url.redacted(),
            }),
        }
    }

    /// The database's name in messages (a path, or a URL without its password).
    pub fn name(&self) -> String {
        match self {
            Db::Sqlite(s) => s.name(),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.url().to_string(),
        }
    }

    /// [`super::dispatch`].
    pub fn dispatch(
        &mut self,
        engine: &crate::Engine,
        req: &DispatchRequest,
    ) -> Result<Dispatched, DbError> {
        self.dispatch_with_writer(engine, req, || ())
    }

    /// [`super::dispatch_with_writer`]. On PostgreSQL the thread's lock is held from before
    /// the first read to the commit, the summarizer's run included; `writer` is held while
    /// the staged write transaction is open, as on SQLite.
    pub fn dispatch_with_writer<G>(
        &mut self,
        engine: &crate::Engine,
        req: &DispatchRequest,
        writer: impl Fn() -> G,
    ) -> Result<Dispatched, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::dispatch_with_writer(s, engine, req, writer)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                // A dispatch that decides on its window stages only the window; one that reads
                // every item, or runs a summarizer (deciding on the whole thread), everything.
                let policy = engine.policy();
                let plan = if crate::deliver::runs_command(policy)
                    || lifecycle::policy_reads_old_items(policy)
                {
                    super::pg::Plan::Whole
                } else {
                    super::pg::Plan::Dispatch {
                        thread: &req.thread,
                        target: &req.target,
                    }
                };
                summarized_first(
                    p,
                    policy,
                    &[&req.thread],
                    |mem| lifecycle::dispatch_with_writer(mem, engine, req, &writer),
                    |op| {
                        p.staged_plan(
                            &[&req.thread],
                            "dispatching",
                            plan,
                            threads::merge_sources,
                            op,
                        )
                    },
                )
            }
        }
    }

    /// [`super::complete_run`].
    pub fn complete_run(
        &mut self,
        thread: &str,
        run: u32,
        items: Vec<Item>,
        status: RunStatus,
    ) -> Result<Completed, DbError> {
        self.complete_run_with(thread, run, items, status, &RunEnd::default())
    }

    /// [`super::complete_run_with`].
    pub fn complete_run_with(
        &mut self,
        thread: &str,
        run: u32,
        items: Vec<Item>,
        status: RunStatus,
        end: &RunEnd,
    ) -> Result<Completed, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::complete_run_with(
                s, thread, run, items, status, end,
            )?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let ids: Vec<String> = items
                    .iter()
                    .filter_map(|i| i.id().map(str::to_string))
                    .collect();
                p.staged_plan(
                    &[thread],
                    "completing a run",
                    super::pg::Plan::Complete {
                        thread,
                        run,
                        ids: &ids,
                    },
                    threads::none,
                    |mem| {
                        lifecycle::complete_run_with(mem, thread, run, items.clone(), status, end)
                    },
                )
            }
        }
    }

    /// [`super::rollback`].
    pub fn rollback(&mut self, thread: &str, to: u32) -> Result<RollbackReport, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::rollback(s, thread, to)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.staged(&[thread], "rolling back", threads::none, |mem| {
                lifecycle::rollback(mem, thread, to)
            }),
        }
    }

    /// [`super::advise_rollback`]: on PostgreSQL, decided on a snapshot of the thread.
    pub fn advise_rollback(
        &self,
        engine: &crate::Engine,
        report: &mut RollbackReport,
    ) -> Result<(), DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::advise_rollback(s, engine, report)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                if report.provider_threads.is_empty() {
                    return Ok(());
                }
                let thread = report.thread.clone();
                let mem = p.staged_read(Some(&[&thread]), "advising after a rollback")?;
                Ok(lifecycle::advise_rollback(&mem, engine, report)?)
            }
        }
    }

    /// [`super::fork`]. On PostgreSQL a child named by none gets the first free
    /// `<thread>-fork<n>`, and both threads are locked.
    pub fn fork(
        &mut self,
        thread: &str,
        at: u32,
        child: Option<&str>,
    ) -> Result<ForkReport, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::fork(s, thread, at, child)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let child = match child {
                    Some(c) => c.to_string(),
                    None => p.free_fork_id(thread)?,
                };
                p.staged(&[thread, &child], "forking", threads::none, |mem| {
                    lifecycle::fork(mem, thread, at, Some(&child))
                })
            }
        }
    }

    /// [`super::merge_back`].
    pub fn merge_back(
        &mut self,
        engine: &crate::Engine,
        fork: &str,
        opts: &HandoffOptions,
    ) -> Result<Dispatched, DbError> {
        self.merge_back_with_writer(engine, fork, opts, || ())
    }

    /// [`super::merge_back_with_writer`]; on PostgreSQL the fork and its parent are locked.
    pub fn merge_back_with_writer<G>(
        &mut self,
        engine: &crate::Engine,
        fork: &str,
        opts: &HandoffOptions,
        writer: impl Fn() -> G,
    ) -> Result<Dispatched, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::merge_back_with_writer(
                s, engine, fork, opts, writer,
            )?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let parent = p.parent_of(fork)?;
                let mut read = vec![fork];
                read.extend(parent.as_deref());
                summarized_first(
                    p,
                    engine.policy(),
                    &read,
                    |mem| lifecycle::merge_back_with_writer(mem, engine, fork, opts, &writer),
                    |op| {
                        p.staged(
                            &[fork],
                            "merging a fork back",
                            |tx, t| {
                                if t == fork {
                                    threads::parent(tx, t)
                                } else {
                                    Ok(Vec::new())
                                }
                            },
                            op,
                        )
                    },
                )
            }
        }
    }

    /// [`super::regenerate`].
    pub fn regenerate(
        &mut self,
        engine: &crate::Engine,
        thread: &str,
        handoff: &str,
        opts: &HandoffOptions,
    ) -> Result<Dispatched, DbError> {
        self.regenerate_with_writer(engine, thread, handoff, opts, || ())
    }

    /// [`super::regenerate_with_writer`].
    pub fn regenerate_with_writer<G>(
        &mut self,
        engine: &crate::Engine,
        thread: &str,
        handoff: &str,
        opts: &HandoffOptions,
        writer: impl Fn() -> G,
    ) -> Result<Dispatched, DbError> {
        match self {
            Db::Sqlite(s) => Ok(lifecycle::regenerate_with_writer(
                s, engine, thread, handoff, opts, writer,
            )?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => summarized_first(
                p,
                engine.policy(),
                &[thread],
                |mem| {
                    lifecycle::regenerate_with_writer(mem, engine, thread, handoff, opts, &writer)
                },
                |op| p.staged(&[thread], "regenerating a handoff", threads::none, op),
            ),
        }
    }

    /// Import a state file's thread; a stored thread of the same id is refused
    /// ([`StoreErrorKind::ThreadExists`](super::StoreErrorKind::ThreadExists)).
    pub fn import(&mut self, state: &State) -> Result<(), DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.import(state)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => Ok(p.import(state)?),
        }
    }

    /// Import a thread, replacing a stored thread of the same id when `replace` holds (the
    /// log's rows naming its items keep a copy of them first, as on SQLite).
    pub fn import_with(&mut self, state: &State, replace: bool) -> Result<(), DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.import_with(state, replace)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) if !replace => Ok(p.import(state)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.staged_with(
                &[&state.thread.id],
                "importing a thread",
                super::pg::LogRows::All,
                super::pg::Plan::Whole,
                threads::none,
                |mem| mem.import_with(state, true),
            ),
        }
    }

    /// The stored thread as a state file.
    pub fn export(&self, thread: &str) -> Result<State, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.export(thread)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => Ok(p.export(thread)?),
        }
    }

    /// Load a thread as a [`State`] (the same as [`Db::export`]).
    pub fn load(&self, thread: &str) -> Result<State, DbError> {
        self.export(thread)
    }

    /// The thread `thread` was forked from (`None` for a thread that is not a fork).
    pub fn parent_of(&self, thread: &str) -> Result<Option<String>, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.parent_of(thread)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => Ok(p.parent_of(thread)?),
        }
    }

    /// Every stored thread id, sorted.
    pub fn threads(&self) -> Result<Vec<String>, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.threads()?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => Ok(p.threads()?),
        }
    }

    /// [`Store::decide`]: on PostgreSQL, on a snapshot of the thread (the window is chosen on
    /// that copy as on SQLite).
    pub fn decide(
        &self,
        engine: &crate::Engine,
        thread: &str,
        target: Option<&str>,
    ) -> Result<Result<crate::Decision, crate::Error>, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.decide(engine, thread, target)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let mem = p.staged_read(Some(&[thread]), "reading a thread to decide")?;
                Ok(mem.decide(engine, thread, target)?)
            }
        }
    }

    /// [`super::replay()`]: on PostgreSQL, on a snapshot of the whole database.
    pub fn replay(
        &self,
        filter: &ReplayFilter,
        policies: &[Policy],
    ) -> Result<ReplayReport, DbError> {
        match self {
            Db::Sqlite(s) => Ok(replay::replay(s, filter, policies)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let mem = p.staged_read(None, "replaying the decision log")?;
                Ok(replay::replay(&mem, filter, policies)?)
            }
        }
    }

    /// [`Store::logged_decisions`]: on PostgreSQL, on a snapshot of the whole database.
    pub fn logged_decisions(
        &self,
        since: Option<jiff::Timestamp>,
        inputs: bool,
    ) -> Result<Vec<replay::LoggedDecision>, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.logged_decisions(since, inputs)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let mem = p.staged_read(None, "reading the decision log")?;
                Ok(mem.logged_decisions(since, inputs)?)
            }
        }
    }

    /// [`Store::latest_input`]: on PostgreSQL, on a snapshot of the thread and its log.
    pub fn latest_input(&self, thread: &str) -> Result<Option<replay::DecisionInput>, DbError> {
        match self {
            Db::Sqlite(s) => Ok(s.latest_input(thread)?),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let mem = p.staged_read(Some(&[thread]), "reading the decision log")?;
                Ok(mem.latest_input(thread)?)
            }
        }
    }

    /// [`Store::collect_documents`]: one GC pass over `offband`, each handoff's liveness read
    /// under the lock discipline of the backend (on PostgreSQL: the thread's advisory lock,
    /// shared, so that a delivery of that thread in progress has committed or rolled back
    /// first; other threads' writers never wait).
    pub fn collect_documents(
        &mut self,
        offband: &OffbandStore,
        retention: &Retention,
        now: SystemTime,
        dry_run: bool,
    ) -> Result<GcReport, DeliveryError> {
        match self {
            Db::Sqlite(s) => s.collect_documents(offband, retention, now, dry_run),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => {
                let lookup = |t: &str, h: &str| p.handoff_liveness(t, h);
                crate::deliver::gc_checked(offband, retention, &lookup, now, dry_run)
            }
        }
    }

    /// The SQLite store, when this is one.
    pub fn as_sqlite(&mut self) -> Option<&mut Store> {
        match self {
            Db::Sqlite(s) => Some(s),
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => None,
        }
    }
}

/// The pre-grants of either backend (on PostgreSQL a one-shot use is one conditional update).
impl crate::deliver::GrantStore for Db {
    fn find(&self, thread: &str, run: u32) -> Result<Vec<crate::deliver::Grant>, DeliveryError> {
        match self {
            Db::Sqlite(s) => s.find(thread, run),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.find(thread, run),
        }
    }

    fn consume(
        &mut self,
        thread: &str,
        run: u32,
        path: &std::path::Path,
    ) -> Result<bool, DeliveryError> {
        match self {
            Db::Sqlite(s) => s.consume(thread, run, path),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.consume(thread, run, path),
        }
    }

    fn insert(&mut self, g: crate::deliver::Grant) -> Result<(), DeliveryError> {
        match self {
            Db::Sqlite(s) => s.insert(g),
            #[cfg(feature = "postgres")]
            Db::Postgres(p) => p.insert(g),
        }
    }
}
