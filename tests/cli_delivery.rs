//! `baton render --deliver` and `baton gc` through the binary.
#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use baton::store::OffbandStore;
use tempfile::TempDir;

use crate::common;
use common::baton_cmd;

const STATE: &str = "examples/seed-switch.yaml";

fn run(args: &[&str], root: &Path) -> (i32, String, String) {
    let mut cmd = baton_cmd();
    cmd.args(args)
        .arg("--handoff-dir")
        .arg(root)
        .env_remove("BATON_DB");
    if args.first() == Some(&"gc") {
        // No ./baton.db there: gc runs without a store (age and count rules only).
        cmd.current_dir(root.parent().unwrap());
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn render_deliver_writes_the_document_and_prints_the_first_turn_prompt() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let (code, stdout, stderr) = run(&["render", "--state", STATE, "--deliver"], &root);
    assert_eq!(code, 0, "{stderr}");
    let doc = root.join("th_1/H2/handoff.md");
    assert!(doc.is_file());
    assert!(
        stdout.starts_with(&format!(
            "Before you start, read the handoff document at {}:",
            doc.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("Now add tests for the CSRF check."));
    assert!(
        stderr.contains(&format!("delivered off-band: {}", doc.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("pre-grant: Read of") && stderr.contains("on turn 9 of thread th_1"),
        "{stderr}"
    );
}

/// A relative `--handoff-dir` is resolved against the working directory: the prompt names an
/// absolute path (the pre-grant never allows a relative one).
#[test]
fn a_relative_handoff_dir_is_handed_out_absolute() {
    let tmp = TempDir::new().unwrap();
    let state = Path::new(env!("CARGO_MANIFEST_DIR")).join(STATE);
    let out = baton_cmd()
        .args(["render", "--deliver", "--handoff-dir", "docs", "--state"])
        .arg(&state)
        .current_dir(tmp.path())
        .env_remove("BATON_DB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = fs::canonicalize(tmp.path())
        .unwrap()
        .join("docs/th_1/H2/handoff.md");
    assert!(doc.is_file());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!(
            "Before you start, read the handoff document at {}:",
            doc.display()
        )),
        "{stdout}"
    );
}

#[test]
fn render_deliver_falls_back_to_inline_with_a_warning() {
    let tmp = TempDir::new().unwrap();
    let file = tmp.path().join("a-file");
    fs::write(&file, "").unwrap();
    let root = file.join("docs");
    let (code, stdout, stderr) = run(&["render", "--state", STATE, "--deliver"], &root);
    assert_eq!(
        code, 0,
        "nothing is lost, so this is not a failure: {stderr}"
    );
    assert_eq!(
        stderr.trim_end(),
        format!(
            "warning: off-band delivery failed, so the handoff is delivered inline: I/O error on {}: Not a directory (os error 20)",
            root.display()
        )
    );
    // The whole document travels in the prompt.
    assert!(
        stdout.starts_with("# Handoff: Add GitHub OAuth login"),
        "{stdout}"
    );
    assert!(stdout.contains("## Decisions"));
    assert!(stdout
        .trim_end()
        .ends_with("Now add tests for the CSRF check."));
}

#[test]
fn render_deliver_refuses_a_world_writable_root() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
    let (code, _, stderr) = run(&["render", "--state", STATE, "--deliver"], &root);
    assert_eq!(code, 0);
    assert!(
        stderr.contains(&format!(
            "delivered inline: refusing to use {}: it is writable by group or others (mode 0777); run `chmod 700` on it",
            root.display()
        )),
        "{stderr}"
    );
}

#[test]
fn render_deliver_conflicts_with_out() {
    let tmp = TempDir::new().unwrap();
    let (code, _, stderr) = run(
        &["render", "--state", STATE, "--deliver", "--out", "x"],
        tmp.path(),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("the argument '--deliver' cannot be used with '--out <DIR>'"),
        "{stderr}"
    );
}

/// A handoff directory written by baton, its document's mtime `age` in the past.
fn handoff(store: &OffbandStore, thread: &str, id: &str, age: Duration) -> PathBuf {
    let path = store
        .write(thread, id, &[("handoff.md", b"# doc\n")])
        .unwrap();
    let f = fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    path.parent().unwrap().to_path_buf()
}

const DAY: Duration = Duration::from_secs(86_400);

/// Three threads' worth of handoffs plus things baton did not create.
fn populated() -> (TempDir, PathBuf, Vec<PathBuf>) {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    let store = OffbandStore::new(Some(root.clone()));
    let dirs = vec![
        handoff(&store, "t1", "H1", 10 * DAY), // expired by age
        handoff(&store, "t1", "H2", 2 * DAY),
        handoff(&store, "t1", "H3", DAY),
        handoff(&store, "t1", "H4", Duration::ZERO),
        handoff(&store, "t2", "H1", Duration::ZERO),
    ];
    // Foreign: a directory without the marker, a file, a symlink to outside.
    fs::create_dir(root.join("t1/mine")).unwrap();
    fs::write(root.join("t1/mine/keep.txt"), "x").unwrap();
    fs::write(root.join("notes.txt"), "x").unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join(".baton-handoff"), "x").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("t2/link")).unwrap();
    (tmp, root, dirs)
}

#[test]
fn gc_dry_run_reports_and_removes_nothing() {
    let (_tmp, root, dirs) = populated();
    let (code, stdout, stderr) = run(&["gc", "--dry-run", "--keep", "2"], &root);
    assert_eq!(code, 0, "{stderr}");
    let r = |p: &Path| p.display().to_string();
    assert!(
        stdout.contains(&format!(
            "would remove {} (older than 604800s (age 864000s))",
            r(&dirs[0])
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "would remove {} (beyond the newest 2 handoff(s) of thread t1)",
            r(&dirs[1])
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!(
        "left alone {} (no .baton-handoff marker; not created by baton)",
        root.join("t1/mine").display()
    )));
    assert!(stdout.contains(&format!(
        "left alone {} (not a directory (or a symlink))",
        root.join("t2/link").display()
    )));
    assert!(
        stdout.ends_with("would remove 2 handoff(s), kept 3, left 3 other entries alone\n"),
        "{stdout}"
    );
    assert!(dirs.iter().all(|d| d.is_dir()), "a dry run deletes nothing");
}

#[test]
fn gc_removes_expired_handoffs_and_never_touches_foreign_files() {
    let (tmp, root, dirs) = populated();
    let (code, stdout, stderr) = run(&["gc", "--keep", "2", "--json"], &root);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["dry_run"], false);
    assert_eq!(report["kept"], 3);
    let removed: Vec<&str> = report["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        removed,
        vec![dirs[0].display().to_string(), dirs[1].display().to_string()]
    );
    assert!(!dirs[0].exists() && !dirs[1].exists());
    assert!(dirs[2..].iter().all(|d| d.is_dir()));
    assert!(root.join("t1/mine/keep.txt").is_file());
    assert!(root.join("notes.txt").is_file());
    assert!(tmp.path().join("outside/.baton-handoff").is_file());
    assert!(fs::symlink_metadata(root.join("t2/link")).is_ok());
}

#[test]
fn gc_on_a_missing_root_reports_nothing() {
    let tmp = TempDir::new().unwrap();
    let (code, stdout, stderr) = run(&["gc"], &tmp.path().join("none"));
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "removed 0 handoff(s), kept 0, left 0 other entries alone\n"
    );
    assert_eq!(
        stderr,
        "note: no database at baton.db; superseded and deleted handoffs are not detected (give --db)\n"
    );
}

