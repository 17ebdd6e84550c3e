//! Bad and suspicious policies through `baton check FILE`: the exact diagnostic the user sees
//! (`file:line:col: error: ...`, the caret snippet, `= help:`), exit codes, lints, `extends`,
//! and inputs large enough to break a recursive parser. Fixtures: `tests/fixtures/policies/`.

use rstest::rstest;
use std::path::Path;
use std::process::{Command, Output};

use crate::common;
use common::baton;

fn check(path: &str) -> Output {
    baton(&["check", path])
}

const F: &str = "tests/fixtures/policies";

#[rstest]
#[case::fact_typo_did_you_mean(
    "fact-typo.policy",
    "fact-typo.policy:4:19: error: unknown fact `target.runs_since_lastseen`
  |
4 |   no_handoff when target.runs_since_lastseen == 0
  |                   ^^^^^^^^^^^^^^^^^^^^^^^^^^
  = help: did you mean `target.runs_since_last_seen`?"
)]
#[case::unknown_strategy(
    "unknown-strategy.policy",
    "unknown-strategy.policy:5:3: error: unknown strategy `delta_resume`
  |
5 |   delta_resume when target.runs_since_last_seen > 0
  |   ^^^^^^^^^^^^
  = help: did you mean `delta_existing`? (strategies: no_handoff, delta_existing, full_existing, full_new, native_fork, unsupported)"
)]
#[case::ladder_without_otherwise(
    "no-otherwise.policy",
    "no-otherwise.policy:5:3: error: the strategy ladder has no `otherwise` rule
  |
5 |   delta_existing when target.runs_since_last_seen > 0
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  = help: end the ladder with a catch-all, e.g. `full_new otherwise because \"...\"`"
)]
#[case::unknown_form(
    "form-typo.policy",
    "form-typo.policy:4:40: error: unknown form `transcrpt`
  |
4 |   include user_message into history as transcrpt
  |                                        ^^^^^^^^^
  = help: did you mean `transcript`? (forms: full, text, line, path_only, count, transcript, activity)"
)]
#[case::unknown_enum_value(
    "unknown-enum-value.policy",
    "unknown-enum-value.policy:3:43: error: \"faild\" is not a possible value of `run.status`
  |
3 | eligible when run.status in [\"completed\", \"faild\"]
  |                                           ^^^^^^^
  = help: did you mean \"failed\"? (values: completed, failed, interrupted, running, rolled_back)"
)]
#[case::int_compared_with_string(
    "type-int-vs-string.policy",
    "type-int-vs-string.policy:4:19: error: cannot compare int with string
  |
4 |   no_handoff when target.runs_since_last_seen == \"none\"
  |                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"
)]
#[case::and_on_an_int(
    "type-and-on-int.policy",
    "type-and-on-int.policy:4:41: error: `and` needs a bool, but `target.runs_since_last_seen` is int
  |
4 |   no_handoff when target.has_thread and target.runs_since_last_seen
  |                                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  = help: compare it: `target.runs_since_last_seen > 0`"
)]
#[case::item_fact_outside_summary(
    "item-fact-outside-summary.policy",
    "item-fact-outside-summary.policy:3:21: error: `item.diff_lines` cannot be read in a staleness signal
  |
3 | stale big_diff when item.diff_lines > 200
  |                     ^^^^^^^^^^^^^^^
  = help: `item.diff_lines` is available in `summary` include/exclude rules"
)]
#[case::item_open_outside_summary(
    "item-open-outside-summary.policy",
    "item-open-outside-summary.policy:2:18: error: `item.open` cannot be read in a staleness signal
  |
2 | stale stuck when item.open
  |                  ^^^^^^^^^
  = help: `item.open` is available in `summary` include/exclude rules"
)]
#[case::item_open_typo(
    "item-open-typo.policy",
    "item-open-typo.policy:4:34: error: unknown fact `item.opne`
  |
4 |   include command into open when item.opne
  |                                  ^^^^^^^^^
  = help: did you mean `item.open`?"
)]
#[case::stale_read_in_a_stale_rule(
    "stale-in-stale.policy",
    "stale-in-stale.policy:4:21: error: `stale` cannot be read in a staleness signal
  |
4 | stale anything when stale
  |                     ^^^^^
  = help: `stale` is known only after every staleness signal ran: read it in `strategy`, `delivery` or `pregrant`"
)]
#[case::syntax_error(
    "syntax-error.policy",
    "syntax-error.policy:4:47: error: this string opened at 4:47 is never closed
  |
4 |   full_new when not target.has_thread because \"no thread
  |                                               ^
  = help: end it with `\"` on the same line: strings cannot span lines"
)]
#[case::extends_missing_file(
    "extends-missing.policy",
    "extends-missing.policy:2:11: error: cannot find base policy `no-such-base.policy`
  |
