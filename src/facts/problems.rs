//! Open problems: which failing commands and tool calls a later run resolved
//! (docs/facts.md, "Open problems").
//!
//! - A command *fails* when its exit code is known and not 0; a tool call fails when its status
//!   is `failed`.
//! - A failing command is *resolved* by a later command in the same set of items that exited 0
//!   and has the same command line (whitespace runs count as one space), or, when both run
//!   tests, whose command line is a word prefix of it (`cargo test` passing resolves
//!   `cargo test auth::callback`: the broader run includes it).
//! - A failing tool call is resolved by a later call of the same tool with the same input that
//!   completed.

use super::compute::ItemCtx;
use crate::state::{Item, ToolStatus};
use std::collections::HashSet;

/// Words that make a command line a test run.
const TEST_WORDS: &[&str] = &[
    "test", "tests", "pytest", "jest", "vitest", "mocha", "rspec", "phpunit", "nextest", "ctest",
    "unittest",
];

/// Whether the item is a failing command or tool call.
pub fn failed(item: &Item) -> bool {
    match item {
        Item::Command { exit_code, .. } => exit_code.is_some_and(|c| c != 0),
        Item::ToolCall { status, .. } => *status == Some(ToolStatus::Failed),
        _ => false,
    }
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
    for ctx in items.iter_mut().rev() {
        match ctx.item {
            Some(Item::Command {
                command, exit_code, ..
            }) => {
                let w = words(command);
                if exit_code.is_some_and(|c| c != 0) {
                    let test = is_test_command(command);
                    ctx.rerun_ok = ok_lines.contains(&w.join(" "))
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
            Some(Item::ToolCall {
                tool,
                input,
                status,
                ..
            }) => {
                let key = (tool.as_str(), input.as_deref().unwrap_or(""));
                match status {
                    Some(ToolStatus::Failed) => ctx.rerun_ok = ok_tools.contains(&key),
                    Some(ToolStatus::Completed) => {
                        ok_tools.insert(key);
                    }
                    _ => {}
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
}
