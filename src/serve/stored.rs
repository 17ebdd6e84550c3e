//! Methods over the store: threads by id, the lifecycle operations and pre-grant checks.
//! All of it is synchronous rusqlite work; the router runs it on the blocking pool with a
//! connection from [`StorePool`].

use super::policy_set::PolicySet;
use super::rpc::{code, RpcError};
use crate::deliver::{CheckRequest, PathArg};
use crate::state::{Item, RunStatus, State};
use crate::store::{self, Dispatched, Store, StoreError, StoreErrorKind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Mutex;

/// A few open connections to the database, reused across requests. Each blocking task takes
/// one (or opens a new one), and gives it back when done; SQLite's WAL, busy timeout and
/// `BEGIN IMMEDIATE` transactions keep concurrent writers correct.
pub struct StorePool {
    db: PathBuf,
    idle: Mutex<Vec<Store>>,
    /// SQLite takes one writer at a time; queueing this process's writers here instead of in
    /// SQLite's busy handler (which sleeps and retries) keeps write latency low under load.
    /// Other processes are still kept out by SQLite's own locking.
    writer: Mutex<()>,
}

/// How many idle connections are kept.
const POOL_SIZE: usize = 8;

impl StorePool {
    pub fn new(db: PathBuf) -> StorePool {
        StorePool {
            db,
            idle: Mutex::new(Vec::new()),
            writer: Mutex::new(()),
        }
    }

    /// Like [`StorePool::with`], for an operation that writes: one writer of this process at
    /// a time.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, RpcError>,
    ) -> Result<T, RpcError> {
        let _one = self.writer_guard();
        self.with(f)
    }

    /// This process's writer lock, held while its guard lives.
    fn writer_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`StorePool::write`] for a store operation: its [`StoreError`] becomes the JSON-RPC
    /// error of [`store_error`].
    pub fn write_op<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, RpcError> {
        self.write(|s| f(s).map_err(|e| store_error(&e)))
    }

    /// Like [`StorePool::with`], for an operation that only reads: a database that does not
    /// exist yet is an error (`-32004`) naming it, never created.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, RpcError>,
    ) -> Result<T, RpcError> {
        if !self.db.is_file() {
            return Err(RpcError::new(
                code::STORE_ERROR,
                format!(
                    "{}: error: no baton database here (reading methods never create one; the first method that writes, such as `thread/import`, does); check the service's --db",
                    self.db.display()
                ),
            ));
        }
        self.with(f)
    }

    /// Run `f` with a connection. Blocking: call from a blocking task.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, RpcError>,
    ) -> Result<T, RpcError> {
        let taken = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut s = match taken {
            Some(s) => s,
            None => Store::open(&self.db).map_err(|e| store_error(&e))?,
        };
        let r = f(&mut s);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_SIZE {
            idle.push(s);
        }
        r
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

/// A stored thread as a state. Reading never creates the database: a `--db` that names no
/// file is a store error naming it.
pub fn load(pool: &StorePool, thread: &str) -> Result<State, RpcError> {
    pool.read(|s| s.load(thread).map_err(|e| store_error(&e)))
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
    pool.write_op(|s| s.import_with(&state, replace))?;
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
    pool.with(|s| {
        store::dispatch_with_writer(s, &set.engine, &req, || pool.writer_guard())
            .map_err(|e| store_error(&e))
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
    pool.write_op(|s| store::complete_run_with(s, &p.thread, p.run, p.items, p.status, &end))
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
    let mut r = pool.write_op(|s| store::rollback(s, &p.thread, p.to))?;
    let _ = pool.with(|s| {
        store::advise_rollback(s, &set.engine, &mut r).map_err(|e| store_error(&e))
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
    pool.write_op(|s| store::fork(s, &p.thread, p.at, p.child.as_deref()))
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
    pool.with(|s| {
        store::merge_back_with_writer(s, &set.engine, &p.thread, &opts, || pool.writer_guard())
            .map_err(|e| store_error(&e))
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
    pool.with(|s| {
        store::regenerate_with_writer(s, &set.engine, &p.thread, &p.handoff, &opts, || {
            pool.writer_guard()
        })
        .map_err(|e| store_error(&e))
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
    pool.write(|s| {
        crate::deliver::check(s, &req)
            .map(|v| json!(v))
            .map_err(|e| RpcError::new(code::DELIVERY_ERROR, e.to_string()))
    })
}
