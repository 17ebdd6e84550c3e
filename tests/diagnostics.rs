//! Structured diagnostics: `baton check --json` carries file, byte range, line/column, code,
//! message and help; the plain text of a pipe is unchanged; the library's error implements
//! `miette::Diagnostic` with the same code and a label over the byte range.

use crate::common;

const BAD: &str = "strategy {\n  full_new when target.has_thred\n  full_new otherwise\n}\n";

#[test]
fn check_json_carries_range_code_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.policy");
    std::fs::write(&file, BAD).unwrap();
    let out = common::baton(&["check", "--json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v[0]["diagnostics"][0];
    assert_eq!(d["file"], file.to_str().unwrap());
    assert_eq!(d["code"], "baton::check::unknown_fact");
    assert_eq!(d["message"], "unknown fact `target.has_thred`");
    assert_eq!(d["help"], "did you mean `target.has_thread`?");
    assert_eq!((d["line"].as_u64(), d["col"].as_u64()), (Some(2), Some(17)));
    let (start, end) = (
        d["range"]["start"].as_u64().unwrap() as usize,
        d["range"]["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(&BAD[start..end], "target.has_thred");
}

#[test]
fn plain_text_in_a_pipe_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.policy");
    std::fs::write(&file, BAD).unwrap();
    let out = common::baton(&["check", file.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{}:2:17: error: unknown fact `target.has_thred`\n  |\n2 |   full_new when target.has_thred\n  |                 ^^^^^^^^^^^^^^^^\n  = help: did you mean `target.has_thread`?\n",
            file.display()
        )
    );
}

#[test]
fn the_engine_error_is_a_miette_diagnostic_with_labels() {
    use miette::Diagnostic as _;
    let err = baton::Engine::from_text("bad.policy", BAD).unwrap_err();
    assert_eq!(err.code(), "baton::check::unknown_fact");
    let d = &err.diagnostics()[0];
    let label = d.labels().unwrap().next().unwrap();
    assert_eq!(
        &BAD[label.offset()..label.offset() + label.len()],
        "target.has_thred"
    );
    assert_eq!(
        d.help().unwrap().to_string(),
        "did you mean `target.has_thread`?"
    );
    let related: Vec<String> = miette::Diagnostic::related(&err)
        .unwrap()
        .map(|r| r.code().unwrap().to_string())
        .collect();
    assert_eq!(related, ["baton::check::unknown_fact"]);
    // miette's graphical handler draws the snippet from the carried source text.
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, d)
        .unwrap();
    assert!(out.contains("unknown fact `target.has_thred`"), "{out}");
    assert!(out.contains("bad.policy:2:17"), "{out}");
    assert!(out.contains("baton::check::unknown_fact"), "{out}");
}
