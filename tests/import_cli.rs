//! Session import through the `baton` command: `baton import`, `baton sessions list`, `baton
//! handoff --from` and `baton db import --from` on the Claude Code and Codex CLI fixtures, and
//! what the user sees for bad input (split from the importer's tests,
//! src/import/import_tests.rs, which are unit tests now).

use crate::common;
use common::{stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Output;

const CLAUDE: &str = "tests/fixtures/import/claude-code/session.jsonl";
const CODEX: &str = "tests/fixtures/import/codex/rollout-2026-11-30T11-00-00-0199aa11-2222-7333-8444-555566667777.jsonl";
const CLAUDE_ID: &str = "3f1c2a9e-7b4d-4c61-9e2a-5d8f0b6a1c23";
const CODEX_ID: &str = "0199aa11-2222-7333-8444-555566667777";

const CORPUS: &str = "tests/fixtures/import/corpus";

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn digest(p: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        std::fs::read(p).unwrap(),
        std::fs::metadata(p).unwrap().modified().unwrap(),
    )
}

#[test]
fn importing_never_modifies_the_source() {
    let dir = tempfile::tempdir().unwrap();
    for (tool, p) in [("claude-code", CLAUDE), ("codex", CODEX)] {
        let copy = dir.path().join(Path::new(p).file_name().unwrap());
        std::fs::copy(fixture(p), &copy).unwrap();
        // Read-only, so a write would fail loudly, and compared byte for byte after.
        let mut perm = std::fs::metadata(&copy).unwrap().permissions();
        perm.set_readonly(true);
        std::fs::set_permissions(&copy, perm).unwrap();
        let before = digest(&copy);
        let imported = common::baton(&["import", "--from", tool, copy.to_str().unwrap()]);
        assert!(imported.status.success(), "{}", stderr(&imported));
        let o = common::baton_cmd()
            .env("BATON_HANDOFF_DIR", dir.path().join("docs"))
            .args([
                "handoff",
                "--from",
                copy.to_str().unwrap(),
                "--to",
                "cursor",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(digest(&copy), before);
    }
}

#[test]
fn wrong_tool_or_unknown_format_is_an_error_naming_what_was_recognised() {
    let o = common::baton(&["import", "--from", "claude-code", CODEX]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim_end(),
        format!("{CODEX}: error: not a Claude Code session log: recognised a Codex CLI rollout (`session_meta`/`response_item` lines); use --from codex")
    );
    let o = common::baton(&["import", "--from", "codex", CLAUDE]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a Codex CLI session log: recognised a Claude Code session (`sessionId`/`message` lines); use --from claude-code"));

    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("rollout-old.jsonl");
    write_lines(
        &legacy,
        &[
            r#"{"id":"abc","timestamp":"2025-04-01T10:00:00Z","instructions":null}"#.into(),
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}"#
                .into(),
        ],
    );
    let o = common::baton(&["import", "--from", "codex", legacy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("recognised a Codex CLI rollout in the legacy unwrapped format"),
        "{e}"
    );

    let other = dir.path().join("other.jsonl");
    write_lines(
        &other,
        &(0..10)
            .map(|i| format!(r#"{{"type":"chat","n":{i}}}"#))
            .collect::<Vec<_>>(),
    );
    let o = common::baton(&["import", "--from", "claude-code", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "{}: error: not a Claude Code session log: recognised 8 JSON lines of an unknown tool or version (their `type`s are chat); baton reads Claude Code sessions (--from claude-code) and Codex CLI rollouts (--from codex)",
            other.display()
        )
    );

    let o = common::baton(&["import", "--from", "gemini", CLAUDE]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("[possible values: claude-code, codex]"));

    let o = common::baton(&["import", "--from", "codex", "nope.jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim_end(),
        "nope.jsonl: error: cannot read session log: no such file"
    );
}

#[test]
fn import_cli_writes_valid_states() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("states");
    let o = common::baton(&[
        "import",
        "--from",
        "claude-code",
        CLAUDE,
        "--out",
        out.join("one.yaml").to_str().unwrap(),
    ]);
    // --out names a file in a directory that does not exist yet: refused with a message.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::fs::create_dir_all(&out).unwrap();
    let o = common::baton(&[
        "import",
        "--from",
        "claude-code",
        CLAUDE,
        "--out",
        out.join("one.yaml").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(":27: warning: malformed JSON"));
    let st = baton::state::load_file(&out.join("one.yaml")).unwrap();
    assert_eq!(st.runs.len(), 3);
    // The state explains like any other.
    let o = common::baton(&[
        "explain",
        "--state",
        out.join("one.yaml").to_str().unwrap(),
        "--target",
        "codex",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("run 4 on codex: full_new"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn db_import_from_session_logs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let o = common::baton(&[
        "db",
        "import",
        "--db",
        db.to_str().unwrap(),
        "--from",
        "codex",
        CODEX,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim_end(),
        format!("imported {CODEX_ID} from {CODEX} (2 runs)")
    );
    let o = common::baton(&[
        "db",
        "export",
        "--db",
        db.to_str().unwrap(),
        "--thread",
        CODEX_ID,
    ]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("provider: codex"));
}

/// A temporary HOME holding both fixtures where the tools keep them.
fn home() -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap();
    let cdir = h.path().join(".claude/projects/-home-dev-oauth-app");
    std::fs::create_dir_all(&cdir).unwrap();
    let c = cdir.join(format!("{CLAUDE_ID}.jsonl"));
    std::fs::copy(fixture(CLAUDE), &c).unwrap();
    let xdir = h.path().join(".codex/sessions/2026/11/30");
    std::fs::create_dir_all(&xdir).unwrap();
    let x = xdir.join(Path::new(CODEX).file_name().unwrap());
    std::fs::copy(fixture(CODEX), &x).unwrap();
    let t = |secs| std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    // The Codex session is the newer one.
    std::fs::File::options()
        .write(true)
        .open(&c)
        .unwrap()
        .set_modified(t(1_800_000_000))
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&x)
        .unwrap()
        .set_modified(t(1_800_000_100))
        .unwrap();
    h
}

fn in_home(h: &Path, args: &[&str]) -> Output {
    common::baton_cmd()
        .env("HOME", h)
        .env_remove("CODEX_HOME")
        .env("BATON_HANDOFF_DIR", h.join("docs"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn sessions_list_finds_both_tools_newest_first() {
    let h = home();
    let o = in_home(h.path(), &["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(&format!("codex        {CODEX_ID}  2027-01-15T08:01:40Z")),
        "{out}"
    );
    assert!(lines[0].contains("/home/dev/oauth-app  Add GitHub OAuth login to the web app."));
    assert!(
        lines[1].starts_with(&format!("claude-code  {CLAUDE_ID}")),
        "{out}"
    );
    assert!(lines[1].contains("23.2 KB"), "{out}");

    let o = in_home(
        h.path(),
        &["sessions", "list", "--tool", "claude-code", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["id"], CLAUDE_ID);
    assert_eq!(v[0]["cwd"], "/home/dev/oauth-app");
    assert_eq!(
        v[0]["first_prompt"],
        "Add GitHub OAuth login to the web app. Keep sessions in Postgres."
    );

    let o = in_home(h.path(), &["sessions", "list", "--cwd", "/elsewhere"]);
    assert_eq!(stdout(&o).trim_end(), "no sessions found");
    let o = in_home(
        h.path(),
        &[
            "sessions",
            "list",
            "--cwd",
            "/home/dev/oauth-app/",
            "--tool",
            "codex",
        ],
    );
    assert_eq!(stdout(&o).lines().count(), 1);

    // Overriding the directories.
    let o = in_home(
        Path::new("/nonexistent"),
        &[
            "sessions",
            "list",
            "--claude-dir",
            h.path().join(".claude/projects").to_str().unwrap(),
        ],
    );
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));
}

#[test]
fn handoff_by_session_id_prints_prompt_and_command() {
    let h = home();
    let o = in_home(
        h.path(),
        &[
            "handoff",
            "--from",
            &CLAUDE_ID[..8],
            "--to",
            "codex",
            "--message",
            "Finish the rate limiter.",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let doc_dir = h
        .path()
        .join("docs")
        .canonicalize()
        .unwrap()
        .join(CLAUDE_ID)
        .join("H1");
    assert!(
        out.starts_with(&format!(
            "Before you start, read the handoff document at {}",
            doc_dir.join("handoff.md").display()
        )),
        "{out}"
    );
    assert!(out.contains("Finish the rate limiter."));
    // An interactive session that opens with the prompt, by default.
    assert!(
        out.ends_with(&format!(
            "start codex with:\n  codex --cd /home/dev/oauth-app \"$(cat {})\"\n",
            doc_dir.join("inline.md").display()
        )),
        "{out}"
    );
    let doc = std::fs::read_to_string(doc_dir.join("handoff.md")).unwrap();
    assert!(doc.contains("src/auth.rs") && !doc.contains("SECRET-REASONING"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(doc_dir.join("handoff.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the document is private");
}

#[test]
fn handoff_to_claude_with_out_and_explain() {
    let h = home();
    let out_dir = h.path().join("next");
    let o = in_home(
        h.path(),
        &[
            "handoff",
            "--from",
            CODEX_ID,
            "--to",
            "claude",
            "--out",
            out_dir.to_str().unwrap(),
            "--explain",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("run 3 on claude: full_new"), "{out}");
    // The whole set: the prompt, the document, its provenance and the start command.
    let prompt = out_dir.join("prompt.md");
    assert!(
        out.contains(&format!(
            "wrote the handoff to {} (prompt.md, handoff.json, start.sh, handoff.md)",
            out_dir.display()
        )),
        "{out}"
    );
    let doc = h
        .path()
        .join("docs")
        .canonicalize()
        .unwrap()
        .join(CODEX_ID)
        .join("H1/handoff.md");
    let start = format!(
        "cd /home/dev/oauth-app && claude --allowedTools 'Read(/{})' \"$(cat {})\"",
        doc.display(),
        prompt.display()
    );
    assert!(
        out.ends_with(&format!("start claude with:\n  {start}\n")),
        "{out}"
    );
    let prompt_text = std::fs::read_to_string(&prompt).unwrap();
    assert!(prompt_text.contains(&doc.display().to_string()));
    // No --message: the task is derived from the session's last request.
    assert!(
        prompt_text.contains(
            "Continue this session's work. The user's last request in it was: \"Review the OAuth flow for CSRF issues."
        ),
        "{prompt_text}"
    );
    assert!(
        stderr(&o).contains("note: no --message given"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("handoff.md")).unwrap(),
        std::fs::read_to_string(&doc).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("start.sh")).unwrap(),
        format!("#!/bin/sh\n{start}\n")
    );
    assert!(std::fs::read_to_string(out_dir.join("handoff.json"))
        .unwrap()
        .contains("\"handoff\": \"H1\""));

    // A second handoff of the same session gets its own id; `--headless` prints the one-turn
    // form.
    let o = in_home(
        h.path(),
        &[
            "handoff",
            "--from",
            CODEX_ID,
            "--to",
            "claude",
            "--headless",
            "--message",
            "Fix the CSRF check.",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let doc2 = doc
        .parent()
        .unwrap()
        .with_file_name("H2")
        .join("handoff.md");
    assert!(doc2.exists(), "{out}");
    assert!(
        out.ends_with(&format!(
            "start claude with:\n  cd /home/dev/oauth-app && claude -p --allowedTools 'Read(/{})' < {}\n",
            doc2.display(),
            doc2.with_file_name("inline.md").display()
        )),
        "{out}"
    );
    assert!(doc.exists(), "the first handoff's document is kept");
}

#[test]
fn handoff_back_to_the_same_tool_resumes_natively() {
    let h = home();
    let o = in_home(h.path(), &["handoff", "--from", CODEX_ID, "--to", "codex"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("no handoff needed: no_handoff (the target thread already saw every run); resume the session natively:\n  cd /home/dev/oauth-app && codex resume {CODEX_ID}\n")
    );
    let o = in_home(h.path(), &["handoff", "--from", "ffff", "--to", "codex"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("--from: error: no session \"ffff\" in "),
        "{}",
        stderr(&o)
    );
}

#[test]
fn handoff_to_an_unknown_provider_is_bad_usage() {
    let o = common::baton(&["handoff", "--from", CLAUDE, "--to", "codx"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim_end(),
        "--to: error: unknown provider \"codx\"; did you mean \"codex\"? known providers are claude, codex, copilot, cursor"
    );
}

fn mkfifo(p: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(made.success());
}

/// A device or a FIFO given as a log is refused at once: `/dev/zero` (one endless line) used
/// to abort the import, and a FIFO to hang it.
#[test]
fn devices_and_fifos_are_refused_as_logs() {
    let o = common::baton(&["import", "--from", "codex", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "/dev/zero: error: cannot read session log: it is a character device, not a regular file (baton reads only regular files)\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("rollout-fifo.jsonl");
    mkfifo(&fifo);
    let o = common::baton(&["import", "--from", "codex", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).ends_with(
            "rollout-fifo.jsonl: error: cannot read session log: it is a FIFO (named pipe), not a regular file (baton reads only regular files)\n"
        ),
        "{}",
        stderr(&o)
    );
}

/// A FIFO named like a Codex rollout under `~/.codex/sessions` is reported and passed over by
/// `sessions list`, and named as unreadable by `handoff --from ID` (both used to hang on it).
#[test]
fn a_fifo_among_the_sessions_is_reported_not_read() {
    let h = home();
    let xdir = h.path().join(".codex/sessions/2026/11/30");
    let fifo = xdir.join("rollout-2026-11-30T10-00-00-stuck.jsonl");
    mkfifo(&fifo);
    let o = in_home(h.path(), &["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "{}: warning: cannot read: it is a FIFO (named pipe), not a regular file (baton reads only regular files)\n",
            fifo.display()
        )
    );
    let o = in_home(h.path(), &["handoff", "--from", "stuck", "--to", "claude"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "--from: error: the session log {} cannot be read: it is a FIFO (named pipe), not a regular file (baton reads only regular files)\n",
            fifo.display()
        )
    );
    // Named by its path: refused as a FIFO.
    let o = in_home(
        h.path(),
        &[
            "handoff",
            "--from",
            fifo.to_str().unwrap(),
            "--to",
            "claude",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("it is a FIFO (named pipe), not a regular file"),
        "{}",
        stderr(&o)
    );
}

/// `baton quality --sessions`: the corpus passes; a label the import misses fails it.
#[test]
fn quality_sessions_gate() {
    let o = common::baton(&["quality", "--sessions", CORPUS]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("  prompts kept                  100.0%  (12/12)\n"),
        "{out}"
    );
    assert!(
        out.contains("  commands with results         100.0%  (15/15)\n"),
        "{out}"
    );
    assert!(
        out.contains("  open-problem precision        100.0%  (2/2)\n"),
        "{out}"
    );
    assert!(out.ends_with("PASS\n"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let log = "claude-compacted-fixes.jsonl";
    std::fs::copy(fixture(&format!("{CORPUS}/{log}")), dir.path().join(log)).unwrap();
    std::fs::write(
        dir.path().join("claude-compacted-fixes.expect.yaml"),
        "prompts: [\"a prompt the log never had\"]\ncommands: []\nopen: []\n",
    )
    .unwrap();
    let o = common::baton(&["quality", "--sessions", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("    prompt lost: \"a prompt the log never had\"\n"),
        "{out}"
    );
    assert!(
        out.contains("    listed as open but solved: \"npx eslint src/cart\"\n"),
        "{out}"
    );
    assert!(
        out.contains("FAIL: prompts and command results must be 100%"),
        "{out}"
    );
}
