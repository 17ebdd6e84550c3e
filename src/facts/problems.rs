//! Open problems: which failing commands and tool calls a later item resolved
//! (docs/facts.md, "Open problems"). What failing means and what resolves it depends on the
//! tool family:
//!
//! - A command *fails* when its exit code is known and not 0, except a search or comparison
//!   (`rg`, `grep`, `ag`, `ack`, `git grep`, `diff`, `cmp`, `test`, `[`) that exited 1: that
//!   is its answer ("no match", "they differ"), not a failure; and a command stopped by an
//!   interrupt or termination signal (exit 130 or 143: Ctrl-C, `kill`), which someone ended on
//!   purpose.
//! - A tool call fails when its status is `failed`, except a lookup (`Read`, `Glob`, `Grep`,
//!   `LS`, `WebFetch`, `WebSearch`, `view_image`, ...): a lookup that found nothing (a file that
//!   does not exist, a search with no match) changes nothing and leaves nothing to fix.
//! - A failing command is *resolved* by a later command in the same set of items that exited 0
//!   and has the same command line (whitespace runs count as one space), or, when both run
//!   tests, whose command line is a word prefix of it (`cargo test` passing resolves
//!   `cargo test auth::callback`: the broader run includes it).
//! - A failing edit (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`, `apply_patch`, ...) is
//!   resolved by a later change of every file it names (a `file_change` item, or a completed
//!   edit of that path).
//! - Any other failing tool call is resolved by a later call of the same tool with the same
//!   input that completed.
//! - Any failure is resolved by a later plan whose every step is done, when that plan is the
//!   newest of the set: the agent finished its whole plan after the failure.

use super::compute::ItemCtx;
use crate::state::{Item, ToolStatus};
use std::collections::HashSet;

/// Words that make a command line a test run.
const TEST_WORDS: &[&str] = &[
    "test", "tests", "pytest", "jest", "vitest", "mocha", "rspec", "phpunit", "nextest", "ctest",
    "unittest",
];

/// Tools that only look things up: their failure (nothing found) is no problem.
const LOOKUP_TOOLS: &[&str] = &[
    "read",
    "glob",
    "grep",
    "ls",
    "notebookread",
    "webfetch",
    "websearch",
    "web_search",
    "view_image",
    "read_file",
    "list_dir",
    "list_directory",
    "file_search",
    "grep_search",
    "codebase_search",
    "search",
];

/// Tools that edit files: resolved by a later change of the files they name.
const EDIT_TOOLS: &[&str] = &[
    "edit",
    "multiedit",
    "write",
    "notebookedit",
    "apply_patch",
    "str_replace_based_edit_tool",
    "str_replace_editor",
    "edit_file",
    "write_file",
    "create_file",
];

/// Programs whose exit code 1 is an answer (no match, the inputs differ, false), not a failure.
const ANSWER_PROGRAMS: &[&str] = &[
    "rg", "grep", "egrep", "fgrep", "ag", "ack", "diff", "cmp", "test", "[",
];

fn tool_in(tool: &str, list: &[&str]) -> bool {
    let t = tool.to_ascii_lowercase();
    list.contains(&t.as_str())
}

/// Whether a failed call of `tool` is a lookup that found nothing.
pub fn is_lookup_tool(tool: &str) -> bool {
    tool_in(tool, LOOKUP_TOOLS)
}

/// Whether `tool` edits files.
pub fn is_edit_tool(tool: &str) -> bool {
    tool_in(tool, EDIT_TOOLS)
}

/// The program the exit code of `command` comes from: the first word of its last simple
/// command (after the last `&&`, `||`, `;`, `|` or line break), environment assignments and
/// `sudo`/`command`/`exec` skipped; `git grep` counts as `grep`.
pub fn last_program(command: &str) -> Option<&str> {
    let last = last_simple_command(command);
    let mut words = last.split_whitespace().skip_while(|w| {
        (w.contains('=') && !w.starts_with('='))
            || matches!(*w, "sudo" | "command" | "exec" | "(" | "{")
    });
    let first = words.next()?;
    let first = first.rsplit('/').next().unwrap_or(first);
    if first == "git" {
        return words.next().filter(|w| *w == "grep");
    }
    Some(first)
}

/// The text after the last `&&`, `||`, `;`, `|`, `&` or line break outside quotes (the last
/// non-empty part).
fn last_simple_command(command: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut start = 0usize;
    let mut last = command;
    let mut escaped = false;
    for (i, c) in command.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ';' | '|' | '&' | '\n') => {
                let part = command.get(start..i).unwrap_or("").trim();
                if !part.is_empty() {
                    last = part;
                }
                start = i.saturating_add(c.len_utf8());
            }
            _ => {}
        }
    }
    let part = command.get(start..).unwrap_or("").trim();
    if part.is_empty() {
        last
    } else {
        part
    }
}

