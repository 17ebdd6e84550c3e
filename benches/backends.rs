//! The store's lifecycle and the service on each backend: SQLite always; PostgreSQL too when
//! baton is built with feature `postgres` and `BATON_TEST_PG` names a server
//! (`eval "$(.ci/pg.sh start)"`). Each benchmark's id names its backend, and at the end the
//! bench prints the ratios of this run: PostgreSQL / SQLite, and 10,000 / 100 runs.
//!
//! - `dispatch/{backend}/{n}`: `dispatch` to codex on a thread of `n` runs (the thread of
//!   benches/support/thread.rs: codex and claude in blocks of five, ten items a run, ending
//!   with claude's block), so a delta of exactly the last 5 runs: load, decide, select, render,
//!   write the off-band document and its pre-grant, record, commit.
//! - `complete_run/{backend}/{n}`: complete the run a dispatch to claude started on that thread
//!   (10 items appended, the status set), committed.
//!
//!   Both on a fresh copy of a prepared database per iteration, copied outside the timed part
//!   (SQLite: a copy of the file and a new connection; PostgreSQL: `CREATE DATABASE ...
//!   TEMPLATE` and a new connection), so every iteration sees the same thread.
//! - `serve/{backend}/{clients}`: one release `baton serve --socket` on a fresh database, with
//!   1, 4 or 16 concurrent clients, each on its own connection and its own thread (a copy of
//!   `examples/seed-switch.yaml`, re-imported before each sample, outside the timed part), each
//!   sending `dispatch` (codex and claude in turn) and then `completeRun` of the run it
//!   started. Time per dispatch + complete pair, all clients together (throughput = 1 / time).
//!
//! Run with:
//!   cargo bench --bench backends -- --warm-up-time 1 --measurement-time 3
//!   eval "$(.ci/pg.sh start)"
//!   cargo bench --features postgres --bench backends -- --warm-up-time 1 --measurement-time 3
use baton::state::{Item, RunStatus};
use baton::store::{Db, DispatchRequest, Store};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/thread.rs"]
mod bench_thread;
#[path = "../tests/serve_support/mod.rs"]
mod serve_support;

const SIZES: [u32; 2] = [100, 10_000];
const CLIENTS: [usize; 3] = [1, 4, 16];

/// A backend to measure.
#[derive(Clone)]
enum Backend {
    Sqlite,
    /// The server's URL (`BATON_TEST_PG`).
    #[cfg(feature = "postgres")]
    Postgres(String),
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => "postgres",
        }
    }
}

/// SQLite, and PostgreSQL when it can be measured (said so when it cannot).
fn backends() -> Vec<Backend> {
    #[allow(unused_mut)]
    let mut all = vec![Backend::Sqlite];
    #[cfg(feature = "postgres")]
    match std::env::var("BATON_TEST_PG") {
        Ok(u) if !u.is_empty() => all.push(Backend::Postgres(u)),
        _ => eprintln!(
            "note: BATON_TEST_PG is not set: PostgreSQL is not measured (run `eval \"$(.ci/pg.sh start)\"` first)"
        ),
    }
    #[cfg(not(feature = "postgres"))]
    eprintln!("note: built without feature `postgres`: PostgreSQL is not measured");
    all
}

/// The benchmark thread of `n` runs.
fn thread(n: u32) -> baton::State {
    baton::state::parse_str(
        &bench_thread::state_yaml(n as usize),
        baton::state::Format::Yaml,
        "bench",
    )
    .expect("the bench thread parses")
}

fn items(o: u32) -> Vec<Item> {
    (0..10)
        .map(|i| Item::AssistantMessage {
            id: None,
            text: format!("Run {o}, step {i}: the handler changed and its test passes."),
        })
        .collect()
}

/// A prepared database: a thread of `n` runs, and (`started`) a run a dispatch to claude
/// started on it.
struct Prepared {
    /// SQLite: the file; PostgreSQL: the database's name.
    name: String,
    backend: Backend,
}

