//! The static checker: composes the files of a policy set (`extends`), resolves and types every
//! name, and compiles the rules to [`CExpr`](crate::policy::CExpr)s that the evaluator runs.
//! Lints ride along as warnings. Nothing is evaluated against a state here.

mod compile;
mod compose;
mod lint;
mod log;
mod providers;
mod redact;
mod resolve;
mod traps;
mod typecheck;

use super::ast::*;
use super::diag::{Diagnostic, Severity, Source};
use super::{
    CDelivery, CDeliveryRule, CGrant, CLadderRule, CPregrant, CStale, Policy, Strategy,
};
use crate::facts::{Fact, Scope, Type, Value, GRANT_TARGETS, STRATEGIES};
use crate::state::HandoffStrategy;
use crate::suggest::did_you_mean;
use std::collections::{BTreeMap, HashMap, HashSet};
use compile::compile_summary;
use compose::{merge, Merged};
use lint::FirstMatch;
use resolve::help;

/// Built-in summary sections in the order documents list them (seed 000's order, with the
/// fork anchor and compaction summary first).
pub const BUILTIN_SECTIONS: &[(&str, &str)] = &[
    ("anchor", "Fork anchor"),
    ("compact", "Compacted summary"),
    ("goals", "User goals and constraints"),
    ("decisions", "Decisions"),
    ("files", "Files changed"),
    ("commands", "Commands and tests"),
    ("plan", "Plan and todo state"),
    ("open", "Open problems (newest first)"),
    ("checkpoint", "Current checkpoint"),
    ("workspace", "Workspace changes"),
    ("failures", "Known failures"),
    ("subagents", "Subagent results"),
    ("tools", "Tool calls"),
    ("narration", "Recent narration"),
    ("messages", "Conversation"),
    ("handoffs", "Earlier handoffs"),
    ("history", "History"),
];

pub const FORMS: &[&str] = &["full", "text", "line", "path_only", "count", "transcript", "activity"];

/// The largest count a policy may write (`turns`, `uses`, `text max`, `budget`,
/// `inline_limit`, `timeout_ms`): what a `u32` holds, far beyond any sensible value, and small
/// enough that no arithmetic on it overflows. docs/limits.md lists it.
pub const MAX_COUNT: i64 = u32::MAX as i64;

/// Unknown names that get a "did you mean" suggestion; later ones get the generic help, so
/// that the cost of suggestions (every name scanned) does not grow with the number of errors.
pub const MAX_SUGGESTIONS: usize = 100;

#[derive(Clone, Copy)]
struct Ty {
    ty: Type,
    nullable: bool,
}

/// Where an expression stands in the evaluation order, which decides what it may read: a fact
/// is readable only once what it depends on is known (`thread.eligible_runs` not inside
/// `eligible`, `summary.*` not inside the summary rules that compute it, `delivery.*` only
/// after delivery).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Let,
    Eligible,
    Stale,
    Ladder,
    Summary,
    Delivery,
    Pregrant,
}

impl Ctx {
    fn what(self) -> &'static str {
        match self {
            Ctx::Let => "in a `let`",
            Ctx::Eligible => "in `eligible`",
            Ctx::Stale => "in a staleness signal",
            Ctx::Ladder => "in the strategy ladder",
            Ctx::Summary => "in a summary rule",
            Ctx::Delivery => "in `delivery`",
            Ctx::Pregrant => "in `pregrant`",
        }
    }

    fn allows(self, scope: Scope) -> bool {
        use Ctx::*;
        match scope {
            Scope::Thread => true,
            Scope::Run => self == Eligible,
            Scope::Item => self == Summary,
            Scope::Eligibility => !matches!(self, Let | Eligible),
            Scope::Summary => matches!(self, Stale | Ladder | Delivery | Pregrant),
            Scope::Strategy => matches!(self, Delivery | Pregrant),
            Scope::Delivery => self == Pregrant,
        }
    }

    /// Whether the staleness signals are known (`stale`, `stale.NAME`).
    fn stale(self) -> bool {
        matches!(self, Ctx::Ladder | Ctx::Delivery | Ctx::Pregrant)
    }
}

