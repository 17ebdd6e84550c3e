//! Staleness from the clock and the workspace (docs/facts.md, "Time and workspace"): real
//! repositories made here (`git init`, commits, a branch switch, dirty files), driven through
//! state files, the workspace step, the CLI (`explain`, `handoff` on a real-format session
//! log), the store and the service; replay after the repository moved on; bad input.

use crate::common;
use baton::state::{self, GitSince, GitSnapshot, State, Workspace};
use baton::Engine;
use rstest::rstest;
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn write(dir: &Path, file: &str, text: &str) {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn commit(dir: &Path, file: &str, text: &str) -> String {
    write(dir, file, text);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", &format!("change {file}")]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A repository with one commit on `main`.
fn repo() -> (tempfile::TempDir, PathBuf, String) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    let head = commit(&dir, "README.md", "app\n");
    (t, dir, head)
}

/// A thread whose codex thread C1 ran run 1 at `then`, and a request for codex now.
fn state_at(then: &Workspace, cwd: &str) -> State {
    let yaml = format!(
        r#"
version: 1
thread: {{id: th_ws, title: Workspace}}
provider_threads:
  - {{id: C1, provider: codex}}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    started_at: "2026-01-02T05:40:00Z"
    ended_at: "2026-01-02T06:00:00Z"
    workspace: {}
    items:
      - {{kind: user_message, text: "Fix the router."}}
      - {{kind: file_change, path: src/router.rs, change: modified}}
request:
  provider: codex
  at: "2026-01-05T10:00:00Z"
  workspace: {{cwd: {cwd:?}}}
"#,
        serde_json::to_string(then).unwrap()
    );
    state::parse_str(&yaml, state::Format::Yaml, "t.yaml").unwrap()
}

fn decide(state: &State) -> baton::Decision {
    Engine::new("default").unwrap().decide(state, None).unwrap()
}

fn fact(d: &baton::Decision, name: &str) -> serde_json::Value {
    d.trace
        .iter()
        .flat_map(|t| t.values.iter())
        .find(|(k, _)| k.as_str() == name)
        .map(|(_, v)| serde_json::to_value(v).unwrap())
        .unwrap_or_else(|| panic!("no rule read {name}"))
}

/// Every time and workspace fact, as a policy reads it.
const PROBE: &str = r#"
policy "probe" {}
stale idle when target.idle_seconds != null and target.idle_seconds > 0
stale age when thread.age_seconds != null and thread.age_seconds > 0
stale cwd when workspace.cwd_changed
stale branch when workspace.branch_changed
stale head when workspace.head_moved
stale commits when workspace.commits_since_target != null and workspace.commits_since_target > 0
stale files when workspace.files_changed_outside != null and "src/a.rs" in workspace.files_changed_outside
stale count when workspace.files_changed_outside_count != null and workspace.files_changed_outside_count > 0
strategy { full_new otherwise }
"#;

fn probe(state: &State) -> (baton::Decision, serde_json::Map<String, serde_json::Value>) {
    let e = Engine::from_text("probe.policy", PROBE).unwrap();
    let d = e.decide(state, Some("codex")).unwrap();
    let mut m = serde_json::Map::new();
    for t in d.trace.iter() {
        for (k, v) in t.values.iter() {
            m.insert(k.to_string(), serde_json::to_value(v).unwrap());
        }
    }
    (d, m)
}

#[test]
fn a_moved_repository_gives_every_fact_and_the_explain_line() {
    let (_t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, notes) = baton::workspace::live(cwd);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        then.git.as_ref().unwrap().head.as_deref(),
        Some(first.as_str())
    );
    assert_eq!(then.git.as_ref().unwrap().branch.as_deref(), Some("main"));
    // Two commits by someone else, one of them to a file the thread changed itself.
    commit(&dir, "src/a.rs", "a\n");
    let now = commit(&dir, "src/router.rs", "r\n");
    write(&dir, "src/dirty.rs", "d\n");
    let mut st = state_at(&then, cwd);
    let notes = baton::workspace::enrich(&mut st, "codex");
    assert!(notes.is_empty(), "{notes:?}");
    let git = st.request.workspace.as_ref().unwrap().git.as_ref().unwrap();
    assert_eq!(git.head.as_deref(), Some(now.as_str()));
    assert_eq!(git.dirty, vec!["src/dirty.rs"]);
    let since = git.since.as_ref().unwrap();
    assert_eq!(since.commits, Some(2));
    assert_eq!(
        since.files.as_deref().unwrap(),
        ["src/router.rs".to_string(), "src/a.rs".to_string()]
    );

    let (d, f) = probe(&st);
    assert_eq!(f["target.idle_seconds"], 273_600);
    assert_eq!(f["thread.age_seconds"], 274_800);
    assert_eq!(f["workspace.cwd_changed"], false);
    assert_eq!(f["workspace.branch_changed"], false);
    assert_eq!(f["workspace.head_moved"], true);
    assert_eq!(f["workspace.commits_since_target"], 2);
    // src/router.rs: the thread changed it in run 1, and a commit changed it after.
    assert_eq!(
        f["workspace.files_changed_outside"],
        serde_json::json!(["src/dirty.rs", "src/router.rs", "src/a.rs"]),
    );
    assert_eq!(f["workspace.files_changed_outside_count"], 3);
    let w = d.workspace.as_ref().unwrap();
    assert_eq!(
        w.line.as_deref(),
        Some(
            format!(
                "idle 3 d 4 h; HEAD moved {} -> {} (2 commits), 3 files changed outside the thread",
                &first[..7],
                &now[..7]
            )
            .as_str()
        )
    );
    let explained = Engine::from_text("probe.policy", PROBE)
        .unwrap()
        .explain(&d);
    assert!(
        explained.contains(&format!(
            "  workspace idle 3 d 4 h; HEAD moved {}",
            &first[..7]
        )),
        "{explained}"
    );
}

