//! The store's backends side by side (feature `postgres`): the concurrency primitives a
//! dispatch and a pre-grant use, with 1, 4 and 16 concurrent clients, on SQLite (one file,
//! WAL) and on PostgreSQL (a local server on a Unix socket), and a thread's import and
//! export on both. Each client has its own connection and its own thread, so the figures show
//! what a backend's locking costs when the writers do not conflict.
//!
//! - `write_tx/{backend}/{clients}`: a dispatch-shaped write transaction: take the thread's
//!   lock (SQLite: `BEGIN IMMEDIATE`, the database's one write lock; PostgreSQL: the thread's
//!   advisory lock), read the next ordinal, insert the run (the tally triggers run), commit.
//!   Time per transaction, all clients together (throughput = 1 / time).
//! - `grant_consume/{backend}/{clients}`: one pre-grant use (`GrantStore::consume`), one
//!   conditional update each.
//! - `import_export/{backend}`: `examples/seed-switch.yaml` imported under a fresh id, then
//!   exported.
//!
//! Run with (a server from `.ci/pg.sh start`):
//!   eval "$(.ci/pg.sh start)"
//!   cargo bench --features postgres --bench store_pg -- --warm-up-time 1 --measurement-time 3
use baton::deliver::{Grant, GrantStore};
use baton::store::pg::postgres::{Client, NoTls};
use baton::store::pg::PgStore;
use baton::store::Store;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CLIENTS: [usize; 3] = [1, 4, 16];

fn server_url() -> String {
    std::env::var("BATON_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            panic!("BATON_TEST_PG is not set: run `eval \"$(.ci/pg.sh start)\"` first")
        })
}

fn fresh_pg(name: &str) -> String {
    let base = server_url();
    let mut admin = Client::connect(&base, NoTls).expect("the server answers");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .expect("drops");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("creates");
    let (head, query) = base
        .split_once('?')
        .map_or((base.as_str(), String::new()), |(h, q)| {
            (h, format!("?{q}"))
        });
    let (scheme, rest) = head.split_once("://").expect("a URL");
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}/{name}{query}")
}

/// `iters` operations spread over the clients, each on its own OS thread.
fn spread<C: Send>(
    clients: &mut [C],
    iters: u64,
    op: impl Fn(&mut C, usize, u64) + Sync,
) -> Duration {
    let n = clients.len() as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for (i, c) in clients.iter_mut().enumerate() {
            let op = &op;
            let share = iters / n + u64::from((i as u64) < iters % n);
            s.spawn(move || {
                for k in 0..share {
                    op(c, i, k);
                }
            });
        }
    });
    start.elapsed()
}

