//! What the store commands tell the user and the app (issue 16, point 6): reading commands
//! never create a database, suggested commands can be pasted as they are, a rollback says
//! what to do with each provider thread, and a native fork's dispatch gives the fork point.

use crate::common;
use crate::common::backend::{Backend, TestDb};
use rstest_reuse::apply;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A database of one backend, and `baton` run on it with `--db` (not `$BATON_DB`): the
/// suggestions name the database as the user gave it.
struct Db(TestDb);

impl Db {
    /// A database holding seed 000's example thread `th_1` (runs 1-8).
    fn seeded(backend: Backend) -> Db {
        let d = Db(TestDb::new(backend));
        d.ok(&["db", "import", "examples/seed-switch.yaml"]);
        d
    }

    fn run(&self, args: &[&str]) -> Output {
        self.0
            .cmd(args)
            .env_remove("BATON_DB")
            .args(["--db", &self.0.url])
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "baton {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn items(&self) -> PathBuf {
        let p = self.0.path().join("items.yaml");
        std::fs::write(&p, "- {kind: assistant_message, text: Done.}\n").unwrap();
        p
    }

    /// Dispatch run 9 to codex and complete it.
    fn run_9_on_codex(&self) {
        self.ok(&["dispatch", "--thread", "th_1", "--target", "codex"]);
        let items = self.items();
        self.ok(&[
            "complete",
            "--thread",
            "th_1",
            "--run",
            "9",
            "--items",
            items.to_str().unwrap(),
        ]);
    }
}

fn baton_at(cwd: &Path, args: &[&str]) -> Output {
    common::baton_cmd()
        .current_dir(cwd)
        .env_remove("BATON_DB")
        .args(args)
        .output()
        .unwrap()
}

