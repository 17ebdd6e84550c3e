//! `baton explain` as a user runs it: exit codes, `--target`, the `--json` contract of
//! DESIGN §4, and snapshots of the human output (plain and `--verbose`).

use rstest::rstest;
use serde_json::Value;
use std::process::{Command, Output};

use crate::common;
use common::{baton, stderr};

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

fn explain_json(args: &[&str]) -> Value {
    let mut all = vec!["explain", "--json"];
    all.extend_from_slice(args);
    let out = baton(&all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

#[rstest]
#[case::ok(&["explain", "--state", "examples/seed-switch.yaml"], 0)]
#[case::ok_json(&["explain", "--state", "examples/seed-switch.yaml", "--json"], 0)]
#[case::help(&["explain", "--help"], 0)]
#[case::bad_state(&["explain", "--state", "tests/fixtures/state/empty.yaml"], 1)]
#[case::missing_state(&["explain", "--state", "no/such/state.yaml"], 1)]
#[case::bad_policy(
    &["explain", "--state", "examples/seed-switch.yaml", "--policy", "tests/fixtures/policies/fact-typo.policy"],
    1
)]
#[case::missing_policy(&["explain", "--state", "examples/seed-switch.yaml", "--policy", "nope"], 1)]
#[case::unknown_target(&["explain", "--state", "examples/seed-switch.yaml", "--target", "gemini"], 1)]
#[case::no_state(&["explain"], 2)]
#[case::unknown_flag(&["explain", "--state", "examples/seed-switch.yaml", "--bogus"], 2)]
#[case::unknown_command(&["explian", "--state", "examples/seed-switch.yaml"], 2)]
#[case::no_command(&[], 2)]
#[case::flag_without_value(&["explain", "--state"], 2)]
fn exit_code(#[case] args: &[&str], #[case] code: i32) {
    let out = baton(args);
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(&out));
    if code != 0 {
        assert!(!stderr(&out).is_empty(), "an error says why");
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}

#[test]
fn no_state_says_how_to_give_one() {
    let out = baton(&["explain"]);
    assert_eq!(
        stderr(&out),
        "error: give a state with --state FILE, or a stored thread with --db FILE --thread ID\n"
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unknown_target_is_named() {
    let out = baton(&[
        "explain",
        "--state",
        "examples/seed-switch.yaml",
        "--target",
        "gemini",
    ]);
    assert_eq!(
        stderr(&out),
        "--target: error: unknown provider \"gemini\"; known providers are claude, codex, copilot, cursor, or those declared under `providers:` in the state or in the policy's `providers` block\n"
    );
}

#[test]
fn target_overrides_request_provider() {
    // The state asks for codex (run 9 -> delta into C1); claude's L1 saw runs 1-8 already.
    let codex = explain_json(&["--state", "examples/seed-switch.yaml"]);
    assert_eq!(codex["target"], "codex");
    assert_eq!(codex["strategy"], "delta_existing");

    let claude = explain_json(&["--state", "examples/seed-switch.yaml", "--target", "claude"]);
    assert_eq!(claude["target"], "claude");
    assert_eq!(claude["strategy"], "no_handoff");
    assert_eq!(
        claude["provider_thread"],
        serde_json::json!({"action": "resume", "id": "L1"})
    );

    // A provider with no thread yet: a new thread with everything.
    let cursor = explain_json(&["--state", "examples/seed-switch.yaml", "--target", "cursor"]);
    assert_eq!(cursor["target"], "cursor");
    assert_eq!(cursor["strategy"], "full_new");
    assert_eq!(
        cursor["covered_runs"],
        serde_json::json!({"from": 1, "to": 8})
    );
}

#[test]
fn json_has_the_contract_fields() {
    let d = explain_json(&["--state", "examples/seed-switch.yaml"]);
    let obj = d.as_object().unwrap();
    for key in [
        "policy",
        "target",
        "strategy",
        "handoff_strategy",
        "provider_thread",
        "covered_runs",
        "stale",
        "delivery",
        "pregrant",
        "trace",
    ] {
        assert!(obj.contains_key(key), "missing `{key}`");
    }
    assert_eq!(d["policy"]["name"], "default");
    let sha = d["policy"]["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    assert!(sha.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(d["target"], "codex");
    assert_eq!(d["strategy"], "delta_existing");
    assert_eq!(d["handoff_strategy"], "delta_since_target_last_seen");
    assert_eq!(
        d["provider_thread"],
        serde_json::json!({"action": "resume", "id": "C1"})
    );
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 6, "to": 8}));
    assert_eq!(d["stale"], serde_json::json!([]));
    assert_eq!(d["delivery"]["mode"], "off_band");
    assert_eq!(d["delivery"]["inline_limit"], 500);
    assert_eq!(
        d["pregrant"],
        serde_json::json!({
            "tool": "Read",
            "path": "/tmp/baton-test-docs/th_1/H2/handoff.md",
            "turns": 1,
            "uses": 1
        })
    );
    let trace = d["trace"].as_array().unwrap();
    assert!(!trace.is_empty());
    for t in trace {
        assert!(t["rule"].is_string(), "{t}");
        assert!(
            t["at"].as_str().unwrap().starts_with("default.policy:"),
            "{t}"
        );
        assert!(
            t["outcome"] == "matched" || t["outcome"] == "not_matched",
            "{t}"
        );
        assert!(t["values"].is_object(), "{t}");
    }
}

