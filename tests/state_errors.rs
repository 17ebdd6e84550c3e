//! Bad state files: each gives exactly one clear message on stderr and exit code 1, through
//! the real binary (`baton explain --state FILE`). Fixtures are in `tests/fixtures/state/`.

use rstest::rstest;
use std::path::Path;
use std::process::Output;

use crate::common;

fn explain(state: &Path) -> Output {
    common::baton_cmd()
        .arg("explain")
        .arg("--state")
        .arg(state)
        .output()
        .expect("baton runs")
}

#[rstest]
#[case::unknown_field(
    "unknown-field.yaml",
    ":4:31: error: provider_threads[0].modle: unknown field `modle`, expected one of `id`, `provider`, `model`, `runtime_mode`, `status`, `resume_failed`"
)]
#[case::thread_id_that_climbs_out_of_the_document_root(
    "thread-id-path.yaml",
    ":2:14: error: thread.id: must not contain `..`: the thread id becomes a directory name for its handoff documents"
)]
#[case::duplicate_provider_thread(
    "duplicate-provider-thread.yaml",
    ":5:10: error: provider_threads[1].id: duplicate provider thread id \"C1\""
)]
#[case::duplicate_handoff(
    "duplicate-handoff.yaml",
    ":11:10: error: handoffs[1].id: duplicate handoff id \"H1\""
)]
#[case::duplicate_item(
    "duplicate-item.yaml",
    ":11:14: error: runs[1].items[0].id: duplicate item id \"i1\" (also at runs[0].items[0])"
)]
#[case::non_contiguous_ordinals(
    "non-contiguous-ordinals.yaml",
    ":6:15: error: runs[2].ordinal: expected ordinal 3, found 4: ordinals run 1, 2, 3, ... with no gaps, in order"
)]
#[case::unknown_provider_thread(
    "unknown-provider-thread.yaml",
    ":9:52: error: runs[3].provider_thread: unknown provider thread \"X9\"; declare it under `provider_threads:`"
)]
#[case::handoff_covers_missing_runs(
    "handoff-covers-missing-runs.yaml",
    ":9:47: error: handoffs[0].covered: covers runs 1-7 but the thread has 2 runs"
)]
#[case::json_duplicate_provider_thread(
    "duplicate-provider-thread.json",
    ":6:12: error: provider_threads[1].id: duplicate provider thread id \"C1\""
)]
#[case::problem_reached_through_an_alias(
    "aliased-provider-thread.yaml",
    ":5:5: error: provider_threads[1].id: duplicate provider thread id \"C1\""
)]
#[case::default_item_id_points_at_the_item(
    "default-item-id-clash.yaml",
    ":15:9: error: runs[1].items[0].id: duplicate item id \"r2.1\" (also at runs[0].items[0])"
)]
#[case::unknown_item_kind(
    "unknown-item-kind.yaml",
    ":8:16: error: runs[0].items[1].kind: unknown variant `thought`, expected one of `user_message`, `assistant_message`, `reasoning`, `narration`, `command`, `file_change`, `tool_call`, `plan`, `approval`, `question`, `decision`, `error`, `subagent_result`, `protocol`"
)]
#[case::unknown_provider(
    "unknown-provider.yaml",
    ":5:21: error: request.provider: unknown provider \"cladue\"; did you mean \"claude\"? known providers are claude, codex, copilot, cursor; declare others under `providers:`"
)]
#[case::truncated_yaml(
    "truncated.yaml",
    ":8:1: error: runs[0].items: found unexpected end of stream"
)]
#[case::truncated_json(
    "truncated.json",
    ":1:66: error: request.provider: EOF while parsing a string"
)]
#[case::binary_garbage(
    "garbage.yaml",
    ": error: not a text file: invalid UTF-8 at byte 27 (state files are YAML or JSON)"
)]
#[case::empty(
    "empty.yaml",
    ": error: empty state file: expected at least `version: 1`, `thread: {id: ...}` and `request: {provider: ...}`"
)]
#[case::missing_file("does-not-exist.yaml", ": error: cannot read state file: no such file")]
#[case::deeply_nested(
    "deeply-nested.yaml",
    ":4:1007: error: flow collections nested deeper than 1000 levels; a state file needs a few"
)]
fn bad_state_is_reported(#[case] fixture: &str, #[case] message: &str) {
    let path = format!("tests/fixtures/state/{fixture}");
    let out = explain(Path::new(&path));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{path}{message}\n")
    );
    assert_eq!(out.stdout, b"", "nothing on stdout");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.yaml");
    std::fs::write(
        &path,
        "version: 1\nthread: {id: t}\nruns:\n  - {ordinal: 2, provider: codex, provider_thread: X9}\nrequest: {provider: codex}\n",
    )
    .unwrap();
    let out = explain(&path);
    let p = path.display();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{p}:4:15: error: runs[0].ordinal: expected ordinal 1, found 2: ordinals run 1, 2, 3, ... with no gaps, in order\n\
             {p}:4:52: error: runs[0].provider_thread: unknown provider thread \"X9\"; declare it under `provider_threads:`\n"
        )
    );
    assert_eq!(out.status.code(), Some(1));
}

