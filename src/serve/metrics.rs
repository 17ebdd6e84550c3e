//! The service's metrics, kept with the `prometheus-client` crate and served as Prometheus
//! text exposition (`baton serve --metrics ADDR`, and the `metrics` method for stdio clients).
//! Every label takes bounded values: method names, policy names, strategies, providers the
//! policy knows (others count as `other`), staleness signals and budget steps the policy
//! writes, field names. docs/service.md#metrics lists them all.

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde_json::{json, Map, Value};

/// A set of labels.
type Labels = Vec<(&'static str, String)>;
type Hist = Family<Labels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs .. about 26 s.
    Histogram::new(exponential_buckets(0.0001, 4.0, 10))
}

/// Every metric the service keeps.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    request_errors: Family<Labels, Counter>,
    latency: Hist,
    decisions: Family<Labels, Counter>,
    stale: Family<Labels, Counter>,
    budget_steps: Family<Labels, Counter>,
    budget_degraded: Family<Labels, Counter>,
    documents_written: Counter,
    documents_collected: Counter,
    pregrants: Family<Labels, Counter>,
    reloads: Family<Labels, Counter>,
    queue_depth: Gauge,
    in_flight: Gauge,
    log_lines: Counter,
    log_errors: Counter,
    shadow_decisions: Family<Labels, Counter>,
    shadow_divergences: Family<Labels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the prefix `baton`.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("baton");
        let m = Metrics {
            requests: Family::default(),
            request_errors: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            decisions: Family::default(),
            stale: Family::default(),
            budget_steps: Family::default(),
            budget_degraded: Family::default(),
            documents_written: Counter::default(),
            documents_collected: Counter::default(),
            pregrants: Family::default(),
            reloads: Family::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            log_lines: Counter::default(),
            log_errors: Counter::default(),
            shadow_decisions: Family::default(),
            shadow_divergences: Family::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "requests",
            "Requests answered, by method",
            m.requests.clone(),
        );
        r.register(
            "request_errors",
            "Requests answered with an error, by method",
            m.request_errors.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Time from a request's arrival to its response, by method",
            m.latency.clone(),
        );
        r.register(
            "decisions",
            "Decisions made, by policy, strategy and target provider",
            m.decisions.clone(),
        );
        r.register(
            "stale_signals",
            "Staleness signals that held in a decision, by policy and signal",
            m.stale.clone(),
        );
        r.register(
            "budget_steps",
            "Budget degradation steps taken, by policy and step",
            m.budget_steps.clone(),
        );
        r.register(
            "budget_degradations",
            "Handoffs that took at least one budget degradation step, by policy",
            m.budget_degraded.clone(),
        );
        r.register(
            "documents_written",
            "Off-band handoff documents written",
            m.documents_written.clone(),
        );
        r.register(
            "documents_collected",
            "Off-band handoff documents removed by the sweep",
            m.documents_collected.clone(),
        );
        r.register(
            "pregrants",
            "Pre-grant checks, by result (allowed, denied)",
            m.pregrants.clone(),
        );
        r.register(
            "reloads",
            "Policy reloads, by result (accepted, rejected)",
            m.reloads.clone(),
        );
        r.register(
            "queue_depth",
            "Threads with a request running or waiting",
            m.queue_depth.clone(),
        );
        r.register(
            "in_flight",
            "Requests running or waiting",
            m.in_flight.clone(),
        );
        r.register(
            "decision_log_lines",
            "Lines written to the decision log",
            m.log_lines.clone(),
        );
        r.register(
            "decision_log_errors",
            "Decision-log lines that could not be written",
            m.log_errors.clone(),
        );
        r.register(
            "shadow_decisions",
            "Decisions the shadow policy made beside the active one, by shadow policy",
            m.shadow_decisions.clone(),
        );
        r.register(
            "shadow_divergences",
            "Fields the shadow policy decided differently, by shadow policy and field",
            m.shadow_divergences.clone(),
        );
        Metrics { registry, ..m }
    }

    /// A request answered.
    pub fn request(&self, method: &str, seconds: f64, error: bool) {
        let l = vec![("method", method.to_string())];
        self.requests.get_or_create(&l).inc();
        self.latency.get_or_create(&l).observe(seconds);
        if error {
            self.request_errors.get_or_create(&l).inc();
        }
    }

    /// A decision made (`target`: a provider the policy knows, else `other`).
    pub fn decision(&self, policy: &str, strategy: &str, target: &str, stale: &[String]) {
        self.decisions
            .get_or_create(&vec![
                ("policy", policy.to_string()),
                ("strategy", strategy.to_string()),
                ("target", target.to_string()),
            ])
            .inc();
        for s in stale {
            self.stale
                .get_or_create(&vec![("policy", policy.to_string()), ("signal", s.clone())])
                .inc();
        }
    }

    /// The budget steps a handoff took (each step's first word: `drop`, `tail`, ...).
    pub fn budget(&self, policy: &str, steps: &[&str]) {
        if steps.is_empty() {
            return;
        }
        self.budget_degraded
            .get_or_create(&vec![("policy", policy.to_string())])
            .inc();
        for s in steps {
            self.budget_steps
                .get_or_create(&vec![("policy", policy.to_string()), ("step", s.to_string())])
                .inc();
        }
    }

    /// An off-band document written.
    pub fn document_written(&self) {
        self.documents_written.inc();
    }

    /// Documents removed by a sweep.
    pub fn documents_collected(&self, n: u64) {
        self.documents_collected.inc_by(n);
    }

    /// A pre-grant check answered.
    pub fn pregrant(&self, allowed: bool) {
        let result = if allowed { "allowed" } else { "denied" };
        self.pregrants
            .get_or_create(&vec![("result", result.to_string())])
            .inc();
    }

    /// A reload accepted or rejected.
    pub fn reload(&self, accepted: bool) {
        let result = if accepted { "accepted" } else { "rejected" };
        self.reloads
            .get_or_create(&vec![("result", result.to_string())])
            .inc();
    }

    /// A decision-log line written, or lost.
    pub fn log_line(&self, written: bool) {
        if written {
            self.log_lines.inc();
        } else {
            self.log_errors.inc();
        }
    }

    /// A decision the shadow policy made, and the fields where it diverged.
    pub fn shadow(&self, policy: &str, fields: &[String]) {
        self.shadow_decisions
            .get_or_create(&vec![("policy", policy.to_string())])
            .inc();
        for f in fields {
            self.shadow_divergences
                .get_or_create(&vec![("policy", policy.to_string()), ("field", f.clone())])
                .inc();
        }
    }

    /// The exposition text, with the gauges set to `queue_depth` and `in_flight` first.
    pub fn encode(&self, queue_depth: usize, in_flight: usize) -> String {
        self.queue_depth
            .set(i64::try_from(queue_depth).unwrap_or(i64::MAX));
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing to a String does not fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }

    /// The `Content-Type` of [`Metrics::encode`]'s text.
    pub const CONTENT_TYPE: &'static str = prometheus_text::CONTENT_TYPE;
}

