//! The lifecycle through [`baton::store::Db`] on both backends (a module of `store_pg`): the
//! same operations give the same decisions, the same exports and the same replay on SQLite
//! and on PostgreSQL, and PostgreSQL keeps the lifecycle's guarantees across connections.

use crate::postgres_backend::{fresh_db, Backend};
use baton::policy::{self, Policy};
use baton::state::{self, Item, RunStatus, State};
use baton::store::{Db, DbError, DbUrl, DispatchRequest, HandoffOptions, ReplayFilter};
use rstest::rstest;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn seed() -> State {
    state::load_file(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"))
        .expect("the seed loads")
}

/// A new database of `backend` holding the seed thread `th_1`, its URL and the guard of its
/// directory.
fn seeded(backend: Backend) -> (Db, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = match backend {
        Backend::Sqlite => dir.path().join("b.db").display().to_string(),
        Backend::Postgres => fresh_db(),
    };
    let mut db = Db::open(&DbUrl::parse(&url), Duration::from_secs(5)).expect("opens");
    db.import(&seed()).expect("imports");
    (db, url, dir)
}

fn req(docs: &Path, thread: &str, target: &str, message: Option<&str>) -> DispatchRequest {
    DispatchRequest {
        thread: thread.into(),
        target: target.into(),
        message: message.map(str::to_string),
        handoff_dir: Some(docs.to_path_buf()),
        ..Default::default()
    }
}

fn items(run: u32, text: &str) -> Vec<Item> {
    vec![
        Item::UserMessage {
            id: None,
            text: format!("Run {run}, please."),
        },
        Item::Decision {
            id: None,
            text: text.into(),
        },
    ]
}

/// What a scenario leaves to compare: every decision as JSON, then every thread's export.
struct Outcome {
    decisions: Vec<serde_json::Value>,
    exports: Vec<(String, State)>,
    replay_checked: usize,
    replay_differences: usize,
}

/// Dispatch, complete, fork, merge-back, rollback, regenerate, a merge-back made again for
/// another provider: the lifecycle suite's replay scenario, through `Db`.
fn scenario(db: &mut Db, docs: &Path) -> Outcome {
    let p = policy::load("default").expect("default");
    let t3 = policy::load("t3code").expect("t3code");
    let opts = HandoffOptions {
        handoff_dir: Some(docs.to_path_buf()),
        ..Default::default()
    };
    let mut decisions = Vec::new();
    let mut push = |d: &baton::store::Dispatched| {
        decisions.push(serde_json::to_value(&d.decision).expect("JSON"));
    };
    let dispatch = |db: &mut Db, p: &Policy, thread: &str, target: &str, msg: Option<&str>| {
        db.dispatch(p, &req(docs, thread, target, msg))
            .expect("dispatches")
    };
    let complete = |db: &mut Db, thread: &str, run: u32, text: &str, status: RunStatus| {
        db.complete_run(thread, run, items(run, text), status)
            .expect("completes")
    };
    db.fork("th_1", 5, Some("f")).expect("forks");
    push(&dispatch(db, &p, "f", "codex", None));
    complete(db, "f", 6, "Keep Postgres after all.", RunStatus::Completed);
    push(&db.merge_back(&p, "f", &opts).expect("merges back"));
    push(&dispatch(db, &p, "th_1", "claude", Some("Carry on.")));
    complete(db, "th_1", 9, "merged", RunStatus::Completed);
    push(&dispatch(db, &t3, "th_1", "codex", None));
    complete(db, "th_1", 10, "switched", RunStatus::Failed);
    let rolled = db.rollback("th_1", 9).expect("rolls back");
    assert_eq!(rolled.runs_rolled_back, vec![10]);
    let d = dispatch(db, &p, "th_1", "cursor", None);
    push(&d);
    let h = d.handoff.expect("cursor gets a handoff");
    push(
        &db.regenerate(&p, "th_1", &h.id, &opts)
            .expect("regenerates"),
    );
    push(&dispatch(db, &p, "f", "claude", None));
    complete(db, "th_1", d.run, "Cursor's run.", RunStatus::Completed);
    db.fork("th_1", d.run, None).expect("forks with a fresh id");
    db.fork("th_1", d.run, Some("g")).expect("forks");
    let g = dispatch(db, &p, "g", "claude", None);
    push(&g);
    complete(db, "g", g.run, "Fork g's work.", RunStatus::Completed);
    let m = db.merge_back(&p, "g", &opts).expect("merges back");
    push(&m);
    let d = dispatch(db, &p, "th_1", "codex", None);
    push(&d);
    let taken = d.merge_back.or(d.handoff).expect("a merge-back is taken");
    assert_eq!(taken.supersedes, m.handoff.map(|h| h.id), "made again");
    let report = db.replay(&ReplayFilter::default(), &[]).expect("replays");
    let exports = db
        .threads()
        .expect("lists")
        .into_iter()
        .map(|t| {
            let s = db.export(&t).expect("exports");
            (t, s)
        })
        .collect();
    Outcome {
        decisions,
        exports,
        replay_checked: report.checked,
        replay_differences: report.differences.len(),
    }
}

#[test]
fn the_lifecycle_decides_exports_and_replays_the_same_on_both_backends() {
    // One document directory, so that the decisions' document paths are the same.
    let docs = tempfile::tempdir().expect("tempdir");
    let (mut lite, _, _d1) = seeded(Backend::Sqlite);
    let on_sqlite = scenario(&mut lite, docs.path());
    let (mut pg, _, _d2) = seeded(Backend::Postgres);
    let on_pg = scenario(&mut pg, docs.path());
    assert_eq!(on_sqlite.replay_checked, 11);
    assert_eq!(on_sqlite.replay_differences, 0);
    assert_eq!(on_pg.replay_checked, on_sqlite.replay_checked);
    assert_eq!(on_pg.replay_differences, 0);
    assert_eq!(on_pg.decisions.len(), on_sqlite.decisions.len());
    for (i, (a, b)) in on_sqlite.decisions.iter().zip(&on_pg.decisions).enumerate() {
        assert_eq!(a, b, "decision {i}");
    }
    let names = |o: &Outcome| o.exports.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(names(&on_pg), names(&on_sqlite));
    for ((t, a), (_, b)) in on_sqlite.exports.iter().zip(&on_pg.exports) {
        assert_eq!(a, b, "thread {t}");
    }
    // The stored decision of a thread (windowed where it can be) is the same too.
    let engine = baton::Engine::new("default").expect("an engine");
    for t in ["th_1", "f", "g"] {
        let a = lite.decide(&engine, t, Some("claude")).expect("reads");
        let b = pg.decide(&engine, t, Some("claude")).expect("reads");
        assert_eq!(
            serde_json::to_value(a.expect("decides")).expect("JSON"),
            serde_json::to_value(b.expect("decides")).expect("JSON"),
            "thread {t}"
        );
    }
}

#[rstest]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
fn a_bad_operation_says_what_is_wrong_and_writes_nothing(#[case] backend: Backend) {
    let (mut db, url, dir) = seeded(backend);
    let shown = DbUrl::parse(&url).redacted();
    let p = policy::load("default").expect("default");
    let docs = dir.path().join("docs");
    let before = db.export("th_1").expect("exports");
    let e = db
        .complete_run("th_1", 99, items(99, "x"), RunStatus::Completed)
        .expect_err("no run 99");
    assert_eq!(
        e.to_string(),
        format!("{shown}: error: thread \"th_1\" has no run 99 (it has 8 runs)")
    );
    let e = db
        .dispatch(&p, &req(&docs, "nope", "codex", None))
        .expect_err("no thread");
    assert_eq!(
        e.to_string(),
        format!("{shown}: error: no thread \"nope\" in the database")
    );
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "claude", None))
        .expect("dispatches");
    let e = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect_err("still running");
    assert_eq!(
        e.to_string(),
        format!("{shown}: error: run {} of thread \"th_1\" is still running; complete it before dispatching again", d.run)
    );
    let e = db.fork("th_1", 42, None).expect_err("no run 42");
    assert!(
        e.to_string().starts_with(&format!(
            "{shown}: error: cannot fork thread \"th_1\" at run 42: "
        )),
        "{e}"
    );
    let e = db.merge_back(&p, "th_1", &HandoffOptions::default());
    assert_eq!(
        e.expect_err("not a fork").to_string(),
        format!("{shown}: error: thread \"th_1\" is not a fork, so it has nothing to merge back")
    );
    assert!(matches!(
        db.rollback("th_1", 42).expect_err("no run 42"),
        DbError::Store(_)
    ));
    let mut after = db.export("th_1").expect("exports");
    after.runs.pop();
    after
        .provider_threads
        .retain(|p| before.provider_threads.contains(p));
    after.handoffs.retain(|h| before.handoffs.contains(h));
    after.transfers.retain(|t| before.transfers.contains(t));
    after.request = before.request.clone();
    assert_eq!(after.runs, before.runs, "only the dispatched run was added");
}

