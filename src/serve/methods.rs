//! The method router: JSON params in, library call, JSON result out. No policy logic here;
//! every decision comes from [`crate::pipeline`] with the policy set the request snapshotted
//! when it started.

use super::policy_set::PolicySet;
use super::rpc::{code, RpcError};
use super::session::{Shared, Turn};
use super::ops::{Event, Outcome};
use super::stored::{self, StorePool};
use crate::eval::{EvalError, EvalOptions};
use crate::state::{Format, State, StateError};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What the session needs to know about a method before running it.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Changes the store: once started it is not cancelled (its commit would be lost to the
    /// client otherwise).
    pub mutates: bool,
}

/// Every method, for `health` and the "unknown method" message.
pub const NAMES: &[&str] = &[
    "explain",
    "render",
    "dispatch",
    "completeRun",
    "rollback",
    "fork",
    "mergeBack",
    "regenerate",
    "pregrant/check",
    "thread/import",
    "thread/export",
    "policy/reload",
    "policy/status",
    "policy/shadow",
    "metrics",
    "status",
    "health",
    "shutdown",
    "exit",
];

/// The spec of a routable method (`shutdown` and `exit` are handled by the session).
pub fn lookup(method: &str) -> Option<Spec> {
    match method {
        "explain" | "render" | "thread/export" | "policy/status" | "metrics" | "status"
        | "health" => {
            Some(Spec { mutates: false })
        }
        "dispatch" | "completeRun" | "rollback" | "fork" | "mergeBack" | "regenerate"
        | "pregrant/check" | "thread/import" | "policy/reload" | "policy/shadow" => {
            Some(Spec { mutates: true })
        }
        _ => None,
    }
}

/// Whether a request's params can name a thread (so that it must take queue places).
pub fn may_name_threads(method: &str, params: &Value) -> bool {
    method == "mergeBack"
        || ["thread", "child", "state", "state_text", "stateText"]
            .iter()
            .any(|k| params.get(k).is_some())
}

/// Whether finding a request's threads takes real work (parsing a `state_text`, asking the
/// store for a fork's parent): then it runs on the blocking pool, never on a connection's
/// read loop.
pub fn keys_need_work(method: &str, params: &Value) -> bool {
    method == "mergeBack" || state_text(params).is_some()
}

/// The largest `state_text` an inline `explain` or `render` may carry to be answered on the
/// connection's worker thread instead of the blocking pool. Parsing, deciding and rendering
/// such a state takes well under a millisecond (benches/serve_cpu.rs: 4 KB in about 0.3 ms),
/// about what a hop to the pool and back costs in CPU and wake-ups; a larger state could hold
/// a worker long enough to delay other connections' reads, so it hops.
pub const COMPUTE_WHERE_READ_MAX: usize = 16 * 1024;

/// Whether a request is an inline `explain` or `render` small enough to be answered on the
/// worker that read it ([`COMPUTE_WHERE_READ_MAX`]). A `render` under a policy with an
/// external summarizer is not: it runs a command, which may take seconds.
pub fn computes_where_read(shared: &Shared, method: &str, params: &Value) -> bool {
    let small = state_text(params).is_some_and(|t| t.len() <= COMPUTE_WHERE_READ_MAX);
    small
        && match method {
            "explain" => true,
            "render" => !crate::deliver::runs_command(&shared.policies.current().policy),
            _ => false,
        }
}

/// The `state_text` param (or its deprecated alias `stateText`).
fn state_text(params: &Value) -> Option<&str> {
    params
        .get("state_text")
        .or_else(|| params.get("stateText"))
        .and_then(Value::as_str)
}

/// A request's `state_text`, parsed and validated once, when its threads were read
/// ([`thread_keys`]); the method decides on it instead of parsing the text again.
pub struct ParsedText(Box<Result<State, RpcError>>);

/// The methods that decide on an inline state: their `state_text` is parsed in full when the
/// request's threads are read ([`thread_keys`]), and the method uses that parse.
fn decides_on_inline_state(method: &str) -> bool {
    matches!(method, "explain" | "render" | "thread/import")
}

