//! `baton diff` for every provider, with each changed field credited to the rule that decides
//! it now; `baton test --policy`, its default paths and coverage rows with their lines.

use crate::common;

use common::{baton, stderr, stdout};

const T: &str = "tests/fixtures/tooling";

/// A policy that changes delivery for cursor, the pre-grant for copilot and the grant's turns
/// for everyone: each change is credited to the delivery rule, "no pre-grant rule matched",
/// the delivery rule again (no off-band document, no grant), or the `turns` setting.
#[test]
fn diff_for_every_provider_credits_delivery_and_pregrant_rules() {
    let to = format!("{T}/cursor-copilot.policy");
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        &to,
        "--corpus",
        &format!("{T}/corpus"),
        "--target",
        "all",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("diff_target_all", stdout(&o));
}

#[test]
fn diff_for_one_target_decides_only_for_it() {
    let to = format!("{T}/cursor-copilot.policy");
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        &to,
        "--corpus",
        &format!("{T}/corpus"),
        "--target",
        "cursor",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.lines().all(|l| !l.contains("-> codex:")), "{out}");
    assert!(
        out.contains(&format!(
            "  delivery: off_band (pointer prompt limit 500) -> inline (no pointer prompt; inline_limit 500 unused) (now decided by delivery inline at {to}:7:3)\n  \
             pregrant: Read for 1 turn, 1 use -> null (now decided by delivery inline at {to}:7:3)\n"
        )),
        "{out}"
    );
    assert_eq!(
        out.lines().last(),
        Some("3 of 3 decisions changed (9 fields) in 3 of 3 states")
    );
}

/// By default each state is decided for the providers it involves: seed-switch has run on
/// claude and codex, so both are decided (claude's decision does not change here).
/// A policy whose `summary` block drops the base's `include` rules (it meant to add one
/// `exclude`): the diff says the handoff's included items drop to zero, credited to that
/// block, in the text and in `--json` (it used to show budget lines only; issue 27).
#[test]
fn diff_says_when_included_items_drop_to_zero() {
    let to = "docs/examples/summary-trap.policy";
    let args = [
        "diff",
        "--from",
        "default",
        "--to",
        to,
        "--corpus",
        &format!("{T}/corpus"),
        "--target",
        "codex",
    ];
    let o = baton(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "(now decided by budget document at {to}:4:1)\n  included: 8 items -> 0 items (the handoff includes nothing from these runs) (now decided by summary at {to}:4:1)\ntests/fixtures/tooling/corpus/stale-model-changed.yaml -> codex:\n"
        )),
        "{out}"
    );
    assert_eq!(out.matches("  included: ").count(), 3, "{out}");
    let o = baton(&[&args[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let change = v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["changes"].as_array().unwrap())
        .find(|c| c["field"] == "included")
        .expect("an included change");
    assert_eq!(change["new"], 0, "{change}");
    assert!(change["old"].as_u64().is_some_and(|n| n > 0), "{change}");
    assert_eq!(change["causes"][0]["rule"], "summary", "{change}");
    assert_eq!(change["causes"][0]["at"], format!("{to}:4:1"), "{change}");
}

/// Other changes of the number of included items are not reported (they follow any edit of
/// the summary rules): restating the base's block with one more rule changes nothing here.
#[test]
fn diff_reports_no_included_change_when_items_remain() {
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        "docs/examples/summary-one-more-rule.policy",
        "--corpus",
        &format!("{T}/corpus"),
        "--target",
        "codex",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("included:"), "{out}");
}

#[test]
fn diff_decides_for_the_providers_of_each_state() {
    let o = baton(&[
        "diff", "--from", "default", "--to", "default", "--corpus", "examples", "--json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["decisions_changed"], 0);
    assert!(v["decisions_compared"].as_u64().unwrap() > v["states_compared"].as_u64().unwrap());
}

#[test]
fn diff_with_an_unknown_target_is_an_error() {
    let o = baton(&[
        "diff", "--from", "default", "--to", "mcode", "--corpus", "examples", "--target", "gemini",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "--target: error: unknown provider \"gemini\"; known providers are claude, codex, copilot, cursor, or those declared under `providers:` in a state of the corpus\n"
    );
    assert_eq!(stdout(&o), "");
}

/// A decision one version cannot make is reported on standard error, per state and target,
/// and counted as skipped.
#[test]
fn diff_reports_what_a_version_cannot_decide() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("resume-always.policy");
    std::fs::write(
        &policy,
        "policy \"resume-always\" {}\nstrategy {\n  delta_existing otherwise\n}\n",
    )
    .unwrap();
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        policy.to_str().unwrap(),
        "--corpus",
        &format!("{T}/corpus"),
        "--target",
        "cursor",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{T}/corpus/seed-switch.yaml -> cursor: warning: skipped, a policy cannot decide it\n"
        )),
        "{err}"
    );
    assert!(
        err.contains("error: strategy `delta_existing` resumes the target's thread"),
        "{err}"
    );
    assert_eq!(
        stdout(&o).lines().last(),
        Some("0 of 0 decisions changed (0 fields) in 0 of 0 states; 3 skipped")
    );
}