struct Checker<'a> {
    sources: &'a [Source],
    diags: Vec<Diagnostic>,
    /// Resolved `let` values.
    lets: HashMap<String, (Value, Type, Span)>,
    /// Every `let` of the composed policy, resolved on first use: a derived file's `let` may
    /// refer to one it defines after the base's position of the name it overrides.
    let_defs: HashMap<&'a str, &'a Let>,
    /// `let`s that failed (reported once).
    let_failed: HashSet<&'a str>,
    used_lets: HashSet<String>,
    signals: Vec<String>,
    /// How many more unknown names get a "did you mean" ([`MAX_SUGGESTIONS`]).
    suggestions_left: usize,
    /// Position of each signal in `signals`.
    signal_index: HashMap<String, usize>,
    observed_any_stale: bool,
    observed_signals: HashSet<String>,
}

impl<'a> Checker<'a> {
    fn err(&mut self, span: Span, msg: impl Into<String>, help: Option<String>) {
        self.diags
            .push(Diagnostic::new(self.sources, Severity::Error, span, msg).with_help(help));
    }

    /// An error with secondary labels (`(span, what it shows)`).
    fn err_labelled(
        &mut self,
        span: Span,
        msg: impl Into<String>,
        help: Option<String>,
        labels: Vec<(Span, String)>,
    ) {
        let mut d = Diagnostic::new(self.sources, Severity::Error, span, msg).with_help(help);
        for (s, m) in labels {
            d = d.with_label(self.sources, s, m);
        }
        self.diags.push(d);
    }

    fn warn(&mut self, span: Span, msg: impl Into<String>, help: Option<String>) {
        self.diags
            .push(Diagnostic::new(self.sources, Severity::Warning, span, msg).with_help(help));
    }

    /// The range check every number a policy writes goes through (`turns`, `uses`,
    /// `text max`, `budget`, `inline_limit`, `timeout_ms`, and any count a later form adds):
    /// `Some(n)` when `min <= n <= max`, else an error at the number naming the range.
    /// `help` explains the bound when it is not obvious.
    pub(crate) fn in_range(
        &mut self,
        n: &Spanned<i64>,
        what: &str,
        min: i64,
        max: i64,
        help: Option<&str>,
    ) -> Option<i64> {
        if (min..=max).contains(&n.node) {
            return Some(n.node);
        }
        self.err(
            n.span,
            format!(
                "`{what}` is {}, out of range: it must be between {min} and {max}",
                n.node
            ),
            help.map(str::to_string),
        );
        None
    }

    /// Whether an unknown name may still get a "did you mean" (which scans every name).
    fn take_suggestion(&mut self) -> bool {
        if self.suggestions_left == 0 {
            return false;
        }
        self.suggestions_left = self.suggestions_left.saturating_sub(1);
        true
    }

}

