//! The examples in docs/ cannot rot:
//! - every ```policy block in docs/*.md must check OK (warnings allowed), and every
//!   ```policy-error block must fail to check;
//! - every `$ baton ...` line in a ```console block of README.md and docs/*.md is run from the
//!   crate root with `BATON_HANDOFF_DIR=/tmp/baton-doc-test`, must exit with the code the doc
//!   gives (a later
//!   `# exit N` line before the next `$` line; 0 when there is none) and print what the doc shows
//!   (standard output and error interleaved, as a terminal shows them; a `...` line stands for
//!   any number of lines; a command shown without output must print nothing). `/tmp/` in a
//!   command stands for a fresh private directory of this test run, so a database or document
//!   left by an earlier run (or another checkout) cannot change the outcome; that directory
//!   prints as `/tmp` again. After a reviewed change of output, `BATON_BLESS_DOCS=1 cargo test
//!   --test tooling docs_examples` rewrites the examples that show their whole output; an example with
//!   `...` must be edited by hand.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fenced block: its info string, the 1-based line of the opening fence, and its text.
struct Block {
    lang: String,
    line: usize,
    text: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                open = Some(Block {
                    lang: line.trim_start().trim_start_matches('`').trim().to_string(),
                    line: i + 1,
                    text: String::new(),
                })
            }
            (Some(_), true) => out.extend(open.take()),
            (Some(b), false) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, false) => {}
        }
    }
    assert!(
        open.is_none(),
        "{}: a ``` block is never closed",
        path.display()
    );
    out
}

fn doc_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
        .collect();
    v.sort();
    v
}

#[test]
fn policy_examples_check_as_documented() {
    let mut failures = Vec::new();
    let mut counts = (0, 0);
    for file in doc_files() {
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for b in blocks(&file) {
            let expect_ok = match b.lang.as_str() {
                "policy" => true,
                "policy-error" => false,
                _ => continue,
            };
            if expect_ok {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
            let name = format!("{rel}:{}", b.line);
            match (expect_ok, common::policy_text(&name, &b.text)) {
                (true, Ok(_)) | (false, Err(_)) => {}
                (true, Err(e)) => failures.push(format!(
                    "{name}: this ```policy block must check OK, but:\n{e}\n--- block ---\n{}",
                    b.text
                )),
                (false, Ok(p)) => {
                    let warnings: Vec<String> =
                        p.warnings().iter().map(|w| w.to_string()).collect();
                    failures.push(format!(
                        "{name}: this ```policy-error block must fail to check, but it checks OK{}\n--- block ---\n{}",
                        if warnings.is_empty() {
                            String::new()
                        } else {
                            format!(" (warnings only:\n{})", warnings.join("\n"))
                        },
                        b.text
                    ))
                }
            }
        }
    }
    assert!(
        counts.0 > 0 && counts.1 > 0,
        "found {} ```policy and {} ```policy-error blocks in docs/*.md; expected some of each",
        counts.0,
        counts.1
    );
    assert!(
        failures.is_empty(),
        "{} policy example(s) in docs/ do not behave as documented:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Split a command line like a shell would for simple cases: whitespace, '...' and "...".
fn split_args(line: &str) -> Result<Vec<String>, String> {
    if line.contains(['|', '>', '<', '$', ';', '&', '`']) {
        return Err("pipes, redirections, variables and `;`/`&` are not supported".into());
    }
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_arg = true;
            }
            None if c.is_whitespace() => {
                if in_arg {
                    args.push(std::mem::take(&mut cur));
                    in_arg = false;
                }
            }
            None => {
                cur.push(c);
                in_arg = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unbalanced quote".into());
    }
    if in_arg {
        args.push(cur);
    }
    Ok(args)
}

/// A `$ baton ...` command of a console block: its line, the command, the output the doc shows
/// (up to the next `$` line or `# exit N`), and the exit code it gives.
struct DocCommand {
    line: usize,
    cmd: String,
    expected: Vec<String>,
    code: i32,
}

fn commands(b: &Block) -> Vec<DocCommand> {
    let mut out: Vec<DocCommand> = Vec::new();
    let mut open = false;
    for (i, l) in b.text.lines().enumerate() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            open = cmd.starts_with("baton ") || cmd == "baton";
            if open {
                out.push(DocCommand {
                    line: b.line + 1 + i,
                    cmd: cmd.to_string(),
                    expected: Vec::new(),
                    code: 0,
                });
            }
            continue;
        }
        let Some(c) = out.last_mut().filter(|_| open) else {
            continue;
        };
        if let Some(n) = l.trim().strip_prefix("# exit ") {
            c.code = n
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("line {}: `# exit` needs a number", b.line + 1 + i));
            open = false;
        } else {
            c.expected.push(l.to_string());
        }
    }
    out
}

