//! The staged unit of work: how a lifecycle operation runs on PostgreSQL with the one
//! implementation of the lifecycle logic (`store::lifecycle`), unchanged.
//!
//! [`PgStore::staged`] opens one transaction (READ COMMITTED), takes the advisory lock of
//! every thread the operation reads or writes, in the order of their ids (so that two
//! operations locking the same threads cannot deadlock), and copies those threads' rows into
//! a private in-memory SQLite store: their state, their pre-grants, and the part of the
//! decision log an operation reads (the thread's latest rows, its merge-back rows, and every
//! row and chunk those refer to; `store::log_refs`). The operation runs on that store. What
//! it changed is then written back in the same transaction, table by table, by primary key:
//! new rows inserted, changed rows updated, removed rows deleted; a new decision-log or grant
//! row gets its id from the server's identity sequence (and a new log row naming another new
//! row as its base names the server's id), a new content-addressed row (`decision_chunks`,
//! `decision_rules`) is `INSERT ... ON CONFLICT DO NOTHING`. Then it commits. Any failure
//! before the commit rolls the whole transaction back: a run or a handoff is written whole or
//! not at all.
//!
//! Read-only operations (a stored decision, a rollback's advice, the replay) copy what they
//! read in one REPEATABLE READ, read-only snapshot and take no lock ([`PgStore::staged_read`]).

use super::copy::{self, CopyError, Table, TABLES};
use super::{PgError, PgStore, MAX_TRIES};
use crate::store::io::Cx;
use crate::store::partial::Partial;
use crate::store::{log_refs, DbError, Store, StoreError};
use postgres::{GenericClient, Transaction};
use rusqlite::types::Value;
use rusqlite::OptionalExtension;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How many of a thread's latest decision-log rows are staged: more than the longest chain of
/// deltas an input or a decision builds on (`store::input_log::MAX_DEPTH`), with the
/// candidates a decision delta is tried on; what they refer to beyond is fetched.
const LOG_ROWS: i64 = 48;

/// How many times the set of threads to lock may grow (an operation found it reads a thread it
/// had not locked: a merge-back that arrived meanwhile) before the operation gives up.
const MAX_WIDENINGS: u32 = 8;

/// Which of a thread's decision-log rows are staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogRows {
    /// What an operation that logs a decision reads: the latest rows, the merge-back rows
    /// and what they refer to.
    Latest,
    /// Every row (an import that replaces the thread rewrites each row naming its items).
    All,
}

/// What is staged of an operation's own thread (the other threads it locks are staged whole).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Plan<'a> {
    /// The whole thread.
    Whole,
    /// What a dispatch of `thread` to `target` reads when it decides on its window
    /// (`store::window`): the thread's row, provider threads, transfers, checkpoints and
    /// grants, the runs from the window's base on (with run 1 and the runs that are not
    /// completed, which the window's history lists), their items, the handoffs the window
    /// needs and the newest one, and the server's tally. When the thread has no window, the
    /// whole thread.
    Dispatch {
        /// The thread.
        thread: &'a str,
        /// The provider dispatched to.
        target: &'a str,
    },
    /// What completing `run` of `thread` reads: the thread's row, the runs from `run` on (and
    /// the last), their items, the stored items whose ids the new items (`ids`) repeat, the
    /// handoffs into the run, the open transfers and the run's grants.
    Complete {
        /// The thread.
        thread: &'a str,
        /// The run.
        run: u32,
        /// The ids the new items name.
        ids: &'a [String],
    },
}

/// How many times an operation that read rows its partial staging did not hold is run again
/// (each time on the whole thread) before it gives up.
const MAX_RESTAGES: u32 = 2;

