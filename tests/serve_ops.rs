//! Running the sidecar in production, end to end through the real `baton serve`: the decision
//! log (fields, no texts, masking by the policy's `log` block, rotation under concurrent load,
//! a full disk), the Prometheus metrics endpoint (parsed by a real exposition parser), the
//! `status` method and `baton status`, `baton log export`, and the bad-input paths. The tests
//! whose requests go through the store run on both backends (`crate::common::backend`).

use crate::serve_support;

use crate::common::backend::{Backend, TestDb};
use rstest_reuse::apply;
use serde_json::{json, Value};
use serve_support::*;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// Every text the seed example's items carry (long enough not to occur by chance).
fn seed_texts() -> Vec<String> {
    let state = example_state("seed-switch.yaml");
    let mut out = Vec::new();
    fn walk(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, v)| walk(v, Some(k), out)),
            Value::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            Value::String(s)
                if matches!(key, Some("text" | "output" | "title")) && s.len() >= 16 =>
            {
                out.push(s.clone())
            }
            _ => {}
        }
    }
    walk(&state, None, &mut out);
    assert!(out.len() > 5, "the example has texts to look for");
    out
}

#[apply(crate::common::backend::backends)]
fn n_decisions_give_n_log_lines_with_their_fields_and_no_texts(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let dir = &db.dir;
    let log = dir.path().join("decisions.jsonl");
    let mut s = stdio_on(
        &db,
        &["--decision-log", log.to_str().unwrap(), "--no-watch"],
    );
    let state = example_state("seed-switch.yaml");
    s.client
        .result("thread/import", json!({"state": state.clone()}));
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(s.client.result("explain", json!({"state": state.clone()})));
    }
    answers.push(s.client.result(
        "render",
        json!({"state": state.clone(), "target": "cursor"}),
    ));
    let d = s
        .client
        .result("dispatch", json!({"thread": "th_1", "target": "cursor"}));
    let g = s.client.result(
        "pregrant/check",
        json!({"thread": "th_1", "run": 9, "tool": "Read", "path": "/etc/passwd"}),
    );
    assert_eq!(g["allow"], false);
    // Not decisions: no line.
    s.client.result("health", json!({}));
    s.client.result("thread/export", json!({"thread": "th_1"}));
    assert_eq!(s.stop(), 0);

    let lines = lines_of(&log);
    assert_eq!(lines.len(), 7, "one line per decision: {lines:#?}");
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "explain",
            "explain",
            "explain",
            "explain",
            "render",
            "dispatch",
            "pregrant/check"
        ]
    );
    let ids: HashSet<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), lines.len(), "decision ids are unique");
    for l in &lines {
        assert!(
            l["time"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .is_ok(),
            "{l}"
        );
        assert_eq!(l["policy"]["name"], "default");
        assert_eq!(l["policy"]["sha256"].as_str().unwrap().len(), 64);
        assert_eq!(l["thread"], "th_1");
        assert!(l["duration_us"].is_u64(), "{l}");
        assert!(l.get("trace").is_none(), "no trace unless asked: {l}");
        assert!(
            l.get("input").is_none(),
            "no input unless the policy keeps it: {l}"
        );
    }
    // The explain lines carry the decision as the response gave it.
    let first = &lines[0];
    let decision = &answers[0]["decision"];
    for k in [
        "target",
        "strategy",
        "handoff_strategy",
        "stale",
        "covered_runs",
        "provider_thread",
    ] {
        assert_eq!(first[k], decision[k], "{k}");
    }
    assert_eq!(first["policy"]["sha256"], answers[0]["policy"]["sha256"]);
    assert_eq!(first["decided_by"]["rule"], decision["decided_by"]["rule"]);
    // The render and the dispatch carry their budget figures and delivery.
    for l in [&lines[4], &lines[5]] {
        assert_eq!(l["target"], "cursor");
        assert!(l["budget"]["limit"].is_u64(), "{l}");
        assert!(l["budget"]["steps"].is_array(), "{l}");
        assert!(l["delivery"]["mode"].is_string(), "{l}");
        assert!(l["redactions"].is_object(), "{l}");
    }
    assert_eq!(lines[5]["handoff"]["id"], d["handoff"]["id"]);
    assert_eq!(lines[5]["run"], d["recorded"]["run"]);
    assert_eq!(lines[6]["allow"]["allow"], false);
    // No text of the thread anywhere.
    let text = std::fs::read_to_string(&log).unwrap();
    for t in seed_texts() {
        assert!(!text.contains(&t), "the log carries a thread text: {t}");
    }
    // The file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "log mode {mode:o}");
}

