//! Rows between the backends: `baton db copy` (a whole database, either way) and PostgreSQL's
//! import and export of one thread, which go through a private in-memory SQLite store so that
//! a state's rows are made and read by the one implementation (`store::io`) and validated as
//! on SQLite.
//!
//! Both schemas have the same tables and columns ([`TABLES`], parents first). A value is
//! carried as a SQLite value: an integer column is `BIGINT`, a text column `TEXT`, and a column
//! SQLite keeps as TEXT or as a packed BLOB is a `BYTEA` tagged `t` (text) or `p` (packed).
//! `run_tally` is not copied: the triggers on `runs` rebuild it on either side.

use super::{PgError, PgStore};
use crate::state::State;
use crate::store::{Store, StoreError, StoreErrorKind};
use postgres::types::Type;
use postgres::GenericClient;
use rusqlite::types::Value;

/// A table: its name, the column naming its thread (none for the content-addressed tables,
/// which every thread shares), and its columns.
pub(super) struct Table {
    pub(super) name: &'static str,
    pub(super) thread: Option<&'static str>,
    pub(super) columns: &'static [&'static str],
    /// Its primary key's columns.
    pub(super) key: &'static [&'static str],
    /// Whether it holds a thread's state (what import and export carry), rather than the
    /// decision log and the grants.
    pub(super) state: bool,
}

/// Every table, parents first.
pub(super) const TABLES: &[Table] = &[
    Table {
        name: "threads",
        thread: Some("id"),
        columns: &[
            "id",
            "version",
            "title",
            "compact_summary",
            "compact_summary_through",
            "parent_thread",
            "parent_run",
            "providers",
            "request",
            "workspace",
        ],
        key: &["id"],
        state: true,
    },
    Table {
        name: "provider_threads",
        thread: Some("thread"),
        columns: &[
            "thread",
            "id",
            "seq",
            "provider",
            "model",
            "runtime_mode",
            "status",
            "resume_failed",
        ],
        key: &["thread", "id"],
        state: true,
    },
    Table {
        name: "runs",
        thread: Some("thread"),
        columns: &[
            "thread",
            "ordinal",
            "provider",
            "provider_thread",
            "status",
            "handoff",
            "started_at",
            "ended_at",
            "workspace",
        ],
        key: &["thread", "ordinal"],
        state: true,
    },
    Table {
        name: "items",
        thread: Some("thread"),
        columns: &["thread", "run", "idx", "kind", "body", "item_id"],
        key: &["thread", "run", "idx"],
        state: true,
    },
    Table {
        name: "handoffs",
        thread: Some("thread"),
        columns: &[
            "thread",
            "id",
            "seq",
            "transfer",
            "target_run",
            "from_provider_threads",
            "to_provider_thread",
            "covered_from",
            "covered_to",
            "strategy",
            "status",
            "created_by",
            "summary",
            "supersedes",
            "document_path",
            "document",
            "inline_prompt",
            "covered_thread",
        ],
        key: &["thread", "id"],
        state: true,
    },
    Table {
        name: "transfers",
        thread: Some("thread"),
        columns: &[
            "thread",
            "id",
            "seq",
            "type",
            "status",
            "source_thread",
            "target_thread",
            "source_run",
            "resolution",
            "handoff",
        ],
        key: &["thread", "id"],
        state: true,
    },
    Table {
        name: "checkpoints",
        thread: Some("thread"),
        columns: &["thread", "seq", "run", "files_changed", "diff_summary"],
        key: &["thread", "seq"],
        state: true,
    },
    Table {
        name: "decision_chunks",
        thread: None,
        columns: &["sha", "body"],
        key: &["sha"],
        state: false,
    },
    Table {
        name: "decision_rules",
        thread: None,
        columns: &["sha", "body"],
        key: &["sha"],
        state: false,
    },
    Table {
        name: "decision_log",
        thread: Some("thread"),
        columns: &[
            "id",
            "thread",
            "run",
            "operation",
            "policy_name",
            "policy_sha256",
            "decision",
            "created_at",
            "input",
        ],
        key: &["id"],
        state: false,
    },
    Table {
        name: "grants",
        thread: Some("thread"),
        columns: &[
            "id",
            "thread",
            "run",
            "tool",
            "path",
            "uses_left",
            "handoff",
        ],
        key: &["id"],
        state: false,
    },
];

