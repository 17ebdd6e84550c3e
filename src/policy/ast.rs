//! The policy syntax tree. Every node that a diagnostic can point at carries a [`Span`].

use serde::Serialize;

/// A location in one policy source: the source's index among the [`crate::policy::Source`]s,
/// byte offsets, and the 1-based line and column of the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Span {
    /// Index of the source in the policy's sources.
    pub source: usize,
    /// Byte offset where the span starts.
    pub start: usize,
    /// Byte offset where it ends.
    pub end: usize,
    /// Line (1-based).
    pub line: usize,
    /// Column (1-based).
    pub col: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub node: T,
    pub span: Span,
}

/// One parsed policy file.
#[derive(Debug, Clone, Default)]
pub struct PolicyFile {
    pub name: Option<Spanned<String>>,
    pub description: Option<String>,
    pub extends: Vec<Spanned<String>>,
    pub template: Option<Spanned<String>>,
    /// The header's `known_providers [...]`: providers the policy names beyond the shipped ones.
    pub known_providers: Vec<Spanned<String>>,
    pub lets: Vec<Let>,
    pub eligible: Option<Condition>,
    pub stales: Vec<StaleRule>,
    pub strategy: Option<Ladder>,
    pub summary: Option<SummaryBlock>,
    pub delivery: Option<DeliveryBlock>,
    pub pregrant: Option<PregrantBlock>,
    /// `providers { ... }`: provider capabilities the policy sets.
    pub providers: Option<ProvidersBlock>,
    /// `redact { ... }`: secret redaction rules (docs/redaction.md).
    pub redact: Option<RedactBlock>,
    /// `log { ... }`: what the service's decision log writes (docs/policy-language.md#log).
    pub log: Option<LogBlock>,
}

/// `log { drop FIELD  hash FIELD  keep FIELD }`.
#[derive(Debug, Clone)]
pub struct LogBlock {
    /// The entries in order: the action (`drop`, `hash` or `keep`) and the field it names.
    pub entries: Vec<LogEntry>,
}

/// One `log` entry: `drop trace`.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub action: Spanned<String>,
    pub field: Spanned<String>,
}

/// `redact { disable ID  redact NAME pattern "..."  allow pattern "..." }`.
#[derive(Debug, Clone)]
pub struct RedactBlock {
    pub span: Span,
    /// Built-in rules turned off, by id.
    pub disabled: Vec<Spanned<String>>,
    /// The policy's own rules, in order.
    pub rules: Vec<RedactRule>,
    /// Exceptions: a match of one of these is never redacted.
    pub allows: Vec<RedactPattern>,
}

/// `redact NAME pattern "..."`.
#[derive(Debug, Clone)]
pub struct RedactRule {
    pub span: Span,
    pub name: Spanned<String>,
    pub pattern: RedactPattern,
}

/// A pattern string: the regex as written (only `\"` unescaped), with where it was written.
#[derive(Debug, Clone)]
pub struct RedactPattern {
    pub span: Span,
    pub text: String,
}

#[derive(Debug, Clone)]
pub struct Let {
    pub name: Spanned<String>,
    pub value: Expr,
}

/// A bare `when` condition with where it was written.
#[derive(Debug, Clone)]
pub struct Condition {
    pub span: Span,
    pub when: Expr,
}