/// Whether `actual` matches `expected`, where a `...` line matches any run of lines (trailing
/// spaces are not compared).
fn matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." => {
            (0..=actual.len()).any(|k| matches(rest, &actual[k..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, arest)| a.trim_end() == e.trim_end() && matches(rest, arest)),
    }
}

/// The documents whose `$ baton ...` examples this test runs: README.md and docs/*.md.
fn command_docs() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    v.extend(doc_files());
    v
}

/// What the reader sees of a run, normalised only where it cannot be stable: the private
/// directory of this test run prints as `/tmp`, and the user id in the default handoff
/// directory (`baton-<uid>`) as `baton-0`.
fn normalise(text: &str, private: &Path) -> Vec<String> {
    let private = private.display().to_string();
    text.replace(&private, "/tmp")
        .lines()
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn doc_commands_print_and_exit_as_documented() {
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut compared = 0;
    // BATON_BLESS_DOCS=1: rewrite the shown output of an example that shows all of it (no `...`)
    // with what baton prints now, for a reviewed change of output. Elided examples still fail.
    let bless = std::env::var_os("BATON_BLESS_DOCS").is_some();
    let mut blessed: Vec<(PathBuf, usize, usize, Vec<String>)> = Vec::new();
    pin_session_log_times();
    for file in command_docs() {
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        // One private directory per document: its commands share databases and documents.
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let private = |a: &str| a.replace("/tmp/", &format!("{}/", tmp.path().display()));
        for b in blocks(&file).iter().filter(|b| b.lang == "console") {
            for c in commands(b) {
                let at = format!("{rel}:{}: `$ {}`", c.line, c.cmd);
                let args = match split_args(&c.cmd) {
                    Ok(a) => a,
                    Err(e) => {
                        failures.push(format!("{at}: cannot run it: {e}"));
                        continue;
                    }
                };
                ran += 1;
                // Standard output and error go to one file, in the order they are written, as a
                // terminal shows them.
                let log = tmp.path().join(".output");
                let sink = std::fs::File::create(&log).expect("an output file");
                let out = Command::new(env!("CARGO_BIN_EXE_baton"))
                    .args(args[1..].iter().map(|a| private(a)))
                    .current_dir(root())
                    .env("BATON_HANDOFF_DIR", private("/tmp/baton-doc-test"))
                    .env_remove("BATON_DB")
                    .stdout(sink.try_clone().expect("a second handle"))
                    .stderr(sink)
                    .output()
                    .unwrap_or_else(|e| panic!("{at}: cannot start baton: {e}"));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let got = out.status.code();
                if got != Some(c.code) {
                    failures.push(format!(
                        "{at}: the doc says exit {}, it exited {}\n--- output ---\n{text}",
                        c.code,
                        got.map(|c| c.to_string())
                            .unwrap_or_else(|| "by a signal".into()),
                    ));
                    continue;
                }
                let actual = normalise(&text, tmp.path());
                if !c.expected.is_empty() {
                    compared += 1;
                }
                if !matches(&c.expected, &actual) {
                    if bless && !c.expected.iter().any(|l| l.trim() == "...") {
                        blessed.push((file.clone(), c.line, c.expected.len(), actual));
                        continue;
                    }
                    failures.push(format!(
                        "{at}: the output differs from the doc (a `...` line stands for any lines)\n--- doc ---\n{}\n--- actual ---\n{}",
                        c.expected.join("\n"),
                        actual.join("\n")
                    ));
                }
            }
        }
    }
    // Rewrite from the bottom of each file up, so earlier line numbers stay right.
    blessed.sort_by(|a, b| (&a.0, b.1).cmp(&(&b.0, a.1)));
    for (file, line, n, actual) in &blessed {
        let text = std::fs::read_to_string(file).expect("the doc is readable");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // `line` is the 1-based line of the `$` command; its output follows it.
        lines.splice(*line..*line + *n, actual.iter().cloned());
        std::fs::write(file, lines.join("\n") + "\n").expect("the doc is writable");
        eprintln!("blessed {}:{line}", file.display());
    }
    assert!(
        ran > 20,
        "only {ran} `$ baton ...` lines found in README.md and docs/"
    );
    assert!(
        compared > 20,
        "only {compared} examples show output to compare"
    );
    assert!(
        failures.is_empty(),
        "{} command(s) in README.md and docs/ do not print or exit as documented:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// `baton sessions list` prints each log's modification time, which a checkout sets to the
/// moment of cloning: pin the session fixtures to the time the docs show (2026-12-01T16:12:52Z).
fn pin_session_log_times() {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_141_572);
    let dir = root().join("tests/fixtures/import");
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("the import fixtures")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(when))
                    .unwrap_or_else(|e| panic!("cannot pin {}: {e}", path.display()));
            }
        }
    }
}
