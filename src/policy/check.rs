//! The static checker: composes the files of a policy set (`extends`), resolves and types every
//! name, and compiles the rules to [`CExpr`]s that the evaluator runs. Lints ride along as
//! warnings. Nothing is evaluated against a state here.

use super::ast::*;
use super::diag::{Diagnostic, Severity, Source};
use super::{
    CDelivery, CDeliveryRule, CExclude, CExpr, CGrant, CInclude, CLadderRule, CPregrant, CStale,
    CSummary, CTextCut, DegradeStep, Form, Policy, Strategy, SummarySource,
};
use crate::facts::{Fact, Scope, Type, Value, GRANT_TARGETS, STRATEGIES};
use crate::state::{HandoffStrategy, ITEM_KINDS};
use crate::suggest::did_you_mean;
use std::collections::{BTreeMap, HashMap, HashSet};

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
    ("failures", "Known failures"),
    ("subagents", "Subagent results"),
    ("tools", "Tool calls"),
    ("narration", "Recent narration"),
    ("messages", "Conversation"),
    ("handoffs", "Earlier handoffs"),
    ("history", "History"),
];

pub const FORMS: &[&str] = &["full", "text", "line", "path_only", "count", "transcript"];

/// The largest count a policy may write (`turns`, `uses`, `text max`, `budget`,
/// `inline_limit`, `timeout_ms`): what a `u32` holds, far beyond any sensible value, and small
/// enough that no arithmetic on it overflows. docs/limits.md lists it.
pub const MAX_COUNT: i64 = u32::MAX as i64;

/// Unknown names that get a "did you mean" suggestion; later ones get the generic help, so
/// that the cost of suggestions (every name scanned) does not grow with the number of errors.
pub const MAX_SUGGESTIONS: usize = 100;

/// Merged view of a policy set after `extends`: later files override earlier ones by name.
struct Merged<'a> {
    name: Option<&'a Spanned<String>>,
    description: Option<&'a String>,
    template: Option<&'a Spanned<String>>,
    lets: Vec<&'a Let>,
    eligible: Option<&'a Condition>,
    stales: Vec<&'a StaleRule>,
    strategy: Option<&'a Ladder>,
    summary: Option<&'a SummaryBlock>,
    delivery: Option<&'a DeliveryBlock>,
    pregrant: Option<&'a PregrantBlock>,
}

/// Add `items` of a later file to `merged`: one with the name of an item from an earlier file
/// replaces it in place; the others are appended. Names are looked up in an index, so a file
/// of n items costs O(n), not O(n²).
fn override_by_name<'a, T>(
    merged: &mut Vec<&'a T>,
    items: &'a [T],
    name: impl Fn(&T) -> &Spanned<String>,
) {
    // Name -> positions in `merged` of the items of that name (one, but for duplicates
    // within a file, which the checker reports).
    let mut index: HashMap<&'a str, Vec<usize>> = HashMap::new();
    for (i, x) in merged.iter().enumerate() {
        index.entry(name(x).node.as_str()).or_default().push(i);
    }
    for item in items {
        let n = name(item);
        let slot = index.entry(n.node.as_str()).or_default();
        let earlier = slot.iter().copied().find(|&i| {
            merged
                .get(i)
                .is_some_and(|x| name(x).span.source != n.span.source)
        });
        match earlier.and_then(|i| merged.get_mut(i)) {
            Some(x) => *x = item,
            None => {
                slot.push(merged.len());
                merged.push(item);
            }
        }
    }
}

