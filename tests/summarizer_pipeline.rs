//! The policy's summary source wired through the pipeline and `baton render`: an external
//! command writes the summary, and each of its failures falls back to the deterministic one
//! with `created_by` and the reason recorded in the provenance.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use rstest::rstest;
use tempfile::TempDir;

use crate::common;
use common::baton_cmd;

const STATE: &str = "examples/seed-switch.yaml";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/summarizers")
        .join(name)
}

/// The timeout of a command that must finish: a hang guard, not a budget (10 s used to be a
/// budget a loaded machine could miss, turning an `exit_status` case into `timeout`).
const GUARD_MS: u64 = 600_000;

/// A policy extending `default` whose summary is written by `command`.
fn policy_with(dir: &Path, command: &str, timeout_ms: u64) -> PathBuf {
    let path = dir.join("external.policy");
    let text = format!(
        r#"policy "external" {{
  extends "default"
}}

summary {{
  include user_message into goals
  include decision     into decisions
  exclude reasoning because "hidden reasoning never leaves the thread"
  budget 2_000 newest_first
  source command "{command}" timeout_ms {timeout_ms}
}}
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn command_for(name: &str) -> String {
    format!("sh {}", script(name).display())
}

fn pipeline(policy: &Path) -> baton::Outcome {
    let state = baton::state::load_file(Path::new(STATE)).unwrap();
    let policy = common::policy(policy.to_str().unwrap()).expect("policy checks");
    common::engine_of(&policy, None)
        .run(&state, None)
        .expect("pipeline runs")
}

#[test]
fn a_succeeding_command_writes_the_summary() {
    let tmp = TempDir::new().unwrap();
    let command = command_for("ok.sh");
    let o = pipeline(&policy_with(tmp.path(), &command, GUARD_MS));
    let r = o.rendered.expect("a handoff");
    assert!(
        r.document.contains("## Summary by the external summarizer"),
        "{}",
        r.document
    );
    // The command saw the thread id in its JSON input.
    assert!(r.document.contains("Thread th_1,"), "{}", r.document);
    assert!(
        !r.document.contains("## User goals and constraints"),
        "the deterministic sections are replaced"
    );
    assert_eq!(r.provenance.created_by, format!("command:{command}"));
    assert_eq!(r.provenance.fallback_reason, None);
    assert!(r
        .document
        .contains(&format!("created by command:{command}")));
}

#[rstest]
#[case::hang(
    "hang.sh",
    300,
    "timeout",
    "summarizer timed out after 300 ms and was killed"
)]
#[case::non_zero(
    "fail.sh",
    GUARD_MS,
    "exit_status",
    "summarizer exited with status 3: model quota exhausted"
)]
#[case::nothing(
    "empty.sh",
    GUARD_MS,
    "empty_output",
    "summarizer printed nothing on stdout"
)]
#[case::too_much(
    "big.sh",
    GUARD_MS,
    "over_budget",
    "summarizer output has 200000 characters, over the budget of 2000"
)]
#[case::not_utf8(
    "binary.sh",
    GUARD_MS,
    "invalid_utf8",
    "summarizer output is not valid UTF-8"
)]
fn a_failing_command_falls_back_to_deterministic(
    #[case] name: &str,
    #[case] timeout_ms: u64,
    #[case] kind: &str,
    #[case] detail: &str,
) {
    let tmp = TempDir::new().unwrap();
    let o = pipeline(&policy_with(tmp.path(), &command_for(name), timeout_ms));
    let r = o.rendered.expect("a handoff");
    assert_eq!(r.provenance.created_by, "deterministic");
    assert_eq!(r.provenance.fallback_reason.as_deref(), Some(kind));
    assert_eq!(r.provenance.fallback_detail.as_deref(), Some(detail));
    assert!(
        r.document.contains("## User goals and constraints"),
        "{}",
        r.document
    );
    assert!(r.document.contains("created by deterministic"));
}

#[test]
fn render_cli_records_the_fallback_in_handoff_json() {
    let tmp = TempDir::new().unwrap();
    let policy = policy_with(tmp.path(), &command_for("fail.sh"), GUARD_MS);
    let out_dir = tmp.path().join("out");
    let out = baton_cmd()
        .args(["render", "--state", STATE, "--policy"])
        .arg(&policy)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "warning: the summarizer failed (exit_status: summarizer exited with status 3: model quota exhausted); the deterministic summary is used"
        ),
        "{stderr}"
    );
    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("handoff.json")).unwrap())
            .unwrap();
    assert_eq!(prov["created_by"], "deterministic");
    assert_eq!(prov["fallback_reason"], "exit_status");
}

#[test]
fn render_cli_uses_the_command_output() {
    let tmp = TempDir::new().unwrap();
    let policy = policy_with(tmp.path(), &command_for("ok.sh"), GUARD_MS);
    let out = baton_cmd()
        .args(["render", "--state", STATE, "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc = String::from_utf8_lossy(&out.stdout);
    assert!(
        doc.contains("## Summary by the external summarizer"),
        "{doc}"
    );
}
