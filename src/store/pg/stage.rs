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
use crate::store::{log_refs, DbError, Store, StoreError};
use postgres::{GenericClient, Transaction};
use rusqlite::types::Value;
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

/// The rows staged, by table, by primary key.
#[derive(Default)]
struct Staged {
    rows: HashMap<&'static str, BTreeMap<String, Vec<Value>>>,
}

fn key_of(t: &Table, row: &[Value]) -> String {
    let values: Vec<&Value> = t
        .key
        .iter()
        .filter_map(|k| t.columns.iter().position(|c| c == k))
        .filter_map(|i| row.get(i))
        .collect();
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
        self.staged_with(threads, during, LogRows::Latest, also, op)
    }

    /// [`PgStore::staged`], staging `log` of each thread's decision log.
    pub(crate) fn staged_with<T>(
        &self,
        threads: &[&str],
        during: &str,
        log: LogRows,
        also: impl Fn(&mut Transaction<'_>, &str) -> Result<Vec<String>, postgres::Error>,
        mut op: impl FnMut(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, DbError> {
        let mut locked: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
        locked.sort();
        locked.dedup();
        let mut client = self.client.borrow_mut();
        let mut tries = 0u32;
        let mut widenings = 0u32;
        loop {
            let attempt = (|| -> Result<Option<T>, DbError> {
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
                    return Ok(None);
                }
                let mut mem = Store::open_staging(&self.url)?;
                let staged = self
                    .stage(&mut tx, &mut mem, &locked, log, during)
                    .map_err(|e| within(e, during))?;
                let (out, after_commit) = crate::store::hold_commit_faults(|| op(&mut mem));
                let out = out?;
                crate::store::fault("pg:before_write_back");
                self.write_back(&mut tx, &mem, &staged, during)
                    .map_err(|e| within(e, during))?;
                tx.commit()
                    .map_err(|e| self.err(&format!("committing ({during})"), e))?;
                // The staging store's `after_commit` crash points, now that it is true.
                for step in &after_commit {
                    crate::store::fault(step);
                }
                Ok(Some(out))
            })();
            match attempt {
                Ok(Some(out)) => return Ok(out),
                Ok(None) => {
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
                self.stage(&mut tx, &mut mem, &threads, LogRows::Latest, during)?;
                tx.commit().map_err(|e| self.err(during, e))?;
            }
        }
        Ok(mem)
    }

    /// Copy `threads`' rows into `mem`; returns what was copied.
    fn stage(
        &self,
        tx: &mut impl GenericClient,
        mem: &mut Store,
        threads: &[String],
        log_rows: LogRows,
        during: &str,
    ) -> Result<Staged, DbError> {
        let url = self.url.as_str();
        let cerr = |e| copy_err(url, e);
        let mut staged = Staged::default();
        let (stx, name, busy) = mem.begin(during)?;
        for t in TABLES.iter().filter(|t| t.state || t.name == "grants") {
            let Some(col) = t.thread else { continue };
            for th in threads {
                let rows =
                    copy::read_pg_where(tx, url, t, &format!("{col} = $1"), &[th]).map_err(cerr)?;
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
        for th in threads {
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
        Ok(staged)
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
        for t in TABLES {
            let now = copy::read_sqlite(mem, t, None)?;
            let before = staged.rows.get(t.name).unwrap_or(&none);
            let mut seen = HashSet::new();
            let mut new = Vec::new();
            let mut changed = Vec::new();
            for row in now {
                let k = key_of(t, &row);
                match before.get(&k) {
                    None => new.push(row),
                    Some(b) if *b != row => changed.push(row),
                    Some(_) => {}
                }
                seen.insert(k);
            }
            let gone: copy::Rows = before
                .iter()
                .filter(|(k, _)| !seen.contains(*k))
                .map(|(_, r)| r.clone())
                .collect();
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
    t.key
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} = ${}", from.saturating_add(i)))
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