#[test]
fn the_policy_log_block_drops_hashes_and_keeps_fields() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("masked.policy");
    std::fs::write(
        &policy,
        "policy \"masked\" {\n  extends \"default\"\n}\n\nlog {\n  hash thread\n  drop budget\n  keep input\n  keep trace\n}\n",
    )
    .unwrap();
    let log = dir.path().join("decisions.jsonl");
    let mut s = stdio(
        dir.path(),
        &[
            "--decision-log",
            log.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--no-watch",
        ],
    );
    let state = example_state("seed-switch.yaml");
    let r = s.client.result("explain", json!({"state": state.clone()}));
    assert_eq!(s.stop(), 0);
    let lines = lines_of(&log);
    assert_eq!(lines.len(), 1);
    let l = &lines[0];
    assert_eq!(l["policy"]["name"], "masked");
    assert!(l["thread"].as_str().unwrap().starts_with("sha256:"), "{l}");
    assert_ne!(l["thread"], "th_1");
    assert!(l.get("budget").is_none(), "{l}");
    assert_eq!(l["strategy"], r["decision"]["strategy"]);
    // `keep input`: what the decision was made from (the texts included, by the policy's choice).
    assert_eq!(l["input"]["state"]["thread"]["id"], "th_1");
    assert_eq!(l["trace"], r["decision"]["trace"]);
}

#[test]
fn rotation_under_concurrent_load_loses_and_splits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("d.jsonl");
    let sock = dir.path().join("s.sock");
    let mut child = serve_cmd(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--no-watch",
            "--no-gc",
            "--decision-log",
            log.to_str().unwrap(),
            "--decision-log-max-bytes",
            "4000",
            "--decision-log-keep",
            "10000",
        ],
    )
    .spawn()
    .unwrap();
    let (clients, each) = (8, 25);
    let state = example_state("seed-switch.yaml");
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (sock, state) = (sock.clone(), state.clone());
            std::thread::spawn(move || {
                let mut client = Client::connect(&sock, false);
                let ids: Vec<i64> = (0..each)
                    .map(|i| {
                        let mut st = state.clone();
                        st["thread"]["id"] = json!(format!("t{c}-{i}"));
                        client.start("explain", json!({"state": st, "trace": false}))
                    })
                    .collect();
                for id in ids {
                    let r = client.response_to(id);
                    assert!(r.get("error").is_none(), "{r}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = Client::connect(&sock, false);
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert!(child.wait().unwrap().success());

    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("d.jsonl")
        })
        .collect();
    files.sort();
    assert!(files.len() > 3, "the log rotated: {files:?}");
    let mut threads = HashSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            text.ends_with('\n'),
            "{} ends with a whole line",
            f.display()
        );
        assert!(
            text.len() <= 4000,
            "{} is within the rotation size",
            f.display()
        );
        for l in lines_of(f) {
            assert_eq!(l["method"], "explain");
            assert!(
                threads.insert(l["thread"].as_str().unwrap().to_string()),
                "a line twice: {l}"
            );
        }
    }
    assert_eq!(threads.len(), clients * each, "every decision has its line");
}

#[test]
fn a_full_disk_is_reported_and_decisions_keep_being_answered() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &["--decision-log", "/dev/full", "--no-watch"]);
    let state = example_state("seed-switch.yaml");
    for _ in 0..3 {
        let r = s.client.result("explain", json!({"state": state.clone()}));
        assert_eq!(r["decision"]["strategy"], "delta_existing");
    }
    let m = s.client.result("metrics", json!({}));
    assert_eq!(
        m["samples"]["baton_decision_log_errors_total"][0]["value"],
        3.0
    );
    let st = s.client.result("status", json!({}));
    assert!(
        st["decision_log"]["error"]
            .as_str()
            .unwrap()
            .contains("/dev/full"),
        "{st}"
    );
    let degraded: Vec<&Value> = s
        .client
        .notes
        .iter()
        .filter(|n| n["method"] == "log/degraded")
        .collect();
    assert_eq!(
        degraded.len(),
        1,
        "one notification per run of failures: {:?}",
        s.client.notes
    );
    assert!(degraded[0]["params"]["message"]
        .as_str()
        .unwrap()
        .contains("No space left on device"));
    assert_eq!(s.stop(), 0);
}

