//! The editor features of a YAML policy test file (docs/testing-policies.md): the same
//! validation and run as `baton test`, shown as diagnostics on the file and the failing
//! cases, and a hover on each case with the rule that decided it.

use super::text::line_range;
use crate::testing::file::{TestFile, TestFileError};
use crate::testing::runner;
use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};
use std::path::Path;

/// One case as last run: where it starts and what the editor says about it.
#[derive(Debug, Clone)]
pub struct CaseInfo {
    /// 1-based line of the case's `-`.
    pub line: usize,
    pub name: String,
    /// The deciding rule as written, with its location and values.
    pub decided: Option<String>,
    /// What failed (mismatches or the error), empty when the case passes.
    pub problems: Vec<String>,
}

/// The result of checking a test file.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    pub diagnostics: Vec<Diagnostic>,
    pub cases: Vec<CaseInfo>,
}

/// Whether a YAML text is a policy test file (a top-level `policy:` and `cases:`).
pub fn is_test_file(text: &str) -> bool {
    crate::testing::file::is_test_file(text)
}

fn diag(text: &str, line: usize, col: usize, code: &str, message: String) -> Diagnostic {
    Diagnostic {
        range: line_range(text, line, col),
        severity: Some(DiagnosticSeverity::ERROR),
        code: Some(NumberOrString::String(code.to_string())),
        source: Some("baton".into()),
        message,
        ..Diagnostic::default()
    }
}

fn file_error(text: &str, e: &TestFileError) -> Diagnostic {
    match e {
        TestFileError::Invalid {
            line, col, message, ..
        } => diag(text, *line, *col, "baton::test::invalid", message.clone()),
        TestFileError::PolicyDoesNotCheck {
            line,
            spec,
            message,
            ..
        } => diag(
            text,
            *line,
            1,
            "baton::test::policy_does_not_check",
            format!("policy `{spec}` does not check:\n{message}"),
        ),
        other => diag(
            text,
            1,
            1,
            "baton::test::invalid",
            crate::error::located(other),
        ),
    }
}

/// Validate and run a test file held in memory; `path` is where it lives (states and
/// policies are relative to it); open policy buffers in `overlay` are read instead of their
/// files.
pub fn check(path: &Path, text: &str, overlay: &super::policy_doc::Overlay) -> Checked {
    let file = crate::state::display_path(path);
    let mut tf: TestFile = match crate::testing::file::parse_str(text, &file) {
        Ok(tf) => tf,
        Err(e) => {
            return Checked {
                diagnostics: vec![file_error(text, &e)],
                cases: Vec::new(),
            }
        }
    };
    tf.path = path.to_path_buf();
    // The runner's own loading, with the open policy buffers read instead of their files.
    let opts = runner::RunOptions {
        overlay: overlay.clone(),
        ..runner::RunOptions::default()
    };
    let policies = match runner::load_policies(&tf, &opts) {
        Ok(p) => p,
        Err(e) => {
            return Checked {
                diagnostics: vec![file_error(text, &e)],
                cases: Vec::new(),
            }
        }
    };
    let mut out = Checked::default();
    for case in &tf.cases {
        let Some(policy) = policies.for_case(&tf, case) else {
            continue;
        };
        let run = runner::run_case(&tf, case, policy);
        let mut info = CaseInfo {
            line: case.line,
            name: case.name.clone(),
            decided: None,
            problems: run.result.error.iter().cloned().collect(),
        };
        info.problems.extend(
            run.result
                .mismatches
                .iter()
                .map(|m| format!("{}: expected {}, got {}", m.field, m.expected, m.actual)),
        );
        if let Some(checked) = &run.checked {
            let d = checked.decision();
            let rule_text = policy
                .ladder
                .iter()
                .find(|r| policy.at(r.span) == d.decided_by.at)
                .map(|r| policy.text(r.span));
            info.decided = Some(match rule_text {
                Some(t) => format!(
                    "```policy\n{t}\n```\nat {}\n\n{}",
                    d.decided_by.at,
                    checked.deciding_rule()
                ),
                None => checked.deciding_rule(),
            });
        }
        if !info.problems.is_empty() {
            let mut d = diag(
                text,
                case.line,
                case.col,
                "baton::test::case_failed",
                format!("case `{}` fails: {}", case.name, info.problems.join("; ")),
            );
            if let Some(by) = &info.decided {
                d.message.push_str(&format!(
                    "\ndecided by {}",
                    by.lines().last().unwrap_or_default()
                ));
            }
            out.diagnostics.push(d);
        }
        out.cases.push(info);
    }
    out
}

/// The hover of the case that contains 1-based `line`.
pub fn hover(cases: &[CaseInfo], line: usize) -> Option<String> {
    let case = cases.iter().rev().find(|c| c.line <= line)?;
    let status = if case.problems.is_empty() {
        "passes".to_string()
    } else {
        format!("fails: {}", case.problems.join("; "))
    };
    Some(match &case.decided {
        Some(by) => format!("Case `{}` {status}.\n\nDecided by:\n{by}", case.name),
        None => format!("Case `{}` {status}.", case.name),
    })
}
