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
pub mod providers;
mod recover;
pub mod source;
mod texts;
pub use texts::{RuleTexts, TraceTexts};
#[cfg(feature = "unstable")]
pub use texts::RuleText;

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

/// [`load`] of a spec of a given kind ([`source::SpecKind`]: a path, or a shipped name).
pub fn load_kind(spec: &str, kind: source::SpecKind) -> Result<Policy, PolicyError> {
    let loaded = source::load_kind(spec, kind)?;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "How the run starts: the strategy of the ladder rule that decided.")]
#[non_exhaustive]
pub enum Strategy {
    /// `no_handoff`: the target's thread already saw every run.
    NoHandoff,
    /// `delta_existing`: resume the target's thread with what it missed.
    DeltaExisting,
    /// `full_existing`: resume it with the whole thread.
    FullExisting,
    /// `full_new`: a new provider thread with the whole thread.
    FullNew,
    /// `native_fork`: the provider's own fork.
    NativeFork,
    /// `unsupported`: no handoff can reach the target.
    Unsupported,
}

impl Strategy {
    /// The strategy named `s` (`full_new`, ...).
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
    /// Its name (`full_new`, ...).
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
    /// A message as a transcript block: its role label on a line of its own (`User:`,
    /// `Assistant:`), then its text as written (no text rule). A newest-first budget cuts such a
    /// block to its newest words, label kept.
    Transcript,
    /// Seed 003's tool activity line (`<tool> (<status>): <input>`), a command as the Bash
    /// tool call that ran it: `Bash (failed, exit 1): cargo test`, `Bash: git status`. Any
    /// other kind as in `line`.
    Activity,
}

impl Form {
    pub fn parse(s: &str) -> Option<Form> {
        Some(match s {
            "full" => Form::Full,
            "text" => Form::Text,
            "line" => Form::Line,
            "path_only" => Form::PathOnly,
            "count" => Form::Count,
            "transcript" => Form::Transcript,
            "activity" => Form::Activity,
            _ => return None,
        })
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
#[non_exhaustive]
pub enum SummarySource {
    /// baton's own sections.
    Deterministic,
    /// An external command (`source command "CMD" timeout_ms N`): its command line and timeout.
    Command {
        /// The shell command line.
        command: String,
        /// How long it may run, in milliseconds.
        timeout_ms: u64,
    },
}

/// A compiled `text FORM ...` rule (or the legacy `text max N`, as `compact N` for every text).
#[derive(Debug, Clone, PartialEq)]
pub struct CTextCut {
    pub cut: crate::cut::Cut,
    pub kind: Option<String>,
    pub section: Option<String>,
    /// Applies to must-keep items too (seed 004's exact lines).
    pub strict: bool,
    pub span: Span,
}

/// One step of the budget's degradation order (docs/rendering.md#budgets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DegradeStep {
    /// Leave out every item of a kind (never a must-keep item).
    Drop(String),
    /// Cut every text of a kind to its last N characters.
    Tail(String, usize),
    /// Show every item of a kind (`file_change`) as its path.
    Paths(String),
    /// Leave out the oldest covered runs' items, as few runs as needed.
    DropOldestRuns,
    /// Cut every text to `head_tail N`.
    Shorten(usize),
    /// Leave out the outputs of a kind's successful items (a command that exited 0, a tool
    /// call that completed), keeping the command line.
    DropOutput(String),
    /// Cut a kind's texts to their first line.
    FirstLine(String),
    /// Group a kind (`file_change`) by directory, every file's name kept.
    Group(String),
    /// Leave out a kind's items and say how many there were (files: per directory).
    Count(String),
    /// Apply the policy's `head`, `tail` and `head_tail` text rules, which are ceilings: under
    /// the limit every text is whole. The first step unless the policy places it
    /// (`degrade text_rules`).
    TextRules,
}

impl DegradeStep {
    /// The step as a policy writes it.
    pub fn label(&self) -> String {
        match self {
            DegradeStep::Drop(k) => format!("drop {k}"),
            DegradeStep::Tail(k, n) => format!("tail {k} {n}"),
            DegradeStep::Paths(k) => format!("paths {k}"),
            DegradeStep::DropOldestRuns => "drop_oldest_runs".into(),
            DegradeStep::Shorten(n) => format!("shorten {n}"),
            DegradeStep::DropOutput(k) => format!("drop_output {k}"),
            DegradeStep::FirstLine(k) => format!("first_line {k}"),
            DegradeStep::Group(k) => format!("group {k}"),
            DegradeStep::Count(k) => format!("count {k}"),
            DegradeStep::TextRules => TEXT_RULES.into(),
        }
    }

