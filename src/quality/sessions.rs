//! Import quality: how much of a real session log survives the import (docs/import.md,
//! "Measuring imports"; `baton quality --sessions DIR`).
//!
//! A corpus is a directory of session logs (`*.jsonl`, Claude Code or Codex CLI, recognised by
//! their lines), each labelled by a `<log>.expect.yaml` beside it:
//!
//! ```yaml
//! prompts:            # a distinctive part of every prompt the user typed, in order
//!   - "add rate limiting"
//! commands:           # every shell command, its final exit code and a part of its output
//!   - {command: "cargo build", exit_code: 101, output: "error[E0308]"}
//! open:               # the problems still open when the log ends (part of the command line,
//!   - "cargo clippy"  # tool input or question text)
//! ```
//!
//! The figures: **prompts kept** (each expected prompt is a `user_message`, and no prompt is
//! there twice), **commands with results** (each expected command is a `command` item with that
//! exit code and output; a `write_stdin` poll left as an item counts against it), and the
//! **open-problem precision** (of the problems `item.open` finds over all runs, the share the
//! labels call open) and **recall** (of the labelled open problems, the share it finds).

use super::Ratio;
use crate::facts::item_contexts;
use crate::import::{self, ImportOptions};
use crate::state::Item;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The labels of one log.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub prompts: Vec<String>,
    #[serde(default)]
    pub commands: Vec<ExpectCommand>,
    #[serde(default)]
    pub open: Vec<String>,
}

/// One labelled command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectCommand {
    pub command: String,
    /// `null` for a process still running when the log ends.
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub output: String,
}

/// The figures of one log.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogFigures {
    pub log: String,
    pub prompts: Ratio,
    /// User messages beyond the expected prompts (a prompt kept twice).
    pub extra_prompts: usize,
    pub commands: Ratio,
    /// `write_stdin` polls left as tool calls.
    pub stray_polls: usize,
    /// Open problems found that the labels call open / all open problems found.
    pub open_precision: Ratio,
    /// Labelled open problems found / labelled open problems.
    pub open_recall: Ratio,
    /// What is missing or wrong, for people.
    pub notes: Vec<String>,
    pub warnings: usize,
}

/// The figures of a corpus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionsReport {
    pub corpus: String,
    pub logs: Vec<LogFigures>,
    pub prompts: Ratio,
    pub extra_prompts: usize,
    pub commands: Ratio,
    pub stray_polls: usize,
    pub open_precision: Ratio,
    pub open_recall: Ratio,
    /// Logs that could not be read or labelled.
    pub errors: Vec<String>,
    /// 100% prompts and command results, no extra prompt or stray poll, open-problem
    /// precision at least [`MIN_OPEN_PRECISION`], no error.
    pub pass: bool,
}

/// The least open-problem precision the gate accepts, in percent.
pub const MIN_OPEN_PRECISION: f64 = 95.0;

