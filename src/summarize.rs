//! The summarizer seam: who writes a handoff's summary text when the policy's summary block
//! names an external source (`source command "CMD" timeout_ms N`). The core never starts a
//! process: [`crate::Engine::finish`] hands the request to the [`Summarizer`] it is given.
//! [`Deterministic`] runs nothing (what `baton explain`, replay and policy tests use); the
//! delivery layer's command runner ([`crate::CommandRunner`]) runs the policy's command.

use std::time::Duration;

pub use crate::policy::SummarySource;

/// What a summarizer is asked to summarize: the source the policy names, the input document
/// (thread id and redacted title, the decision, the selected sections; docs/delivery.md) and
/// the most characters the summary may have.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The policy's summary source.
    pub source: &'a SummarySource,
    /// The JSON document the summarizer reads.
    pub input: &'a serde_json::Value,
    /// The most characters the summary may have.
    pub budget: usize,
}

/// Writes the summary text of a handoff whose policy names an external summary source.
pub trait Summarizer: Send + Sync {
    /// The summary text, or why it could not be made (the handoff then falls back to the
    /// deterministic sections and records the reason); `None` when this summarizer does not
    /// run the source at all (the handoff is rendered from the deterministic sections and
    /// records no fallback).
    fn summarize(&self, request: &SummaryRequest<'_>) -> Option<Result<String, SummarizerFailure>>;
}

/// Runs no summarizer: the deterministic sections, with no fallback recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deterministic;

impl Summarizer for Deterministic {
    fn summarize(&self, _: &SummaryRequest<'_>) -> Option<Result<String, SummarizerFailure>> {
        None
    }
}

/// What `created_by` records for a summary `source` wrote: `deterministic` or
/// `command:<the policy's command line>`.
pub fn created_by(source: &SummarySource) -> String {
    match source {
        SummarySource::Deterministic => "deterministic".to_string(),
        SummarySource::Command { command, .. } => format!("command:{command}"),
    }
}

/// Why an external summarizer's output was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizerFailure {
    /// It ran longer than its timeout and was killed.
    #[error("summarizer timed out after {} ms and was killed", .0.as_millis())]
    Timeout(Duration),
    /// It exited unsuccessfully.
    #[error("summarizer {}{}", exit_description(*.code, *.signal), stderr_suffix(.stderr))]
    ExitStatus {
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Signal number, if it was killed by a signal.
        signal: Option<i32>,
        /// A short excerpt of its stderr.
        stderr: String,
    },
    /// It printed nothing (or only whitespace).
    #[error("summarizer printed nothing on stdout")]
    EmptyOutput,
    /// It printed more than the budget allows.
    #[error("summarizer output has {chars} characters, over the budget of {budget}")]
    OverBudget {
        /// Characters printed (a lower bound if reading was cut short).
        chars: usize,
        /// The budget.
        budget: usize,
    },
    /// Its stdout was not valid UTF-8.
    #[error("summarizer output is not valid UTF-8")]
    InvalidUtf8,
    /// It could not be started.
    #[error("summarizer could not be started: {0}")]
    Spawn(String),
}

fn exit_description(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        (None, None) => "exited unsuccessfully".to_string(),
    }
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

impl SummarizerFailure {
    /// A stable snake_case name, recorded as the fallback reason.
    pub fn kind(&self) -> &'static str {
        match self {
            SummarizerFailure::Timeout(_) => "timeout",
            SummarizerFailure::ExitStatus { .. } => "exit_status",
            SummarizerFailure::EmptyOutput => "empty_output",
            SummarizerFailure::OverBudget { .. } => "over_budget",
            SummarizerFailure::InvalidUtf8 => "invalid_utf8",
            SummarizerFailure::Spawn(_) => "spawn",
        }
    }
}
