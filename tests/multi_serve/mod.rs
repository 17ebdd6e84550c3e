//! Several `baton serve` processes on one database under concurrent clients, then the store
//! checked (issue 31: a user's next run may land on any app server). The `serve` target runs it
//! on both backends (`tests/serve_database.rs`): SQLite (several processes on one file, the
//! desktop guarantee) and PostgreSQL (several app servers, feature `postgres`).
//!
//! [`run`] starts [`Load::servers`] `baton serve --socket` processes on `db`, imports
//! [`Load::threads`] copies of `examples/seed-switch.yaml` through the first, and lets
//! [`Load::clients`] client threads share [`Load::calls`] `dispatch` and `completeRun` calls.
//! Each client is connected to two servers: it dispatches on its own server, to a random
//! thread and provider (so clients collide on threads, across servers), completes each run it
//! started on the other server, and when a dispatch issued a one-shot pre-grant it races a
//! `pregrant/check` of it on both servers. Then [`Outcome::check`]:
//!
//! - no two acknowledged dispatches started the same run of a thread, and every refused one
//!   was refused because the thread's run was still running;
//! - every thread's runs are exactly its imported runs and the acknowledged dispatches, with
//!   ordinals 1..n (none lost, none unacknowledged), each on the provider it was dispatched to
//!   and completed;
//! - every one-shot pre-grant was allowed exactly once, the other check told it was used;
//! - ([`Outcome::check_replay`]) `baton replay --db` replays every logged decision (one per
//!   acknowledged dispatch) with no difference.
//!
//! Every wait is for an answer; nothing is timed.
#![allow(dead_code)]

use crate::serve_support::{example_state, Client, ROOT};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// How big a load is.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// `baton serve` processes on the one database.
    pub servers: usize,
    /// Threads the clients share.
    pub threads: usize,
    /// Concurrent clients (each an OS thread with its own two connections).
    pub clients: usize,
    /// `dispatch` and `completeRun` calls, all clients together (the pre-grant checks and the
    /// setup are not counted).
    pub calls: usize,
}

/// The runs of the imported seed thread (`examples/seed-switch.yaml`).
const SEED_RUNS: u32 = 8;

/// The running servers, stopped (shutdown + exit) when dropped.
pub struct Servers {
    pub sockets: Vec<PathBuf>,
    children: Vec<Child>,
    logs: Vec<PathBuf>,
}

