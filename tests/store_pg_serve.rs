//! `baton serve --db postgres://...` against a real server (feature `postgres`; `.ci/pg.sh
//! start` gives `BATON_TEST_PG`): four servers on one database under concurrent clients
//! (`tests/multi_serve/mod.rs`), and the pool of connections each server keeps.

mod multi_serve;
mod serve_support;

use baton::store::{Db, DbUrl, Store};
use multi_serve::{baton, Load};
use std::sync::atomic::{AtomicU32, Ordering};

/// The server's URL, from `BATON_TEST_PG`; a loud failure without it.
fn server_url() -> String {
    match std::env::var("BATON_TEST_PG") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "BATON_TEST_PG is not set: the postgres tests need a real server; run `eval \"$(.ci/pg.sh start)\"` first"
        ),
    }
}

/// A fresh, empty database on the test server: its URL.
fn fresh_db() -> String {
    use baton::store::pg::postgres::{Client, NoTls};
    static N: AtomicU32 = AtomicU32::new(0);
    let base = server_url();
    let name = format!(
        "baton_s{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut admin = Client::connect(&base, NoTls).expect("the test server answers");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .expect("drops a leftover database");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("creates a database");
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (base.as_str(), String::new()),
    };
    let (scheme, rest) = head.split_once("://").expect("a URL");
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}/{name}{query}")
}

/// Issue 31's multi-process test: 4 `baton serve` processes on one PostgreSQL database, 2,000
/// concurrent `dispatch` and `completeRun` calls over 50 threads; then no run started twice or
/// lost, every one-shot pre-grant allowed once, the database copied to a SQLite file
/// (`baton db copy`) exports every thread the same, and `baton replay` of the copy replays
/// every logged decision with no difference.
#[test]
fn four_servers_on_one_postgres_database_keep_every_run_once() {
    let db = fresh_db();
    let dir = tempfile::tempdir().expect("tempdir");
    let load = Load {
        servers: 4,
        threads: 50,
        clients: 20,
        calls: 2_000,
    };
    let started = std::time::Instant::now();
    let (outcome, served) = multi_serve::run(dir.path(), &db, &load);
    assert!(outcome.refused > 0, "{outcome:?}");
    assert!(!outcome.grants.is_empty(), "{outcome:?}");
    eprintln!(
        "{} dispatched, {} refused, {} completed, {} pre-grants raced; load and checks {:.1} s",
        outcome.dispatched.len(),
        outcome.refused,
        outcome.completed.len(),
        outcome.grants.len(),
        started.elapsed().as_secs_f64()
    );
    // SQLite and PostgreSQL hold the same threads: the database copied to a SQLite file
    // exports each thread as PostgreSQL does, and as the servers exported it.
    let file = dir.path().join("copy.db").display().to_string();
    let (ok, _, err) = baton(&[
        "db",
        "copy",
        "--from",
        &db,
        "--to",
        &format!("sqlite:{file}"),
    ]);
    assert!(ok, "baton db copy: {err}");
    let pg = Db::open_existing(&DbUrl::parse(&db)).expect("opens PostgreSQL");
    let sqlite = Store::open_read_only(std::path::Path::new(&file)).expect("opens the copy");
    for (t, exported) in &served {
        let on_sqlite = sqlite.export(t).expect("exports from SQLite");
        assert_eq!(
            pg.export(t).expect("exports from PostgreSQL"),
            on_sqlite,
            "thread {t}"
        );
        assert_eq!(
            &serde_json::to_value(&on_sqlite).expect("JSON"),
            exported,
            "thread {t} as served"
        );
    }
    assert_eq!(sqlite.threads().expect("threads").len(), load.threads);
    // Every logged decision replays to itself, from the copy.
    outcome.check_replay(&file);
}