/// A second copy of the seed, as thread `id`.
fn seed_as(id: &str) -> State {
    let mut s = seed();
    s.thread.id = id.to_string();
    s
}

fn pg(url: &str) -> Db {
    Db::open(&DbUrl::parse(url), Duration::from_secs(5)).expect("opens")
}

fn raw(url: &str) -> baton::store::pg::postgres::Client {
    baton::store::pg::postgres::Client::connect(url, baton::store::pg::postgres::NoTls)
        .expect("connects")
}

#[test]
fn concurrent_dispatches_on_one_thread_serialize_into_one_run_per_ordinal() {
    const WORKERS: u32 = 4;
    const EACH: u32 = 4;
    let (_, url, dir) = seeded(Backend::Postgres);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (url, docs, p) = (url.clone(), docs.clone(), p.clone());
            std::thread::spawn(move || {
                let mut db = pg(&url);
                let target = ["claude", "codex"][usize::try_from(w % 2).unwrap_or(0)];
                let mut done = 0;
                while done < EACH {
                    // Another connection's run is still running: try again once it is not.
                    match db.dispatch(&p, &req(&docs, "th_1", target, None)) {
                        Ok(d) => {
                            db.complete_run(
                                "th_1",
                                d.run,
                                items(d.run, "done"),
                                RunStatus::Completed,
                            )
                            .expect("completes its own run");
                            done += 1;
                        }
                        Err(DbError::Store(baton::store::StoreError::RunInProgress { .. })) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("joins");
    }
    let db = pg(&url);
    let s = db.export("th_1").expect("exports");
    let ordinals: Vec<u32> = s.runs.iter().map(|r| r.ordinal).collect();
    let want: Vec<u32> = (1..=8 + WORKERS * EACH).collect();
    assert_eq!(ordinals, want, "one run per ordinal, none lost");
    assert!(s.runs.iter().all(|r| r.status != RunStatus::Running));
    let report = db.replay(&ReplayFilter::default(), &[]).expect("replays");
    assert_eq!(report.checked, usize::try_from(WORKERS * EACH).unwrap_or(0));
    assert!(report.differences.is_empty(), "{report:?}");
}

#[test]
fn a_dispatch_on_another_thread_does_not_wait_for_a_held_thread() {
    let (mut db, url, dir) = seeded(Backend::Postgres);
    db.import(&seed_as("other")).expect("imports");
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    // Another connection holds th_1's lock (as a writer of th_1 would, mid-operation).
    let mut holder = raw(&url);
    holder
        .execute("SELECT pg_advisory_lock(hashtextextended('th_1', 0))", &[])
        .expect("locks th_1");
    let d = db
        .dispatch(&p, &req(&docs, "other", "claude", None))
        .expect("another thread is not blocked");
    assert_eq!(d.run, 9);
    // A writer of th_1 waits for the holder, then sees everything it committed.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let waiter = {
        let (url, docs, p) = (url.clone(), docs.clone(), p.clone());
        std::thread::spawn(move || {
            let mut db = pg(&url);
            started_tx.send(()).expect("signals");
            db.dispatch(&p, &req(&docs, "th_1", "claude", None))
        })
    };
    started_rx.recv().expect("started");
    holder
        .execute(
            "SELECT pg_advisory_unlock(hashtextextended('th_1', 0))",
            &[],
        )
        .expect("unlocks");
    let d = waiter
        .join()
        .expect("joins")
        .expect("dispatches once th_1 is free");
    assert_eq!(d.run, 9);
}

#[test]
fn a_connection_lost_in_the_write_back_leaves_no_half_written_run_and_says_what_to_do() {
    let (mut db, url, dir) = seeded(Backend::Postgres);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let before = db.export("th_1").expect("exports");
    // The server loses the connection as the run's row is written (after the provider thread's
    // and the handoff's rows of the same transaction).
    raw(&url)
        .batch_execute(
            "CREATE FUNCTION lose() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$;
             CREATE TRIGGER lose BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION lose();",
        )
        .expect("arms");
    let e = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect_err("the connection is lost");
    let shown = DbUrl::parse(&url).redacted();
    assert_eq!(
        e.to_string(),
        format!("{shown}: error: the connection to the PostgreSQL server was lost while dispatching (writing runs); nothing of it was recorded (the server rolled the transaction back); run it again when the server is reachable")
    );
    raw(&url)
        .batch_execute("DROP TRIGGER lose ON runs")
        .expect("disarms");
    let mut db = pg(&url);
    assert_eq!(
        db.export("th_1").expect("exports"),
        before,
        "nothing was written"
    );
    let mut c = raw(&url);
    let logged: i64 = c
        .query_one("SELECT COUNT(*) FROM decision_log", &[])
        .expect("counts")
        .get(0);
    assert_eq!(logged, 0, "no decision logged either");
    // Run again when the server is reachable: it is recorded whole.
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect("dispatches");
    assert_eq!(d.run, 9);
}

#[test]
fn a_serialization_failure_in_a_dispatch_is_retried_then_given_up_with_what_to_do() {
    let (mut db, url, dir) = seeded(Backend::Postgres);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    // The run's insert fails with a serialization failure while the sequence is below `n`
    // (a sequence is not rolled back: each try counts).
    let arm = |n: i64| {
        raw(&url)
            .batch_execute(&format!(
                "DROP TRIGGER IF EXISTS conflict ON runs;
                 DROP SEQUENCE IF EXISTS tries; CREATE SEQUENCE tries;
                 CREATE OR REPLACE FUNCTION conflict() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     IF nextval('tries') <= {n} THEN
                         RAISE EXCEPTION 'conflict' USING ERRCODE = '40001';
                     END IF;
                     RETURN NEW;
                 END $$;
                 CREATE TRIGGER conflict BEFORE INSERT ON runs
                     FOR EACH ROW EXECUTE FUNCTION conflict();"
            ))
            .expect("arms");
    };
    arm(2);
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "claude", None))
        .expect("the third try commits");
    assert_eq!(d.run, 9);
    let runs = db.export("th_1").expect("exports").runs.len();
    assert_eq!(runs, 9, "one run, from the try that committed");
    db.complete_run("th_1", 9, items(9, "ok"), RunStatus::Completed)
        .expect("completes");
    arm(1000);
    let e = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect_err("given up");
    let shown = DbUrl::parse(&url).redacted();
    let tries = baton::store::pg::MAX_TRIES;
    assert_eq!(
        e.to_string(),
        format!("{shown}: error: dispatching conflicted with concurrent writers {tries} times (serialization failure or deadlock) and was given up; nothing of it was recorded; run it again")
    );
    assert_eq!(db.export("th_1").expect("exports").runs.len(), 9);
    let used: i64 = raw(&url)
        .query_one("SELECT last_value FROM tries", &[])
        .expect("reads")
        .get(0);
    assert_eq!(used, i64::from(tries), "tried {tries} times, no more");
}

