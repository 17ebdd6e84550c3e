//! `baton pregrant check` and `baton gc --db` against a real store: the grant is issued by
//! `baton dispatch` in one process and checked by others, so "used" must persist.
#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rstest::rstest;
use tempfile::TempDir;

use crate::common;

/// A database holding the seed thread, dispatched to codex (run 9), whose off-band
/// document and pre-grant were written by `baton dispatch`.
struct Dispatched {
    tmp: TempDir,
    db: PathBuf,
    root: PathBuf,
    doc: PathBuf,
}

fn baton(root: &Path) -> Command {
    let mut c = common::baton_cmd();
    c.env("BATON_HANDOFF_DIR", root).env_remove("BATON_DB");
    c
}

fn dispatched() -> Dispatched {
    let tmp = TempDir::new().unwrap();
    let db = tmp.path().join("baton.db");
    let root = tmp.path().join("docs");
    let run = |args: &[&str]| {
        let out = baton(&root)
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    run(&["db", "import", "examples/seed-switch.yaml"]);
    run(&["dispatch", "--thread", "th_1", "--target", "codex"]);
    let doc = root.join("th_1/H2/handoff.md");
    assert!(doc.is_file(), "dispatch wrote the document");
    Dispatched { tmp, db, root, doc }
}

impl Dispatched {
    /// `baton pregrant check --db DB ARGS...`: (exit code, stdout, stderr).
    fn check(&self, args: &[&str]) -> (i32, String, String) {
        let out = baton(&self.root)
            .args(["pregrant", "check", "--db"])
            .arg(&self.db)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn doc(&self) -> String {
        self.doc.display().to_string()
    }

    fn read(&self, turn: &str, path: &str) -> (i32, String, String) {
        self.check(&[
            "--thread", "th_1", "--turn", turn, "--tool", "Read", "--path", path,
        ])
    }
}

#[test]
fn a_used_grant_stays_used_in_the_next_process() {
    let d = dispatched();
    let (code, stdout, _) = d.read("9", &d.doc());
    assert_eq!(code, 0);
    assert_eq!(
        stdout.trim_end(),
        format!(
            "allow: pre-grant for thread th_1 turn 9 allows Read of {} (0 use(s) left)",
            d.doc()
        )
    );
    let (code, stdout, _) = d.read("9", &d.doc());
    assert_eq!(code, 1);
    assert_eq!(stdout.trim_end(), "deny: pre-grant already used");
}

#[test]
fn json_output_and_the_run_spelling() {
    let d = dispatched();
    let doc = d.doc();
    let args = [
        "--thread", "th_1", "--run", "9", "--tool", "Read", "--path", &doc, "--json",
    ];
    let (code, stdout, _) = d.check(&args);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["allow"], true);
    let (code, stdout, _) = d.check(&args);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim_end(),
        r#"{"allow":false,"reason":"pre-grant already used"}"#
    );
}

#[rstest]
#[case::file_path("file_path")]
#[case::path("path")]
fn the_path_comes_from_the_tools_own_argument_names(#[case] key: &str) {
    let d = dispatched();
    let args = serde_json::json!({ key: d.doc() }).to_string();
    let (code, stdout, _) = d.check(&[
        "--thread", "th_1", "--turn", "9", "--tool", "Read", "--args", &args,
    ]);
    assert_eq!(code, 0, "{stdout}");
}

