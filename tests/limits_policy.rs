//! Limits of the policy language (docs/limits.md): long `let` chains resolve without
//! recursion, every count is range-checked with the message the user sees, and checking stays
//! linear in the size of the policy.

use rstest::rstest;
use std::process::Output;

use crate::common;
use common::baton;

/// Writes `policy` to a temporary file and runs `baton check` on it.
fn check_text(name: &str, policy: &str) -> (String, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, policy).unwrap();
    let out: Output = baton(&["check", path.to_str().unwrap()]);
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// `let c0 = c1`, `let c1 = c2`, ..., `let c{n-1} = 1`, read by the ladder.
fn let_chain(n: usize) -> String {
    let mut p = String::from("policy \"chain\" {}\n");
    for i in 0..n - 1 {
        p.push_str(&format!("let c{i} = c{}\n", i + 1));
    }
    p.push_str(&format!("let c{} = 1\n", n - 1));
    p.push_str("strategy {\n  no_handoff when target.runs_since_last_seen == c0\n  full_new otherwise\n}\n");
    p
}

/// A chain of 50,000 `let`s (recursion overflowed the stack at ~17,500) checks cleanly.
#[test]
fn a_50_000_link_let_chain_checks() {
    let (stderr, code) = check_text("chain.policy", &let_chain(50_000));
    assert_eq!(code, Some(0), "{}", &stderr[..stderr.len().min(2000)]);
    assert_eq!(stderr, "");
}

/// A cycle at the end of a long chain is still reported once, naming the cycle.
#[test]
fn a_cycle_at_the_end_of_a_long_chain_is_reported_once() {
    let mut p = String::new();
    for i in 0..30_000 {
        p.push_str(&format!("let c{i} = c{}\n", i + 1));
    }
    p.push_str("let c30000 = c29999\n");
    p.push_str("strategy {\n  no_handoff when c0 > 1\n  full_new otherwise\n}\n");
    let err = common::policy_text("cycle.policy", &p)
        .expect_err("a cycle does not check")
        .to_string();
    assert_eq!(
        err.lines().next(),
        Some("cycle.policy:30001:14: error: `let c29999` depends on itself: c29999 -> c30000 -> c29999"),
        "{}",
        &err[..err.len().min(500)]
    );
    assert_eq!(err.matches("error:").count(), 1);
    // The links of a broken chain are not also "unused": one warning per link used to follow
    // the error (30,000 of them, each holding a copy of the 578 KB source: 16 GB; issue 27).
    assert_eq!(
        err.matches("warning:").count(),
        0,
        "{}",
        &err[..err.len().min(500)]
    );
}

/// `n` `let`s that nothing reads (one "unused" warning each).
fn unused_lets(n: usize) -> String {
    let mut p = String::new();
    for i in 0..n {
        p.push_str(&format!("let unused_number_{i} = {i}\n"));
    }
    p.push_str("strategy {\n  full_new otherwise\n}\n");
    p
}

/// Every diagnostic points into the policy's one copy of its source (an `Arc`), however many
/// there are: each used to hold its own copy, so memory grew with warnings x file size.
#[test]
fn diagnostics_share_the_policy_source() {
    let policy = common::policy_text("unused.policy", &unused_lets(10_000)).unwrap();
    assert_eq!(policy.warnings().len(), 10_000);
    let text = &policy.sources()[0].text;
    for w in policy.warnings() {
        let shared = w
            .source
            .as_ref()
            .expect("a warning with a span has its source");
        assert!(std::sync::Arc::ptr_eq(shared.text(), text), "{w}");
    }
    // The source itself, plus one reference per warning: no copies.
    assert_eq!(std::sync::Arc::strong_count(text), 10_001);
}