/// Whether a request whose threads were read on the blocking pool can run there at once,
/// without a second hop, when no earlier request of its threads is still running: the
/// deciding methods of an inline state, which only compute.
pub fn runs_where_keys_are_read(method: &str) -> bool {
    matches!(method, "explain" | "render")
}

/// The threads a request names, for per-thread ordering, in every form the methods accept:
/// `params.thread`, `params.child` (the fork to create), the inline `state`'s `thread.id`, or
/// the `thread.id` inside `state_text`; for a `mergeBack`, also the fork's parent. Read before
/// the request takes its place in those threads' queues, in the connection's arrival order.
/// Blocking when [`keys_need_work`]. A `state_text` that does not parse (or is past the state
/// limits) names no thread here; the method itself then reports the error. For a method that
/// decides on the inline state, the `state_text` is parsed in full here, once, and returned
/// for the method to use.
pub fn thread_keys(
    shared: &Shared,
    method: &str,
    params: &Value,
) -> (Vec<String>, Option<ParsedText>) {
    let mut keys: Vec<String> = ["/thread", "/child", "/state/thread/id"]
        .iter()
        .filter_map(|p| params.pointer(p).and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let mut parsed = None;
    if let Some(text) = state_text(params) {
        if decides_on_inline_state(method) {
            let state = parse_state_text(text);
            match &state {
                // The id a valid state's text names is its `thread.id`.
                Ok(s) => keys.push(s.thread.id.clone()),
                // An invalid state may still name its thread (a validation problem).
                Err(_) => keys.extend(crate::state::thread_id_in_text(text)),
            }
            parsed = Some(ParsedText(Box::new(state)));
        } else {
            keys.extend(crate::state::thread_id_in_text(text));
        }
    }
    if method == "mergeBack" {
        // A merge-back writes into the fork's parent, which its params do not name: it takes
        // its place in the parent's queue too, so that a `dispatch` of the parent sent after
        // it runs after it. One indexed read; a store that cannot answer leaves the request
        // to fail (or succeed) on its own.
        if let Some(child) = params.get("thread").and_then(Value::as_str) {
            let parent = shared
                .stores
                .with(|db| db.parent_of(child).map_err(|e| stored::db_error(&e)));
            keys.extend(parent.ok().flatten());
        }
    }
    keys.sort();
    keys.dedup();
    (keys, parsed)
}

/// Run `method`. `turn` is this request's place in its thread's queue; it is held until the
/// work (including any blocking part) is done.
/// `parsed` is the request's `state_text` as [`thread_keys`] parsed it.
pub async fn call(
    shared: &Arc<Shared>,
    method: &str,
    params: Value,
    turn: Turn,
    parsed: Option<ParsedText>,
) -> Result<Value, RpcError> {
    // Parse the params, snapshot the policy set and run the work on the blocking pool.
    macro_rules! pool {
        ($f:expr) => {
            on_pool(shared, method, params, turn, $f).await
        };
    }
    match method {
        "explain" => pool!(move |cx, p| explain(cx, p, parsed)),
        "render" => pool!(move |cx, p| render(cx, p, parsed)),
        "dispatch" => pool!(|cx, p: stored::DispatchParams| {
            let (thread, target, trace) = (p.thread.clone(), p.target.clone(), p.trace);
            let r = stored::dispatch(cx.stores(), &cx.set, p);
            cx.record_dispatched("dispatch", &thread, Some(&target), &r);
            r.map(|d| stored::dispatched(d, trace))
        }),
        "mergeBack" => pool!(|cx, p: stored::MergeBackParams| {
            let (thread, trace) = (p.thread.clone(), p.trace);
            let r = stored::merge_back(cx.stores(), &cx.set, p);
            cx.record_dispatched("mergeBack", &thread, None, &r);
            r.map(|d| stored::dispatched(d, trace))
        }),
        "completeRun" => pool!(|cx, p| stored::complete(cx.stores(), p)),
        "rollback" => pool!(|cx, p| stored::rollback(cx.stores(), &cx.set, p)),
        "fork" => pool!(|cx, p| stored::fork(cx.stores(), p)),
        "regenerate" => pool!(|cx, p: stored::RegenerateParams| {
            let (thread, trace) = (p.thread.clone(), p.trace);
            let r = stored::regenerate(cx.stores(), &cx.set, p);
            cx.record_dispatched("regenerate", &thread, None, &r);
            r.map(|d| stored::dispatched(d, trace))
        }),
        "pregrant/check" => pool!(|cx, p: stored::PregrantParams| {
            let thread = p.thread.clone();
            let r = stored::pregrant_check(cx.stores(), p);
            let outcome = match &r {
                Ok(v) => Outcome::Grant {
                    allow: v.get("allow").and_then(Value::as_bool).unwrap_or(false),
                    reason: v
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                },
                Err(e) => Outcome::Failed(e),
            };
            cx.record("pregrant/check", Some(&thread), None, outcome, None);
            r
        }),
        "thread/import" => pool!(move |cx, p: stored::ImportParams| {
            let state = inline_state(p.state.as_ref(), p.state_text.as_deref(), parsed)?;
            stored::import(cx.stores(), state, p.replace)
        }),
        "thread/export" => pool!(|cx, p| stored::export(cx.stores(), p)),
        "policy/reload" => {
            let _: Empty = parse_params(method, params)?;
            let r = shared.reload_and_notify().await;
            drop(turn);
            r
        }
        "policy/status" => {
            let _: Empty = parse_params(method, params)?;
            Ok(shared.policies.status())
        }
        "policy/shadow" => {
            let p: ShadowParams = parse_params(method, params)?;
            let s = shared.clone();
            let loaded = tokio::task::spawn_blocking(move || match p.spec {
                None => {
                    s.shadow.set(None);
                    Ok(())
                }
                Some(spec) => {
                    match super::shadow::Shadow::load(
                        &spec,
                        s.cfg.templates.clone(),
                        s.cfg.handoff_dir.clone(),
                    ) {
                        Ok(c) => {
                            s.shadow.set(Some(c));
                            Ok(())
                        }
                        Err(e) => Err((spec, e)),
                    }
                }
            })
            .await
            .map_err(|e| RpcError::internal(format!("the request's task failed: {e}")))?;
            drop(turn);
            match loaded {
                Ok(()) => Ok(json!({"shadow": shared.shadow.status()})),
                Err((spec, e)) => Err(RpcError::new(
                    code::POLICY_ERROR,
                    format!("the shadow policy `{spec}` is refused; the active policy and the shadow in place are unaffected: {e}"),
                )
                .with_data(json!({"diagnostics": e.diagnostics, "shadow": shared.shadow.status()}))),
            }
        }
        "metrics" => {
            let _: Empty = parse_params(method, params)?;
            let text = shared.ops.metrics_text(shared);
            Ok(json!({
                "content_type": super::metrics::Metrics::CONTENT_TYPE,
                "samples": super::metrics::samples(&text),
                "text": text,
            }))
        }
        "status" => {
            let _: Empty = parse_params(method, params)?;
            let s = shared.clone();
            tokio::task::spawn_blocking(move || super::status::status(&s))
                .await
                .map_err(|e| RpcError::internal(format!("the request's task failed: {e}")))
        }
        "health" => {
            let _: Empty = parse_params(method, params)?;
            let (open, incomplete) = shared.slots.counts();
            Ok(json!({
                "status": "ok",
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_ms": u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "in_flight": shared.in_flight().saturating_sub(1),
                "queued_threads": shared.queued_threads(),
                "connections": {
                    "open": open,
                    "incomplete": incomplete,
                },
                "policy": shared.policies.current().reference(),
                "methods": NAMES,
            }))
        }
        _ => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("unknown method `{method}`"),
        )),
    }
}

