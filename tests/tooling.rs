//! `baton test`, `baton fmt` and `baton diff` through the CLI: output, exit codes and the
//! message the user sees for every kind of bad input.

use crate::common;

use common::{baton, stderr, stdout};
use rstest::rstest;
use std::path::{Path, PathBuf};

const T: &str = "tests/fixtures/tooling";

#[test]
fn shipped_suites_pass_and_reach_full_coverage() {
    let o = baton(&[
        "test",
        "--coverage",
        "--min-coverage",
        "100",
        "policies/tests/",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("default.policy: 42/42 rules covered (100.0%)"),
        "{out}"
    );
    assert!(
        out.contains("mcode.policy: 23/23 rules covered (100.0%)"),
        "{out}"
    );
    assert!(
        out.contains("t3code.policy: 15/15 rules covered (100.0%)"),
        "{out}"
    );
    let last = out.lines().last().unwrap();
    assert!(last.ends_with("passed, 0 failed"), "{last}");
}

#[test]
fn failing_case_shows_expected_actual_and_deciding_rule() {
    let o = baton(&["test", &format!("{T}/failing.yaml")]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let expected = format!(
        "ok   run 6 on claude starts fresh\n\
         FAIL run 9 resumes codex  ({T}/failing.yaml:7)\n  \
         strategy: expected delta_existing, got full_new\n  \
         stale: expected [], got [model_changed]\n  \
         document.contains: expected \"no such text\", got not found\n    \
         decided by `strategy full_new` at default.policy:"
    );
    assert!(out.starts_with(&expected), "{out}");
    assert!(
        out.contains("model_changed: request.model = \"gpt-5.1-codex\""),
        "{out}"
    );
    assert_eq!(out.lines().last(), Some("1 passed, 1 failed"));
}

#[test]
fn json_results_show_each_mismatch() {
    let o = baton(&["test", &format!("{T}/failing.yaml"), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let failed = &v["results"][1];
    assert_eq!(failed["passed"], false);
    assert_eq!(failed["mismatches"][0]["field"], "strategy");
    assert_eq!(failed["mismatches"][0]["expected"], "delta_existing");
    assert_eq!(failed["mismatches"][0]["actual"], "full_new");
    assert!(v.get("coverage").is_none());
}

#[test]
fn filter_selects_cases_by_name() {
    let o = baton(&["test", &format!("{T}/failing.yaml"), "--filter", "claude"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "ok   run 6 on claude starts fresh\n1 passed, 0 failed\n"
    );
}

#[test]
fn coverage_gate_and_json() {
    let o = baton(&[
        "test",
        &format!("{T}/failing.yaml"),
        "--filter",
        "claude",
        "--min-coverage",
        "90",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o)
            .contains("default.policy: error: rule coverage 35.7% is below --min-coverage 90"),
        "{}",
        stderr(&o)
    );
    let o = baton(&["test", "policies/tests/t3code.yaml", "--coverage", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"], 0);
    assert_eq!(v["results"][0]["passed"], true);
    let f = &v["coverage"]["files"][0];
    assert_eq!(f["file"], "t3code.policy");
    assert_eq!(f["percent"], 100.0);
    assert_eq!(f["rules"][0]["kind"], "eligible");
    assert!(f["rules"][0]["true"].as_u64().unwrap() > 0);
}

#[rstest]
#[case("unknown-key.yaml", "unknown-key.yaml:7:7: error: cases[0].expect.stal: unknown field `stal`, expected one of `strategy`")]
#[case("wrong-type.yaml", "wrong-type.yaml:6:28: error: cases[0].expect.covered_runs.from: invalid type: string \"one\", expected u32")]
#[case("wrong-type-document.yaml", "wrong-type-document.yaml:7:19: error: cases[0].expect.document.contains: invalid type: integer `5`, expected a sequence")]
#[case("empty-expect.yaml", "empty-expect.yaml:3:3: error: cases[0] `x`: `expect` is empty, so the case could never fail; expect at least one field")]
#[case("unknown-strategy.yaml", "unknown-strategy.yaml:6:17: error: cases[0].expect.strategy: unknown variant `fullnew`, expected one of `no_handoff`")]
#[case(
    "malformed.yaml",
    "malformed.yaml:4:1: error: cases[0].name: found a tab character"
)]
#[case(
    "no-state.yaml",
    "no-state.yaml:3:3: error: cases[0] `x`: no state; give `state: FILE` or `state_inline: {...}`"
)]
#[case(
    "duplicate-name.yaml",
    "duplicate-name.yaml:6:3: error: case name `x` is used twice (first at line 3)"
)]
#[case("bad-policy.yaml", "bad-policy.yaml:1:1: error: policy `../policies/fact-typo.policy` does not check:\ntests/fixtures/tooling/../policies/fact-typo.policy:4:19: error: unknown fact `target.runs_since_lastseen`")]
fn invalid_test_files_are_errors(#[case] file: &str, #[case] message: &str) {
    let o = baton(&["test", &format!("{T}/{file}")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("{T}/{message}")),
        "{}",
        stderr(&o)
    );
    assert!(
        !stdout(&o).contains("passed"),
        "an invalid file never runs: {}",
        stdout(&o)
    );
}

#[rstest]
#[case("missing-state.yaml", "missing-state.yaml:3:3: error: case `x`: state file tests/fixtures/tooling/no-such-state.yaml does not exist")]
#[case("bad-inline-state.yaml", "bad-inline-state.yaml:3 (state_inline of `x`): error: request.provider: unknown provider \"nobody_at_all\"")]
fn bad_states_fail_their_case(#[case] file: &str, #[case] message: &str) {
    let o = baton(&["test", &format!("{T}/{file}")]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains(&format!("  {T}/{message}")), "{out}");
    assert_eq!(out.lines().last(), Some("0 passed, 1 failed"));
}

/// A case whose state is a device fails with what it is, without reading it (`/dev/zero` was
/// read until memory ran out).
#[test]
fn a_case_naming_a_device_as_its_state_fails_without_reading_it() {
    let o = baton(&["test", &format!("{T}/device-state.yaml")]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("  /dev/zero: error: cannot read state file: it is a character device, not a regular file (baton reads only regular files)"),
        "{out}"
    );
    assert_eq!(out.lines().last(), Some("0 passed, 1 failed"));
}

/// A directory without test files would pass with nothing tested: it is an error.
#[test]
fn a_directory_without_test_files_is_an_error() {
    let tmp = tempfile::TempDir::new().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "not a test").unwrap();
    let dir = tmp.path().display().to_string();
    let o = baton(&["test", &dir]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("{dir}: error: no test files (*.yaml, *.yml) in this directory\n")
    );
    assert_eq!(stdout(&o), "");
}