fn start_fails(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = serve_cmd(dir, args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unwritable_log_path_is_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("decisions.jsonl");
    let (code, err) = start_fails(
        dir.path(),
        &["--stdio", "--decision-log", under.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("a-file/decisions.jsonl: error: cannot write the decision log:"),
        "{err}"
    );
    let (code, err) = start_fails(
        dir.path(),
        &["--stdio", "--decision-log", dir.path().to_str().unwrap()],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("it is a directory; give a file path"), "{err}");
    let (code, err) = start_fails(dir.path(), &["--stdio", "--decision-log", "-"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "--decision-log - writes to standard output, which --stdio uses for its messages"
        ),
        "{err}"
    );
}

/// A socket server with metrics on an ephemeral loopback port: the child, its socket and the
/// port it printed.
fn metrics_server(db: &(impl ServedDb + ?Sized), more: &[&str]) -> (Child, PathBuf, u16) {
    let sock = db.root().join("m.sock");
    let mut child = serve_on(
        db,
        &[
            &[
                "--socket",
                sock.to_str().unwrap(),
                "--no-watch",
                "--no-gc",
                "--metrics",
                "127.0.0.1:0",
            ],
            more,
        ]
        .concat(),
    )
    .spawn()
    .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("metrics: serving http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("the bound address on stderr: {line:?}"))
        .parse()
        .unwrap();
    (child, sock, port)
}

fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&prometheus_parse::Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "one sample {name} {labels:?}: {found:?}");
    match found[0].value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        ref other => panic!("{name}: {other:?}"),
    }
}

