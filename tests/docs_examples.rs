//! The examples in docs/ cannot rot:
//! - every ```policy block in docs/*.md must check OK (warnings allowed), and every
//!   ```policy-error block must fail to check;
//! - every `$ baton ...` line in a ```console block of docs/cli.md is run from the crate root
//!   with `BATON_HANDOFF_DIR=/tmp/baton-doc-test` and must exit with the code the doc gives
//!   (a later `# exit N` line before the next `$` line; 0 when there is none). `/tmp/` in a
//!   command stands for a fresh private directory of this test run, so a database or document
//!   left by an earlier run (or another checkout) cannot change the outcome.

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
            match (expect_ok, baton::policy::load_text(&name, &b.text)) {
                (true, Ok(_)) | (false, Err(_)) => {}
                (true, Err(e)) => failures.push(format!(
                    "{name}: this ```policy block must check OK, but:\n{e}\n--- block ---\n{}",
                    b.text
                )),
                (false, Ok(p)) => {
                    let warnings: Vec<String> = p.warnings.iter().map(|w| w.to_string()).collect();
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

/// `$ baton ...` commands of a console block, with their line and expected exit code.
fn commands(b: &Block) -> Vec<(usize, String, i32)> {
    let lines: Vec<&str> = b.text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(cmd) = l.strip_prefix("$ ") else {
            continue;
        };
        if !cmd.starts_with("baton ") && cmd != "baton" {
            continue;
        }
        let mut code = 0;
        for next in &lines[i + 1..] {
            if next.starts_with("$ ") {
                break;
            }
            if let Some(n) = next.trim().strip_prefix("# exit ") {
                code = n
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("line {}: `# exit` needs a number", b.line + 1 + i));
            }
        }
        out.push((b.line + 1 + i, cmd.to_string(), code));
    }
    out
}

#[test]
fn cli_guide_commands_exit_as_documented() {
    let file = root().join("docs/cli.md");
    let mut failures = Vec::new();
    let mut ran = 0;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let private = |a: &str| a.replace("/tmp/", &format!("{}/", tmp.path().display()));
    for b in blocks(&file).iter().filter(|b| b.lang == "console") {
        for (line, cmd, want) in commands(b) {
            let at = format!("docs/cli.md:{line}: `$ {cmd}`");
            let args = match split_args(&cmd) {
                Ok(a) => a,
                Err(e) => {
                    failures.push(format!("{at}: cannot run it: {e}"));
                    continue;
                }
            };
            ran += 1;
            let out = Command::new(env!("CARGO_BIN_EXE_baton"))
                .args(args[1..].iter().map(|a| private(a)))
                .current_dir(root())
                .env("BATON_HANDOFF_DIR", private("/tmp/baton-doc-test"))
                .output()
                .unwrap_or_else(|e| panic!("{at}: cannot start baton: {e}"));
            let got = out.status.code();
            if got != Some(want) {
                failures.push(format!(
                    "{at}: the doc says exit {want}, it exited {}\n--- stdout ---\n{}--- stderr ---\n{}",
                    got.map(|c| c.to_string())
                        .unwrap_or_else(|| "by a signal".into()),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(
        ran > 0,
        "no `$ baton ...` lines in ```console blocks of docs/cli.md"
    );
    assert!(
        failures.is_empty(),
        "{} command(s) in docs/cli.md do not exit as documented:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