#[rstest]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
fn gc_keeps_a_live_handoff_and_removes_a_superseded_one(#[case] backend: Backend) {
    let (mut db, _, dir) = seeded(backend);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect("dispatches");
    let h = d.handoff.expect("a handoff");
    let opts = HandoffOptions {
        handoff_dir: Some(docs.clone()),
        ..Default::default()
    };
    let again = db
        .regenerate(&p, "th_1", &h.id, &opts)
        .expect("regenerates")
        .handoff
        .expect("a new handoff");
    let offband = baton::store::OffbandStore::new(Some(docs.clone()));
    let retention = baton::store::Retention {
        max_age: Some(Duration::from_secs(3600)),
        max_per_thread: Some(100),
    };
    let report = db
        .collect_documents(&offband, &retention, std::time::SystemTime::now(), false)
        .expect("collects");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let live = again.document_path.expect("an off-band document");
    assert!(live.exists(), "the live handoff's document stays");
    let old = h.document_path.expect("an off-band document");
    assert!(!old.exists(), "the superseded handoff's document goes");
}

#[rstest]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
fn a_replaced_thread_s_logged_decisions_still_replay(#[case] backend: Backend) {
    let (mut db, _, dir) = seeded(backend);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    for (i, target) in ["codex", "claude", "codex"].into_iter().enumerate() {
        let d = db
            .dispatch(&p, &req(&docs, "th_1", target, None))
            .expect("dispatches");
        assert_eq!(d.run, 9 + u32::try_from(i).unwrap_or(0));
        db.complete_run("th_1", d.run, items(d.run, "done"), RunStatus::Completed)
            .expect("completes");
    }
    let mut fresh = seed();
    fresh.runs.truncate(3);
    fresh
        .handoffs
        .retain(|h| h.covered.to <= 3 && h.target_run.is_some_and(|t| t <= 3));
    fresh.transfers.clear();
    fresh.checkpoints.clear();
    for r in &mut fresh.runs {
        r.handoff = r
            .handoff
            .take()
            .filter(|h| fresh.handoffs.iter().any(|x| &x.id == h));
    }
    for h in &mut fresh.handoffs {
        h.transfer = None;
        h.supersedes = None;
    }
    db.import(&fresh).expect_err("already stored");
    db.import_with(&fresh, true).expect("replaces");
    assert_eq!(db.export("th_1").expect("exports").runs.len(), 3);
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "claude", None))
        .expect("dispatches");
    assert_eq!(d.run, 4);
    let report = db.replay(&ReplayFilter::default(), &[]).expect("replays");
    assert_eq!(
        (report.checked, report.differences.len()),
        (4, 0),
        "{report:?}"
    );
}