2 |   extends \"no-such-base.policy\"
  |           ^^^^^^^^^^^^^^^^^^^^^
  = help: name a file relative to this one, or a shipped profile (default, t3code, t3code-legacy, mcode)"
)]
#[case::extends_cycle(
    "cycle-a.policy",
    "cycle-b.policy:2:11: error: `extends` cycle: tests/fixtures/policies/cycle-a.policy -> tests/fixtures/policies/cycle-b.policy -> tests/fixtures/policies/cycle-a.policy
  |
2 |   extends \"cycle-a.policy\"
  |           ^^^^^^^^^^^^^^^^"
)]
#[case::binary_garbage(
    "garbage.policy",
    "garbage.policy:1:1: error: policy `tests/fixtures/policies/garbage.policy` is not UTF-8 text (invalid byte at offset 14)"
)]
fn bad_policy_is_reported(#[case] fixture: &str, #[case] diagnostic: &str) {
    let path = format!("{F}/{fixture}");
    let out = check(&path);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{F}/{diagnostic}\n")
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("fail: {path}\n")
    );
    assert_eq!(out.status.code(), Some(1));
}

#[rstest]
#[case::unreachable_ladder_rule(
    "lint-unreachable.policy",
    "lint-unreachable.policy:6:3: warning: unreachable: the rule at line 5 always matches first
  |
6 |   full_existing when target.chained_handoffs >= 2
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  = help: remove this rule or make the earlier one conditional"
)]
#[case::unused_let(
    "lint-unused-let.policy",
    "lint-unused-let.policy:3:5: warning: unused `let max_off_provider_runs`
  |
3 | let max_off_provider_runs = 12
  |     ^^^^^^^^^^^^^^^^^^^^^
  = help: remove it or use it in a rule"
)]
#[case::stale_signal_no_rule_reads(
    "lint-unread-stale.policy",
    "lint-unread-stale.policy:3:7: warning: staleness signal `clean_context` cannot change any decision: no rule reads `stale` or `stale.clean_context`
  |
3 | stale clean_context when request.clean_context
  |       ^^^^^^^^^^^^^
  = help: read `stale` in the strategy ladder, e.g. `full_new when stale`"
)]
fn lint_is_a_warning(#[case] fixture: &str, #[case] warning: &str) {
    let path = format!("{F}/{fixture}");

    let out = check(&path);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{F}/{warning}\n")
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(&format!("ok: {path} ")), "{stdout}");
    assert_eq!(out.status.code(), Some(0));

    let denied = baton(&["check", "--deny-warnings", &path]);
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr),
        format!("{F}/{warning}\n")
    );
    let stdout = String::from_utf8_lossy(&denied.stdout);
    assert!(stdout.starts_with(&format!("fail: {path} ")), "{stdout}");
    assert_eq!(denied.status.code(), Some(1));
}

