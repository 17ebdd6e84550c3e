//! Mcode's fork suites, ported: `apps/server/src/__tests__/thread-forking.test.ts`
//! (Mzeey-Empire/mcode) and `apps/server/src/__tests__/fork-historical-fidelity.test.ts`
//! (Mzeey-Emipre/mcode). Each case names the peer test it mirrors; they run with the `mcode`
//! profile unless they say otherwise. Mcode's fork is a new session with a handoff of the parent's history through the
//! fork point; its snapshot is the last one at or before that point.

use super::lifecycle_common::{conversation, thread, Db};
use baton::decision::ThreadAction;
use baton::state::{Checkpoint, ProviderThreadStatus, State};
use rstest::rstest;

fn parent() -> State {
    thread(
        "parent",
        &[
            (
                "claude",
                "Fix the auth bug",
                "I fixed the auth bug by updating the middleware.",
            ),
            (
                "claude",
                "Now add tests",
                "I added comprehensive tests for the auth middleware.",
            ),
        ],
    )
}

/// Mirrors "child thread stores lineage to parent".
#[test]
fn the_child_stores_its_lineage() {
    let mut db = Db::new(parent(), "mcode");
    db.fork("parent", 1, "child");
    let p = db.load("child").thread.parent.unwrap();
    assert_eq!((p.thread.as_str(), p.run), ("parent", 1));
}

/// Mirrors "child does not copy parent sdk_session_id": the child's first run never resumes
/// the parent's provider session. On a provider that cannot fork natively it creates a session
/// of its own with the parent's history as a handoff (issue 12, lifecycle bug 1).
#[rstest]
#[case::native_fork_possible(true)]
#[case::native_fork_impossible(false)]
fn the_child_never_resumes_the_parents_session(#[case] native: bool) {
    let mut s = parent();
    if !native {
        s.providers.insert(
            "claude".into(),
            baton::state::Caps {
                native_fork: Some(false),
                ..Default::default()
            },
        );
    }
    let mut db = Db::new(s, "mcode");
    db.fork("parent", 2, "child");
    let d = db.dispatch("child", "claude", "Branch: test coverage");
    assert_ne!(d.provider_thread.as_deref(), Some("L1"));
    assert_ne!(d.decision.provider_thread.action, ThreadAction::Resume);
    let child = db.load("child");
    let l1 = child
        .provider_threads
        .iter()
        .find(|p| p.id == "L1")
        .unwrap();
    assert_eq!(l1.status, ProviderThreadStatus::Closed);
    if !native {
        let h = d
            .handoff
            .expect("the parent's history travels as a handoff");
        assert_eq!((h.covered.from, h.covered.to), (1, 2));
    }
}

/// Mirrors "child messages are independent from parent messages": what either thread does
/// after the fork stays in that thread.
#[test]
fn the_threads_go_on_independently_after_the_fork() {
    let mut db = Db::new(parent(), "mcode");
    db.fork("parent", 2, "child");
    db.turn(
        "child",
        "claude",
        "Child only: write docs.",
        "Docs written in the child.",
    );
    db.turn(
        "parent",
        "claude",
        "Parent only: ship it.",
        "Shipped from the parent.",
    );
    let parent = conversation(&db.load("parent"));
    let child = conversation(&db.load("child"));
    assert!(parent.contains("Shipped from the parent.") && !parent.contains("Child only"));
    assert!(child.contains("Docs written in the child.") && !child.contains("Parent only"));
}

/// Mirrors "empty thread has no messages to fork from": a thread without runs cannot be
/// forked, and the refusal says why.
#[test]
fn an_empty_thread_cannot_be_forked() {
    let mut db = Db::new(thread("empty", &[]), "mcode");
    let err = baton::store::fork(&mut db.store, "empty", 1, Some("child")).unwrap_err();
    assert!(
        baton::located(&err)
            .ends_with("error: cannot fork thread \"empty\" at run 1: the thread has 0 runs"),
        "{err}"
    );
}

/// Three runs with a checkpoint each (`a.ts`, `b.ts`, `c.ts`), claude unable to fork
/// natively so that the child's first run carries a handoff of the parent's history.
fn with_checkpoints(runs: &[u32]) -> State {
    let mut s = thread(
        "parent",
        &[
            ("claude", "one", "did one"),
            ("claude", "two", "did two"),
            ("claude", "three", "did three"),
        ],
    );
    let file = |r: u32| ["a.ts", "b.ts", "c.ts"][(r as usize - 1) % 3];
    s.checkpoints = runs
        .iter()
        .map(|r| Checkpoint {
            run: *r,
            files_changed: 1,
            diff_summary: Some(file(*r).to_string()),
        })
        .collect();
    s.providers.insert(
        "claude".into(),
        baton::state::Caps {
            native_fork: Some(false),
            ..Default::default()
        },
    );
    s
}

/// Mirrors `resolveForkSnapshot`'s cases: "returns the last snapshot at or before the fork
/// point", "excludes files changed after the fork point", "returns null when no snapshot falls
/// within the fork range", "returns null for an empty snapshot list", "returns the single
/// snapshot when it falls within the fork range" and "returns the latest snapshot when forking
/// from the tail". The child keeps the checkpoints up to its fork point, and its first
/// handoff names the latest of them (or none). These run with `default`, whose summary carries
/// the latest checkpoint (the `mcode` profile's summary has no checkpoint section).
#[rstest]
#[case::last_at_or_before_the_fork_point(&[1, 2, 3], 2, Some(2))]
#[case::excludes_files_changed_after_it(&[1, 2], 1, Some(1))]
#[case::none_within_the_range(&[3], 2, None)]
#[case::no_checkpoints(&[], 1, None)]
#[case::the_single_one_within_the_range(&[2], 2, Some(2))]
#[case::forking_from_the_tail(&[1, 2, 3], 3, Some(3))]
fn the_fork_keeps_the_checkpoint_at_or_before_its_point(
    #[case] checkpoints: &[u32],
    #[case] at: u32,
    #[case] latest: Option<u32>,
) {
    let mut db = Db::new(with_checkpoints(checkpoints), "default");
    db.fork("parent", at, "child");
    let child = db.load("child");
    assert!(child.checkpoints.iter().all(|c| c.run <= at));
    assert_eq!(child.checkpoints.iter().map(|c| c.run).max(), latest);
    let d = db.dispatch("child", "claude", "Go on from the fork.");
    let doc = std::fs::read_to_string(d.handoff.unwrap().document_path.unwrap()).unwrap();
    for (r, f) in [(1, "a.ts"), (2, "b.ts"), (3, "c.ts")] {
        assert_eq!(
            doc.contains(f),
            Some(r) == latest,
            "checkpoint of run {r} ({f}) in the fork at {at}:\n{doc}"
        );
    }
}
