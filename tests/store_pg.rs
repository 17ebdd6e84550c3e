//! The store's PostgreSQL backend against a real server (feature `postgres`; `.ci/pg.sh start`
//! starts one and prints `BATON_TEST_PG`). Never a mock: with the feature on and no
//! `BATON_TEST_PG`, every PostgreSQL case fails, naming the variable. Without the feature, a
//! `postgres://` URL is refused, saying how to build baton with it.

#[cfg(not(feature = "postgres"))]
#[test]
fn without_the_feature_a_postgres_url_says_how_to_build_baton() {
    for args in [
        &[
            "db",
            "init",
            "--db",
            "postgres://baton:hunter2@db.internal/baton",
        ][..],
        &[
            "db",
            "export",
            "--db",
            "postgres://baton:hunter2@db.internal/baton",
            "--thread",
            "t",
        ],
        &[
            "dispatch",
            "--db",
            "postgres://baton:hunter2@db.internal/baton",
            "--thread",
            "t",
            "--target",
            "codex",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .env_remove("BATON_DB")
            .output()
            .expect("baton runs");
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            "postgres://baton:***@db.internal/baton: error: this baton was built without PostgreSQL support; build it with `--features postgres` (docs/store.md#postgresql), or give a SQLite file with --db",
            "{args:?}"
        );
    }
}

// The helpers the PostgreSQL tests share with the other targets, compiled once here. (The
// service's PostgreSQL tests are in the `serve` target: tests/serve_database.rs.)
mod common;

#[cfg(feature = "postgres")]
mod store_pg_lifecycle;

#[cfg(feature = "postgres")]
mod store_pg_window;

#[cfg(feature = "postgres")]
mod store_pg_summarizer;

#[cfg(feature = "postgres")]
mod postgres_backend {

    // The grant store's own interface is internal: these tests need `--features unstable`
    // (.ci/run passes it).
    #[cfg(feature = "unstable")]
    use baton::deliver::{Grant, GrantStore};
    use baton::store::pg::postgres::{Client, NoTls};
    use baton::store::pg::{PgError, PgStore, MAX_TRIES};
    use baton::store::{DbUrl, SCHEMA_VERSION};
    use rstest::rstest;
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{mpsc, Arc};

    pub(crate) use crate::common::backend::fresh_pg_db as fresh_db;
    pub(crate) use crate::common::backend::Backend;

