//! Policies tested from Rust through `baton::testing`: parametrised cases with `#[case]`,
//! file-driven cases with `#[files]`, and the shipped YAML suites at full rule coverage.

use baton::testing::{run_paths, state_from_yaml, PolicyUnderTest, RunOptions};
use rstest::rstest;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[rstest]
#[case("default", "examples/seed-run6.yaml", "full_new", Some((1, 5)))]
#[case("default", "examples/seed-switch.yaml", "delta_existing", Some((6, 8)))]
#[case("default", "examples/ladder-no-handoff.yaml", "no_handoff", None)]
#[case("mcode", "examples/ladder-full-existing.yaml", "delta_existing", Some((4, 4)))]
#[case("t3code", "examples/ladder-native-fork.yaml", "native_fork", None)]
fn shipped_policy_decides(
    #[case] policy: &str,
    #[case] state: &str,
    #[case] strategy: &str,
    #[case] runs: Option<(u32, u32)>,
) {
    let put = PolicyUnderTest::load(policy).unwrap();
    let checked = put.decide_file(root().join(state)).unwrap();
    checked.assert_strategy(strategy);
    match runs {
        Some((from, to)) => {
            checked.assert_covered_runs(from, to);
        }
        None => {
            checked.assert_handoff_strategy(None);
        }
    }
}

/// Every fixture state: each shipped policy decides it, and an off-band document always comes
/// with a pre-grant for exactly that document while an inline one never does.
#[rstest]
fn every_fixture_is_decided_consistently(
    #[files("policies/tests/fixtures/*.yaml")] path: PathBuf,
    #[values("default", "t3code", "mcode")] policy: &str,
) {
    let put = PolicyUnderTest::load(policy).unwrap();
    let checked = put.decide_file(&path).unwrap();
    let d = checked.decision();
    match (&d.delivery, &d.pregrant) {
        (Some(del), Some(grant)) => assert_eq!(del.document.as_ref(), Some(&grant.path)),
        (Some(del), None) => assert!(del.document.is_none() || policy == "t3code"),
        (None, grant) => assert!(grant.is_none()),
    }
    assert_eq!(checked.document().is_some(), d.handoff_strategy.is_some());
}

#[test]
fn inline_state_and_yaml_expectations() {
    let state = state_from_yaml(
        "version: 1\nthread: {id: th_x, title: t}\nprovider_threads: []\nruns:\n  - {ordinal: 1, provider: codex, items: [{kind: user_message, text: hello}]}\nrequest: {provider: claude}\n",
    )
    .unwrap();
    let put = PolicyUnderTest::load("default").unwrap();
    put.decide(&state)
        .unwrap()
        .assert_strategy("full_new")
        .assert_stale(&[])
        .assert_delivery("off_band")
        .assert_document_contains("hello")
        .assert_expect_yaml(
            "{provider_thread: {action: create, id: null}, covered_runs: {from: 1, to: 1}}",
        );
}

#[test]
fn failed_assertion_shows_expected_actual_and_deciding_rule() {
    let put = PolicyUnderTest::load("default").unwrap();
    let checked = put
        .decide_file(root().join("examples/stale-model-changed.yaml"))
        .unwrap();
    let err = std::panic::catch_unwind(|| {
        checked.assert_strategy("delta_existing");
    })
    .unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.starts_with("strategy: expected delta_existing, got full_new\n"),
        "{msg}"
    );
    assert!(
        msg.contains("decided by `strategy full_new` at default.policy:"),
        "{msg}"
    );
    assert!(msg.contains("stale = [model_changed]"), "{msg}");
    assert!(
        msg.contains("target.thread.model = \"gpt-5-codex\""),
        "{msg}"
    );
}

/// The shipped suites pass and cover every rule of default, t3code, t3code-legacy and mcode.
#[test]
fn shipped_suites_pass_with_full_rule_coverage() {
    let report = run_paths(&[root().join("policies/tests")], &RunOptions::default()).unwrap();
    let failures: Vec<String> = report
        .results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.report())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join(""));
    let files = report.coverage.files();
    let names: Vec<&str> = files.iter().map(|f| f.file.as_str()).collect();
    assert_eq!(
        names,
        [
            "default.policy",
            "mcode.policy",
            "t3code-legacy.policy",
            "t3code.policy"
        ]
    );
    for f in files {
        assert_eq!(f.percent, 100.0, "{}", report.coverage.table());
    }
}