/// What went wrong copying rows between the backends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// On the PostgreSQL side.
    #[error(transparent)]
    Postgres(#[from] PgError),
    /// On the SQLite side (or validating a state).
    #[error(transparent)]
    Sqlite(#[from] StoreError),
    /// `baton db copy` into a database that already holds threads.
    #[error("the copy's destination already holds {threads} threads; copy into an empty database")]
    NotEmpty {
        /// The destination (a URL without its password, or a path).
        db: String,
        /// How many threads it holds.
        threads: usize,
    },
    /// A value a column of the destination cannot hold.
    #[error("cannot copy {table}.{column}: {why}")]
    Value {
        /// The database the value was read from or written to.
        db: String,
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Why.
        why: String,
    },
}

impl CopyError {
    /// The database the error is about: the PostgreSQL URL (without its password) or the
    /// SQLite file.
    pub fn database(&self) -> &str {
        match self {
            CopyError::Postgres(e) => e.url(),
            CopyError::Sqlite(e) => e.database(),
            CopyError::NotEmpty { db, .. } | CopyError::Value { db, .. } => db,
        }
    }
}

/// A copy error is located at the database it is about; a wrapped store error keeps its own
/// message (a decision failure inside it located at its rule).
impl crate::error::Located for CopyError {
    fn location(&self) -> Option<String> {
        match self {
            CopyError::Sqlite(e) => crate::error::Located::location(e),
            _ => Some(self.database().to_string()).filter(|d| !d.is_empty()),
        }
    }

    fn message(&self) -> String {
        match self {
            CopyError::Sqlite(e) => crate::error::Located::message(e),
            _ => self.to_string(),
        }
    }
}

/// What `baton db copy` copied: rows per table.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CopyReport {
    /// `(table, rows)` in copy order.
    pub tables: Vec<(String, usize)>,
    /// The threads copied.
    pub threads: usize,
}

pub(super) type Rows = Vec<Vec<Value>>;

fn select_sql(t: &Table, placeholder: &str, thread: Option<&str>) -> String {
    let mut sql = format!("SELECT {} FROM {}", t.columns.join(", "), t.name);
    if let (Some(_), Some(col)) = (thread, t.thread) {
        sql.push_str(&format!(" WHERE {col} = {placeholder}"));
    }
    sql
}

pub(super) fn insert_sql(t: &Table, mark: impl Fn(usize) -> String) -> String {
    let marks: Vec<String> = (1..=t.columns.len()).map(mark).collect();
    format!(
        "INSERT INTO {} ({}) VALUES ({})",
        t.name,
        t.columns.join(", "),
        marks.join(", ")
    )
}

pub(super) fn read_sqlite(
    store: &Store,
    t: &Table,
    thread: Option<&str>,
) -> Result<Rows, StoreError> {
    let during = format!("reading {}", t.name);
    let conn = store.connection();
    let mut st = conn
        .prepare(&select_sql(t, "?1", thread))
        .map_err(|e| store.err(&during, e))?;
    let width = t.columns.len();
    let map = |r: &rusqlite::Row<'_>| (0..width).map(|i| r.get::<_, Value>(i)).collect();
    let rows = match (thread, t.thread) {
        (Some(th), Some(_)) => st.query_map([th], map),
        _ => st.query_map([], map),
    }
    .map_err(|e| store.err(&during, e))?;
    rows.collect::<Result<Rows, _>>()
        .map_err(|e| store.err(&during, e))
}

fn write_sqlite(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    t: &Table,
    rows: &Rows,
) -> Result<(), StoreError> {
    write_sqlite_with(tx, name, t, rows, "INSERT")
}

/// `rows` into `t` of a staging store, where a row already there (read twice) is left as it is.
pub(super) fn stage_sqlite(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    t: &Table,
    rows: &Rows,
) -> Result<(), StoreError> {
    write_sqlite_with(tx, name, t, rows, "INSERT OR IGNORE")
}

