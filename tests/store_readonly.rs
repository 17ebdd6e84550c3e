//! Issue 15 item 12: a read-only database refuses every write before anything happens (no
//! off-band document is written for a dispatch it cannot record), the reading commands work
//! on it without writing, and a database baton creates is private (0600).
//!
//! SQLite only: read-only and private are a file's permissions (on PostgreSQL they are the
//! server's grants).
#![cfg(unix)]

use crate::privilege;

use crate::common;
use baton::state;
use baton::store::{self, DispatchRequest, Store, StoreErrorKind};
use privilege::{is_root, require};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// A database holding `examples/seed-switch.yaml` (thread th_1, 8 runs).
fn seeded(dir: &Path) -> PathBuf {
    let db = dir.join("b.db");
    let mut store = Store::open(&db).unwrap();
    store
        .import(&state::load_file(&root().join("examples/seed-switch.yaml")).unwrap())
        .unwrap();
    db
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_created_database_and_its_wal_files_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let mut store = Store::open(&db).unwrap();
    store
        .import(&state::load_file(&root().join("examples/seed-switch.yaml")).unwrap())
        .unwrap();
    assert_eq!(mode(&db), 0o600, "baton.db");
    for side in ["b.db-wal", "b.db-shm"] {
        let p = dir.path().join(side);
        assert!(p.exists(), "{side} exists while the store is open");
        assert_eq!(mode(&p), 0o600, "{side}");
    }
}

#[test]
fn an_existing_database_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    drop(Store::open(&db).unwrap());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    drop(Store::open(&db).unwrap());
    assert_eq!(mode(&db), 0o640);
}

/// The library: every write on a read-only store fails at its start, naming the operation,
/// and a dispatch writes no document.
#[test]
fn a_read_only_store_refuses_a_dispatch_before_writing_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let db = seeded(dir.path());
    let docs = dir.path().join("docs");
    let mut store = Store::open_read_only(&db).unwrap();
    let req = DispatchRequest {
        thread: "th_1".into(),
        target: "codex".into(),
        ..Default::default()
    };
    let engine = engine(&common::policy("default").unwrap(), &docs);
    let err = store::dispatch(&mut store, &engine, &req).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::ReadOnly { .. }),
        "{err:?}"
    );
    assert_eq!(
        baton::located(&err),
        format!(
            "{}: error: the database is read-only here, so it cannot be written while starting a \
             dispatch; check the file's permissions and its filesystem",
            db.display()
        )
    );
    assert!(files_under(&docs).is_empty(), "{:?}", files_under(&docs));
    let err = store::complete_run(&mut store, "th_1", 8, vec![], state::RunStatus::Completed)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot be written while completing a run"),
        "{err}"
    );
    // Reading works.
    assert_eq!(store.load("th_1").unwrap().runs.len(), 8);
}

#[test]
fn a_read_only_open_never_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    let sql = std::fs::read_to_string(root().join("tests/fixtures/db/v1.sql")).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&sql)
        .unwrap();
    let err = Store::open_read_only(&db).unwrap_err();
    assert_eq!(
        baton::located(&err),
        format!(
            "{0}: error: database schema version 1 is older than this baton's ({1}), and a \
             read-only open cannot migrate it",
            db.display(),
            baton::store::SCHEMA_VERSION
        )
    );
    let v: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1, "the read-only open changed nothing");
    let missing = dir.path().join("missing.db");
    let err = Store::open_read_only(&missing).unwrap_err();
    assert!(err.to_string().contains("no database file here"), "{err}");
    assert!(!missing.exists(), "a read-only open never creates a file");
}