/// A fresh copy of a prepared database, removed when dropped (outside the timed part).
struct Copy {
    db: Option<Db>,
    gone: Gone,
}

/// How a copy is removed.
enum Gone {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database: (the server's URL, the database's name).
    #[cfg(feature = "postgres")]
    Database(String, String),
}

impl Copy {
    fn db(&mut self) -> &mut Db {
        self.db.as_mut().expect("an open copy")
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        drop(self.db.take());
        match &self.gone {
            Gone::File(path) => {
                for ext in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
                }
            }
            #[cfg(feature = "postgres")]
            Gone::Database(server, name) => pg::drop_database(server, name),
        }
    }
}

#[cfg(feature = "postgres")]
mod pg {
    //! Databases on the test server: made empty, made from a template, dropped.
    use baton::store::pg::postgres::{Client, NoTls};

    fn admin(server: &str) -> Client {
        Client::connect(server, NoTls).expect("the server answers")
    }

    /// `server`'s URL naming database `name` instead of its own.
    pub fn url(server: &str, name: &str) -> String {
        let (head, query) = server
            .split_once('?')
            .map_or((server, String::new()), |(h, q)| (h, format!("?{q}")));
        let (scheme, rest) = head.split_once("://").expect("a URL");
        let authority = rest.split('/').next().unwrap_or(rest);
        format!("{scheme}://{authority}/{name}{query}")
    }

    /// A new database `name` (a copy of `template` when given): its URL.
    pub fn create(server: &str, name: &str, template: Option<&str>) -> String {
        let mut a = admin(server);
        a.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drops a leftover");
        let from = template
            .map(|t| format!(" TEMPLATE {t}"))
            .unwrap_or_default();
        a.batch_execute(&format!("CREATE DATABASE {name}{from}"))
            .expect("creates");
        url(server, name)
    }

    pub fn drop_database(server: &str, name: &str) {
        let _ =
            admin(server).batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    }
}

struct Bench {
    dir: tempfile::TempDir,
    /// The default profile, documents under `dir/docs`.
    policy: baton::Engine,
    k: u64,
}

impl Bench {
    /// The SQLite file of [`Bench::prepare`] (made once for both backends).
    fn prepare_file(&mut self, n: u32, started: bool) -> PathBuf {
        let path = self.dir.path().join(format!("prepared-{n}-{started}.db"));
        if !path.exists() {
            let mut s = Db::Sqlite(Store::open(&path).expect("opens"));
            s.import(&thread(n)).expect("imports");
            if started {
                s.dispatch(&self.policy, &self.request("claude"))
                    .expect("dispatches");
            }
        }
        path
    }

    /// A database of `backend` holding the thread of `n` runs (`started`: with the run a
    /// dispatch to claude started). On PostgreSQL, the SQLite file copied in (`baton db copy`'s
    /// code), kept as a template for the copies.
    fn prepare(&mut self, backend: &Backend, n: u32, started: bool) -> Prepared {
        let file = self.prepare_file(n, started);
        match backend {
            Backend::Sqlite => Prepared {
                name: file.display().to_string(),
                backend: backend.clone(),
            },
            #[cfg(feature = "postgres")]
            Backend::Postgres(server) => {
                let name = format!("bb_prep_{}_{n}_{started}", std::process::id());
                let url = pg::create(server, &name, None);
                let from = Store::open_read_only(&file).expect("opens");
                baton::store::pg::PgStore::open(&url)
                    .expect("opens")
                    .copy_from_sqlite(&from)
                    .expect("copies");
                Prepared {
                    name,
                    backend: backend.clone(),
                }
            }
        }
    }

