//! External summarizer: success and every classified failure, with small shell scripts.
#![cfg(unix)]

use std::path::Path;
use std::time::{Duration, Instant};

use baton::deliver::{
    run_external, run_external_blocking, summarize_blocking, ExternalCommand, SummarizerFailure,
    SummarySource,
};
use rstest::rstest;
use serde_json::json;
use tempfile::TempDir;

/// Scripts are run as `/bin/sh <script>` rather than executed directly, which avoids
/// ETXTBSY races when tests write and exec files concurrently.
fn script(dir: &Path, name: &str, body: &str, timeout: Duration) -> ExternalCommand {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    ExternalCommand {
        program: "/bin/sh".to_string(),
        args: vec![path.display().to_string()],
        timeout,
    }
}

/// A policy summary source running `body` as a script.
fn source(dir: &Path, name: &str, body: &str, timeout_ms: u64) -> SummarySource {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    SummarySource::Command {
        command: format!("/bin/sh '{}'", path.display()),
        timeout_ms,
    }
}

/// The timeout of a command that must succeed: a hang guard, not a budget (a loaded machine
/// may take seconds to start a shell; 20 s used to be a budget a slow run could miss).
const LONG: Duration = Duration::from_secs(600);

fn input() -> serde_json::Value {
    json!({ "thread": "t1", "messages": [{ "role": "user", "text": "héllo" }] })
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn process_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Poll until `pid` is gone (the event); the ten minutes are a hang guard, not a budget.
fn wait_dead(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(600);
    while Instant::now() < until {
        if process_dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The pid a script wrote before its 300 ms timeout killed it; `None` when the kill came
/// first (a machine so loaded that the shell had not run its first line yet): there is then
/// no process to check, which makes that run of the test weaker, never a false failure.
fn read_pid(p: &Path) -> Option<u32> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

#[tokio::test]
async fn success_returns_stdout_and_receives_json_on_stdin() {
    let tmp = TempDir::new().expect("tempdir");
    let got = tmp.path().join("stdin.json");
    let cmd = script(
        tmp.path(),
        "ok.sh",
        &format!(
            "cat > '{}'\nprintf '# Summary\\n\\nThe user asked about caching.\\n\\n'",
            got.display()
        ),
        LONG,
    );
    let out = run_external(&cmd, &input(), 500).await.expect("success");
    assert_eq!(out, "# Summary\n\nThe user asked about caching.");
    let received: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&got).expect("stdin copy")).expect("json");
    assert_eq!(received, input());
}

#[tokio::test]
async fn command_that_ignores_a_large_stdin_still_succeeds() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "ignore.sh", "echo summary", LONG);
    let big = json!({ "text": "x".repeat(4 << 20) });
    assert_eq!(run_external(&cmd, &big, 100).await.expect("ok"), "summary");
}

#[tokio::test]
async fn hanging_command_times_out_and_is_killed() {
    let tmp = TempDir::new().expect("tempdir");
    let pid_file = tmp.path().join("pid");
    let cmd = script(
        tmp.path(),
        "hang.sh",
        &format!("echo $$ > '{}'\nexec sleep 3600", pid_file.display()),
        Duration::from_millis(300),
    );
    let started = Instant::now();
    let err = run_external(&cmd, &input(), 500)
        .await
        .expect_err("timeout");
    let elapsed = started.elapsed();
    assert_eq!(err, SummarizerFailure::Timeout(Duration::from_millis(300)));
    assert_eq!(err.kind(), "timeout");
    assert_eq!(
        err.to_string(),
        "summarizer timed out after 300 ms and was killed"
    );
    // Not a timing assertion: the command sleeps an hour, so only a run that waited for it to
    // end on its own (instead of killing it) gets anywhere near this.
    assert!(elapsed < Duration::from_secs(1800), "took {elapsed:?}");
    if let Some(pid) = read_pid(&pid_file) {
        assert!(wait_dead(pid), "child still running");
    }
}

