//! What the service tells its operators: every decision as a decision-log line (masked by the
//! policy's `log` block) and as metrics. The router hands each decision here once it is made
//! ([`Ops::record`]); nothing here changes a response.

use super::decision_log::{DecisionLog, Written};
use super::metrics::Metrics;
use super::rpc::{code, RpcError};
use super::session::Shared;
use crate::decision::Decision;
use crate::policy::Policy;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What became of one deciding request.
pub enum Outcome<'a> {
    /// A decision, and the handoff recorded for it (dispatch, merge-back, regenerate).
    Decision {
        decision: &'a Decision,
        handoff: Option<Value>,
        /// Whether an off-band document was written for it.
        document_written: bool,
    },
    /// A pre-grant check's answer.
    Grant { allow: bool, reason: String },
    /// The request failed.
    Failed(&'a RpcError),
}

/// One deciding request, as the router saw it.
pub struct Event<'a> {
    pub method: &'a str,
    /// When the request started running, and the wall-clock time then.
    pub started: Instant,
    pub time: jiff::Timestamp,
    /// The policy it was decided with (its `log` block masks the line).
    pub policy: &'a Policy,
    pub thread: Option<&'a str>,
    pub target: Option<&'a str>,
    pub outcome: Outcome<'a>,
    /// What the decision was made from (written only under `log { keep input }`).
    pub input: Option<Value>,
    /// What the shadow policy decided differently (see `serve::shadow`).
    pub divergences: Option<Value>,
}

/// The decision log, the metrics, and their state.
#[derive(Debug)]
pub struct Ops {
    pub metrics: Metrics,
    log: Option<DecisionLog>,
    /// Whether the last line could not be written (so a run of failures is announced once).
    log_failing: AtomicBool,
    /// The last decision-log failure, for `status`.
    log_error: std::sync::Mutex<Option<String>>,
    seq: AtomicU64,
    /// The start of every decision id: the server's start time and process id.
    id_prefix: String,
}

impl Ops {
    pub fn new(log: Option<DecisionLog>) -> Ops {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Ops {
            metrics: Metrics::new(),
            log,
            log_failing: AtomicBool::new(false),
            log_error: std::sync::Mutex::new(None),
            seq: AtomicU64::new(0),
            id_prefix: format!("{start:x}-{:x}", std::process::id()),
        }
    }

    /// Whether decisions are logged (so the router prepares what only the log needs).
    pub fn logging(&self) -> bool {
        self.log.is_some()
    }

    /// Whether a decision of `policy` logs its input.
    pub fn logs_input(&self, policy: &Policy) -> bool {
        self.logging() && policy.log.keeps("input")
    }

