//! The SQLite store through its library API: lossless import/export, migrations, indexes,
//! grants, liveness and concurrent dispatches.

use baton::deliver::{Grant, GrantStore, HandoffLiveness};
use baton::policy;
use baton::state::{self, RunStatus, State};
use baton::store::{self, DispatchRequest, Store, StoreError, StoreErrorKind};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml") | Some("json")
            )
        })
        .collect();
    v.sort();
    v
}

fn apply_sql(db: &Path, fixture: &str) {
    let sql = std::fs::read_to_string(root().join("tests/fixtures/db").join(fixture)).unwrap();
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&sql).unwrap();
}

#[test]
fn export_of_import_equals_the_input_for_every_example_and_fixture() {
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for dir in [
        "examples",
        "tests/fixtures/state",
        "tests/fixtures/render",
        "tests/fixtures/db",
        "tests/fixtures/quality",
    ] {
        for file in yaml_files(dir) {
            // Only valid states can be imported; the invalid fixtures test the loader.
            let Ok(input) = state::load_file(&file) else {
                continue;
            };
            let mut store = Store::open_in_memory().unwrap();
            store.import(&input).unwrap();
            let output = store.export(&input.thread.id).unwrap();
            if output != input {
                failures.push(format!("{}: export differs from the input", file.display()));
            } else if state::to_yaml(&output) != state::to_yaml(&input) {
                failures.push(format!("{}: YAML text differs", file.display()));
            }
            checked.push(file);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked.len() >= 25, "only {} files checked", checked.len());
}

#[test]
fn round_trip_survives_a_file_database_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    Store::open(&db).unwrap().import(&input).unwrap();
    let store = Store::open(&db).unwrap();
    assert_eq!(store.load("th_1").unwrap(), input);
    assert_eq!(store.threads().unwrap(), vec!["th_1".to_string()]);
}

#[test]
fn importing_a_thread_twice_is_refused_unless_replacing() {
    let mut store = Store::open_in_memory().unwrap();
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    store.import(&input).unwrap();
    let err = store.import(&input).unwrap_err();
    assert_eq!(
        baton::located(&err),
        ":memory:: error: thread \"th_1\" is already in the database"
    );
    let mut shorter = input.clone();
    shorter.runs.truncate(2);
    shorter.handoffs.clear();
    shorter.transfers.clear();
    shorter.checkpoints.clear();
    store.import_with(&shorter, true).unwrap();
    assert_eq!(store.load("th_1").unwrap(), shorter);
}

#[test]
fn an_invalid_state_is_not_imported() {
    let mut store = Store::open_in_memory().unwrap();
    let mut s = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    s.runs[2].provider_thread = Some("NOPE".into());
    let err = store.import(&s).unwrap_err().to_string();
    assert!(
        err.contains("runs[2].provider_thread: unknown provider thread \"NOPE\""),
        "{err}"
    );
    assert!(store.threads().unwrap().is_empty());
}

#[test]
fn loading_an_unknown_thread_names_it_and_the_database() {
    let store = Store::open_in_memory().unwrap();
    let err = store.load("nope").unwrap_err();
    assert_eq!(err.database(), ":memory:");
    assert_eq!(
        baton::located(&err),
        ":memory:: error: no thread \"nope\" in the database"
    );
}

#[test]
fn a_version_0_database_is_migrated_in_place_keeping_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v0.db");
    apply_sql(&db, "v0.sql");
    let store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    let theme: String = store
        .connection()
        .query_row(
            "SELECT value FROM app_settings WHERE key = 'theme'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(theme, "dark");
    assert!(store.threads().unwrap().is_empty());
}

#[test]
fn a_version_1_database_upgrades_with_its_threads_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.db");
    apply_sql(&db, "v1.sql");
    let mut store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    let s = store.load("th_v1").unwrap();
    assert_eq!(s.runs.len(), 2);
    assert_eq!(s.runs[0].items.len(), 2);
    // Version 2 added the grants table.
    store
        .insert(Grant {
            thread: "th_v1".into(),
            run: 3,
            tool: "Read".into(),
            path: "/tmp/x".into(),
            uses_left: 1,
            handoff: "H1".into(),
        })
        .unwrap();
    assert_eq!(store.find("th_v1", 3).unwrap().len(), 1);
}

