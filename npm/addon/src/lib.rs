//! baton's engine in process for Node.js (napi-rs): the native half of the `Engine` class of
//! `@baton-engine/baton`.
//!
//! Every result is the JSON text of the object the service (`baton serve`) and the command
//! line (`--json`) give, built by the same library types (`baton::store::report`): `decide`
//! is `baton explain --json` (the decision), `explain` the service's `explain` result,
//! `render` the service's `render` result (`baton render --json`). Every error is the JSON
//! text of the service's JSON-RPC error object (`{code, message, data?}`, docs/service.md)
//! carried as the thrown error's message; the package's JavaScript turns it into a
//! `BatonError` with that `code`.
//!
//! The `*_async` methods do the same work on libuv's thread pool (napi's `AsyncTask`), off
//! the JavaScript thread.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use baton::state::{Format, StateError};
use baton::store::report::{self, ExplainReport, RenderReport};
use baton::{Engine, Error as BatonError};
use napi::bindgen_prelude::{AsyncTask, Env, Error, Result, Status, Task};
use napi_derive::napi;
use serde_json::{json, Value};

/// JSON-RPC error codes of the service (docs/service.md#errors).
mod code {
    pub const INVALID_PARAMS: i64 = -32602;
    pub const POLICY_ERROR: i64 = -32001;
    pub const STATE_ERROR: i64 = -32002;
    pub const RENDER_ERROR: i64 = -32005;
}

/// A thrown error whose message is the service's error object as JSON.
fn rpc_error(code: i64, message: String, data: Option<Value>) -> Error {
    let mut v = json!({"code": code, "message": message});
    if let (Some(d), Some(o)) = (data, v.as_object_mut()) {
        o.insert("data".to_string(), d);
    }
    Error::new(Status::GenericFailure, v.to_string())
}

fn state_error(e: &StateError) -> Error {
    let problems: Vec<Value> = e
        .problems
        .iter()
        .map(|p| json!({"at": p.at, "line": p.line, "column": p.column, "message": p.message}))
        .collect();
    rpc_error(
        code::STATE_ERROR,
        e.to_string(),
        Some(json!({ "problems": problems })),
    )
}

/// The service's mapping of an engine failure (src/serve/methods.rs `engine_error`).
fn engine_error(e: &BatonError) -> Error {
    match e {
        BatonError::Eval(ev) => {
            let code = if e.code() == "baton::eval::unknown_target" {
                code::INVALID_PARAMS
            } else {
                code::POLICY_ERROR
            };
            rpc_error(code, baton::located(ev), None)
        }
        BatonError::State(s) => state_error(s),
        BatonError::Policy(p) => rpc_error(
            code::POLICY_ERROR,
            e.to_string(),
            Some(json!({ "diagnostics": p.diagnostics })),
        ),
        other => rpc_error(code::RENDER_ERROR, baton::located(other), None),
    }
}

/// What a call computes.
#[derive(Clone, Copy)]
enum Method {
    /// The decision (`baton explain --json`).
    Decide,
    /// `{policy, decision, explanation}` (the service's `explain`).
    Explain,
    /// `{policy, decision, handoff}` (the service's `render`, `baton render --json`).
    Render,
}

/// One call of `decide`, `explain` or `render`: the state (text or a JSON object's text),
/// the target and the flags; run on the calling thread or as an `AsyncTask`.
pub struct Call {
    engine: Engine,
    method: Method,
    state: String,
    /// `state` is the JSON text of a state object (the service's `state` param) rather than
    /// a state document's text (`state_text`).
    object: bool,
    target: Option<String>,
    verbose: bool,
    trace: bool,
}

impl Call {
    fn state(&self) -> Result<baton::State> {
        if self.object {
            // As the service does for a `state` object: it has no text the caller wrote, so
            // only the path (`at`) locates a problem.
            baton::state::parse_str(&self.state, Format::Json, "params.state").map_err(|mut e| {
                for p in &mut e.problems {
                    p.line = None;
                    p.column = None;
                }
                state_error(&e)
            })
        } else {
            baton::state::parse_str(&self.state, Format::Yaml, "params.state_text")
                .map_err(|e| state_error(&e))
        }
    }

    fn run(&self) -> Result<String> {
        let state = self.state()?;
        let target = self.target.as_deref();
        let value = match self.method {
            Method::Decide => {
                let d = self
                    .engine
                    .decide(&state, target)
                    .map_err(|e| engine_error(&e))?;
                report::to_value(&d, self.trace)
            }
            Method::Explain => {
                let d = self
                    .engine
                    .decide(&state, target)
                    .map_err(|e| engine_error(&e))?;
                let explanation = if self.verbose {
                    self.engine.explain_verbose(&d)
                } else {
                    self.engine.explain(&d)
                };
                let r = ExplainReport {
                    policy: d.policy.clone(),
                    decision: d,
                    explanation,
                };
                report::to_value(&r, self.trace)
            }
            Method::Render => {
                let outcome = self
                    .engine
                    .run(&state, target)
                    .map_err(|e| engine_error(&e))?;
                report::to_value(&RenderReport::new(outcome), self.trace)
            }
        };
        Ok(value.to_string())
    }
}