    /// The last decision-log write failure, if the log is failing now.
    pub fn log_error(&self) -> Option<String> {
        self.log_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The metrics text, the gauges read from the server now.
    pub fn metrics_text(&self, shared: &Shared) -> String {
        self.metrics
            .encode(shared.queued_threads(), shared.in_flight())
    }

    /// Count a decision in the metrics and write its log line.
    pub fn record(&self, shared: &Shared, ev: Event<'_>) {
        self.count(&ev);
        let Some(log) = &self.log else {
            return;
        };
        let line = self.line(&ev, log.config().trace);
        let text = serde_json::to_vec(&Value::Object(line)).unwrap_or_default();
        match log.write_line(&text) {
            Written::Ok => {
                self.metrics.log_line(true);
                if self.log_failing.swap(false, Ordering::SeqCst) {
                    *self.log_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    shared.notify_all("log/recovered", json!({}));
                    eprintln!("decision log: recovered; lines are written again");
                }
            }
            Written::Failed(why) => {
                self.metrics.log_line(false);
                *self.log_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
                if !self.log_failing.swap(true, Ordering::SeqCst) {
                    eprintln!("warning: decision log: {why}; decisions are still answered, their lines are lost until writing succeeds (metric baton_decision_log_errors_total)");
                    shared.notify_all("log/degraded", json!({ "message": why }));
                }
            }
        }
    }

    fn count(&self, ev: &Event<'_>) {
        let m = &self.metrics;
        match &ev.outcome {
            Outcome::Decision {
                decision,
                document_written,
                ..
            } => {
                let target = if crate::state::KNOWN_PROVIDERS.contains(&decision.target.as_str()) {
                    decision.target.as_str()
                } else {
                    "other"
                };
                m.decision(
                    &decision.policy.name,
                    decision.strategy.as_str(),
                    target,
                    &decision.stale,
                );
                if let Some(b) = &decision.budget {
                    let steps: Vec<&str> = b
                        .steps
                        .iter()
                        .map(|s| s.step.split_whitespace().next().unwrap_or("step"))
                        .collect();
                    m.budget(&decision.policy.name, &steps);
                }
                if *document_written {
                    m.document_written();
                }
            }
            Outcome::Grant { allow, .. } => m.pregrant(*allow),
            Outcome::Failed(_) => {}
        }
    }

    /// The log line of `ev`, masked by its policy's `log` block.
    fn line(&self, ev: &Event<'_>, trace_on: bool) -> Map<String, Value> {
        let mut l = Map::new();
        let seq = self.seq.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        l.insert("id".into(), json!(format!("{}-{seq}", self.id_prefix)));
        l.insert("time".into(), json!(ev.time.to_string()));
        l.insert("method".into(), json!(ev.method));
        let mut policy = json!({"name": ev.policy.name, "sha256": ev.policy.sha256});
        if let Some(t) = ev.thread {
            l.insert("thread".into(), json!(t));
        }
        if let Some(t) = ev.target {
            l.insert("target".into(), json!(t));
        }
        let mut trace = None;
        match &ev.outcome {
            Outcome::Decision {
                decision: d,
                handoff,
                ..
            } => {
                policy = json!({"name": d.policy.name, "sha256": d.policy.sha256});
                decision_fields(&summary(d), &mut l);
                l.insert("handoff".into(), handoff.clone().unwrap_or(Value::Null));
                trace = Some(&d.trace);
            }
            Outcome::Grant { allow, reason } => {
                l.insert("allow".into(), json!({"allow": allow, "reason": reason}));
            }
            Outcome::Failed(e) => {
                // A state's problems may quote its text: only their code, never the message.
                let message = (e.code != code::STATE_ERROR).then(|| e.message.clone());
                l.insert("error".into(), json!({"code": e.code, "message": message}));
            }
        }
        let mut put = |k: &str, v: Value| {
            l.insert(k.to_string(), v);
        };
        let micros = u64::try_from(ev.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        put("duration_us", json!(micros));
        if let Some(d) = &ev.divergences {
            put("divergences", d.clone());
        }
        let mask = &ev.policy.log;
        if let Some(t) = trace.filter(|_| trace_on || mask.keeps("trace")) {
            put("trace", serde_json::to_value(t).unwrap_or(Value::Null));
        }
        if mask.keeps("input") {
            if let Some(i) = &ev.input {
                put("input", i.clone());
            }
        }
        l.insert("policy".into(), policy);
        mask_line(&mut l, mask);
        l
    }
}

/// Apply a policy's `log` block to a line: drop and hash fields.
pub fn mask_line(l: &mut Map<String, Value>, mask: &crate::policy::CLog) {
    for f in &mask.drop {
        l.remove(f);
    }
    for f in &mask.hash {
        if let Some(v) = l.get_mut(f) {
            *v = json!(hash(v));
        }
    }
}

/// The fields of a decision a log line reads, as JSON (without the trace).
fn summary(d: &Decision) -> Value {
    json!({
        "target": d.target,
        "run": d.run,
        "strategy": d.strategy,
        "handoff_strategy": d.handoff_strategy,
        "provider_thread": d.provider_thread,
        "decided_by": d.decided_by,
        "stale": d.stale,
        "covered_runs": d.covered_runs,
        "delivery": d.delivery,
        "budget": d.budget,
        "redactions": d.redactions,
    })
}

/// Put the log-line fields of a decision (as `explain --json` prints it) into `l`: its
/// target, run, strategy, provider thread, deciding rule, stale signals, covered runs; the
/// delivery mode (no document path); the budget's figures (each step's dropped items as a
/// count); per redaction rule, the secrets it replaced (no item ids). Never a text of the
/// thread. `baton log export` writes the store's decisions through the same function.
pub fn decision_fields(d: &Value, l: &mut Map<String, Value>) {
    for k in [
        "target",
        "run",
        "strategy",
        "handoff_strategy",
        "provider_thread",
        "stale",
        "covered_runs",
    ] {
        l.insert(k.into(), d.get(k).cloned().unwrap_or(Value::Null));
    }
    let by = d.get("decided_by");
    l.insert(
        "decided_by".into(),
        json!({
            "rule": by.and_then(|b| b.get("rule")),
            "at": by.and_then(|b| b.get("at")),
        }),
    );
    let delivery = match d.get("delivery") {
        Some(x) if x.is_object() => json!({
            "mode": x.get("mode"),
            "inline_limit": x.get("inline_limit"),
            "fallback_reason": x.get("fallback_reason"),
        }),
        _ => Value::Null,
    };
    l.insert("delivery".into(), delivery);
    let budget = match d.get("budget") {
        Some(b) if b.is_object() => {
            let steps: Vec<Value> = b
                .get("steps")
                .and_then(Value::as_array)
                .map(|steps| {
                    steps
                        .iter()
                        .map(|s| {
                            json!({
                                "step": s.get("step"),
                                "before": s.get("before"),
                                "after": s.get("after"),
                                "dropped": s.get("dropped").and_then(Value::as_array).map_or(0, Vec::len),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut out = Map::new();
            for k in ["scope", "limit", "before", "after", "first_turn", "kept", "reasons"] {
                out.insert(k.into(), b.get(k).cloned().unwrap_or(Value::Null));
            }
            out.insert("steps".into(), Value::Array(steps));
            Value::Object(out)
        }
        _ => Value::Null,
    };
    l.insert("budget".into(), budget);
    let mut red = Map::new();
    for r in d
        .get("redactions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(rule) = r.get("rule").and_then(Value::as_str) {
            red.insert(rule.into(), r.get("count").cloned().unwrap_or(Value::Null));
        }
    }
    l.insert("redactions".into(), Value::Object(red));
}

/// `"sha256:<hex>"` of a value's JSON text.
fn hash(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(v.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The log line of a decision the store logged (`baton log export`): the fields a served
/// decision's line has, but `duration_us` (not recorded in the store); `id` is `db-<row>`,
/// `time` when it was logged, `method` the service method of the operation. Masked by `mask`
/// (a policy's `log` block); the trace is written when `trace` or the mask keeps it, the
/// input when the mask keeps it and the row has one.
pub fn exported_line(
    row: &crate::store::LoggedDecision,
    mask: &crate::policy::CLog,
    trace: bool,
) -> Map<String, Value> {
    let mut l = Map::new();
    l.insert("id".into(), json!(format!("db-{}", row.id)));
    l.insert("time".into(), json!(row.created_at));
    let method = match row.operation.as_str() {
        "merge_back" => "mergeBack",
        other => other,
    };
    l.insert("method".into(), json!(method));
    l.insert("thread".into(), json!(row.thread));
    decision_fields(&row.decision, &mut l);
    l.insert("run".into(), json!(row.run));
    if trace || mask.keeps("trace") {
        l.insert(
            "trace".into(),
            row.decision.get("trace").cloned().unwrap_or(Value::Null),
        );
    }
    if mask.keeps("input") {
        if let Some(i) = &row.input {
            l.insert("input".into(), i.clone());
        }
    }
    l.insert(
        "policy".into(),
        json!({"name": row.policy, "sha256": row.policy_sha256}),
    );
    mask_line(&mut l, mask);
    l
}
