//! Four `baton serve` processes on one SQLite file under concurrent clients: no run started
//! twice or lost, every one-shot pre-grant used once, every logged decision replays
//! (`tests/multi_serve/mod.rs`; the PostgreSQL run of the same load is in `tests/store_pg.rs`).

use crate::multi_serve;

use multi_serve::Load;

/// The desktop guarantee: several processes (an app and its helpers, or several servers) on
/// one SQLite file keep every run, once.
#[test]
fn four_servers_on_one_sqlite_file_keep_every_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("baton.db").display().to_string();
    let load = Load {
        servers: 4,
        threads: 20,
        clients: 16,
        calls: 400,
    };
    let (outcome, _) = multi_serve::run(dir.path(), &db, &load);
    outcome.check_replay(&db);
    // The clients collided on threads (a refusal) and pre-grants were raced, or the load
    // proved nothing.
    assert!(outcome.refused > 0, "{outcome:?}");
    assert!(!outcome.grants.is_empty(), "{outcome:?}");
    eprintln!(
        "{} dispatched, {} refused, {} completed, {} pre-grants raced",
        outcome.dispatched.len(),
        outcome.refused,
        outcome.completed.len(),
        outcome.grants.len()
    );
}