impl Task for Call {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        self.run()
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

/// A checked, compiled policy and template set (`baton::Engine`).
#[napi]
pub struct NativeEngine {
    engine: Engine,
}

#[napi]
impl NativeEngine {
    /// `policy`: a policy file, a directory of `*.policy` files or a shipped profile name; or,
    /// with `policy_text`, the name diagnostics show for that text. `templates_dir` overrides
    /// embedded templates; `document_root` is the off-band root (default `<tmp>/baton-<uid>`).
    #[napi(constructor)]
    pub fn new(
        policy: String,
        policy_text: Option<String>,
        templates_dir: Option<String>,
        document_root: Option<String>,
    ) -> Result<Self> {
        let mut builder = match &policy_text {
            Some(text) => Engine::builder_from_text(&policy, text),
            None => Engine::builder(&policy),
        };
        if let Some(dir) = templates_dir {
            builder = builder.templates_dir(dir);
        }
        builder = builder.document_root(document_root.map(Into::into));
        let engine = builder.build().map_err(|e| engine_error(&e))?;
        Ok(NativeEngine { engine })
    }

    /// `{name, sha256, warnings}` of the checked policy, as JSON.
    #[napi]
    pub fn policy(&self) -> String {
        let p = self.engine.policy();
        json!({"name": p.name(), "sha256": p.sha256(), "warnings": p.warnings()}).to_string()
    }

    /// Run `method` (`decide`, `explain` or `render`) on the calling thread.
    #[napi]
    pub fn call(
        &self,
        method: String,
        state: String,
        object: bool,
        target: Option<String>,
        verbose: bool,
        trace: bool,
    ) -> Result<String> {
        self.job(&method, state, object, target, verbose, trace)?
            .run()
    }

    /// [`NativeEngine::call`] on libuv's thread pool: a promise of the same JSON text.
    #[napi]
    pub fn call_async(
        &self,
        method: String,
        state: String,
        object: bool,
        target: Option<String>,
        verbose: bool,
        trace: bool,
    ) -> Result<AsyncTask<Call>> {
        Ok(AsyncTask::new(
            self.job(&method, state, object, target, verbose, trace)?,
        ))
    }
}

impl NativeEngine {
    fn job(
        &self,
        method: &str,
        state: String,
        object: bool,
        target: Option<String>,
        verbose: bool,
        trace: bool,
    ) -> Result<Call> {
        let method = match method {
            "decide" => Method::Decide,
            "explain" => Method::Explain,
            "render" => Method::Render,
            other => {
                return Err(rpc_error(
                    -32601,
                    format!("unknown method `{other}`; methods: decide, explain, render"),
                    None,
                ))
            }
        };
        Ok(Call {
            engine: self.engine.clone(),
            method,
            state,
            object,
            target,
            verbose,
            trace,
        })
    }
}

/// Check a policy (file, directory or shipped profile) as `baton check --json` does for one:
/// `{policy, ok, diagnostics}` as JSON (the warnings when it checks, else the errors).
#[napi]
pub fn check(spec: String) -> String {
    let v = match Engine::new(&spec) {
        Ok(e) => json!({"policy": spec, "ok": true, "diagnostics": e.policy().warnings()}),
        Err(e) if !e.diagnostics().is_empty() => {
            json!({"policy": spec, "ok": false, "diagnostics": e.diagnostics()})
        }
        Err(e) => json!({"policy": spec, "ok": false, "diagnostics": [
            {"severity": "error", "code": e.code(), "file": spec, "line": null, "col": null, "message": e.to_string(), "help": null}
        ]}),
    };
    v.to_string()
}

/// The version of baton this addon was built from (the crate's and the packages' version).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The benchmark thread of `benches/engine.rs` (benches/support/thread.rs), for the Node
/// bench (npm/bench.mjs) to decide the same states.
#[path = "../../../benches/support/thread.rs"]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, dead_code)]
mod thread;

/// Bench support (npm/bench.mjs), not an API: the YAML of the bench thread of `runs` runs.
#[napi]
pub fn bench_state_yaml(runs: u32) -> String {
    thread::state_yaml(usize::try_from(runs).unwrap_or(100))
}

/// Bench support (npm/bench.mjs), not an API: the in-process Rust baseline of `decide`. Runs
/// what the addon's `decide` runs (parse the state text, decide, serialize the decision) and,
/// separately, the decision alone on the parsed state, `iterations` times each, in Rust;
/// returns `[ns per parse+decide+serialize, ns per decide]`.
#[napi]
pub fn bench_native(
    engine: &NativeEngine,
    state_text: String,
    iterations: u32,
) -> Result<Vec<f64>> {
    let call = engine.job("decide", state_text, false, None, false, true)?;
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(call.run()?);
    }
    let whole = start.elapsed().as_secs_f64() * 1e9 / f64::from(iterations.max(1));
    let state = call.state()?;
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(
            engine
                .engine
                .decide(&state, None)
                .map_err(|e| engine_error(&e))?,
        );
    }
    let decide = start.elapsed().as_secs_f64() * 1e9 / f64::from(iterations.max(1));
    Ok(vec![whole, decide])
}