/// Each reading command, pointed at a database that does not exist, says so naming the path,
/// exits 1 and creates nothing. (SQLite only: a file that is not there.)
#[rstest::rstest]
#[case::explain(&["explain", "--thread", "th_1"], "baton explain")]
#[case::render(&["render", "--thread", "th_1"], "baton render")]
#[case::export(&["db", "export", "--thread", "th_1"], "baton db export")]
#[case::replay(&["replay"], "baton replay")]
#[case::pregrant(&["pregrant", "check", "--thread", "th_1", "--turn", "9", "--tool", "Read", "--path", "/x"], "baton pregrant check")]
#[case::gc(&["gc", "--dry-run"], "baton gc")]
fn reading_commands_never_create_a_database(#[case] args: &[&str], #[case] command: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--db", "typo.db"]);
    let o = baton_at(dir.path(), &all);
    assert_eq!(o.status.code(), Some(1), "{args:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("typo.db: error: no baton database here, and {command} never creates one; give the database with --db FILE, or create one with `baton db init --db typo.db`\n")
    );
    assert!(!dir.path().join("typo.db").exists(), "{command} created it");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A mistyped --db next to the real database is told which one it probably meant. (SQLite
/// only: the files beside it.)
#[test]
fn a_mistyped_db_is_told_the_database_beside_it() {
    let d = Db::seeded(Backend::Sqlite);
    let typo = d.0.path().join("batn.db");
    let o = baton_at(
        d.0.path(),
        &[
            "explain",
            "--thread",
            "th_1",
            "--db",
            typo.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{typo}: error: no baton database here, and baton explain never creates one; did you mean `--db {real}`? `baton db init --db {typo}` creates an empty one\n",
            typo = typo.display(),
            real = d.0.url
        )
    );
    assert!(!typo.exists());
}

/// State-changing commands still create the database they are given. (SQLite only: a new
/// file.)
#[test]
fn changing_commands_still_create_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let o = baton_at(
        dir.path(),
        &[
            "db",
            "import",
            "--db",
            "new.db",
            &format!("{}/examples/seed-switch.yaml", env!("CARGO_MANIFEST_DIR")),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.path().join("new.db").is_file());
}

/// The command a refusal suggests runs as it is, from another directory, without $BATON_DB:
/// it names --db and --thread as the user gave them (quoted when needed).
#[apply(crate::common::backend::backends)]
fn a_refused_dispatch_suggests_a_command_that_can_be_pasted(#[case] backend: Backend) {
    let d = Db::seeded(backend);
    d.ok(&["dispatch", "--thread", "th_1", "--target", "codex"]);
    let o = d.run(&["dispatch", "--thread", "th_1", "--target", "claude"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(
        err,
        format!(
            "{db}: error: run 9 of thread \"th_1\" is still running; complete it before dispatching again: `baton complete --db {db} --thread th_1 --run 9 --items ITEMS_FILE`\n",
            db = d.0.shown()
        )
    );
    let suggested = err.split('`').nth(1).unwrap();
    let items = d.items();
    let line = suggested
        .replacen("baton", "$BATON", 1)
        .replace("ITEMS_FILE", items.to_str().unwrap());
    let elsewhere = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .current_dir(elsewhere.path())
        .env("BATON", env!("CARGO_BIN_EXE_baton"))
        .env_remove("BATON_DB")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "`{line}`: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "run 9 of th_1: completed (1 item); handoff H2 consumed\n"
    );
}

/// A database path with a space is quoted in the suggestion, so the pasted command still
/// names it. (SQLite only: a file's path.)
#[test]
fn a_suggested_command_quotes_what_the_shell_would_split() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("my dbs").join("b.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let db_arg = db.to_str().unwrap();
    let seed = format!("{}/examples/seed-switch.yaml", env!("CARGO_MANIFEST_DIR"));
    assert!(
        baton_at(dir.path(), &["db", "import", "--db", db_arg, &seed])
            .status
            .success()
    );
    let o = baton_at(dir.path(), &["db", "import", "--db", db_arg, &seed]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("{db_arg}: error: thread \"th_1\" is already in the database; to overwrite it: `baton db import --db '{db_arg}' --replace STATE_FILE`\n")
    );
}

/// After a rollback, each provider thread's line says what the app does with it and what the
/// next run on its provider does; the JSON says the same in snake_case fields. Under
/// `default` the `diverged` signal makes both providers start new threads: discard both.
#[apply(crate::common::backend::backends)]
fn a_rollback_says_what_to_do_with_each_provider_thread(#[case] backend: Backend) {
    let d = Db::seeded(backend);
    d.run_9_on_codex();
    let out = d.ok(&["rollback", "--thread", "th_1", "--to", "7"]);
    assert_eq!(
        out,
        "rolled th_1 back to run 7\n\
         \x20 runs rolled back: 8, 9\n\
         \x20 handoffs superseded: H2\n\
         \x20 provider threads: C1 (codex) divergent, L1 (claude) rolled_back\n\
         \x20 codex thread C1: discard it, do not resume it (its turn for run 9 was undone); the next run on codex (run 10) starts a new thread (full_new; stale: diverged)\n\
         \x20 claude thread L1: discard it, do not resume it (its turn for run 8 was undone); the next run on claude (run 10) starts a new thread (full_new; stale: diverged)\n"
    );
    // What the advice says is what the store does: the next dispatch on codex creates C2.
    let next: Value = serde_json::from_str(&d.ok(&[
        "dispatch", "--thread", "th_1", "--target", "codex", "--json",
    ]))
    .unwrap();
    assert_eq!(
        next["provider_thread"],
        json!({"action": "create", "id": null})
    );
    assert_eq!(next["recorded"]["provider_thread"], "C2");
}

/// Under a policy without a `diverged` signal (`t3code`), the next runs resume the threads:
/// claude (which can roll back) rolls L1 back to its two kept turns; codex (which cannot)
/// keeps C1 as it is.
#[apply(crate::common::backend::backends)]
fn a_rollback_under_a_policy_that_resumes_says_roll_back_or_keep(#[case] backend: Backend) {
    let d = Db::seeded(backend);
    d.run_9_on_codex();
    let v: Value = serde_json::from_str(&d.ok(&[
        "rollback", "--thread", "th_1", "--to", "7", "--policy", "t3code", "--json",
    ]))
    .unwrap();
    assert_eq!(
        v["provider_threads"],
        json!([
            {"id": "C1", "provider": "codex", "status": "divergent", "runs_undone": [9],
             "turns_kept": 5, "app_action": "keep",
             "next_run": {"run": 10, "strategy": "delta_existing",
                          "provider_thread": {"action": "resume", "id": "C1"}, "stale": [],
                          "because": v["provider_threads"][0]["next_run"]["because"]}},
            {"id": "L1", "provider": "claude", "status": "rolled_back", "runs_undone": [8],
             "turns_kept": 2, "app_action": "roll_back",
             "next_run": {"run": 10, "strategy": "no_handoff",
                          "provider_thread": {"action": "resume", "id": "L1"}, "stale": [],
                          "because": v["provider_threads"][1]["next_run"]["because"]}}
        ])
    );
}

/// The first dispatch of a fork that forks natively gives the fork point: the parent's
/// provider thread and the turn to fork after, in the JSON and the text.
#[apply(crate::common::backend::backends)]
fn a_native_fork_gives_the_fork_point(#[case] backend: Backend) {
    let d = Db::seeded(backend);
    d.ok(&["fork", "--thread", "th_1", "--at", "5", "--child", "kid"]);
    let v: Value = serde_json::from_str(
        &d.ok(&["dispatch", "--thread", "kid", "--target", "codex", "--json"]),
    )
    .unwrap();
    assert_eq!(v["strategy"], "native_fork");
    assert_eq!(
        v["fork_point"],
        json!({"parent_thread": "th_1", "provider_thread": "C1", "run": 5, "turn": 5})
    );
    assert_eq!(v["recorded"]["provider_thread"], "C2");
    // A portable fork (another provider) has no fork point; the text says where to fork.
    d.ok(&["fork", "--thread", "th_1", "--at", "5", "--child", "kid2"]);
    let v: Value = serde_json::from_str(&d.ok(&[
        "dispatch", "--thread", "kid2", "--target", "claude", "--json",
    ]))
    .unwrap();
    assert_eq!(v["fork_point"], Value::Null);
    d.ok(&["fork", "--thread", "th_1", "--at", "3", "--child", "kid3"]);
    let text = d.ok(&["dispatch", "--thread", "kid3", "--target", "codex"]);
    assert!(
        text.contains("\n  fork point: fork codex thread C1 after its turn 3 (run 3 of th_1); the new thread is C2\n"),
        "{text}"
    );
}
