//! Load on `baton serve` over its Unix socket: 8 concurrent clients x 1,000 mixed requests
//! against a store holding a 1,000-run thread. Bounded in count (8,000 requests) and in time
//! (it gives up after 10 minutes). Each client first sends 100 requests of the same mix to
//! warm caches; those are not measured. Prints throughput, p50/p99 latency per method and overall,
//! and the server's resident memory before, during and after; checks that no request is lost
//! or duplicated. Run: `cargo bench --bench serve`.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
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
const BIG_RUNS: u32 = 1_000;
/// Requests per client before measuring, so that caches and allocator arenas are warm.
const WARMUP: usize = 100;

struct Conn {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Conn {
    fn open(path: &Path) -> Conn {
        for _ in 0..500 {
            if let Ok(s) = UnixStream::connect(path) {
                let r = BufReader::new(s.try_clone().unwrap());
                return Conn { w: s, r };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("cannot connect to {}", path.display());
    }

    fn send(&mut self, v: &Value) {
        let body = v.to_string();
        write!(self.w, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.w.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        loop {
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                assert!(self.r.read_line(&mut line).unwrap() > 0, "server closed");
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Content-Length: ") {
                    len = v.parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            self.r.read_exact(&mut body).unwrap();
            let v: Value = serde_json::from_slice(&body).unwrap();
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.read();
        assert_eq!(r["id"], id, "response out of order");
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|n| n.parse().unwrap_or(0)))
        })
        .unwrap_or(0)
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let per_client = per_client();
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
    let mut setup = Conn::open(&sock);
    setup.call(1, "thread/import", json!({"state": big_thread()}));
    for c in 0..CLIENTS {
        setup.call(
            2 + c as u64,
            "thread/import",
            json!({"state": {"version": 1, "thread": {"id": format!("c{c}")}, "request": {"provider": "codex"}}}),
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
                let mut conn = Conn::open(&sock);
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
                    let id = (c * (WARMUP + per_client) + k) as u64 + 1_000;
                    let (method, params): (&'static str, Value) = match i % 10 {
                        0 | 5 => ("explain", json!({"thread": "big", "target": if i.is_multiple_of(20) { "codex" } else { "claude" }})),
                        1 | 6 => ("health", json!({})),
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
                    let r = conn.call(id, method, params);
                    lat.entry(method).or_default().push(t.elapsed());
                    assert!(seen.insert(r["id"].as_u64().unwrap()), "duplicate response");
                    if k >= WARMUP && i.is_multiple_of((per_client / 10).max(1)) && c == 0 {
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

    println!("baton serve: {CLIENTS} clients x {per_client} requests on a Unix socket, {BIG_RUNS}-run thread");
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
    println!(
        "  server RSS: {} KiB after warm-up, {:?} KiB at each tenth, {} KiB after",
        rss_before,
        samples.lock().unwrap(),
        rss_after
    );
    setup.call(99_999, "shutdown", json!({}));
    setup.send(&json!({"jsonrpc": "2.0", "method": "exit"}));
    let _ = child.wait();
}