/// Check and compile a loaded policy set.
pub fn check(
    sources: Vec<Source>,
    files: Vec<PolicyFile>,
) -> Result<Policy, super::diag::PolicyError> {
    let merged = merge(&files);
    let mut c = Checker {
        sources: &sources,
        diags: Vec::new(),
        lets: HashMap::new(),
        let_defs: HashMap::new(),
        let_failed: HashSet::new(),
        used_lets: HashSet::new(),
        signals: Vec::new(),
        signal_index: HashMap::new(),
        suggestions_left: MAX_SUGGESTIONS,
        observed_any_stale: false,
        observed_signals: HashSet::new(),
    };

    // Duplicate names within one file.
    for f in &files {
        providers::no_duplicates(&mut c, f);
        c.no_duplicates(f.lets.iter().map(|l| &l.name), |n| format!("`let {n}`"));
        c.no_duplicates(f.stales.iter().map(|s| &s.name), |n| {
            format!("staleness signal `{n}`")
        });
    }

    // Lets: names first, then values, each resolved on first use.
    for l in &merged.lets {
        if Fact::by_name(&l.name.node).is_some() || l.name.node == "stale" {
            c.err(
                l.name.span,
                format!(
                    "`{}` is a fact name; pick another name for the `let`",
                    l.name.node
                ),
                None,
            );
            continue;
        }
        c.let_defs.insert(l.name.node.as_str(), l);
    }
    for l in &merged.lets {
        c.resolve_let(&l.name.node);
    }

    // Eligible.
    let eligible = merged
        .eligible
        .and_then(|e| c.condition(&e.when, Ctx::Eligible).map(|w| (e.span, w)));

    // Staleness signals.
    c.signals = merged.stales.iter().map(|s| s.name.node.clone()).collect();
    for (i, s) in c.signals.iter().enumerate() {
        c.signal_index.entry(s.clone()).or_insert(i);
    }
    let mut stales = Vec::new();
    for s in &merged.stales {
        if let Some(w) = c.condition(&s.when, Ctx::Stale) {
            stales.push(CStale {
                name: s.name.node.clone(),
                span: s.span,
                when: w,
                because: s.because.clone(),
            });
        }
    }

    // Strategy ladder.
    let ladder = compile_ladder(&mut c, &merged, sources.len());

    // Summary.
    let summary = merged.summary.map(|s| compile_summary(&mut c, s));

    // Delivery.
    let delivery = compile_delivery(&mut c, merged.delivery);

    // Pre-grant.
    let pregrant = compile_pregrant(&mut c, merged.pregrant);

    // Provider capabilities.
    let providers = providers::compile_providers(&mut c, &merged);

    // Secret redaction (docs/redaction.md).
    let redact = redact::compile_redact(&mut c, &merged);

    // The decision log's masking (docs/policy-language.md#log).
    let log = log::compile_log(&mut c, &merged);

    // Lints.
    // The traps only of a policy that checks: on top of errors they would be noise.
    if !c.diags.iter().any(|d| d.is_error()) {
        traps::check(&mut c, &merged);
    }
    lint::unused(&mut c, &merged);

    let errors = c.diags.iter().any(|d| d.is_error());
    let diags = std::mem::take(&mut c.diags);
    if errors {
        let mut diags = diags;
        // Errors first, in source order; warnings after.
        diags.sort_by(|a, b| {
            (!a.is_error(), &a.file, a.line, a.col).cmp(&(!b.is_error(), &b.file, b.line, b.col))
        });
        return Err(super::diag::PolicyError { diagnostics: diags });
    }
    let name = merged
        .name
        .map(|n| n.node.clone())
        .or_else(|| sources.last().map(|s| stem(&s.name)))
        .unwrap_or_else(|| "policy".into());
    let sha256 = super::source::sha256(&sources);
    let lets: BTreeMap<String, Value> = c
        .lets
        .iter()
        .map(|(k, (v, _, _))| (k.clone(), v.clone()))
        .collect();
    Ok(Policy {
        name,
        description: merged.description.cloned(),
        sha256,
        template: merged.template.map(|t| t.node.clone()),
        lets,
        eligible,
        stales,
        ladder,
        summary,
        delivery,
        pregrant,
        providers,
        redact,
        log,
        warnings: diags,
        sources,
        rule_texts: Default::default(),
    })
}

/// The strategy ladder: each rule's strategy and handoff strategy parsed and checked, its
/// condition compiled; an error when there is no ladder or it has no `otherwise` rule
/// (`sources`: how many sources, for where a missing ladder is reported).
fn compile_ladder(c: &mut Checker<'_>, merged: &Merged<'_>, sources: usize) -> Vec<CLadderRule> {
    let mut ladder = Vec::new();
    match merged.strategy {
        None => {
            let span = merged.name.map(|n| n.span).unwrap_or(Span {
                source: sources.saturating_sub(1),
                start: 0,
                end: 0,
                line: 1,
                col: 1,
            });
            c.err(span, "the policy has no `strategy { ... }` ladder", Some("every policy needs a ladder ending in `otherwise`; `extends \"default\"` inherits one".into()));
        }
        Some(l) => {
            let mut first_match = FirstMatch::default();
            for r in &l.rules {
                first_match.visit(c, r.span, r.when.as_ref());
                let Some(strategy) = Strategy::parse(&r.strategy.node) else {
                    let help = help(&r.strategy.node, STRATEGIES, "strategies", '`');
                    c.err(
                        r.strategy.span,
                        format!("unknown strategy `{}`", r.strategy.node),
                        help,
                    );
                    continue;
                };
                let handoff = match &r.handoff {
                    None => None,
                    Some(h) => {
                        let Some(hs) = HandoffStrategy::parse(&h.node) else {
                            let help =
                                help(&h.node, HandoffStrategy::NAMES, "handoff strategies", '`');
                            c.err(
                                h.span,
                                format!("unknown handoff strategy `{}`", h.node),
                                help,
                            );
                            continue;
                        };
                        if matches!(
                            strategy,
                            Strategy::NoHandoff | Strategy::Unsupported | Strategy::NativeFork
                        ) {
                            c.err(h.span, format!("`{}` makes no handoff document, so it cannot name a handoff strategy", strategy.as_str()), Some("remove `handoff ...` from this rule".into()));
                            continue;
                        }
                        Some(hs)
                    }
                };
                let Ok(when) = c.optional_condition(r.when.as_ref(), Ctx::Ladder) else {
                    continue;
                };
                ladder.push(CLadderRule {
                    strategy,
                    handoff,
                    span: r.span,
                    when,
                    because: r.because.clone(),
                });
            }
            if !l.rules.iter().any(|r| r.when.is_none()) {
                let end = l.rules.last().map(|r| r.span).unwrap_or(l.span);
                c.err(end, "the strategy ladder has no `otherwise` rule", Some("end the ladder with a catch-all, e.g. `full_new otherwise because \"...\"`".into()));
            }
        }
    }
    ladder
}