/// What a method running on the blocking pool works with: the policy set it snapshotted when
/// it started, and the server (its store pool and document root).
struct Cx {
    set: Arc<PolicySet>,
    shared: Arc<Shared>,
    /// When the method started (for the decision log's time and duration).
    started: Instant,
    time: jiff::Timestamp,
}

impl Cx {
    fn new(shared: &Arc<Shared>) -> Cx {
        Cx {
            set: shared.policies.current(),
            shared: shared.clone(),
            started: Instant::now(),
            time: jiff::Timestamp::now(),
        }
    }

    /// Hand a decision (or a failure) to the decision log and the metrics.
    fn record(
        &self,
        method: &str,
        thread: Option<&str>,
        target: Option<&str>,
        outcome: Outcome<'_>,
        input: Option<Value>,
    ) {
        self.shared.ops.record(
            &self.shared,
            Event {
                method,
                started: self.started,
                time: self.time,
                policy: &self.set.policy,
                thread,
                target,
                outcome,
                input,
                divergences: None,
            },
        );
    }

    /// What the shadow policy decides differently from `active`, the decision the store just
    /// made and logged for `thread`, deciding the input the store logged with it as the store
    /// does (`None` without a shadow, or when the store kept no input).
    fn shadow_stored(&self, thread: &str, active: &crate::decision::Decision) -> Option<Value> {
        let candidate = self.shared.shadow.current()?;
        let input = self
            .stores()
            .with(|db| db.latest_input(thread).map_err(|e| stored::db_error(&e)))
            .ok()
            .flatten()?;
        let (v, fields) = super::shadow::stored_divergences(active, &candidate, &input);
        self.shared
            .ops
            .metrics
            .shadow(&candidate.set.policy.name, &fields);
        Some(v)
    }

