//! Methods over the store: threads by id, the lifecycle operations and pre-grant checks.
//! All of it is synchronous store work on a [`Db`] (a SQLite file, or a PostgreSQL database
//! with feature `postgres`); the router runs it on the blocking pool with a connection from
//! [`StorePool`].

use super::policy_set::PolicySet;
use super::rpc::{code, RpcError};
use crate::deliver::{CheckRequest, PathArg};
use crate::state::{Item, RunStatus, State};
use crate::store::{self, Db, DbError, DbUrl, Dispatched, Store, StoreError, StoreErrorKind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Mutex;

/// Open connections to the database, reused across requests.
///
/// * **SQLite**: a few idle connections are kept; each blocking task takes one (or opens a
///   new one) and gives it back when done. SQLite's WAL, busy timeout and `BEGIN IMMEDIATE`
///   transactions keep concurrent writers correct, and this process's writers take turns on
///   an in-process lock first.
/// * **PostgreSQL** (feature `postgres`): a bounded pool (r2d2) of at most `--db-pool`
///   connections. A request that finds them all busy waits up to `--db-pool-timeout` for one,
///   then is answered with an error saying so; nothing of it was done. Writers of different
///   threads run at once (the backend locks each thread, docs/store.md#postgresql).
pub struct StorePool {
    url: DbUrl,
    backend: Backend,
    /// What the messages call the database's setting (`--db` in `baton serve`).
    db_setting: String,
}

enum Backend {
    Sqlite {
        db: PathBuf,
        idle: Mutex<Vec<Db>>,
        /// SQLite takes one writer at a time; queueing this process's writers here instead of
        /// in SQLite's busy handler (which sleeps and retries) keeps write latency low under
        /// load. Other processes are still kept out by SQLite's own locking.
        writer: Mutex<()>,
    },
    #[cfg(feature = "postgres")]
    Postgres(pg_pool::PgPool),
}

/// How many idle SQLite connections are kept.
const POOL_SIZE: usize = 8;

impl StorePool {
    /// The pool of `cfg.db` (nothing is opened yet; see [`StorePool::prepare`]).
    pub fn new(cfg: &super::ServeConfig) -> StorePool {
        let url = DbUrl::parse(&cfg.db.to_string_lossy());
        let backend = match &url {
            DbUrl::Sqlite(path) => Backend::Sqlite {
                db: path.clone(),
                idle: Mutex::new(Vec::new()),
                writer: Mutex::new(()),
            },
            #[cfg(feature = "postgres")]
            DbUrl::Postgres(u) => Backend::Postgres(pg_pool::PgPool::new(
                u,
                cfg.db_pool,
                cfg.db_pool_timeout,
                &cfg.settings,
            )),
            // A baton without the backend never serves it: `baton serve` refuses the URL, and
            // [`StorePool::prepare`] says why at start.
            #[cfg(not(feature = "postgres"))]
            DbUrl::Postgres(_) => Backend::Sqlite {
                db: cfg.db.clone(),
                idle: Mutex::new(Vec::new()),
                writer: Mutex::new(()),
            },
        };
        StorePool {
            url,
            backend,
            db_setting: cfg.settings.db.clone(),
        }
    }

    /// Before serving: a PostgreSQL database is reached and migrated to this baton's schema
    /// (an unreachable server, or a database of a newer schema, stops the service at start
    /// with the store's message). A SQLite file is created by the first method that writes.
    pub fn prepare(&self) -> Result<(), DbError> {
        match &self.url {
            DbUrl::Sqlite(_) => Ok(()),
            DbUrl::Postgres(_) => Db::open(&self.url, store::DEFAULT_BUSY_TIMEOUT).map(drop),
        }
    }

    /// The database's name in messages (a path, or the URL without its password).
    pub fn name(&self) -> String {
        self.url.redacted()
    }

    /// The database the pool opens.
    pub fn url(&self) -> &DbUrl {
        &self.url
    }

    /// Like [`StorePool::with`], for an operation that writes: on SQLite, one writer of this
    /// process at a time.
    pub fn write<T>(&self, f: impl FnOnce(&mut Db) -> Result<T, RpcError>) -> Result<T, RpcError> {
        let _one = self.writer_guard();
        self.with(f)
    }

    /// This process's SQLite writer lock, held while its guard lives (none on PostgreSQL,
    /// whose writers lock the threads they write).
    pub fn writer_guard(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        match &self.backend {
            Backend::Sqlite { writer, .. } => Some(writer.lock().unwrap_or_else(|p| p.into_inner())),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => None,
        }
    }

    /// [`StorePool::write`] for a store operation: its [`DbError`] becomes the JSON-RPC
    /// error of [`db_error`].
    pub fn write_op<T>(
        &self,
        f: impl FnOnce(&mut Db) -> Result<T, DbError>,
    ) -> Result<T, RpcError> {
        self.write(|s| f(s).map_err(|e| db_error(&e)))
    }

    /// Like [`StorePool::with`], for an operation that only reads: a SQLite database that
    /// does not exist yet is an error (`-32004`) naming it, never created.
    pub fn read<T>(&self, f: impl FnOnce(&mut Db) -> Result<T, RpcError>) -> Result<T, RpcError> {
        match &self.backend {
            Backend::Sqlite { db, .. } if !db.is_file() => {
                return Err(RpcError::new(
                    code::STORE_ERROR,
                    format!(
                        "{}: error: no baton database here (reading methods never create one; the first method that writes, such as `thread/import`, does); check the service's {}",
                        db.display(),
                        self.db_setting
                    ),
                ));
            }
            _ => {}
        }
        self.with(f)
    }

    /// Run `f` with a connection. Blocking: call from a blocking task.
    pub fn with<T>(&self, f: impl FnOnce(&mut Db) -> Result<T, RpcError>) -> Result<T, RpcError> {
        match &self.backend {
            Backend::Sqlite { db, idle, .. } => {
                let taken = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let mut conn = match taken {
                    Some(s) => s,
                    None => Db::Sqlite(Store::open(db).map_err(|e| store_error(&e))?),
                };
                let r = f(&mut conn);
                let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
                if idle.len() < POOL_SIZE {
                    idle.push(conn);
                }
                r
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(pool) => pool.with(f),
        }
    }
}

#[cfg(feature = "postgres")]
mod pg_pool {
    //! The bounded pool of PostgreSQL connections (r2d2), each a [`Db`] opened without
    //! migrating (the service migrated the database at start).
    use super::{code, Db, DbError, DbUrl, RpcError};
    use serde_json::json;
    use std::time::Duration;

    /// A pooled connection. The synchronous PostgreSQL client closes its connection on a
    /// runtime of its own, which cannot start on a thread of the service's runtime: one
    /// dropped there (the pool going away at shutdown) is closed on a thread of its own.
    pub struct PgConn(Option<Db>);

    impl Drop for PgConn {
        fn drop(&mut self) {
            if let Some(db) = self.0.take() {
                if tokio::runtime::Handle::try_current().is_ok() {
                    let _ = std::thread::Builder::new()
                        .name("baton-pg-close".into())
                        .spawn(move || drop(db));
                }
            }
        }
    }

    pub struct PgPool {
        pool: r2d2::Pool<Manager>,
        /// The URL without its password, for messages.
        name: String,
        size: u32,
        timeout: Duration,
        /// What the messages call the pool's settings (`--db-pool`, `--db-pool-timeout`).
        pool_setting: String,
        timeout_setting: String,
    }

    struct Manager {
        url: DbUrl,
    }

    impl r2d2::ManageConnection for Manager {
        type Connection = PgConn;
        type Error = DbError;

        fn connect(&self) -> Result<PgConn, DbError> {
            Db::open_existing(&self.url).map(|db| PgConn(Some(db)))
        }

        /// Nothing to check on the way out: a connection found closed when it came back was
        /// dropped then ([`Manager::has_broken`]), and an operation on one that broke since
        /// fails with "the connection ... was lost", nothing of it recorded.
        fn is_valid(&self, _: &mut PgConn) -> Result<(), DbError> {
            Ok(())
        }

        fn has_broken(&self, conn: &mut PgConn) -> bool {
            match &conn.0 {
                Some(Db::Postgres(p)) => p.is_closed(),
                _ => true,
            }
        }
    }

    impl PgPool {
        pub fn new(
            url: &str,
            size: u32,
            timeout: Duration,
            settings: &crate::serve::SettingNames,
        ) -> PgPool {
            let url = DbUrl::Postgres(url.to_string());
            let name = url.redacted();
            let pool = r2d2::Pool::builder()
                .max_size(size.max(1))
                // Connections are opened when needed, none ahead, and idle ones kept for reuse.
                .min_idle(Some(0))
                .test_on_check_out(false)
                .connection_timeout(timeout)
                .error_handler(Box::new(r2d2::NopErrorHandler))
                .build_unchecked(Manager { url });
            PgPool {
                pool,
                name,
                size: size.max(1),
                timeout,
                pool_setting: settings.db_pool.clone(),
                timeout_setting: settings.db_pool_timeout.clone(),
            }
        }

        pub fn with<T>(
            &self,
            f: impl FnOnce(&mut Db) -> Result<T, RpcError>,
        ) -> Result<T, RpcError> {
            let mut conn = self.pool.get().map_err(|e| self.exhausted(&e))?;
            match conn.0.as_mut() {
                Some(db) => f(db),
                None => Err(RpcError::internal("a pooled connection was already closed")),
            }
        }

        /// The error of a request that got no connection in time: every connection busy (the
        /// pool exhausted), or none could be opened (the server unreachable).
        fn exhausted(&self, e: &r2d2::Error) -> RpcError {
            let state = self.pool.state();
            let all_busy = state.connections >= self.size && state.idle_connections == 0;
            let waited = seconds_or_ms(self.timeout);
            let (code_name, message) = match e.to_string().split_once(": ") {
                // r2d2 names the last failure to connect after its own message.
                Some((_, reason)) if !all_busy => (
                    "baton::store::pg::unreachable",
                    format!(
                        "{}: error: no connection to the PostgreSQL server for {waited}: {reason}; nothing of the request was done; check that the server is running, then send it again",
                        self.name
                    ),
                ),
                _ => (
                    "baton::store::pg::pool_exhausted",
                    format!(
                        "{}: error: every connection of this service's PostgreSQL pool ({pool} {}) stayed busy for {waited}: the pool is exhausted; nothing of the request was done; send it again, or start the service with a larger {pool} (within the server's max_connections) or a longer {}",
                        self.name,
                        self.size,
                        self.timeout_setting,
                        pool = self.pool_setting,
                    ),
                ),
            };
            RpcError::new(code::STORE_ERROR, message)
                .with_data(json!({"code": code_name, "database": self.name}))
        }
    }

    fn seconds_or_ms(d: Duration) -> String {
        let ms = d.as_millis();
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{ms} ms")
        }
    }
}

/// The JSON-RPC error for a store error: not-found, invalid state, policy, render or store.
pub fn store_error(e: &StoreError) -> RpcError {
    let code = match e.kind() {
        StoreErrorKind::ThreadNotFound { .. }
        | StoreErrorKind::RunNotFound { .. }
        | StoreErrorKind::HandoffNotFound { .. } => code::NOT_FOUND,
        StoreErrorKind::InvalidState { .. } => code::STATE_ERROR,
        StoreErrorKind::Pipeline { source, .. } => match source.as_ref() {
            crate::pipeline::PipelineError::Eval(_) => code::POLICY_ERROR,
            crate::pipeline::PipelineError::Render(_) => code::RENDER_ERROR,
        },
        StoreErrorKind::NoHandoff { .. } => code::POLICY_ERROR,
        _ => code::STORE_ERROR,
    };
    let mut data = serde_json::Map::new();
    data.insert("code".into(), json!(e.code()));
    data.insert("database".into(), json!(e.database()));
    if let Some(t) = e.thread() {
        data.insert("thread".into(), json!(t));
    }
    if let Some(r) = e.run() {
        data.insert("run".into(), json!(r));
    }
    if let Some(h) = e.handoff() {
        data.insert("handoff".into(), json!(h));
    }
    // The message locates the error in the database as the CLI does (`DB: error: ...`); the
    // fields are `error.data`.
    RpcError::new(code, crate::error::located(e)).with_data(Value::Object(data))
}

/// The JSON-RPC error for an error of either backend: a store error as [`store_error`]; a
/// PostgreSQL backend's error (unreachable, lost, conflicting, ...) as a store error (`-32004`)
/// with its message and a code naming its kind.
pub fn db_error(e: &DbError) -> RpcError {
    match e {
        DbError::Store(e) => store_error(e),
        #[cfg(feature = "postgres")]
        DbError::Postgres(pg) => {
            use crate::store::pg::PgError;
            let kind = match pg {
                PgError::BadUrl { .. } => "bad_url",
                PgError::Unreachable { .. } => "unreachable",
                PgError::Lost { .. } => "lost",
                PgError::TooNew { .. } => "too_new",
                PgError::NeedsMigration { .. } => "needs_migration",
                PgError::Conflict { .. } => "conflict",
                PgError::Corrupt { .. } => "corrupt",
                _ => "sql",
            };
            RpcError::new(code::STORE_ERROR, crate::error::located(e)).with_data(json!({
                "code": format!("baton::store::pg::{kind}"),
            }))
        }
        other => RpcError::new(code::STORE_ERROR, crate::error::located(other)),
    }
}

/// A stored thread as a state. Reading never creates the database: a `--db` that names no
/// file is a store error naming it.
pub fn load(pool: &StorePool, thread: &str) -> Result<State, RpcError> {
    pool.read(|db| match db {
        Db::Sqlite(s) => s.load(thread).map_err(|e| store_error(&e)),
        #[cfg(feature = "postgres")]
        Db::Postgres(_) => db.load(thread).map_err(|e| db_error(&e)),
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportParams {
    /// The state document (docs/state.md) as a JSON object.
    pub state: Option<Value>,
    /// The state document as text (YAML or JSON); `stateText` is a deprecated alias.
    #[serde(alias = "stateText")]
    pub state_text: Option<String>,
    #[serde(default)]
    pub replace: bool,
}

pub fn import(pool: &StorePool, state: State, replace: bool) -> Result<Value, RpcError> {
    pool.write_op(|db| db.import_with(&state, replace))?;
    Ok(json!(store::ImportReport {
        thread: state.thread.id,
        runs: state.runs.len(),
    }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadParams {
    pub thread: String,
}

pub fn export(pool: &StorePool, p: ThreadParams) -> Result<Value, RpcError> {
    let st = load(pool, &p.thread)?;
    Ok(json!({ "state": st }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatchParams {
    pub thread: String,
    pub target: String,
    pub message: Option<String>,
    pub model: Option<String>,
    /// `runtimeMode` is a deprecated alias.
    #[serde(alias = "runtimeMode")]
    pub runtime_mode: Option<String>,
    /// `cleanContext` is a deprecated alias.
    #[serde(default, alias = "cleanContext")]
    pub clean_context: bool,
    /// Include the decision's trace (default true); false leaves it out.
    #[serde(default = "yes")]
    pub trace: bool,
    /// When the run is requested (`request.at`, RFC 3339); now when absent.
    pub at: Option<String>,
    /// The directory the run starts in (`request.workspace.cwd`); its git state is read from
    /// the repository. `workspace` gives the whole snapshot instead.
    pub cwd: Option<String>,
    /// The workspace the run starts in (`request.workspace`), as in a state file.
    pub workspace: Option<crate::state::Workspace>,
}

/// The workspace of `cwd` and `workspace` params: the snapshot given, else the directory.
fn workspace_of(
    cwd: Option<String>,
    workspace: Option<crate::state::Workspace>,
) -> Option<crate::state::Workspace> {
    workspace.or_else(|| {
        cwd.map(|c| crate::state::Workspace {
            cwd: Some(c),
            ..Default::default()
        })
    })
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn yes() -> bool {
    true
}

/// The result of a dispatch, merge-back or regenerate: the same JSON `baton dispatch --json`
/// prints (the decision's `policy` is the set that made it).
pub fn dispatched(d: Dispatched, trace: bool) -> Value {
    store::report::to_value(&store::DispatchReport::from(d), trace)
}

pub fn dispatch(
    pool: &StorePool,
    set: &PolicySet,
    p: DispatchParams,
) -> Result<Dispatched, RpcError> {
    let req = store::DispatchRequest {
        thread: p.thread,
        target: p.target,
        message: p.message,
        model: p.model,
        runtime_mode: p.runtime_mode,
        clean_context: p.clean_context,
        at: Some(p.at.unwrap_or_else(now)),
        workspace: workspace_of(p.cwd, p.workspace),
    };
    // The writer lock is taken only around the write transaction: a policy's summarizer runs
    // before it, so it never holds up other threads' writes.
    pool.with(|db| {
        db.dispatch_with_writer(&set.engine, &req, || pool.writer_guard())
            .map_err(|e| db_error(&e))
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteParams {
    pub thread: String,
    pub run: u32,
    #[serde(default)]
    pub items: Vec<Item>,
    #[serde(default = "completed")]
    pub status: RunStatus,
    /// When the run ended (`runs[].ended_at`, RFC 3339); now when absent.
    pub ended_at: Option<String>,
    /// The directory the run ended in: recorded with its git state as `runs[].workspace`.
    pub cwd: Option<String>,
    /// The workspace the run ended in (`runs[].workspace`), as in a state file.
    pub workspace: Option<crate::state::Workspace>,
}

fn completed() -> RunStatus {
    RunStatus::Completed
}

pub fn complete(pool: &StorePool, p: CompleteParams) -> Result<Value, RpcError> {
    let end = store::RunEnd {
        ended_at: Some(p.ended_at.unwrap_or_else(now)),
        workspace: p
            .workspace
            .or_else(|| p.cwd.as_deref().map(|c| crate::workspace::live(c).0)),
    };
    pool.write_op(|db| db.complete_run_with(&p.thread, p.run, p.items, p.status, &end))
        .map(|c| json!(c))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackParams {
    pub thread: String,
    pub to: u32,
}

/// Roll back, then say what the app does with each provider thread (the serving engine (its
/// policy, templates and off-band root) decides the next run on each provider; see [`store::advise_rollback`]). The rollback is committed
/// whatever the advice: advice that cannot be given leaves `next_run` null.
pub fn rollback(
    pool: &StorePool,
    set: &PolicySet,
    p: RollbackParams,
) -> Result<Value, RpcError> {
    let mut r = pool.write_op(|db| db.rollback(&p.thread, p.to))?;
    let _ = pool.with(|db| {
        db.advise_rollback(&set.engine, &mut r)
            .map_err(|e| db_error(&e))
    });
    Ok(json!(r))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    pub thread: String,
    pub at: u32,
    pub child: Option<String>,
}

pub fn fork(pool: &StorePool, p: ForkParams) -> Result<Value, RpcError> {
    pool.write_op(|db| db.fork(&p.thread, p.at, p.child.as_deref()))
        .map(|r| json!(r))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeBackParams {
    /// The fork (child) thread.
    pub thread: String,
    pub message: Option<String>,
    /// Include the decision's trace (default true); false leaves it out.
    #[serde(default = "yes")]
    pub trace: bool,
}

pub fn merge_back(
    pool: &StorePool,
    set: &PolicySet,
    p: MergeBackParams,
) -> Result<Dispatched, RpcError> {
    // The serving set's engine brings the policy, the templates and the off-band root.
    let opts = store::HandoffOptions { message: p.message };
    // As for a dispatch, the writer lock is taken only around the write transaction.
    pool.with(|db| {
        db.merge_back_with_writer(&set.engine, &p.thread, &opts, || pool.writer_guard())
            .map_err(|e| db_error(&e))
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegenerateParams {
    pub thread: String,
    /// The handoff to supersede (the running run's).
    pub handoff: String,
    /// Replace the user's message.
    pub message: Option<String>,
    /// Include the decision's trace (default true); false leaves it out.
    #[serde(default = "yes")]
    pub trace: bool,
}

pub fn regenerate(
    pool: &StorePool,
    set: &PolicySet,
    p: RegenerateParams,
) -> Result<Dispatched, RpcError> {
    let opts = store::HandoffOptions { message: p.message };
    // As for a dispatch, the writer lock is taken only around the write transaction.
    pool.with(|db| {
        db.regenerate_with_writer(&set.engine, &p.thread, &p.handoff, &opts, || {
            pool.writer_guard()
        })
        .map_err(|e| db_error(&e))
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PregrantParams {
    pub thread: String,
    /// The turn (run) the tool call happens on.
    pub run: u32,
    pub tool: String,
    /// The requested path...
    pub path: Option<PathBuf>,
    /// ...or the tool's JSON arguments (`file_path` or `path`).
    pub args: Option<Value>,
}

pub fn pregrant_check(pool: &StorePool, p: PregrantParams) -> Result<Value, RpcError> {
    let args =
        match (p.path, p.args) {
            (Some(path), None) => PathArg::Path(path),
            (None, Some(a)) => PathArg::Args(a),
            _ => return Err(RpcError::invalid_params(
                "give the requested path as `path`, or the tool's arguments as `args`, not both",
            )),
        };
    let req = CheckRequest {
        thread: p.thread,
        run: p.run,
        tool: p.tool,
        args,
    };
    pool.write(|db| {
        crate::deliver::check(db, &req)
            .map(|v| json!(v))
            .map_err(|e| RpcError::new(code::DELIVERY_ERROR, e.to_string()))
    })
}
