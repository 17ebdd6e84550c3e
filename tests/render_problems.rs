//! Open problems and aggregated file lists in rendered documents (issue 11), as the target
//! reads them: snapshots of whole documents from the quality corpus.

use crate::common;

use rstest::rstest;
use std::path::Path;

fn document(state: &str, policy: &str, target: &str) -> String {
    let state = baton::state::load_file(Path::new(state)).expect("fixture loads");
    common::engine_in(policy, common::DOC_ROOT)
        .run(&state, Some(target))
        .expect("pipeline runs")
        .rendered
        .expect("a handoff is rendered")
        .document
}

#[rstest]
#[case::long_debugging("01-long-debugging", "default", "copilot")]
#[case::many_open_problems("22-many-open-problems", "default", "codex")]
#[case::index_ts_everywhere("14-index-ts-everywhere", "default", "codex")]
#[case::index_ts_everywhere_mcode("14-index-ts-everywhere", "mcode", "codex")]
#[case::created_deleted("16-created-deleted", "default", "codex")]
#[case::plan_and_checkpoint("28-plan-and-checkpoint", "default", "cursor")]
fn documents(#[case] state: &str, #[case] policy: &str, #[case] target: &str) {
    let path = format!("tests/fixtures/quality/{state}.yaml");
    insta::assert_snapshot!(
        format!("{policy}__{state}__{target}"),
        common::redact_sha(&document(&path, policy, target))
    );
}

/// One line per file, never one per edit, and never a bare file name outside t3code.
#[rstest]
#[case("default")]
#[case("mcode")]
fn every_file_is_listed_once_by_its_relative_path(#[case] policy: &str) {
    let doc = document(
        "tests/fixtures/quality/14-index-ts-everywhere.yaml",
        policy,
        "codex",
    );
    for p in ["web", "api", "cli", "core", "ui", "auth", "db", "jobs"] {
        let line = format!("- packages/{p}/src/index.ts");
        assert_eq!(doc.matches(&line).count(), 1, "{line}\n{doc}");
    }
    assert!(!doc.contains("/work/mono"), "{doc}");
    assert!(!doc.contains("- index.ts"), "{doc}");
}