/// Import and measure every labelled log of `dir`.
pub fn measure_sessions(dir: &Path) -> SessionsReport {
    let mut report = SessionsReport {
        corpus: crate::state::display_path(dir),
        ..SessionsReport::default()
    };
    let mut logs: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect(),
        Err(e) => {
            report.errors.push(format!(
                "{}: cannot read the directory: {}",
                report.corpus,
                crate::state::io_reason(&e)
            ));
            return report;
        }
    };
    logs.sort();
    for log in &logs {
        match measure_log(log) {
            Ok(f) => report.logs.push(f),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    for f in &report.logs {
        report.prompts.add(f.prompts.present, f.prompts.expected);
        report.commands.add(f.commands.present, f.commands.expected);
        report
            .open_precision
            .add(f.open_precision.present, f.open_precision.expected);
        report
            .open_recall
            .add(f.open_recall.present, f.open_recall.expected);
        report.extra_prompts = report.extra_prompts.saturating_add(f.extra_prompts);
        report.stray_polls = report.stray_polls.saturating_add(f.stray_polls);
    }
    for r in [
        &mut report.prompts,
        &mut report.commands,
        &mut report.open_precision,
        &mut report.open_recall,
    ] {
        r.finish();
    }
    report.pass = report.errors.is_empty()
        && !report.logs.is_empty()
        && report.prompts.full()
        && report.commands.full()
        && report.extra_prompts == 0
        && report.stray_polls == 0
        && report.open_precision.percent >= MIN_OPEN_PRECISION;
    report
}

/// Why one log of the corpus cannot be measured (reported in the report's `errors`).
#[derive(Debug, thiserror::Error)]
enum MeasureError {
    #[error("{}: error: cannot read the labels of {log}: {reason}", .labels.display())]
    Labels {
        labels: PathBuf,
        log: String,
        reason: String,
    },
    #[error("{}: error: {source}", .labels.display())]
    LabelsYaml {
        labels: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("{}: error: {}", .0.path(), .0)]
    Import(#[from] import::ImportError),
}

fn measure_log(log: &Path) -> Result<LogFigures, MeasureError> {
    let name = crate::state::display_path(log);
    let labels = log.with_extension("expect.yaml");
    let text = match std::fs::read_to_string(&labels) {
        Ok(t) => t,
        Err(e) => {
            return Err(MeasureError::Labels {
                labels,
                log: name,
                reason: crate::state::io_reason(&e),
            })
        }
    };
    let expect: Expect = serde_yaml::from_str(&text)
        .map_err(|source| MeasureError::LabelsYaml { labels, source })?;
    let tool = import::detect_tool(log)?;
    let imported = import::import_file(tool, log, &ImportOptions::default())?;
    let mut f = measure_imported(&imported.state, &expect);
    f.log = name;
    f.warnings = imported.report.all_warnings("").len();
    Ok(f)
}

/// The figures of one imported state against its labels.
pub fn measure_imported(state: &crate::state::State, expect: &Expect) -> LogFigures {
    let mut f = LogFigures::default();
    let items: Vec<&Item> = state.runs.iter().flat_map(|r| r.items.iter()).collect();
    // Prompts: each label matches the next user message that contains it, in order.
    let prompts: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let mut used = vec![false; prompts.len()];
    for p in &expect.prompts {
        let hit = prompts
            .iter()
            .enumerate()
            .find(|(k, t)| !used.get(*k).copied().unwrap_or(true) && t.contains(p.as_str()))
            .map(|(k, _)| k);
        match hit.and_then(|k| used.get_mut(k)) {
            Some(u) => {
                *u = true;
                f.prompts.add(1, 1);
            }
            None => {
                f.prompts.add(0, 1);
                f.notes.push(format!("prompt lost: {p:?}"));
            }
        }
    }
    f.extra_prompts = prompts.len().saturating_sub(expect.prompts.len());
    if f.extra_prompts > 0 {
        f.notes
            .push(format!("{} user messages more than prompts", f.extra_prompts));
    }
    // Commands.
    for c in &expect.commands {
        let ok = items.iter().any(|i| match i {
            Item::Command {
                command,
                exit_code,
                output,
                ..
            } => {
                command.contains(c.command.as_str())
                    && *exit_code == c.exit_code
                    && output.as_deref().unwrap_or("").contains(c.output.as_str())
            }
            _ => false,
        });
        f.commands.add(usize::from(ok), 1);
        if !ok {
            f.notes.push(format!(
                "command without its result: {:?} (exit {:?})",
                c.command, c.exit_code
            ));
        }
    }
    f.stray_polls = items
        .iter()
        .filter(|i| matches!(i, Item::ToolCall { tool, .. } if tool == "write_stdin"))
        .count();
    // Open problems over every run.
    let runs: Vec<u32> = state.runs.iter().map(|r| r.ordinal).collect();
    let found: Vec<String> = item_contexts(state, &runs)
        .iter()
        .filter(|c| c.is_open())
        .filter_map(|c| c.item.map(problem_text))
        .collect();
    for t in &found {
        let real = expect.open.iter().any(|o| t.contains(o.as_str()));
        f.open_precision.add(usize::from(real), 1);
        if !real {
            f.notes.push(format!("listed as open but solved: {t:?}"));
        }
    }
    for o in &expect.open {
        let hit = found.iter().any(|t| t.contains(o.as_str()));
        f.open_recall.add(usize::from(hit), 1);
        if !hit {
            f.notes.push(format!("open problem not listed: {o:?}"));
        }
    }
    for r in [
        &mut f.prompts,
        &mut f.commands,
        &mut f.open_precision,
        &mut f.open_recall,
    ] {
        r.finish();
    }
    f
}

/// What identifies a problem: a command line, a tool and its input, a question's text.
fn problem_text(item: &Item) -> String {
    match item {
        Item::Command { command, .. } => command.clone(),
        Item::ToolCall { tool, input, .. } => {
            format!("{tool} {}", input.as_deref().unwrap_or(""))
        }
        other => other.primary_text().to_string(),
    }
}