fn nested_runs(depth: usize, json: bool) -> String {
    let (open, close) = ("[".repeat(depth), "]".repeat(depth));
    if json {
        format!(
            "{{\"version\": 1, \"thread\": {{\"id\": \"t\"}}, \"request\": {{\"provider\": \"codex\"}}, \"runs\": {open}{close}}}"
        )
    } else {
        format!(
            "version: 1\nthread: {{id: t}}\nrequest: {{provider: codex}}\nruns: {open}{close}\n"
        )
    }
}

/// Writes `doc` to a temporary file named `name` and explains it. (How long such inputs take
/// is measured in benches, not here.)
fn explain_generated(name: &str, doc: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, doc).unwrap();
    explain(&path)
}

#[rstest]
#[case::yaml_500("deep.yaml", 500)]
#[case::json_100_000("deep.json", 100_000)]
fn deep_nesting_is_rejected_cleanly(#[case] name: &str, #[case] depth: usize) {
    let out = explain_generated(name, &nested_runs(depth, name.ends_with(".json")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(": error: runs[0]"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// libyaml's scanner is quadratic in the nesting depth of flow collections (100,000 levels, a
/// 200 KB file, took 18 s to reject). A linear pre-scan refuses the file at the bracket that
/// nests deeper than 1,000 levels, before the parser sees it.
#[rstest]
#[case::one_line(100_000)]
#[case::just_past_the_limit(1_001)]
fn yaml_flow_nesting_past_the_limit_is_refused_before_parsing(#[case] depth: usize) {
    let out = explain_generated("deep.yaml", &nested_runs(depth, false));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.ends_with(
            "deep.yaml:4:1007: error: flow collections nested deeper than 1000 levels; a state file needs a few\n"
        ),
        "{stderr}"
    );
}

/// Regression: finding the target's provider thread scanned every run once per provider
/// thread, so 200,000 threads and runs (20 MB) did not decide within 2 minutes.
#[test]
fn many_provider_threads_decide_quickly() {
    let n = 100_000;
    let mut doc = String::from("version: 1\nthread: {id: many}\nprovider_threads:\n");
    for i in 0..n {
        doc.push_str(&format!("  - {{id: C{i}, provider: codex}}\n"));
    }
    doc.push_str("runs:\n");
    for i in 1..=n {
        doc.push_str(&format!(
            "  - {{ordinal: {i}, provider: codex, provider_thread: C{}}}\n",
            i - 1
        ));
    }
    doc.push_str("request: {provider: codex}\n");
    let out = explain_generated("many.yaml", &doc);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("run 100001 on codex: no_handoff - resume C99999, no handoff\n"),
        "{stdout}"
    );
}

/// A 50 MB state file (about 5,000 runs of 10 items, plus 20,000 provider threads so that any
/// per-thread scan of the runs shows up) must load and decide, or fail with a clear message,
/// without panicking.
#[test]
fn fifty_megabyte_state_decides() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    let mut doc = String::with_capacity(52 << 20);
    doc.push_str("version: 1\nthread: {id: big}\nprovider_threads:\n");
    let threads = 20_000;
    for t in 0..threads {
        let provider = if t % 2 == 0 { "codex" } else { "claude" };
        doc.push_str(&format!("  - {{id: P{t}, provider: {provider}}}\n"));
    }
    doc.push_str("runs:\n");
    let text = "lorem ipsum dolor sit amet ".repeat(37);
    let mut ordinal = 0;
    while doc.len() < 50 << 20 {
        ordinal += 1;
        let t = ordinal % threads;
        let provider = if t % 2 == 0 { "codex" } else { "claude" };
        doc.push_str(&format!(
            "  - ordinal: {ordinal}\n    provider: {provider}\n    provider_thread: P{t}\n    items:\n"
        ));
        for _ in 0..10 {
            doc.push_str(&format!(
                "      - {{kind: assistant_message, text: \"{text}\"}}\n"
            ));
        }
    }
    // A last run on claude, so codex missed it and the delta is measured.
    ordinal += 1;
    doc.push_str(&format!(
        "  - {{ordinal: {ordinal}, provider: claude, provider_thread: P1}}\nrequest: {{provider: codex}}\n"
    ));
    std::fs::write(&path, &doc).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() >= 50 << 20);

    let out = explain(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stdout.starts_with(&format!("run {} on codex: ", ordinal + 1)),
        "{stdout}"
    );
}

/// `explain --json` prints an invalid state's problems on standard output too, each with its
/// state path, line and column (the `problems` of the service's `-32002` error data).
#[test]
fn json_output_carries_the_problems_with_positions() {
    let path = "tests/fixtures/state/non-contiguous-ordinals.yaml";
    let out = common::baton_cmd()
        .args(["explain", "--json", "--state", path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = format!(
        "{path}:6:15: error: runs[2].ordinal: expected ordinal 3, found 4: ordinals run 1, 2, 3, ... with no gaps, in order"
    );
    assert_eq!(
        v,
        serde_json::json!({"error": {
            "kind": "state",
            "file": path,
            "message": message,
            "problems": [{
                "at": "runs[2].ordinal",
                "line": 6,
                "column": 15,
                "message": "expected ordinal 3, found 4: ordinals run 1, 2, 3, ... with no gaps, in order"
            }]
        }})
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{message}\n"));
}
