//! `baton replay` on databases the store's library API built (split from the lifecycle
//! regression tests, src/store/lifecycle/lifecycle_tests.rs, which are unit tests now).

use crate::common;
use baton::state::{self, Item, RunStatus, State};
use baton::store::{self, DispatchRequest, HandoffOptions, Store};
use baton::Policy;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn seed() -> State {
    state::load_file(&root().join("examples/seed-switch.yaml")).unwrap()
}

struct Db {
    _dir: tempfile::TempDir,
    docs: PathBuf,
    store: Store,
}

impl Db {
    fn new() -> Db {
        Db::with(seed())
    }

    fn with(state: State) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        let mut store = Store::open(&dir.path().join("b.db")).unwrap();
        store.import(&state).unwrap();
        Db {
            _dir: dir,
            docs,
            store,
        }
    }

    fn req(&self, thread: &str, target: &str, message: Option<&str>) -> DispatchRequest {
        DispatchRequest {
            thread: thread.into(),
            target: target.into(),
            message: message.map(str::to_string),
            ..Default::default()
        }
    }

    fn dispatch(&mut self, p: &Policy, thread: &str, target: &str) -> store::Dispatched {
        let r = self.req(thread, target, None);
        let engine = common::engine_of(&std::sync::Arc::new(p.clone()), Some(self.docs.clone()));
        store::dispatch(&mut self.store, &engine, &r).unwrap()
    }

    fn complete(&mut self, thread: &str, run: u32, text: &str, status: RunStatus) {
        let items = vec![
            Item::UserMessage {
                id: None,
                text: format!("Run {run}, please."),
            },
            Item::Decision {
                id: None,
                text: text.into(),
            },
        ];
        store::complete_run(&mut self.store, thread, run, items, status).unwrap();
    }

    fn opts(&self) -> HandoffOptions {
        HandoffOptions::default()
    }
}

fn fork_with_a_run(db: &mut Db, p: &Policy) {
    store::fork(&mut db.store, "th_1", 5, Some("f")).unwrap();
    db.dispatch(p, "f", "codex");
    db.complete("f", 6, "Keep Postgres after all.", RunStatus::Completed);
}

fn baton(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env_remove("BATON_DB")
        .output()
        .unwrap()
}

/// A database with a fork, a merge-back, the run that takes it and a provider switch.
fn built() -> (Db, PathBuf) {
    let mut db = Db::new();
    let p = common::policy("default").unwrap();
    fork_with_a_run(&mut db, &p);
    let opts = db.opts();
    store::merge_back(
        &mut db.store,
        &common::engine_of(&p, Some(db.docs.clone())),
        "f",
        &opts,
    )
    .unwrap();
    db.dispatch(&p, "th_1", "claude");
    let file = db.store.path().unwrap().to_path_buf();
    (db, file)
}

#[test]
fn baton_replay_reports_no_difference_then_a_tampered_decision() {
    let (db, file) = built();
    let f = file.to_str().unwrap();
    let o = baton(&["replay", "--db", f]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert_eq!(out, "3 replayed, 0 differ, 0 skipped\n");
    let o = baton(&[
        "replay", "--db", f, "--thread", "th_1", "--run", "9", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["checked"], 2, "the merge-back and the run that took it");
    // A decision rewritten after the fact no longer re-derives.
    db.store
        .connection()
        .execute(
            "UPDATE decision_log SET decision = json_set(decision, '$.run', 99)
             WHERE operation = 'merge_back'",
            [],
        )
        .unwrap();
    let o = baton(&["replay", "--db", f]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.starts_with("differs: thread th_1 run 9 (merge_back, policy default sha256 ")
            && out
                .contains("): differs in run\n  logged:   {\"run\":99}\n  replayed: {\"run\":9}\n")
            && out.ends_with("3 replayed, 1 differ, 0 skipped\n"),
        "{out}"
    );
}

#[test]
fn baton_replay_names_a_policy_it_cannot_find_and_finds_it_in_a_policy_dir() {
    let dir = tempfile::tempdir().unwrap();
    let team = dir.path().join("team.policy");
    std::fs::write(
        &team,
        "policy \"team\" {\n  extends \"default\"\n}\n\ndelivery {\n  inline otherwise\n}\n",
    )
    .unwrap();
    let p = common::policy(team.to_str().unwrap()).unwrap();
    let mut db = Db::new();
    db.dispatch(&p, "th_1", "codex");
    let f = db.store.path().unwrap().display().to_string();
    let o = baton(&["replay", "--db", &f]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "): no policy with sha256 {} (policy \"team\"); pass its directory with --policy-dir\n",
            p.sha256()
        )),
        "{out}"
    );
    let o = baton(&[
        "replay",
        "--db",
        &f,
        "--policy-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1 replayed, 0 differ, 0 skipped\n"
    );
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn baton_replay_refuses_a_missing_database() {
    let o = baton(&["replay", "--db", "/nonexistent/b.db"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "/nonexistent/b.db: error: no baton database here, and baton replay never creates one; give the database with --db FILE, or create one with `baton db init --db /nonexistent/b.db`\n"
    );
}

/// A row logged before schema 4 keeps no input: it is listed as skipped, not as a difference.
#[test]
fn a_row_logged_before_schema_4_is_skipped() {
    let (db, file) = built();
    db.store
        .connection()
        .execute(
            "INSERT INTO decision_log (thread, run, operation, policy_name, policy_sha256, decision)
             VALUES ('th_1', 3, 'dispatch', 'default', 'abc', '{}')",
            [],
        )
        .unwrap();
    let o = baton(&["replay", "--db", file.to_str().unwrap(), "--run", "3"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "skipped: thread th_1 run 3 (log row 4): logged before the decision log kept its input\n0 replayed, 0 differ, 1 skipped\n"
    );
}