impl Servers {
    /// `n` servers on `db`, each with its own socket in `dir`; their off-band documents go
    /// to one shared root (`dir/handoffs`), as app servers on one machine share it.
    pub fn start(dir: &Path, db: &str, n: usize) -> Servers {
        let mut s = Servers {
            sockets: Vec::new(),
            children: Vec::new(),
            logs: Vec::new(),
        };
        for i in 0..n {
            let sock = dir.join(format!("s{i}.sock"));
            let log = dir.join(format!("s{i}.log"));
            let child = Command::new(env!("CARGO_BIN_EXE_baton"))
                .current_dir(ROOT)
                .args(["serve", "--socket"])
                .arg(&sock)
                .args(["--db", db, "--no-watch", "--no-gc"])
                .env("BATON_HANDOFF_DIR", dir.join("handoffs"))
                .env_remove("BATON_DB")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("a server log"))
                .spawn()
                .expect("baton serve starts");
            s.sockets.push(sock);
            s.children.push(child);
            s.logs.push(log);
        }
        s.wait_ready();
        s
    }

    /// Poll until every server accepts connections (the event has no notification), failing
    /// at once, with its log, when one exited instead.
    fn wait_ready(&mut self) {
        for (i, child) in self.children.iter_mut().enumerate() {
            while std::os::unix::net::UnixStream::connect(&self.sockets[i]).is_err() {
                if let Some(status) = child.try_wait().expect("the server's status") {
                    panic!(
                        "server {i} exited at start ({status}):\n{}",
                        std::fs::read_to_string(&self.logs[i]).unwrap_or_default()
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    /// A new connection to server `i` (waits for its socket).
    pub fn connect(&self, i: usize) -> Client {
        Client::connect(&self.sockets[i % self.sockets.len()], false)
    }

    /// What the servers wrote to stderr, for a failure message.
    pub fn logs(&self) -> String {
        self.logs
            .iter()
            .map(|l| std::fs::read_to_string(l).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Stop every server (`shutdown`, then `exit`) and wait for it: each must exit 0.
    pub fn stop(mut self) {
        let children = std::mem::take(&mut self.children);
        for (i, mut child) in children.into_iter().enumerate() {
            let mut c = self.connect(i);
            c.result("shutdown", json!({}));
            c.notify("exit", json!({}));
            let code = child.wait().expect("the server exits").code();
            assert_eq!(
                code,
                Some(0),
                "server {i} exit code; logs:\n{}",
                self.logs()
            );
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Acknowledged dispatches: (thread, run, target).
    pub dispatched: Vec<(String, u32, String)>,
    /// Dispatches refused because the thread's run was still running.
    pub refused: usize,
    /// Acknowledged completions: (thread, run).
    pub completed: Vec<(String, u32)>,
    /// Each one-shot pre-grant checked: (thread, run, path) -> the two checks' `allow`.
    pub grants: BTreeMap<(String, u32, String), Vec<bool>>,
    /// Any other answer: an error that should not happen.
    pub failures: Vec<String>,
    /// `dispatch` and `completeRun` calls made.
    pub calls: usize,
}

/// The thread ids of a load.
pub fn thread_id(k: usize) -> String {
    format!("mp_{k}")
}

/// A small deterministic generator (xorshift64*), one per client.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 33) as usize % n.max(1)
    }
}

/// Import the load's threads through `servers`' first server.
pub fn import_threads(servers: &Servers, load: &Load) {
    let mut c = servers.connect(0);
    for k in 0..load.threads {
        let mut st = example_state("seed-switch.yaml");
        st["thread"]["id"] = json!(thread_id(k));
        c.result("thread/import", json!({"state": st}));
    }
}

/// Run the load's clients against `servers`, returning what they saw.
pub fn drive(servers: &Servers, load: &Load) -> Outcome {
    let budget = AtomicUsize::new(load.calls);
    let take = || {
        budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
            .is_ok()
    };
    let outcome = Mutex::new(Outcome::default());
    std::thread::scope(|s| {
        for w in 0..load.clients {
            let (take, outcome) = (&take, &outcome);
            s.spawn(move || {
                let mut home = servers.connect(w);
                let mut other = servers.connect(w + 1);
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0x1234_5677));
                let mut mine = Outcome::default();
                while take() {
                    mine.calls += 1;
                    let thread = thread_id(rng.below(load.threads));
                    let target = ["codex", "claude"][rng.below(2)];
                    let r = home.call(
                        "dispatch",
                        json!({"thread": thread, "target": target, "message": format!("client {w}"), "trace": false}),
                    );
                    if let Some(e) = r.get("error") {
                        let m = e["message"].as_str().unwrap_or_default();
                        if m.contains("is still running; complete it before dispatching again") {
                            mine.refused += 1;
                        } else {
                            mine.failures.push(format!("dispatch {thread} {target}: {e}"));
                        }
                        continue;
                    }
                    let res = &r["result"];
                    let Some(run) = res["recorded"]["run"].as_u64().and_then(|n| u32::try_from(n).ok()) else {
                        mine.failures.push(format!("dispatch {thread} {target}: no run in {res}"));
                        continue;
                    };
                    if res["recorded"]["started"] != json!(true) {
                        mine.failures.push(format!("dispatch {thread} {target}: no run started: {res}"));
                        continue;
                    }
                    mine.dispatched.push((thread.clone(), run, target.to_string()));
                    if let Some(path) = res["pregrant"]["path"].as_str() {
                        // Both servers at once: exactly one may use it.
                        let p = json!({"thread": thread, "run": run, "tool": "Read", "path": path});
                        let a = home.start("pregrant/check", p.clone());
                        let b = other.start("pregrant/check", p);
                        let answers = [home.response_to(a), other.response_to(b)];
                        let allows: Vec<bool> = answers
                            .iter()
                            .map(|r| r["result"]["allow"].as_bool().unwrap_or_else(|| panic!("a pre-grant answer: {r}")))
                            .collect();
                        for r in &answers {
                            let reason = r["result"]["reason"].as_str().unwrap_or_default();
                            if r["result"]["allow"] == json!(false) && reason != "pre-grant already used" {
                                mine.failures.push(format!("pregrant {thread} {run}: {r}"));
                            }
                        }
                        mine.grants.insert((thread.clone(), run, path.to_string()), allows);
                    }
                    // Completed on the other server: the run is the database's, not a server's.
                    // Counted in the budget, and made even when the budget is spent.
                    let _ = take();
                    mine.calls += 1;
                    let items = json!([{"kind": "assistant_message", "text": format!("run {run} of {thread} done")}]);
                    let r = other.call("completeRun", json!({"thread": thread, "run": run, "items": items}));
                    match r.get("error") {
                        None => mine.completed.push((thread, run)),
                        Some(e) => mine.failures.push(format!("completeRun {thread} {run}: {e}")),
                    }
                }
                let mut all = outcome.lock().unwrap();
                all.dispatched.extend(mine.dispatched);
                all.completed.extend(mine.completed);
                all.grants.extend(mine.grants);
                all.failures.extend(mine.failures);
                all.refused += mine.refused;
                all.calls += mine.calls;
            });
        }
    });
    outcome.into_inner().unwrap()
}

/// `baton ARGS...`: (success, stdout, stderr).
pub fn baton(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .current_dir(ROOT)
        .args(args)
        .env_remove("BATON_DB")
        .output()
        .expect("baton runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every thread of the load as `thread/export` gives it, by id.
pub fn exports(servers: &Servers, load: &Load) -> BTreeMap<String, Value> {
    let mut c = servers.connect(0);
    (0..load.threads)
        .map(|k| {
            let id = thread_id(k);
            let st = c.result("thread/export", json!({"thread": id}))["state"].clone();
            (id, st)
        })
        .collect()
}

impl Outcome {
    /// The checks of the module's documentation, on the clients' answers and the threads as
    /// the store exports them (the replay is [`Outcome::check_replay`]).
    pub fn check(&self, load: &Load, threads: &BTreeMap<String, Value>) {
        assert!(
            self.failures.is_empty(),
            "unexpected answers:\n{}",
            self.failures.join("\n")
        );
        assert!(
            self.calls >= load.calls,
            "{} calls made of {}",
            self.calls,
            load.calls
        );
        // No run started twice.
        let mut started = BTreeSet::new();
        for (t, run, _) in &self.dispatched {
            assert!(
                started.insert((t.clone(), *run)),
                "two acknowledged dispatches started run {run} of {t}"
            );
        }
        let completed: BTreeSet<(String, u32)> = self.completed.iter().cloned().collect();
        assert_eq!(
            completed.len(),
            self.completed.len(),
            "a run completed twice"
        );
        assert_eq!(completed, started, "every started run was completed");
        // Every thread holds exactly its imported runs and the acknowledged ones.
        let mut by_thread: BTreeMap<&str, BTreeMap<u32, &str>> = BTreeMap::new();
        for (t, run, target) in &self.dispatched {
            by_thread.entry(t).or_default().insert(*run, target);
        }
        for (id, st) in threads {
            let runs = st["runs"].as_array().expect("runs");
            let ordinals: Vec<u64> = runs
                .iter()
                .map(|r| r["ordinal"].as_u64().unwrap())
                .collect();
            let ours = by_thread.get(id.as_str()).cloned().unwrap_or_default();
            let expected: Vec<u64> = (1..=u64::from(SEED_RUNS) + ours.len() as u64).collect();
            assert_eq!(ordinals, expected, "{id}: runs 1..n, none lost, none extra");
            for r in runs.iter().skip(SEED_RUNS as usize) {
                let o = u32::try_from(r["ordinal"].as_u64().unwrap()).unwrap();
                let target = ours
                    .get(&o)
                    .unwrap_or_else(|| panic!("{id} run {o} was never acknowledged"));
                assert_eq!(r["provider"], json!(target), "{id} run {o}: its provider");
                assert_eq!(r["status"], json!("completed"), "{id} run {o}: completed");
            }
        }
        // Every one-shot pre-grant allowed exactly once.
        for ((t, run, path), allows) in &self.grants {
            assert_eq!(
                allows.iter().filter(|a| **a).count(),
                1,
                "the pre-grant of {t} run {run} ({path}) was allowed {allows:?}"
            );
        }
    }

    /// `baton replay --db DB` replays every logged decision (one per acknowledged dispatch)
    /// with no difference.
    pub fn check_replay(&self, db: &str) {
        let (ok, out, err) = baton(&["replay", "--db", db]);
        assert!(ok, "baton replay: {out}{err}");
        assert_eq!(
            out.lines().last().unwrap_or_default(),
            format!("{} replayed, 0 differ, 0 skipped", self.dispatched.len()),
            "{out}"
        );
    }
}

/// The whole test: servers started on `db`, threads imported, the load driven, the servers
/// stopped, the checks run (but the replay: the caller runs [`Outcome::check_replay`] on `db`
/// or a copy of it). Returns what the clients saw and the threads' exports.
pub fn run(dir: &Path, db: &str, load: &Load) -> (Outcome, BTreeMap<String, Value>) {
    let servers = Servers::start(dir, db, load.servers);
    import_threads(&servers, load);
    let outcome = drive(&servers, load);
    if !outcome.failures.is_empty() {
        panic!(
            "unexpected answers:\n{}\nserver logs:\n{}",
            outcome.failures.join("\n"),
            servers.logs()
        );
    }
    let threads = exports(&servers, load);
    servers.stop();
    outcome.check(load, &threads);
    (outcome, threads)
}