static ORDINAL: AtomicU64 = AtomicU64::new(1_000_000);

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite_path = dir.path().join("bench.db");
    let pg_url = fresh_pg(&format!("baton_bench_{}", std::process::id()));
    let clients_max = CLIENTS.iter().copied().max().unwrap_or(1);
    // One thread per client on each backend.
    let seed = Store::open(&sqlite_path).expect("opens");
    drop(seed);
    for i in 0..clients_max {
        let state = thread_state(&format!("bench_{i}"));
        Store::open(&sqlite_path)
            .expect("opens")
            .import(&state)
            .expect("imports");
        PgStore::open(&pg_url)
            .expect("opens")
            .import(&state)
            .expect("imports");
    }
    let mut g = c.benchmark_group("write_tx");
    for &n in &CLIENTS {
        let mut stores: Vec<Store> = (0..n)
            .map(|_| Store::open(&sqlite_path).expect("opens"))
            .collect();
        g.bench_with_input(BenchmarkId::new("sqlite", n), &n, |b, _| {
            b.iter_custom(|iters| {
                spread(&mut stores, iters, |s, i, _| {
                    let o = ORDINAL.fetch_add(1, Ordering::SeqCst) as i64;
                    let conn = s.connection();
                    conn.execute_batch("BEGIN IMMEDIATE").expect("locks");
                    let _next: i64 = conn
                        .query_row("SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE thread = ?1", [format!("bench_{i}")], |r| r.get(0))
                        .expect("reads");
                    conn.execute(
                        "INSERT INTO runs (thread, ordinal, provider, status) VALUES (?1, ?2, 'codex', 'completed')",
                        rusqlite::params![format!("bench_{i}"), o],
                    )
                    .expect("inserts");
                    conn.execute_batch("COMMIT").expect("commits");
                })
            })
        });
        let mut stores: Vec<PgStore> = (0..n)
            .map(|_| PgStore::open(&pg_url).expect("opens"))
            .collect();
        g.bench_with_input(BenchmarkId::new("postgres", n), &n, |b, _| {
            b.iter_custom(|iters| {
                spread(&mut stores, iters, |s, i, _| {
                    let o = ORDINAL.fetch_add(1, Ordering::SeqCst) as i64;
                    let thread = format!("bench_{i}");
                    s.with_thread(&thread, "benchmarking", |tx| {
                        let _next: i64 = tx
                            .query_one("SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE thread = $1", &[&thread])?
                            .get(0);
                        tx.execute(
                            "INSERT INTO runs (thread, ordinal, provider, status) VALUES ($1, $2, 'codex', 'completed')",
                            &[&thread, &o],
                        )
                    })
                    .expect("writes");
                })
            })
        });
    }
    g.finish();

    let grant = |i: usize| Grant {
        thread: format!("bench_{i}"),
        run: 1,
        tool: "Read".into(),
        path: PathBuf::from(format!("/tmp/bench_{i}.md")),
        uses_left: u32::MAX,
        handoff: "H1".into(),
    };
    {
        let mut s = Store::open(&sqlite_path).expect("opens");
        let mut p = PgStore::open(&pg_url).expect("opens");
        for i in 0..clients_max {
            s.insert(grant(i)).expect("inserts");
            p.insert(grant(i)).expect("inserts");
        }
    }
    let mut g = c.benchmark_group("grant_consume");
    for &n in &CLIENTS {
        let mut stores: Vec<Store> = (0..n)
            .map(|_| Store::open(&sqlite_path).expect("opens"))
            .collect();
        g.bench_with_input(BenchmarkId::new("sqlite", n), &n, |b, _| {
            b.iter_custom(|iters| {
                spread(&mut stores, iters, |s, i, _| {
                    let g = grant(i);
                    assert!(s.consume(&g.thread, 1, &g.path).expect("consumes"));
                })
            })
        });
        let mut stores: Vec<PgStore> = (0..n)
            .map(|_| PgStore::open(&pg_url).expect("opens"))
            .collect();
        g.bench_with_input(BenchmarkId::new("postgres", n), &n, |b, _| {
            b.iter_custom(|iters| {
                spread(&mut stores, iters, |s, i, _| {
                    let g = grant(i);
                    assert!(s.consume(&g.thread, 1, &g.path).expect("consumes"));
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("import_export");
    let n = AtomicU64::new(0);
    let mut sqlite = Store::open(&sqlite_path).expect("opens");
    g.bench_function("sqlite", |b| {
        b.iter(|| {
            let id = format!("ie_{}", n.fetch_add(1, Ordering::SeqCst));
            sqlite.import(&thread_state(&id)).expect("imports");
            sqlite.export(&id).expect("exports")
        })
    });
    let pg = PgStore::open(&pg_url).expect("opens");
    g.bench_function("postgres", |b| {
        b.iter(|| {
            let id = format!("ie_{}", n.fetch_add(1, Ordering::SeqCst));
            pg.import(&thread_state(&id)).expect("imports");
            pg.export(&id).expect("exports")
        })
    });
    g.finish();
}

/// `examples/seed-switch.yaml` under another thread id.
fn thread_state(id: &str) -> baton::State {
    let mut s =
        baton::state::load_file(std::path::Path::new("examples/seed-switch.yaml")).expect("loads");
    s.thread.id = id.to_string();
    s
}

/// A thread of `n` completed runs alternating between codex and claude every five runs, one
/// user message each.
fn long_thread(id: &str, n: u32) -> baton::State {
    let mut yaml = format!(
        "version: 1\nthread: {{id: {id}, title: Long}}\nprovider_threads:\n  - {{id: C1, provider: codex, status: active}}\n  - {{id: L1, provider: claude, status: active}}\nruns:\n"
    );
    for i in 1..=n {
        let (p, pt) = if (i - 1) / 5 % 2 == 0 {
            ("codex", "C1")
        } else {
            ("claude", "L1")
        };
        yaml += &format!(
            "  - ordinal: {i}\n    provider: {p}\n    provider_thread: {pt}\n    items:\n      - {{kind: user_message, text: \"message {i}\"}}\n"
        );
    }
    yaml += "request: {provider: codex}\n";
    baton::state::parse_str(&yaml, baton::state::Format::Yaml, "long.yaml").expect("parses")
}

/// `turn/{backend}/{runs}`: one dispatch (to the other provider than the last one) and the
/// `complete_run` of its run, through `store::Db`, on a thread of 100 and of 10,000 runs.
/// On PostgreSQL each is a staged unit of work (docs/store.md#postgresql), which copies the
/// thread's rows in: its cost follows the thread.
fn turns(c: &mut Criterion) {
    use baton::state::{Item, RunStatus};
    use baton::store::{Db, DbUrl, DispatchRequest};
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite_path = dir.path().join("turns.db");
    let docs = dir.path().join("docs");
    let sizes = [100u32, 10_000];
    {
        let mut s = Store::open(&sqlite_path).expect("opens");
        for n in sizes {
            s.import(&long_thread(&format!("long_{n}"), n))
                .expect("imports");
        }
    }
    let pg_url = fresh_pg(&format!("baton_turns_{}", std::process::id()));
    PgStore::open(&pg_url)
        .expect("opens")
        .copy_from_sqlite(&Store::open(&sqlite_path).expect("opens"))
        .expect("copies");
    let policy = baton::policy::load("default").expect("default");
    let mut g = c.benchmark_group("turn");
    g.sample_size(10);
    for (backend, url) in [
        ("sqlite", sqlite_path.display().to_string()),
        ("postgres", pg_url.clone()),
    ] {
        let mut db = Db::open(&DbUrl::parse(&url), Duration::from_secs(5)).expect("opens");
        for n in sizes {
            let thread = format!("long_{n}");
            let mut k = 0u64;
            g.bench_with_input(BenchmarkId::new(backend, n), &n, |b, _| {
                b.iter(|| {
                    k += 1;
                    let req = DispatchRequest {
                        thread: thread.clone(),
                        target: if k.is_multiple_of(2) {
                            "codex"
                        } else {
                            "claude"
                        }
                        .into(),
                        handoff_dir: Some(docs.clone()),
                        ..Default::default()
                    };
                    let d = db.dispatch(&policy, &req).expect("dispatches");
                    let items = vec![Item::AssistantMessage {
                        id: None,
                        text: format!("turn {k}"),
                    }];
                    db.complete_run(&thread, d.run, items, RunStatus::Completed)
                        .expect("completes");
                })
            });
        }
    }
    g.finish();
}

criterion_group!(store_pg, benches, turns);
criterion_main!(store_pg);