#[test]
fn a_version_2_consumed_handoff_comes_back_ready_in_the_contract_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v2.db");
    apply_sql(&db, "v1.sql");
    apply_sql(&db, "v2-on-v1.sql");
    let store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    let s = store.load("th_v1").unwrap();
    assert_eq!(s.handoffs[0].status, baton::state::HandoffStatus::Ready);
    assert_eq!(s.handoffs[0].covered_thread, None);
    assert_eq!(s.runs[1].handoff.as_deref(), Some("H1"));
}

#[test]
fn a_state_file_with_a_consumed_handoff_is_refused_naming_the_field() {
    let text = "version: 1\nthread: {id: t}\nprovider_threads: [{id: C1, provider: codex, status: active}]\nruns: [{ordinal: 1, provider: codex, provider_thread: C1, status: completed}]\nhandoffs:\n  - {id: H1, to_provider_thread: C1, covered: {from: 1, to: 1}, strategy: full_thread_summary, status: consumed}\nrequest: {provider: codex}\n";
    let err = baton::state::parse_str(text, baton::state::Format::Yaml, "s.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("handoffs[0]"), "{err}");
    assert!(
        err.contains("unknown variant `consumed`, expected one of `pending`, `ready`, `failed`, `superseded`"),
        "{err}"
    );
}

/// A merge-back handoff's range numbers the fork's runs (`covered_thread`): the validator
/// cannot check it against this thread's runs, and coverage never counts it.
#[test]
fn a_handoff_covering_another_threads_runs_is_valid_and_covers_nothing_here() {
    let mut s = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    let mut h = s.handoffs[0].clone();
    h.id = "H9".into();
    h.to_provider_thread = Some("C1".into());
    h.covered = state::RunRange { from: 6, to: 40 };
    h.target_run = Some(9);
    let mut own = s.clone();
    own.handoffs.push(h.clone());
    let err = state::validate(&own, "s.yaml").unwrap_err().to_string();
    assert!(
        err.contains("handoffs[1].covered")
            && err.contains("covers runs 6-40 but the thread has 8 runs"),
        "{err}"
    );
    h.covered_thread = Some("th_fork".into());
    s.handoffs.push(h);
    state::validate(&s, "s.yaml").unwrap();
    let c1 = baton::facts::coverage(&s, "C1", |_| true);
    assert_eq!(c1.native_runs, [1, 2, 3, 4, 5]);
    assert!(c1.handoffs.is_empty(), "{:?}", c1.handoffs);
    assert_eq!(c1.last_seen, 5);
    // And it round-trips through the store.
    let mut store = Store::open_in_memory().unwrap();
    store.import(&s).unwrap();
    assert_eq!(store.export("th_1").unwrap(), s);
}

#[rstest::rstest]
#[case::covered("UPDATE handoffs SET covered_to = 3")]
#[case::document("UPDATE handoffs SET document = 'edited'")]
#[case::target_run("UPDATE handoffs SET target_run = 2")]
fn a_handoff_row_changes_only_its_status(#[case] sql: &str) {
    let mut store = Store::open_in_memory().unwrap();
    store
        .import(&state::load_file(&root().join("examples/seed-switch.yaml")).unwrap())
        .unwrap();
    let err = store.connection().execute(sql, []).unwrap_err().to_string();
    assert!(
        err.contains("a handoff row is never updated except its status (supersede it)"),
        "{err}"
    );
    store
        .connection()
        .execute("UPDATE handoffs SET status = 'superseded'", [])
        .unwrap();
}

#[test]
fn a_database_from_a_newer_baton_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA user_version = 10")
        .unwrap();
    let err = Store::open(&db).unwrap_err();
    assert_eq!(
        baton::located(&err),
        format!(
            "{}: error: database schema version 10 is newer than this baton supports (9); upgrade baton",
            db.display()
        )
    );
}

#[test]
fn a_file_database_uses_wal_and_foreign_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("b.db")).unwrap();
    let c = store.connection();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let fk: i64 = c
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!((mode.as_str(), fk), ("wal", 1));
}

fn plan(store: &Store, sql: &str) -> String {
    let mut st = store
        .connection()
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap();
    let rows = st
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .map(|r| r.unwrap())
        .collect::<Vec<_>>();
    rows.join("\n")
}