fn write_sqlite_with(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    t: &Table,
    rows: &Rows,
    insert: &str,
) -> Result<(), StoreError> {
    let during = format!("writing {}", t.name);
    let err = |e| crate::store::sql_err(name, crate::store::DEFAULT_BUSY_TIMEOUT, &during, e);
    let sql = insert_sql(t, |i| format!("?{i}")).replacen("INSERT", insert, 1);
    let mut st = tx.prepare(&sql).map_err(err)?;
    for row in rows {
        st.execute(rusqlite::params_from_iter(row.iter()))
            .map_err(err)?;
    }
    Ok(())
}

fn value_err(db: &str, t: &Table, col: usize, why: impl ToString) -> CopyError {
    CopyError::Value {
        db: db.to_string(),
        table: t.name.to_string(),
        column: t.columns.get(col).copied().unwrap_or("?").to_string(),
        why: why.to_string(),
    }
}

fn read_pg(
    client: &mut impl GenericClient,
    url: &str,
    t: &Table,
    thread: Option<&str>,
) -> Result<Rows, CopyError> {
    match (thread, t.thread) {
        (Some(th), Some(col)) => read_pg_where(client, url, t, &format!("{col} = $1"), &[&th]),
        _ => read_pg_where(client, url, t, "TRUE", &[]),
    }
}

/// The rows of `t` that `clause` (what follows `WHERE`, with its `ORDER BY` and `LIMIT`) selects.
pub(super) fn read_pg_where(
    client: &mut impl GenericClient,
    url: &str,
    t: &Table,
    clause: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Rows, CopyError> {
    let during = format!("reading {}", t.name);
    let sql = format!(
        "SELECT {} FROM {} WHERE {clause}",
        t.columns.join(", "),
        t.name
    );
    let rows = client
        .query(&sql, params)
        .map_err(|e| super::sql_err(url, &during, e))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut values = Vec::with_capacity(t.columns.len());
        for (i, col) in row.columns().iter().enumerate() {
            let ty = col.type_();
            let get_err = |e: postgres::Error| super::sql_err(url, &during, e);
            let v = if *ty == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)
                    .map_err(get_err)?
                    .map_or(Value::Null, Value::Integer)
            } else if *ty == Type::BYTEA {
                match row.try_get::<_, Option<Vec<u8>>>(i).map_err(get_err)? {
                    None => Value::Null,
                    Some(bytes) => untag(bytes).map_err(|why| value_err(url, t, i, why))?,
                }
            } else {
                row.try_get::<_, Option<String>>(i)
                    .map_err(get_err)?
                    .map_or(Value::Null, Value::Text)
            };
            values.push(v);
        }
        out.push(values);
    }
    Ok(out)
}

/// Why a tagged `BYTEA` is not a SQLite value (the `why` of [`CopyError::Value`]).
#[derive(Debug, thiserror::Error)]
enum UntagError {
    #[error("a text value is not UTF-8: {0}")]
    NotUtf8(#[from] std::string::FromUtf8Error),
    #[error("a value is neither tagged text (t) nor packed (p)")]
    Untagged,
}

/// A tagged `BYTEA` as the SQLite value it stands for.
fn untag(mut bytes: Vec<u8>) -> Result<Value, UntagError> {
    let tag = bytes.first().copied();
    bytes.drain(..1.min(bytes.len()));
    match tag {
        Some(b't') => Ok(Value::Text(String::from_utf8(bytes)?)),
        Some(b'p') => Ok(Value::Blob(bytes)),
        _ => Err(UntagError::Untagged),
    }
}

fn tag(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len().saturating_add(1));
    v.push(kind);
    v.extend_from_slice(body);
    v
}

pub(super) type Params = Vec<Vec<Box<dyn postgres::types::ToSql + Sync>>>;