/// Whether the item is a failing command or tool call (see the module doc for the
/// exceptions: a search that found nothing, a lookup of something that is not there).
pub fn failed(item: &Item) -> bool {
    match item {
        Item::Command {
            exit_code, command, ..
        } => match exit_code {
            // Stopped by an interrupt or termination signal (Ctrl-C, `kill`): someone ended it
            // on purpose.
            Some(0) | Some(130) | Some(143) | None => false,
            Some(1) => !last_program(command).is_some_and(|p| ANSWER_PROGRAMS.contains(&p)),
            Some(_) => true,
        },
        Item::ToolCall { status, tool, .. } => {
            *status == Some(ToolStatus::Failed) && !is_lookup_tool(tool)
        }
        _ => false,
    }
}

/// The files an edit's input names (a path, or paths joined with `, `).
fn edit_paths(input: &str) -> impl Iterator<Item = &str> {
    input.split(", ").map(str::trim).filter(|p| !p.is_empty())
}

/// Whether a command line runs tests: one of its words (a path's last component, or the
/// part before `:` as in `test:unit`) is `test`, `tests`, `pytest`, `jest`, `vitest`, `mocha`,
/// `rspec`, `phpunit`, `nextest`, `ctest` or `unittest`.
pub fn is_test_command(command: &str) -> bool {
    command.split_whitespace().any(|w| {
        let w = w.rsplit('/').next().unwrap_or(w);
        let w = w.split(':').next().unwrap_or(w);
        TEST_WORDS.contains(&w)
    })
}

fn words(command: &str) -> Vec<&str> {
    command.split_whitespace().collect()
}

/// Set `rerun_ok` on every failing command and tool call that a later item of `items` (in
/// source order) resolved.
pub(super) fn mark_resolved(items: &mut [ItemCtx<'_>]) {
    let mut ok_lines: HashSet<String> = HashSet::new();
    let mut ok_tests: HashSet<String> = HashSet::new();
    let mut ok_tools: HashSet<(&str, &str)> = HashSet::new();
    let mut changed: HashSet<&str> = HashSet::new();
    // Whether the newest plan of the set, seen so far (walking back), has every step done.
    let mut plan_done: Option<bool> = None;
    for ctx in items.iter_mut().rev() {
        let settled = plan_done == Some(true);
        match ctx.item {
            Some(Item::Plan { steps, .. }) if plan_done.is_none() => {
                plan_done = Some(
                    !steps.is_empty()
                        && steps
                            .iter()
                            .all(|s| s.status == crate::state::StepStatus::Done),
                );
            }
            Some(Item::FileChange { path, .. }) => {
                // A rename `old -> new` changes both.
                for p in path.split(" -> ") {
                    changed.insert(p.trim());
                }
            }
            Some(i @ Item::Command {
                command, exit_code, ..
            }) => {
                let w = words(command);
                if failed(i) {
                    let test = is_test_command(command);
                    ctx.rerun_ok = settled
                        || ok_lines.contains(&w.join(" "))
                        || (test
                            && (1..=w.len()).any(|n| {
                                w.get(..n).is_some_and(|p| ok_tests.contains(&p.join(" ")))
                            }));
                } else if *exit_code == Some(0) {
                    let line = w.join(" ");
                    if is_test_command(command) {
                        ok_tests.insert(line.clone());
                    }
                    ok_lines.insert(line);
                }
            }
            Some(i @ Item::ToolCall {
                tool,
                input,
                status,
                ..
            }) => {
                let input = input.as_deref().unwrap_or("");
                let key = (tool.as_str(), input);
                let edit = is_edit_tool(tool);
                if failed(i) {
                    ctx.rerun_ok = settled
                        || ok_tools.contains(&key)
                        || (edit
                            && edit_paths(input).next().is_some()
                            && edit_paths(input).all(|p| changed.contains(p)));
                } else if *status == Some(ToolStatus::Completed) {
                    ok_tools.insert(key);
                    if edit {
                        changed.extend(edit_paths(input));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_commands() {
        assert!(is_test_command("cargo test -p baton"));
        assert!(is_test_command("npm run test:unit"));
        assert!(is_test_command("./node_modules/.bin/vitest run"));
        assert!(is_test_command("python -m pytest tests/"));
        assert!(!is_test_command("cargo build"));
        assert!(!is_test_command("cat testdata.txt"));
    }

    #[test]
    fn the_program_an_exit_code_comes_from() {
        assert_eq!(last_program("cd src && rg -n foo"), Some("rg"));
        assert_eq!(last_program("rg foo | head -5"), Some("head"));
        assert_eq!(last_program("LC_ALL=C grep -r x ."), Some("grep"));
        assert_eq!(last_program("git grep needle"), Some("grep"));
        assert_eq!(last_program("git status"), None);
        assert_eq!(last_program("/usr/bin/diff a b"), Some("diff"));
        assert_eq!(last_program("rg -n \"A|B\" src"), Some("rg"));
        assert_eq!(last_program("grep 'a;b' f && echo 'x|y'"), Some("echo"));
    }
}
