//! t3code's thread-fork suite, ported: `apps/server/src/orchestration-v2/testkit/
//! ThreadFork.integration.test.ts` (pingdotgg/t3code). Each case names the peer test it
//! mirrors. The peer drives recorded provider transcripts; here the store's lifecycle
//! operations are driven with the `default` profile, which forks natively as t3code does
//! (the `t3code` profile's own native-fork rung is helper i12b's part; see
//! README-lifecycle.md).

use super::lifecycle_common::{conversation, thread, Db};
use baton::decision::ThreadAction;
use baton::state::{ProviderThreadStatus, RunStatus, TransferStatus, TransferType};
use rstest::rstest;

/// Mirrors "creates an idle app fork and resolves it with Codex native thread/fork on first
/// dispatch" and "... with Claude native session fork on first dispatch": forking chooses
/// nothing provider-specific; the first dispatch forks the source run's provider thread, the
/// child gets exactly one provider thread of its own (forked from the source's), and the fork
/// transfer resolves `native_fork` and is consumed by that run.
#[rstest]
#[case::codex("codex", "C1")]
#[case::claude("claude", "L1")]
fn an_idle_fork_resolves_natively_on_its_first_dispatch(
    #[case] provider: &str,
    #[case] source: &str,
) {
    let mut db = Db::new(
        thread("src", &[(provider, "Say fork native source.", "source ok")]),
        "default",
    );
    db.fork("src", 1, "child");
    let child = db.load("child");
    assert_eq!(
        child.thread.parent.as_ref().map(|p| p.thread.as_str()),
        Some("src")
    );
    let t = &child.transfers[0];
    assert_eq!(
        (t.kind, t.status),
        (TransferType::Fork, TransferStatus::Pending)
    );

    let d = db.turn("child", provider, "Say fork native ok.", "fork native ok");
    assert_eq!(d.decision.strategy.as_str(), "native_fork");
    assert_eq!(d.decision.provider_thread.action, ThreadAction::ForkNative);
    assert_eq!(d.decision.provider_thread.id.as_deref(), Some(source));
    assert!(
        d.handoff.is_none(),
        "a native fork carries its context itself"
    );
    let child = db.load("child");
    let own: Vec<_> = child
        .provider_threads
        .iter()
        .filter(|p| p.status != ProviderThreadStatus::Closed)
        .collect();
    assert_eq!(own.len(), 1, "one provider thread of the child's own");
    assert_eq!(Some(own[0].id.clone()), d.provider_thread);
    assert_ne!(own[0].id, source);
    let t = &child.transfers[0];
    assert_eq!(t.status, TransferStatus::Consumed);
    assert_eq!(t.resolution.as_deref(), Some("native_fork"));
    assert_eq!(child.runs[1].provider_thread, d.provider_thread);
    assert!(conversation(&child).contains("fork native ok"));
}

/// Mirrors the same two tests' "duplicate fork command must return the receipt without
/// creating another transfer". baton refuses a second fork into the same child instead of
/// returning a receipt (there is no command id to recognise a retry by); either way no second
/// transfer is created.
#[test]
fn forking_into_the_same_child_twice_creates_no_second_transfer() {
    let mut db = Db::new(thread("src", &[("codex", "a", "b")]), "default");
    db.fork("src", 1, "child");
    let err = baton::store::fork(&mut db.store, "src", 1, Some("child")).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot fork thread \"src\" at run 1: a thread \"child\" is already in the database; name another child"),
        "{err}"
    );
    assert_eq!(db.load("child").transfers.len(), 1);
}