/// The rows as parameters of `t`'s insert, whose parameter types are `types`.
pub(super) fn pg_params(
    url: &str,
    t: &Table,
    rows: &Rows,
    types: &[Type],
) -> Result<Params, CopyError> {
    use postgres::types::ToSql;
    let mut out: Params = Vec::with_capacity(rows.len());
    for row in rows {
        let mut owned: Vec<Box<dyn ToSql + Sync>> = Vec::with_capacity(row.len());
        for (i, (v, ty)) in row.iter().zip(types).enumerate() {
            let bad = |what: &str| value_err(url, t, i, format!("{what} for a {ty} column"));
            let p: Box<dyn ToSql + Sync> = match (v, ty) {
                (Value::Null, ty) if *ty == Type::INT8 => Box::new(None::<i64>),
                (Value::Null, ty) if *ty == Type::BYTEA => Box::new(None::<Vec<u8>>),
                (Value::Null, _) => Box::new(None::<String>),
                (Value::Integer(n), ty) if *ty == Type::INT8 => Box::new(*n),
                (Value::Text(s), ty) if *ty == Type::TEXT => Box::new(s.clone()),
                (Value::Text(s), ty) if *ty == Type::BYTEA => Box::new(tag(b't', s.as_bytes())),
                (Value::Blob(b), ty) if *ty == Type::BYTEA => Box::new(tag(b'p', b)),
                (Value::Integer(_), _) => return Err(bad("an integer")),
                (Value::Text(_), _) => return Err(bad("a text")),
                (Value::Blob(_), _) => return Err(bad("a packed value")),
                (Value::Real(_), _) => return Err(bad("a real number")),
            };
            owned.push(p);
        }
        out.push(owned);
    }
    Ok(out)
}

/// Prepare `t`'s insert and turn `rows` into its parameters.
fn prepare_pg(
    client: &mut impl GenericClient,
    url: &str,
    t: &Table,
    rows: &Rows,
) -> Result<(postgres::Statement, Params), CopyError> {
    let during = format!("writing {}", t.name);
    let st = client
        .prepare(&insert_sql(t, |i| format!("${i}")))
        .map_err(|e| super::sql_err(url, &during, e))?;
    let params = pg_params(url, t, rows, st.params())?;
    Ok((st, params))
}

pub(super) fn insert_pg(
    client: &mut impl GenericClient,
    st: &postgres::Statement,
    params: &Params,
) -> Result<(), postgres::Error> {
    for row in params {
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            row.iter().map(|b| b.as_ref()).collect();
        client.execute(st, &refs)?;
    }
    Ok(())
}

fn write_pg(
    client: &mut impl GenericClient,
    url: &str,
    t: &Table,
    rows: &Rows,
) -> Result<(), CopyError> {
    let (st, params) = prepare_pg(client, url, t, rows)?;
    insert_pg(client, &st, &params)
        .map_err(|e| super::sql_err(url, &format!("writing {}", t.name), e).into())
}

/// Identity columns continue after the copied ids.
const RESEED: &str = "
SELECT setval(pg_get_serial_sequence('decision_log', 'id'), COALESCE(MAX(id), 0) + 1, false)
    FROM decision_log;
SELECT setval(pg_get_serial_sequence('grants', 'id'), COALESCE(MAX(id), 0) + 1, false)
    FROM grants;";

impl PgStore {
    /// Copy every row of the SQLite database `from` into this (empty) database, in one
    /// transaction: all of it or nothing.
    pub fn copy_from_sqlite(&self, from: &Store) -> Result<CopyReport, CopyError> {
        let present = self.threads()?.len();
        if present > 0 {
            return Err(CopyError::NotEmpty {
                db: self.url.clone(),
                threads: present,
            });
        }
        let mut client = self.client.borrow_mut();
        let url = self.url.clone();
        let mut tx = client
            .transaction()
            .map_err(|e| super::sql_err(&url, "starting the copy", e))?;
        let mut report = CopyReport::default();
        for t in TABLES {
            let rows = read_sqlite(from, t, None)?;
            write_pg(&mut tx, &url, t, &rows)?;
            report.tables.push((t.name.to_string(), rows.len()));
        }
        tx.batch_execute(RESEED)
            .map_err(|e| super::sql_err(&url, "continuing the ids", e))?;
        tx.commit()
            .map_err(|e| super::sql_err(&url, "committing the copy", e))?;
        report.threads = from.threads()?.len();
        Ok(report)
    }