    /// The kind the step is about, if it is about one kind.
    pub fn kind(&self) -> Option<&str> {
        match self {
            DegradeStep::Drop(k)
            | DegradeStep::Tail(k, _)
            | DegradeStep::Paths(k)
            | DegradeStep::DropOutput(k)
            | DegradeStep::FirstLine(k)
            | DegradeStep::Group(k)
            | DegradeStep::Count(k) => Some(k),
            DegradeStep::DropOldestRuns | DegradeStep::Shorten(_) | DegradeStep::TextRules => None,
        }
    }

    /// The order the budget runs: `steps` with the text rules' step where the policy placed
    /// it (`degrade text_rules`), else first; a repeated `text_rules` runs once, where it is
    /// first named.
    pub fn with_text_rules(steps: Vec<DegradeStep>) -> Vec<DegradeStep> {
        let mut out = Vec::with_capacity(steps.len().saturating_add(1));
        if !steps.contains(&DegradeStep::TextRules) {
            out.push(DegradeStep::TextRules);
        }
        for s in steps {
            if s != DegradeStep::TextRules || !out.contains(&DegradeStep::TextRules) {
                out.push(s);
            }
        }
        out
    }

    /// The order used when a policy names none.
    /// Successful outputs go first, the user's words and the compaction summary last; each
    /// step reaches only the oldest runs it needs to.
    pub fn default_order() -> Vec<DegradeStep> {
        vec![
            DegradeStep::Drop("narration".into()),
            DegradeStep::DropOutput("command".into()),
            DegradeStep::DropOutput("tool_call".into()),
            DegradeStep::Tail("tool_call".into(), 400),
            DegradeStep::Tail("command".into(), 400),
            DegradeStep::Paths("file_change".into()),
            DegradeStep::FirstLine("decision".into()),
            DegradeStep::FirstLine("assistant_message".into()),
            DegradeStep::FirstLine("user_message".into()),
            DegradeStep::Group("file_change".into()),
            DegradeStep::DropOldestRuns,
            DegradeStep::Count("user_message".into()),
            DegradeStep::Count("file_change".into()),
            DegradeStep::Shorten(300),
        ]
    }
}

/// The first-turn message's limit a policy sets (`turn max`, docs/rendering.md#budgets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TurnLimit {
    /// The target's `max_input_chars_per_turn` (no `turn max`).
    #[default]
    Target,
    /// `turn max N`.
    Chars(usize),
    /// `turn max none`: no per-turn cap (t3code's legacy continuation has none).
    Unlimited,
}

/// The first-turn limit of `turn max none` in a budget report: the largest per-turn input a
/// provider can declare (what a `u32` holds, exact in every JSON client), read as "no limit".
pub const NO_TURN_LIMIT: usize = 4_294_967_295;

/// The label of the degradation step that applies the text rules' ceilings.
pub const TEXT_RULES: &str = "text_rules";

/// The off-band document budget when a policy's summary block sets no `document max`.
pub const DEFAULT_DOCUMENT_MAX: usize = 100_000;

/// The least room a budget must leave for must-keep items; a smaller `document max` or
/// `budget` is a checker warning.
pub const MUST_KEEP_FLOOR: usize = 2_000;