/// A rollback supersedes the handoffs of the undone runs, on both backends, for every profile.
#[rstest]
fn a_handoff_taken_by_an_undone_run_no_longer_counts_as_seen(
    #[values(Backend::Sqlite, Backend::Postgres)] backend: Backend,
    #[values("default", "t3code", "mcode")] profile: &str,
) {
    let (mut db, _, dir) = seeded(backend);
    let docs = dir.path().join("docs");
    let p = policy::load(profile).expect("a profile");
    db.dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect("dispatches");
    db.complete_run("th_1", 9, items(9, "done"), RunStatus::Completed)
        .expect("completes");
    let r = db.rollback("th_1", 5).expect("rolls back");
    assert_eq!(r.handoffs_superseded, ["H1", "H2"]);
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "claude", None))
        .expect("dispatches");
    assert_ne!(d.decision.strategy.as_str(), "no_handoff", "{profile}");
    let covered = d.decision.covered_runs.expect("runs handed over");
    assert_eq!((covered.from, covered.to), (1, 5), "{profile}");
}

/// An unused pre-grant dies with its run, however the run ends, on both backends; a use is
/// then denied with the reason the user sees.
#[rstest]
fn an_unused_pregrant_dies_when_its_run_ends(
    #[values(Backend::Sqlite, Backend::Postgres)] backend: Backend,
    #[values(
        Some(RunStatus::Completed),
        Some(RunStatus::Failed),
        Some(RunStatus::Interrupted),
        None
    )]
    end: Option<RunStatus>,
) {
    use baton::deliver::GrantStore;
    let (mut db, _, dir) = seeded(backend);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let d = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect("dispatches");
    let doc = d
        .handoff
        .and_then(|h| h.document_path)
        .expect("an off-band document");
    assert_eq!(db.find("th_1", 9).expect("finds").len(), 1);
    match end {
        Some(status) => {
            db.complete_run("th_1", 9, items(9, "done"), status)
                .expect("completes");
        }
        None => {
            db.rollback("th_1", 8).expect("rolls back");
        }
    }
    assert!(db.find("th_1", 9).expect("finds").is_empty());
    let check = baton::deliver::CheckRequest {
        thread: "th_1".into(),
        run: 9,
        tool: "Read".into(),
        args: baton::deliver::PathArg::Path(doc),
    };
    let v = baton::deliver::check(&mut db, &check).expect("checks");
    assert!(!v.allow);
    assert_eq!(v.reason, "no pre-grant for thread th_1 turn 9");
}