thread_local! {
    /// Units of work committed on a partly staged thread, and those run again on the whole
    /// thread, on this OS thread ([`staging_counts`]).
    static COUNTS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many units of work this OS thread committed on a partly staged thread, and how many
/// it ran again on the whole thread because they read what was not staged (for the tests:
/// proof that a dispatch and a completion stage only what they read).
#[cfg(feature = "unstable")]
pub fn staging_counts() -> (u64, u64) {
    COUNTS.with(std::cell::Cell::get)
}

fn count(partial: bool, restaged: bool) {
    COUNTS.with(|c| {
        let (p, r) = c.get();
        c.set((
            p.saturating_add(u64::from(partial)),
            r.saturating_add(u64::from(restaged)),
        ));
    });
}

/// The rows staged, by table, by primary key.
#[derive(Default)]
struct Staged {
    rows: HashMap<&'static str, BTreeMap<String, Vec<Value>>>,
}

fn key_of(t: &Table, row: &[Value]) -> String {
    key_text(&key_values(t, row))
}

/// A primary key's values as one text (the key of [`Staged::rows`]).
fn key_text(values: &[Value]) -> String {
    format!("{values:?}")
}

fn key_values(t: &Table, row: &[Value]) -> Vec<Value> {
    t.key
        .iter()
        .filter_map(|k| t.columns.iter().position(|c| c == k))
        .filter_map(|i| row.get(i).cloned())
        .collect()
}

fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

impl Staged {
    fn add(&mut self, t: &Table, rows: &copy::Rows) {
        let held = self.rows.entry(t.name).or_default();
        for row in rows {
            held.entry(key_of(t, row)).or_insert_with(|| row.clone());
        }
    }
}

fn copy_err(url: &str, e: CopyError) -> DbError {
    match e {
        CopyError::Postgres(e) => DbError::Postgres(e),
        CopyError::Sqlite(e) => DbError::Store(e),
        CopyError::Value {
            table, column, why, ..
        } => DbError::Postgres(PgError::Corrupt {
            url: url.to_string(),
            what: format!("{table}.{column}"),
            why,
        }),
        other => DbError::Postgres(PgError::Corrupt {
            url: url.to_string(),
            what: "a row".into(),
            why: other.to_string(),
        }),
    }
}

impl PgStore {
    /// Run `op` on a staging store holding `threads` (and the threads `also` names once they
    /// are locked), under their locks, and write back what it changed, in one transaction.
    /// See the module's documentation. `also` reads, under the locks, which other threads the
    /// operation will read (a dispatch: the forks whose merge-back waits for it); when one is
    /// not locked yet, the transaction is rolled back and run again with it locked too.
    ///
    /// A serialization failure or a deadlock runs the whole unit again (at most
    /// [`MAX_TRIES`] times; `op` then runs again, on a fresh staging store, and writes its
    /// off-band documents again, to the same paths). An error of `op` or of the server rolls
    /// everything back.
    pub(crate) fn staged<T>(
        &self,
        threads: &[&str],
        during: &str,
        also: impl Fn(&mut Transaction<'_>, &str) -> Result<Vec<String>, postgres::Error>,
        op: impl FnMut(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, DbError> {
        self.staged_with(threads, during, LogRows::Latest, Plan::Whole, also, op)
    }

    /// [`PgStore::staged`], staging only what `plan` says of the operation's own thread. An
    /// operation that reads (or writes) rows of it that were not staged (`store::partial`
    /// notices) is thrown away and run again on the whole thread.
    pub(crate) fn staged_plan<T>(
        &self,
        threads: &[&str],
        during: &str,
        plan: Plan<'_>,
        also: impl Fn(&mut Transaction<'_>, &str) -> Result<Vec<String>, postgres::Error>,
        op: impl FnMut(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, DbError> {
        self.staged_with(threads, during, LogRows::Latest, plan, also, op)
    }

    /// [`PgStore::staged`], staging `log` of each thread's decision log.
    pub(crate) fn staged_with<T>(
        &self,
        threads: &[&str],
        during: &str,
        log: LogRows,
        plan: Plan<'_>,
        also: impl Fn(&mut Transaction<'_>, &str) -> Result<Vec<String>, postgres::Error>,
        mut op: impl FnMut(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, DbError> {
        let mut plan = plan;
        let mut restages = 0u32;
        let mut locked: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
        locked.sort();
        locked.dedup();
        let mut client = self.client.borrow_mut();
        let mut tries = 0u32;
        let mut widenings = 0u32;
        loop {
            let attempt = (|| -> Result<Attempt<T>, DbError> {
                let mut tx = client.transaction().map_err(|e| self.err(during, e))?;
                for t in &locked {
                    tx.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                        &[t],
                    )
                    .map_err(|e| self.err(during, e))?;
                }
                let mut wider = locked.clone();
                for t in &locked {
                    wider.extend(also(&mut tx, t).map_err(|e| self.err(during, e))?);
                }
                wider.sort();
                wider.dedup();
                if wider != locked {
                    // Dropping the transaction rolls it back and releases the locks.
                    locked = wider;
                    return Ok(Attempt::Widen);
                }
                let mut mem = Store::open_staging(&self.url)?;
                let (staged, partial) = self
                    .stage(&mut tx, &mut mem, &locked, log, plan, during)
                    .map_err(|e| within(e, during))?;
                let partly = partial.is_some();
                let ((out, after_commit), missed) = crate::store::partial::run(partial, || {
                    crate::store::hold_commit_faults(|| op(&mut mem))
                });
                if missed.is_some() {
                    count(false, true);
                    // Dropping the transaction rolls it back (nothing was written yet).
                    return Ok(Attempt::Restage);
                }
                let out = out?;
                crate::store::fault("pg:before_write_back");
                self.write_back(&mut tx, &mem, &staged, during)
                    .map_err(|e| within(e, during))?;
                tx.commit()
                    .map_err(|e| self.err(&format!("committing ({during})"), e))?;
                count(partly, false);
                // The staging store's `after_commit` crash points, now that it is true.
                for step in &after_commit {
                    crate::store::fault(step);
                }
                Ok(Attempt::Done(out))
            })();
            match attempt {
                Ok(Attempt::Done(out)) => return Ok(out),
                Ok(Attempt::Restage) => {
                    restages = restages.saturating_add(1);
                    plan = Plan::Whole;
                    if restages > MAX_RESTAGES {
                        return Err(DbError::Postgres(PgError::Conflict {
                            url: self.url.clone(),
                            during: during.to_string(),
                            tries: restages,
                        }));
                    }
                }
                Ok(Attempt::Widen) => {
                    widenings = widenings.saturating_add(1);
                    if widenings > MAX_WIDENINGS {
                        return Err(DbError::Postgres(PgError::Conflict {
                            url: self.url.clone(),
                            during: during.to_string(),
                            tries: widenings,
                        }));
                    }
                }
                Err(DbError::Postgres(e)) if e.retryable() => {
                    tries = tries.saturating_add(1);
                    if tries >= MAX_TRIES {
                        return Err(DbError::Postgres(PgError::Conflict {
                            url: self.url.clone(),
                            during: during.to_string(),
                            tries,
                        }));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A staging store holding `threads` (every thread when `None`) as one REPEATABLE READ,
    /// read-only snapshot of the database shows them: no lock, no wait for writers.
    pub(crate) fn staged_read(
        &self,
        threads: Option<&[&str]>,
        during: &str,
    ) -> Result<Store, DbError> {
        let mut mem = Store::open_staging(&self.url)?;
        match threads {
            None => {
                self.snapshot_into(&mut mem, None, during)
                    .map_err(|e| copy_err(&self.url, e))?;
            }
            Some(threads) => {
                let mut client = self.client.borrow_mut();
                let mut tx = client
                    .build_transaction()
                    .isolation_level(postgres::IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .map_err(|e| self.err(during, e))?;
                let threads: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
                self.stage(
                    &mut tx,
                    &mut mem,
                    &threads,
                    LogRows::Latest,
                    Plan::Whole,
                    during,
                )?;
                tx.commit().map_err(|e| self.err(during, e))?;
            }
        }
        Ok(mem)
    }

    /// Copy `threads`' rows into `mem` (of the plan's thread, what `plan` says); returns what
    /// was copied, and what a partly staged thread holds.
    fn stage(
        &self,
        tx: &mut impl GenericClient,
        mem: &mut Store,
        threads: &[String],
        log_rows: LogRows,
        plan: Plan<'_>,
        during: &str,
    ) -> Result<(Staged, Option<Partial>), DbError> {
        let url = self.url.as_str();
        let cerr = |e| copy_err(url, e);
        let mut staged = Staged::default();
        let (stx, name, busy) = mem.begin(during)?;
        let mut partial = None;
        let mut whole: Vec<&String> = Vec::new();
        for th in threads {
            let part = {
                let mut s = Stager {
                    store: self,
                    tx: &mut *tx,
                    stx: &stx,
                    name: &name,
                    busy,
                    staged: &mut staged,
                };
                match plan {
                    Plan::Dispatch { thread, target } if thread == th.as_str() => {
                        s.window(th, target, during)?
                    }
                    Plan::Complete { thread, run, ids } if thread == th.as_str() => {
                        Some(s.run(th, run, ids)?)
                    }
                    _ => None,
                }
            };
            match part {
                Some(p) => partial = Some(p),
                None => whole.push(th),
            }
        }
        for t in TABLES.iter().filter(|t| t.state || t.name == "grants") {
            let Some(col) = t.thread else { continue };
            for th in &whole {
                let rows = copy::read_pg_where(tx, url, t, &format!("{col} = $1"), &[*th])
                    .map_err(cerr)?;
                copy::stage_sqlite(&stx, &name, t, &rows)?;
                staged.add(t, &rows);
            }
        }
        let (Some(log), Some(chunks)) = (table("decision_log"), table("decision_chunks")) else {
            return Err(DbError::Postgres(PgError::Corrupt {
                url: url.to_string(),
                what: "the table list".into(),
                why: "it has no decision log".into(),
            }));
        };
        // Completing a run reads none of the decision log.
        let log_threads = threads.iter().filter(|th| {
            !matches!(plan, Plan::Complete { thread, .. } if thread == th.as_str() && partial.is_some())
        });
        for th in log_threads {
            let clauses = match log_rows {
                LogRows::Latest => vec![
                    format!("thread = $1 ORDER BY run DESC, id DESC LIMIT {LOG_ROWS}"),
                    "thread = $1 AND operation = 'merge_back'".to_string(),
                ],
                LogRows::All => vec!["thread = $1".to_string()],
            };
            for clause in clauses {
                let rows = copy::read_pg_where(tx, url, log, &clause, &[th]).map_err(cerr)?;
                copy::stage_sqlite(&stx, &name, log, &rows)?;
                staged.add(log, &rows);
            }
        }
        // What the staged rows build on, until nothing is missing (or the server lacks it
        // too: a row that cannot be put back only makes the next row a keyframe).
        for _ in 0..=crate::store::input_log::MAX_DEPTH {
            let missing = log_refs::missing(&stx)
                .map_err(|e| crate::store::sql_err(&name, busy, during, e))?;
            if missing.is_empty() {
                break;
            }
            let rows = copy::read_pg_where(tx, url, log, "id = ANY($1)", &[&missing.rows])
                .map_err(cerr)?;
            let found = copy::read_pg_where(tx, url, chunks, "sha = ANY($1)", &[&missing.chunks])
                .map_err(cerr)?;
            if rows.is_empty() && found.is_empty() {
                break;
            }
            copy::stage_sqlite(&stx, &name, log, &rows)?;
            copy::stage_sqlite(&stx, &name, chunks, &found)?;
            staged.add(log, &rows);
            staged.add(chunks, &found);
        }
        stx.commit()
            .map_err(|e| crate::store::sql_err(&name, busy, during, e))?;
        track_changes(mem, during)?;
        Ok((staged, partial))
    }

    /// Write what `mem` holds and `staged` did not (or held otherwise) into the transaction.
    fn write_back(
        &self,
        tx: &mut Transaction<'_>,
        mem: &Store,
        staged: &Staged,
        during: &str,
    ) -> Result<(), DbError> {
        let none = BTreeMap::new();
        let mut ids: HashMap<i64, i64> = HashMap::new();
        let mut removed: Vec<(&Table, copy::Rows)> = Vec::new();
        let touched = touched_keys(mem, during)?;
        for t in TABLES {
            let before = staged.rows.get(t.name).unwrap_or(&none);
            let mut new = Vec::new();
            let mut changed = Vec::new();
            let mut gone = Vec::new();
            for (k, now) in current_rows(mem, t, touched.get(t.name), during)? {
                match (before.get(&k), now) {
                    (None, Some(row)) => new.push(row),
                    (Some(b), Some(row)) if *b != row => changed.push(row),
                    (Some(b), None) => gone.push(b.clone()),
                    _ => {}
                }
            }
            removed.push((t, gone));
            match t.name {
                "decision_chunks" | "decision_rules" => {
                    let sql = format!(
                        "{} ON CONFLICT DO NOTHING",
                        copy::insert_sql(t, |i| format!("${i}"))
                    );
                    self.execute_rows(tx, t, &sql, &new)?;
                }
                "decision_log" | "grants" => {
                    // In the order they were made: a new log row's base may be an earlier one.
                    new.sort_by_key(|r| match r.first() {
                        Some(Value::Integer(id)) => *id,
                        _ => 0,
                    });
                    let seq = format!("SELECT nextval(pg_get_serial_sequence('{}', 'id'))", t.name);
                    let insert = copy::insert_sql(t, |i| format!("${i}"));
                    for mut row in new {
                        let id: i64 = tx
                            .query_one(seq.as_str(), &[])
                            .and_then(|r| r.try_get(0))
                            .map_err(|e| self.err(during, e))?;
                        if let Some(Value::Integer(old)) = row.first() {
                            ids.insert(*old, id);
                        }
                        if let Some(first) = row.first_mut() {
                            *first = Value::Integer(id);
                        }
                        if t.name == "decision_log" {
                            rebase_row(&mut row, &ids);
                        }
                        self.execute_rows(tx, t, &insert, &vec![row])?;
                    }
                    if t.name == "decision_log" {
                        for row in &mut changed {
                            rebase_row(row, &ids);
                        }
                    }
                    self.update_rows(tx, t, &changed)?;
                }
                "handoffs" => {
                    // A handoff row changes only its status in place (a trigger refuses any
                    // other update); one replaced by an import is deleted and inserted again.
                    let insert = copy::insert_sql(t, |i| format!("${i}"));
                    self.execute_rows(tx, t, &insert, &new)?;
                    let (status_only, replaced): (copy::Rows, copy::Rows) =
                        changed.into_iter().partition(|r| {
                            before
                                .get(&key_of(t, r))
                                .is_some_and(|b| same_but_status(t, b, r))
                        });
                    self.update_rows(tx, t, &status_only)?;
                    self.delete_rows(tx, t, &replaced)?;
                    self.execute_rows(tx, t, &insert, &replaced)?;
                }
                _ => {
                    let insert = copy::insert_sql(t, |i| format!("${i}"));
                    self.execute_rows(tx, t, &insert, &new)?;
                    self.update_rows(tx, t, &changed)?;
                }
            }
        }
        // Children first.
        for (t, gone) in removed.into_iter().rev() {
            self.delete_rows(tx, t, &gone)?;
        }
        Ok(())
    }

    /// Delete `rows` by their primary key.
    fn delete_rows(
        &self,
        tx: &mut Transaction<'_>,
        t: &Table,
        rows: &copy::Rows,
    ) -> Result<(), DbError> {
        let keys: copy::Rows = rows.iter().map(|r| key_values(t, r)).collect();
        let sql = format!("DELETE FROM {} WHERE {}", t.name, key_clause(t, 1));
        self.execute_rows(tx, t, &sql, &keys)
    }

    /// Run `sql` once per row of `rows` (its parameters in the table's column order).
    fn execute_rows(
        &self,
        tx: &mut Transaction<'_>,
        t: &Table,
        sql: &str,
        rows: &copy::Rows,
    ) -> Result<(), DbError> {
        if rows.is_empty() {
            return Ok(());
        }
        let during = format!("writing {}", t.name);
        let st = tx.prepare(sql).map_err(|e| self.err(&during, e))?;
        let params =
            copy::pg_params(&self.url, t, rows, st.params()).map_err(|e| copy_err(&self.url, e))?;
        copy::insert_pg(tx, &st, &params).map_err(|e| self.err(&during, e).into())
    }

    /// Update `rows` by their primary key.
    fn update_rows(
        &self,
        tx: &mut Transaction<'_>,
        t: &Table,
        rows: &copy::Rows,
    ) -> Result<(), DbError> {
        if rows.is_empty() {
            return Ok(());
        }
        let set: Vec<String> = t
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = ${}", i.saturating_add(1)))
            .collect();
        let sql = format!(
            "UPDATE {} SET {} WHERE {}",
            t.name,
            set.join(", "),
            key_clause(t, t.columns.len().saturating_add(1))
        );
        let with_keys: copy::Rows = rows
            .iter()
            .map(|r| {
                let mut v = r.clone();
                v.extend(key_values(t, r));
                v
            })
            .collect();
        self.execute_rows(tx, t, &sql, &with_keys)
    }
}

/// A backend error of a step of the operation `during` (`reading runs`), named as part of it:
/// `dispatching (reading runs)`.
fn within(e: DbError, during: &str) -> DbError {
    let name = |step: String| format!("{during} ({step})");
    match e {
        DbError::Postgres(PgError::Lost { url, during: step }) => {
            DbError::Postgres(PgError::Lost {
                url,
                during: name(step),
            })
        }
        DbError::Postgres(PgError::Sql {
            url,
            during: step,
            source,
        }) => DbError::Postgres(PgError::Sql {
            url,
            during: name(step),
            source,
        }),
        other => other,
    }
}

/// Whether rows `a` and `b` of `t` differ in their `status` column only.
fn same_but_status(t: &Table, a: &[Value], b: &[Value]) -> bool {
    t.columns
        .iter()
        .zip(a.iter().zip(b))
        .all(|(c, (x, y))| *c == "status" || x == y)
}

/// `k1 = $from AND k2 = $(from + 1) ...`.
fn key_clause(t: &Table, from: usize) -> String {
    key_clause_with(t, '$', from)
}

/// `t`'s key as `k1 = Pn AND k2 = Pn+1 ...`, with `mark` the dialect's placeholder sigil
/// (`$` for PostgreSQL, `?` for the SQLite staging store).
fn key_clause_with(t: &Table, mark: char, from: usize) -> String {
    t.key
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} = {mark}{}", from.saturating_add(i)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// A decision-log row's base references renumbered by `ids`.
fn rebase_row(row: &mut [Value], ids: &HashMap<i64, i64>) {
    let (Some(d), Some(i)) = (
        table("decision_log").and_then(|t| t.columns.iter().position(|c| *c == "decision")),
        table("decision_log").and_then(|t| t.columns.iter().position(|c| *c == "input")),
    ) else {
        return;
    };
    let (Some(decision), Some(input)) = (row.get(d).cloned(), row.get(i).cloned()) else {
        return;
    };
    let (decision, input) = log_refs::rebase(decision, input, ids);
    if let Some(slot) = row.get_mut(d) {
        *slot = decision;
    }
    if let Some(slot) = row.get_mut(i) {
        *slot = input;
    }
}

/// The staging store's change log: every row an operation inserts, updates or deletes, by
/// table and primary key, recorded by temporary triggers made after the rows were staged (so
/// staging itself is not recorded). Write-back reads only those rows: its cost follows what
/// the operation changed, not what was staged.
fn track_changes(mem: &Store, during: &str) -> Result<(), DbError> {
    let mut sql = String::from(
        "CREATE TEMP TABLE IF NOT EXISTS baton_changed (tbl TEXT NOT NULL, k1, k2, k3);\n",
    );
    for t in TABLES {
        let keys = |row: &str| -> String {
            (0..3)
                .map(|i| match t.key.get(i) {
                    Some(k) => format!("{row}.{k}"),
                    None => "NULL".to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let record = |row: &str| {
            format!(
                "INSERT INTO baton_changed (tbl, k1, k2, k3) VALUES ('{}', {});",
                t.name,
                keys(row)
            )
        };
        let name = t.name;
        sql.push_str(&format!(
            "CREATE TEMP TRIGGER IF NOT EXISTS baton_changed_{name}_i AFTER INSERT ON main.{name}
             BEGIN {} END;
             CREATE TEMP TRIGGER IF NOT EXISTS baton_changed_{name}_u AFTER UPDATE ON main.{name}
             BEGIN {} {} END;
             CREATE TEMP TRIGGER IF NOT EXISTS baton_changed_{name}_d AFTER DELETE ON main.{name}
             BEGIN {} END;\n",
            record("NEW"),
            record("OLD"),
            record("NEW"),
            record("OLD"),
        ));
    }
    mem.connection()
        .execute_batch(&sql)
        .map_err(|e| DbError::Store(mem.err(&format!("{during} (tracking changes)"), e)))
}

/// The primary keys the operation touched, by table, each once, in the order first touched.
fn touched_keys(mem: &Store, during: &str) -> Result<HashMap<String, Vec<Vec<Value>>>, DbError> {
    let err = |e| DbError::Store(mem.err(&format!("{during} (reading the changes)"), e));
    let conn = mem.connection();
    let mut st = conn
        .prepare("SELECT tbl, k1, k2, k3 FROM baton_changed ORDER BY rowid")
        .map_err(err)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                [
                    r.get::<_, Value>(1)?,
                    r.get::<_, Value>(2)?,
                    r.get::<_, Value>(3)?,
                ],
            ))
        })
        .map_err(err)?;
    let mut seen = HashSet::new();
    let mut out: HashMap<String, Vec<Vec<Value>>> = HashMap::new();
    for row in rows {
        let (tbl, keys) = row.map_err(err)?;
        let width = table(&tbl).map_or(0, |t| t.key.len());
        let key: Vec<Value> = keys.into_iter().take(width).collect();
        if seen.insert((tbl.clone(), key_text(&key))) {
            out.entry(tbl).or_default().push(key);
        }
    }
    Ok(out)
}

/// A touched row: its key (as [`key_text`] writes it) and the row as it is now (`None`: deleted).
type Current = (String, Option<Vec<Value>>);

/// The rows of `t` at `keys` as the staging store holds them now (`None`: deleted).
fn current_rows(
    mem: &Store,
    t: &Table,
    keys: Option<&Vec<Vec<Value>>>,
    during: &str,
) -> Result<Vec<Current>, DbError> {
    let Some(keys) = keys else {
        return Ok(Vec::new());
    };
    let err = |e| DbError::Store(mem.err(&format!("{during} (reading {})", t.name), e));
    let sql = format!(
        "SELECT {} FROM {} WHERE {}",
        t.columns.join(", "),
        t.name,
        key_clause_with(t, '?', 1)
    );
    let conn = mem.connection();
    let mut st = conn.prepare_cached(&sql).map_err(err)?;
    let width = t.columns.len();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let row = st
            .query_row(rusqlite::params_from_iter(key.iter()), |r| {
                (0..width).map(|i| r.get::<_, Value>(i)).collect()
            })
            .optional()
            .map_err(err)?;
        out.push((key_text(key), row));
    }
    Ok(out)
}

/// One attempt of a staged unit of work.
enum Attempt<T> {
    /// Committed, with the operation's result.
    Done(T),
    /// The set of threads to lock grew: run again with them locked.
    Widen,
    /// The operation read rows its partial staging did not hold: run again on the whole thread.
    Restage,
}

/// Copies a plan's rows of one thread into the staging transaction.
struct Stager<'s, 't, C: GenericClient> {
    store: &'s PgStore,
    tx: &'t mut C,
    stx: &'t rusqlite::Transaction<'t>,
    name: &'t str,
    busy: std::time::Duration,
    staged: &'t mut Staged,
}

impl<C: GenericClient> Stager<'_, '_, C> {
    /// The rows of `table` that `clause` selects, staged.
    fn rows(
        &mut self,
        table_name: &str,
        clause: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<(), DbError> {
        let url = self.store.url.as_str();
        let t = table(table_name).ok_or_else(|| {
            DbError::Postgres(PgError::Corrupt {
                url: url.to_string(),
                what: "the table list".into(),
                why: format!("it has no table {table_name}"),
            })
        })?;
        let rows =
            copy::read_pg_where(self.tx, url, t, clause, params).map_err(|e| copy_err(url, e))?;
        copy::stage_sqlite(self.stx, self.name, t, &rows)?;
        self.staged.add(t, &rows);
        Ok(())
    }

    fn sql(&self, during: &str, e: rusqlite::Error) -> DbError {
        DbError::Store(crate::store::sql_err(self.name, self.busy, during, e))
    }

    fn pg(&self, during: &str, e: postgres::Error) -> DbError {
        DbError::Postgres(self.store.err(during, e))
    }

    /// The server's tally of `thread`'s runs in place of the staging store's (which counts
    /// only the staged runs).
    fn tally(&mut self, thread: &str) -> Result<(), DbError> {
        let during = "staging the runs' tally";
        let rows = self
            .tx
            .query(
                "SELECT provider_thread, provider, status, has_handoff, runs, first, last
                 FROM run_tally WHERE thread = $1",
                &[&thread],
            )
            .map_err(|e| self.pg(during, e))?;
        self.stx
            .execute("DELETE FROM run_tally WHERE thread = ?1", [thread])
            .map_err(|e| self.sql(during, e))?;
        let mut st = self
            .stx
            .prepare(
                "INSERT INTO run_tally (thread, provider_thread, provider, status, has_handoff,
                     runs, first, last) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(|e| self.sql(during, e))?;
        for r in &rows {
            let get = |e| DbError::Postgres(self.store.err(during, e));
            let pt: Option<String> = r.try_get(0).map_err(get)?;
            let provider: String = r.try_get(1).map_err(get)?;
            let status: String = r.try_get(2).map_err(get)?;
            let has_handoff: i64 = r.try_get(3).map_err(get)?;
            let runs: i64 = r.try_get(4).map_err(get)?;
            let first: i64 = r.try_get(5).map_err(get)?;
            let last: i64 = r.try_get(6).map_err(get)?;
            st.execute(rusqlite::params![
                thread,
                pt,
                provider,
                status,
                has_handoff,
                runs,
                first,
                last
            ])
            .map_err(|e| self.sql(during, e))?;
        }
        Ok(())
    }

    /// A dispatch's window of `thread` to `target` ([`Plan::Dispatch`]); `None` (the tally
    /// removed again) when the thread has no window.
    fn window(
        &mut self,
        thread: &str,
        target: &str,
        during: &str,
    ) -> Result<Option<Partial>, DbError> {
        for (t, col) in [
            ("threads", "id"),
            ("provider_threads", "thread"),
            ("transfers", "thread"),
            ("checkpoints", "thread"),
            ("grants", "thread"),
        ] {
            self.rows(t, &format!("{col} = $1"), &[&thread])?;
        }
        self.tally(thread)?;
        let found = Cx::new(self.stx, self.name, self.busy).window_base(thread, target)?;
        let Some(found) = found else {
            self.stx
                .execute("DELETE FROM run_tally WHERE thread = ?1", [thread])
                .map_err(|e| self.sql(during, e))?;
            return Ok(None);
        };
        let base = i64::from(found.base);
        self.rows(
            "runs",
            "thread = $1 AND (ordinal >= $2 OR ordinal = 1 OR status <> 'completed')",
            &[&thread, &base],
        )?;
        self.rows("items", "thread = $1 AND run > $2", &[&thread, &base])?;
        self.rows(
            "handoffs",
            "thread = $1 AND (covered_to >= $2 OR target_run > $2
                 OR seq = (SELECT MAX(seq) FROM handoffs WHERE thread = $1))",
            &[&thread, &base],
        )?;
        // Staging the runs ran the staging store's tally triggers.
        self.tally(thread)?;
        Ok(Some(Partial {
            thread: thread.to_string(),
            runs_from: found.base,
            first_run: true,
            items_after: found.base,
            handoffs_after: Some(found.base),
            meta: true,
            next_handoff_id: Some(self.next_handoff_id(thread)?),
        }))
    }

    /// The id the thread's next handoff gets, as `Cx::next_handoff_id` finds it, on the
    /// server: `H<n>` for the smallest n above the number of handoffs that is not taken.
    fn next_handoff_id(&mut self, thread: &str) -> Result<String, DbError> {
        let during = "numbering a handoff";
        let count: i64 = self
            .tx
            .query_one(
                "SELECT COUNT(*) FROM handoffs WHERE thread = $1",
                &[&thread],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg(during, e))?;
        let mut n = count.saturating_add(1);
        loop {
            let id = format!("H{n}");
            let taken = self
                .tx
                .query_opt(
                    "SELECT 1 FROM handoffs WHERE thread = $1 AND id = $2",
                    &[&thread, &id],
                )
                .map_err(|e| self.pg(during, e))?
                .is_some();
            if !taken {
                return Ok(id);
            }
            n = n.saturating_add(1);
        }
    }

    /// What completing `run` of `thread` with new items naming `ids` reads ([`Plan::Complete`]).
    fn run(&mut self, thread: &str, run: u32, ids: &[String]) -> Result<Partial, DbError> {
        let ordinal = i64::from(run);
        // The places whose generated id (`r<run>.<n>`) a new item's id names.
        let places: Vec<(i64, i64)> = ids
            .iter()
            .filter_map(|id| crate::store::lifecycle::generated_place(id))
            .map(|(r, n)| (i64::from(r), n.saturating_sub(1)))
            .collect();
        // As the index `items_by_id` holds them: an id that is not its place's own.
        let named = "thread = $1 AND item_id = ANY($2)
                       AND item_id <> 'r' || run::text || '.' || (idx + 1)::text";
        self.rows("threads", "id = $1", &[&thread])?;
        // The runs first (an item's run must be there): the run and those after it, the last,
        // and the runs of the stored items the new ids may repeat.
        self.rows(
            "runs",
            "thread = $1 AND (ordinal >= $2
                 OR ordinal = (SELECT MAX(ordinal) FROM runs WHERE thread = $1))",
            &[&thread, &ordinal],
        )?;
        self.rows("items", "thread = $1 AND run >= $2", &[&thread, &ordinal])?;
        if !ids.is_empty() {
            self.rows(
                "runs",
                &format!("thread = $1 AND ordinal IN (SELECT run FROM items WHERE {named})"),
                &[&thread, &ids],
            )?;
            self.rows("items", named, &[&thread, &ids])?;
        }
        for (r, idx) in places {
            self.rows("runs", "thread = $1 AND ordinal = $2", &[&thread, &r])?;
            self.rows(
                "items",
                "thread = $1 AND run = $2 AND idx = $3",
                &[&thread, &r, &idx],
            )?;
        }
        self.rows(
            "handoffs",
            "thread = $1 AND target_run = $2",
            &[&thread, &ordinal],
        )?;
        self.rows(
            "transfers",
            "thread = $1 AND status IN ('resolved_native', 'resolved_portable')",
            &[&thread],
        )?;
        self.rows("grants", "thread = $1 AND run = $2", &[&thread, &ordinal])?;
        Ok(Partial {
            thread: thread.to_string(),
            runs_from: run,
            first_run: false,
            items_after: run.saturating_sub(1),
            handoffs_after: None,
            meta: false,
            next_handoff_id: None,
        })
    }
}
