//! Test target `tooling` (`cargo test --test tooling`): tooling and documentation: `baton
//! test`/`fmt`/`diff`, the tested examples in docs/, the module layering, and the guard that every
//! tests/*.rs file belongs to a test target. Each module is one file of tests/; the helpers the
//! files share are declared once below, and a file names them `crate::common`
//! (docs/architecture.md#tests: how to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;

#[path = "docs_examples.rs"]
mod docs_examples;
#[path = "docs_testing.rs"]
mod docs_testing;
#[path = "layers.rs"]
mod layers;
#[path = "tooling.rs"]
mod tooling;
#[path = "tooling_diff.rs"]
mod tooling_diff;

/// With `autotests = false`, Cargo builds only the `[[test]]` targets of Cargo.toml: a new
/// tests/*.rs file (or tests/*/main.rs) that no target includes would never run. Every such file
/// is a target's root or a `mod` of one.
#[test]
fn every_test_file_belongs_to_a_test_target() {
    use std::path::{Path, PathBuf};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    // The `path`s of the [[test]] sections.
    let mut roots = Vec::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
        } else if let Some(path) = line.strip_prefix("path = \"").filter(|_| in_test) {
            roots.push(root.join(path.trim_end_matches('"')));
        }
    }
    // Each root includes `mod NAME;` (tests/NAME.rs) and `#[path = "P"] mod NAME;` (tests/P).
    let mut covered: Vec<PathBuf> = roots.clone();
    for file in &roots {
        let text = std::fs::read_to_string(file).expect("read a test target's root");
        let dir = file.parent().expect("a root is in a directory");
        let mut path_attr: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(p) = line.strip_prefix("#[path = \"") {
                path_attr = Some(p.trim_end_matches("\"]").to_string());
            } else if let Some(name) = line.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                covered.push(match path_attr.take() {
                    Some(p) => dir.join(p),
                    None => dir.join(format!("{name}.rs")),
                });
            } else if !line.is_empty() && !line.starts_with("//") {
                path_attr = None;
            }
        }
    }
    let covered: Vec<PathBuf> = covered
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let roots_canonical: Vec<PathBuf> =
        roots.iter().filter_map(|p| p.canonicalize().ok()).collect();
    let root_canonical = root.canonicalize().expect("canonical root");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).expect("read tests/") {
        let path = entry.expect("a directory entry").path();
        let candidate = if path.is_dir() {
            path.join("main.rs")
        } else if path.extension().is_some_and(|e| e == "rs") {
            path
        } else {
            continue;
        };
        if candidate.is_file()
            && !covered.contains(&candidate.canonicalize().expect("canonical path"))
        {
            missing.push(
                candidate
                    .strip_prefix(root)
                    .unwrap_or(&candidate)
                    .display()
                    .to_string(),
            );
        }
    }
    // A file of a target shares the target's helpers (`use crate::common;`): its own
    // `mod common;` would compile the helper again for that file alone.
    let mut own_helpers = Vec::new();
    for file in covered.iter().filter(|f| !roots_canonical.contains(f)) {
        let text = std::fs::read_to_string(file).expect("read a test file");
        if text.lines().any(|l| {
            ["common", "serve_support", "lsp_support", "privilege"]
                .iter()
                .any(|h| l.trim() == format!("mod {h};"))
        }) {
            own_helpers.push(
                file.strip_prefix(&root_canonical)
                    .unwrap_or(file)
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(
        own_helpers.is_empty(),
        "{} declare a helper module of their own: write `use crate::common;` (the target's root \
         declares `mod common;` once); see docs/architecture.md#tests",
        own_helpers.join(", ")
    );
    // Tests moved next to the code are `src/**/NAME_tests.rs` files (or `NAME_tests/mod.rs`
    // directories): each must be declared (`#[cfg(test)] mod NAME_tests;`) by its parent
    // module, or it is never compiled.
    let mut undeclared = Vec::new();
    let mut stack = vec![root.join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source directory") {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            if path.is_dir() && !name.ends_with("_tests") {
                stack.push(path);
                continue;
            }
            let is_rs = path.extension().is_some_and(|e| e == "rs");
            if !name.ends_with("_tests") || !(path.is_dir() || is_rs) {
                continue;
            }
            // The parent module: DIR/mod.rs, DIR.rs, or src/lib.rs for src/ itself.
            let parent = [
                dir.join("mod.rs"),
                dir.with_extension("rs"),
                dir.join("lib.rs"),
            ]
            .into_iter()
            .find(|p| p.is_file())
            .expect("a parent module file");
            let text = std::fs::read_to_string(&parent).expect("read the parent module");
            if !text.lines().any(|l| l.trim() == format!("mod {name};")) {
                undeclared.push(
                    path.strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    assert!(
        undeclared.is_empty(),
        "{} declared by no module, so never compiled: add `#[cfg(test)] mod NAME_tests;` to its \
         parent module",
        undeclared.join(", ")
    );
    missing.sort();
    assert!(
        missing.is_empty(),
        "{} in no test target, so `cargo test` never runs it: add `#[path = \"NAME.rs\"] mod \
         NAME;` to the tests/suite_*.rs of its area (or give it a `[[test]]` entry with its \
         `path` in Cargo.toml); see docs/architecture.md#tests",
        missing.join(", ")
    );
}