fn merge(files: &[PolicyFile]) -> Merged<'_> {
    let mut m = Merged {
        name: None,
        description: None,
        template: None,
        lets: Vec::new(),
        eligible: None,
        stales: Vec::new(),
        strategy: None,
        summary: None,
        delivery: None,
        pregrant: None,
    };
    for f in files {
        if f.name.is_some() {
            m.name = f.name.as_ref();
        }
        if f.description.is_some() {
            m.description = f.description.as_ref();
        }
        if f.template.is_some() {
            m.template = f.template.as_ref();
        }
        override_by_name(&mut m.lets, &f.lets, |l| &l.name);
        if f.eligible.is_some() {
            m.eligible = f.eligible.as_ref();
        }
        override_by_name(&mut m.stales, &f.stales, |s| &s.name);
        if f.strategy.is_some() {
            m.strategy = f.strategy.as_ref();
        }
        if f.summary.is_some() {
            m.summary = f.summary.as_ref();
        }
        if f.delivery.is_some() {
            m.delivery = f.delivery.as_ref();
        }
        if f.pregrant.is_some() {
            m.pregrant = f.pregrant.as_ref();
        }
    }
    m
}

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
        self.suggestions_left -= 1;
        true
    }

    fn names_in(&self, ctx: Ctx) -> Vec<String> {
        let mut v: Vec<String> = Fact::ALL
            .iter()
            .filter(|d| ctx.allows(d.scope))
            .map(|d| d.name.to_string())
            .collect();
        v.extend(self.lets.keys().cloned());
        if ctx.stale() {
            v.push("stale".into());
            v.extend(self.signals.iter().map(|s| format!("stale.{s}")));
        }
        v
    }

    fn resolve(&mut self, path: &str, span: Span, ctx: Ctx) -> Option<(CExpr, Ty)> {
        if let Some((v, t, _)) = self.lets.get(path).cloned() {
            self.used_lets.insert(path.to_string());
            return Some((
                CExpr::Let(path.to_string(), v),
                Ty {
                    ty: t,
                    nullable: false,
                },
            ));
        }
        if path == "stale" {
            if ctx.stale() {
                self.observed_any_stale = true;
                return Some((
                    CExpr::AnyStale,
                    Ty {
                        ty: Type::Bool,
                        nullable: false,
                    },
                ));
            }
            self.err(
                span,
                format!("`stale` cannot be read {}", ctx.what()),
                Some("`stale` is known only after every staleness signal ran: read it in `strategy`, `delivery` or `pregrant`".into()),
            );
            return None;
        }
        if let Some(sig) = path.strip_prefix("stale.") {
            if let Some(&i) = self.signal_index.get(sig) {
                if ctx.stale() {
                    self.observed_signals.insert(sig.to_string());
                    return Some((
                        CExpr::Signal(i, sig.to_string()),
                        Ty {
                            ty: Type::Bool,
                            nullable: false,
                        },
                    ));
                }
                self.err(
                    span,
                    format!("`{path}` cannot be read {}", ctx.what()),
                    Some(
                        "staleness signals are known in `strategy`, `delivery` and `pregrant`"
                            .into(),
                    ),
                );
                return None;
            }
            // Suggestions scan every name: only the first errors get them, so that a policy
            // with many errors still checks in linear time.
            let help = if self.take_suggestion() {
                did_you_mean(sig, self.signals.iter().map(|s| s.as_str()))
                    .map(|s| format!("did you mean `stale.{s}`?"))
                    .or_else(|| {
                        Some(format!(
                            "the policy's signals are: {}",
                            if self.signals.is_empty() {
                                "(none)".to_string()
                            } else {
                                self.signals.join(", ")
                            }
                        ))
                    })
            } else {
                None
            };
            self.err(span, format!("unknown staleness signal `{sig}`"), help);
            return None;
        }
        if let Some(def) = Fact::by_name(path) {
            if !ctx.allows(def.scope) {
                self.err(
                    span,
                    format!("`{path}` cannot be read {}", ctx.what()),
                    Some(format!("`{path}` is available {}", def.scope.describe())),
                );
                return None;
            }
            return Some((
                CExpr::Fact(def.fact),
                Ty {
                    ty: def.ty,
                    nullable: def.nullable,
                },
            ));
        }
        if self.let_failed.contains(path) {
            return None; // its own error is already reported
        }
        let suggest = if self.take_suggestion() {
            let names = self.names_in(ctx);
            did_you_mean(path, names.iter().map(|s| s.as_str()))
                .map(|s| format!("did you mean `{s}`?"))
        } else {
            None
        };
        let help = suggest.or_else(|| Some("docs/facts.md lists every fact".to_string()));
        let what = if path.contains('.') { "fact" } else { "name" };
        self.err(span, format!("unknown {what} `{path}`"), help);
        None
    }

    /// Type-check and compile `e`.
    fn expr(&mut self, e: &Expr, ctx: Ctx) -> Option<(CExpr, Ty)> {
        let lit = |ty| Ty {
            ty,
            nullable: false,
        };
        match e {
            Expr::Int(i, _) => Some((CExpr::Const(Value::Int(*i)), lit(Type::Int))),
            Expr::Str(s, _) => Some((CExpr::Const(Value::Str(s.clone().into())), lit(Type::Str))),
            Expr::Bool(b, _) => Some((CExpr::Const(Value::Bool(*b)), lit(Type::Bool))),
            Expr::Null(_) => Some((
                CExpr::Const(Value::Null),
                Ty {
                    ty: Type::Null,
                    nullable: true,
                },
            )),
            Expr::Path(p, span) => self.resolve(p, *span, ctx),
            Expr::List(xs, span) => {
                let mut elem: Option<Type> = None;
                let mut out = Vec::new();
                let mut ok = true;
                for x in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) => {
                            let base = match t.ty {
                                Type::Enum(_) => Type::Str,
                                other => other,
                            };
                            match (elem, base) {
                                (None, b) => elem = Some(b),
                                (Some(a), b) if a == b => {}
                                (Some(a), b) => {
                                    self.err(
                                        x.span(),
                                        format!(
                                            "a list holds values of one type: this is {}, earlier ones are {}",
                                            b.name(),
                                            a.name()
                                        ),
                                        None,
                                    );
                                    ok = false;
                                }
                            }
                            out.push(c);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                let ty = match elem {
                    None => Type::EmptyList,
                    Some(Type::Int) => Type::IntList,
                    Some(Type::Str) => Type::StrList,
                    Some(other) => {
                        self.err(
                            *span,
                            format!("lists hold strings or ints, not {}", other.name()),
                            None,
                        );
                        return None;
                    }
                };
                Some((CExpr::List(out), lit(ty)))
            }
            Expr::Not(x, _) => {
                let (c, t) = self.expr(x, ctx)?;
                self.want_bool(x, t, "`not`")?;
                Some((CExpr::Not(Box::new(c)), lit(Type::Bool)))
            }
            Expr::And(xs, _) | Expr::Or(xs, _) => {
                let word = if matches!(e, Expr::And(..)) {
                    "`and`"
                } else {
                    "`or`"
                };
                let mut out = Vec::new();
                let mut ok = true;
                for x in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) => {
                            if self.want_bool(x, t, word).is_none() {
                                ok = false;
                            }
                            out.push(c);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Some((
                    if matches!(e, Expr::And(..)) {
                        CExpr::And(out)
                    } else {
                        CExpr::Or(out)
                    },
                    lit(Type::Bool),
                ))
            }
            Expr::Sum(xs, _) => {
                let mut out = Vec::new();
                let mut ok = true;
                for (neg, x) in xs {
                    match self.expr(x, ctx) {
                        Some((c, t)) if t.ty == Type::Int => out.push((*neg, c)),
                        Some((_, t)) => {
                            self.err(
                                x.span(),
                                format!("`+` and `-` need ints, but this is {}", t.ty.name()),
                                None,
                            );
                            ok = false;
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Some((
                    CExpr::Sum(out),
                    Ty {
                        ty: Type::Int,
                        nullable: true,
                    },
                ))
            }
            Expr::Cmp(a, op, b, span) => {
                let ra = self.expr(a, ctx);
                let rb = self.expr(b, ctx);
                let ((ca, ta), (cb, tb)) = (ra?, rb?);
                match op {
                    CmpOp::Eq | CmpOp::Ne => {
                        if !comparable(ta.ty, tb.ty) {
                            self.err(
                                *span,
                                format!("cannot compare {} with {}", ta.ty.name(), tb.ty.name()),
                                None,
                            );
                            return None;
                        }
                        if tb.ty == Type::Null && !ta.nullable {
                            self.warn(
                                b.span(),
                                format!(
                                    "`{}` is never null, so this comparison is constant",
                                    show(a)
                                ),
                                None,
                            );
                        }
                        self.check_enum_literal(ta.ty, b);
                        self.check_enum_literal(tb.ty, a);
                    }
                    CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                        for (x, t) in [(a, ta), (b, tb)] {
                            if t.ty != Type::Int {
                                self.err(
                                    x.span(),
                                    format!(
                                        "`{}` needs ints, but `{}` is {}",
                                        op.as_str(),
                                        show(x),
                                        t.ty.name()
                                    ),
                                    None,
                                );
                                return None;
                            }
                        }
                    }
                    CmpOp::In | CmpOp::NotIn => {
                        let Some(elem) = tb.ty.element() else {
                            self.err(
                                b.span(),
                                format!(
                                    "`{}` needs a list on its right, but this is {}",
                                    op.as_str(),
                                    tb.ty.name()
                                ),
                                Some("write a list: `x in [\"a\", \"b\"]`".into()),
                            );
                            return None;
                        };
                        if elem != Type::Null && !comparable(ta.ty, elem) {
                            self.err(
                                *span,
                                format!("cannot look for {} in a {}", ta.ty.name(), tb.ty.name()),
                                None,
                            );
                            return None;
                        }
                        if let (Type::Enum(values), Expr::List(xs, _)) = (ta.ty, &**b) {
                            for x in xs {
                                self.check_enum_value(values, x, a);
                            }
                        }
                        if let (Type::Enum(values), CExpr::Let(name, Value::List(vs))) =
                            (ta.ty, &cb)
                        {
                            for v in vs {
                                if let Value::Str(s) = v {
                                    if !values.contains(&s.as_ref()) {
                                        self.err(
                                            b.span(),
                                            format!(
                                                "`{name}` holds \"{s}\", which `{}` never is",
                                                show(a)
                                            ),
                                            Some(format!("values: {}", values.join(", "))),
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
                Some((CExpr::Cmp(Box::new(ca), *op, Box::new(cb)), lit(Type::Bool)))
            }
        }
    }

    fn check_enum_literal(&mut self, ty: Type, other: &Expr) {
        if let (Type::Enum(values), Expr::Str(..)) = (ty, other) {
            self.check_enum_value(values, other, other);
        }
    }

    fn check_enum_value(&mut self, values: &'static [&'static str], lit: &Expr, subject: &Expr) {
        if let Expr::Str(s, span) = lit {
            if !values.contains(&s.as_str()) {
                let help = help(s, values, "values", '"');
                let about = if std::ptr::eq(lit, subject) {
                    "this value".to_string()
                } else {
                    format!("`{}`", show(subject))
                };
                self.err(
                    *span,
                    format!("\"{s}\" is not a possible value of {about}"),
                    help,
                );
            }
        }
    }

    fn want_bool(&mut self, x: &Expr, t: Ty, what: &str) -> Option<()> {
        if t.ty == Type::Bool {
            Some(())
        } else {
            self.err(
                x.span(),
                format!("{what} needs a bool, but `{}` is {}", show(x), t.ty.name()),
                match t.ty {
                    Type::Int => Some(format!("compare it: `{} > 0`", show(x))),
                    Type::Str | Type::Enum(_) => {
                        Some(format!("compare it: `{} == \"...\"`", show(x)))
                    }
                    _ => None,
                },
            );
            None
        }
    }

    fn condition(&mut self, e: &Expr, ctx: Ctx) -> Option<CExpr> {
        let (c, t) = self.expr(e, ctx)?;
        if t.ty != Type::Bool {
            self.err(
                e.span(),
                format!(
                    "a `when` condition must be a bool, but `{}` is {}",
                    show(e),
                    t.ty.name()
                ),
                None,
            );
            return None;
        }
        Some(c)
    }

    /// Report every name defined twice in one file.
    fn no_duplicates<'n>(
        &mut self,
        names: impl Iterator<Item = &'n Spanned<String>>,
        describe: impl Fn(&str) -> String,
    ) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for n in names {
            if let Some(prev) = seen.insert(n.node.as_str(), n.span) {
                let msg = format!(
                    "{} is defined twice in this file (first at line {})",
                    describe(&n.node),
                    prev.line
                );
                self.err(n.span, msg, None);
            }
        }
    }

    /// Check an optional `when`: `Ok(None)` for an unconditional rule, `Err` when it does
    /// not check (the diagnostic is already recorded).
    fn optional_condition(&mut self, when: Option<&Expr>, ctx: Ctx) -> Result<Option<CExpr>, ()> {
        match when {
            None => Ok(None),
            Some(w) => self.condition(w, ctx).map(Some).ok_or(()),
        }
    }

    /// Resolve `let name` (already resolved, or now); false when it is not a `let` or does not
    /// check. Iterative (an explicit stack, not one call per link), so a chain of any length
    /// resolves in constant stack space and linear time.
    fn resolve_let(&mut self, name: &str) -> bool {
        if self.lets.contains_key(name) {
            return true;
        }
        let Some(&key) = self.let_defs.get_key_value(name).map(|(k, _)| k) else {
            return false;
        };
        if self.let_failed.contains(key) {
            return false;
        }
        let frame = |key: &'a str, def: &'a Let| {
            let mut deps = Vec::new();
            def.value.paths(&mut deps);
            LetFrame { key, deps, next: 0 }
        };
        let Some(&def) = self.let_defs.get(key) else {
            return false;
        };
        let mut stack = vec![frame(key, def)];
        // Position of each `let` on the stack, to report a cycle.
        let mut on_stack: HashMap<&'a str, usize> = HashMap::from([(key, 0)]);
        while let Some(top) = stack.last_mut() {
            let Some((path, span)) = top.deps.get(top.next).cloned() else {
                // Every name the value reads is resolved: compute it.
                let k = top.key;
                stack.pop();
                on_stack.remove(k);
                let def = self.let_defs.get(k).copied();
                match def.and_then(|d| self.constant(&d.value).map(|v| (v, d.name.span))) {
                    Some(((v, t), span)) => {
                        self.lets.insert(k.to_string(), (v, t, span));
                    }
                    None => self.fail_lets(k, &mut stack),
                }
                continue;
            };
            top.next += 1;
            let top_key = top.key;
            if self.lets.contains_key(path.as_str()) {
                continue;
            }
            let Some((&dep, &dep_def)) = self.let_defs.get_key_value(path.as_str()) else {
                self.err(
                    span,
                    format!("`let` values are constants; `{path}` is not a constant"),
                    Some("a `let` holds a number, string, bool or list; use facts in rules".into()),
                );
                self.fail_lets(top_key, &mut stack);
                continue;
            };
            if self.let_failed.contains(dep) {
                // Already reported where that `let` is defined.
                self.fail_lets(top_key, &mut stack);
                continue;
            }
            if let Some(&i) = on_stack.get(dep) {
                let mut chain: Vec<&str> = stack.iter().skip(i).map(|f| f.key).collect();
                chain.push(dep);
                self.err(
                    span,
                    format!("`let {dep}` depends on itself: {}", chain.join(" -> ")),
                    None,
                );
                self.let_failed.insert(dep);
                self.fail_lets(top_key, &mut stack);
                continue;
            }
            on_stack.insert(dep, stack.len());
            stack.push(frame(dep, dep_def));
        }
        self.lets.contains_key(key)
    }

    /// `key` does not check, and neither does any `let` waiting for it on `stack` (each of
    /// them reads the one above it); the diagnostic is already recorded.
    fn fail_lets(&mut self, key: &'a str, stack: &mut Vec<LetFrame<'a>>) {
        self.let_failed.insert(key);
        for f in stack.drain(..) {
            self.let_failed.insert(f.key);
        }
    }

    /// The value of a `let` whose names are all resolved: only literals and other lets.
    fn constant(&mut self, e: &Expr) -> Option<(Value, Type)> {
        let (c, t) = self.expr(e, Ctx::Let)?;
        let v = super::eval_const(&c);
        Some((v, t.ty))
    }
}

/// A `let` being resolved: the names its value reads, and how many of them are resolved.
struct LetFrame<'a> {
    key: &'a str,
    deps: Vec<(String, Span)>,
    next: usize,
}

/// The unreachable-rule lint of a first-match list (the ladder, delivery): after a rule that
/// always matches (`otherwise`, or `when true`), every later rule is dead.
#[derive(Default)]
struct FirstMatch {
    unconditional: Option<Span>,
}

impl FirstMatch {
    fn visit(&mut self, c: &mut Checker<'_>, span: Span, when: Option<&Expr>) {
        if let Some(prev) = self.unconditional {
            c.warn(
                span,
                format!(
                    "unreachable: the rule at line {} always matches first",
                    prev.line
                ),
                Some("remove this rule or make the earlier one conditional".into()),
            );
        } else if when.map(|w| w.is_literal_true()).unwrap_or(true) {
            self.unconditional = Some(span);
        }
    }
}

/// Help for an unknown name: "did you mean `x`? (LABEL: a, b)" when one is close, else the list.
fn help(name: &str, candidates: &[&str], label: &str, quote: char) -> Option<String> {
    let list = format!("{label}: {}", candidates.join(", "));
    Some(match did_you_mean(name, candidates.iter().copied()) {
        Some(s) => format!("did you mean {quote}{s}{quote}? ({list})"),
        None => list,
    })
}

fn comparable(a: Type, b: Type) -> bool {
    a == b
        || (a.is_stringy() && b.is_stringy())
        || a == Type::Null
        || b == Type::Null
        || (a.element().is_some() && b.element().is_some())
}

/// The source text of an expression is not kept; show a compact rendering instead.
fn show(e: &Expr) -> String {
    match e {
        Expr::Int(i, _) => i.to_string(),
        Expr::Str(s, _) => format!("{s:?}"),
        Expr::Bool(b, _) => b.to_string(),
        Expr::Null(_) => "null".into(),
        Expr::Path(p, _) => p.clone(),
        Expr::List(..) => "[...]".into(),
        Expr::Not(x, _) => format!("not {}", show(x)),
        Expr::And(..) => "(... and ...)".into(),
        Expr::Or(..) => "(... or ...)".into(),
        Expr::Cmp(a, op, b, _) => format!("{} {} {}", show(a), op.as_str(), show(b)),
        Expr::Sum(..) => "(... + ...)".into(),
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
    let mut ladder = Vec::new();
    match merged.strategy {
        None => {
            let span = merged.name.map(|n| n.span).unwrap_or(Span {
                source: sources.len().saturating_sub(1),
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
                first_match.visit(&mut c, r.span, r.when.as_ref());
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

    // Summary.
    let summary = merged.summary.map(|s| compile_summary(&mut c, s));

    // Delivery.
    let mut delivery = CDelivery {
        rules: Vec::new(),
        inline_limit: 500,
        span: None,
    };
    if let Some(d) = merged.delivery {
        let mut first_match = FirstMatch::default();
        for r in &d.rules {
            first_match.visit(&mut c, r.span, r.when.as_ref());
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

    // Pre-grant.
    let pregrant = merged.pregrant.map(|p| {
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
    });

    // Lints.
    for l in &merged.lets {
        if !c.used_lets.contains(&l.name.node) {
            c.warn(
                l.name.span,
                format!("unused `let {}`", l.name.node),
                Some("remove it or use it in a rule".into()),
            );
        }
    }
    if !c.observed_any_stale {
        for s in &merged.stales {
            if !c.observed_signals.contains(&s.name.node) {
                c.warn(s.name.span, format!("staleness signal `{}` cannot change any decision: no rule reads `stale` or `stale.{}`", s.name.node, s.name.node), Some("read `stale` in the strategy ladder, e.g. `full_new when stale`".into()));
            }
        }
    }

    let errors = c.diags.iter().any(|d| d.is_error());
    let diags = std::mem::take(&mut c.diags);
    if errors {
        let mut diags = diags;
        // Errors first, in source order; warnings after.
        diags.sort_by_key(|d| (!d.is_error(), d.file.clone(), d.line, d.col));
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
        warnings: diags,
        sources,
    })
}

fn stem(name: &str) -> String {
    std::path::Path::new(name)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(name)
        .to_string()
}

fn compile_summary(c: &mut Checker<'_>, s: &SummaryBlock) -> CSummary {
    let ctx = Ctx::Summary;
    let mut sections: Vec<(String, String)> = Vec::new();
    for d in &s.sections {
        if sections.iter().any(|(n, _)| *n == d.name.node) {
            c.err(
                d.name.span,
                format!("section `{}` is declared twice", d.name.node),
                None,
            );
            continue;
        }
        sections.push((d.name.node.clone(), d.title.clone()));
    }
    let known_section = |name: &str, sections: &[(String, String)]| {
        BUILTIN_SECTIONS.iter().any(|(n, _)| *n == name) || sections.iter().any(|(n, _)| n == name)
    };
    let kind_ok = |c: &mut Checker<'_>, k: &Spanned<String>| -> bool {
        if ITEM_KINDS.contains(&k.node.as_str()) {
            return true;
        }
        let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
        c.err(k.span, format!("unknown item kind `{}`", k.node), help);
        false
    };
    let mut includes = Vec::new();
    for r in &s.includes {
        if !kind_ok(c, &r.kind) {
            continue;
        }
        if r.kind.node == "reasoning" {
            c.err(r.kind.span, "hidden reasoning can never be included in a handoff", Some("reasoning is the provider's private chain of thought; seed 000 forbids passing it on, so baton excludes it under every policy".into()));
            continue;
        }
        if !known_section(&r.section.node, &sections) {
            let names = BUILTIN_SECTIONS
                .iter()
                .map(|(n, _)| *n)
                .chain(sections.iter().map(|(n, _)| n.as_str()));
            let help = did_you_mean(&r.section.node, names)
                .map(|s| format!("did you mean `{s}`?"))
                .or_else(|| {
                    Some(format!(
                        "declare it with `section {} \"Title\"`",
                        r.section.node
                    ))
                });
            c.err(
                r.section.span,
                format!("unknown section `{}`", r.section.node),
                help,
            );
            continue;
        }
        let form = match &r.form {
            None => Form::Full,
            Some(f) => match Form::parse(&f.node) {
                Some(x) => x,
                None => {
                    let help = help(&f.node, FORMS, "forms", '`');
                    c.err(f.span, format!("unknown form `{}`", f.node), help);
                    continue;
                }
            },
        };
        let Ok(when) = c.optional_condition(r.when.as_ref(), ctx) else {
            continue;
        };
        includes.push(CInclude {
            kind: r.kind.node.clone(),
            section: r.section.node.clone(),
            form,
            when,
            span: r.span,
        });
    }
    let mut excludes = Vec::new();
    for r in &s.excludes {
        if !kind_ok(c, &r.kind) {
            continue;
        }
        let Ok(when) = c.optional_condition(r.when.as_ref(), ctx) else {
            continue;
        };
        let reason = r
            .because
            .clone()
            .unwrap_or_else(|| format!("excluded by the rule at {}", super::at(c.sources, r.span)));
        excludes.push(CExclude {
            kind: r.kind.node.clone(),
            when,
            reason,
            span: r.span,
        });
    }
    let text_max = s.text_max.as_ref().and_then(|t| {
        c.in_range(
            t,
            "text max",
            4,
            MAX_COUNT,
            Some("the limit counts characters, and 3 of them go to `...`"),
        )
        .and_then(|n| usize::try_from(n).ok())
    });
    let budget = s.budget.as_ref().and_then(|b| {
        c.in_range(&b.chars, "budget", 1, MAX_COUNT, None)
            .and_then(|n| usize::try_from(n).ok())
            .map(|n| (n, b.newest_first))
    });
    let source = match &s.source {
        None | Some(SourceDecl::Deterministic(_)) => SummarySource::Deterministic,
        Some(SourceDecl::Command {
            span,
            command,
            timeout_ms,
        }) => {
            let t = match timeout_ms {
                Some(t) => c.in_range(t, "timeout_ms", 1, MAX_COUNT, None).unwrap_or(1),
                None => 30_000,
            };
            if command.trim().is_empty() {
                c.err(*span, "the summarizer command is empty", None);
            }
            SummarySource::Command {
                command: command.clone(),
                timeout_ms: u64::try_from(t).unwrap_or(1),
            }
        }
    };
    let mut text_cuts = Vec::new();
    if let (Some(n), Some(t)) = (text_max, &s.text_max) {
        text_cuts.push(CTextCut {
            cut: crate::cut::Cut::Compact(n),
            kind: None,
            section: None,
            strict: false,
            span: t.span,
        });
    }
    for r in &s.text_cuts {
        if let Some(cut) = compile_text_cut(c, r, &sections) {
            text_cuts.push(cut);
        }
    }
    let document_max = match &s.document_max {
        Some(d) if d.node < 1 => {
            c.err(d.span, "`document max` must be at least 1 character", None);
            None
        }
        Some(d) if d.node > MAX_COUNT => {
            c.in_range(d, "document max", 1, MAX_COUNT, None);
            None
        }
        Some(d) => {
            let n = usize::try_from(d.node).unwrap_or(usize::MAX);
            if n < super::MUST_KEEP_FLOOR {
                c.warn(
                    d.span,
                    format!(
                        "a document budget of {n} characters cannot hold the must-keep items"
                    ),
                    Some(format!(
                        "the latest user message, open questions and approvals and the last failing command are never cut; leave them at least {} characters",
                        super::MUST_KEEP_FLOOR
                    )),
                );
            }
            Some(n)
        }
        None => None,
    };
    if let Some(b) = &s.budget {
        let chars = usize::try_from(b.chars.node).unwrap_or(0);
        if (1..super::MUST_KEEP_FLOOR).contains(&chars) {
            c.warn(
                b.span,
                format!(
                    "a budget of {} characters cannot hold the must-keep items",
                    b.chars.node
                ),
                Some(format!(
                    "the latest user message, open questions and approvals and the last failing command are never cut; leave them at least {} characters",
                    super::MUST_KEEP_FLOOR
                )),
            );
        }
    }
    let mut degrade = Vec::new();
    for d in &s.degrade {
        let kind = |c: &mut Checker<'_>, k: &Spanned<String>| -> bool {
            if ITEM_KINDS.contains(&k.node.as_str()) {
                return true;
            }
            let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
            c.err(k.span, format!("unknown item kind `{}`", k.node), help);
            false
        };
        let step = match &d.node {
            DegradeDecl::DropOldestRuns => Some(DegradeStep::DropOldestRuns),
            DegradeDecl::Drop(k) => kind(c, k).then(|| DegradeStep::Drop(k.node.clone())),
            DegradeDecl::Paths(k) if k.node != "file_change" => {
                c.err(
                    k.span,
                    "only `file_change` items can be listed as paths",
                    Some("write `degrade paths file_change`".into()),
                );
                None
            }
            DegradeDecl::Paths(k) => Some(DegradeStep::Paths(k.node.clone())),
            DegradeDecl::Tail(_, n) | DegradeDecl::Shorten(n) if *n < 1 => {
                c.err(
                    d.span,
                    "a degradation step keeps at least 1 character",
                    None,
                );
                None
            }
            DegradeDecl::Tail(_, n) | DegradeDecl::Shorten(n) if *n > MAX_COUNT => {
                c.err(
                    d.span,
                    format!(
                        "a degradation step of {n} characters is out of range: it must be between 1 and {MAX_COUNT}"
                    ),
                    None,
                );
                None
            }
            DegradeDecl::Tail(k, n) => kind(c, k)
                .then(|| DegradeStep::Tail(k.node.clone(), usize::try_from(*n).unwrap_or(0))),
            DegradeDecl::Shorten(n) => Some(DegradeStep::Shorten(
                usize::try_from(*n).unwrap_or(usize::MAX),
            )),
        };
        degrade.extend(step);
    }
    CSummary {
        text_max,
        text_cuts,
        document_max,
        degrade,
        sections,
        includes,
        excludes,
        budget,
        source,
        span: s.span,
    }
}

/// Compile one `text FORM [N] [for KIND] [in SECTION] [strict]` rule.
fn compile_text_cut(
    c: &mut Checker<'_>,
    r: &TextCutDecl,
    sections: &[(String, String)],
) -> Option<CTextCut> {
    use crate::cut::Cut;
    let n = match (&r.chars, r.form.as_str()) {
        (Some(n), "whole") => {
            c.err(
                n.span,
                "`text whole` takes no number",
                Some("`whole` never cuts; write `text head N` to cut".into()),
            );
            return None;
        }
        (None, "whole") => 0,
        (None, form) => {
            c.err(
                r.span,
                format!("`text {form}` needs a number of characters"),
                Some(format!("for example `text {form} 2000`")),
            );
            return None;
        }
        (Some(n), "compact") if n.node < 4 => {
            c.err(
                n.span,
                "`text compact` must be at least 4 (3 characters go to `...`)",
                None,
            );
            return None;
        }
        (Some(n), _) if n.node < 1 => {
            c.err(n.span, "a text rule keeps at least 1 character", None);
            return None;
        }
        (Some(n), form) => {
            let what = format!("text {form}");
            let n = c.in_range(n, &what, 1, MAX_COUNT, None)?;
            usize::try_from(n).unwrap_or(usize::MAX)
        }
    };
    let cut = match r.form.as_str() {
        "whole" => Cut::Whole,
        "head" => Cut::Head(n),
        "tail" => Cut::Tail(n),
        "head_tail" => Cut::HeadTail(n),
        _ => Cut::Compact(n),
    };
    if let Some(k) = &r.kind {
        if !ITEM_KINDS.contains(&k.node.as_str()) {
            let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
            c.err(k.span, format!("unknown item kind `{}`", k.node), help);
            return None;
        }
    }
    if let Some(sec) = &r.section {
        let known = BUILTIN_SECTIONS.iter().any(|(n, _)| *n == sec.node)
            || sections.iter().any(|(n, _)| *n == sec.node);
        if !known {
            let names = BUILTIN_SECTIONS
                .iter()
                .map(|(n, _)| *n)
                .chain(sections.iter().map(|(n, _)| n.as_str()));
            let help = did_you_mean(&sec.node, names).map(|s| format!("did you mean `{s}`?"));
            c.err(sec.span, format!("unknown section `{}`", sec.node), help);
            return None;
        }
    }
    Some(CTextCut {
        cut,
        kind: r.kind.as_ref().map(|k| k.node.clone()),
        section: r.section.as_ref().map(|s| s.node.clone()),
        strict: r.strict,
        span: r.span,
    })
}