/// `baton check` on a 300 KB policy with 10,000 unused `let`s (10,000 warnings) stays within
/// tens of megabytes: a 228 KB one peaked at 2.2 GB when each warning held a copy of the source. The
/// child's peak resident memory comes from `wait4`, so nothing here is timed.
#[test]
fn checking_ten_thousand_warnings_takes_memory_linear_in_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unused.policy");
    let text = unused_lets(10_000);
    assert!(text.len() > 200_000, "{}", text.len());
    std::fs::write(&path, &text).unwrap();
    let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
    // Reaped by `wait4` below, which also returns the child's resource usage.
    #[allow(clippy::zombie_processes)]
    let child = common::baton_cmd()
        .args(["check", path.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: `rusage` is plain data that `wait4` fills in; `pid` is our own child, reaped here.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    let printed = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    assert_eq!(printed.matches("warning: unused `let").count(), 10_000);
    let peak_kb = usage.ru_maxrss;
    assert!(peak_kb < 256 * 1024, "baton check peaked at {peak_kb} kB");
}

fn pregrant(turns: &str, uses: &str) -> String {
    format!(
        "policy \"p\" {{\n  extends \"default\"\n}}\npregrant {{\n  read handoff.document when delivery.off_band\n  turns {turns} uses {uses}\n}}\n"
    )
}

fn summary(entry: &str) -> String {
    format!(
        "policy \"p\" {{\n  extends \"default\"\n}}\nsummary {{\n  include user_message into goals\n  {entry}\n}}\n"
    )
}

/// Every count is checked against the range its field holds; the error points at the number
/// and names the range. (2^32 used to wrap to 0 and `text max 2^63-1` panicked.)
#[rstest]
#[case::turns_2_32(
    pregrant("4294967296", "1"),
    "p.policy:6:9: error: `turns` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::uses_2_32(
    pregrant("1", "4294967296"),
    "p.policy:6:16: error: `uses` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::uses_zero(
    pregrant("1", "0"),
    "p.policy:6:16: error: `uses` is 0, out of range: it must be between 1 and 4294967295"
)]
#[case::turns_negative(
    pregrant("-1", "1"),
    "p.policy:6:9: error: `turns` is -1, out of range: it must be between 1 and 4294967295"
)]
#[case::text_max_i64_max(
    summary("text max 9223372036854775807"),
    "p.policy:6:12: error: `text max` is 9223372036854775807, out of range: it must be between 4 and 4294967295"
)]
#[case::text_max_too_small(
    summary("text max 3"),
    "p.policy:6:12: error: `text max` is 3, out of range: it must be between 4 and 4294967295"
)]
#[case::budget_2_32(
    summary("budget 4294967296 newest_first"),
    "p.policy:6:10: error: `budget` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::timeout_2_32(
    summary("source command \"true\" timeout_ms 4294967296"),
    "p.policy:6:36: error: `timeout_ms` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::inline_limit_2_32(
    "policy \"p\" {\n  extends \"default\"\n}\ndelivery {\n  inline otherwise\n  inline_limit 4294967296\n}\n".to_string(),
    "p.policy:6:16: error: `inline_limit` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::text_head_2_32(
    summary("text head 4294967296"),
    "p.policy:6:13: error: `text head` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::document_max_2_32(
    summary("document max 4294967296"),
    "p.policy:6:16: error: `document max` is 4294967296, out of range: it must be between 1 and 4294967295"
)]
#[case::degrade_shorten_2_32(
    summary("degrade shorten 4294967296"),
    "p.policy:6:3: error: a degradation step of 4294967296 characters is out of range: it must be between 1 and 4294967295"
)]
#[case::literal_past_i64(
    "policy \"p\" {\n  extends \"default\"\n}\nlet big = 9223372036854775808\nstrategy {\n  no_handoff when target.runs_since_last_seen > big\n  full_new otherwise\n}\n".to_string(),
    "p.policy:4:11: error: number `9223372036854775808` is out of range: numbers are between -9223372036854775808 and 9223372036854775807"
)]
fn counts_out_of_range_are_errors(#[case] policy: String, #[case] first_line: &str) {
    let (stderr, code) = check_text("p.policy", &policy);
    assert_eq!(code, Some(1), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.ends_with(first_line), "{stderr}");
}

/// The largest value of each range checks.
#[test]
fn counts_at_the_top_of_their_range_check() {
    let (stderr, code) = check_text("p.policy", &pregrant("4294967295", "4294967295"));
    assert_eq!(code, Some(0), "{stderr}");
    let (stderr, code) = check_text("p.policy", &summary("text max 4294967295"));
    assert_eq!(code, Some(0), "{stderr}");
}

/// Constant arithmetic in `let`s saturates instead of overflowing.
#[test]
fn let_arithmetic_past_i64_does_not_panic() {
    let p = "policy \"p\" {\n  extends \"default\"\n}\nlet big = 9223372036854775807 + 1\nstrategy {\n  no_handoff when target.runs_since_last_seen > big\n  full_new otherwise\n}\n";
    let (stderr, code) = check_text("p.policy", p);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A policy file over the size limit is refused before it is read (a sparse file: no disk).
#[test]
fn a_policy_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.policy");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(17 * 1024 * 1024).unwrap();
    let out = baton(&["check", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "huge.policy:1:1: error: policy `"
        ) && stderr.contains(
            "huge.policy` is 17825792 bytes, over the policy size limit of 16777216 bytes (16 MiB)"
        ),
        "{stderr}"
    );
}

/// A chain of 40 files each extending the next is refused at the 33rd, naming the limit.
#[test]
fn an_extends_chain_past_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40 {
        let body = if i + 1 < 40 {
            format!("policy \"p{i}\" {{\n  extends \"p{}.policy\"\n}}\n", i + 1)
        } else {
            "policy \"last\" {\n  extends \"default\"\n}\n".to_string()
        };
        std::fs::write(dir.path().join(format!("p{i}.policy")), body).unwrap();
    }
    let first = dir.path().join("p0.policy");
    let out = baton(&["check", first.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("p31.policy:2:11: error: `extends` chain deeper than 32 files"),
        "{stderr}"
    );
}

/// Every recursive walk over expressions (parser, checker, evaluator) is bounded by the
/// nesting limit: a condition nested right at the limit (64 levels of parentheses, with lists
/// and `not`s inside) checks and decides on a thread with a 2 MiB stack (tokio's default for
/// blocking threads; `baton serve` gives its threads 8 MiB), even unoptimised.
#[test]
fn a_condition_at_the_nesting_limit_checks_and_decides_on_a_small_stack() {
    let n = 63;
    let cond = format!(
        "{}not not not target.has_thread and request.kind in [\"dispatch\", \"fork\"]{}",
        "(".repeat(n),
        ")".repeat(n)
    );
    let policy = format!(
        "policy \"edge\" {{\n  extends \"default\"\n}}\nstrategy {{\n  full_new when {cond}\n  full_new otherwise\n}}\n"
    );
    let state = baton::state::load_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed-run6.yaml"),
    )
    .unwrap();
    let strategy = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let engine = baton::Engine::from_text("edge.policy", &policy).expect("checks");
            let d = engine.decide(&state, None).expect("decides");
            d.strategy
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert_eq!(strategy, baton::decision::Strategy::FullNew);
}