#[rstest::rstest]
#[case::runs_after_ordinal_n("SELECT ordinal, status FROM runs WHERE thread = 't' AND ordinal > 5")]
#[case::items_of_runs_after_n("SELECT body FROM items WHERE thread = 't' AND run > 5")]
#[case::handoffs_into_provider_thread(
    "SELECT id, covered_from, covered_to FROM handoffs WHERE thread = 't' AND to_provider_thread = 'C1'"
)]
#[case::grants_of_a_turn(
    "SELECT uses_left FROM grants WHERE thread = 't' AND run = 3 AND path = '/x'"
)]
#[case::an_item_id_in_a_thread(
    "SELECT run, idx FROM items WHERE thread = 't' AND item_id = 'i1' AND item_id <> 'r' || run || '.' || (idx + 1) ORDER BY run DESC, idx DESC LIMIT 1"
)]
#[case::a_generated_item_id_at_its_place(
    "SELECT run, idx FROM items WHERE thread = 't' AND run = 3 AND idx = 0 AND item_id = 'r3.1'"
)]
#[case::a_dispatch_window_s_handoffs(
    "SELECT id FROM handoffs WHERE thread = 't' AND (covered_to >= 5 OR target_run > 5) ORDER BY seq"
)]
#[case::the_runs_tally_of_a_thread(
    "SELECT provider, status, runs, first, last FROM run_tally WHERE thread = 't'"
)]
#[case::a_tally_combination_s_newest_run(
    "SELECT MAX(ordinal) FROM runs INDEXED BY runs_by_key WHERE thread = 't' AND provider_thread IS 'C1' AND provider = 'codex' AND status = 'completed' AND (handoff IS NOT NULL) = 0"
)]
#[case::the_transfers_a_completed_run_consumes(
    "UPDATE transfers SET status = 'consumed' WHERE thread = 't' AND type IN ('provider_handoff', 'merge_back') AND status = 'resolved_portable' AND status IN ('resolved_native', 'resolved_portable')"
)]
#[case::the_fork_transfer_a_completed_run_consumes(
    "UPDATE transfers SET status = 'consumed' WHERE thread = 't' AND type = 'fork' AND target_thread = 't' AND status IN ('resolved_native', 'resolved_portable') AND source_run + 1 = 3"
)]
#[case::the_thread_s_latest_logged_input(
    "SELECT id, input FROM decision_log WHERE thread = 't' AND input IS NOT NULL ORDER BY run DESC, id DESC LIMIT 1"
)]
fn lookups_use_an_index_not_a_scan(#[case] sql: &str) {
    let store = Store::open_in_memory().unwrap();
    let p = plan(&store, sql);
    assert!(!p.contains("SCAN"), "{sql}\n{p}");
    assert!(
        p.contains("USING INDEX")
            || p.contains("USING COVERING INDEX")
            || p.contains("USING PRIMARY KEY"),
        "{sql}\n{p}"
    );
}

#[test]
fn grants_persist_and_a_use_is_consumed_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let mut a = Store::open(&db).unwrap();
    let g = Grant {
        thread: "th_1".into(),
        run: 9,
        tool: "Read".into(),
        path: "/docs/th_1/H2/handoff.md".into(),
        uses_left: 1,
        handoff: "H2".into(),
    };
    a.insert(g.clone()).unwrap();
    let mut b = Store::open(&db).unwrap();
    assert_eq!(b.find("th_1", 9).unwrap(), vec![g.clone()]);
    assert!(b.consume("th_1", 9, &g.path).unwrap());
    assert!(!a.consume("th_1", 9, &g.path).unwrap());
    assert!(!a.consume("th_1", 9, Path::new("/other")).unwrap());
    assert_eq!(a.find("th_1", 9).unwrap()[0].uses_left, 0);
    assert!(a.find("th_1", 8).unwrap().is_empty());
}

#[test]
fn replacing_a_thread_drops_its_grants() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    store.import(&input).unwrap();
    let policy = policy::load("default").unwrap();
    store::dispatch(
        &mut store,
        &engine(&policy, &docs),
        &request("th_1", "codex"),
    )
    .unwrap();
    assert_eq!(store.find("th_1", 9).unwrap().len(), 1);
    store.import_with(&input, true).unwrap();
    assert!(
        store.find("th_1", 9).unwrap().is_empty(),
        "run 9 of the replaced thread must not inherit the old run 9's grant"
    );
}

fn request(thread: &str, target: &str) -> DispatchRequest {
    DispatchRequest {
        thread: thread.into(),
        target: target.into(),
        ..Default::default()
    }
}

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &policy::Policy, docs: &Path) -> baton::Engine {
    engine_at(p, Some(docs.to_path_buf()))
}

