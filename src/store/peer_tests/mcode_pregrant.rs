//! Mcode's scoped pre-grant suites, ported: `apps/server/src/services/__tests__/
//! scoped-pre-grant.test.ts` and `apps/server/src/__tests__/
//! claude-provider-scoped-pre-grant.test.ts` (Mzeey-Empire/mcode). Each case names the peer
//! test it mirrors. In Mcode the grant is issued by hand; here the grant is the one a real
//! `dispatch` issues for its off-band document, kept in the store.

use super::lifecycle_common::{thread, Db};
use baton::deliver::PathArg;
use baton::state::RunStatus;
use rstest::rstest;
use std::path::PathBuf;

/// The seed-like thread: run 1 on codex, then run 2 dispatched to claude (a full handoff,
/// off-band, with a one-use `Read` grant for run 2). Returns the store and the document.
fn granted() -> (Db, PathBuf) {
    let mut db = Db::new(
        thread(
            "child-thread-1",
            &[("codex", "Fix the auth bug.", "Fixed the middleware.")],
        ),
        "mcode",
    );
    let d = db.dispatch("child-thread-1", "claude", "Carry on.");
    let doc = d.handoff.unwrap().document_path.unwrap();
    assert_eq!(d.run, 2);
    assert_eq!(db.grants_left("child-thread-1", 2), 1);
    (db, doc)
}

/// Mirrors "path-scoped: grants the exact path, denies any other path": another file and
/// the document's own directory are denied (no prefix match); the document is allowed.
#[test]
fn the_grant_covers_the_exact_path_only() {
    let (mut db, doc) = granted();
    let t = "child-thread-1";
    assert!(!db.read(t, 2, &PathBuf::from("/etc/passwd")));
    assert!(!db.read(t, 2, doc.parent().unwrap()));
    assert!(db.read(t, 2, &doc));
}

/// Mirrors "path-scoped: matches across separator/././ normalisation": `.` components and
/// doubled separators still name the document. The peer also resolves `..`; baton refuses
/// any `..` component (a deliberate difference, docs/delivery.md rule 4).
#[rstest]
#[case::dot_components(true)]
#[case::parent_components(false)]
fn the_grant_matches_a_normalised_spelling_of_the_path(#[case] dots_only: bool) {
    let (mut db, doc) = granted();
    let dir = doc.parent().unwrap().display().to_string();
    let spelled = if dots_only {
        format!("{dir}/.//handoff.md")
    } else {
        format!(
            "{dir}/../{}/handoff.md",
            doc.parent().unwrap().file_name().unwrap().to_string_lossy()
        )
    };
    assert_eq!(
        db.read("child-thread-1", 2, &PathBuf::from(spelled)),
        dots_only
    );
}

/// Mirrors "tool-scoped: a different tool on the same path is not pre-granted".
#[test]
fn another_tool_on_the_document_is_not_granted() {
    let (mut db, doc) = granted();
    let edit = PathArg::Path(doc.clone());
    assert!(!db.check("child-thread-1", 2, "Edit", edit));
    assert!(db.read("child-thread-1", 2, &doc));
}

/// Mirrors "one-shot: a second Read of the same path on the same Turn is not pre-granted".
#[test]
fn the_grant_is_used_once() {
    let (mut db, doc) = granted();
    assert!(db.read("child-thread-1", 2, &doc));
    assert!(!db.read("child-thread-1", 2, &doc));
}

/// Mirrors "thread-scoped: a different thread's Read is not pre-granted"; the same holds for
/// another run (turn) of the same thread.
#[test]
fn another_thread_or_turn_is_not_granted() {
    let (mut db, doc) = granted();
    assert!(!db.read("other-thread", 2, &doc));
    assert!(!db.read("child-thread-1", 3, &doc));
    assert!(db.read("child-thread-1", 2, &doc));
}

/// Mirrors "turn-scoped: clear() drops the grant so it does not survive into the next Turn":
/// Mcode clears grants at turn end; baton's grant dies when its run ends, however it ends
/// (issue 15 item 8), and the next run's dispatch issues none for the old document.
#[rstest]
#[case::completed(RunStatus::Completed)]
#[case::failed(RunStatus::Failed)]
#[case::interrupted(RunStatus::Interrupted)]
fn the_grant_does_not_survive_its_turn(#[case] end: RunStatus) {
    let (mut db, doc) = granted();
    baton::store::complete_run(&mut db.store, "child-thread-1", 2, Vec::new(), end).unwrap();
    assert_eq!(db.grants_left("child-thread-1", 2), 0);
    assert!(!db.read("child-thread-1", 2, &doc));
    let d = db.dispatch("child-thread-1", "claude", "Next turn.");
    assert_eq!(d.run, 3);
    assert!(!db.read("child-thread-1", 3, &doc));
}

/// Mirrors "auto-allows a pre-granted Read without emitting a permission_request" (Claude's
/// `canUseTool`): the tool call's own arguments are checked, the Read is allowed at once, and
/// the grant is no longer active afterwards. Claude's Read sends `file_path`; the peer's
/// test sends `path`, which baton takes too.
#[rstest]
#[case::file_path("file_path")]
#[case::path("path")]
fn a_pre_granted_read_from_the_tool_arguments_is_allowed_once(#[case] key: &str) {
    let (mut db, doc) = granted();
    let args = PathArg::Args(serde_json::json!({ key: doc.display().to_string() }));
    assert!(db.check("child-thread-1", 2, "Read", args));
    assert_eq!(db.grants_left("child-thread-1", 2), 0, "no longer active");
}

/// Mirrors "does not bypass a Read of a different path (emits a permission_request)": the
/// check denies, so the app falls through to its normal permission prompt.
#[test]
fn a_read_of_another_path_is_denied_and_keeps_the_grant() {
    let (mut db, _doc) = granted();
    let args = PathArg::Args(serde_json::json!({"file_path": "/tmp/other.md"}));
    assert!(!db.check("child-thread-1", 2, "Read", args));
    assert_eq!(
        db.grants_left("child-thread-1", 2),
        1,
        "a denial uses nothing"
    );
}
