//! t3code's merge-back suite, ported: `apps/server/src/orchestration-v2/testkit/
//! ThreadMergeBack.integration.test.ts` (pingdotgg/t3code). Each case names the peer test it
//! mirrors, and runs for both of its provider variants (Codex and Claude). The peer's exact
//! merge-back wording (`Context handoff (merge_back / fork_delta_summary):`, `Fork delta:`)
//! belongs to the `t3code` profile's text (helper i12b); these cases check the lifecycle.

use super::lifecycle_common::{conversation, thread, Db};
use baton::state::{HandoffStrategy, ProviderThreadStatus, TransferStatus, TransferType};
use rstest::rstest;

const MERGE_USER_TEXT: &str =
    "Retain the transferred fork marker for later. Respond with exactly: merge delta stored";

/// Mirrors "merges one fork delta back into the original $driver thread": the fork's run
/// comes back as one `fork_delta_summary` handoff in the parent, the parent's next run resumes
/// the parent's own provider thread and gets the fork delta *and its own message*, the
/// merge-back transfer (from the fork's run) is consumed by that run, and the fork keeps its
/// own conversation.
#[rstest]
#[case::codex("codex")]
#[case::claude("claude")]
fn one_fork_delta_merges_back_into_the_original_thread(#[case] provider: &str) {
    let mut db = Db::new(
        thread(
            "src",
            &[(provider, "Say merge source stored.", "merge source stored")],
        ),
        "default",
    );
    let parent_pt = db.load("src").runs[0].provider_thread.clone();
    db.fork("src", 1, "fork");
    db.turn(
        "fork",
        provider,
        "Remember marker FORK-7.",
        "merge fork stored",
    );
    let m = db.merge_back("fork");
    let mb = m.handoff.clone().unwrap();
    assert_eq!(mb.strategy, HandoffStrategy::ForkDeltaSummary);
    assert_eq!((mb.covered.from, mb.covered.to), (2, 2));

    let d = db.dispatch("src", provider, MERGE_USER_TEXT);
    assert_eq!(
        d.provider_thread, parent_pt,
        "the original provider thread goes on"
    );
    let h = d.handoff.clone().unwrap();
    assert_eq!(h.id, mb.id);
    assert!(h.inline.ends_with(MERGE_USER_TEXT), "{}", h.inline);
    let doc = std::fs::read_to_string(h.document_path.unwrap()).unwrap();
    assert!(doc.contains("Remember marker FORK-7."), "{doc}");
    db.complete("src", d.run, MERGE_USER_TEXT, "merge delta stored");

    let src = db.load("src");
    let merges: Vec<_> = src
        .handoffs
        .iter()
        .filter(|h| h.strategy == HandoffStrategy::ForkDeltaSummary)
        .collect();
    assert_eq!(merges.len(), 1);
    let t = src
        .transfers
        .iter()
        .find(|t| t.kind == TransferType::MergeBack)
        .unwrap();
    assert_eq!(t.status, TransferStatus::Consumed);
    assert_eq!(t.source_run, Some(2), "from the fork's run");
    assert_eq!(t.resolution.as_deref(), Some("portable_context"));
    assert!(!conversation(&src).contains("merge fork stored"));
    assert!(conversation(&db.load("fork")).contains("merge fork stored"));
}

/// Mirrors "merges two sibling fork deltas into the original $driver thread": two forks of
/// the same run, each with a run of its own on a provider thread of its own; merged back one
/// after the other, each taken by the parent's next run; both transfers consumed, in order,
/// each from its own fork's run, and neither fork sees the other's content.
#[rstest]
#[case::codex("codex")]
#[case::claude("claude")]
fn two_sibling_fork_deltas_merge_back_in_turn(#[case] provider: &str) {
    let mut db = Db::new(
        thread(
            "src",
            &[(
                provider,
                "Say siblings source stored.",
                "siblings source stored",
            )],
        ),
        "default",
    );
    let parent_pt = db.load("src").runs[0].provider_thread.clone();
    db.fork("src", 1, "first");
    let f1 = db.turn(
        "first",
        provider,
        "Remember marker FIRST.",
        "first merge sibling stored",
    );
    db.fork("src", 1, "second");
    let f2 = db.turn(
        "second",
        provider,
        "Remember marker SECOND.",
        "second merge sibling stored",
    );
    // Each fork forked a provider thread of its own. baton names provider threads within
    // their app thread (`C2` of `first` and `C2` of `second` are two rows), so distinct
    // means a distinct (thread, id) pair, each forked from the parent's.
    let own = |t: &str, d: &baton::store::Dispatched| (t.to_string(), d.provider_thread.clone());
    assert_ne!(own("first", &f1), own("second", &f2));
    assert_ne!(own("first", &f1), ("src".to_string(), parent_pt.clone()));
    assert_eq!(
        f1.decision.provider_thread.id, parent_pt,
        "forked from the parent's"
    );
    assert_eq!(
        f2.decision.provider_thread.id, parent_pt,
        "forked from the parent's"
    );

    let mut ids = Vec::new();
    for (fork, text) in [
        ("first", "first merge delta stored"),
        ("second", "second merge delta stored"),
    ] {
        let m = db.merge_back(fork);
        ids.push(m.handoff.unwrap().id);
        let d = db.dispatch("src", provider, text);
        assert_eq!(
            d.handoff.as_ref().map(|h| h.id.clone()),
            ids.last().cloned()
        );
        assert_eq!(d.provider_thread, parent_pt);
        db.complete("src", d.run, text, text);
    }
    let src = db.load("src");
    let merges: Vec<String> = src
        .handoffs
        .iter()
        .filter(|h| h.strategy == HandoffStrategy::ForkDeltaSummary)
        .map(|h| h.id.clone())
        .collect();
    assert_eq!(merges, ids);
    let transfers: Vec<_> = src
        .transfers
        .iter()
        .filter(|t| t.kind == TransferType::MergeBack)
        .map(|t| (t.status, t.source_thread.clone(), t.source_run))
        .collect();
    assert_eq!(
        transfers,
        vec![
            (TransferStatus::Consumed, Some("first".to_string()), Some(2)),
            (
                TransferStatus::Consumed,
                Some("second".to_string()),
                Some(2)
            ),
        ]
    );
    let first = conversation(&db.load("first"));
    assert!(
        first.contains("first merge sibling stored") && !first.contains("second merge sibling")
    );
    let second = conversation(&db.load("second"));
    assert!(
        second.contains("second merge sibling stored") && !second.contains("first merge sibling")
    );
    // The forks' provider threads are their own: none is the parent's.
    for fork in ["first", "second"] {
        let s = db.load(fork);
        let open: Vec<_> = s
            .provider_threads
            .iter()
            .filter(|p| p.status != ProviderThreadStatus::Closed)
            .map(|p| Some(p.id.clone()))
            .collect();
        assert!(!open.contains(&parent_pt), "{fork}: {open:?}");
    }
}
