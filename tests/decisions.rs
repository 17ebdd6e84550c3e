//! Decisions of `policies/default.policy` over the example state files in `examples/`: every
//! ladder step, every staleness signal (held and not held), coverage after superseded handoffs
//! and rolled-back runs, and determinism.

use baton::decision::{Decision, RuleOutcome};
use baton::Engine;
use rstest::rstest;
use std::path::{Path, PathBuf};

use crate::common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The engine of `policies/default.policy` with the off-band root `document_root`: every
/// decision here goes through the one path a user runs ([`Engine::decide`]: summaries sized
/// by the policy's own rules, the handoff fitted to the target's budget).
fn default_engine(document_root: Option<PathBuf>) -> Engine {
    Engine::builder(root().join("policies/default.policy").to_str().unwrap())
        .document_root(document_root)
        .build()
        .expect("default.policy checks")
}

/// The default policy's decision on a state built in the test.
fn decide_state(state: &baton::State) -> Decision {
    default_engine(None).decide(state, None).expect("decides")
}

fn decide_example(example: &str) -> Decision {
    let state = baton::state::load_file(&root().join("examples").join(example))
        .unwrap_or_else(|e| panic!("{example} loads: {e}"));
    default_engine(Some(PathBuf::from(common::DOC_ROOT)))
        .decide(&state, None)
        .unwrap_or_else(|e| panic!("{example} decides: {e}"))
}

/// The outcome of the trace entry for rule `rule` (e.g. `stale resume_failed`).
fn trace_outcome(d: &Decision, rule: &str) -> RuleOutcome {
    d.trace
        .iter()
        .find(|t| t.rule == rule)
        .unwrap_or_else(|| panic!("no trace entry for `{rule}`"))
        .outcome
}

#[rstest]
// The ladder, step by step.
#[case::no_handoff("ladder-no-handoff.yaml", "no_handoff", None, "resume", Some("C1"), None, &[])]
#[case::delta_existing(
    "ladder-delta-existing.yaml",
    "delta_existing",
    Some("delta_since_target_last_seen"),
    "resume",
    Some("C1"),
    Some((2, 2)),
    &[]
)]
#[case::full_existing(
    "ladder-full-existing.yaml",
    "full_existing",
    Some("full_thread_summary"),
    "resume",
    Some("C1"),
    Some((1, 4)),
    &[]
)]
#[case::full_new_no_thread(
    "ladder-full-new-no-thread.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &[]
)]
#[case::full_new_stale(
    "ladder-full-new-stale.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["model_changed", "runtime_mode_changed"]
)]
#[case::unsupported("ladder-unsupported.yaml", "unsupported", None, "none", None, None, &[])]
#[case::native_fork("ladder-native-fork.yaml", "native_fork", None, "fork_native", Some("C1"), None, &[])]
// Every staleness signal of default.policy, each on its own.
#[case::too_many_off_provider_runs(
    "stale-too-many-off-provider-runs.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 14)),
    &["too_many_off_provider_runs"]
)]
#[case::too_many_chained_handoffs(
    "stale-too-many-chained-handoffs.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 5)),
    &["too_many_chained_handoffs"]
)]
#[case::model_changed(
    "stale-model-changed.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["model_changed"]
)]
#[case::runtime_mode_changed(
    "stale-runtime-mode-changed.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["runtime_mode_changed"]
)]
#[case::resume_failed(
    "stale-resume-failed.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["resume_failed"]
)]
#[case::diverged_divergent(
    "stale-diverged-divergent.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["diverged"]
)]
#[case::diverged_rolled_back(
    "stale-diverged-rolled-back.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["diverged"]
)]
#[case::clean_context(
    "stale-clean-context.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["clean_context"]
)]
#[case::over_budget(
    "stale-over-budget.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 3)),
    &["over_budget"]
)]
// Seed 000's two switches.
#[case::seed_run6(
    "seed-run6.yaml",
    "full_new",
    Some("full_thread_summary"),
    "create",
    None,
    Some((1, 5)),
    &[]
)]
#[case::seed_run9(
    "seed-switch.yaml",
    "delta_existing",
    Some("delta_since_target_last_seen"),
    "resume",
    Some("C1"),
    Some((6, 8)),
    &[]
)]
// Coverage: a superseded (and a pending) handoff does not count toward last_seen; rolled-back
// runs are neither eligible nor covered.
#[case::after_superseded_handoff(
    "coverage-superseded-handoff.yaml",
    "delta_existing",
    Some("delta_since_target_last_seen"),
    "resume",
    Some("L1"),
    Some((4, 5)),
    &[]
)]
#[case::after_rolled_back_runs(
    "coverage-rolled-back.yaml",
    "delta_existing",
    Some("delta_since_target_last_seen"),
    "resume",
    Some("C1"),
    Some((3, 3)),
    &[]
)]
fn example_decides(
    #[case] example: &str,
    #[case] strategy: &str,
    #[case] handoff_strategy: Option<&str>,
    #[case] action: &str,
    #[case] thread_id: Option<&str>,
    #[case] covered: Option<(u32, u32)>,
    #[case] stale: &[&str],
) {
    let d = decide_example(example);
    assert_eq!(d.strategy.as_str(), strategy, "strategy");
    assert_eq!(
        d.handoff_strategy.map(|h| h.as_str()),
        handoff_strategy,
        "handoff_strategy"
    );
    assert_eq!(
        d.provider_thread.action.as_str(),
        action,
        "provider_thread.action"
    );
    assert_eq!(
        d.provider_thread.id.as_deref(),
        thread_id,
        "provider_thread.id"
    );
    assert_eq!(
        d.covered_runs.as_ref().map(|r| (r.from, r.to)),
        covered,
        "covered_runs"
    );
    assert_eq!(d.stale, stale, "stale");
}