/// Mirrors "forks a Codex native thread at the selected native turn boundary" and "forks a
/// Claude native session from an earlier completed source turn": a fork at run 1 of two
/// carries run 1 only, natively, and nothing of run 2 appears in the child.
#[rstest]
#[case::codex("codex")]
#[case::claude("claude")]
fn a_fork_at_an_earlier_run_inherits_only_the_runs_up_to_it(#[case] provider: &str) {
    let mut db = Db::new(
        thread(
            "src",
            &[
                (
                    provider,
                    "Remember fork boundary alpha.",
                    "fork boundary alpha",
                ),
                (
                    provider,
                    "Remember fork boundary beta.",
                    "fork boundary beta",
                ),
            ],
        ),
        "default",
    );
    db.fork("src", 1, "child");
    let d = db.turn(
        "child",
        provider,
        "Repeat what you remember.",
        "fork boundary alpha",
    );
    assert_eq!(d.decision.strategy.as_str(), "native_fork");
    let child = db.load("child");
    assert_eq!(
        child.runs.len(),
        2,
        "run 1 inherited, run 2 the child's own"
    );
    let text = conversation(&child);
    assert!(text.contains("fork boundary alpha"), "{text}");
    assert!(!text.contains("fork boundary beta"), "{text}");
    assert_eq!(
        child.transfers[0].resolution.as_deref(),
        Some("native_fork")
    );
}

/// Mirrors "keeps a Claude native fork stable when the source thread rolls back": rolling the
/// source back past the fork's later runs changes nothing in the fork, whose next run resumes
/// its own provider thread with no handoff.
#[test]
fn a_native_fork_is_stable_when_its_source_rolls_back() {
    let mut db = Db::new(
        thread(
            "src",
            &[
                (
                    "claude",
                    "Remember fork boundary alpha.",
                    "fork boundary alpha",
                ),
                (
                    "claude",
                    "Remember fork boundary beta.",
                    "fork boundary beta",
                ),
            ],
        ),
        "default",
    );
    db.fork("src", 1, "child");
    db.turn("child", "claude", "Repeat.", "fork boundary alpha");
    let before = db.load("child");
    let report = baton::store::rollback(&mut db.store, "src", 1).unwrap();
    assert_eq!(report.runs_rolled_back, vec![2]);
    let src = db.load("src");
    assert_eq!(
        src.runs.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![RunStatus::Completed, RunStatus::RolledBack]
    );
    assert!(!conversation(&src).contains("fork boundary beta"));
    assert_eq!(db.load("child"), before, "the fork is untouched");
    let d = db.dispatch("child", "claude", "And now?");
    assert_eq!(d.decision.strategy.as_str(), "no_handoff");
    assert_eq!(d.provider_thread, before.runs[1].provider_thread);
    assert_eq!(
        db.load("child").transfers[0].resolution.as_deref(),
        Some("native_fork")
    );
}

/// Mirrors "rolls back a Claude native fork to an earlier fork-local turn": after the fork is
/// rolled back to its first own run, the second is gone from what the fork shows and from the
/// next handoff, while the first stays.
#[rstest]
#[case::claude_rolls_back("claude", ProviderThreadStatus::RolledBack)]
#[case::codex_diverges("codex", ProviderThreadStatus::Divergent)]
fn a_native_fork_rolls_back_to_an_earlier_fork_local_run(
    #[case] provider: &str,
    #[case] after: ProviderThreadStatus,
) {
    let mut db = Db::new(
        thread(
            "src",
            &[(
                provider,
                "Say fork local source alpha.",
                "fork local source alpha",
            )],
        ),
        "default",
    );
    db.fork("src", 1, "child");
    db.turn(
        "child",
        provider,
        "Say fork local first.",
        "fork local first",
    );
    db.turn(
        "child",
        provider,
        "Say fork local second.",
        "fork local second",
    );
    let report = baton::store::rollback(&mut db.store, "child", 2).unwrap();
    assert_eq!(report.runs_rolled_back, vec![3]);
    assert_eq!(report.provider_threads.len(), 1);
    assert_eq!(report.provider_threads[0].status, after);
    let child = db.load("child");
    let text = conversation(&child);
    assert!(text.contains("fork local source alpha") && text.contains("fork local first"));
    assert!(!text.contains("fork local second"), "{text}");
    // The provider thread saw the rolled-back run: the next run starts over from what is left.
    let d = db.dispatch("child", provider, "Repeat everything.");
    assert_eq!(d.decision.stale, vec!["diverged".to_string()]);
    let doc = std::fs::read_to_string(d.handoff.unwrap().document_path.unwrap()).unwrap();
    assert!(doc.contains("Say fork local first."), "{doc}");
    assert!(!doc.contains("fork local second"), "{doc}");
}