    /// [`Cx::record`] of a dispatch, merge-back or regenerate. Its input is in the store's
    /// decision log (`baton log export` writes it); the line references the row by thread
    /// and run.
    fn record_dispatched(
        &self,
        method: &str,
        thread: &str,
        target: Option<&str>,
        r: &Result<crate::store::Dispatched, RpcError>,
    ) {
        match r {
            Ok(d) => {
                let handoff = d.handoff.as_ref().map(|h| {
                    json!({
                        "id": h.id,
                        "strategy": h.strategy,
                        "covered": h.covered,
                        "off_band": h.document_path.is_some(),
                        "supersedes": h.supersedes,
                    })
                });
                let written = d
                    .handoff
                    .iter()
                    .chain(d.merge_back.iter())
                    .any(|h| h.document_path.is_some());
                // A merge-back is logged in the fork's parent, which its decision is for.
                let logged_in = if method == "mergeBack" {
                    self.stores()
                        .with(|db| db.parent_of(thread).map_err(|e| stored::db_error(&e)))
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| thread.to_string())
                } else {
                    thread.to_string()
                };
                let input = self
                    .shared
                    .ops
                    .logs_input(&self.set.policy)
                    .then(|| json!({"store": {"thread": logged_in, "run": d.run}}));
                let divergences = self.shadow_stored(&logged_in, &d.decision);
                self.shared.ops.record(
                    &self.shared,
                    Event {
                        method,
                        started: self.started,
                        time: self.time,
                        policy: &self.set.policy,
                        thread: Some(thread),
                        target,
                        outcome: Outcome::Decision {
                            decision: &d.decision,
                            handoff,
                            document_written: written,
                        },
                        input,
                        divergences,
                    },
                );
            }
            Err(e) => self.record(method, Some(thread), target, Outcome::Failed(e), None),
        }
    }

    fn stores(&self) -> &StorePool {
        &self.shared.stores
    }

    fn handoff_dir(&self) -> Option<PathBuf> {
        self.shared.cfg.handoff_dir.clone()
    }
}

/// Parse the params, snapshot the policy set, and run `f` on the blocking pool, off the
/// reactor, holding the thread's turn until it is done.
async fn on_pool<P, F>(
    shared: &Arc<Shared>,
    method: &str,
    params: Value,
    turn: Turn,
    f: F,
) -> Result<Value, RpcError>
where
    P: DeserializeOwned + Send + 'static,
    F: FnOnce(&Cx, P) -> Result<Value, RpcError> + Send + 'static,
{
    let p: P = parse_params(method, params)?;
    let cx = Cx::new(shared);
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        f(&cx, p)
    })
    .await
    .map_err(|e| RpcError::internal(format!("the request's task failed: {e}")))?
}