// ---- baton test --policy ----

/// The team's suite against a candidate policy: the case whose answer the candidate changes
/// fails, and names the candidate's rule.
#[test]
fn test_runs_a_suite_against_a_candidate_policy() {
    let o = baton(&[
        "test",
        "docs/examples/testing/team.yaml",
        "--policy",
        "docs/examples/testing/team-v2.policy",
        "--filter",
        "ladder full existing",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.starts_with(
            "FAIL ladder full existing -> full_existing  (docs/examples/testing/team.yaml:"
        ),
        "{out}"
    );
    assert!(
        out.contains("decided by `strategy full_new` at docs/examples/testing/team-v2.policy:39:3"),
        "{out}"
    );
    assert_eq!(out.lines().last(), Some("0 passed, 1 failed"));
    // The same suite against its own policy passes.
    let o = baton(&[
        "test",
        "docs/examples/testing/team.yaml",
        "--filter",
        "ladder full existing",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn test_with_a_candidate_that_does_not_load() {
    let o = baton(&[
        "test",
        "policies/tests/default.yaml",
        "--policy",
        "no-such-policy",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("no-such-policy:1:1: error: no policy file, directory or shipped profile named `no-such-policy`"),
        "{}",
        stderr(&o)
    );
}

fn baton_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::baton_cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn test_without_paths_outside_a_project_says_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let o = baton_in(dir.path(), &["test"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "error: no test files given, and none found in policies/tests\n  \
         = help: name test files or directories (`baton test PATH...`); `baton init DIR` writes a policy with its tests in DIR/policies/tests\n"
    );
}

/// `baton test` with no arguments works inside what `baton init` scaffolds, and with
/// `--policy` it finds the tests beside the policy from anywhere.
#[test]
fn test_without_paths_in_an_init_scaffold() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("team");
    let o = baton(&["init", root.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = baton_in(&root, &["test"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().last(), Some("2 passed, 0 failed"));
    // From elsewhere, the candidate's own tests are found beside it.
    let policy = root.join("policies/team.policy");
    let o = baton_in(dir.path(), &["test", "--policy", policy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().last(), Some("2 passed, 0 failed"));
    // A candidate with no tests beside it, outside a project: every place looked is named.
    let o = baton_in(dir.path(), &["test", "--policy", "default"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: no test files given, and none found in policies/tests\n"),
        "{}",
        stderr(&o)
    );
    let lone = dir.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(&policy, lone.join("team.policy")).unwrap();
    let o = baton_in(dir.path(), &["test", "--policy", "lone/team.policy"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(
            "error: no test files given, and none found in lone/tests, lone or policies/tests\n"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn coverage_rows_show_file_and_line() {
    let o = baton(&["test", "--coverage", "policies/tests/t3code.yaml"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let eligible = out
        .lines()
        .find(|l| l.trim_start().starts_with("eligible"))
        .unwrap();
    assert!(
        eligible.ends_with("true+false  t3code.policy:25"),
        "{eligible}"
    );
    let o = baton(&["test", "--coverage", "--json", "policies/tests/t3code.yaml"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rule = &v["coverage"]["files"][0]["rules"][0];
    assert!(rule["line"].as_u64().unwrap() > 0, "{rule}");
}

/// Covered runs that change while the ladder rule stays are credited to the `eligible` rule.
#[test]
fn diff_credits_covered_runs_to_the_eligible_rule() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let state = std::fs::read_to_string("examples/seed-switch.yaml")
        .unwrap()
        .replace(
            "  - ordinal: 8\n    provider: claude\n",
            "  - ordinal: 8\n    provider: claude\n    status: interrupted\n",
        );
    std::fs::write(corpus.join("switch.yaml"), state).unwrap();
    let policy = dir.path().join("done-only.policy");
    std::fs::write(
        &policy,
        "policy \"done-only\" {\n  extends \"default\"\n}\n\neligible when run.status == \"completed\"\n",
    )
    .unwrap();
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        policy.to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--target",
        "codex",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "  covered_runs: 6-8 -> 6-7 (now decided by eligible at {}:5:1)\n",
            policy.display()
        )),
        "{out}"
    );
}