#[test]
fn json_without_handoff_has_nulls() {
    let d = explain_json(&["--state", "examples/ladder-unsupported.yaml"]);
    assert_eq!(d["strategy"], "unsupported");
    assert_eq!(d["handoff_strategy"], Value::Null);
    assert_eq!(
        d["provider_thread"],
        serde_json::json!({"action": "none", "id": null})
    );
    assert_eq!(d["covered_runs"], Value::Null);
    assert_eq!(d["delivery"], Value::Null);
    assert_eq!(d["pregrant"], Value::Null);
}

#[test]
fn json_lists_stale_signals_in_policy_order() {
    let d = explain_json(&["--state", "examples/ladder-full-new-stale.yaml"]);
    assert_eq!(
        d["stale"],
        serde_json::json!(["model_changed", "runtime_mode_changed"])
    );
}

#[test]
fn state_from_stdin() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["explain", "--state", "-", "--json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("BATON_HANDOFF_DIR", "/tmp/baton-test-docs")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let text = std::fs::read("examples/seed-run6.yaml").unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), &text).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["strategy"], "full_new");
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 1, "to": 5}));
}

#[rstest]
#[case::seed_switch("seed-switch")]
#[case::seed_run6("seed-run6")]
#[case::full_new_stale("ladder-full-new-stale")]
#[case::unsupported("ladder-unsupported")]
fn explain_snapshot(#[case] example: &str) {
    let state = format!("examples/{example}.yaml");
    let out = baton(&["explain", "--state", &state]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!(
        format!("explain_{example}"),
        common::redact_sha(&stdout(&out))
    );

    let out = baton(&["explain", "--state", &state, "--verbose"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!(
        format!("explain_verbose_{example}"),
        common::redact_sha(&stdout(&out))
    );
}

/// `inline_limit` limits only the off-band pointer prompt; explain names it so, and an inline
/// handoff (here 11,814 characters with the default limit of 500) is not shown under a limit it
/// does not have (it printed "inline (inline limit 500)"; issue 27). The decision JSON keeps
/// `delivery.inline_limit`.
#[test]
fn explain_says_what_inline_limit_limits() {
    let out = baton(&[
        "explain",
        "--state",
        "tests/fixtures/budget/far-over-budget.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("\n  delivery  inline (the handoff is in the prompt, whole; inline_limit limits only an off-band pointer prompt)\n"),
        "{text}"
    );
    assert!(!text.contains("inline limit"), "{text}");
    let off_band = baton(&["explain", "--state", "examples/seed-switch.yaml"]);
    assert!(
        stdout(&off_band)
            .contains("\n  delivery  off_band (pointer prompt limit 500 characters)\n"),
        "{}",
        stdout(&off_band)
    );
    let v = explain_json(&["--state", "tests/fixtures/budget/far-over-budget.yaml"]);
    assert_eq!(v["delivery"]["mode"], "inline", "{v}");
    assert_eq!(v["delivery"]["inline_limit"], 500, "{v}");
}