    fn baton(args: &[&str]) -> (bool, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
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

    /// A new database of `backend`: a file in a temporary directory (kept alive by the returned
    /// guard) or a fresh PostgreSQL database.
    fn new_db(backend: Backend) -> (String, Option<tempfile::TempDir>) {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let path = dir.path().join("baton.db");
                (path.display().to_string(), Some(dir))
            }
            Backend::Postgres => (fresh_db(), None),
        }
    }

    #[rstest_reuse::apply(crate::common::backend::backends)]
    fn db_init_creates_and_db_migrate_keeps_the_current_schema(#[case] backend: Backend) {
        let (db, _dir) = new_db(backend);
        for command in ["init", "migrate", "init"] {
            let (ok, out, err) = baton(&["db", command, "--db", &db, "--json"]);
            assert!(ok, "baton db {command}: {err}");
            let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
            assert_eq!(v["schema_version"], SCHEMA_VERSION, "{out}");
        }
    }

    #[test]
    fn concurrent_opens_migrate_a_new_database_once() {
        let url = fresh_db();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                std::thread::spawn(move || PgStore::open(&url).map(|s| s.schema_version()))
            })
            .collect();
        for h in handles {
            let v = h.join().expect("joins").expect("opens").expect("version");
            assert_eq!(v, SCHEMA_VERSION);
        }
    }

    #[test]
    fn a_newer_schema_is_refused_with_what_to_do() {
        let url = fresh_db();
        PgStore::open(&url).expect("opens");
        let mut c = Client::connect(&url, NoTls).expect("connects");
        c.execute("UPDATE baton_schema SET version = 99", &[])
            .expect("sets");
        let shown = DbUrl::parse(&url).redacted();
        let expected = format!(
        "{shown}: error: database schema version 99 is newer than this baton supports ({SCHEMA_VERSION}); upgrade baton"
    );
        let e = PgStore::open(&url).expect_err("refused");
        assert!(matches!(e, PgError::TooNew { found: 99, .. }), "{e:?}");
        // The message is the library's `Display`; the URL is its location, as data.
        assert_eq!(
            e.to_string(),
            format!("database schema version 99 is newer than this baton supports ({SCHEMA_VERSION}); upgrade baton")
        );
        assert_eq!(
            baton::Located::location(&e).as_deref(),
            Some(shown.as_str())
        );
        assert_eq!(baton::located(&e), expected);
        let (ok, _, err) = baton(&["db", "migrate", "--db", &url]);
        assert!(!ok);
        assert_eq!(err.trim_end(), expected);
    }

    #[test]
    fn an_unmigrated_database_is_refused_by_a_plain_open() {
        let url = fresh_db();
        let e = PgStore::open_existing(&url).expect_err("refused");
        let shown = DbUrl::parse(&url).redacted();
        // The library says the fact; the command adds the command that migrates it.
        assert_eq!(
            baton::located(&e),
            format!("{shown}: error: database schema version 0 is older than this baton's ({SCHEMA_VERSION})")
        );
        let (ok, _, err) = baton(&["db", "export", "--db", &url, "--thread", "t"]);
        assert!(!ok);
        assert_eq!(
        err.trim_end(),
        format!("{shown}: error: database schema version 0 is older than this baton's ({SCHEMA_VERSION}); run `baton db migrate --db {shown}` to migrate it")
    );
    }

    #[test]
    fn an_unreachable_server_is_named_without_its_password() {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = dir.path().display().to_string().replace('/', "%2F");
        let url = format!("postgres://baton:hunter2@{host}/baton");
        let e = PgStore::open(&url).expect_err("nothing listens there");
        let msg = baton::located(&e);
        assert!(matches!(e, PgError::Unreachable { .. }), "{e:?}");
        assert!(
            msg.starts_with(&format!(
            "postgres://baton:***@{host}/baton: error: cannot connect to the PostgreSQL server: "
        )),
            "{msg}"
        );
        assert!(msg.ends_with("; check that the server is running and that the URL's host, port, user, password and database are right"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
        let (ok, _, err) = baton(&["db", "init", "--db", &url]);
        assert!(!ok);
        assert!(
            err.contains("cannot connect to the PostgreSQL server"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn the_service_runs_on_postgres_and_names_a_server_it_cannot_reach() {
        // Every command runs on PostgreSQL now, `baton serve` too (issue 31): given a server it
        // cannot reach, it says so at start, the password hidden, and serves no one.
        let dir = tempfile::tempdir().expect("tempdir");
        let host = dir.path().display().to_string().replace('/', "%2F");
        let url = format!("postgres://baton:hunter2@{host}/baton");
        let (ok, _, err) = baton(&["serve", "--stdio", "--db", &url]);
        assert!(!ok);
        assert!(
            err.starts_with(&format!(
                "postgres://baton:***@{host}/baton: error: cannot connect to the PostgreSQL server: "
            )),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }

    /// The lifecycle commands on a `postgres://` database: the same output as on SQLite.
    #[rstest]
    #[case::sqlite(Backend::Sqlite)]
    #[case::postgres(Backend::Postgres)]
    fn the_lifecycle_commands_run_on_either_backend(#[case] backend: Backend) {
        let (db, _dir) = new_db(backend);
        let shown = DbUrl::parse(&db).redacted();
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let seed = root.join("examples/seed-switch.yaml");
        let docs = tempfile::tempdir().expect("tempdir");
        let docs = docs.path().display().to_string();
        let (ok, _, err) = baton(&["db", "import", "--db", &db, &seed.display().to_string()]);
        assert!(ok, "{err}");
        let dispatch = |target: &str| {
            baton(&[
                "dispatch",
                "--db",
                &db,
                "--thread",
                "th_1",
                "--target",
                target,
                "--handoff-dir",
                &docs,
                "--json",
                "--no-trace",
            ])
        };
        let (ok, out, err) = dispatch("claude");
        assert!(ok, "{err}");
        let d: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(d["run"], 9, "{out}");
        let (ok, _, err) = dispatch("codex");
        assert!(!ok);
        assert_eq!(
            err.trim_end(),
            format!("{shown}: error: run 9 of thread \"th_1\" is still running; complete it before dispatching again: `baton complete --db {} --thread th_1 --run 9 --items ITEMS_FILE`", baton::store::hint::sh(&shown))
        );
        let items = tempfile::NamedTempFile::new().expect("a file");
        std::fs::write(items.path(), "- kind: assistant_message\n  text: Done.\n").expect("writes");
        let (ok, out, err) = baton(&[
            "complete",
            "--db",
            &db,
            "--thread",
            "th_1",
            "--run",
            "9",
            "--status",
            "completed",
            "--items",
            &items.path().display().to_string(),
        ]);
        assert!(ok, "{err}");
        assert!(
            out.starts_with("run 9 of th_1: completed (1 item)"),
            "{out}"
        );
        let (ok, out, err) = baton(&["fork", "--db", &db, "--thread", "th_1", "--at", "9"]);
        assert!(ok, "{err}");
        assert!(out.contains("as th_1-fork1"), "{out}");
        let (ok, out, err) = baton(&["rollback", "--db", &db, "--thread", "th_1", "--to", "8"]);
        assert!(ok, "{err}");
        assert!(out.starts_with("rolled th_1 back to run 8"), "{out}");
        let (ok, out, err) = baton(&["replay", "--db", &db, "--json"]);
        assert!(ok, "{err}");
        let r: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(r["checked"], 1, "{out}");
        assert_eq!(r["differences"], serde_json::json!([]), "{out}");
        let (ok, out, err) = baton(&[
            "explain", "--db", &db, "--thread", "th_1", "--target", "codex",
        ]);
        assert!(ok, "{err}");
        assert!(!out.is_empty());
        let (ok, _, err) = baton(&["gc", "--db", &db, "--handoff-dir", &docs, "--dry-run"]);
        assert!(ok, "{err}");
    }

    /// Insert thread `t` so that runs can reference it.
    fn thread_row(store: &PgStore, t: &str) {
        store
            .with_thread(t, "creating a thread", |tx| {
                tx.execute(
                    "INSERT INTO threads (id, version, request) VALUES ($1, 1, '{}')",
                    &[&t],
                )
            })
            .expect("inserts");
    }

    #[test]
    fn writers_of_one_thread_serialize_and_each_sees_the_others_run() {
        let url = fresh_db();
        thread_row(&PgStore::open(&url).expect("opens"), "t");
        let handles: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let store = PgStore::open(&url).expect("opens");
                for _ in 0..25 {
                    // The next ordinal is read, then written: without the lock two writers
                    // would read the same one (and one would fail on the primary key).
                    store
                        .with_thread("t", "dispatching", |tx| {
                            let next: i64 = tx
                                .query_one(
                                    "SELECT COALESCE(MAX(ordinal), 0) + 1 FROM runs WHERE thread = 't'",
                                    &[],
                                )?
                                .get(0);
                            tx.execute(
                                "INSERT INTO runs (thread, ordinal, provider, status)
                                 VALUES ('t', $1, 'codex', 'running')",
                                &[&next],
                            )
                        })
                        .expect("dispatches");
                }
            })
        })
        .collect();
        for h in handles {
            h.join().expect("joins");
        }
        let mut c = Client::connect(&url, NoTls).expect("connects");
        let row = c
            .query_one(
                "SELECT COUNT(*), COUNT(DISTINCT ordinal), MIN(ordinal), MAX(ordinal) FROM runs",
                &[],
            )
            .expect("counts");
        let got: (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        assert_eq!(got, (200, 200, 1, 200));
        let tally = c
            .query_one(
                "SELECT runs, first, last FROM run_tally WHERE thread = 't'",
                &[],
            )
            .expect("tally");
        assert_eq!(
            (
                tally.get::<_, i64>(0),
                tally.get::<_, i64>(1),
                tally.get::<_, i64>(2)
            ),
            (200, 1, 200)
        );
    }

    #[test]
    fn a_writer_of_another_thread_does_not_wait() {
        let url = fresh_db();
        let setup = PgStore::open(&url).expect("opens");
        thread_row(&setup, "a");
        thread_row(&setup, "b");
        let (locked_tx, locked_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let url = url.clone();
            std::thread::spawn(move || {
                let store = PgStore::open(&url).expect("opens");
                store
                    .with_thread("a", "holding thread a", |_tx| {
                        locked_tx.send(()).expect("signals");
                        release_rx.recv().expect("released");
                        Ok(())
                    })
                    .expect("holds");
            })
        };
        locked_rx.recv().expect("thread a is locked");
        // While thread a's lock is held, a writer of thread b commits (it would block forever
        // here if it waited for a's lock: the holder is released only after).
        let other = PgStore::open(&url).expect("opens");
        other
        .with_thread("b", "dispatching on b", |tx| {
            tx.execute(
                "INSERT INTO runs (thread, ordinal, provider, status) VALUES ('b', 1, 'codex', 'running')",
                &[],
            )
        })
        .expect("b is not blocked by a");
        // And a's lock is really held: trying it without waiting fails.
        let mut probe = Client::connect(&url, NoTls).expect("connects");
        let got: bool = probe
            .query_one(
                "SELECT pg_try_advisory_xact_lock(hashtextextended('a', 0))",
                &[],
            )
            .expect("tries")
            .get(0);
        assert!(!got, "thread a's lock is held by its writer");
        release_tx.send(()).expect("releases");
        holder.join().expect("joins");
    }

    #[cfg(feature = "unstable")]
    #[test]
    fn a_one_shot_grant_is_allowed_exactly_once_across_connections() {
        let url = fresh_db();
        let mut setup = PgStore::open(&url).expect("opens");
        for run in 1..=50u32 {
            setup
                .insert(Grant {
                    thread: "t".into(),
                    run,
                    tool: "Read".into(),
                    path: PathBuf::from("/tmp/h.md"),
                    uses_left: 1,
                    handoff: format!("H{run}"),
                })
                .expect("inserts");
        }
        let allowed = Arc::new(AtomicU32::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let url = url.clone();
                let allowed = Arc::clone(&allowed);
                std::thread::spawn(move || {
                    let mut store = PgStore::open(&url).expect("opens");
                    for run in 1..=50u32 {
                        if store
                            .consume("t", run, &PathBuf::from("/tmp/h.md"))
                            .expect("consumes")
                        {
                            allowed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("joins");
        }
        assert_eq!(allowed.load(Ordering::SeqCst), 50);
        for run in 1..=50u32 {
            let g = setup.find("t", run).expect("finds");
            assert_eq!(g.len(), 1);
            assert_eq!(g.first().map(|g| g.uses_left), Some(0), "run {run}");
        }
    }

    #[test]
    fn a_serialization_failure_is_retried_then_given_up_with_what_to_do() {
        let url = fresh_db();
        let store = PgStore::open(&url).expect("opens");
        thread_row(&store, "t");
        let fail = "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$";
        // Fails once, then succeeds: retried, and only the successful try is written.
        let mut tries = 0;
        store
        .with_thread("t", "dispatching", |tx| {
            tries += 1;
            tx.execute(
                "INSERT INTO runs (thread, ordinal, provider, status) VALUES ('t', $1, 'codex', 'running')",
                &[&i64::from(tries)],
            )?;
            if tries == 1 {
                tx.batch_execute(fail)?;
            }
            Ok(())
        })
        .expect("the second try commits");
        assert_eq!(tries, 2);
        let mut c = Client::connect(&url, NoTls).expect("connects");
        let ordinals: Vec<i64> = c
            .query("SELECT ordinal FROM runs ORDER BY ordinal", &[])
            .expect("reads")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(ordinals, [2], "the first try left nothing");
        // Always fails: given up after MAX_TRIES, nothing written.
        let mut tries = 0;
        let e = store
        .with_thread("t", "dispatching", |tx| {
            tries += 1;
            tx.execute(
                "INSERT INTO runs (thread, ordinal, provider, status) VALUES ('t', 10, 'codex', 'running')",
                &[],
            )?;
            tx.batch_execute(fail)
        })
        .expect_err("given up");
        assert_eq!(tries, MAX_TRIES);
        let shown = DbUrl::parse(&url).redacted();
        assert_eq!(
        baton::located(&e),
        format!("{shown}: error: dispatching conflicted with concurrent writers {MAX_TRIES} times (serialization failure or deadlock) and was given up; nothing of it was recorded; run it again")
    );
        let n: i64 = c
            .query_one("SELECT COUNT(*) FROM runs", &[])
            .expect("counts")
            .get(0);
        assert_eq!(n, 1);
    }

    #[test]
    fn a_connection_lost_mid_transaction_leaves_nothing_and_says_so() {
        let url = fresh_db();
        let store = PgStore::open(&url).expect("opens");
        thread_row(&store, "t");
        let mut killer = Client::connect(&url, NoTls).expect("connects");
        let e = store
        .with_thread("t", "dispatching", |tx| {
            tx.execute(
                "INSERT INTO runs (thread, ordinal, provider, status) VALUES ('t', 1, 'codex', 'running')",
                &[],
            )?;
            let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[])?.get(0);
            killer
                .execute("SELECT pg_terminate_backend($1)", &[&pid])
                .expect("terminates");
            tx.execute(
                "INSERT INTO runs (thread, ordinal, provider, status) VALUES ('t', 2, 'codex', 'running')",
                &[],
            )
            .map(|_| ())
        })
        .expect_err("the connection is gone");
        let shown = DbUrl::parse(&url).redacted();
        assert!(matches!(e, PgError::Lost { .. }), "{e:?}");
        assert_eq!(
        baton::located(&e),
        format!("{shown}: error: the connection to the PostgreSQL server was lost while dispatching; nothing of it was recorded (the server rolled the transaction back); run it again when the server is reachable")
    );
        let n: i64 = killer
            .query_one("SELECT COUNT(*) FROM runs", &[])
            .expect("counts")
            .get(0);
        assert_eq!(n, 0, "no half-written run");
    }

    /// The same tally as the SQLite schema's test (`store::schema`), kept by the PL/pgSQL triggers.
    #[test]
    fn the_run_tally_triggers_keep_the_same_tally_as_on_sqlite() {
        let url = fresh_db();
        PgStore::open(&url).expect("opens");
        let mut c = Client::connect(&url, NoTls).expect("connects");
        c.batch_execute(
            "INSERT INTO threads (id, version, request) VALUES ('t', 1, '{}');
         INSERT INTO runs (thread, ordinal, provider, provider_thread, status, handoff) VALUES
            ('t', 1, 'codex', 'C1', 'completed', NULL),
            ('t', 2, 'codex', 'C1', 'failed', NULL),
            ('t', 3, 'claude', 'L1', 'completed', 'H1'),
            ('t', 4, 'claude', 'L1', 'completed', NULL),
            ('t', 5, 'codex', 'C1', 'completed', 'H2'),
            ('t', 6, 'codex', 'C1', 'rolled_back', NULL),
            ('t', 7, 'codex', NULL, 'running', NULL);
         UPDATE runs SET status = 'completed', provider_thread = 'C1' WHERE ordinal = 7;
         UPDATE runs SET status = 'rolled_back' WHERE ordinal = 5;
         INSERT INTO runs (thread, ordinal, provider, provider_thread, status, handoff)
            VALUES ('t', 8, 'codex', 'C1', 'completed', NULL);",
        )
        .expect("changes");
        let tally: Vec<String> = c
            .query(
                "SELECT COALESCE(provider_thread, '-'), provider, status, has_handoff, runs, first,
                last FROM run_tally ORDER BY 1, 2, 3, 4",
                &[],
            )
            .expect("reads")
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {}..{}",
                    r.get::<_, String>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    r.get::<_, i64>(3),
                    r.get::<_, i64>(4),
                    r.get::<_, i64>(5),
                    r.get::<_, i64>(6)
                )
            })
            .collect();
        assert_eq!(
            tally,
            [
                "C1 codex completed 0 3 1..8",
                "C1 codex failed 0 1 2..2",
                "C1 codex rolled_back 0 1 6..6",
                "C1 codex rolled_back 1 1 5..5",
                "L1 claude completed 0 1 4..4",
                "L1 claude completed 1 1 3..3",
            ]
        );
        // A handoff row is never updated except its status.
        c.batch_execute(
            "INSERT INTO handoffs (thread, id, seq, covered_from, covered_to, strategy, status)
         VALUES ('t', 'H1', 1, 1, 2, 'portable_handoff', 'ready');
         UPDATE handoffs SET status = 'superseded';",
        )
        .expect("a status change is allowed");
        let e = c
            .batch_execute("UPDATE handoffs SET summary = 'x'")
            .expect_err("refused");
        assert!(
            e.as_db_error().map(|d| d.message())
                == Some("a handoff row is never updated except its status (supersede it)"),
            "{e:?}"
        );
        c.batch_execute("DELETE FROM runs WHERE thread = 't'")
            .expect("deletes");
        let n: i64 = c
            .query_one("SELECT COUNT(*) FROM run_tally", &[])
            .expect("counts")
            .get(0);
        assert_eq!(n, 0);
    }

    /// Every row of every table of a SQLite database, sorted, as text.
    fn sqlite_rows(db: &std::path::Path) -> Vec<(String, Vec<String>)> {
        let store = baton::store::Store::open(db).expect("opens");
        let conn = store.connection();
        [
            "threads",
            "provider_threads",
            "runs",
            "items",
            "handoffs",
            "transfers",
            "checkpoints",
            "decision_chunks",
            "decision_rules",
            "decision_log",
            "grants",
            "run_tally",
        ]
        .iter()
        .map(|t| {
            let mut st = conn
                .prepare(&format!("SELECT * FROM {t}"))
                .expect("prepares");
            let width = st.column_count();
            let mut rows: Vec<String> = st
                .query_map([], |r| {
                    (0..width)
                        .map(|i| {
                            r.get::<_, rusqlite::types::Value>(i)
                                .map(|v| format!("{v:?}"))
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(|v| v.join(" | "))
                })
                .expect("queries")
                .collect::<Result<_, _>>()
                .expect("rows");
            rows.sort();
            (t.to_string(), rows)
        })
        .collect()
    }

    fn export(db: &str, thread: &str) -> String {
        let (ok, out, err) = baton(&["db", "export", "--db", db, "--thread", thread]);
        assert!(ok, "export {thread} from {db}: {err}");
        out
    }

    #[test]
    fn db_copy_to_postgres_and_back_keeps_every_row_and_every_export() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.db");
        let b = dir.path().join("b.db");
        let a_s = a.display().to_string();
        let b_s = b.display().to_string();
        let examples: Vec<String> = std::fs::read_dir("examples")
            .expect("examples")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .map(|p| p.display().to_string())
            .collect();
        let mut args = vec!["db", "import", "--db", &a_s];
        args.extend(examples.iter().map(String::as_str));
        // Every example whose thread is valid and not a repeat is imported (the rest are refused).
        baton(&args);
        let threads = baton::store::Store::open(&a)
            .expect("opens")
            .threads()
            .expect("threads");
        assert!(threads.len() > 5, "{threads:?}");
        // Decisions, handoff documents and grants: a dispatch on every thread that can take one.
        let handoffs = dir.path().join("handoffs");
        let handoffs = handoffs.display().to_string();
        let mut dispatched = 0;
        for t in &threads {
            let (ok, _, _) = baton(&[
                "dispatch",
                "--db",
                &a_s,
                "--thread",
                t,
                "--target",
                "claude",
                "--message",
                "go on",
                "--handoff-dir",
                &handoffs,
            ]);
            dispatched += usize::from(ok);
        }
        assert!(dispatched > 0);
        let pg = fresh_db();
        let (ok, out, err) = baton(&[
            "db",
            "copy",
            "--from",
            &format!("sqlite:{a_s}"),
            "--to",
            &pg,
            "--json",
        ]);
        assert!(ok, "{err}");
        let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(report["threads"], threads.len(), "{out}");
        let (ok, _, err) = baton(&["db", "copy", "--from", &pg, "--to", &b_s]);
        assert!(ok, "{err}");
        assert_eq!(
            sqlite_rows(&a),
            sqlite_rows(&b),
            "every row survives the round trip"
        );
        for t in &threads {
            let from_a = export(&a_s, t);
            assert_eq!(from_a, export(&pg, t), "thread {t} on PostgreSQL");
            assert_eq!(from_a, export(&b_s, t), "thread {t} copied back");
        }
        let (ok, out, err) = baton(&["replay", "--db", &b_s]);
        assert!(ok, "replay of the copy: {out}{err}");
        // Into a database that already holds threads: refused, nothing changed.
        let (ok, _, err) = baton(&["db", "copy", "--from", &a_s, "--to", &pg]);
        assert!(!ok);
        let shown = DbUrl::parse(&pg).redacted();
        assert_eq!(
        err.trim_end(),
        format!("{shown}: error: the copy's destination already holds {} threads; copy into an empty database (`baton db init --db {shown}` makes one)", threads.len())
    );
    }

    #[rstest]
    #[case::sqlite(Backend::Sqlite)]
    #[case::postgres(Backend::Postgres)]
    fn db_import_then_export_gives_the_thread_back(#[case] backend: Backend) {
        let (db, _dir) = new_db(backend);
        let (ok, _, err) = baton(&["db", "import", "--db", &db, "examples/seed-switch.yaml"]);
        assert!(ok, "{err}");
        let exported = export(&db, "th_1");
        let state = baton::state::load_file(std::path::Path::new("examples/seed-switch.yaml"))
            .expect("loads");
        assert_eq!(exported, baton::state::to_yaml(&state));
        let (ok, _, err) = baton(&["db", "import", "--db", &db, "examples/seed-switch.yaml"]);
        assert!(!ok);
        let shown = DbUrl::parse(&db).redacted();
        assert!(
            err.starts_with(&format!(
                "{shown}: error: thread \"th_1\" is already in the database"
            )),
            "{err}"
        );
        let (ok, _, err) = baton(&["db", "export", "--db", &db, "--thread", "nope"]);
        assert!(!ok);
        assert!(
            err.starts_with(&format!(
                "{shown}: error: no thread \"nope\" in the database"
            )),
            "{err}"
        );
    }

    #[cfg(feature = "unstable")]
    #[test]
    fn a_one_shot_grant_allows_one_of_eight_racing_pregrant_check_processes() {
        let url = fresh_db();
        let dir = tempfile::tempdir().expect("tempdir");
        let doc = dir.path().join("handoff.md");
        std::fs::write(&doc, "# handoff\n").expect("writes");
        let doc = doc.canonicalize().expect("canonical");
        PgStore::open(&url)
            .expect("opens")
            .insert(Grant {
                thread: "t".into(),
                run: 3,
                tool: "Read".into(),
                path: doc.clone(),
                uses_left: 1,
                handoff: "H1".into(),
            })
            .expect("inserts");
        let doc_s = doc.display().to_string();
        let children: Vec<_> = (0..8)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_baton"))
                    .args([
                        "pregrant", "check", "--db", &url, "--thread", "t", "--run", "3", "--tool",
                        "Read", "--path", &doc_s,
                    ])
                    .env_remove("BATON_DB")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("starts")
            })
            .collect();
        let mut allowed = 0;
        for child in children {
            let out = child.wait_with_output().expect("runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() {
                allowed += 1;
                assert!(text.starts_with("allow"), "{text}");
            } else {
                assert!(
                    text.starts_with("deny"),
                    "{text}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        assert_eq!(allowed, 1);
    }
}

/// A command the CLI suggests for a PostgreSQL database can be pasted into a shell: the
/// password the message hides is `${PGPASSWORD}` in double quotes, and a URL that came from
/// `BATON_DB` is left out (the suggested command reads it again).
#[cfg(feature = "postgres")]
mod pasteable_hints {
    use baton::store::{DbUrl, SCHEMA_VERSION};
    use std::process::Command;

    fn baton(args: &[&str], baton_db: Option<&str>) -> (bool, String) {
        let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
        c.args(args);
        match baton_db {
            Some(db) => c.env("BATON_DB", db),
            None => c.env_remove("BATON_DB"),
        };
        let out = c.output().expect("baton runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_hint_gives_pgpassword_for_the_hidden_password_or_leaves_baton_db_out() {
        let url = crate::common::backend::fresh_pg_db();
        // The test server trusts its user: any password connects.
        let with_password = url.replacen("://baton@", "://baton:hunter2@", 1);
        assert_ne!(with_password, url, "{url}");
        let shown = DbUrl::parse(&with_password).redacted();
        let pasteable = shown.replacen(":***@", ":${PGPASSWORD}@", 1);
        let older = format!(
            "{shown}: error: database schema version 0 is older than this baton's ({SCHEMA_VERSION})"
        );
        let (ok, err) = baton(
            &["db", "export", "--db", &with_password, "--thread", "t"],
            None,
        );
        assert!(!ok);
        assert_eq!(
            err.trim_end(),
            format!("{older}; run `baton db migrate --db \"{pasteable}\"` to migrate it")
        );
        assert!(!err.contains("hunter2"), "{err}");
        // The database from BATON_DB: the command reads it again, so no --db.
        let (ok, err) = baton(&["db", "export", "--thread", "t"], Some(&with_password));
        assert!(!ok);
        assert_eq!(
            err.trim_end(),
            format!("{older}; run `baton db migrate` to migrate it")
        );
        // Pasted into a shell that has the password in PGPASSWORD, the suggested command runs.
        let (_, err) = baton(
            &["db", "export", "--db", &with_password, "--thread", "t"],
            None,
        );
        let suggested = err
            .split('`')
            .nth(1)
            .and_then(|c| c.strip_prefix("baton "))
            .expect("a suggested command");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("\"$BATON_BIN\" {suggested}"))
            .env("BATON_BIN", env!("CARGO_BIN_EXE_baton"))
            .env("PGPASSWORD", "hunter2")
            .env_remove("BATON_DB")
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{out:?}");
        let (ok, err) = baton(
            &["db", "export", "--db", &with_password, "--thread", "t"],
            None,
        );
        assert!(!err.contains("older than"), "migrated: {ok} {err}");
    }
}