#[test]
fn the_default_policy_starts_afresh_on_another_branch_and_another_directory() {
    let (_t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    git(&dir, &["checkout", "-q", "-b", "feature"]);
    let mut st = state_at(&then, cwd);
    baton::workspace::enrich(&mut st, "codex");
    let d = decide(&st);
    assert_eq!(d.stale, vec!["branch_changed"]);
    assert_eq!(d.strategy.as_str(), "full_new");
    assert_eq!(fact(&d, "workspace.branch_changed"), true);

    let other = dir.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut st = state_at(&then, other.to_str().unwrap());
    baton::workspace::enrich(&mut st, "codex");
    let d = decide(&st);
    assert_eq!(d.stale, vec!["cwd_changed"]);
    assert_eq!(d.strategy.as_str(), "full_new");
    let w = d.workspace.unwrap();
    assert!(
        w.notes
            .iter()
            .any(|n| n.ends_with("other is not in a git repository")),
        "{:?}",
        w.notes
    );
}

#[test]
fn no_handoff_with_a_moved_workspace_sends_the_workspace_note() {
    let (_t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    let now = commit(&dir, "src/a.rs", "a\n");
    let mut st = state_at(&then, cwd);
    baton::workspace::enrich(&mut st, "codex");
    let d = decide(&st);
    assert_eq!(d.strategy.as_str(), "no_handoff");
    let note = d.workspace.as_ref().unwrap().note.clone().unwrap();
    assert_eq!(
        note,
        format!(
            "The workspace changed since this thread last ran.\n- HEAD moved {} -> {} (1 commit)\n- 1 file changed outside this thread (newest first): src/a.rs\nRe-read these files before relying on what the thread knew of them.",
            &first[..7],
            &now[..7]
        )
    );
    let explained = Engine::new("default").unwrap().explain(&d);
    assert!(
        explained.contains("sends the workspace note (")
            && explained.contains("characters) with the first turn"),
        "{explained}"
    );
    // t3code and mcode keep their systems' behaviour: no note.
    for profile in ["t3code", "mcode"] {
        let d = Engine::new(profile).unwrap().decide(&st, None).unwrap();
        assert_eq!(d.strategy.as_str(), "no_handoff", "{profile}");
        assert_eq!(d.workspace.unwrap().note, None, "{profile}");
    }
}

#[test]
fn a_handoff_document_carries_the_workspace_section() {
    let (_t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    commit(&dir, "src/a.rs", "a\n");
    let mut st = state_at(&then, cwd);
    // A run on claude since: codex gets a delta, with the workspace section.
    st.runs.push(
        serde_yaml::from_str(
            "{ordinal: 2, provider: claude, items: [{kind: user_message, text: Go on.}]}",
        )
        .unwrap(),
    );
    baton::workspace::enrich(&mut st, "codex");
    let o = Engine::new("default").unwrap().run(&st, None).unwrap();
    assert_eq!(o.decision.strategy.as_str(), "delta_existing");
    let doc = &o.rendered.as_ref().unwrap().document;
    assert!(doc.contains("Workspace changes"), "{doc}");
    assert!(
        doc.contains(&format!("HEAD moved {} ->", &first[..7])),
        "{doc}"
    );
    assert!(doc.contains("src/a.rs"), "{doc}");
    assert_eq!(o.decision.workspace.unwrap().note, None);
}

#[test]
fn replay_from_the_logged_state_needs_no_repository() {
    let (t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    git(&dir, &["checkout", "-q", "-b", "feature"]);
    commit(&dir, "src/a.rs", "a\n");
    let mut st = state_at(&then, cwd);
    baton::workspace::enrich(&mut st, "codex");
    let first = decide(&st);
    let logged = state::to_yaml(&st);
    // The repository moves on, then goes away.
    git(&dir, &["checkout", "-q", "main"]);
    commit(&dir, "src/b.rs", "b\n");
    drop(t);
    let mut again = state::parse_str(&logged, state::Format::Yaml, "logged.yaml").unwrap();
    // The workspace step leaves a state that has its history alone.
    baton::workspace::enrich(&mut again, "codex");
    let second = decide(&again);
    assert_eq!(first.to_json(), second.to_json());
    assert_eq!(second.stale, vec!["branch_changed"]);
}

#[test]
fn precomputed_history_in_the_state_is_used_as_written() {
    let then = Workspace {
        cwd: Some("/nowhere/app".into()),
        git: Some(GitSnapshot {
            head: Some("a1b2c3d4e5f60718293a4b5c6d7e8f9012345678".into()),
            branch: Some("main".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut st = state_at(&then, "/nowhere/app");
    st.request.workspace.as_mut().unwrap().git = Some(GitSnapshot {
        head: Some("e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3".into()),
        branch: Some("main".into()),
        dirty: vec!["src/auth.rs".into()],
        since: Some(GitSince {
            head: "a1b2c3d".into(),
            commits: Some(14),
            files: Some(vec!["src/router.rs".into(), "Cargo.toml".into()]),
            ..Default::default()
        }),
        ..Default::default()
    });
    let (d, f) = probe(&st);
    assert_eq!(f["workspace.commits_since_target"], 14);
    // The dirty file first, then the committed ones.
    assert_eq!(f["workspace.files_changed_outside_count"], 3);
    assert_eq!(
        d.workspace.unwrap().line.as_deref(),
        Some("idle 3 d 4 h; HEAD moved a1b2c3d -> e4f5a6b (14 commits), 3 files changed outside the thread")
    );
}

/// The worked example of docs/facts.md decides and explains as the page says.
#[test]
fn the_worked_example_of_the_facts_reference() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/tests/fixtures/workspace-note.yaml"
    );
    let st = state::load_file(Path::new(path)).unwrap();
    let d = decide(&st);
    assert_eq!(d.strategy.as_str(), "no_handoff");
    let w = d.workspace.clone().unwrap();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/facts.md")).unwrap();
    let line = w.line.unwrap();
    assert!(doc.contains(&format!("  workspace {line}\n")), "{line}");
    assert!(doc.contains(&format!("```text\n{}\n```", w.note.unwrap())));
}

// ----- bad input -----

fn moved_state(then_head: &str, cwd: &str) -> State {
    let then = Workspace {
        cwd: Some(cwd.into()),
        git: Some(GitSnapshot {
            head: Some(then_head.into()),
            branch: Some("main".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    state_at(&then, cwd)
}

#[test]
fn a_directory_that_is_no_repository_gives_null_facts_and_a_note() {
    let t = tempfile::tempdir().unwrap();
    let cwd = t.path().to_str().unwrap();
    let mut st = moved_state("a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", cwd);
    baton::workspace::enrich(&mut st, "codex");
    let (d, f) = probe(&st);
    assert_eq!(f["workspace.head_moved"], serde_json::Value::Null);
    assert_eq!(f["workspace.commits_since_target"], serde_json::Value::Null);
    assert_eq!(f["workspace.cwd_changed"], false);
    assert_eq!(
        d.workspace.unwrap().notes,
        vec![format!("{cwd} is not in a git repository")]
    );
}

#[test]
fn a_bare_a_corrupt_and_a_missing_repository_give_notes() {
    let t = tempfile::tempdir().unwrap();
    let bare = t.path().join("bare.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    let (ws, notes) = baton::workspace::live(bare.to_str().unwrap());
    assert_eq!(ws.git.as_ref().unwrap().head, None);
    assert!(
        notes.iter().any(|n| n.contains("is a bare repository")),
        "{notes:?}"
    );

    let (_t2, dir, _) = repo();
    std::fs::write(dir.join(".git/HEAD"), "garbage\n").unwrap();
    let (ws, notes) = baton::workspace::live(dir.to_str().unwrap());
    assert!(ws.git.is_none() || ws.git.as_ref().unwrap().head.is_none());
    assert!(
        notes.iter().any(|n| n.starts_with("cannot read")),
        "{notes:?}"
    );

    let (ws, notes) = baton::workspace::live("/no/such/dir");
    assert!(ws.git.is_none());
    assert_eq!(
        notes,
        vec!["/no/such/dir is not a directory on this machine"]
    );
}

#[test]
fn a_detached_head_has_no_branch_and_says_so() {
    let (_t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    commit(&dir, "src/a.rs", "a\n");
    git(&dir, &["checkout", "-q", "--detach", &first]);
    let mut st = state_at(&then, cwd);
    baton::workspace::enrich(&mut st, "codex");
    let git = st.request.workspace.as_ref().unwrap().git.clone().unwrap();
    assert_eq!(git.branch, None);
    let (d, f) = probe(&st);
    assert_eq!(f["workspace.branch_changed"], serde_json::Value::Null);
    assert_eq!(f["workspace.head_moved"], false);
    assert_eq!(f["workspace.commits_since_target"], 0);
    assert!(d
        .workspace
        .unwrap()
        .notes
        .contains(&"a detached HEAD has no branch: workspace.branch_changed unknown".to_string()));
}

#[test]
fn a_head_that_no_longer_exists_and_a_shallow_clone_leave_the_history_unknown() {
    let (t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    // Rebased away: the target's HEAD is in no repository.
    let mut st = moved_state("0123456789abcdef0123456789abcdef01234567", cwd);
    baton::workspace::enrich(&mut st, "codex");
    let (d, f) = probe(&st);
    assert_eq!(f["workspace.head_moved"], true);
    assert_eq!(f["workspace.commits_since_target"], serde_json::Value::Null);
    assert_eq!(
        f["workspace.files_changed_outside"],
        serde_json::Value::Null
    );
    let notes = d.workspace.unwrap().notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("the target's last HEAD 0123456 is not in the repository")),
        "{notes:?}"
    );

    // A shallow clone of a two-commit history: the first commit is cut.
    let second = commit(&dir, "src/a.rs", "a\n");
    let first = git(&dir, &["rev-parse", "HEAD~1"]);
    let shallow = t.path().join("shallow");
    let o = Command::new("git")
        .args(["clone", "-q", "--depth", "1"])
        .arg(format!("file://{}", dir.display()))
        .arg(&shallow)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut st = moved_state(&first, shallow.to_str().unwrap());
    baton::workspace::enrich(&mut st, "codex");
    let git = st.request.workspace.as_ref().unwrap().git.clone().unwrap();
    assert_eq!(git.head.as_deref(), Some(second.as_str()));
    let since = git.since.unwrap();
    assert_eq!(since.commits, None);
    assert!(
        since.notes.iter().any(|n| n.contains("shallow clone")),
        "{:?}",
        since.notes
    );
}

#[test]
fn a_hundred_thousand_changed_files_are_bounded() {
    let (_t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    for d in 0..100 {
        let sub = dir.join(format!("gen/{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("{f}.txt")), "x").unwrap();
        }
    }
    let mut st = state_at(&then, cwd);
    baton::workspace::enrich(&mut st, "codex");
    let git = st.request.workspace.as_ref().unwrap().git.clone().unwrap();
    assert_eq!(git.dirty.len(), 1_000);
    assert_eq!(git.dirty_more, 99_000);
    let (d, f) = probe(&st);
    assert_eq!(f["workspace.files_changed_outside_count"], 100_000);
    assert_eq!(
        f["workspace.files_changed_outside"]
            .as_array()
            .unwrap()
            .len(),
        1_000
    );
    let w = d.workspace.unwrap();
    assert!(
        w.notes
            .iter()
            .any(|n| n.starts_with("99000 more changed files")),
        "{:?}",
        w.notes
    );
    let note = w.note;
    assert_eq!(note, None, "the probe policy has its own summary: no note");
}

#[rstest]
#[case::unparseable(
    "yesterday",
    "2026-01-02T06:00:00Z",
    "request.at \"yesterday\" is not an RFC 3339 date (2026-01-05T10:00:00Z)"
)]
#[case::out_of_order("2026-01-01T00:00:00Z", "2026-01-02T06:00:00Z", "runs[1].ended_at is after request.at (2026-01-02T06:00:00Z > 2026-01-01T00:00:00Z): timestamps out of order, left unknown")]
#[case::end_in_the_future("2026-01-05T10:00:00Z", "2027-01-01T00:00:00Z", "runs[1].ended_at is after request.at (2027-01-01T00:00:00Z > 2026-01-05T10:00:00Z): timestamps out of order, left unknown")]
#[case::bad_end(
    "2026-01-05T10:00:00Z",
    "02/01/2026",
    "runs[1].ended_at \"02/01/2026\" is not an RFC 3339 date (2026-01-05T10:00:00Z)"
)]
fn bad_timestamps_give_null_and_a_note(#[case] at: &str, #[case] ended: &str, #[case] note: &str) {
    let mut st = moved_state("a1b2c3d", "/nowhere");
    st.request.at = Some(at.into());
    st.runs[0].ended_at = Some(ended.into());
    let (d, f) = probe(&st);
    assert_eq!(f["target.idle_seconds"], serde_json::Value::Null);
    let w = d.workspace.clone().unwrap();
    assert!(w.notes.contains(&note.to_string()), "{:?}", w.notes);
    // explain shows the note.
    let e = Engine::from_text("probe.policy", PROBE)
        .unwrap()
        .explain(&d);
    assert!(e.contains(&format!("note: {note}")), "{e}");
}

#[test]
fn a_run_that_ended_before_it_started_has_no_idle_time() {
    let mut st = moved_state("a1b2c3d", "/nowhere");
    st.runs[0].started_at = Some("2026-01-03T00:00:00Z".into());
    let (d, f) = probe(&st);
    assert_eq!(f["target.idle_seconds"], serde_json::Value::Null);
    assert!(d
        .workspace
        .unwrap()
        .notes
        .iter()
        .any(|n| n.starts_with("run 1 ended before it started")));
}

// ----- the CLI, the importer, the store and the service -----

/// A session log imported as `baton import --from TOOL LOG` prints it.
fn import_state(tool: &str, log: &Path) -> baton::State {
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["import", "--from", tool])
        .arg(log)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    baton::testing::state_from_yaml(&String::from_utf8(o.stdout).unwrap()).unwrap()
}

fn baton(args: &[&str], home: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("HOME", home)
        .env("BATON_HANDOFF_DIR", home.join("docs"))
        .env("BATON_DB", home.join("b.db"))
        .env_remove("BATON_FAULT")
        .output()
        .unwrap()
}

fn claude_line(
    uuid: &str,
    parent: &str,
    ts: &str,
    cwd: &str,
    branch: &str,
    ty: &str,
    content: &str,
) -> String {
    let message = if ty == "user" {
        serde_json::json!({"role": "user", "content": content})
    } else {
        serde_json::json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": content}]})
    };
    serde_json::json!({
        "parentUuid": if parent.is_empty() { serde_json::Value::Null } else { parent.into() },
        "isSidechain": false, "userType": "external", "cwd": cwd,
        "sessionId": "5b1e7a52-1111-4c61-9e2a-5d8f0b6a1c23", "version": "2.0.61",
        "gitBranch": branch, "type": ty, "uuid": uuid, "timestamp": ts, "message": message
    })
    .to_string()
}

#[test]
fn a_claude_log_gives_times_and_workspaces_and_handoff_reads_the_live_workspace() {
    let (t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let log = [
        claude_line(
            "u1",
            "",
            "2026-01-02T05:40:00.000Z",
            cwd,
            "main",
            "user",
            "Fix the router.",
        ),
        claude_line(
            "a1",
            "u1",
            "2026-01-02T05:59:00.000Z",
            cwd,
            "main",
            "assistant",
            "Done.",
        ),
        claude_line(
            "u2",
            "a1",
            "2026-01-02T06:10:00.000Z",
            cwd,
            "main",
            "user",
            "Now the docs.",
        ),
        claude_line(
            "a2",
            "u2",
            "2026-01-02T06:20:00.000Z",
            cwd,
            "feature",
            "assistant",
            "Done too.",
        ),
    ]
    .join("\n");
    let file = t.path().join("session.jsonl");
    std::fs::write(&file, log + "\n").unwrap();
    let imported = import_state("claude-code", &file);
    let runs = &imported.runs;
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0].started_at.as_deref(),
        Some("2026-01-02T05:40:00.000Z")
    );
    assert_eq!(
        runs[0].ended_at.as_deref(),
        Some("2026-01-02T05:59:00.000Z")
    );
    assert_eq!(
        runs[1].ended_at.as_deref(),
        Some("2026-01-02T06:20:00.000Z")
    );
    let ws = runs[1].workspace.as_ref().unwrap();
    assert_eq!(ws.cwd.as_deref(), Some(cwd));
    assert_eq!(ws.git.as_ref().unwrap().branch.as_deref(), Some("feature"));

    // The session's directory is on `main` now: back to claude, the thread last ran on
    // `feature`, so the default policy starts it afresh.
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let o = baton(
        &[
            "handoff",
            "--from",
            file.to_str().unwrap(),
            "--to",
            "claude",
            "--explain",
        ],
        &home,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("branch_changed"), "{out}");
    assert!(out.contains("  workspace idle "), "{out}");
    assert!(out.contains("branch changed"), "{out}");
}

#[test]
fn a_codex_log_gives_the_session_git_state_to_its_first_run() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/import/codex/rollout-2026-11-30T11-00-00-0199aa11-2222-7333-8444-555566667777.jsonl"
    );
    let imported = import_state("codex", Path::new(file));
    let first = &imported.runs[0];
    let git = first.workspace.as_ref().unwrap().git.as_ref().unwrap();
    assert_eq!(git.head.as_deref(), Some("abc"));
    assert_eq!(git.branch.as_deref(), Some("main"));
    assert!(first.started_at.is_some() && first.ended_at.is_some());
    if let Some(second) = imported.runs.get(1) {
        let head = second
            .workspace
            .as_ref()
            .and_then(|w| w.git.as_ref())
            .and_then(|g| g.head.as_deref());
        assert_eq!(
            head, None,
            "the session's start HEAD is not guessed for later runs"
        );
    }
}

#[test]
fn the_store_records_times_and_workspaces_and_decides_on_them() {
    let (t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let seed = t.path().join("seed.yaml");
    std::fs::write(
        &seed,
        "version: 1\nthread: {id: th_s}\nrequest: {provider: codex}\n",
    )
    .unwrap();
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    ok(baton(&["db", "init"], &home));
    ok(baton(&["db", "import", seed.to_str().unwrap()], &home));
    ok(baton(
        &[
            "dispatch", "--thread", "th_s", "--target", "codex", "--cwd", cwd,
        ],
        &home,
    ));
    let items = t.path().join("items.yaml");
    std::fs::write(&items, "- {kind: user_message, text: Fix it.}\n").unwrap();
    ok(baton(
        &[
            "complete",
            "--thread",
            "th_s",
            "--run",
            "1",
            "--items",
            items.to_str().unwrap(),
            "--cwd",
            cwd,
        ],
        &home,
    ));
    let exported = ok(baton(&["db", "export", "--thread", "th_s"], &home));
    let st = state::parse_str(&exported, state::Format::Yaml, "export").unwrap();
    let run = &st.runs[0];
    assert!(
        run.started_at.is_some() && run.ended_at.is_some(),
        "{exported}"
    );
    let git = run.workspace.as_ref().unwrap().git.as_ref().unwrap();
    assert_eq!(git.head.as_deref(), Some(first.as_str()));

    // The repository moves on; the next dispatch on codex sees it.
    let now = commit(&dir, "src/a.rs", "a\n");
    let out = ok(baton(
        &[
            "dispatch", "--thread", "th_s", "--target", "codex", "--cwd", cwd, "--json",
        ],
        &home,
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let line = v["workspace"]["line"].as_str().unwrap_or_default();
    assert!(
        line.contains(&format!(
            "HEAD moved {} -> {} (1 commit)",
            &first[..7],
            &now[..7]
        )),
        "{out}"
    );
    assert_eq!(v["strategy"], "no_handoff");
    assert!(v["workspace"]["note"]
        .as_str()
        .unwrap()
        .contains("src/a.rs"));
}

/// A run of the thread after the target's last one changed a file: it is in the handoff, not
/// outside the thread.
#[test]
fn what_the_thread_changed_since_is_not_outside() {
    let (_t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    commit(&dir, "src/a.rs", "a\n");
    commit(&dir, "src/b.rs", "b\n");
    let mut st = state_at(&then, cwd);
    st.runs.push(
        serde_yaml::from_str(&format!(
            "{{ordinal: 2, provider: claude, items: [{{kind: file_change, path: {cwd}/src/a.rs, change: modified}}]}}"
        ))
        .unwrap(),
    );
    baton::workspace::enrich(&mut st, "codex");
    let (_, f) = probe(&st);
    assert_eq!(
        f["workspace.files_changed_outside"],
        serde_json::json!(["src/b.rs"])
    );
}

use crate::serve_support;

/// The service takes the same fields: `dispatch` with `at` and `cwd`, `completeRun` with
/// `ended_at` and `cwd`; the next dispatch sees the repository moved and the idle time.
#[test]
fn the_service_records_times_and_workspaces() {
    use serde_json::json;
    let (t, dir, first) = repo();
    let cwd = dir.to_str().unwrap();
    let mut s = serve_support::stdio(t.path(), &[]);
    s.client.result(
        "thread/import",
        json!({"state": {"version": 1, "thread": {"id": "th_v"}, "request": {"provider": "codex"}}}),
    );
    s.client.result(
        "dispatch",
        json!({"thread": "th_v", "target": "codex", "at": "2026-01-02T05:40:00Z", "cwd": cwd}),
    );
    s.client.result(
        "completeRun",
        json!({"thread": "th_v", "run": 1, "items": [{"kind": "user_message", "text": "Go."}],
               "ended_at": "2026-01-02T06:00:00Z", "cwd": cwd}),
    );
    let st = s.client.result("thread/export", json!({"thread": "th_v"}));
    let run = &st["state"]["runs"][0];
    assert_eq!(run["started_at"], "2026-01-02T05:40:00Z", "{st}");
    assert_eq!(run["ended_at"], "2026-01-02T06:00:00Z");
    assert_eq!(run["workspace"]["git"]["head"], first.as_str());
    let now = commit(&dir, "src/a.rs", "a\n");
    let d = s.client.result(
        "dispatch",
        json!({"thread": "th_v", "target": "codex", "at": "2026-01-05T10:00:00Z", "cwd": cwd, "trace": false}),
    );
    assert_eq!(d["strategy"], "no_handoff", "{d}");
    assert_eq!(
        d["workspace"]["line"],
        format!(
            "idle 3 d 4 h; HEAD moved {} -> {} (1 commit), 1 file changed outside the thread",
            &first[..7],
            &now[..7]
        )
    );
    assert!(d["workspace"]["note"]
        .as_str()
        .unwrap()
        .contains("src/a.rs"));
    // A date the service cannot read is a note, not an error.
    s.client.result(
        "completeRun",
        json!({"thread": "th_v", "run": 2, "items": [], "ended_at": "soon"}),
    );
    let d = s.client.result(
        "dispatch",
        json!({"thread": "th_v", "target": "codex", "at": "2026-01-05T11:00:00Z", "trace": false}),
    );
    let notes = d["workspace"]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(
            |n| n == "runs[2].ended_at \"soon\" is not an RFC 3339 date (2026-01-05T10:00:00Z)"
        ),
        "{d}"
    );
    assert_eq!(s.stop(), 0);
}

/// A stored thread decided on a window (the runs after the target's last one) gets the same
/// time and workspace facts as on the whole thread: the target's last run and the thread's
/// first run come with the window.
#[test]
fn a_windowed_store_dispatch_sees_the_runs_before_its_window() {
    let (t, dir, _) = repo();
    let cwd = dir.to_str().unwrap();
    let (then, _) = baton::workspace::live(cwd);
    commit(&dir, "src/a.rs", "a\n");
    let mut st = state_at(&then, cwd);
    st.provider_threads
        .push(serde_yaml::from_str("{id: L1, provider: claude}").unwrap());
    for o in 2..=4u32 {
        st.runs.push(
            serde_yaml::from_str(&format!(
                "{{ordinal: {o}, provider: claude, provider_thread: L1, started_at: \"2026-01-03T0{o}:00:00Z\", ended_at: \"2026-01-03T0{o}:30:00Z\", items: [{{kind: user_message, text: run {o}}}]}}"
            ))
            .unwrap(),
        );
    }
    let mut store = baton::store::Store::open_in_memory().unwrap();
    store.import(&st).unwrap();
    let req = baton::store::DispatchRequest {
        thread: "th_ws".into(),
        target: "codex".into(),
        at: st.request.at.clone(),
        workspace: st.request.workspace.clone(),
        ..Default::default()
    };
    let p = common::policy("default").unwrap();
    let stored = baton::store::dispatch(&mut store, &engine(&p, &t.path().join("docs")), &req)
        .unwrap()
        .decision;
    let mut whole = st.clone();
    baton::workspace::enrich(&mut whole, "codex");
    let direct = decide(&whole);
    assert_eq!(stored.workspace, direct.workspace);
    assert_eq!(stored.strategy, direct.strategy);
    assert!(stored
        .workspace
        .unwrap()
        .line
        .unwrap()
        .starts_with("idle 3 d 4 h; HEAD moved"),);
}

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &std::sync::Arc<baton::Policy>, docs: &std::path::Path) -> baton::Engine {
    common::engine_of(p, Some(docs.to_path_buf()))
}
