//! `baton replay` on databases the store's library API built (split from the lifecycle
//! regression tests, tests/store_lifecycle.rs).

use crate::common::backend::Backend;
use crate::store_lifecycle::{fork_with_a_run, Life};
use rstest_reuse::apply;

fn baton(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env_remove("BATON_DB")
        .output()
        .unwrap()
}

/// A database with a fork, a merge-back, the run that takes it and a provider switch.
fn built(backend: Backend) -> Life {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    db.merge_back("default", "f");
    db.dispatch("default", "th_1", "claude");
    db
}

#[apply(crate::common::backend::backends)]
fn baton_replay_reports_no_difference_then_a_tampered_decision(#[case] backend: Backend) {
    let db = built(backend);
    let f = db.t.url.as_str();
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
    db.t.execute(match backend {
        Backend::Sqlite => {
            "UPDATE decision_log SET decision = json_set(decision, '$.run', 99)
             WHERE operation = 'merge_back'"
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            // A text value is stored tagged `t` (src/store/pg/copy.rs).
            "UPDATE decision_log SET decision = 't'::bytea || convert_to(jsonb_set(
                 convert_from(substring(decision FROM 2), 'UTF8')::jsonb, '{run}', '99')::text,
                 'UTF8')
             WHERE operation = 'merge_back'"
        }
    });
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

#[apply(crate::common::backend::backends)]
fn baton_replay_names_a_policy_it_cannot_find_and_finds_it_in_a_policy_dir(
    #[case] backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let team = dir.path().join("team.policy");
    std::fs::write(
        &team,
        "policy \"team\" {\n  extends \"default\"\n}\n\ndelivery {\n  inline otherwise\n}\n",
    )
    .unwrap();
    let team = team.to_str().unwrap();
    let mut db = Life::new(backend);
    db.dispatch(team, "th_1", "codex");
    let sha = db.engine(team).policy().sha256().to_string();
    let f = db.t.url.clone();
    let o = baton(&["replay", "--db", &f]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "): no policy with sha256 {} (policy \"team\"); pass its directory with --policy-dir\n",
            sha
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

// SQLite only: a file that is not there (a PostgreSQL database that is not there is the
// server's error, tests/store_pg.rs).
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
#[apply(crate::common::backend::backends)]
fn a_row_logged_before_schema_4_is_skipped(#[case] backend: Backend) {
    let db = built(backend);
    // On PostgreSQL a text value is stored tagged `t` (src/store/pg/copy.rs).
    let decision = match backend {
        Backend::Sqlite => "'{}'",
        #[cfg(feature = "postgres")]
        Backend::Postgres => "'t{}'::bytea",
    };
    db.t.execute(&format!(
        "INSERT INTO decision_log (thread, run, operation, policy_name, policy_sha256, decision)
         VALUES ('th_1', 3, 'dispatch', 'default', 'abc', {decision})"
    ));
    let o = baton(&["replay", "--db", &db.t.url, "--run", "3"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "skipped: thread th_1 run 3 (log row 4): logged before the decision log kept its input\n0 replayed, 0 differ, 1 skipped\n"
    );
}
