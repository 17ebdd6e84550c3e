//! Handoff documents: selection, rendering and provenance, through the public API and the CLI.

use baton::Outcome;
use rstest::rstest;
use std::path::Path;

use crate::common;
use common::{baton_cmd as baton, DOC_ROOT};

fn outcome(state: &str, policy: &str) -> Outcome {
    let state = baton::state::load_file(Path::new(state)).expect("fixture loads");
    common::engine_in(policy, DOC_ROOT)
        .run(&state, None)
        .expect("pipeline runs")
}

/// The pipeline with default options.
fn run_default(policy: &std::sync::Arc<baton::Policy>, state: &baton::State) -> Outcome {
    common::engine_of(policy, None)
        .run(state, None)
        .expect("pipeline runs")
}

fn document(state: &str, policy: &str) -> String {
    outcome(state, policy)
        .rendered
        .expect("a handoff is rendered")
        .document
}

#[rstest]
#[case::default_seed("examples/seed-switch.yaml", "default")]
#[case::t3code_seed("examples/seed-switch.yaml", "t3code")]
#[case::mcode_seed("examples/seed-switch.yaml", "mcode")]
#[case::legacy_seed("examples/seed-switch.yaml", "t3code-legacy")]
#[case::default_noise("tests/fixtures/render/noise.yaml", "default")]
#[case::t3code_noise("tests/fixtures/render/noise.yaml", "t3code")]
#[case::mcode_noise("tests/fixtures/render/noise.yaml", "mcode")]
#[case::default_fork_user("tests/fixtures/render/fork-user.yaml", "default")]
#[case::default_fork_assistant("tests/fixtures/render/fork-assistant.yaml", "default")]
#[case::mcode_fork_user("tests/fixtures/render/fork-user.yaml", "mcode")]
#[case::default_empty("tests/fixtures/render/empty.yaml", "default")]
#[case::default_unsafe("tests/fixtures/render/unsafe-text.yaml", "default")]
#[case::t3code_unsafe("tests/fixtures/render/unsafe-text.yaml", "t3code")]
#[case::default_far_over_budget("tests/fixtures/budget/far-over-budget.yaml", "default")]
fn documents_snapshot(#[case] state: &str, #[case] policy: &str) {
    let name = format!(
        "{}__{}",
        policy,
        Path::new(state).file_stem().unwrap().to_string_lossy()
    );
    insta::assert_snapshot!(name, common::redact_sha(&document(state, policy)));
}

#[rstest]
#[case("default")]
#[case("t3code")]
#[case("t3code-legacy")]
#[case("mcode")]
fn never_leaks_reasoning_noise_or_superseded_output(#[case] policy: &str) {
    for state in [
        "tests/fixtures/render/noise.yaml",
        "tests/fixtures/render/fork-user.yaml",
        "tests/fixtures/render/empty.yaml",
    ] {
        let o = outcome(state, policy);
        let r = o.rendered.expect("rendered");
        for secret in [
            "SECRET-CHAIN-OF-THOUGHT",
            "PROTOCOL-NOISE",
            "STALE-OUTPUT",
            "STALE-READ",
            "HUGE-DIFF-BODY",
        ] {
            assert!(
                !r.document.contains(secret) && !r.inline.contains(secret),
                "{policy} on {state} leaked {secret}:\n{}",
                r.document
            );
        }
    }
}

#[test]
fn large_diff_is_rendered_as_its_path() {
    let doc = document("tests/fixtures/render/noise.yaml", "default");
    assert!(doc.contains("\n- src/parser.rs\n"), "{doc}");
}

#[test]
fn reasoning_is_recorded_as_omitted_with_the_reason() {
    let o = outcome("tests/fixtures/render/noise.yaml", "default");
    let p = o.rendered.unwrap().provenance;
    let r = p
        .omitted
        .iter()
        .find(|o| o.id == "r1.2")
        .expect("reasoning omitted");
    assert_eq!(r.reason, "hidden reasoning never leaves the thread");
    assert!(p.included.contains(&"r1.1".to_string()));
}