/// The `delivery` block: its rules compiled (first match wins) and its `inline_limit`.
fn compile_delivery(c: &mut Checker<'_>, delivery_block: Option<&DeliveryBlock>) -> CDelivery {
    let mut delivery = CDelivery {
        rules: Vec::new(),
        inline_limit: 500,
        span: None,
    };
    if let Some(d) = delivery_block {
        let mut first_match = FirstMatch::default();
        for r in &d.rules {
            first_match.visit(c, r.span, r.when.as_ref());
            let Ok(when) = c.optional_condition(r.when.as_ref(), Ctx::Delivery) else {
                continue;
            };
            delivery.rules.push(CDeliveryRule {
                off_band: r.off_band,
                when,
                because: r.because.clone(),
                span: r.span,
            });
        }
        if let Some(l) = &d.inline_limit {
            if let Some(n) = c.in_range(l, "inline_limit", 1, MAX_COUNT, None) {
                delivery.inline_limit = usize::try_from(n).unwrap_or(usize::MAX);
            }
        }
        delivery.span = Some(d.span);
    }
    delivery
}

/// The `pregrant` block: its grants checked (only `read` of `handoff.document`) and
/// compiled, its turns and uses, a warning when they are wider than one.
fn compile_pregrant(c: &mut Checker<'_>, pregrant: Option<&PregrantBlock>) -> Option<CPregrant> {
    pregrant.map(|p| {
        let mut grants = Vec::new();
        for g in &p.grants {
            if g.tool.node != "read" {
                c.err(
                    g.tool.span,
                    format!(
                        "unknown grant `{}`: baton only pre-grants `read`",
                        g.tool.node
                    ),
                    Some(
                        "a pre-grant lets the agent read the handoff document, nothing else".into(),
                    ),
                );
                continue;
            }
            if !GRANT_TARGETS.contains(&g.target.node.as_str()) {
                let help = did_you_mean(&g.target.node, GRANT_TARGETS.iter().copied())
                    .map(|s| format!("did you mean `{s}`?"));
                c.err(
                    g.target.span,
                    format!(
                        "`{}` cannot be granted: only `handoff.document` can",
                        g.target.node
                    ),
                    help,
                );
                continue;
            }
            let Ok(when) = c.optional_condition(g.when.as_ref(), Ctx::Pregrant) else {
                continue;
            };
            grants.push(CGrant {
                tool: crate::ids::GRANTABLE_TOOL.to_string(),
                when,
                span: g.span,
            });
        }
        let turns = c.in_range(&p.turns, "turns", 1, MAX_COUNT, None);
        let uses = c.in_range(&p.uses, "uses", 1, MAX_COUNT, None);
        if p.turns.node > 1 || p.uses.node > 1 {
            c.warn(
                p.span,
                "a pre-grant wider than one turn and one use weakens the permission model",
                Some("seed 003 issues a one-turn, one-use grant".into()),
            );
        }
        CPregrant {
            grants,
            turns: turns.and_then(|n| u32::try_from(n).ok()).unwrap_or(1),
            uses: uses.and_then(|n| u32::try_from(n).ok()).unwrap_or(1),
            span: p.span,
        }
    })
}

fn stem(name: &str) -> String {
    std::path::Path::new(name)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(name)
        .to_string()
}
