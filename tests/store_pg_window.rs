//! A long thread on PostgreSQL (a module of `store_pg`): a dispatch stages only its window and
//! a completion only its run (docs/store.md#what-an-operation-stages), and both write back only
//! the rows they changed. On a thread of 10,000 runs they decide, export and replay as on
//! SQLite, and a trigger counting the writes on the server shows a dispatch and a completion
//! write a handful of rows, not the thread.

use crate::postgres_backend::fresh_db;
use baton::state::{Item, RunStatus, State};
use baton::store::{Db, DbUrl, DispatchRequest, ReplayFilter};
use std::path::Path;
use std::time::Duration;

#[path = "../benches/support/thread.rs"]
#[allow(dead_code)]
mod bench_thread;

/// The benchmark thread of `n` runs (codex and claude in blocks of five, ten items a run).
fn long_thread(n: usize) -> State {
    baton::state::parse_str(
        &bench_thread::state_yaml(n),
        baton::state::Format::Yaml,
        "bench",
    )
    .expect("the bench thread parses")
}

fn engine(docs: &Path) -> baton::Engine {
    baton::Engine::builder("default")
        .document_root(Some(docs.to_path_buf()))
        .build()
        .expect("the profile checks")
}

fn req(target: &str) -> DispatchRequest {
    DispatchRequest {
        thread: "th_bench".into(),
        target: target.into(),
        message: Some("Carry on.".into()),
        ..Default::default()
    }
}

fn items(run: u32) -> Vec<Item> {
    vec![
        Item::UserMessage {
            id: None,
            text: format!("Run {run}, please."),
        },
        Item::AssistantMessage {
            id: Some(format!("answer-{run}")),
            text: "Done.".into(),
        },
    ]
}

fn open(url: &str) -> Db {
    Db::open(&DbUrl::parse(url), Duration::from_secs(5)).expect("opens")
}

/// Dispatch to codex, claude, codex and cursor, completing each run: every decision as JSON.
fn turns(db: &mut Db, docs: &Path) -> Vec<serde_json::Value> {
    let p = engine(docs);
    let mut out = Vec::new();
    for target in ["codex", "claude", "codex", "cursor"] {
        let d = db.dispatch(&p, &req(target)).expect("dispatches");
        let done = db
            .complete_run("th_bench", d.run, items(d.run), RunStatus::Completed)
            .expect("completes");
        out.push(serde_json::json!({
            "decision": d.decision,
            "run": d.run,
            "provider_thread": d.provider_thread,
            "handoff": d.handoff.map(|h| h.id),
            "items": done.items,
            "consumed": done.handoff_consumed,
        }));
    }
    out
}

#[test]
fn a_ten_thousand_run_thread_dispatches_completes_exports_and_replays_as_on_sqlite() {
    let state = long_thread(10_000);
    let docs = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lite = open(&dir.path().join("b.db").display().to_string());
    let mut pg = open(&fresh_db());
    lite.import(&state).expect("imports");
    pg.import(&state).expect("imports");
    let on_sqlite = turns(&mut lite, docs.path());
    let before = baton::store::pg::staging_counts();
    let on_pg = turns(&mut pg, docs.path());
    let after = baton::store::pg::staging_counts();
    assert_eq!(on_pg, on_sqlite);
    // Every dispatch but cursor's decided on its window and every completion on its run: each
    // staged only that, and none had to be run again on the whole thread. Cursor has no run on
    // the thread, so no window: its dispatch reads the whole thread (on SQLite too).
    assert_eq!((after.0 - before.0, after.1 - before.1), (7, 0));
    assert_eq!(
        pg.export("th_bench").expect("exports"),
        lite.export("th_bench").expect("exports")
    );
    for db in [&lite, &pg] {
        let report = db.replay(&ReplayFilter::default(), &[]).expect("replays");
        assert_eq!(report.checked, 4, "{report:?}");
        assert!(report.differences.is_empty(), "{report:?}");
    }
    // A duplicate item id far back in the thread is found as on SQLite (the completion stages
    // the stored items its new ids repeat).
    let p = engine(docs.path());
    let dup = |db: &mut Db| {
        let d = db.dispatch(&p, &req("claude")).expect("dispatches");
        let e = db
            .complete_run(
                "th_bench",
                d.run,
                vec![Item::AssistantMessage {
                    id: Some("r3.2".into()),
                    text: "again".into(),
                }],
                RunStatus::Completed,
            )
            .expect_err("refused");
        e.to_string()
    };
    let (a, b) = (dup(&mut lite), dup(&mut pg));
    for e in [&a, &b] {
        assert!(
            e.contains("duplicate item id \"r3.2\" (also at runs[2].items[1])"),
            "{e}"
        );
    }
}