#[derive(Debug, Clone)]
pub struct StaleRule {
    pub name: Spanned<String>,
    pub span: Span,
    pub when: Expr,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Ladder {
    pub span: Span,
    pub rules: Vec<LadderRule>,
}

#[derive(Debug, Clone)]
pub struct LadderRule {
    pub strategy: Spanned<String>,
    pub span: Span,
    /// `None` for `otherwise`.
    pub when: Option<Expr>,
    pub handoff: Option<Spanned<String>>,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SummaryBlock {
    pub span: Span,
    pub text_max: Option<Spanned<i64>>,
    pub sections: Vec<SectionDecl>,
    pub includes: Vec<IncludeRule>,
    pub excludes: Vec<ExcludeRule>,
    pub budget: Option<Budget>,
    pub source: Option<SourceDecl>,
    /// `text FORM [N] [for KIND] [in SECTION] [strict]` rules, in source order.
    pub text_cuts: Vec<TextCutDecl>,
    /// `document max N`.
    pub document_max: Option<Spanned<i64>>,
    /// `turn max N` (`Some(n)`) or `turn max none` (`None`).
    pub turn_max: Option<Spanned<Option<i64>>>,
    /// `degrade STEP` entries, in source order.
    pub degrade: Vec<Spanned<DegradeDecl>>,
}

/// `text FORM [N] [for KIND] [in SECTION] [strict]`.
#[derive(Debug, Clone)]
pub struct TextCutDecl {
    pub span: Span,
    /// `whole`, `head`, `tail`, `head_tail` or `compact`.
    pub form: String,
    pub chars: Option<Spanned<i64>>,
    pub kind: Option<Spanned<String>>,
    pub section: Option<Spanned<String>>,
    pub strict: bool,
}

/// One step of the degradation order.
#[derive(Debug, Clone, PartialEq)]
pub enum DegradeDecl {
    DropOldestRuns,
    /// `degrade text_rules`: where the text rules' ceilings apply in the order.
    TextRules,
    Drop(Spanned<String>),
    Tail(Spanned<String>, i64),
    Paths(Spanned<String>),
    Shorten(i64),
    /// `drop_output KIND`, `first_line KIND`, `group KIND`, `count KIND`: the verb and the kind.
    Kinded(String, Spanned<String>),
}

#[derive(Debug, Clone)]
pub struct SectionDecl {
    pub name: Spanned<String>,
    pub title: String,
}

#[derive(Debug, Clone)]
pub struct IncludeRule {
    pub span: Span,
    pub kind: Spanned<String>,
    pub section: Spanned<String>,
    pub form: Option<Spanned<String>>,
    pub when: Option<Expr>,
}

#[derive(Debug, Clone)]
pub struct ExcludeRule {
    pub span: Span,
    pub kind: Spanned<String>,
    pub when: Option<Expr>,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Budget {
    pub span: Span,
    pub chars: Spanned<i64>,
    pub newest_first: bool,
}

#[derive(Debug, Clone)]
pub enum SourceDecl {
    Deterministic,
    Command {
        span: Span,
        command: String,
        timeout_ms: Option<Spanned<i64>>,
    },
}

#[derive(Debug, Clone)]
pub struct DeliveryBlock {
    pub span: Span,
    pub rules: Vec<DeliveryRule>,
    pub inline_limit: Option<Spanned<i64>>,
}

#[derive(Debug, Clone)]
pub struct DeliveryRule {
    pub span: Span,
    pub off_band: bool,
    pub when: Option<Expr>,
    pub because: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PregrantBlock {
    pub span: Span,
    pub grants: Vec<GrantRule>,
    /// `turns N uses N` (1 and 1, spanning the block, when not written).
    pub turns: Spanned<i64>,
    pub uses: Spanned<i64>,
}

#[derive(Debug, Clone)]
pub struct GrantRule {
    pub span: Span,
    pub tool: Spanned<String>,
    pub target: Spanned<String>,
    pub when: Option<Expr>,
}

/// `providers { NAME { KEY VALUE [force] ... } ... }` (docs/policy-language.md#providers).
#[derive(Debug, Clone)]
pub struct ProvidersBlock {
    pub span: Span,
    /// The provider entries, in source order.
    pub providers: Vec<ProviderEntry>,
}

/// `NAME { KEY VALUE [force] ... }`: the capabilities one provider's entry sets.
#[derive(Debug, Clone)]
pub struct ProviderEntry {
    /// The provider's name (a bare word or a quoted string).
    pub name: Spanned<String>,
    pub span: Span,
    /// The settings, in source order.
    pub settings: Vec<ProviderSetting>,
}

/// `KEY VALUE [force]`: one capability of a provider entry.
#[derive(Debug, Clone)]
pub struct ProviderSetting {
    /// The capability (`file_read`: the fact `target.caps.file_read`).
    pub key: Spanned<String>,
    pub value: Spanned<SettingValue>,
    /// `force`: the policy's value wins over the state's.
    pub force: bool,
    pub span: Span,
}

/// A provider setting's value as written; the checker types it against the capability.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue {
    Bool(bool),
    Int(i64),
    /// A bare word (`user`).
    Word(String),
    /// A quoted string (`"user"`).
    Str(String),
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(i64, Span),
    Str(String, Span),
    Bool(bool, Span),
    Null(Span),
    List(Vec<Expr>, Span),
    /// A dotted name: a fact, a `let`, a stale signal.
    Path(String, Span),
    Not(Box<Expr>, Span),
    And(Vec<Expr>, Span),
    Or(Vec<Expr>, Span),
    Cmp(Box<Expr>, CmpOp, Box<Expr>, Span),
    /// `a + b - c`: operands with their signs (`true` = minus).
    Sum(Vec<(bool, Expr)>, Span),
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Int(_, s)
            | Expr::Str(_, s)
            | Expr::Bool(_, s)
            | Expr::Null(s)
            | Expr::List(_, s)
            | Expr::Path(_, s)
            | Expr::Not(_, s)
            | Expr::And(_, s)
            | Expr::Or(_, s)
            | Expr::Cmp(_, _, _, s)
            | Expr::Sum(_, s) => *s,
        }
    }

    /// Every path the expression reads, in source order.
    pub fn paths(&self, out: &mut Vec<(String, Span)>) {
        match self {
            Expr::Path(p, s) => out.push((p.clone(), *s)),
            Expr::List(xs, _) | Expr::And(xs, _) | Expr::Or(xs, _) => {
                xs.iter().for_each(|x| x.paths(out))
            }
            Expr::Not(x, _) => x.paths(out),
            Expr::Cmp(a, _, b, _) => {
                a.paths(out);
                b.paths(out);
            }
            Expr::Sum(xs, _) => xs.iter().for_each(|(_, x)| x.paths(out)),
            _ => {}
        }
    }

    /// Whether the expression is the literal `true`.
    pub fn is_literal_true(&self) -> bool {
        matches!(self, Expr::Bool(true, _))
    }
}