/// [`engine`] with the off-band root `root` (`None`: the default).
fn engine_at(p: &policy::Policy, root: Option<PathBuf>) -> baton::Engine {
    baton::Engine::from_parts(
        std::sync::Arc::new(p.clone()),
        baton::TemplateSet::embedded(),
        root,
    )
    .unwrap()
}

#[test]
fn dispatch_records_run_handoff_grant_and_decision_log_in_one_go() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut store = Store::open(&dir.path().join("b.db")).unwrap();
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    store.import(&input).unwrap();
    let policy = policy::load("default").unwrap();
    let d = store::dispatch(
        &mut store,
        &engine(&policy, &docs),
        &request("th_1", "codex"),
    )
    .unwrap();
    assert_eq!((d.run, d.provider_thread.as_deref()), (9, Some("C1")));
    let h = d.handoff.clone().unwrap();
    assert_eq!(h.id, "H2");
    assert_eq!(h.status, state::HandoffStatus::Ready);
    let doc = h.document_path.clone().unwrap();
    assert!(doc.exists(), "{}", doc.display());
    // The grant went into the store with the handoff.
    let grants = store.find("th_1", 9).unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].handoff, "H2");
    let s = store.load("th_1").unwrap();
    assert_eq!(s.runs[8].status, RunStatus::Running);
    assert_eq!(s.runs[8].handoff.as_deref(), Some("H2"));
    let logged: (i64, String) = store
        .connection()
        .query_row(
            "SELECT run, policy_sha256 FROM decision_log WHERE thread = 'th_1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(logged, (9, policy.sha256.clone()));
    assert_eq!(
        store.handoff_liveness("th_1", "H2").unwrap(),
        HandoffLiveness::Live
    );
    assert_eq!(
        store.handoff_liveness("th_1", "H9").unwrap(),
        HandoffLiveness::Unknown
    );
    assert_eq!(
        store.handoff_liveness("gone", "H2").unwrap(),
        HandoffLiveness::Unknown
    );
    // Regenerating supersedes H2.
    let r = store::regenerate(
        &mut store,
        &engine_at(&policy, None),
        "th_1",
        "H2",
        &Default::default(),
    )
    .unwrap();
    assert_eq!(r.handoff.unwrap().supersedes.as_deref(), Some("H2"));
    assert_eq!(
        store.handoff_liveness("th_1", "H2").unwrap(),
        HandoffLiveness::Superseded
    );
}

#[test]
fn two_racing_dispatches_on_one_thread_start_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("race.db");
    let docs = dir.path().join("docs");
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    Store::open(&db).unwrap().import(&input).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (db, docs, barrier) = (db.clone(), docs.clone(), barrier.clone());
            std::thread::spawn(move || {
                let policy = policy::load("default").unwrap();
                let mut store = Store::open(&db).unwrap();
                barrier.wait();
                store::dispatch(
                    &mut store,
                    &engine(&policy, &docs),
                    &request("th_1", "codex"),
                )
            })
        })
        .collect();
    let results: Vec<Result<store::Dispatched, StoreError>> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "{results:?}");
    let err = results.iter().find_map(|r| r.as_ref().err()).unwrap();
    assert!(
        matches!(err.kind(), StoreErrorKind::RunInProgress { run: 9, .. }),
        "{err}"
    );
    let s: State = Store::open(&db).unwrap().load("th_1").unwrap();
    assert_eq!(s.runs.len(), 9);
    assert_eq!(s.handoffs.len(), 2, "one handoff (H2) for the one run");
    assert_eq!(
        s.provider_threads.len(),
        2,
        "no provider thread created twice"
    );
}

#[test]
fn a_busy_database_is_reported_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("busy.db");
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    Store::open(&db).unwrap().import(&input).unwrap();
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut store = Store::open(&db).unwrap();
    store
        .set_busy_timeout(std::time::Duration::from_millis(100))
        .unwrap();
    let policy = policy::load("default").unwrap();
    let err = store::dispatch(
        &mut store,
        &engine(&policy, dir.path()),
        &request("th_1", "codex"),
    )
    .unwrap_err();
    assert_eq!(
        baton::located(&err),
        format!(
            "{}: error: the database is locked by another process (still busy after 100 ms while starting a dispatch); try again when it has finished",
            db.display()
        )
    );
    holder.execute_batch("ROLLBACK").unwrap();
    let d = store::dispatch(
        &mut store,
        &engine(&policy, dir.path()),
        &request("th_1", "codex"),
    )
    .unwrap();
    assert_eq!(d.run, 9);
}