#[test]
fn empty_thread_still_renders_a_valid_document() {
    let doc = document("tests/fixtures/render/empty.yaml", "default");
    assert!(doc.starts_with("# Handoff: th_empty"), "{doc}");
    assert!(
        doc.contains("No items from these runs are included"),
        "{doc}"
    );
    assert!(doc.contains("Provenance: policy `default`"), "{doc}");
}

#[test]
fn fork_anchor_frames_retry_or_follow_up() {
    let user = document("tests/fixtures/render/fork-user.yaml", "default");
    assert!(
        user.contains("The user is retrying this question"),
        "{user}"
    );
    let asst = document("tests/fixtures/render/fork-assistant.yaml", "default");
    assert!(asst.contains("It follows up on this reply"), "{asst}");
}

#[test]
fn t3code_compacts_every_line_to_240_characters() {
    let doc = document("tests/fixtures/render/long.yaml", "t3code");
    for line in doc.lines() {
        assert!(
            line.chars().count() <= 240 + "- Assistant: ".len(),
            "{line}"
        );
    }
    assert!(doc.contains("..."), "long messages are cut with ...");
}

#[test]
fn legacy_continuation_walks_back_within_32000_characters() {
    let o = outcome("tests/fixtures/render/long.yaml", "t3code-legacy");
    let summary = o.summary.unwrap();
    // 32,000 less the header line (127 characters) and the blank line after it.
    assert_eq!(summary.budget, Some(31871));
    let doc = o.rendered.unwrap().document;
    // The document is t3code's summary text plus one closing newline.
    assert!(doc.chars().count() <= 32001, "{}", doc.chars().count());
    // The newest exchange is kept; the oldest is omitted for the budget.
    assert!(summary.included.contains(&"r40.2".to_string()));
    let first = summary
        .omitted
        .iter()
        .find(|o| o.id == "r1.1")
        .expect("oldest omitted");
    assert_eq!(first.reason, "over the 31871-character budget");
    // Exactly one entry straddles the budget: it keeps its label and its newest words.
    let cut: Vec<_> = summary
        .sections
        .iter()
        .flat_map(|s| s.entries.iter())
        .filter(|e| e.truncated)
        .collect();
    assert_eq!(cut.len(), 1);
    assert!(
        cut[0].text.starts_with("User:\n... word ")
            || cut[0].text.starts_with("Assistant:\n... reply "),
        "{}",
        cut[0].text
    );
    assert!(doc.contains(&format!("\n\n{}\n\n", cut[0].text)), "{doc}");
}

#[test]
fn budget_smaller_than_one_item_keeps_its_newest_words() {
    let policy = common::policy_text(
        "tiny.policy",
        r#"policy "tiny" {}
strategy { full_new otherwise }
summary {
  include user_message into goals
  budget 20 newest_first
}
"#,
    )
    .unwrap();
    let state = baton::state::load_file(Path::new("tests/fixtures/render/long.yaml")).unwrap();
    let o = run_default(&policy, &state);
    let s = o.summary.unwrap();
    assert_eq!(*s.included, vec!["r40.1".to_string()]);
    let e = &s.sections[0].entries[0];
    assert!(e.truncated);
    assert_eq!(e.text, "... word word word");
}

#[test]
fn provenance_names_policy_items_and_templates() {
    let o = outcome("examples/seed-switch.yaml", "default");
    let r = o.rendered.unwrap();
    let p = &r.provenance;
    assert_eq!(p.policy.name, "default");
    assert_eq!(p.policy.sha256.len(), 64);
    assert_eq!(p.handoff, "H2");
    assert_eq!((p.covered_runs.from, p.covered_runs.to), (6, 8));
    assert_eq!(p.created_by, "deterministic");
    assert_eq!(p.templates.document, "handoff.md.j2");
    assert_eq!(p.chars.document, r.document.chars().count());
    assert!(p.included.contains(&"r7.3".to_string()));
}

