//! docs/testing-policies.md cannot rot: every `$ baton ...` line of its ```console blocks runs
//! from the crate root and must print what the block shows (a `...` line stands for any number
//! of lines; nothing is compared when no output is shown) and exit with the code of a later
//! `# exit N` line (0 when there is none).

use crate::common;

use std::path::PathBuf;

struct Command {
    line: usize,
    args: Vec<String>,
    expected: Vec<String>,
    code: i32,
}

fn commands(text: &str) -> Vec<Command> {
    let mut out: Vec<Command> = Vec::new();
    let mut in_console = false;
    for (i, l) in text.lines().enumerate() {
        if l.starts_with("```") {
            in_console = !in_console && l.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = l.strip_prefix("$ baton ") {
            out.push(Command {
                line: i + 1,
                args: split(cmd),
                expected: Vec::new(),
                code: 0,
            });
        } else if let Some(c) = out.last_mut() {
            match l.strip_prefix("# exit ") {
                Some(n) => c.code = n.trim().parse().expect("`# exit N`"),
                None => c.expected.push(l.to_string()),
            }
        }
    }
    out
}

/// Whitespace-separated words, with "..." quoting.
fn split(cmd: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for ch in cmd.chars() {
        match ch {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    args.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        args.push(cur);
    }
    args
}

/// Whether `actual` matches `expected`, where a `...` line matches any run of lines.
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => (0..=actual.len()).any(|k| matches(rest, &actual[k..])),
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, arest)| a.trim_end() == e.trim_end() && matches(rest, arest)),
    }
}

#[test]
fn testing_walkthrough_runs_as_documented() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/testing-policies.md");
    let text = std::fs::read_to_string(path).unwrap();
    let cmds = commands(&text);
    assert!(cmds.len() >= 5, "the walkthrough runs commands");
    let mut failures = Vec::new();
    for c in cmds {
        let o = common::baton_cmd().args(&c.args).output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = stdout.lines().collect();
        let code = o.status.code().unwrap_or(-1);
        if code != c.code {
            failures.push(format!(
                "docs/testing-policies.md:{}: exit {code}, documented {}\n{stdout}{}",
                c.line,
                c.code,
                String::from_utf8_lossy(&o.stderr)
            ));
        } else if !c.expected.is_empty() && !matches(&c.expected, &lines) {
            failures.push(format!(
                "docs/testing-policies.md:{}: output differs from the doc.\n--- doc ---\n{}\n--- actual ---\n{stdout}",
                c.line,
                c.expected.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
