//! CPU per inline `explain`: `baton serve` against the same library calls in-process.
//!
//! Starts the release `baton serve --socket` on a fresh database and sends it `explain`
//! requests carrying the seed state (examples/seed-switch.yaml) as `state_text`, the request
//! the service's clients send (docs/service.md, examples/node-client), first from one client
//! (one request at a time), then from 8 concurrent clients (each on its own connection, one
//! request at a time each, each about a thread of its own), then from 8 clients all asking
//! about the same thread (`BATON_SERVE_CPU_CLIENTS=1,8,8s` is the default list). The in-process
//! equivalent runs the calls the handler makes (parse the state text, `Engine::decide`, the
//! human explanation, the result serialized to JSON) on this thread.
//!
//! A round alternates batches: a batch of requests to the server (split over the clients, all
//! sending at once), then the same number of in-process calls, and so on, so that both sides
//! are measured under the same load on a shared machine. The server's CPU time of a batch is the sum of its threads' run time from
//! `/proc/PID/task/*/schedstat` (nanoseconds); the in-process side is timed with this thread's
//! CPU clock. A round's ratio is (server CPU per request) / (in-process CPU per call); the
//! figure is the median over the rounds, as benches/versus.rs reports its ratios. As a cross
//! check, the server's CPU over the whole round is also read from `/proc/PID/stat` (every
//! thread, live or exited, in clock ticks).
//!
//! The in-process calls of a batch run back to back (warm caches); a second figure times one
//! in-process call right after each served request, as an app calling the library once per
//! run start would (caches shared with the client's socket work): it is printed, not used in
//! the ratio. With several clients, the same calls are also made in-process from as many
//! threads at once (an app deciding on that many threads), each thread timing its own CPU:
//! printed beside the strict one-thread baseline, which stays the ratio's denominator.
//!
//!   cargo bench --features unstable --bench serve_cpu                                   # 7 rounds x 400 requests
//!   BATON_SERVE_CPU_CLIENTS=8 cargo bench --features unstable --bench serve_cpu         # 8 clients only
//!   BATON_SERVE_CPU_ROUNDS=11 BATON_SERVE_CPU_REQUESTS=1000 cargo bench --features unstable --bench serve_cpu
//!   cargo bench --features unstable --bench serve_cpu -- --test                         # a smoke run
//!   BATON_SERVE_CPU_BIN=/path/to/other/baton cargo bench --features unstable --bench serve_cpu   # another server
//!
//! The clients' own CPU is not counted.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time (user + system) of every thread of process `pid`, live or exited.
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server runs");
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime), counted from 1; `rest` starts at field 3.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Duration::from_secs_f64(ticks as f64 / hz.max(1) as f64)
}

/// Run time (ns) of the live threads of process `pid`, from their `schedstat`.
fn threads_run_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Context switches (voluntary, involuntary) summed over the live threads of process `pid`.
fn context_switches(pid: u32) -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return total;
    };
    for t in tasks.filter_map(Result::ok) {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for l in status.lines() {
            let n = |l: &str| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if l.starts_with("voluntary_ctxt_switches:") {
                total.0 += n(l);
            } else if l.starts_with("nonvoluntary_ctxt_switches:") {
                total.1 += n(l);
            }
        }
    }
    total
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One client connection with Content-Length framing.
struct Conn {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next_id: u64,
    frame: Vec<u8>,
}