/// Dispatch loads only the items the covered delta needs; its decision must be the one the
/// engine makes on the whole thread, for every example (and every provider as the target).
#[test]
fn dispatch_decides_exactly_as_the_engine_does_on_the_whole_thread() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut compared = 0;
    for file in yaml_files("examples") {
        let input = state::load_file(&file).unwrap();
        if input.request.kind != state::RequestKind::Dispatch
            || input.runs.last().map(|r| r.status) == Some(RunStatus::Running)
        {
            continue;
        }
        for policy_name in ["default", "t3code", "mcode"] {
            let policy = policy::load(policy_name).unwrap();
            for target in ["codex", "claude", "cursor"] {
                let mut store = Store::open_in_memory().unwrap();
                store.import(&input).unwrap();
                let req = DispatchRequest {
                    thread: input.thread.id.clone(),
                    target: target.into(),
                    message: input.request.message.clone(),
                    model: input.request.model.clone(),
                    runtime_mode: input.request.runtime_mode.clone(),
                    clean_context: input.request.clean_context,
                    at: input.request.at.clone(),
                    workspace: input.request.workspace.clone(),
                };
                let got =
                    store::dispatch(&mut store, &engine(&policy, &docs), &req).map(|d| d.decision);
                let opts = baton::EvalOptions {
                    target: Some(target.into()),
                    document_root: Some(docs.clone()),
                };
                // The request dispatch makes: the same one, for `target`.
                let mut whole = input.clone();
                whole.request.provider = target.into();
                // Decided, then fitted to the budget, as dispatch does.
                let want = baton::pipeline::explain(&policy, &whole, &opts, &Default::default())
                    .map(|o| o.decision);
                match (got, want) {
                    (Ok(g), Ok(w)) => {
                        assert_eq!(g, w, "{} {policy_name} {target}", file.display())
                    }
                    (Err(_), Err(_)) => {}
                    (g, w) => panic!("{} {policy_name} {target}: {g:?} vs {w:?}", file.display()),
                }
                compared += 1;
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn a_version_5_database_gets_item_ids_so_complete_checks_them_without_loading_the_thread() {
    use baton::state::{Item, RunStatus};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v5.db");
    apply_sql(&db, "v5.sql");
    let mut store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    let ids: Vec<(u32, i64, String)> = store
        .connection()
        .prepare("SELECT run, idx, item_id FROM items WHERE thread = 'th_v5' ORDER BY run, idx")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        ids,
        vec![
            (1, 0, "u1".to_string()),
            (1, 1, "r1.2".to_string()),
            (2, 0, "r2.1".to_string())
        ]
    );
    let item = |id: &str| Item::AssistantMessage {
        id: Some(id.into()),
        text: "Done.".into(),
    };
    let before = store.export("th_v5").unwrap();
    // An explicit id taken by a migrated item, one equal to a migrated item's generated id,
    // and one repeated within the new items: each is refused with the validator's message.
    for (items, want) in [
        (
            vec![item("u1")],
            "runs[1].items[1].id: duplicate item id \"u1\" (also at runs[0].items[0])",
        ),
        (
            vec![item("r1.2")],
            "runs[1].items[1].id: duplicate item id \"r1.2\" (also at runs[0].items[1])",
        ),
        (
            vec![item("a"), item("a")],
            "runs[1].items[2].id: duplicate item id \"a\" (also at runs[1].items[1])",
        ),
    ] {
        let err = store::complete_run(&mut store, "th_v5", 2, items, RunStatus::Completed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("thread \"th_v5\" would be invalid") && err.contains(want),
            "{err}"
        );
        assert_eq!(store.export("th_v5").unwrap(), before);
    }
    let done = store::complete_run(
        &mut store,
        "th_v5",
        2,
        vec![item("a2")],
        RunStatus::Completed,
    )
    .unwrap();
    assert_eq!(done.items, 1);
    let after = store.export("th_v5").unwrap();
    assert_eq!(after.runs[1].status, RunStatus::Completed);
    assert_eq!(after.runs[1].items.len(), 2);
    let id: String = store
        .connection()
        .query_row(
            "SELECT item_id FROM items WHERE thread = 'th_v5' AND run = 2 AND idx = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(id, "a2");
}

/// A version-7 database, as baton wrote it before version 8 (logged inputs as plain JSON, item
/// bodies with their `kind`, an index of every transfer), opens, migrates, and reads back as
/// it was: the same export, every logged decision given back and replayed without a
/// difference; and the thread goes on: the running run completes (consuming its transfer
/// through the new index) and the next dispatch builds on the rows written before.
#[test]
fn a_version_7_database_migrates_to_8_and_reads_back_identically() {
    use baton::state::Item;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v7.db");
    apply_sql(&db, "v7.sql");
    let mut store = Store::open(&db).unwrap();
    assert_eq!(store.schema_version().unwrap(), store::SCHEMA_VERSION);
    let want = state::load_file(&root().join("tests/fixtures/db/v7-export.yaml")).unwrap();
    assert_eq!(store.export("th_1").unwrap(), want);
    let ids: Vec<i64> = store
        .connection()
        .prepare("SELECT id FROM decision_log ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids.len(), 4);
    for id in &ids {
        let d = store.logged_decision(*id).unwrap();
        assert!(d.get("run").is_some_and(|r| r.is_u64()), "{d}");
    }
    // The decisions were made by the shipped default policy of the time (before the workspace
    // signals): replay finds it by its sha256 among the policies it is given.
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/db/policy-v7/default.policy")).unwrap();
    let before = policy::load_text("default.policy", &text).unwrap();
    let report = store::replay(
        &store,
        &store::ReplayFilter::default(),
        std::slice::from_ref(&before),
    )
    .unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (4, 0),
        "{report:?}"
    );
    let index = |name: &str| -> i64 {
        store
            .connection()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(
        (index("transfers_pending"), index("transfers_open")),
        (0, 1)
    );
    // The thread goes on.
    let running = want.runs.last().unwrap().ordinal;
    let item = Item::AssistantMessage {
        id: None,
        text: "Reviewed.".into(),
    };
    store::complete_run(
        &mut store,
        "th_1",
        running,
        vec![item],
        RunStatus::Completed,
    )
    .unwrap();
    let after = store.export("th_1").unwrap();
    assert!(after
        .transfers
        .iter()
        .all(|t| t.status == baton::state::TransferStatus::Consumed));
    assert_eq!(
        after.runs[..after.runs.len() - 1],
        want.runs[..want.runs.len() - 1]
    );
    let p = policy::load("default").unwrap();
    let docs = dir.path().join("docs");
    store::dispatch(&mut store, &engine(&p, &docs), &request("th_1", "codex")).unwrap();
    let report = store::replay(&store, &store::ReplayFilter::default(), &[before]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (5, 0),
        "{report:?}"
    );
}

#[test]
fn the_log_keeps_a_trace_text_once_and_gives_the_full_decision_back() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut store = Store::open(&dir.path().join("b.db")).unwrap();
    let input = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    store.import(&input).unwrap();
    let policy = policy::load("default").unwrap();
    let d = store::dispatch(
        &mut store,
        &engine(&policy, &docs),
        &request("th_1", "codex"),
    )
    .unwrap();
    let (id, row): (i64, String) = store
        .connection()
        .query_row("SELECT id, decision FROM decision_log", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    // The row holds outcomes and values; the rule text is kept once, apart.
    let when = d.decision.trace[0].when.clone().unwrap();
    assert!(!row.contains(&when), "{row}");
    assert_eq!(
        store.logged_decision(id).unwrap(),
        serde_json::to_value(&d.decision).unwrap()
    );
    let texts = |store: &Store| -> i64 {
        store
            .connection()
            .query_row("SELECT COUNT(*) FROM decision_rules", [], |r| r.get(0))
            .unwrap()
    };
    store::complete_run(&mut store, "th_1", 9, Vec::new(), RunStatus::Completed).unwrap();
    store::dispatch(
        &mut store,
        &engine(&policy, &docs),
        &request("th_1", "codex"),
    )
    .unwrap();
    let two = texts(&store);
    store::complete_run(&mut store, "th_1", 10, Vec::new(), RunStatus::Completed).unwrap();
    store::dispatch(
        &mut store,
        &engine(&policy, &docs),
        &request("th_1", "codex"),
    )
    .unwrap();
    assert_eq!(
        texts(&store),
        two,
        "two decisions evaluating the same rules share one text"
    );
    // A missing trace text is an unreadable row, not a wrong decision.
    store
        .connection()
        .execute("DELETE FROM decision_rules", [])
        .unwrap();
    let err = store.logged_decision(id).unwrap_err().to_string();
    assert!(
        err.ends_with(&format!("decision-log row {id}: its trace text is missing")),
        "{err}"
    );
}
