//! The formatter over every policy in the repository (moved from tests/tooling.rs: it calls the
//! formatter and the checker directly).

use std::path::{Path, PathBuf};
fn policy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            policy_files(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("policy") {
            out.push(p);
        }
    }
}

/// Formatting twice is formatting once, for every policy in the repository that parses; the
/// formatted text checks exactly as the original (same errors or none), and keeps every comment.
#[test]
fn fmt_is_idempotent_and_meaning_preserving_on_every_policy() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in ["policies", "tests/fixtures", "docs"] {
        policy_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 15);
    let mut formatted_any = 0;
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue; // deliberately broken bytes
        };
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let Ok(once) = baton::fmt::format_source(&name, &text) else {
            continue;
        };
        formatted_any += 1;
        let twice = baton::fmt::format_source(&name, &once).unwrap();
        assert_eq!(once, twice, "{}: not idempotent", f.display());
        let comments = |t: &str| -> Vec<String> {
            t.lines()
                .filter_map(|l| l.find('#').map(|i| l[i..].trim_end().to_string()))
                .collect()
        };
        assert_eq!(
            comments(&text),
            comments(&once),
            "{}: comments",
            f.display()
        );
        let before = baton::policy::load_text(&name, &text).map(|p| p.ladder.len());
        let after = baton::policy::load_text(&name, &once).map(|p| p.ladder.len());
        assert_eq!(before.is_ok(), after.is_ok(), "{}", f.display());
    }
    assert!(formatted_any > 10);
}