    fn copy(&mut self, p: &Prepared) -> Copy {
        self.k += 1;
        match &p.backend {
            Backend::Sqlite => {
                let to = self.dir.path().join(format!("copy-{}.db", self.k));
                std::fs::copy(&p.name, &to).expect("copies");
                Copy {
                    db: Some(Db::Sqlite(Store::open(&to).expect("opens copy"))),
                    gone: Gone::File(to),
                }
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(server) => {
                let name = format!("bb_copy_{}_{}", std::process::id(), self.k);
                let url = pg::create(server, &name, Some(&p.name));
                Copy {
                    db: Some(
                        Db::open_existing(&baton::store::DbUrl::parse(&url)).expect("opens copy"),
                    ),
                    gone: Gone::Database(server.clone(), name),
                }
            }
        }
    }

    fn request(&self, target: &str) -> DispatchRequest {
        DispatchRequest {
            thread: "th_bench".into(),
            target: target.into(),
            message: Some("Carry on.".into()),
            ..Default::default()
        }
    }

    /// A fresh database for a service: its `--db`.
    fn fresh_db(&mut self, backend: &Backend) -> String {
        self.k += 1;
        match backend {
            Backend::Sqlite => self
                .dir
                .path()
                .join(format!("serve-{}.db", self.k))
                .display()
                .to_string(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(server) => pg::create(
                server,
                &format!("bb_serve_{}_{}", std::process::id(), self.k),
                None,
            ),
        }
    }
}

fn lifecycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = baton::Engine::builder("default")
        .document_root(Some(dir.path().join("docs")))
        .build()
        .expect("the default profile checks");
    let mut b = Bench { dir, policy, k: 0 };
    let backends = backends();
    let mut g = c.benchmark_group("dispatch");
    g.sample_size(10);
    for backend in &backends {
        for n in SIZES {
            let p = b.prepare(backend, n, false);
            let req = b.request("codex");
            let policy = b.policy.clone();
            g.bench_with_input(BenchmarkId::new(backend.name(), n), &n, |bench, _| {
                bench.iter_batched(
                    || b.copy(&p),
                    |mut c| {
                        let d = c.db().dispatch(&policy, &req).expect("dispatches");
                        assert_eq!(
                            d.decision.covered_runs.as_ref().map(|c| c.to - c.from + 1),
                            Some(5)
                        );
                        c
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("complete_run");
    g.sample_size(10);
    for backend in &backends {
        for n in SIZES {
            let p = b.prepare(backend, n, true);
            g.bench_with_input(BenchmarkId::new(backend.name(), n), &n, |bench, _| {
                bench.iter_batched(
                    || b.copy(&p),
                    |mut c| {
                        c.db()
                            .complete_run("th_bench", n + 1, items(n + 1), RunStatus::Completed)
                            .expect("completes");
                        c
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("serve");
    g.sample_size(10);
    for backend in &backends {
        let db = b.fresh_db(backend);
        let server = Server::start(b.dir.path(), &db, b.k);
        let max = CLIENTS.iter().copied().max().unwrap_or(1);
        let mut clients: Vec<Conn> = (0..max).map(|i| Conn::new(&server, i)).collect();
        for n in CLIENTS {
            g.bench_with_input(BenchmarkId::new(backend.name(), n), &n, |bench, _| {
                bench.iter_custom(|iters| spread(&mut clients[..n], iters))
            });
        }
        drop(clients);
        server.stop();
    }
    g.finish();
    ratios(&backends);
}

/// A release `baton serve --socket` on a database.
struct Server {
    child: Child,
    socket: PathBuf,
}

impl Server {
    fn start(dir: &Path, db: &str, k: u64) -> Server {
        let socket = dir.join(format!("serve-{k}.sock"));
        let child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .current_dir(serve_support::ROOT)
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(["--db", db, "--no-watch", "--no-gc"])
            .env("BATON_HANDOFF_DIR", dir.join("serve-docs"))
            .env_remove("BATON_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("baton serve starts");
        Server { child, socket }
    }

    fn stop(mut self) {
        let mut c = serve_support::Client::connect(&self.socket, false);
        c.result("shutdown", json!({}));
        c.notify("exit", json!({}));
        let status = self.child.wait().expect("the server exits");
        assert!(status.success(), "baton serve: {status}");
    }
}

/// One client of the service: its connection and its own thread.
struct Conn {
    client: serve_support::Client,
    thread: String,
    turn: u64,
}

impl Conn {
    fn new(server: &Server, i: usize) -> Conn {
        let client = serve_support::Client::connect(&server.socket, false);
        let mut c = Conn {
            client,
            thread: format!("bench_c{i}"),
            turn: 0,
        };
        c.reset();
        c
    }

    /// The client's thread as imported (`examples/seed-switch.yaml`, 8 runs), replacing what
    /// earlier pairs added: every sample starts from the same thread, so that a backend whose
    /// cost grows with the thread is not measured on ever longer ones.
    fn reset(&mut self) {
        let mut st = serve_support::example_state("seed-switch.yaml");
        st["thread"]["id"] = json!(self.thread);
        self.client
            .result("thread/import", json!({"state": st, "replace": true}));
    }

    /// One dispatch (codex and claude in turn) and the completion of its run.
    fn pair(&mut self) {
        self.turn += 1;
        let target = if self.turn.is_multiple_of(2) {
            "claude"
        } else {
            "codex"
        };
        let d: Value = self.client.result(
            "dispatch",
            json!({"thread": self.thread, "target": target, "trace": false}),
        );
        let run = d["recorded"]["run"].as_u64().expect("a run");
        self.client.result(
            "completeRun",
            json!({"thread": self.thread, "run": run, "items": [
                {"kind": "assistant_message", "text": format!("Run {run} done.")}
            ]}),
        );
    }
}

/// `iters` dispatch + complete pairs spread over the clients, each on its own OS thread, each
/// from its thread as imported (reset before the clock starts).
fn spread(clients: &mut [Conn], iters: u64) -> Duration {
    for c in clients.iter_mut() {
        c.reset();
    }
    let n = clients.len() as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for (i, c) in clients.iter_mut().enumerate() {
            let share = iters / n + u64::from((i as u64) < iters % n);
            s.spawn(move || {
                for _ in 0..share {
                    c.pair();
                }
            });
        }
    });
    start.elapsed()
}

/// This run's ratios, from criterion's estimates (medians): each backend's 10,000-run figure
/// against its 100-run one, and PostgreSQL against SQLite.
fn ratios(backends: &[Backend]) {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let median = |group: &str, backend: &str, param: &str| -> Option<f64> {
        let path = format!("{target}/criterion/{group}/{backend}/{param}/new/estimates.json");
        let text = std::fs::read_to_string(path).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        v.get("median")?.get("point_estimate")?.as_f64()
    };
    let ms = |t: f64| t / 1e6;
    for group in ["dispatch", "complete_run"] {
        for b in backends {
            if let (Some(small), Some(big)) = (
                median(group, b.name(), "100"),
                median(group, b.name(), "10000"),
            ) {
                println!(
                    "ratio {group} {}: 100 runs {:.3} ms, 10,000 runs {:.3} ms, {:.2}x",
                    b.name(),
                    ms(small),
                    ms(big),
                    big / small
                );
            }
        }
    }
    let params: Vec<String> = SIZES
        .iter()
        .map(u32::to_string)
        .chain(CLIENTS.iter().map(usize::to_string))
        .collect();
    for group in ["dispatch", "complete_run", "serve"] {
        for p in &params {
            if let (Some(s), Some(pg)) = (median(group, "sqlite", p), median(group, "postgres", p))
            {
                println!(
                    "ratio {group}/{p} postgres / sqlite: {:.3} ms / {:.3} ms = {:.2}x",
                    ms(pg),
                    ms(s),
                    pg / s
                );
            }
        }
    }
    for b in backends {
        let one = median("serve", b.name(), "1");
        for n in CLIENTS.iter().skip(1) {
            if let (Some(one), Some(many)) = (one, median("serve", b.name(), &n.to_string())) {
                println!(
                    "ratio serve {}: {n} clients {:.0} pairs/s, {:.2}x one client's",
                    b.name(),
                    1e9 / many,
                    one / many
                );
            }
        }
    }
}

criterion_group!(backends_bench, lifecycle);
criterion_main!(backends_bench);