    /// Copy every row of this database into the (empty) SQLite database `to`, in one
    /// transaction on each side (a snapshot read here, all-or-nothing there).
    pub fn copy_to_sqlite(&self, to: &mut Store) -> Result<CopyReport, CopyError> {
        let present = to.threads()?.len();
        if present > 0 {
            return Err(CopyError::NotEmpty {
                db: to.name(),
                threads: present,
            });
        }
        let tables = self.snapshot_into(to, None, "copying a database")?;
        let threads = tables.first().map(|(_, n)| *n).unwrap_or_default();
        Ok(CopyReport { tables, threads })
    }

    /// Read the tables (every table, or only a thread's state tables when `thread` is given)
    /// in one REPEATABLE READ, read-only snapshot here (no lock, no wait for writers) and write
    /// them into `to` in one transaction: `(table, rows)` in copy order.
    pub(super) fn snapshot_into(
        &self,
        to: &mut Store,
        thread: Option<&str>,
        during: &str,
    ) -> Result<Vec<(String, usize)>, CopyError> {
        let mut client = self.client.borrow_mut();
        let url = self.url.as_str();
        let mut read = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| super::sql_err(url, during, e))?;
        let (tx, name, busy) = to.begin(during)?;
        let mut copied = Vec::new();
        for t in TABLES.iter().filter(|t| thread.is_none() || t.state) {
            let rows = read_pg(&mut read, url, t, thread)?;
            write_sqlite(&tx, &name, t, &rows)?;
            copied.push((t.name.to_string(), rows.len()));
        }
        tx.commit()
            .map_err(|e| crate::store::sql_err(&name, busy, during, e))?;
        Ok(copied)
    }

    /// The stored thread as a state file, read in one REPEATABLE READ snapshot (no lock, no
    /// wait for writers).
    pub fn export(&self, thread: &str) -> Result<State, CopyError> {
        let mut mem = Store::open_in_memory()?;
        self.snapshot_into(&mut mem, Some(thread), "exporting a thread")?;
        match mem.load(thread) {
            Err(e) if matches!(e.kind(), StoreErrorKind::ThreadNotFound { .. }) => Err(
                CopyError::Sqlite(StoreError::new(self.url.clone(), e.into_kind())),
            ),
            other => Ok(other?),
        }
    }

    /// Import a state file's thread (validated as on SQLite), under the thread's lock; a
    /// thread already stored is refused ([`StoreErrorKind::ThreadExists`]).
    pub fn import(&self, state: &State) -> Result<(), CopyError> {
        let mut mem = Store::open_in_memory()?;
        mem.import(state)?;
        let thread = state.thread.id.as_str();
        let mut tables = Vec::new();
        for t in TABLES.iter().filter(|t| t.state) {
            tables.push((t, read_sqlite(&mem, t, Some(thread))?));
        }
        let prepared = {
            let mut client = self.client.borrow_mut();
            let mut out = Vec::with_capacity(tables.len());
            for (t, rows) in &tables {
                let (st, params) = prepare_pg(&mut *client, &self.url, t, rows)?;
                out.push((
                    st.params().to_vec(),
                    insert_sql(t, |i| format!("${i}")),
                    params,
                ));
            }
            out
        };
        let exists = self.with_thread(thread, "importing a thread", |tx| {
            let found = tx
                .query_opt("SELECT 1 FROM threads WHERE id = $1", &[&thread])?
                .is_some();
            if found {
                return Ok(true);
            }
            for (types, sql, params) in &prepared {
                let st = tx.prepare_typed(sql, types)?;
                insert_pg(tx, &st, params)?;
            }
            Ok(false)
        });
        if exists? {
            return Err(CopyError::Sqlite(StoreError::new(
                self.url.clone(),
                StoreErrorKind::ThreadExists {
                    thread: thread.to_string(),
                },
            )));
        }
        Ok(())
    }
}