/// The samples of an exposition text as JSON (the `metrics` method): `{"name": [{"labels":
/// {...}, "value": N}, ...]}`, comments left out.
pub fn samples(text: &str) -> Value {
    let mut out = Map::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((head, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => (n, parse_labels(rest.strip_suffix('}').unwrap_or(rest))),
            None => (head, Map::new()),
        };
        let value = value
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number);
        if let Value::Array(list) = out
            .entry(name.to_string())
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            list.push(json!({"labels": labels, "value": value}));
        }
    }
    Value::Object(out)
}

/// `a="x",b="y"` as a JSON object (values unescaped).
fn parse_labels(s: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i.saturating_add(1);
                    break;
                }
                other => value.push(other),
            }
        }
        out.insert(
            key.trim_start_matches(',').to_string(),
            Value::String(value),
        );
        rest = after.get(end..).unwrap_or("");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_back_what_encode_wrote() {
        let m = Metrics::new();
        m.request("explain", 0.01, false);
        m.pregrant(true);
        let v = samples(&m.encode(2, 3));
        assert_eq!(v["baton_requests_total"][0]["labels"]["method"], "explain");
        assert_eq!(v["baton_requests_total"][0]["value"], 1.0);
        assert_eq!(v["baton_pregrants_total"][0]["labels"]["result"], "allowed");
        assert_eq!(v["baton_queue_depth"][0]["value"], 2.0);
        assert_eq!(v["baton_in_flight"][0]["value"], 3.0);
    }
}