#[apply(crate::common::backend::backends)]
fn the_metrics_endpoint_counts_a_known_workload(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let (mut child, sock, port) = metrics_server(&db, &[]);
    let mut c = Client::connect(&sock, false);
    let state = example_state("seed-switch.yaml");
    c.result("thread/import", json!({"state": state.clone()}));
    for _ in 0..3 {
        c.result("explain", json!({"state": state.clone()}));
    }
    c.result("dispatch", json!({"thread": "th_1", "target": "cursor"}));
    for path in ["/etc/passwd", "/tmp/nothing"] {
        c.result(
            "pregrant/check",
            json!({"thread": "th_1", "run": 9, "tool": "Read", "path": path}),
        );
    }
    let bad = c.call("explain", json!({"thread": "no-such-thread"}));
    assert!(bad.get("error").is_some());
    let reloaded = c.call("policy/reload", json!({}));
    assert!(reloaded.get("error").is_none(), "{reloaded}");

    let (head, body) = http_get(port, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert_eq!(
        sample(&scrape, "baton_requests_total", &[("method", "explain")]),
        4.0
    );
    assert_eq!(
        sample(
            &scrape,
            "baton_request_errors_total",
            &[("method", "explain")]
        ),
        1.0
    );
    assert_eq!(
        sample(&scrape, "baton_requests_total", &[("method", "dispatch")]),
        1.0
    );
    assert_eq!(
        sample(
            &scrape,
            "baton_decisions_total",
            &[
                ("policy", "default"),
                ("strategy", "delta_existing"),
                ("target", "codex")
            ]
        ),
        3.0
    );
    assert_eq!(
        sample(
            &scrape,
            "baton_decisions_total",
            &[
                ("policy", "default"),
                ("strategy", "full_new"),
                ("target", "cursor")
            ]
        ),
        1.0
    );
    assert_eq!(
        sample(&scrape, "baton_pregrants_total", &[("result", "denied")]),
        2.0
    );
    // The dispatch to cursor (no thread there yet) wrote its off-band document.
    assert_eq!(sample(&scrape, "baton_documents_written_total", &[]), 1.0);
    assert_eq!(sample(&scrape, "baton_documents_collected_total", &[]), 0.0);
    assert_eq!(
        sample(&scrape, "baton_reloads_total", &[("result", "accepted")]),
        1.0
    );
    assert_eq!(sample(&scrape, "baton_in_flight", &[]), 0.0);
    assert_eq!(sample(&scrape, "baton_queue_depth", &[]), 0.0);
    let count = scrape.samples.iter().find(|s| {
        s.metric == "baton_request_duration_seconds" && s.labels.get("method") == Some("explain")
    });
    match count.map(|s| &s.value) {
        Some(prometheus_parse::Value::Histogram(buckets)) => {
            assert_eq!(buckets.last().unwrap().count, 4.0, "{buckets:?}")
        }
        other => panic!("the explain latency histogram: {other:?}"),
    }
    // The same numbers through the `metrics` method.
    let m = c.result("metrics", json!({}));
    let explains = m["samples"]["baton_requests_total"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["labels"]["method"] == "explain")
        .unwrap();
    assert_eq!(explains["value"], 4.0);
    // Other paths and methods.
    assert!(http_get(port, "/").0.starts_with("HTTP/1.1 404"));
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert!(child.wait().unwrap().success());
}

#[test]
fn metrics_refuse_a_port_in_use_and_a_remote_address() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = start_fails(dir.path(), &["--stdio", "--metrics", &addr]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{addr}: error: cannot serve metrics: the port is in use"
        )),
        "{err}"
    );
    let (code, err) = start_fails(dir.path(), &["--stdio", "--metrics", "0.0.0.0:0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("0.0.0.0 is not a loopback address: metrics are served on loopback only"),
        "{err}"
    );
    assert!(err.contains("--metrics-allow-remote"), "{err}");
    let (code, err) = start_fails(dir.path(), &["--stdio", "--metrics", "no-port-here"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not an address (give HOST:PORT"), "{err}");
    let (code, err) = start_fails(dir.path(), &["--stdio", "--metrics-allow-remote"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--metrics-allow-remote needs --metrics ADDR"),
        "{err}"
    );
}

#[apply(crate::common::backend::backends)]
fn status_says_what_serves_and_what_the_store_holds(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let dir = &db.dir;
    let sock = dir.path().join("st.sock");
    let mut child = serve_on(
        &db,
        &["--socket", sock.to_str().unwrap(), "--no-watch", "--no-gc"],
    )
    .spawn()
    .unwrap();
    let mut c = Client::connect(&sock, false);
    c.result(
        "thread/import",
        json!({"state": example_state("seed-switch.yaml")}),
    );
    let st = c.result("status", json!({}));
    assert_eq!(st["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(st["policy"]["name"], "default");
    assert_eq!(st["policy"]["generation"], 1);
    assert_eq!(st["store"]["threads"], 1);
    assert_eq!(st["store"]["runs"], 8);
    assert!(st["store"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(st["last_reload_error"], Value::Null);
    assert_eq!(st["decision_log"]["enabled"], false);

    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["status", "--socket", sock.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["policy"]["sha256"], st["policy"]["sha256"]);
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["status", "--socket", sock.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("policy  default sha256"), "{text}");
    assert!(text.contains("1 threads, 8 runs"), "{text}");
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert!(child.wait().unwrap().success());

    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["status", "--socket", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("cannot connect (is `baton serve --socket` running?)"));
}

fn baton(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .current_dir(ROOT)
        .args(args)
        .env("BATON_HANDOFF_DIR", dir.join("handoffs"))
        .output()
        .unwrap()
}

#[apply(crate::common::backend::backends)]
fn log_export_writes_the_store_decisions_as_log_lines(#[case] backend: Backend) {
    let test_db = TestDb::new(backend);
    let dir = &test_db.dir;
    let db = test_db.url.as_str();
    let seed = Path::new(ROOT).join("examples/seed-switch.yaml");
    assert!(baton(
        dir.path(),
        &["db", "import", "--db", db, seed.to_str().unwrap()]
    )
    .status
    .success());
    let d = baton(
        dir.path(),
        &[
            "dispatch", "--db", db, "--thread", "th_1", "--target", "cursor", "--json",
        ],
    );
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let d: Value = serde_json::from_slice(&d.stdout).unwrap();

    let out = baton(dir.path(), &["log", "export", "--db", db]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let l = &lines[0];
    assert_eq!(l["method"], "dispatch");
    assert_eq!(l["thread"], "th_1");
    assert_eq!(l["target"], "cursor");
    assert_eq!(l["strategy"], d["strategy"]);
    assert_eq!(l["policy"]["sha256"], d["policy"]["sha256"]);
    assert_eq!(l["covered_runs"], d["covered_runs"]);
    assert!(l.get("trace").is_none() && l.get("input").is_none());
    for t in seed_texts() {
        assert!(!text.contains(&t), "the export carries a thread text: {t}");
    }
    let traced = baton(dir.path(), &["log", "export", "--db", db, "--trace"]);
    let traced: Value = serde_json::from_slice(&traced.stdout).unwrap();
    assert_eq!(traced["trace"], d["trace"]);
    // --since after the decision: nothing.
    let later = baton(
        dir.path(),
        &[
            "log",
            "export",
            "--db",
            db,
            "--since",
            "2999-01-01T00:00:00Z",
        ],
    );
    assert!(later.status.success());
    assert!(later.stdout.is_empty());
    let recent = baton(dir.path(), &["log", "export", "--db", db, "--since", "1h"]);
    assert_eq!(String::from_utf8(recent.stdout).unwrap().lines().count(), 1);
    let bad = baton(
        dir.path(),
        &["log", "export", "--db", db, "--since", "yesterday-ish"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("neither an RFC 3339 time"));
}

#[test]
fn a_log_block_is_checked_formatted_and_named_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.policy");
    std::fs::write(&p, "policy \"l\" {\n  extends \"default\"\n}\nlog {\n  drop traec\n  keep thread\n  hash input\n  drop id\n}\n").unwrap();
    let out = baton(dir.path(), &["check", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`drop traec`: a decision-log line has no field `traec`"),
        "{err}"
    );
    assert!(err.contains("did you mean `trace`?"), "{err}");
    assert!(
        err.contains("`keep thread`: `thread` is written by default"),
        "{err}"
    );
    assert!(
        err.contains("`hash input`: `input` cannot be hashed"),
        "{err}"
    );
    assert!(
        err.contains("`drop id`: `id` is written on every line"),
        "{err}"
    );

    std::fs::write(
        &p,
        "policy \"l\" {\n  extends \"default\"\n}\nlog {\ndrop   budget\n      hash thread\n}\n",
    )
    .unwrap();
    let out = baton(dir.path(), &["check", p.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(baton(dir.path(), &["fmt", p.to_str().unwrap()])
        .status
        .success());
    let formatted = std::fs::read_to_string(&p).unwrap();
    assert!(
        formatted.contains("log {\n  drop budget\n  hash thread\n}\n"),
        "{formatted}"
    );
    assert!(baton(dir.path(), &["fmt", "--check", p.to_str().unwrap()])
        .status
        .success());
}

/// A candidate that flips one rule of the default policy for the seed example: the
/// `clean_context` signal always holds, so run 9 on codex starts fresh.
fn candidate(dir: &Path) -> PathBuf {
    let p = dir.join("candidate.policy");
    std::fs::write(
        &p,
        "policy \"candidate\" {\n  extends \"default\"\n}\n\nstale clean_context when true because \"always start clean\"\n",
    )
    .unwrap();
    p
}

/// An active policy that logs its decisions' inputs.
fn logging_active(dir: &Path) -> PathBuf {
    let p = dir.join("active.policy");
    std::fs::write(
        &p,
        "policy \"active\" {\n  extends \"default\"\n}\n\nlog {\n  keep input\n}\n",
    )
    .unwrap();
    p
}

/// Send `requests` to a `--stdio --framing lines` server and return each response's bytes.
fn raw_responses(dir: &Path, args: &[&str], requests: &[Value]) -> Vec<String> {
    let mut child = serve_cmd(
        dir,
        &[
            &["--stdio", "--framing", "lines", "--no-watch", "--no-gc"],
            args,
        ]
        .concat(),
    )
    .spawn()
    .unwrap();
    let mut w = child.stdin.take().unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    for req in requests {
        writeln!(w, "{req}").unwrap();
        w.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(r.read_line(&mut line).unwrap() > 0, "a response to {req}");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                out.push(line);
                break;
            }
        }
    }
    drop(w);
    assert!(child.wait().unwrap().success());
    out
}

#[test]
fn a_shadow_policy_shows_exactly_the_divergences_baton_diff_predicts_and_changes_no_response() {
    let dir = tempfile::tempdir().unwrap();
    let cand = candidate(dir.path());
    let log = dir.path().join("shadow.jsonl");
    let state = example_state("seed-switch.yaml");
    let requests: Vec<Value> = [
        ("explain", json!({"state": state.clone()})),
        ("render", json!({"state": state.clone()})),
        (
            "explain",
            json!({"state": state.clone(), "target": "cursor", "trace": false}),
        ),
    ]
    .iter()
    .enumerate()
    .map(|(i, (m, p))| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": p}))
    .collect();
    let plain = raw_responses(dir.path(), &[], &requests);
    let shadowed = raw_responses(
        dir.path(),
        &[
            "--shadow",
            cand.to_str().unwrap(),
            "--decision-log",
            log.to_str().unwrap(),
        ],
        &requests,
    );
    assert_eq!(
        plain, shadowed,
        "the shadow changes no response, byte for byte"
    );

    // What `baton diff` predicts for the same state and target.
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    std::fs::copy(
        Path::new(ROOT).join("examples/seed-switch.yaml"),
        corpus.join("seed.yaml"),
    )
    .unwrap();
    let out = baton(
        dir.path(),
        &[
            "diff",
            "--from",
            "default",
            "--to",
            cand.to_str().unwrap(),
            "--corpus",
            corpus.to_str().unwrap(),
            "--target",
            "codex",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let predicted: Value = serde_json::from_slice(&out.stdout).unwrap();
    let predicted = &predicted["decisions"][0]["changes"];
    assert!(predicted.as_array().unwrap().len() > 1, "{predicted}");

    let lines = lines_of(&log);
    assert_eq!(lines.len(), 3);
    for l in &lines[..2] {
        assert_eq!(l["divergences"]["policy"]["name"], "candidate");
        assert_eq!(&l["divergences"]["changes"], predicted, "{l}");
    }
    let fields: Vec<&str> = predicted
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"strategy") && fields.contains(&"stale"),
        "{fields:?}"
    );
    let stale = predicted
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "stale")
        .unwrap();
    assert_eq!(stale["causes"][0]["rule"], "stale clean_context");
    // For cursor (no thread: full_new either way) the candidate still flips the signal.
    assert!(lines[2]["divergences"]["changes"].is_array());
}

#[apply(crate::common::backend::backends)]
fn shadow_divergences_are_counted_and_the_shadow_is_swapped_by_method(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let dir = &db.dir;
    let cand = candidate(dir.path());
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("x.policy"), "stale oops when target.nope\n").unwrap();
    let mut s = stdio_on(&db, &["--no-watch"]);
    let state = example_state("seed-switch.yaml");
    // No shadow yet.
    assert_eq!(s.client.result("status", json!({}))["shadow"], Value::Null);
    // A candidate that does not check is refused with its diagnostics; nothing changes.
    let r = s
        .client
        .call("policy/shadow", json!({"spec": bad.to_str().unwrap()}));
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is refused; the active policy and the shadow in place are unaffected"),
        "{r}"
    );
    assert!(!r["error"]["data"]["diagnostics"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(r["error"]["data"]["shadow"], Value::Null);
    // A good one decides beside the active policy from now on.
    let r = s
        .client
        .result("policy/shadow", json!({"spec": cand.to_str().unwrap()}));
    assert_eq!(r["shadow"]["name"], "candidate");
    let active = s.client.result("explain", json!({"state": state.clone()}));
    assert_eq!(
        active["decision"]["strategy"], "delta_existing",
        "the active policy decides"
    );
    let m = s.client.result("metrics", json!({}));
    assert_eq!(
        m["samples"]["baton_shadow_decisions_total"][0]["value"],
        1.0
    );
    let strategy = m["samples"]["baton_shadow_divergences_total"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["labels"]["field"] == "strategy")
        .unwrap();
    assert_eq!(strategy["labels"]["policy"], "candidate");
    assert_eq!(strategy["value"], 1.0);
    // A dispatch is shadowed too, from the input the store logged for it.
    s.client
        .result("thread/import", json!({"state": state.clone()}));
    let d = s
        .client
        .result("dispatch", json!({"thread": "th_1", "target": "codex"}));
    assert_eq!(d["strategy"], "delta_existing");
    let m = s.client.result("metrics", json!({}));
    assert_eq!(
        m["samples"]["baton_shadow_decisions_total"][0]["value"],
        2.0
    );
    let strategy = m["samples"]["baton_shadow_divergences_total"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["labels"]["field"] == "strategy")
        .unwrap();
    assert_eq!(
        strategy["value"], 2.0,
        "the dispatch's strategy diverges too"
    );
    let st = s.client.result("status", json!({}));
    assert_eq!(st["shadow"]["name"], "candidate");
    assert_eq!(st["shadow"]["sha256"].as_str().unwrap().len(), 64);
    // A refused candidate leaves the one in place.
    let r = s
        .client
        .call("policy/shadow", json!({"spec": bad.to_str().unwrap()}));
    assert_eq!(r["error"]["data"]["shadow"]["name"], "candidate");
    // null removes it.
    let r = s.client.result("policy/shadow", json!({"spec": null}));
    assert_eq!(r["shadow"], Value::Null);
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_shadow_dir_that_does_not_parse_is_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("candidate");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("x.policy"),
        "strategy {\n  full_new whenn true\n}\n",
    )
    .unwrap();
    let (code, err) = start_fails(dir.path(), &["--stdio", "--shadow", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "error: the shadow policy `{}` is refused (the active policy is unaffected):",
            bad.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("x.policy:2:"),
        "the diagnostic names the file and line: {err}"
    );
}

#[test]
fn diff_from_log_replays_logged_inputs_under_a_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let active = logging_active(dir.path());
    let cand = candidate(dir.path());
    let log = dir.path().join("d.jsonl");
    let mut s = stdio(
        dir.path(),
        &[
            "--policy",
            active.to_str().unwrap(),
            "--decision-log",
            log.to_str().unwrap(),
            "--shadow",
            cand.to_str().unwrap(),
            "--no-watch",
        ],
    );
    let state = example_state("seed-switch.yaml");
    s.client.result("explain", json!({"state": state.clone()}));
    s.client.result(
        "explain",
        json!({"state": state.clone(), "target": "claude"}),
    );
    assert_eq!(s.stop(), 0);
    let lines = lines_of(&log);
    assert_eq!(lines.len(), 2);

    let out = baton(
        dir.path(),
        &[
            "diff",
            "--from",
            active.to_str().unwrap(),
            "--to",
            cand.to_str().unwrap(),
            "--from-log",
            log.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["decisions_compared"], 2);
    let decisions = report["decisions"].as_array().unwrap();
    assert!(!decisions.is_empty());
    for d in decisions {
        let line_no: usize = d["state"]
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let logged = &lines[line_no - 1];
        assert_eq!(d["target"], logged["target"]);
        // Offline replay finds what the live shadow found.
        assert_eq!(d["changes"], logged["divergences"]["changes"], "{d}");
    }
    // A log without inputs cannot be replayed: said so.
    let plain = dir.path().join("plain.jsonl");
    std::fs::write(
        &plain,
        format!("{}\n", json!({"id": "x", "method": "explain"})),
    )
    .unwrap();
    let out = baton(
        dir.path(),
        &[
            "diff",
            "--from",
            "default",
            "--to",
            cand.to_str().unwrap(),
            "--from-log",
            plain.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no line of the log carries its decision's input (1 lines read)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_metrics_endpoint_refuses_an_oversized_request_head() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, sock, port) = metrics_server(dir.path(), &[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let filler = "x".repeat(9 * 1024);
    write!(s, "GET /metrics HTTP/1.1\r\nX-Filler: {filler}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
        "{resp}"
    );
    let (head, _) = {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "POST /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        (resp, ())
    };
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    let mut c = Client::connect(&sock, false);
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_socket_server_logs_decisions_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("o.sock");
    let child = serve_cmd(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--no-watch",
            "--no-gc",
            "--decision-log",
            "-",
        ],
    )
    .spawn()
    .unwrap();
    let mut c = Client::connect(&sock, false);
    let state = example_state("seed-switch.yaml");
    c.result("explain", json!({"state": state.clone()}));
    c.result("explain", json!({"state": state, "target": "cursor"}));
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1]["target"], "cursor");
}