/// Coverage counts rules, not lines: the same suite on the same policy laid out differently
/// (blank lines, comment lines, deeper indentation, so every rule moves) covers the same rules
/// the same number of times.
#[test]
fn coverage_does_not_depend_on_the_layout() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::TempDir::new().unwrap();
    let policy = std::fs::read_to_string(root.join("policies/t3code.policy")).unwrap();
    let relaid: String = policy
        .lines()
        .map(|l| format!("\n# moved\n      {l}\n"))
        .collect();
    std::fs::write(tmp.path().join("t3code.policy"), relaid).unwrap();
    let suite = std::fs::read_to_string(root.join("policies/tests/t3code.yaml"))
        .unwrap()
        .replace("policy: t3code", "policy: t3code.policy")
        .replace("../../examples/", &format!("{}/examples/", root.display()))
        .replace(
            "state: fixtures/",
            &format!("state: {}/policies/tests/fixtures/", root.display()),
        );
    std::fs::write(tmp.path().join("suite.yaml"), suite).unwrap();
    let rules = |suite: &Path| -> serde_json::Value {
        let o = baton(&["test", "--json", "--coverage", &suite.display().to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut rules = v["coverage"]["files"][0]["rules"].clone();
        // The file is named as given (shipped profile vs path), and the line each rule is
        // shown at moves with the layout; only the rules and their figures are compared.
        for r in rules.as_array_mut().into_iter().flatten() {
            r.as_object_mut().map(|o| o.remove("file"));
            r.as_object_mut().map(|o| o.remove("line"));
        }
        rules
    };
    let shipped = rules(&root.join("policies/tests/t3code.yaml"));
    assert!(shipped.as_array().is_some_and(|r| r.len() > 5), "{shipped}");
    assert_eq!(rules(&tmp.path().join("suite.yaml")), shipped);
}

#[test]
fn missing_test_path_and_bad_min_coverage() {
    let o = baton(&["test", "no/such/dir"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "no/such/dir: error: no such test file or directory\n"
    );
    let o = baton(&["test", "--min-coverage", "150"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--min-coverage takes a percentage from 0 to 100, got 150"));
}

// ---- fmt ----

#[test]
fn fmt_check_shows_a_diff_and_fmt_rewrites() {
    let o = baton(&["fmt", "--check", &format!("{T}/messy.policy")]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("\n-let   limit=3   # trailing comment\n"),
        "{out}"
    );
    assert!(
        out.contains("\n+let limit = 3 # trailing comment\n"),
        "{out}"
    );
    assert!(
        out.contains("\n+  full_new       when not target.has_thread or stale\n"),
        "{out}"
    );
    assert!(out.contains("+  because \"far\"\n"), "{out}");
    assert!(stderr(&o).contains("messy.policy: not formatted"));

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("messy.policy");
    std::fs::copy(format!("{T}/messy.policy"), &p).unwrap();
    let mode =
        |p: &Path| std::os::unix::fs::PermissionsExt::mode(&p.metadata().unwrap().permissions());
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let ps = p.to_str().unwrap();
    let o = baton(&["fmt", ps]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), format!("formatted {ps}\n"));
    // Rewritten in place by rename: same permissions, no temp file left behind.
    assert_eq!(mode(&p) & 0o777, 0o640);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("messy.policy")]);
    let o = baton(&["fmt", "--check", ps]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
}

#[test]
fn fmt_refuses_a_policy_that_does_not_parse() {
    let o = baton(&[
        "fmt",
        "--check",
        "tests/fixtures/policies/syntax-error.policy",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("tests/fixtures/policies/syntax-error.policy:"),
        "{}",
        stderr(&o)
    );
    let o = baton(&["fmt"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `fmt` (and `fmt --check`) on a directory without policy files would succeed having done
/// nothing: it is an error.
#[rstest]
#[case::rewrite(&[])]
#[case::check(&["--check"])]
fn fmt_on_a_directory_without_policies_is_an_error(#[case] flags: &[&str]) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path().display().to_string();
    let mut args = vec!["fmt"];
    args.extend_from_slice(flags);
    args.push(&dir);
    let o = baton(&args);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("{dir}: error: no policy files (*.policy) in this directory\n")
    );
}

// ---- diff ----

#[test]
fn diff_reports_flipped_decisions() {
    let corpus = format!("{T}/corpus");
    let to = format!("{T}/chained-2.policy");
    let o = baton(&[
        "diff", "--from", "default", "--to", &to, "--corpus", &corpus,
    ]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let at = format!("(now decided by strategy full_new at {to}:39:3)");
    let budget = format!("(now decided by budget document at {to}:56:1)");
    assert_eq!(
        out,
        format!(
            "{corpus}/ladder-full-existing.yaml -> codex:\n  \
             strategy: full_existing -> full_new {at}\n  \
             provider_thread: resume C1 -> create {at}\n  \
             stale: [] -> [too_many_chained_handoffs] (stale too_many_chained_handoffs at {to}:12:1 now holds: max_chained_handoffs = 2, target.chained_handoffs = 2)\n  \
             budget: document 670 of 60,000 (kept) -> document 665 of 100,000 (kept) {budget}\n\
             {corpus}/seed-switch.yaml -> codex:\n  \
             budget: document 960 of 60,000 (kept) -> document 960 of 100,000 (kept) {budget}\n\
             {corpus}/stale-model-changed.yaml -> codex:\n  \
             budget: document 735 of 60,000 (kept) -> document 735 of 100,000 (kept) {budget}\n\
             3 of 6 decisions changed (6 fields) in 3 of 3 states\n"
        )
    );
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        &to,
        "--corpus",
        &corpus,
        "--fail-on-change",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let first = &v["decisions"][0];
    assert_eq!(first["target"], "codex");
    assert_eq!(first["run"], 5);
    assert_eq!(first["changes"][0]["field"], "strategy");
    assert_eq!(first["changes"][0]["old"], "full_existing");
    assert_eq!(first["changes"][0]["new"], "full_new");
    assert_eq!(
        first["changes"][0]["causes"][0],
        serde_json::json!({"rule": "strategy full_new", "at": format!("{to}:39:3"), "effect": "decides"})
    );
    assert_eq!(
        first["changes"][2]["causes"][0]["effect"], "holds",
        "{}",
        first["changes"][2]
    );
    assert_eq!(
        first["changes"][1]["new"],
        serde_json::json!({"action": "create", "id": null})
    );
    assert_eq!(
        (
            &v["decisions_compared"],
            &v["decisions_changed"],
            &v["fields_changed"],
            &v["states_compared"],
            &v["states_changed"]
        ),
        (
            &serde_json::json!(6),
            &serde_json::json!(3),
            &serde_json::json!(6),
            &serde_json::json!(3),
            &serde_json::json!(3)
        )
    );
}

#[test]
fn diff_without_changes_exits_zero_even_when_failing_on_change() {
    let corpus = format!("{T}/corpus");
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        "default",
        "--corpus",
        &corpus,
        "--fail-on-change",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "0 of 6 decisions changed (0 fields) in 0 of 3 states\n"
    );
}

#[rstest]
#[case(&["--corpus", "tests/fixtures/tooling/empty-corpus"], "tests/fixtures/tooling/empty-corpus: error: the corpus has no state files (*.yaml, *.yml, *.json)\n")]
#[case(&["--corpus", "no/such/dir"], "no/such/dir: error: the corpus is not a readable directory:")]
fn diff_bad_corpus(#[case] args: &[&str], #[case] message: &str) {
    let mut a = vec!["diff", "--from", "default", "--to", "mcode"];
    a.extend_from_slice(args);
    let o = baton(&a);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with(message), "{}", stderr(&o));
}

#[test]
fn diff_with_a_policy_that_does_not_check() {
    let o = baton(&[
        "diff",
        "--from",
        "default",
        "--to",
        "tests/fixtures/policies/fact-typo.policy",
        "--corpus",
        "examples",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o)
        .starts_with("tests/fixtures/policies/fact-typo.policy:4:19: error: unknown fact"));
}

#[test]
fn test_file_errors_show_the_line_with_a_caret() {
    let o = baton(&["test", &format!("{T}/unknown-key.yaml")]);
    assert!(
        stderr(&o).ends_with("\n7 |       stal: []\n  |       ^\n"),
        "{}",
        stderr(&o)
    );
}

/// The canonical layout is the one the shipped policies are written in (default.policy differs
/// only in how its summary's item kinds are padded).
#[rstest]
#[case("policies/mcode.policy")]
#[case("policies/t3code.policy")]
#[case("policies/t3code-legacy.policy")]
fn shipped_policies_are_in_the_canonical_layout(#[case] path: &str) {
    let o = baton(&["fmt", "--check", path]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}