#[test]
fn inline_prompt_points_at_the_document_and_fits_the_limit() {
    let o = outcome("examples/seed-switch.yaml", "mcode");
    let r = o.rendered.unwrap();
    assert!(r.inline.contains(&format!("{DOC_ROOT}/th_1/H2/handoff.md")));
    assert!(r
        .inline
        .trim_end()
        .ends_with("Now add tests for the CSRF check."));
    assert!(r.inline.chars().count() <= 500, "{}", r.inline);
    assert!(r.inline_note.is_none());
}

#[test]
fn an_oversized_message_is_flagged_not_cut() {
    let mut state = baton::state::load_file(Path::new("examples/seed-switch.yaml")).unwrap();
    let long = "please ".repeat(200);
    state.request.message = Some(long.clone());
    let policy = common::policy("mcode").unwrap();
    let o = run_default(&policy, &state);
    let r = o.rendered.unwrap();
    assert!(r.inline.contains(long.trim_end()));
    let note = o
        .decision
        .delivery
        .unwrap()
        .inline_note
        .expect("flagged in the decision");
    assert!(note.contains("inline_limit is 500"), "{note}");
}

/// `baton render` of the seed example with a templates directory holding `files`.
fn render_with_templates(files: &[(&str, &str)]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    baton()
        .args([
            "render",
            "--state",
            "examples/seed-switch.yaml",
            "--templates",
        ])
        .arg(dir.path())
        .output()
        .unwrap()
}

/// The same with one `handoff.md.j2`.
fn render_with_document_template(template: &str) -> std::process::Output {
    render_with_templates(&[("handoff.md.j2", template)])
}

#[test]
fn render_cli_writes_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = baton()
        .args(["render", "--state", "examples/seed-switch.yaml", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["handoff.md", "inline.md", "handoff.json"] {
        assert!(dir.path().join(f).is_file(), "{f} written");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("handoff.json")).unwrap())
            .unwrap();
    assert_eq!(json["handoff_strategy"], "delta_since_target_last_seen");
}

#[test]
fn render_cli_writes_nothing_for_no_handoff() {
    let dir = tempfile::tempdir().unwrap();
    let out = baton()
        .args([
            "render",
            "--state",
            "examples/seed-switch.yaml",
            "--target",
            "claude",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no handoff document: run 9 on claude is `no_handoff` (the target thread already saw every run)\n"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn template_errors_name_template_line_and_variable() {
    let out = render_with_document_template("# {{ thread.id }}\n\n{{ no_such_thing }}\n");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "handoff.md.j2:3: error: undefined variable `no_such_thing`\n"
    );
}

#[test]
fn templates_dir_overrides_by_name() {
    let out = render_with_document_template("custom {{ handoff.id }}\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "custom H2\n");
}

#[test]
fn include_reasoning_is_rejected_by_the_checker() {
    let err = common::policy_text(
        "leak.policy",
        "strategy { full_new otherwise }\nsummary {\n  include reasoning into goals\n}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(
            "leak.policy:3:11: error: hidden reasoning can never be included in a handoff"
        ),
        "{err}"
    );
}

#[test]
fn merge_back_hands_over_the_fork_delta() {
    let o = outcome("tests/fixtures/render/merge-back.yaml", "t3code");
    assert_eq!(
        o.decision.handoff_strategy,
        Some(baton::state::HandoffStrategy::ForkDeltaSummary)
    );
    let r = o.decision.covered_runs.clone().unwrap();
    assert_eq!((r.from, r.to), (2, 3));
    let doc = o.rendered.unwrap().document;
    assert_eq!(
        doc,
        "Merge-back context from forked conversation.\nSource thread: th_child\nTarget thread: th_1\nCovered fork runs: 2-3\n\nFork delta:\n- User: Try Redis for sessions.\n- File change: redis.rs\n- Assistant: Redis sessions work.\n"
    );
}

#[test]
fn a_template_that_includes_another_gets_every_section_field() {
    let out = render_with_templates(&[
        ("handoff.md.j2", "{% include \"part.j2\" %}"),
        (
            "part.j2",
            "{% for s in sections %}{{ s.name }}:{% for e in s.entries %} {{ e.id }}{% endfor %}|{{ s.count }}\n{% endfor %}",
        ),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("goals: r6.1|1\n"), "{stdout}");
}
