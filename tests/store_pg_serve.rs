//! `baton serve --db postgres://...` against a real server (feature `postgres`; `.ci/pg.sh
//! start` gives `BATON_TEST_PG`): four servers on one database under concurrent clients
//! (`tests/multi_serve/mod.rs`), and the pool of connections each server keeps.

use crate::{multi_serve, serve_support};

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
/// (`baton db copy`) exports every thread the same, and `baton replay` of both replays every
/// logged decision with no difference.
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
    // Every logged decision replays to itself, on PostgreSQL and from the copy.
    outcome.check_replay(&db);
    outcome.check_replay(&file);
}

/// `baton serve` on stdio against `db` with `args`; its client.
fn stdio_on(dir: &std::path::Path, db: &str, args: &[&str]) -> serve_support::Stdio_ {
    let mut cmd = serve_support::serve_cmd(dir, &[&["--stdio", "--db", db], args].concat());
    cmd.env_remove("BATON_DB");
    serve_support::spawn_stdio(cmd, false)
}

/// A request that finds every pooled connection busy waits `--db-pool-timeout` for one, then
/// is answered with an error saying what to do, and nothing of it is done; the service goes on
/// serving when a connection is free again.
#[test]
fn an_exhausted_pool_is_reported_with_what_to_do() {
    use serde_json::json;
    let db = fresh_db();
    let dir = tempfile::tempdir().expect("tempdir");
    let gated = serve_support::GatedPolicy::new(dir.path());
    let mut s = stdio_on(
        dir.path(),
        &db,
        &[
            "--policy",
            gated.policy.to_str().expect("a UTF-8 path"),
            "--no-watch",
            "--db-pool",
            "1",
            "--db-pool-timeout",
            "200ms",
        ],
    );
    for id in ["A", "B"] {
        let mut st = serve_support::example_state("seed-switch.yaml");
        st["thread"]["id"] = json!(id);
        s.client.result("thread/import", json!({"state": st}));
    }
    // A's dispatch holds the one connection while its summarizer waits to be let go.
    let slow = s
        .client
        .start("dispatch", json!({"thread": "A", "target": "codex"}));
    gated.wait_started();
    let refused = s
        .client
        .call("completeRun", json!({"thread": "B", "run": 8, "items": []}));
    let shown = DbUrl::parse(&db).redacted();
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        format!("{shown}: error: every connection of this service's PostgreSQL pool (--db-pool 1) stayed busy for 200 ms: the pool is exhausted; nothing of the request was done; send it again, or start the service with a larger --db-pool (within the server's max_connections) or a longer --db-pool-timeout"),
    );
    assert_eq!(
        refused["error"]["data"]["code"],
        "baton::store::pg::pool_exhausted"
    );
    gated.release();
    let dispatched = s.client.response_to(slow);
    assert_eq!(dispatched["result"]["recorded"]["run"], 9, "{dispatched}");
    // Nothing of the refused request was done: B is as imported, and answers again.
    let b = s.client.result("thread/export", json!({"thread": "B"}));
    assert_eq!(b["state"]["runs"].as_array().map(Vec::len), Some(8));
    assert_eq!(b["state"]["runs"][7]["status"], "completed");
    assert_eq!(s.stop(), 0);
}

/// A server that cannot be reached, or a database of a newer schema, stops the service at
/// start with the store's message (the URL's password hidden), before it serves anyone.
#[test]
fn a_database_the_service_cannot_use_stops_it_at_start() {
    use baton::store::pg::postgres::{Client, NoTls};
    let dir = tempfile::tempdir().expect("tempdir");
    let nowhere = format!(
        "postgres://baton:hunter2@{}/baton",
        dir.path()
            .join("no-server")
            .display()
            .to_string()
            .replace('/', "%2F")
    );
    let out = serve_support::serve_cmd(dir.path(), &["--stdio", "--db", &nowhere])
        .env_remove("BATON_DB")
        .output()
        .expect("baton serve runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let shown = DbUrl::parse(&nowhere).redacted();
    assert!(
        err.starts_with(&format!(
            "{shown}: error: cannot connect to the PostgreSQL server: "
        )),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    let db = fresh_db();
    let (ok, _, err) = baton(&["db", "init", "--db", &db]);
    assert!(ok, "{err}");
    Client::connect(&db, NoTls)
        .expect("connects")
        .batch_execute("UPDATE baton_schema SET version = 99")
        .expect("updates");
    let out = serve_support::serve_cmd(dir.path(), &["--stdio", "--db", &db])
        .env_remove("BATON_DB")
        .output()
        .expect("baton serve runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "{}: error: database schema version 99 is newer than this baton supports ({}); upgrade baton",
            DbUrl::parse(&db).redacted(),
            baton::store::SCHEMA_VERSION
        )
    );
}