#[tokio::test]
async fn timeout_kills_grandchildren_too() {
    let tmp = TempDir::new().expect("tempdir");
    let pid_file = tmp.path().join("pid");
    let cmd = script(
        tmp.path(),
        "hang2.sh",
        &format!("sleep 30 &\necho $! > '{}'\nwait", pid_file.display()),
        Duration::from_millis(300),
    );
    let err = run_external(&cmd, &input(), 500)
        .await
        .expect_err("timeout");
    assert_eq!(err.kind(), "timeout");
    if let Some(pid) = read_pid(&pid_file) {
        assert!(wait_dead(pid), "grandchild still running");
    }
}

#[tokio::test]
async fn non_zero_exit_is_classified_with_stderr_excerpt() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(
        tmp.path(),
        "fail.sh",
        "echo partial\necho 'model not found' >&2\nexit 3",
        LONG,
    );
    let err = run_external(&cmd, &input(), 500).await.expect_err("fails");
    assert_eq!(
        err,
        SummarizerFailure::ExitStatus {
            code: Some(3),
            signal: None,
            stderr: "model not found".into()
        }
    );
    assert_eq!(err.kind(), "exit_status");
    assert_eq!(
        err.to_string(),
        "summarizer exited with status 3: model not found"
    );
}

#[tokio::test]
async fn death_by_signal_is_classified() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "sig.sh", "kill -9 $$", LONG);
    let err = run_external(&cmd, &input(), 500).await.expect_err("killed");
    assert_eq!(
        err,
        SummarizerFailure::ExitStatus {
            code: None,
            signal: Some(9),
            stderr: String::new()
        }
    );
    assert_eq!(err.to_string(), "summarizer was killed by signal 9");
}

#[rstest]
#[case::nothing("true")]
#[case::whitespace("printf '  \\n\\n\\t\\n'")]
#[tokio::test]
async fn empty_output_is_classified(#[case] body: &str) {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "empty.sh", body, LONG);
    let err = run_external(&cmd, &input(), 500).await.expect_err("empty");
    assert_eq!(err, SummarizerFailure::EmptyOutput);
    assert_eq!(err.kind(), "empty_output");
}

#[tokio::test]
async fn output_over_budget_is_classified() {
    let tmp = TempDir::new().expect("tempdir");
    // 50 characters, 100 bytes (each 'é' is two bytes): the budget counts characters.
    let cmd = script(
        tmp.path(),
        "long.sh",
        &format!("printf '{}'", "é".repeat(50)),
        LONG,
    );
    let err = run_external(&cmd, &input(), 10).await.expect_err("over");
    assert_eq!(
        err,
        SummarizerFailure::OverBudget {
            chars: 50,
            budget: 10
        }
    );
    assert_eq!(err.kind(), "over_budget");
    assert_eq!(
        err.to_string(),
        "summarizer output has 50 characters, over the budget of 10"
    );
    // Exactly at the budget is fine.
    assert_eq!(
        run_external(&cmd, &input(), 50).await.expect("fits"),
        "é".repeat(50)
    );
}

#[tokio::test]
async fn endless_output_is_cut_off_as_over_budget() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "yes.sh", "exec yes summary", LONG);
    let started = Instant::now();
    let err = run_external(&cmd, &input(), 1000).await.expect_err("over");
    assert!(
        matches!(err, SummarizerFailure::OverBudget { chars, budget: 1000 } if chars > 1000),
        "{err:?}"
    );
    // Cut off, not timed out: the over-budget error itself says the output was cut; the
    // bound is LONG (the timeout), a hang guard rather than a budget.
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn invalid_utf8_is_classified() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "bin.sh", "printf 'ok \\377\\376 bytes'", LONG);
    let err = run_external(&cmd, &input(), 500).await.expect_err("utf8");
    assert_eq!(err, SummarizerFailure::InvalidUtf8);
    assert_eq!(err.kind(), "invalid_utf8");
}

