//! The policy language: sources, parser, checker, and the compiled [`Policy`] the evaluator
//! runs.
//!
//! Public entry point: [`load`] (a file, a directory or a shipped profile name) or
//! [`load_text`]; both parse, compose `extends`, type-check and lint, and return a [`Policy`]
//! or every diagnostic.

pub mod ast;
pub mod check;
pub mod codes;
pub mod diag;
pub mod parser;
pub mod source;

pub use diag::{Diagnostic, PolicyError, Severity, Source};

use crate::facts::{Fact, Value};
use crate::state::HandoffStrategy;
use ast::{CmpOp, Span};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Load, compose, check and compile a policy set.
pub fn load(spec: &str) -> Result<Policy, PolicyError> {
    let loaded = source::load(spec)?;
    check::check(loaded.sources, loaded.files)
}

/// [`load`] with the texts of some files given in memory (an editor's open buffers), read
/// instead of the disk; see [`source::load_overlay`].
pub fn load_overlay(
    spec: &str,
    overlay: &BTreeMap<std::path::PathBuf, String>,
) -> Result<Policy, PolicyError> {
    let loaded = source::load_overlay(spec, overlay)?;
    check::check(loaded.sources, loaded.files)
}

/// Check and compile policy text held in memory; `name` is used in diagnostics.
pub fn load_text(name: &str, text: &str) -> Result<Policy, PolicyError> {
    let loaded = source::load_text(name, text)?;
    check::check(loaded.sources, loaded.files)
}

/// The strategies of seed 000's ladder, plus `native_fork`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    NoHandoff,
    DeltaExisting,
    FullExisting,
    FullNew,
    NativeFork,
    Unsupported,
}

impl Strategy {
    pub fn parse(s: &str) -> Option<Strategy> {
        Some(match s {
            "no_handoff" => Strategy::NoHandoff,
            "delta_existing" => Strategy::DeltaExisting,
            "full_existing" => Strategy::FullExisting,
            "full_new" => Strategy::FullNew,
            "native_fork" => Strategy::NativeFork,
            "unsupported" => Strategy::Unsupported,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::NoHandoff => "no_handoff",
            Strategy::DeltaExisting => "delta_existing",
            Strategy::FullExisting => "full_existing",
            Strategy::FullNew => "full_new",
            Strategy::NativeFork => "native_fork",
            Strategy::Unsupported => "unsupported",
        }
    }
}

/// How an included item is written into its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// Text plus details (command output, diff size, ...).
    Full,
    /// The item's text only.
    Text,
    /// One line through the compact text rule.
    Line,
    /// A file change as its path only.
    PathOnly,
    /// A checkpoint as its file count only.
    Count,
}

impl Form {
    pub fn parse(s: &str) -> Option<Form> {
        Some(match s {
            "full" => Form::Full,
            "text" => Form::Text,
            "line" => Form::Line,
            "path_only" => Form::PathOnly,
            "count" => Form::Count,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Full => "full",
            Form::Text => "text",
            Form::Line => "line",
            Form::PathOnly => "path_only",
            Form::Count => "count",
        }
    }
}

/// A compiled expression: every name resolved, every type checked.
#[derive(Debug, Clone, PartialEq)]
pub enum CExpr {
    Const(Value),
    Let(String, Value),
    Fact(Fact),
    /// `stale.NAME`: index into the policy's signals.
    Signal(usize, String),
    /// `stale`: any signal held.
    AnyStale,
    List(Vec<CExpr>),
    Not(Box<CExpr>),
    And(Vec<CExpr>),
    Or(Vec<CExpr>),
    Cmp(Box<CExpr>, CmpOp, Box<CExpr>),
    Sum(Vec<(bool, CExpr)>),
}

/// Evaluate an expression made only of constants (a `let` value).
pub(crate) fn eval_const(e: &CExpr) -> Value {
    match e {
        CExpr::Const(v) | CExpr::Let(_, v) => v.clone(),
        CExpr::List(xs) => Value::List(xs.iter().map(eval_const).collect()),
        CExpr::Sum(xs) => Value::sum(xs.iter().map(|(neg, x)| (*neg, eval_const(x)))),
        _ => Value::Null,
    }
}

#[derive(Debug, Clone)]
pub struct CStale {
    pub name: String,
    pub span: Span,
    pub when: CExpr,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CLadderRule {
    pub strategy: Strategy,
    pub handoff: Option<HandoffStrategy>,
    pub span: Span,
    /// `None` for `otherwise`.
    pub when: Option<CExpr>,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CInclude {
    pub kind: String,
    pub section: String,
    pub form: Form,
    pub when: Option<CExpr>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct CExclude {
    pub kind: String,
    pub when: Option<CExpr>,
    /// What provenance records for an item this rule drops: its `because`, else its location.
    pub reason: String,
    pub span: Span,
}

/// Who writes the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SummarySource {
    Deterministic,
    Command { command: String, timeout_ms: u64 },
}

#[derive(Debug, Clone)]
pub struct CSummary {
    pub text_max: Option<usize>,
    /// Sections the policy declared (name, title), in declaration order.
    pub sections: Vec<(String, String)>,
    pub includes: Vec<CInclude>,
    pub excludes: Vec<CExclude>,
    /// (characters, newest first)
    pub budget: Option<(usize, bool)>,
    pub source: SummarySource,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct CDeliveryRule {
    pub off_band: bool,
    pub when: Option<CExpr>,
    pub because: Option<String>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct CDelivery {
    pub rules: Vec<CDeliveryRule>,
    pub inline_limit: usize,
    pub span: Option<Span>,
}

#[derive(Debug, Clone)]
pub struct CGrant {
    pub tool: String,
    pub when: Option<CExpr>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct CPregrant {
    pub grants: Vec<CGrant>,
    pub turns: u32,
    pub uses: u32,
    pub span: Span,
}

/// `file:line:col` of a span in `sources`.
pub(crate) fn at(sources: &[Source], span: Span) -> String {
    let file = sources
        .get(span.source)
        .map(|s| s.name.as_str())
        .unwrap_or("<policy>");
    format!("{file}:{}:{}", span.line, span.col)
}

/// A checked, compiled policy set, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub description: Option<String>,
    /// sha256 of the source set (hex); with the state it reproduces every decision.
    pub sha256: String,
    /// Template the policy asks for (`template "t3code.md.j2"`), if any.
    pub template: Option<String>,
    pub lets: BTreeMap<String, Value>,
    pub eligible: Option<(Span, CExpr)>,
    pub stales: Vec<CStale>,
    pub ladder: Vec<CLadderRule>,
    pub summary: Option<CSummary>,
    pub delivery: CDelivery,
    pub pregrant: Option<CPregrant>,
    /// Lint warnings; errors never reach a `Policy`.
    pub warnings: Vec<Diagnostic>,
    pub sources: Vec<Source>,
}

impl Policy {
    /// `file:line:col` of a span, for traces.
    pub fn at(&self, span: Span) -> String {
        at(&self.sources, span)
    }

    /// The source text of a span (a rule as written), on one line.
    pub fn text(&self, span: Span) -> String {
        let Some(src) = self.sources.get(span.source) else {
            return String::new();
        };
        let end = span.end.min(src.text.len());
        let start = span.start.min(end);
        src.text
            .get(start..end)
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}
