//! `baton quality` on the project's corpus (tests/fixtures/quality): per-document lines, the
//! gate's exit code, and bad corpora (split from the quality measures' tests,
//! src/quality/quality_tests.rs, which are unit tests now).

use crate::common;

use std::path::Path;

const CORPUS: &str = "tests/fixtures/quality";

fn corpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS)
}

#[test]
fn the_cli_reports_per_document_and_exits_1_below_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        corpus().join("12-excluded-kinds.yaml"),
        dir.path().join("a.yaml"),
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    let o = common::baton(&["quality", "--corpus", d]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("a.yaml -> codex: full_new off_band; files 0/0; open 0/0; latest user message yes; instructions 0/0; leaks 0; first turn "), "{out}");
    assert!(out.ends_with("PASS\n"), "{out}");

    let o = common::baton(&["quality", "--corpus", d, "--policy", "t3code", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policy"], "t3code");
    assert_eq!(v["totals"]["documents"], 4);
    assert!(v["documents"][0]["figures"]["budget"]["limit"].is_u64());

    // A leak fails the gate.
    std::fs::write(
        dir.path().join("b.yaml"),
        "version: 1\nthread: {id: b}\nruns:\n  - {ordinal: 1, provider: codex, items: [{kind: user_message, text: 'LEAK-said'}]}\nrequest: {provider: claude}\n",
    )
    .unwrap();
    let o = common::baton(&["quality", "--corpus", d]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("b.yaml -> claude: full_new off_band; files 0/0; open 0/0; latest user message yes; instructions 0/0; leaks 1 (LEAK-said)"), "{out}");
    assert!(
        out.ends_with("FAIL: every figure must be 100%, with no leak and no error\n"),
        "{out}"
    );
}

#[test]
fn a_missing_or_empty_corpus_is_an_error_naming_it() {
    let o = common::baton(&["quality", "--corpus", "no/such/dir"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with("no/such/dir: error: the corpus is not a readable directory"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let o = common::baton(&["quality", "--corpus", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.ends_with("error: the corpus has no state files (*.yaml, *.yml, *.json)\n"),
        "{err}"
    );
}

#[test]
fn an_invalid_state_in_the_corpus_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.yaml"), "version: 1\nthread: {id: x}\n").unwrap();
    let o = common::baton(&["quality", "--corpus", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("x.yaml"), "{err}");
    assert!(err.contains("request"), "{err}");
}