#[test]
fn shipped_default_policy_checks_clean() {
    let out = baton(&["check", "--deny-warnings", "policies/default.policy"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn missing_policy_file() {
    let out = check("tests/fixtures/policies/nope.policy");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "tests/fixtures/policies/nope.policy:1:1: error: no policy file, directory or shipped profile named `tests/fixtures/policies/nope.policy` (shipped profiles: default, t3code, t3code-legacy, mcode)\n"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// Writes `policy` to a temporary file, checks it, and returns (stderr, exit code).
fn check_generated(name: &str, policy: &str) -> (String, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, policy).unwrap();
    let out = check(path.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stderr, out.status.code())
}

fn ladder_with(condition: &str) -> String {
    format!("policy \"big\" {{}}\nstrategy {{\n  no_handoff when {condition}\n  full_new otherwise\n}}\n")
}

#[test]
fn expression_nested_10_000_levels_is_rejected_cleanly() {
    let n = 10_000;
    let policy = ladder_with(&format!(
        "{}target.has_thread{}",
        "(".repeat(n),
        ")".repeat(n)
    ));
    let (stderr, code) = check_generated("deep.policy", &policy);
    assert_eq!(code, Some(1), "{stderr}");
    let first = stderr.lines().next().unwrap();
    assert!(
        first.ends_with("deep.policy:3:83: error: expression nested deeper than 64 levels"),
        "{first}"
    );
    assert!(
        stderr.ends_with("\n  = help: split the condition into `let` values or separate rules\n"),
        "{stderr}"
    );
    // The snippet is cut, not 20,000 characters wide.
    assert!(stderr.lines().all(|l| l.chars().count() < 300), "{stderr}");
}

#[test]
fn nested_lists_10_000_levels_are_rejected_cleanly() {
    let n = 10_000;
    let policy = ladder_with(&format!(
        "request.kind in {}\"fork\"{}",
        "[".repeat(n),
        "]".repeat(n)
    ));
    let (stderr, code) = check_generated("lists.policy", &policy);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: expression nested deeper than 64 levels"),
        "{stderr}"
    );
}

#[test]
fn ten_thousand_nots_do_not_crash() {
    let policy = ladder_with(&format!("{}target.has_thread", "not ".repeat(10_000)));
    let (stderr, code) = check_generated("nots.policy", &policy);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn a_100_000_term_and_chain_does_not_crash() {
    let terms = vec!["target.has_thread"; 100_000].join(" and ");
    let (stderr, code) = check_generated("ands.policy", &ladder_with(&terms));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn a_100_000_line_or_chain_does_not_crash() {
    let terms = vec!["target.has_thread"; 100_000].join("\n    or ");
    let (stderr, code) = check_generated("ors.policy", &ladder_with(&terms));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn child_policy_overriding_a_let_changes_the_decision() {
    let explain = |policy: &str| {
        let out = baton(&[
            "explain",
            "--state",
            "examples/seed-switch.yaml",
            "--policy",
            policy,
            "--json",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // Default: codex missed 3 off-provider runs, 3 <= 12: resume C1 with a delta.
    let base = explain("default");
    assert_eq!(base["strategy"], "delta_existing");
    assert_eq!(base["stale"], serde_json::json!([]));

    // The child lowers max_off_provider_runs to 1: 3 > 1, stale, start fresh.
    let child = explain(&format!("{F}/extends-default.policy"));
    assert_eq!(child["policy"]["name"], "extends-default");
    assert_eq!(child["strategy"], "full_new");
    assert_eq!(
        child["provider_thread"],
        serde_json::json!({"action": "create", "id": null})
    );
    assert_eq!(
        child["covered_runs"],
        serde_json::json!({"from": 1, "to": 8})
    );
    assert_eq!(
        child["stale"],
        serde_json::json!(["too_many_off_provider_runs"])
    );
    assert_ne!(child["policy"]["sha256"], base["policy"]["sha256"]);
    let signal = child["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["rule"] == "stale too_many_off_provider_runs")
        .unwrap();
    assert_eq!(signal["values"]["max_off_provider_runs"], 1);
}

#[test]
fn extends_resolves_relative_to_the_child_file() {
    // Checked from another directory, the cycle fixture still finds its sibling.
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["check", "policies/cycle-a.policy"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("policies/cycle-b.policy:2:11: error: `extends` cycle: policies/cycle-a.policy -> policies/cycle-b.policy -> policies/cycle-a.policy\n"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// Facts are readable only once what they depend on is known; each misuse names where the fact
/// can be read.
#[rstest]
#[case::eligibility_inside_eligible(
    "eligible when thread.eligible_runs > 0\nstrategy { full_new otherwise }\n",
    "scope.policy:1:15: error: `thread.eligible_runs` cannot be read in `eligible`",
    "`thread.eligible_runs` is available everywhere but `eligible` (it depends on which runs are eligible)"
)]
#[case::summary_size_inside_summary_rules(
    "strategy { full_new otherwise }\nsummary {\n  include user_message into goals when summary.full_chars > 10\n}\n",
    "scope.policy:3:40: error: `summary.full_chars` cannot be read in a summary rule",
    "`summary.full_chars` is available in `stale`, `strategy`, `delivery` and `pregrant` rules (it runs the summary rules)"
)]
#[case::delivery_inside_delivery(
    "strategy { full_new otherwise }\ndelivery {\n  off_band when delivery.inline\n  inline otherwise\n}\n",
    "scope.policy:3:17: error: `delivery.inline` cannot be read in `delivery`",
    "`delivery.inline` is available in `pregrant` rules"
)]
#[case::strategy_inside_ladder(
    "strategy { full_new when decision.strategy == \"full_new\"\n  full_new otherwise }\n",
    "scope.policy:1:26: error: `decision.strategy` cannot be read in the strategy ladder",
    "`decision.strategy` is available in `delivery` and `pregrant` rules"
)]
#[case::handoff_on_no_handoff(
    "strategy {\n  no_handoff when target.has_thread handoff full_thread_summary\n  full_new otherwise\n}\n",
    "scope.policy:2:45: error: `no_handoff` makes no handoff document, so it cannot name a handoff strategy",
    "remove `handoff ...` from this rule"
)]
fn facts_only_where_they_are_known(
    #[case] policy: &str,
    #[case] first_line: &str,
    #[case] help: &str,
) {
    let err = common::policy_text("scope.policy", policy)
        .expect_err("the checker rejects it")
        .to_string();
    assert_eq!(err.lines().next(), Some(first_line), "{err}");
    assert!(err.ends_with(&format!("= help: {help}")), "{err}");
}

#[test]
fn a_let_cycle_is_reported_once() {
    let err = common::policy_text(
        "cycle.policy",
        "let a = b\nlet b = a\nstrategy { full_new when a > 1\n  full_new otherwise }\n",
    )
    .expect_err("a cycle does not check")
    .to_string();
    assert_eq!(
        err.lines().next(),
        Some("cycle.policy:2:9: error: `let a` depends on itself: a -> b -> a"),
        "{err}"
    );
    assert_eq!(err.matches("error:").count(), 1, "{err}");
}
