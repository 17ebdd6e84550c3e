//! The one path (docs/architecture.md#the-one-path): rollback advice, dispatch, explain (of a
//! state file and of a stored thread) and replay decide through the same two calls, fitting
//! included, so they agree on a state where fitting changes the ladder's decision.

use baton::store::{self, DispatchRequest, ReplayFilter, Store};
use baton::{Engine, State};

const STATE: &str = "tests/fixtures/budget/rollback-inline-only.yaml";

/// A cursor thread (no file reads, 2,000-character turns) rolled back to run 1, where an
/// unanswered 6,600-character question stays open: the ladder starts a fresh thread
/// (`full_new`), but what the next run must act on fits neither inline nor off-band, so the
/// fitted decision is `unsupported`. Before the one path, rollback advice decided without
/// fitting and said `full_new` while dispatch and explain said `unsupported`.
#[test]
fn rollback_advice_dispatch_explain_and_replay_agree_when_fitting_decides() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder("default")
        .document_root(Some(dir.path().join("docs")))
        .build()
        .unwrap();
    let state = State::load(STATE).unwrap();
    let mut db = Store::open(&dir.path().join("baton.db")).unwrap();
    db.import(&state).unwrap();

    let mut report = store::rollback(&mut db, "th_rb", 1).unwrap();
    assert_eq!(report.runs_rolled_back, vec![2]);
    store::advise_rollback(&db, &engine, &mut report).unwrap();
    let change = report
        .provider_threads
        .iter()
        .find(|c| c.id == "U1")
        .expect("U1 saw the rolled-back run");
    let advice = change
        .next_run
        .as_ref()
        .expect("the policy decides the next run");
    assert_eq!(advice.strategy.as_str(), "unsupported", "{report:?}");

    // The state file of the rolled-back thread, decided by the engine (what `baton explain
    // --state` does), and the stored thread (`baton explain --db --thread`).
    let rolled = db.load("th_rb").unwrap();
    let explained = engine.decide(&rolled, Some("cursor")).unwrap();
    assert_eq!(explained.strategy.as_str(), "unsupported");
    // The fitted decision says why: the budget decided.
    assert_eq!(explained.decided_by.rule, "budget unsupported");
    assert!(
        advice
            .because
            .as_deref()
            .is_some_and(|b| b.contains("over cursor's 2000-character turn")),
        "{advice:?}"
    );
    let stored = db
        .decide(&engine, "th_rb", Some("cursor"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.strategy.as_str(), "unsupported");

    // The ladder alone would start a fresh thread: fitting is what decides here.
    let plan = engine
        .plan(&rolled, Some("cursor"), &baton::Context::default())
        .unwrap();
    assert_eq!(plan.evaluated().strategy.as_str(), "full_new");

    let dispatched = store::dispatch(
        &mut db,
        &engine,
        &DispatchRequest {
            thread: "th_rb".into(),
            target: "cursor".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(dispatched.decision.strategy.as_str(), "unsupported");
    assert_eq!(advice.strategy, dispatched.decision.strategy);
    assert_eq!(advice.provider_thread, dispatched.decision.provider_thread);
    assert_eq!(explained.strategy, dispatched.decision.strategy);
    assert_eq!(explained.decided_by, dispatched.decision.decided_by);
    assert_eq!(stored.decided_by, dispatched.decision.decided_by);
    assert_eq!(advice.because, dispatched.decision.decided_by.because);

    // The logged decision re-derives.
    let replayed = store::replay(
        &db,
        &ReplayFilter {
            thread: Some("th_rb".into()),
            run: None,
        },
        &[engine.policy().clone()],
    )
    .unwrap();
    assert!(replayed.checked >= 1, "{replayed:?}");
    assert!(replayed.differences.is_empty(), "{replayed:?}");
}

/// The one path selects the delta once: sizing `summary.delta_chars` keeps its selection for
/// the handoff (docs/performance.md). That is sound because no summary rule can read the
/// decision's outcome, which is set only after the size is taken: the checker refuses it.
#[rstest::rstest]
#[case::strategy("decision.strategy == \"delta_existing\"", "`decision.strategy`")]
#[case::off_band("delivery.off_band", "`delivery.off_band`")]
#[case::inline("delivery.inline", "`delivery.inline`")]
#[case::mode("delivery.mode == \"off_band\"", "`delivery.mode`")]
fn a_summary_rule_cannot_read_the_outcome(#[case] when: &str, #[case] fact: &str) {
    let policy = format!(
        "policy \"p\" {{\n  extends \"default\"\n}}\nsummary {{\n  include user_message into goals when {when}\n}}\n"
    );
    let err = Engine::from_text("p", &policy).unwrap_err().to_string();
    assert!(
        err.contains(&format!("{fact} cannot be read in a summary rule")),
        "{err}"
    );
}