/// A merge-back waiting for the parent's next run keeps its grant through a rollback of the
/// parent, and the run that takes it may read its document once.
#[rstest]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
fn a_waiting_merge_backs_grant_lives_until_the_run_that_takes_it_ends(#[case] backend: Backend) {
    use baton::deliver::GrantStore;
    let (mut db, _, dir) = seeded(backend);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let opts = HandoffOptions {
        handoff_dir: Some(docs.clone()),
        ..Default::default()
    };
    db.fork("th_1", 5, Some("f")).expect("forks");
    db.dispatch(&p, &req(&docs, "f", "codex", None))
        .expect("dispatches");
    db.complete_run("f", 6, items(6, "Keep Postgres."), RunStatus::Completed)
        .expect("completes");
    let m = db.merge_back(&p, "f", &opts).expect("merges back");
    let doc = m
        .handoff
        .and_then(|h| h.document_path)
        .expect("an off-band document");
    db.rollback("th_1", 7).expect("rolls back");
    assert_eq!(db.find("th_1", 9).expect("finds").len(), 1);
    db.dispatch(&p, &req(&docs, "th_1", "claude", None))
        .expect("dispatches");
    db.complete_run("th_1", 9, items(9, "merged"), RunStatus::Completed)
        .expect("completes");
    let check = baton::deliver::CheckRequest {
        thread: "th_1".into(),
        run: 9,
        tool: "Read".into(),
        args: baton::deliver::PathArg::Path(doc),
    };
    assert!(
        !baton::deliver::check(&mut db, &check)
            .expect("checks")
            .allow
    );
}