#[derive(Debug, Clone)]
pub struct CSummary {
    /// Text rules: the legacy `text max N` first (as `compact N` for every text), then the
    /// `text FORM ...` rules in source order.
    pub text_cuts: Vec<CTextCut>,
    /// The off-band document budget (`document max N`).
    pub document_max: Option<usize>,
    /// The first-turn message's limit (`turn max N`, `turn max none`).
    pub turn_max: TurnLimit,
    /// The degradation order (`degrade ...`); empty means [`DegradeStep::default_order`].
    pub degrade: Vec<DegradeStep>,
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

/// The compiled `redact` block (docs/redaction.md).
#[derive(Debug, Clone)]
pub struct CRedact {
    /// The rules in force: the built-ins the policy keeps, then its own, less its exceptions.
    /// `None` only on a policy that failed to check (no `Policy` carries it): a handoff under
    /// it is refused.
    pub redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
    /// The last `redact` block of the set, if any (where built-in rules' trace entries point).
    pub span: Option<Span>,
    /// The policy's own rules with where each is written (trace entries and coverage).
    pub rules: Vec<(String, Span)>,
}

impl CRedact {
    unstable_pub! {
        /// Where the trace entry of rule `id` points: the policy's own rule, else the `redact`
        /// block, else `None` (a built-in of a policy without the block).
        fn span_of(&self, id: &str) -> Option<Span> {
            self.rules
                .iter()
                .find(|(n, _)| n == id)
                .map(|(_, s)| *s)
                .or(self.span)
        }
    }
}

/// How a field of a decision-log line behaves (see [`LOG_FIELDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogField {
    /// On every line: it identifies the line (`id`, `time`, `method`, `policy`).
    Fixed,
    /// Written unless the policy's `log` block drops or hashes it.
    Written,
    /// Written only when the policy's `log` block (or `serve --decision-log-trace` for
    /// `trace`) keeps it.
    OffByDefault,
}

/// Every field of a decision-log line (docs/service.md#decision-log), what it is, and how a
/// `log` block may change it.
pub const LOG_FIELDS: &[(&str, LogField, &str)] = &[
    ("id", LogField::Fixed, "the decision's id, unique within the server's life"),
    ("time", LogField::Fixed, "when the request arrived (RFC 3339, UTC)"),
    ("method", LogField::Fixed, "the service method that decided"),
    ("policy", LogField::Fixed, "the policy's name and sha256"),
    ("thread", LogField::Written, "the thread's id"),
    ("target", LogField::Written, "the target provider"),
    ("run", LogField::Written, "the run the decision is for"),
    ("strategy", LogField::Written, "the ladder's choice"),
    ("handoff_strategy", LogField::Written, "the handoff document's kind"),
    ("provider_thread", LogField::Written, "resume, create, fork natively or none, and the id"),
    ("decided_by", LogField::Written, "the ladder rule that decided"),
    ("stale", LogField::Written, "the staleness signals that held"),
    ("covered_runs", LogField::Written, "the runs the handoff covers"),
    ("delivery", LogField::Written, "off-band or inline, and whether it fell back"),
    ("budget", LogField::Written, "the budget figures: limit, before, after, steps taken"),
    ("redactions", LogField::Written, "per redaction rule, the secrets replaced"),
    ("handoff", LogField::Written, "the handoff recorded (its id and size)"),
    ("allow", LogField::Written, "a pre-grant check's answer"),
    ("error", LogField::Written, "the error code and message of a request that failed"),
    ("duration_us", LogField::Written, "how long the request took, in microseconds"),
    ("divergences", LogField::Written, "what the shadow policy decided differently"),
    ("input", LogField::OffByDefault, "what the decision was made from (the state, with its texts)"),
    ("trace", LogField::OffByDefault, "every rule evaluated, with the values it read"),
];

/// The compiled `log` block (docs/policy-language.md#log); empty when the policy has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CLog {
    /// Fields left out of the line.
    pub drop: Vec<String>,
    /// Fields written as `"sha256:<hex>"` of their JSON text.
    pub hash: Vec<String>,
    /// Fields off by default that are written (`input`, `trace`).
    pub keep: Vec<String>,
}