#[test]
fn gc_refuses_an_unsafe_root() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("docs");
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
    let (code, _, stderr) = run(&["gc"], &root);
    assert_eq!(code, 1);
    assert!(
        stderr.ends_with(&format!(
            "\nerror: refusing to use {}: it is writable by group or others (mode 0777); run `chmod 700` on it or set BATON_HANDOFF_DIR to a private directory\n",
            root.display()
        )),
        "{stderr}"
    );
}

#[test]
fn gc_rejects_a_bad_age() {
    let tmp = TempDir::new().unwrap();
    let (code, _, stderr) = run(&["gc", "--max-age", "3x"], tmp.path());
    assert_eq!(code, 2);
    assert!(
        stderr.contains(
            "invalid value '3x' for '--max-age <AGE>': invalid age \"3x\": unknown time unit \"x\", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations)"
        ),
        "{stderr}"
    );
}

#[test]
fn dispatch_warns_when_the_off_band_write_falls_back() {
    let tmp = TempDir::new().unwrap();
    let db = tmp.path().join("baton.db");
    let file = tmp.path().join("a-file");
    fs::write(&file, "").unwrap();
    let root = file.join("docs");
    let out = baton_cmd()
        .args(["db", "import", STATE, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = baton_cmd()
        .args([
            "dispatch", "--thread", "th_1", "--target", "codex", "--json", "--db",
        ])
        .arg(&db)
        .arg("--handoff-dir")
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reason = format!(
        "I/O error on {}: Not a directory (os error 20)",
        root.display()
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!("warning: off-band delivery failed, so the handoff is delivered inline: {reason}")
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["delivery"]["mode"], "inline");
    assert_eq!(json["delivery"]["fallback_reason"], reason.as_str());
    assert_eq!(json["delivery"]["fallback_kind"], "io");
    assert!(json["pregrant"].is_null());
}