#[tokio::test]
async fn missing_program_is_a_spawn_failure() {
    let cmd = ExternalCommand {
        program: "/nonexistent/baton-summarizer".into(),
        args: vec![],
        timeout: LONG,
    };
    let err = run_external(&cmd, &input(), 500).await.expect_err("spawn");
    assert_eq!(err.kind(), "spawn");
    assert!(
        err.to_string()
            .starts_with("summarizer could not be started: /nonexistent/baton-summarizer: "),
        "{err}"
    );
}

#[test]
fn blocking_helper_runs_without_a_runtime() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "ok.sh", "echo '# From the command'", LONG);
    assert_eq!(
        run_external_blocking(&cmd, &input(), 100).expect("ok"),
        "# From the command"
    );
}

#[tokio::test]
async fn blocking_helper_works_inside_a_runtime() {
    let tmp = TempDir::new().expect("tempdir");
    let cmd = script(tmp.path(), "ok.sh", "echo hi", LONG);
    assert_eq!(
        run_external_blocking(&cmd, &input(), 100).expect("ok"),
        "hi"
    );
}

fn deterministic(_: &serde_json::Value, budget: usize) -> String {
    format!("deterministic summary within {budget}")
}

#[test]
fn summarize_uses_the_command_when_it_succeeds() {
    let tmp = TempDir::new().expect("tempdir");
    let src = source(tmp.path(), "ok.sh", "echo '# External'", 20_000);
    let out = summarize_blocking(&src, &input(), 100, &deterministic);
    assert_eq!(out.text, "# External");
    let SummarySource::Command { command, .. } = &src else {
        unreachable!()
    };
    assert_eq!(out.created_by, format!("command:{command}"));
    assert_eq!(out.fallback_reason, None);
}

#[rstest]
#[case::exit("exit 1", "exit_status")]
#[case::empty("true", "empty_output")]
#[case::over("printf '%0200d' 0", "over_budget")]
#[case::utf8("printf '\\377'", "invalid_utf8")]
#[case::timeout("exec sleep 30", "timeout")]
fn summarize_falls_back_to_deterministic(#[case] body: &str, #[case] kind: &str) {
    let tmp = TempDir::new().expect("tempdir");
    // Only the timeout case has a short timeout: with 300 ms for all, a loaded machine could
    // time out a command that exits at once, and the case would see "timeout" (issue 27).
    let timeout_ms = if kind == "timeout" { 300 } else { 600_000 };
    let src = source(tmp.path(), "s.sh", body, timeout_ms);
    let out = summarize_blocking(&src, &input(), 100, &deterministic);
    assert_eq!(out.text, "deterministic summary within 100");
    assert_eq!(out.created_by, "deterministic");
    assert_eq!(out.fallback_reason.as_deref(), Some(kind));
    assert!(out.fallback_detail.is_some());
}

#[test]
fn deterministic_source_needs_no_command() {
    let out = summarize_blocking(&SummarySource::Deterministic, &input(), 42, &deterministic);
    assert_eq!(out.text, "deterministic summary within 42");
    assert_eq!(out.created_by, "deterministic");
    assert_eq!(out.fallback_reason, None);
}

#[test]
fn kinds_are_stable() {
    let all: Vec<(SummarizerFailure, &str)> = vec![
        (
            SummarizerFailure::Timeout(Duration::from_secs(1)),
            "timeout",
        ),
        (
            SummarizerFailure::ExitStatus {
                code: Some(1),
                signal: None,
                stderr: String::new(),
            },
            "exit_status",
        ),
        (SummarizerFailure::EmptyOutput, "empty_output"),
        (
            SummarizerFailure::OverBudget {
                chars: 2,
                budget: 1,
            },
            "over_budget",
        ),
        (SummarizerFailure::InvalidUtf8, "invalid_utf8"),
        (SummarizerFailure::Spawn("x".into()), "spawn"),
    ];
    for (f, k) in all {
        assert_eq!(f.kind(), k);
    }
}