/// Run a method of [`runs_where_keys_are_read`] at once, on the calling thread of the
/// blocking pool, holding `turn` until it is done: what [`call`] does for it, without the hop
/// to the pool. The result comes back as its JSON text, the bytes [`call`]'s value
/// serializes to, written without building the value.
pub fn call_here(
    shared: &Arc<Shared>,
    method: &str,
    params: Value,
    turn: Turn,
    parsed: Option<ParsedText>,
) -> Result<Vec<u8>, RpcError> {
    fn here<P: DeserializeOwned>(
        shared: &Arc<Shared>,
        method: &str,
        params: Value,
        turn: Turn,
        f: impl FnOnce(&Cx, P) -> Result<Vec<u8>, RpcError>,
    ) -> Result<Vec<u8>, RpcError> {
        let p: P = parse_params(method, params)?;
        let cx = Cx::new(shared);
        let _turn = turn;
        f(&cx, p)
    }
    match method {
        "explain" => here(shared, method, params, turn, |cx, p: DecideParams| {
            json_text(&explain_report(cx, &p, parsed)?, p.trace)
        }),
        "render" => here(shared, method, params, turn, |cx, p: DecideParams| {
            json_text(&render_report(cx, &p, parsed)?, p.trace)
        }),
        _ => Err(RpcError::internal(format!(
            "`{method}` does not run where its threads are read"
        ))),
    }
}

/// Deserialize params, naming the field at fault.
fn parse_params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!("{path}: ")
        };
        RpcError::invalid_params(format!(
            "invalid params for `{method}`: {at}{}",
            e.into_inner()
        ))
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Empty {}

/// Params of `policy/shadow`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShadowParams {
    /// The candidate policy (a file, a directory of `*.policy` or a shipped profile) that
    /// decides beside the active one from now on; null removes the shadow.
    spec: Option<String>,
}

/// Params of `explain` and `render`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideParams {
    /// A thread in the store.
    thread: Option<String>,
    /// The state document (docs/state.md) as a JSON object.
    state: Option<Value>,
    /// The state document as text (YAML or JSON, e.g. a state file's contents); `stateText`
    /// is a deprecated alias.
    #[serde(alias = "stateText")]
    state_text: Option<String>,
    /// Decide for this provider instead of the state's `request.provider`.
    target: Option<String>,
    /// Append every rule evaluated to the explanation.
    #[serde(default)]
    verbose: bool,
    /// Include the decision's trace (default true); false leaves it out.
    #[serde(default = "yes")]
    trace: bool,
}

fn yes() -> bool {
    true
}

fn state_error(e: &StateError) -> RpcError {
    let problems: Vec<Value> = e
        .problems
        .iter()
        .map(|p| json!({"at": p.at, "line": p.line, "column": p.column, "message": p.message}))
        .collect();
    RpcError::new(code::STATE_ERROR, e.to_string()).with_data(json!({ "problems": problems }))
}

fn eval_error(e: &EvalError) -> RpcError {
    let code = match e {
        EvalError::UnknownTarget(_) => code::INVALID_PARAMS,
        _ => code::POLICY_ERROR,
    };
    RpcError::new(code, crate::error::located(e))
}

/// The state of a deciding request: the stored `thread`, or the inline `state` / `state_text`
/// (`parsed`: the `state_text` already parsed).
fn state_of(
    p: &DecideParams,
    stores: &StorePool,
    parsed: Option<ParsedText>,
) -> Result<State, RpcError> {
    match (&p.thread, p.state.is_some() || p.state_text.is_some()) {
        (Some(t), false) => stored::load(stores, t),
        (Some(_), true) => Err(RpcError::invalid_params(
            "give either a stored `thread` or an inline `state`/`state_text`, not both",
        )),
        (None, _) => inline_state(p.state.as_ref(), p.state_text.as_deref(), parsed),
    }
}