impl Conn {
    fn connect(path: &Path) -> Conn {
        for _ in 0..500 {
            if let Ok(s) = UnixStream::connect(path) {
                let r = BufReader::new(s.try_clone().unwrap());
                return Conn {
                    w: s,
                    r,
                    next_id: 0,
                    frame: Vec::new(),
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("cannot connect to {}", path.display());
    }

    /// Send `method(params)` and return the raw body of the response (the next message).
    fn call_raw(&mut self, method: &str, params: &Value) -> Vec<u8> {
        self.next_id += 1;
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )
        .unwrap();
        self.frame.clear();
        write!(self.frame, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.frame.extend_from_slice(&body);
        self.w.write_all(&self.frame).unwrap();
        let mut len = None;
        loop {
            let mut line = String::new();
            assert!(self.r.read_line(&mut line).unwrap() > 0, "server closed");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = Some(v.parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; len.expect("Content-Length")];
        self.r.read_exact(&mut body).unwrap();
        body
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        let body = self.call_raw(method, params);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], json!(self.next_id), "response out of order");
        assert!(v.get("error").is_none(), "{method} failed: {v}");
        v
    }
}

/// What the handler of an inline `explain` does, in-process: parse the state text, decide,
/// write the explanation, serialize the result.
fn in_process(engine: &baton::Engine, text: &str) -> Vec<u8> {
    let state = baton::state::parse_str(text, baton::state::Format::Yaml, "params.state_text")
        .expect("valid state");
    let d = engine.decide(&state, None).expect("decides");
    let report = baton::store::report::ExplainReport {
        policy: d.policy.clone(),
        explanation: baton::explain::render(&d, false),
        decision: d,
    };
    serde_json::to_vec(&report).expect("serializes")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What one client count measured over its rounds.
struct Figures {
    ratios: Vec<f64>,
    served_us: Vec<f64>,
    ticks_us: Vec<f64>,
    local_us: Vec<f64>,
    local_threads_us: Vec<f64>,
    after_request_us: Vec<f64>,
    wall_us: Vec<f64>,
    switches: Vec<f64>,
}

/// Send `k` `explain` requests split over `conns` (all sending at once, one request at a time
/// each), connection `i` with `params[i]`.
fn serve_batch(conns: &mut [Conn], k: usize, params: &[Value]) {
    if let ([conn], [params, ..]) = (&mut *conns, params) {
        for _ in 0..k {
            std::hint::black_box(conn.call_raw("explain", params));
        }
        return;
    }
    let per = k.div_ceil(conns.len());
    std::thread::scope(|s| {
        for (i, (conn, params)) in conns.iter_mut().zip(params).enumerate() {
            let mine = per.min(k.saturating_sub(i * per));
            s.spawn(move || {
                for _ in 0..mine {
                    std::hint::black_box(conn.call_raw("explain", params));
                }
            });
        }
    });
}

/// CPU per call of `k` in-process calls split over `threads` threads running at once (each
/// thread's own CPU clock, summed).
fn in_process_threads(engine: &baton::Engine, text: &str, k: usize, threads: usize) -> f64 {
    let per = k.div_ceil(threads).max(1);
    let spent: Duration = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let l0 = thread_cpu();
                    for _ in 0..per {
                        std::hint::black_box(in_process(engine, std::hint::black_box(text)));
                    }
                    thread_cpu() - l0
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    spent.as_secs_f64() / (per * threads) as f64
}

/// `rounds` rounds of `n` requests from `conns.len()` concurrent clients, alternating with
/// as many in-process calls.
fn measure(
    conns: &mut [Conn],
    pid: u32,
    engine: &baton::Engine,
    text: &str,
    params: &[Value],
    (rounds, n): (usize, usize),
) -> Figures {
    let clients = conns.len();
    // Batches per round: enough to interleave finely, each long enough for its clocks.
    let batch = (n / 8).max(clients);
    let mut f = Figures {
        ratios: Vec::new(),
        served_us: Vec::new(),
        ticks_us: Vec::new(),
        local_us: Vec::new(),
        local_threads_us: Vec::new(),
        after_request_us: Vec::new(),
        wall_us: Vec::new(),
        switches: Vec::new(),
    };
    for _ in 0..rounds {
        let (cs0, c0) = (context_switches(pid), process_cpu(pid));
        let (mut server_ns, mut local, mut wall, mut done) =
            (0u64, Duration::ZERO, Duration::ZERO, 0);
        while done < n {
            let k = batch.min(n - done);
            let (r0, t0) = (threads_run_ns(pid), Instant::now());
            serve_batch(conns, k, params);
            wall += t0.elapsed();
            server_ns += threads_run_ns(pid).saturating_sub(r0);
            let l0 = thread_cpu();
            for _ in 0..k {
                std::hint::black_box(in_process(engine, std::hint::black_box(text)));
            }
            local += thread_cpu() - l0;
            done += k;
        }
        let (c1, cs1) = (process_cpu(pid), context_switches(pid));
        let server = server_ns as f64 / 1e9 / n as f64;
        let local = local.as_secs_f64() / n as f64;
        f.ratios.push(server / local);
        f.served_us.push(server * 1e6);
        f.ticks_us.push((c1 - c0).as_secs_f64() * 1e6 / n as f64);
        f.local_us.push(local * 1e6);
        f.wall_us.push(wall.as_secs_f64() * 1e6 / n as f64);
        f.switches
            .push((cs1.0.saturating_sub(cs0.0) + cs1.1.saturating_sub(cs0.1)) as f64 / n as f64);
        if clients > 1 {
            f.local_threads_us
                .push(in_process_threads(engine, text, batch, clients) * 1e6);
        }
        // One in-process call after each served request (not in the ratio).
        let conn = &mut conns[0];
        let mut spent = Duration::ZERO;
        for _ in 0..batch {
            std::hint::black_box(conn.call_raw("explain", &params[0]));
            let l0 = thread_cpu();
            std::hint::black_box(in_process(engine, std::hint::black_box(text)));
            spent += thread_cpu() - l0;
        }
        f.after_request_us
            .push(spent.as_secs_f64() * 1e6 / batch as f64);
    }
    f
}

fn report(clients: usize, shared: bool, (rounds, n): (usize, usize), f: Figures) {
    let batch = (n / 8).max(clients);
    let who = match (clients, shared) {
        (1, _) => "one client".to_string(),
        (_, false) => format!("{clients} concurrent clients, each on a thread of its own"),
        (_, true) => format!("{clients} concurrent clients, all on the same thread"),
    };
    let label = format!("{clients}{}", if shared && clients > 1 { "s" } else { "" });
    println!(
        "serve_cpu: inline explain of examples/seed-switch.yaml, {rounds} rounds x {n} requests in batches of {batch}, {who}"
    );
    println!(
        "  server CPU per request  {:>8.1} us (median; /proc/PID/stat over the round: {:.1} us; wall time per request {:.1} us)",
        median(f.served_us),
        median(f.ticks_us),
        median(f.wall_us)
    );
    println!(
        "  in-process CPU per call {:>8.1} us (median; one call after each served request: {:.1} us)",
        median(f.local_us),
        median(f.after_request_us)
    );
    if !f.local_threads_us.is_empty() {
        println!(
            "  in-process CPU per call from {clients} threads at once {:>8.1} us (median)",
            median(f.local_threads_us)
        );
    }
    println!(
        "  server context switches per request {:.1} (median, live threads)",
        median(f.switches)
    );
    let mut sorted = f.ratios.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    println!(
        "  per-round ratios: {}",
        sorted
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "ratio serve/explain_inline/{label}: server CPU / in-process CPU = {:.2}x",
        median(f.ratios)
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test");
    let rounds = env_usize("BATON_SERVE_CPU_ROUNDS", if quick { 1 } else { 7 }).max(1);
    let n = env_usize("BATON_SERVE_CPU_REQUESTS", if quick { 20 } else { 400 }).max(1);
    let warmup = if quick { 5 } else { 200 };
    // `8`: 8 clients, each asking about a thread of its own (an app with 8 conversations);
    // `8s`: 8 clients asking about the same thread, whose requests the service answers one
    // at a time, in order (docs/service.md).
    let client_counts: Vec<(usize, bool)> = std::env::var("BATON_SERVE_CPU_CLIENTS")
        .unwrap_or_else(|_| "1,8,8s".to_string())
        .split(',')
        .filter_map(|c| {
            let c = c.trim();
            let shared = c.ends_with('s');
            Some((c.trim_end_matches('s').parse().ok()?, shared))
        })
        .filter(|&(c, _)| c > 0)
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("baton.sock");
    let handoffs = dir.path().join("handoffs");
    // `BATON_SERVE_CPU_BIN` runs another build of the server (e.g. an older one, to compare
    // two builds under the same load).
    let bin = std::env::var_os("BATON_SERVE_CPU_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_baton").into());
    let mut child = Command::new(bin)
        .args(["serve", "--socket", sock.to_str().unwrap(), "--no-watch"])
        .arg("--db")
        .arg(dir.path().join("bench.db"))
        .env("BATON_HANDOFF_DIR", &handoffs)
        .stdin(Stdio::null())
        .spawn()
        .expect("baton serve starts");
    let pid = child.id();
    let most = client_counts.iter().map(|c| c.0).max().unwrap_or(1);
    let mut conns: Vec<Conn> = (0..most).map(|_| Conn::connect(&sock)).collect();

    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seed-switch.yaml"
    ))
    .unwrap();
    let params = json!({ "state_text": text });
    // Client `i`'s own thread: the seed state under another thread id (the same work).
    let own: Vec<Value> = (0..most)
        .map(|i| {
            let t = text.replacen("\n  id: th_1\n", &format!("\n  id: th_{}\n", i + 1), 1);
            assert!(i == 0 || t != text, "the seed state's thread id is th_1");
            json!({ "state_text": t })
        })
        .collect();
    let same = vec![params.clone(); most];
    let engine = baton::Engine::builder("default")
        .document_root(Some(handoffs.clone()))
        .build()
        .expect("default engine");

    // The server answers what the library answers, on every connection.
    for (conn, params) in conns.iter_mut().zip(&own) {
        let text = params["state_text"].as_str().unwrap();
        let local: Value = serde_json::from_slice(&in_process(&engine, text)).unwrap();
        let served = conn.call("explain", params);
        assert_eq!(
            served["result"], local,
            "the server and the library disagree"
        );
    }

    for _ in 0..warmup {
        serve_batch(&mut conns, most, &own);
        std::hint::black_box(in_process(&engine, &text));
    }

    for &(clients, shared) in &client_counts {
        let params = if shared { &same } else { &own };
        let figures = measure(
            &mut conns[..clients],
            pid,
            &engine,
            &text,
            &params[..clients],
            (rounds, n),
        );
        report(clients, shared, (rounds, n), figures);
    }

    let conn = &mut conns[0];
    let bye = conn.call("shutdown", &json!({}));
    assert!(bye.get("error").is_none());
    conn.w
        .write_all(b"Content-Length: 33\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}")
        .unwrap();
    drop(conns);
    let _ = child.wait();
}