/// GC reads a handoff's liveness under the thread's lock (shared): while a writer of the thread
/// holds it (a delivery in progress), the lookup waits, and then finds the handoff live.
#[test]
fn gc_waits_for_a_writer_of_the_thread_before_it_judges_a_handoff() {
    let (mut db, url, dir) = seeded(Backend::Postgres);
    let docs = dir.path().join("docs");
    let p = policy::load("default").expect("default");
    let doc = db
        .dispatch(&p, &req(&docs, "th_1", "codex", None))
        .expect("dispatches")
        .handoff
        .and_then(|h| h.document_path)
        .expect("an off-band document");
    let mut holder = raw(&url);
    holder
        .execute("SELECT pg_advisory_lock(hashtextextended('th_1', 0))", &[])
        .expect("locks th_1");
    let gc = {
        let (url, docs) = (url.clone(), docs.clone());
        std::thread::spawn(move || {
            let mut db = pg(&url);
            let offband = baton::store::OffbandStore::new(Some(docs));
            let retention = baton::store::Retention {
                max_age: Some(Duration::from_secs(3600)),
                max_per_thread: Some(100),
            };
            db.collect_documents(&offband, &retention, std::time::SystemTime::now(), false)
        })
    };
    // The pass is waiting for th_1's lock (an advisory lock not granted), not done.
    let mut probe = raw(&url);
    loop {
        let waiting: i64 = probe
            .query_one(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .expect("reads the locks")
            .get(0);
        if waiting > 0 {
            break;
        }
        std::thread::yield_now();
    }
    assert!(!gc.is_finished(), "the lookup waits for the writer");
    holder
        .execute(
            "SELECT pg_advisory_unlock(hashtextextended('th_1', 0))",
            &[],
        )
        .expect("unlocks");
    let report = gc.join().expect("joins").expect("collects");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(doc.exists(), "the live handoff's document stays");
}