/// The binary on a database whose filesystem is read-only (a read-only bind mount in a private
/// mount namespace): `db export` and `explain --thread` work, `dispatch` fails before it
/// writes the document.
#[test]
fn on_a_read_only_mount_export_and_explain_work_and_dispatch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    seeded(&data);
    let mnt = dir.path().join("ro");
    std::fs::create_dir(&mnt).unwrap();
    let docs = dir.path().join("docs");
    let exe = env!("CARGO_BIN_EXE_baton");
    let script = format!(
        "mount --bind -o ro '{data}' '{mnt}' || exit 99
         cd '{root}'
         '{exe}' db export --db '{mnt}/b.db' --thread th_1 > '{out}/export.yaml' 2> '{out}/export.err'; echo $? > '{out}/export.rc'
         '{exe}' explain --db '{mnt}/b.db' --thread th_1 --target codex > '{out}/explain.txt' 2> '{out}/explain.err'; echo $? > '{out}/explain.rc'
         BATON_HANDOFF_DIR='{docs}' '{exe}' dispatch --db '{mnt}/b.db' --thread th_1 --target codex > /dev/null 2> '{out}/dispatch.err'; echo $? > '{out}/dispatch.rc'",
        data = data.display(),
        mnt = mnt.display(),
        root = root().display(),
        out = dir.path().display(),
        docs = docs.display(),
    );
    let ran = Command::new("unshare")
        .args(["--map-root-user", "--mount", "sh", "-c", &script])
        .status()
        .map_err(|e| format!("cannot run unshare: {e}"))
        .and_then(|s| match s.code() {
            Some(0) => Ok(()),
            other => Err(format!(
                "cannot make a read-only bind mount in a mount namespace (exit {other:?})"
            )),
        });
    if require(
        "on_a_read_only_mount_export_and_explain_work_and_dispatch_writes_nothing",
        ran,
    )
    .is_none()
    {
        return;
    }
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert_eq!(read("export.rc").trim(), "0", "{}", read("export.err"));
    let exported = state::parse_str(&read("export.yaml"), state::Format::Yaml, "export").unwrap();
    assert_eq!(exported.runs.len(), 8);
    assert_eq!(read("explain.rc").trim(), "0", "{}", read("explain.err"));
    assert!(
        read("explain.txt").starts_with("run 9 on codex: "),
        "{}",
        read("explain.txt")
    );
    assert_eq!(read("dispatch.rc").trim(), "1");
    assert_eq!(
        read("dispatch.err").trim_end(),
        format!(
            "{}/b.db: error: the database is read-only here, so it cannot be written while \
             opening it for writing; check the file's permissions and its filesystem (reading \
             commands such as `baton db export` and `baton explain --thread` still work)",
            mnt.display()
        )
    );
    assert!(files_under(&docs).is_empty(), "{:?}", files_under(&docs));
}

/// The binary as an unprivileged user on a 0444 database in a writable directory: SQLite
/// opens it read-only, and `dispatch` must stop before the document (it used to write it, then
/// fail on the first row).
#[test]
fn a_read_only_file_stops_dispatch_before_the_document() {
    let ran = if is_root() {
        Ok(())
    } else {
        Err("switching to uid 65534 needs root".to_string())
    };
    if require("a_read_only_file_stops_dispatch_before_the_document", ran).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let db = seeded(&work);
    let docs = work.join("docs");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    for p in [dir.path(), work.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(&db, Some(65534), Some(65534)).unwrap();
    let nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(&work)
            .env("BATON_HANDOFF_DIR", &docs)
            .output()
            .unwrap()
    };
    let out = nobody(&[
        "dispatch", "--db", "b.db", "--thread", "th_1", "--target", "codex",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "b.db: error: the database is read-only here, so it cannot be written while starting a \
         dispatch; check the file's permissions and its filesystem (reading commands such as \
         `baton db export` and `baton explain --thread` still work)"
    );
    assert!(files_under(&docs).is_empty(), "{:?}", files_under(&docs));
    let out = nobody(&["db", "export", "--db", "b.db", "--thread", "th_1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &std::sync::Arc<baton::Policy>, docs: &std::path::Path) -> baton::Engine {
    common::engine_of(p, Some(docs.to_path_buf()))
}
