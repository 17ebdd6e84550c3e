//! The external summarizer on PostgreSQL (a module of `store_pg`): a dispatch runs it once,
//! before it takes the thread's lock (another connection can take the lock while it runs),
//! and a unit of work run again after a serialization failure reuses its summary instead of
//! running it again (docs/store.md#the-summarizer-and-the-lock).

use crate::postgres_backend::fresh_db;
use baton::store::pg::postgres::{Client, NoTls};
use baton::store::{Db, DbUrl, DispatchRequest};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn seed() -> baton::State {
    baton::state::load_file(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"),
    )
    .expect("the seed loads")
}

/// A policy extending `default` whose summarizer, on its n-th call, creates `started.n` in
/// `dir` and waits for `go.n` (or gives up when `dir` is gone).
fn gated_engine(dir: &Path) -> baton::Engine {
    let script = crate::common::gated_summarizer(dir);
    let text = format!(
        "policy \"gated\" {{\n  extends \"default\"\n}}\n\nsummary {{\n  include user_message into goals\n  source command \"{}\" timeout_ms 600000\n}}\n",
        script.display()
    );
    let policy = crate::common::policy_text("gated", &text).expect("the policy checks");
    baton::Engine::from_parts(
        policy,
        baton::TemplateSet::embedded(),
        Some(dir.join("docs")),
    )
    .expect("an engine")
}

/// Wait until `path` exists (an event: the summarizer creates it); the bound is a hang guard
/// only, not a budget.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_dispatch_runs_its_summarizer_once_outside_the_lock_and_a_retry_reuses_it() {
    let url = fresh_db();
    let dir = tempfile::tempdir().expect("tempdir");
    let marks = dir.path().to_path_buf();
    let mut db = Db::open(&DbUrl::parse(&url), Duration::from_secs(5)).expect("opens");
    db.import(&seed()).expect("imports");
    let mut raw = Client::connect(&url, NoTls).expect("connects");
    // The run's insert fails with a serialization failure twice: the unit of work runs three
    // times.
    raw.batch_execute(
        "CREATE SEQUENCE tries;
         CREATE FUNCTION conflict() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF nextval('tries') <= 2 THEN
                 RAISE EXCEPTION 'conflict' USING ERRCODE = '40001';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER conflict BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION conflict();",
    )
    .expect("arms");
    let engine = gated_engine(&marks);
    let background = std::thread::spawn(move || {
        let d = db.dispatch(
            &engine,
            &DispatchRequest {
                thread: "th_1".into(),
                target: "codex".into(),
                ..Default::default()
            },
        );
        (db, d)
    });
    wait_for(&marks.join("started.1"));
    // The summarizer runs: the thread's lock is free.
    let free: bool = raw
        .query_one(
            "SELECT pg_try_advisory_lock(hashtextextended('th_1', 0))",
            &[],
        )
        .expect("tries the lock")
        .get(0);
    assert!(free, "the thread's lock is held while the summarizer runs");
    raw.batch_execute("SELECT pg_advisory_unlock(hashtextextended('th_1', 0))")
        .expect("unlocks");
    std::fs::write(marks.join("go.1"), "").expect("lets it go");
    let (db, d) = background.join().expect("joins");
    let d = d.expect("the third try commits");
    assert_eq!(d.run, 9);
    let tried: i64 = raw
        .query_one("SELECT last_value FROM tries", &[])
        .expect("reads")
        .get(0);
    assert_eq!(tried, 3, "the unit of work ran three times");
    assert!(
        !marks.join("started.2").exists(),
        "the summarizer ran again"
    );
    let handoff = d.handoff.expect("a handoff to codex");
    let stored = db.export("th_1").expect("exports");
    let made = stored
        .handoffs
        .iter()
        .find(|h| h.id == handoff.id)
        .expect("the handoff is stored");
    assert!(
        made.created_by
            .as_deref()
            .is_some_and(|c| c.starts_with("command:")),
        "{made:?}"
    );
    let doc = std::fs::read_to_string(handoff.document_path.as_deref().expect("a document"))
        .expect("the document is written");
    assert!(
        doc.contains("Written by the gated summarizer, call 1."),
        "{doc}"
    );
}
