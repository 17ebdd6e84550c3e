//! Limits and invariants of state files (docs/limits.md) through the real binary
//! (`baton explain --state FILE`): YAML alias expansion, a byte order mark, thread ids and
//! lineage. Each case asserts the message the user sees.

use rstest::rstest;
use std::path::Path;
use std::process::Output;

use crate::common;

fn explain_generated(name: &str, doc: &[u8]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, doc).unwrap();
    common::baton_cmd()
        .arg("explain")
        .arg("--state")
        .arg(&path)
        .output()
        .expect("baton runs")
}

fn example(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(name),
    )
    .unwrap()
}

/// A state whose first item anchors a `size`-byte string that `copies` later items alias.
pub fn alias_bomb(size: usize, copies: usize) -> String {
    let mut doc = format!(
        "version: 1\nthread: {{id: th_bomb}}\nprovider_threads: [{{id: C1, provider: codex}}]\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {{kind: user_message, text: &big \"{}\"}}\n",
        "a".repeat(size)
    );
    for _ in 0..copies {
        doc.push_str("      - {kind: assistant_message, text: *big}\n");
    }
    doc.push_str("request: {provider: claude}\n");
    doc
}

/// 64 KB aliased 2,000 times is 128 MB once expanded (the attack used 1 MB for 2 GB): refused
/// before it is built, naming the limit.
#[test]
fn a_yaml_alias_bomb_is_refused_naming_the_limit() {
    let doc = alias_bomb(64 * 1024, 2000);
    let out = explain_generated("bomb.yaml", doc.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let limit = doc.len() * 8 + 16 * 1024 * 1024;
    assert!(
        stderr.ends_with(&format!(
            "bomb.yaml:9:36: error: YAML aliases expand this document past the alias expansion limit of {limit} bytes (8 times its {} bytes plus 16 MiB); write the repeated values out instead of aliasing them\n",
            doc.len()
        )),
        "{stderr}"
    );
}

/// Aliases that expand modestly are fine.
#[test]
fn a_few_aliases_are_fine() {
    let out = explain_generated("few.yaml", alias_bomb(100, 20).as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Nested aliases (a "billion laughs") are refused with the same message.
#[test]
fn nested_aliases_are_refused() {
    let mut doc = String::from("version: 1\nthread: {id: th_lol}\nl0: &l0 [\"lol\"]\n");
    for i in 1..30 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        doc.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    doc.push_str("request: {provider: claude}\n");
    let out = explain_generated("lol.yaml", doc.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: YAML aliases expand this document past the alias expansion limit of "
        ),
        "{stderr}"
    );
}

/// A UTF-8 byte order mark before a valid document (as some Windows editors save) is skipped;
/// it used to give a false "missing field `thread`".
#[rstest]
#[case::yaml("bom.yaml")]
#[case::json("bom.json")]
fn a_byte_order_mark_is_accepted(#[case] name: &str) {
    // The document starts at its first key (a leading comment hid the bug).
    let yaml: String = example("seed-switch.yaml")
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(yaml.starts_with("version: 1"));
    let text = if name.ends_with(".json") {
        let v: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        v.to_string()
    } else {
        yaml
    };
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(text.as_bytes());
    let out = explain_generated(name, &bytes);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("run 9 on codex: delta_existing"));
}

fn with_thread(thread: &str) -> String {
    format!("version: 1\nthread: {thread}\nrequest: {{provider: codex}}\n")
}

#[rstest]
#[case::newline(
    with_thread("{id: \"th_1\\nInjected: line\"}"),
    ": error: thread.id: \"th_1\\nInjected: line\" contains a control character (a line break, tab or escape code); thread ids are printed in documents, prompts and logs\n"
)]
#[case::escape_code(
    with_thread("{id: \"th_\\e[31mred\"}"),
    ": error: thread.id: \"th_\\u{1b}[31mred\" contains a control character (a line break, tab or escape code); thread ids are printed in documents, prompts and logs\n"
)]
#[case::own_parent(
    "version: 1\nthread: {id: th_1, parent: {thread: th_1, run: 1}}\nprovider_threads: [{id: C1, provider: codex}]\nruns: [{ordinal: 1, provider: codex, provider_thread: C1}]\nrequest: {provider: codex, kind: merge_back}\n".to_string(),
    ": error: thread.parent.thread: thread \"th_1\" cannot be its own parent: a fork names the thread it was forked from\n"
)]
fn bad_thread_identity_is_refused(#[case] doc: String, #[case] tail: &str) {
    let out = explain_generated("t.yaml", doc.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.ends_with(tail), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// A state file over the size limit is refused before it is read (a sparse file: no disk).
#[test]
fn a_state_file_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(300 * 1024 * 1024).unwrap();
    let out = common::baton_cmd()
        .arg("explain")
        .arg("--state")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.ends_with(
            "huge.yaml: error: state file is 314572800 bytes, over the state size limit of 268435456 bytes (256 MiB)\n"
        ),
        "{stderr}"
    );
}

/// A device or a FIFO is refused before anything is read: `/dev/zero` was read until memory
/// ran out (the size limit looked at the size the file claims, 0), and a FIFO blocked.
#[test]
fn a_state_that_is_not_a_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("state.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (path, kind) in [
        (Path::new("/dev/zero"), "a character device"),
        (fifo.as_path(), "a FIFO (named pipe)"),
        (dir.path(), "a directory"),
    ] {
        let out = common::baton_cmd()
            .arg("explain")
            .arg("--state")
            .arg(path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "{}: error: cannot read state file: it is {kind}, not a regular file (baton reads only regular files)\n",
                path.display()
            )
        );
    }
}

/// The store refuses a thread that is its own parent too (so it can never merge back into
/// itself): `baton db import` validates like `explain`.
#[test]
fn the_store_refuses_a_thread_that_is_its_own_parent() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("self.yaml");
    std::fs::write(
        &state,
        "version: 1\nthread: {id: th_1, parent: {thread: th_1, run: 1}}\nprovider_threads: [{id: C1, provider: codex}]\nruns: [{ordinal: 1, provider: codex, provider_thread: C1}]\nrequest: {provider: codex}\n",
    )
    .unwrap();
    let db = dir.path().join("baton.db");
    let out = common::baton_cmd()
        .args(["db", "import", "--db"])
        .arg(&db)
        .arg(&state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: thread.parent.thread: thread \"th_1\" cannot be its own parent: a fork names the thread it was forked from"
        ),
        "{stderr}"
    );
}
