//! Load on `baton serve` over its Unix socket: 8 concurrent clients x 1,000 mixed requests
//! against a store holding a 1,000-run thread. Bounded in count (8,000 requests) and in time
//! (it gives up after 10 minutes). Each client first sends 100 requests of the same mix to
//! warm caches; those are not measured. Prints throughput, p50/p99 latency per method and overall,
//! and the server's resident memory after warm-up, at every twentieth of the run and after;
//! checks that no request is lost or duplicated and that no per-thread queue entry is left.
//! Run: `cargo bench --bench serve`.
//!
//! The data the mix works on stays the same size, so that memory can be compared across the
//! run: the 1,000-run thread is only read, and each client's own thread (which `dispatch` and
//! `completeRun` extend) is re-imported empty every `BATON_BENCH_RESET` runs (default 20; 0
//! lets it grow for the whole run, to see what a growing thread costs).

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
/// Requests per client (`BATON_BENCH_REQUESTS` overrides, e.g. to watch memory over a longer run).
fn per_client() -> usize {
    std::env::var("BATON_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}
/// Runs a client's own thread reaches before it is re-imported empty (0: never).
fn reset_every() -> u32 {
    std::env::var("BATON_BENCH_RESET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}
const BIG_RUNS: u32 = 1_000;
/// RSS samples taken over the measured run.
const SAMPLES: usize = 20;
/// Requests per client before measuring, so that caches and allocator arenas are warm.
const WARMUP: usize = 100;

#[path = "../tests/serve_support/mod.rs"]
mod serve_support;
use serve_support::Client;

/// Call `method` and return its response, which must be the next one and not an error.
fn call_in_order(conn: &mut Client, method: &str, params: Value) -> Value {
    let id = conn.start(method, params);
    let r = conn.response();
    assert_eq!(r["id"], id, "response out of order");
    assert!(r.get("error").is_none(), "{method} failed: {r}");
    r
}

/// The server's resident memory in KiB: (total, anonymous i.e. heap and stacks, file-backed
/// and shared e.g. SQLite's mapped WAL index), from `/proc/PID/status`.
fn rss_kib(pid: u32) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:") + field("RssShmem:"),
    )
}

fn file_kib(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len() / 1024).unwrap_or(0)
}

fn big_thread() -> Value {
    let runs: Vec<Value> = (1..=BIG_RUNS)
        .map(|n| {
            let (provider, pt) = if (n / 100).is_multiple_of(2) { ("codex", "C1") } else { ("claude", "L1") };
            json!({"ordinal": n, "provider": provider, "provider_thread": pt, "items": [
                {"kind": "user_message", "text": format!("Step {n}: change the handler and keep the tests green.")},
                {"kind": "reasoning", "text": "Think about it."},
                {"kind": "assistant_message", "text": format!("Done with step {n}; the handler validates its input.")},
                {"kind": "file_change", "path": format!("src/m{}.rs", n % 50), "change": "modified", "diff_lines": 12},
                {"kind": "command", "command": "cargo test", "exit_code": 0, "output": "test result: ok"},
            ]})
        })
        .collect();
    json!({
        "version": 1,
        "thread": {"id": "big", "title": "a long thread"},
        "provider_threads": [
            {"id": "C1", "provider": "codex", "status": "active"},
            {"id": "L1", "provider": "claude", "status": "active"}
        ],
        "runs": runs,
        "request": {"provider": "codex"},
    })
}

fn walk_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| {
                    if e.path().is_dir() {
                        walk_count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// A thread with no runs, for a client's own `dispatch`/`completeRun` traffic.
fn empty_thread(id: &str) -> Value {
    json!({"version": 1, "thread": {"id": id}, "request": {"provider": "codex"}})
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let per_client = per_client();
    let reset = reset_every();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("baton.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["serve", "--socket", sock.to_str().unwrap(), "--no-watch"])
        .arg("--db")
        .arg(dir.path().join("bench.db"))
        .env("BATON_HANDOFF_DIR", dir.path().join("handoffs"))
        .stdin(Stdio::null())
        .spawn()
        .expect("baton serve starts");
    let pid = child.id();
    let mut setup = Client::connect(&sock, false);
    setup.result("thread/import", json!({"state": big_thread()}));
    for c in 0..CLIENTS {
        setup.result(
            "thread/import",
            json!({"state": empty_thread(&format!("c{c}"))}),
        );
    }
    let small = {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/seed-switch.yaml"
        ))
        .unwrap();
        serde_yaml::from_str::<Value>(&text).unwrap()
    };
    let samples = Arc::new(Mutex::new(Vec::new()));
    let warm = Arc::new(std::sync::Barrier::new(CLIENTS + 1));
    let go = Arc::new(std::sync::Barrier::new(CLIENTS + 1));
    let deadline = Instant::now() + Duration::from_secs(600);

    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let sock = sock.clone();
            let small = small.clone();
            let samples = samples.clone();
            let (warm, go) = (warm.clone(), go.clone());
            std::thread::spawn(move || {
                let mut conn = Client::connect(&sock, false);
                let mut lat: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
                let mut seen = HashSet::new();
                let mut run = 0u32;
                let mut mine = small.clone();
                mine["thread"]["id"] = json!(format!("c{c}-inline"));
                for k in 0..WARMUP + per_client {
                    if k == WARMUP {
                        lat.clear();
                        seen.clear();
                        warm.wait();
                        go.wait();
                    }
                    let i = k % per_client;
                    assert!(Instant::now() < deadline, "bench exceeded its time bound");
                    let (method, params): (&'static str, Value) = match i % 10 {
                        0 | 5 => ("explain", json!({"thread": "big", "target": if i.is_multiple_of(20) { "codex" } else { "claude" }})),
                        1 | 6 => ("health", json!({})),
                        2 if reset > 0 && run >= reset => {
                            run = 0;
                            ("thread/import", json!({"replace": true, "state": empty_thread(&format!("c{c}"))}))
                        }
                        2 => ("policy/status", json!({})),
                        3 | 7 => ("explain", json!({"state": mine})),
                        4 => {
                            run += 1;
                            ("dispatch", json!({"thread": format!("c{c}"), "target": if (run / 3).is_multiple_of(2) { "codex" } else { "claude" }}))
                        }
                        8 => ("completeRun", json!({"thread": format!("c{c}"), "run": run, "items": [{"kind": "assistant_message", "text": "ok"}]})),
                        _ => ("render", json!({"state": mine})),
                    };
                    let t = Instant::now();
                    let r = call_in_order(&mut conn, method, params);
                    lat.entry(method).or_default().push(t.elapsed());
                    assert!(seen.insert(r["id"].as_u64().unwrap()), "duplicate response");
                    if k >= WARMUP && i.is_multiple_of((per_client / SAMPLES).max(1)) && c == 0 {
                        samples.lock().unwrap().push(rss_kib(pid));
                    }
                }
                assert_eq!(seen.len(), per_client, "lost responses");
                lat
            })
        })
        .collect();
    warm.wait();
    let rss_before = rss_kib(pid);
    let started = Instant::now();
    go.wait();
    let mut all: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    for h in handles {
        for (m, v) in h.join().unwrap() {
            all.entry(m).or_default().extend(v);
        }
    }
    let elapsed = started.elapsed();
    let rss_after = rss_kib(pid);
    let total: usize = all.values().map(Vec::len).sum();
    assert_eq!(total, CLIENTS * per_client);

    println!("baton serve: {CLIENTS} clients x {per_client} requests on a Unix socket, {BIG_RUNS}-run thread, own threads reset every {reset} runs");
    println!(
        "  {total} requests in {:.2} s: {:.0} requests/s; none lost or duplicated",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    let mut every: Vec<Duration> = all.values().flatten().copied().collect();
    every.sort();
    println!(
        "  all        p50 {:>8.2} ms   p99 {:>8.2} ms",
        percentile(&every, 0.5).as_secs_f64() * 1e3,
        percentile(&every, 0.99).as_secs_f64() * 1e3
    );
    for (m, mut v) in all {
        v.sort();
        println!(
            "  {m:<14} n={:<5} p50 {:>8.2} ms   p99 {:>8.2} ms",
            v.len(),
            percentile(&v, 0.5).as_secs_f64() * 1e3,
            percentile(&v, 0.99).as_secs_f64() * 1e3
        );
    }
    let show = |(all, anon, file): (u64, u64, u64)| format!("{all} ({anon} anon + {file} file)");
    println!("  server RSS, KiB: after warm-up {}", show(rss_before));
    for (i, r) in samples.lock().unwrap().iter().enumerate() {
        println!("    at {:>2}/{SAMPLES}: {}", i, show(*r));
    }
    println!("    after:  {}", show(rss_after));
    let docs = walk_count(&dir.path().join("handoffs"));
    println!(
        "  database {} KiB, WAL {} KiB, {docs} off-band files",
        file_kib(&dir.path().join("bench.db")),
        file_kib(&dir.path().join("bench.db-wal")),
    );
    let health = call_in_order(&mut setup, "health", json!({}));
    assert_eq!(
        health["result"]["queued_threads"], 0,
        "per-thread queue entries left: {health}"
    );
    println!("  per-thread queue entries left after the run: 0");
    call_in_order(&mut setup, "shutdown", json!({}));
    setup.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
    let _ = child.wait();
}