impl CLog {
    /// Record `action` (`drop`, `hash` or `keep`) on `field`, replacing an earlier action on it.
    pub(crate) fn set(&mut self, action: &str, field: &str) {
        for list in [&mut self.drop, &mut self.hash, &mut self.keep] {
            list.retain(|f| f != field);
        }
        let list = match action {
            "drop" => &mut self.drop,
            "hash" => &mut self.hash,
            _ => &mut self.keep,
        };
        list.push(field.to_string());
    }

    /// Whether the block keeps `field` (`input`, `trace`).
    #[cfg(any(feature = "unstable", feature = "serve"))]
    pub fn keeps(&self, field: &str) -> bool {
        self.keep.iter().any(|f| f == field)
    }
}

/// Defines [`Policy`] with its compiled internals at visibility `$vis`: `pub(crate)` for a
/// library user (who reads them through accessors: [`Policy::name`], [`Policy::sha256`],
/// [`Policy::warnings`], ...), `pub` with the `unstable` feature (baton's own tests).
macro_rules! policy_struct {
    ($vis:vis) => {
/// A checked, compiled policy set, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The name in the `policy "NAME" { ... }` block (`"default"`); the decision's `policy.name`.
    $vis name: String,
    /// The block's `description`, if any.
    $vis description: Option<String>,
    /// sha256 of the source set (hex); with the state it reproduces every decision.
    $vis sha256: String,
    /// Template the policy asks for (`template "t3code.md.j2"`), if any.
    $vis template: Option<String>,
    /// The `let` constants by name, after `extends` overrides.
    $vis lets: BTreeMap<String, Value>,
    /// The compiled `eligible when` rule; `None`: every run that is not running or rolled back is
    /// eligible.
    $vis eligible: Option<(Span, CExpr)>,
    /// The compiled `stale` signals, in policy order.
    $vis stales: Vec<CStale>,
    /// The compiled `strategy` ladder, in order (first match wins; it ends in `otherwise`).
    $vis ladder: Vec<CLadderRule>,
    /// The compiled `summary` block; `None` when the policy has none (the shipped `default`
    /// profile's summary rules apply).
    $vis summary: Option<CSummary>,
    /// The compiled `delivery` block (no rules, so inline, and `inline_limit` 500 when the policy
    /// has none).
    $vis delivery: CDelivery,
    /// The compiled `pregrant` block; `None`: no pre-grant is ever issued.
    $vis pregrant: Option<CPregrant>,
    /// The provider capabilities the policy sets (`providers { ... }`; empty when none).
    $vis providers: providers::CProviders,
    /// The compiled `redact` block (every built-in rule when the policy has none).
    $vis redact: CRedact,
    /// The compiled `log` block: what the service's decision log writes (empty: the
    /// defaults).
    $vis log: CLog,
    /// Lint warnings; errors never reach a `Policy`.
    $vis warnings: Vec<Diagnostic>,
    /// Every source in load order (bases reached through `extends` included); spans index it.
    $vis sources: Vec<Source>,
    /// The rules' trace texts, formatted on first use ([`Policy::trace_texts`]).
    $vis rule_texts: RuleTexts,
}
    };
}
#[cfg(feature = "unstable")]
policy_struct!(pub);
#[cfg(not(feature = "unstable"))]
policy_struct!(pub(crate));

impl Policy {
    /// The name in the `policy "NAME" { ... }` block (`"default"`); the decision's
    /// `policy.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The block's `description`, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// sha256 of the source set (hex); with the state it reproduces every decision.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Lint warnings; errors never reach a `Policy`.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Every source in load order (bases reached through `extends` included).
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// The template the policy asks for (`template "t3code.md.j2"`), if any.
    pub fn template(&self) -> Option<&str> {
        self.template.as_deref()
    }

    unstable_pub! {
        /// `file:line:col` of a span, for traces.
        fn at(&self, span: Span) -> String {
            at(&self.sources, span)
        }
    }

    unstable_pub! {
        /// The source text of a span (a rule as written), on one line.
        fn text(&self, span: Span) -> String {
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
}

#[cfg(test)]
mod lets_tests;