/// Parse and validate a `state_text` param.
fn parse_state_text(text: &str) -> Result<State, RpcError> {
    crate::state::parse_str(text, Format::Yaml, "params.state_text").map_err(|e| state_error(&e))
}

/// An inline state: `state` (a JSON object) or `state_text` (YAML or JSON text; `parsed`
/// when it was already parsed, see [`thread_keys`]).
fn inline_state(
    state: Option<&Value>,
    text: Option<&str>,
    parsed: Option<ParsedText>,
) -> Result<State, RpcError> {
    let v = match (state, text) {
        (Some(v), None) => v,
        (None, Some(text)) => {
            return match parsed {
                Some(ParsedText(state)) => *state,
                None => parse_state_text(text),
            }
        }
        (Some(_), Some(_)) => {
            return Err(RpcError::invalid_params(
                "give the state once: `state` (an object) or `state_text` (YAML/JSON text), not both",
            ))
        }
        (None, None) => {
            return Err(RpcError::invalid_params(
                "give the thread's state as `state` (a state document object) or `state_text` (its YAML/JSON text), or a stored `thread`",
            ))
        }
    };
    if !v.is_object() {
        return Err(RpcError::invalid_params(
            "`state` must be a state document object (docs/state.md)",
        ));
    }
    // The object has no text the client wrote: a line and column in baton's own
    // serialization of it would point nowhere, so only the path (`at`) locates a problem.
    crate::state::parse_str(&v.to_string(), Format::Json, "params.state").map_err(|mut e| {
        for p in &mut e.problems {
            p.line = None;
            p.column = None;
        }
        state_error(&e)
    })
}

/// The state and evaluation options of a deciding request.
fn decide_input(
    cx: &Cx,
    p: &DecideParams,
    parsed: Option<ParsedText>,
) -> Result<(State, EvalOptions), RpcError> {
    let state = state_of(p, cx.stores(), parsed)?;
    let opts = EvalOptions {
        target: p.target.clone(),
        document_root: cx.handoff_dir(),
    };
    Ok((state, opts))
}

/// A result as JSON text: the bytes of [`crate::store::report::to_value`] serialized.
fn json_text<T: serde::Serialize>(report: &T, trace: bool) -> Result<Vec<u8>, RpcError> {
    super::json::to_vec(report, !trace)
        .map_err(|e| RpcError::internal(format!("cannot serialize the result: {e}")))
}

fn explain(cx: &Cx, p: DecideParams, parsed: Option<ParsedText>) -> Result<Value, RpcError> {
    let report = explain_report(cx, &p, parsed)?;
    Ok(crate::store::report::to_value(&report, p.trace))
}

/// The thread id and (under `log { keep input }`) the input of a deciding request, for its
/// decision-log line.
#[derive(Default)]
struct Seen {
    thread: Option<String>,
    input: Option<Value>,
    /// The state, when a shadow policy decides it too.
    state: Option<State>,
    target: Option<String>,
}

impl Seen {
    /// What `state` (decided for `target`) shows the log.
    fn of(cx: &Cx, state: &State, target: Option<&str>) -> Seen {
        let shadowed = cx.shared.shadow.current().is_some();
        Seen {
            state: shadowed.then(|| state.clone()),
            target: target.map(str::to_string),
            thread: Some(state.thread.id.clone()),
            input: cx
                .shared
                .ops
                .logs_input(&cx.set.policy)
                .then(|| json!({"state": state, "target": target})),
        }
    }
}