/// What a denied request asks for, relative to the dispatched document.
enum Ask {
    Tool(&'static str),
    Turn(&'static str),
    Thread(&'static str),
    /// A path built from the document's directory; the closure may create files.
    Path(fn(&Dispatched) -> String),
}

#[rstest]
#[case::other_tool(Ask::Tool("Bash"), "tool Bash is not granted (only Read)")]
#[case::lowercase_tool(Ask::Tool("read"), "tool read is not granted (only Read)")]
#[case::next_turn(Ask::Turn("10"), "no pre-grant for thread th_1 turn 10")]
#[case::previous_turn(Ask::Turn("8"), "no pre-grant for thread th_1 turn 8")]
#[case::other_thread(Ask::Thread("th_2"), "no pre-grant for thread th_2 turn 9")]
#[case::sibling(Ask::Path(|d| d.doc.with_file_name("inline.md").display().to_string()), "is not the granted document")]
#[case::parent_dir(Ask::Path(|d| d.doc.parent().unwrap().display().to_string()), "is not the granted document")]
#[case::prefix(Ask::Path(|d| {
    let p = d.doc.with_file_name("handoff.md.bak");
    fs::write(&p, "x").unwrap();
    p.display().to_string()
}), "is not the granted document")]
#[case::case_variant(Ask::Path(|d| {
    let p = d.doc.with_file_name("HANDOFF.md");
    fs::write(&p, "x").unwrap();
    p.display().to_string()
}), "is not the granted document")]
#[case::symlink_to_it(Ask::Path(|d| {
    let p = d.tmp.path().join("innocent.md");
    std::os::unix::fs::symlink(&d.doc, &p).unwrap();
    p.display().to_string()
}), "is a symlink")]
#[case::dot_dot(Ask::Path(|d| format!("{}/../H2/handoff.md", d.doc.parent().unwrap().display())), "contains `..`")]
#[case::relative(Ask::Path(|_| "th_1/H2/handoff.md".to_string()), "path th_1/H2/handoff.md is not absolute")]
fn denials_name_the_reason_and_use_nothing(#[case] ask: Ask, #[case] reason: &str) {
    let d = dispatched();
    let doc = d.doc();
    let (mut thread, mut turn, mut tool, mut path) = ("th_1", "9", "Read", doc.clone());
    match ask {
        Ask::Tool(t) => tool = t,
        Ask::Turn(t) => turn = t,
        Ask::Thread(t) => thread = t,
        Ask::Path(f) => path = f(&d),
    }
    let (code, stdout, _) = d.check(&[
        "--thread", thread, "--turn", turn, "--tool", tool, "--path", &path,
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with("deny: ") && stdout.contains(reason),
        "{stdout:?} lacks {reason:?}"
    );
    // A denial consumes nothing: the real request is still allowed.
    assert_eq!(d.read("9", &doc).0, 0);
}

#[test]
fn a_missing_database_is_an_error_not_a_new_one() {
    let tmp = TempDir::new().unwrap();
    let db = tmp.path().join("none.db");
    let out = baton(tmp.path())
        .args(["pregrant", "check", "--db"])
        .arg(&db)
        .args([
            "--thread", "t", "--turn", "1", "--tool", "Read", "--path", "/x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "{}: error: no baton database here, and baton pregrant check never creates one; give the database with --db FILE, or create one with `baton db init --db {}`",
            db.display(),
            db.display()
        )
    );
    assert!(!db.exists());
}

#[rstest]
#[case::no_path(&["--thread", "t", "--turn", "1", "--tool", "Read"], "the following required arguments were not provided")]
#[case::both(&["--thread", "t", "--turn", "1", "--tool", "Read", "--path", "/x", "--args", "{}"], "cannot be used with")]
#[case::bad_json(&["--thread", "t", "--turn", "1", "--tool", "Read", "--args", "{file_path"], "--args: error: not valid JSON: ")]
#[case::repeated_key(&["--thread", "t", "--turn", "1", "--tool", "Read", "--args", r#"{"path": "/x", "path": "/y"}"#], r#"--args: error: the arguments are ambiguous: key "path" is given more than once"#)]
#[case::bad_turn(&["--thread", "t", "--turn", "x", "--tool", "Read", "--path", "/x"], "invalid value 'x' for '--run <N>'")]
fn bad_usage_exits_2(#[case] args: &[&str], #[case] message: &str) {
    let d = dispatched();
    let (code, _, stderr) = d.check(args);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn tool_arguments_without_a_path_are_denied() {
    let d = dispatched();
    let (code, stdout, _) = d.check(&[
        "--thread",
        "th_1",
        "--turn",
        "9",
        "--tool",
        "Read",
        "--args",
        r#"{"offset": 3}"#,
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim_end(),
        "deny: tool arguments carry no `file_path` or `path` string"
    );
}

fn gc(d: &Dispatched, db: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = baton(&d.root)
        .arg("gc")
        .arg("--db")
        .arg(db)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn gc_removes_a_superseded_handoff_and_keeps_the_live_one() {
    let d = dispatched();
    let out = baton(&d.root)
        .args(["regenerate", "--thread", "th_1", "--handoff", "H2", "--db"])
        .arg(&d.db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let h2 = d.root.join("th_1/H2");
    let h3 = d.root.join("th_1/H3");
    let (code, stdout, stderr) = gc(&d, &d.db, &["--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "would remove {} (superseded by a newer handoff)\nwould remove 1 handoff(s), kept 1, left 0 other entries alone\n",
            h2.display()
        )
    );
    assert!(h2.is_dir());
    let (code, _, _) = gc(&d, &d.db, &[]);
    assert_eq!(code, 0);
    assert!(!h2.exists() && h3.join("handoff.md").is_file());
}

#[test]
fn gc_removes_handoffs_of_threads_the_store_does_not_know() {
    let d = dispatched();
    let empty = d.tmp.path().join("empty.db");
    let out = baton(&d.root)
        .args(["db", "init", "--db"])
        .arg(&empty)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (code, stdout, _) = gc(&d, &empty, &[]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with(&format!(
            "removed {} (thread or handoff no longer exists)",
            d.root.join("th_1/H2").display()
        )),
        "{stdout}"
    );
    assert!(!d.doc.exists());
}

#[test]
fn gc_with_a_missing_database_removes_nothing() {
    let d = dispatched();
    let (code, stdout, stderr) = gc(&d, &d.tmp.path().join("typo.db"), &[]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(
        stderr.contains("typo.db: error: no baton database here"),
        "{stderr}"
    );
    assert!(d.doc.is_file());
}

/// macOS's `/tmp -> /private/tmp`, reproduced: the off-band root sits below a symlinked
/// directory (one this user owns). Every path baton hands out is the canonical one, so the
/// path the child is told to read is the path `pregrant check` allows.
#[test]
fn a_root_below_a_symlinked_directory_is_handed_out_canonical() {
    let tmp = TempDir::new().unwrap();
    let real = tmp.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let db = tmp.path().join("baton.db");
    let root = link.join("docs");
    let out = baton(&root)
        .args(["db", "import", "examples/seed-switch.yaml", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = baton(&root)
        .args([
            "dispatch", "--thread", "th_1", "--target", "codex", "--json", "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let canonical = fs::canonicalize(&real)
        .unwrap()
        .join("docs/th_1/H2/handoff.md");
    let canonical = canonical.display().to_string();
    assert_eq!(json["delivery"]["mode"], "off_band");
    assert_eq!(json["delivery"]["document"], canonical.as_str());
    assert_eq!(json["pregrant"]["path"], canonical.as_str());
    assert_eq!(json["handoff"]["document_path"], canonical.as_str());
    let prompt = json["handoff"]["inline"].as_str().unwrap();
    assert!(
        prompt.starts_with(&format!(
            "Before you start, read the handoff document at {canonical}:"
        )),
        "{prompt}"
    );
    let d = Dispatched {
        tmp,
        db,
        root,
        doc: PathBuf::from(&canonical),
    };
    let (code, stdout, _) = d.read("9", &canonical);
    assert_eq!(code, 0, "the path in the prompt is allowed: {stdout}");
    // The path as written (through the symlink) is still denied.
    let through_link = link.join("docs/th_1/H2/handoff.md").display().to_string();
    let (code, stdout, _) = d.read("9", &through_link);
    assert_eq!(code, 1);
    assert!(stdout.contains("passes through a symlink"), "{stdout}");
}

/// Issue 15 item 9, through the binary: `…/handoff.md/` and `{"file_path": [...], "path":
/// doc}` are denied, and neither uses up the single read.
#[test]
fn a_trailing_slash_or_ambiguous_arguments_are_denied_without_using_the_grant() {
    let d = dispatched();
    let doc = d.doc();
    let slash = format!("{doc}/");
    let (code, stdout, _) = d.check(&[
        "--thread", "th_1", "--turn", "9", "--tool", "Read", "--path", &slash,
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim_end(),
        format!(
            "deny: path {slash} ends with `/`, so it names a directory, not the granted document"
        )
    );
    let args = serde_json::json!({ "file_path": ["/etc/shadow"], "path": doc }).to_string();
    let (code, stdout, _) = d.check(&[
        "--thread", "th_1", "--turn", "9", "--tool", "Read", "--args", &args,
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim_end(),
        "deny: tool arguments are ambiguous: `file_path` is an array, not a path string"
    );
    let (code, stdout, _) = d.check(&[
        "--thread", "th_1", "--turn", "9", "--tool", "Read", "--path", &doc,
    ]);
    assert_eq!(code, 0, "{stdout}");
}
