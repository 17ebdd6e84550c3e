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