/// Record a deciding request's decision (or failure) and give its result back.
fn recorded<T>(
    cx: &Cx,
    method: &str,
    p: &DecideParams,
    seen: Seen,
    r: Result<T, RpcError>,
    decision: impl Fn(&T) -> &crate::decision::Decision,
) -> Result<T, RpcError> {
    let thread = seen.thread.as_deref().or(p.thread.as_deref());
    let divergences = match (&r, &seen.state, cx.shared.shadow.current()) {
        (Ok(_), Some(state), Some(candidate)) => {
            let (v, fields) = super::shadow::divergences(
                &cx.set.engine,
                &candidate,
                state,
                seen.target.as_deref(),
            );
            cx.shared
                .ops
                .metrics
                .shadow(&candidate.set.policy.name, &fields);
            Some(v)
        }
        _ => None,
    };
    let outcome = match &r {
        Ok(v) => Outcome::Decision {
            decision: decision(v),
            handoff: None,
            document_written: false,
        },
        Err(e) => Outcome::Failed(e),
    };
    cx.shared.ops.record(
        &cx.shared,
        Event {
            method,
            started: cx.started,
            time: cx.time,
            policy: &cx.set.policy,
            thread,
            target: p.target.as_deref(),
            outcome,
            input: seen.input,
            divergences,
        },
    );
    r
}

fn explain_report(
    cx: &Cx,
    p: &DecideParams,
    parsed: Option<ParsedText>,
) -> Result<crate::store::report::ExplainReport, RpcError> {
    let mut seen = Seen::default();
    let r = explain_decided(cx, p, parsed, &mut seen);
    recorded(cx, "explain", p, seen, r, |r| &r.decision)
}

fn explain_decided(
    cx: &Cx,
    p: &DecideParams,
    parsed: Option<ParsedText>,
    seen: &mut Seen,
) -> Result<crate::store::report::ExplainReport, RpcError> {
    let set = &cx.set;
    let decided = match (&p.thread, p.state.is_none() && p.state_text.is_none()) {
        // A stored thread: the store reads only a window of a long one when that decides the
        // same (docs/store.md#speed).
        (Some(t), true) => {
            if cx.shared.ops.logs_input(&set.policy) || cx.shared.shadow.current().is_some() {
                if let Ok(state) = stored::load(cx.stores(), t) {
                    *seen = Seen::of(cx, &state, p.target.as_deref());
                }
            }
            cx.stores().read(|db| {
                db.decide(&set.engine, t, p.target.as_deref())
                    .map_err(|e| stored::db_error(&e))
            })?
        }
        _ => {
            let (state, opts) = decide_input(cx, p, parsed)?;
            *seen = Seen::of(cx, &state, opts.target.as_deref());
            set.engine.decide(&state, opts.target.as_deref())
        }
    };
    let d = decided.map_err(|e| engine_error(&e))?;
    Ok(crate::store::report::ExplainReport {
        policy: d.policy.clone(),
        // The library's explanation, as the addon's `Engine::explain` gives it (the npm
        // packages' tests hold the two the same): no command-line flag in it.
        explanation: crate::explain::render(&d, p.verbose),
        decision: d,
    })
}

fn render(cx: &Cx, p: DecideParams, parsed: Option<ParsedText>) -> Result<Value, RpcError> {
    let report = render_report(cx, &p, parsed)?;
    Ok(crate::store::report::to_value(&report, p.trace))
}

fn render_report(
    cx: &Cx,
    p: &DecideParams,
    parsed: Option<ParsedText>,
) -> Result<crate::store::report::RenderReport, RpcError> {
    let mut seen = Seen::default();
    let r = render_decided(cx, p, parsed, &mut seen);
    recorded(cx, "render", p, seen, r, |r| &r.decision)
}

fn render_decided(
    cx: &Cx,
    p: &DecideParams,
    parsed: Option<ParsedText>,
    seen: &mut Seen,
) -> Result<crate::store::report::RenderReport, RpcError> {
    let set = &cx.set;
    let (state, opts) = decide_input(cx, p, parsed)?;
    *seen = Seen::of(cx, &state, opts.target.as_deref());
    let outcome = set
        .engine
        .run(&state, opts.target.as_deref())
        .map_err(|e| engine_error(&e))?;
    Ok(crate::store::report::RenderReport::new(outcome))
}

/// The JSON-RPC error of an engine failure: decision errors as [`eval_error`], template
/// failures as `RENDER_ERROR`.
fn engine_error(e: &crate::Error) -> RpcError {
    match e {
        crate::Error::Eval(e) => eval_error(e),
        other => RpcError::new(code::RENDER_ERROR, crate::error::located(other)),
    }
}