/// Each signal holds in its own example and does not hold in the seed example (run 9), where
/// every signal is evaluated and none holds.
#[rstest]
#[case("too_many_off_provider_runs", "stale-too-many-off-provider-runs.yaml")]
#[case("too_many_chained_handoffs", "stale-too-many-chained-handoffs.yaml")]
#[case("model_changed", "stale-model-changed.yaml")]
#[case("runtime_mode_changed", "stale-runtime-mode-changed.yaml")]
#[case("resume_failed", "stale-resume-failed.yaml")]
#[case("diverged", "stale-diverged-divergent.yaml")]
#[case("diverged", "stale-diverged-rolled-back.yaml")]
#[case("clean_context", "stale-clean-context.yaml")]
#[case("over_budget", "stale-over-budget.yaml")]
fn stale_signal_held_and_not_held(#[case] signal: &str, #[case] example: &str) {
    let rule = format!("stale {signal}");
    assert_eq!(
        trace_outcome(&decide_example(example), &rule),
        RuleOutcome::Matched
    );
    for seed in [
        "seed-switch.yaml",
        "seed-run6.yaml",
        "ladder-delta-existing.yaml",
    ] {
        assert_eq!(
            trace_outcome(&decide_example(seed), &rule),
            RuleOutcome::NotMatched,
            "{signal} in {seed}"
        );
    }
}

#[test]
fn stale_list_follows_policy_order() {
    let d = decide_example("ladder-full-new-stale.yaml");
    let order: Vec<&str> = d
        .trace
        .iter()
        .filter_map(|t| t.rule.strip_prefix("stale "))
        .collect();
    assert_eq!(
        order,
        [
            "too_many_off_provider_runs",
            "too_many_chained_handoffs",
            "model_changed",
            "runtime_mode_changed",
            "resume_failed",
            "diverged",
            "clean_context",
            "over_budget",
            "cwd_changed",
            "branch_changed",
        ]
    );
    assert_eq!(d.stale, ["model_changed", "runtime_mode_changed"]);
}

#[test]
fn rolled_back_runs_are_excluded_from_eligible_runs() {
    let d = decide_example("coverage-rolled-back.yaml");
    let eligible = d.trace.iter().find(|t| t.rule == "eligible").unwrap();
    assert_eq!(
        serde_json::to_value(&eligible.values).unwrap(),
        serde_json::json!({"eligible_runs": 3, "excluded_runs": [4, 5]})
    );
    // The new run follows the rolled-back ones.
    assert_eq!(d.run, 6);
}

#[test]
fn superseded_handoff_does_not_count_toward_last_seen() {
    let d = decide_example("coverage-superseded-handoff.yaml");
    let no_handoff = d
        .trace
        .iter()
        .find(|t| t.rule == "strategy no_handoff")
        .unwrap();
    assert_eq!(no_handoff.outcome, RuleOutcome::NotMatched);
    assert_eq!(
        serde_json::to_value(&no_handoff.values).unwrap()["target.runs_since_last_seen"],
        2
    );
    // H1..H3 exist, so the new handoff is H4.
    assert_eq!(d.handoff_id.as_deref(), Some("H4"));
}