/// Count every row written to the store's tables (not the tally, which the server's own
/// triggers keep).
fn count_writes(url: &str) {
    let mut c = baton::store::pg::postgres::Client::connect(url, baton::store::pg::postgres::NoTls)
        .expect("connects");
    c.batch_execute(
        "CREATE TABLE written (tbl TEXT NOT NULL, op TEXT NOT NULL);
         CREATE FUNCTION count_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO written VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $$;",
    )
    .expect("makes the counter");
    for t in [
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
    ] {
        c.batch_execute(&format!(
            "CREATE TRIGGER count_{t} AFTER INSERT OR UPDATE OR DELETE ON {t}
             FOR EACH ROW EXECUTE FUNCTION count_write()"
        ))
        .expect("counts");
    }
}

/// Rows written: (table, operation, how many).
type Writes = Vec<(String, String, i64)>;

/// The rows written since the last call, by table, and the counter emptied.
fn writes(url: &str) -> Writes {
    let mut c = baton::store::pg::postgres::Client::connect(url, baton::store::pg::postgres::NoTls)
        .expect("connects");
    let rows = c
        .query(
            "SELECT tbl, op, COUNT(*) FROM written GROUP BY tbl, op ORDER BY tbl, op",
            &[],
        )
        .expect("reads");
    c.batch_execute("DELETE FROM written").expect("empties");
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[test]
fn a_dispatch_and_a_completion_write_only_what_they_change_however_long_the_thread() {
    let docs = tempfile::tempdir().expect("tempdir");
    let p = engine(docs.path());
    let mut seen = Vec::new();
    for n in [100, 10_000] {
        let url = fresh_db();
        let mut db = open(&url);
        db.import(&long_thread(n)).expect("imports");
        count_writes(&url);
        let mut counts = Vec::new();
        for target in ["codex", "claude"] {
            let d = db.dispatch(&p, &req(target)).expect("dispatches");
            let dispatched = writes(&url);
            let total: i64 = dispatched.iter().map(|(_, _, k)| k).sum();
            // The run, its handoff and transfer, the decision's log row and chunks, the request.
            assert!(
                total <= 16,
                "{n} runs, a dispatch to {target} wrote {dispatched:?}"
            );
            db.complete_run("th_bench", d.run, items(d.run), RunStatus::Completed)
                .expect("completes");
            let completed = writes(&url);
            let total_c: i64 = completed.iter().map(|(_, _, k)| k).sum();
            // Two items, the run, its transfer.
            assert!(total_c <= 6, "{n} runs, a completion wrote {completed:?}");
            counts.push((dispatched, completed));
        }
        seen.push(counts);
    }
    // What is written does not depend on the thread's length.
    let shape = |c: &[(Writes, Writes)]| {
        c.iter()
            .map(|(d, k)| {
                (
                    d.iter()
                        .filter(|(t, _, _)| t != "decision_chunks")
                        .cloned()
                        .collect::<Vec<_>>(),
                    k.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&seen[0]), shape(&seen[1]));
}

fn seed() -> State {
    baton::state::load_file(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"),
    )
    .expect("the seed loads")
}

/// A dispatch taking a waiting merge-back reads every handoff of the thread: on PostgreSQL its
/// window's staging falls short, the safety net notices, and it runs again on the whole
/// thread, deciding what SQLite decides.
fn merge_back_then_dispatch(db: &mut Db, docs: &Path) -> serde_json::Value {
    let p = engine(docs);
    db.fork("th_1", 5, Some("f")).expect("forks");
    let d = db
        .dispatch(
            &p,
            &DispatchRequest {
                thread: "f".into(),
                target: "codex".into(),
                ..Default::default()
            },
        )
        .expect("dispatches the fork");
    db.complete_run("f", d.run, items(d.run), RunStatus::Completed)
        .expect("completes");
    db.merge_back(&p, "f", &baton::store::HandoffOptions::default())
        .expect("merges back");
    let d = db
        .dispatch(
            &p,
            &DispatchRequest {
                thread: "th_1".into(),
                target: "claude".into(),
                ..Default::default()
            },
        )
        .expect("dispatches");
    serde_json::json!({
        "decision": d.decision,
        "merge_back": d.merge_back.map(|h| h.id),
        "handoff": d.handoff.map(|h| h.id),
    })
}

#[test]
fn a_dispatch_that_reads_beyond_its_window_runs_again_on_the_whole_thread() {
    let docs = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lite = open(&dir.path().join("b.db").display().to_string());
    let mut pg = open(&fresh_db());
    lite.import(&seed()).expect("imports");
    pg.import(&seed()).expect("imports");
    let on_sqlite = merge_back_then_dispatch(&mut lite, docs.path());
    let before = baton::store::pg::staging_counts();
    let on_pg = merge_back_then_dispatch(&mut pg, docs.path());
    let after = baton::store::pg::staging_counts();
    assert_eq!(on_pg, on_sqlite);
    assert!(on_pg["merge_back"].is_string() || on_pg["handoff"].is_string());
    assert_eq!(
        after.1 - before.1,
        1,
        "one dispatch ran again on the whole thread"
    );
    for t in ["th_1", "f"] {
        assert_eq!(
            pg.export(t).expect("exports"),
            lite.export(t).expect("exports"),
            "{t}"
        );
    }
}