#[test]
fn the_superseding_handoff_counts_once_ready() {
    // The same state with H3 (which supersedes H2) ready: L1 has now seen runs 4-5.
    let path = root().join("examples/coverage-superseded-handoff.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("status: pending", "status: ready");
    let state = baton::state::parse_str(&text, baton::state::Format::Yaml, "ready.yaml").unwrap();
    let d = decide_state(&state);
    assert_eq!(d.strategy.as_str(), "no_handoff");
    assert_eq!(d.covered_runs, None);
}

#[test]
fn target_flag_overrides_request_provider() {
    // Seed example, run 9 asked for codex; for claude, L1 already saw runs 1-8.
    let state = baton::state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
    let d = default_engine(None).decide(&state, Some("claude")).unwrap();
    assert_eq!(d.target, "claude");
    assert_eq!(d.strategy.as_str(), "no_handoff");
    assert_eq!(d.provider_thread.id.as_deref(), Some("L1"));
}

#[test]
fn decision_json_is_byte_identical_twice() {
    for example in [
        "seed-switch.yaml",
        "seed-run6.yaml",
        "ladder-full-new-stale.yaml",
    ] {
        let a = decide_example(example).to_json();
        let b = decide_example(example).to_json();
        assert_eq!(a, b, "{example}");
    }
}

#[test]
fn explain_json_is_identical_across_processes() {
    let run = || {
        let out = common::baton(&["explain", "--state", "examples/seed-switch.yaml", "--json"]);
        assert!(out.status.success());
        out.stdout
    };
    let first = run();
    assert!(!first.is_empty());
    assert_eq!(first, run());
}

// ---- Regressions: a stale thread is never resumed; consumed delta handoffs chain. ----

/// Seed 000: "When stale [e.g. the user selected clean context], create a new provider thread
/// with full_thread_summary". default.policy puts `no_handoff` first, so when the target's
/// thread already saw every run, a clean-context request still resumes the old thread.
#[test]
fn clean_context_starts_a_new_thread_even_without_missed_runs() {
    let path = root().join("examples/ladder-no-handoff.yaml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("  message:", "  clean_context: true\n  message:");
    let state = baton::state::parse_str(&text, baton::state::Format::Yaml, "clean.yaml").unwrap();
    let d = decide_state(&state);
    assert_eq!(d.stale, ["clean_context"]);
    assert_eq!(d.strategy.as_str(), "full_new");
    assert_eq!(d.provider_thread.action.as_str(), "create");
}

/// Seed 000's "delta chain is too complex": C1 was resumed twice with a delta (H2 consumed by
/// run 3, H4 by run 5). Every consumed handoff's target run is a native run of C1, so
/// `target.chained_handoffs` (handoffs since the last native run) is always 0 in a real
/// history, and `full_existing` / `too_many_chained_handoffs` only fire for handoffs that were
/// never consumed.
#[test]
fn consumed_delta_chain_counts_as_chained_handoffs() {
    let text = r#"
version: 1
thread: {id: chain}
provider_threads:
  - {id: C1, provider: codex}
  - {id: L1, provider: claude}
runs:
  - {ordinal: 1, provider: codex, provider_thread: C1}
  - {ordinal: 2, provider: claude, provider_thread: L1, handoff: H1}
  - {ordinal: 3, provider: codex, provider_thread: C1, handoff: H2}
  - {ordinal: 4, provider: claude, provider_thread: L1, handoff: H3}
  - {ordinal: 5, provider: codex, provider_thread: C1, handoff: H4}
  - {ordinal: 6, provider: claude, provider_thread: L1, handoff: H5}
handoffs:
  - {id: H1, target_run: 2, to_provider_thread: L1, covered: {from: 1, to: 1}, strategy: full_thread_summary, status: ready}
  - {id: H2, target_run: 3, to_provider_thread: C1, covered: {from: 2, to: 2}, strategy: delta_since_target_last_seen, status: ready}
  - {id: H3, target_run: 4, to_provider_thread: L1, covered: {from: 3, to: 3}, strategy: delta_since_target_last_seen, status: ready}
  - {id: H4, target_run: 5, to_provider_thread: C1, covered: {from: 4, to: 4}, strategy: delta_since_target_last_seen, status: ready}
  - {id: H5, target_run: 6, to_provider_thread: L1, covered: {from: 5, to: 5}, strategy: delta_since_target_last_seen, status: ready}
request: {provider: codex}
"#;
    let state = baton::state::parse_str(text, baton::state::Format::Yaml, "chain.yaml").unwrap();
    let d = decide_state(&state);
    assert_eq!(d.strategy.as_str(), "full_existing");
}
