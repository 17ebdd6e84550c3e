//! Warnings for policies that check but cannot do what they say on some threads:
//! - a provider name no provider has (`target.provider == "claud"`): the rule never matches;
//! - off-band delivery to a provider that cannot read files: its agent never sees the
//!   document;
//! - a ladder rung that resumes (`delta_existing`, `full_existing`) or forks natively
//!   (`native_fork`) when there may be no thread: the decision fails at run time;
//! - a `summary` block that includes nothing (often an extending policy's block that meant to
//!   add one rule and dropped every `include` of its base's): every handoff is empty.
//!
//! The guards are found by a small implication test on the conditions: a rule is guarded when
//! its own condition implies the guard (`target.has_thread and ...`), or when a rule above it
//! matches whenever the guard fails (`full_new when not target.has_thread`), through
//! `and`, `or`, `not` and staleness signals.

use super::compose::Merged;
use super::Checker;
use crate::policy::ast::*;
use crate::state::{default_caps, KNOWN_PROVIDERS};
use crate::suggest::did_you_mean;
use std::collections::HashSet;

/// Facts whose values are provider names.
const PROVIDER_FACTS: &[&str] = &[
    "target.provider",
    "request.provider",
    "run.provider",
    "fork.source_provider",
    "thread.providers",
];

/// How deep the implication test follows `stale.NAME` into signal conditions (signals cannot
/// read signals, so one level is all there is; the bound keeps it obviously finite).
const MAX_SIGNAL_DEPTH: usize = 2;

/// Run every trap check on the composed policy.
pub(super) fn check(c: &mut Checker<'_>, merged: &Merged<'_>) {
    unknown_providers(c, merged);
    offband_without_file_read(c, merged);
    resume_without_thread(c, merged);
    summary_includes_nothing(c, merged);
}

/// A `summary` block without an `include` rule selects no item, so every handoff document says
/// "No items from these runs are included". A block replaces its base's whole, so an extending
/// policy that writes a block to add one `exclude` drops every `include` of the base's (issue
/// 27); the warning names the base's block and how to keep it.
fn summary_includes_nothing(c: &mut Checker<'_>, merged: &Merged<'_>) {
    let Some(s) = merged.summary.filter(|s| s.includes.is_empty()) else {
        return;
    };
    match merged.summary_replaced {
        Some(base) => {
            let file = c
                .sources
                .get(base.span.source)
                .map(|src| src.name.clone())
                .unwrap_or_default();
            let n = base.includes.len();
            let rules = if n == 1 { "rule" } else { "rules" };
            c.warn(
                s.span,
                format!(
                    "this `summary` block includes nothing: it replaces the block of `{file}` whole, dropping its {n} `include` {rules}, so every handoff says \"No items from these runs are included\""
                ),
                Some("a block in an extending policy replaces the base's: restate the base's block with your rule added (docs/policy-language.md, \"Adding a rule to the base's summary\")".into()),
            );
        }
        None => c.warn(
            s.span,
            "this `summary` block includes nothing, so every handoff says \"No items from these runs are included\"",
            Some("add `include KIND into SECTION` rules (docs/policy-language.md#summary)".into()),
        ),
    }
}

/// The providers a policy may name: the shipped ones, those its header declares
/// (`known_providers`) and those its `providers` block sets capabilities for.
fn known(merged: &Merged<'_>) -> Vec<String> {
    let mut v: Vec<String> = KNOWN_PROVIDERS.iter().map(|s| s.to_string()).collect();
    let declared = merged
        .known_providers
        .iter()
        .map(|p| p.node.as_str())
        .chain(merged.declared_providers());
    for p in declared {
        if !v.iter().any(|k| k == p) {
            v.push(p.to_string());
        }
    }
    v
}

fn every_condition<'m>(merged: &'m Merged<'_>) -> Vec<&'m Expr> {
    let mut out: Vec<&Expr> = Vec::new();
    out.extend(merged.eligible.map(|e| &e.when));
    out.extend(merged.stales.iter().map(|s| &s.when));
    if let Some(l) = merged.strategy {
        out.extend(l.rules.iter().filter_map(|r| r.when.as_ref()));
    }
    if let Some(s) = merged.summary {
        out.extend(s.includes.iter().filter_map(|r| r.when.as_ref()));
        out.extend(s.excludes.iter().filter_map(|r| r.when.as_ref()));
    }
    if let Some(d) = merged.delivery {
        out.extend(d.rules.iter().filter_map(|r| r.when.as_ref()));
    }
    if let Some(p) = merged.pregrant {
        out.extend(p.grants.iter().filter_map(|g| g.when.as_ref()));
    }
    out
}

fn is_provider_fact(e: &Expr) -> bool {
    matches!(e, Expr::Path(p, _) if PROVIDER_FACTS.contains(&p.as_str()))
}

fn unknown_providers(c: &mut Checker<'_>, merged: &Merged<'_>) {
    let known = known(merged);
    let mut reported: HashSet<(usize, usize)> = HashSet::new();
    let mut found: Vec<(String, Span)> = Vec::new();
    let mut stack: Vec<&Expr> = every_condition(merged);
    while let Some(e) = stack.pop() {
        match e {
            Expr::Cmp(a, _, b, _) => {
                // `target.provider == "x"`, `run.provider in [...]`, `"x" in thread.providers`.
                let names: Option<&Expr> = if is_provider_fact(a) {
                    Some(b)
                } else if is_provider_fact(b) {
                    Some(a)
                } else {
                    None
                };
                if let Some(x) = names {
                    for (name, span) in strings_of(c, x) {
                        if reported.insert((span.source, span.start)) {
                            found.push((name, span));
                        }
                    }
                }
                stack.push(a);
                stack.push(b);
            }
            Expr::Not(x, _) => stack.push(x),
            Expr::And(xs, _) | Expr::Or(xs, _) | Expr::List(xs, _) => stack.extend(xs.iter()),
            Expr::Sum(xs, _) => stack.extend(xs.iter().map(|(_, x)| x)),
            _ => {}
        }
    }
    found.sort_by_key(|(_, s)| (s.source, s.start));
    for (name, span) in found {
        warn_unknown(c, &known, &name, span);
    }
}

/// The string literals an operand stands for, with where each is written: a literal, a list
/// literal, or a `let` holding either.
fn strings_of(c: &Checker<'_>, x: &Expr) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    let mut todo = vec![x];
    let mut seen_lets: HashSet<&str> = HashSet::new();
    while let Some(e) = todo.pop() {
        match e {
            Expr::Str(s, span) => out.push((s.clone(), *span)),
            Expr::List(xs, _) => todo.extend(xs.iter()),
            Expr::Path(p, _) => {
                if let Some(def) = c.let_defs.get(p.as_str()) {
                    if seen_lets.insert(def.name.node.as_str()) {
                        todo.push(&def.value);
                    }
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|(_, s)| (s.source, s.start));
    out
}

fn warn_unknown(c: &mut Checker<'_>, known: &[String], name: &str, span: Span) {
    if known.iter().any(|k| k == name) {
        return;
    }
    let list = known.join(", ");
    let declare = format!("a provider baton does not ship is named in the policy header: `known_providers [\"{name}\"]`");
    let help = match did_you_mean(name, known.iter().map(String::as_str)) {
        Some(s) => format!("did you mean \"{s}\"? (known providers: {list}; {declare})"),
        None => format!("known providers: {list}; {declare}"),
    };
    c.warn(
        span,
        format!("unknown provider \"{name}\": no shipped or declared provider has this name"),
        Some(help),
    );
}

/// What a guard is about.
#[derive(Clone, Copy)]
enum Guard {
    /// `target.has_thread` (a target provider thread exists).
    HasThread,
    /// `target.caps.file_read`.
    FileRead,
    /// `fork.native_possible`.
    NativeFork,
}

impl Guard {
    fn fact(self) -> &'static str {
        match self {
            Guard::HasThread => "target.has_thread",
            Guard::FileRead => "target.caps.file_read",
            Guard::NativeFork => "fork.native_possible",
        }
    }

    /// Whether `e` holding means the guard holds, for the atomic forms.
    fn atom(self, e: &Expr) -> bool {
        match e {
            Expr::Path(p, _) => {
                p == self.fact()
                    // A nullable target thread fact that holds: the thread exists.
                    || (matches!(self, Guard::HasThread) && p == "target.thread.resume_failed")
            }
            Expr::Cmp(a, op, b, _) => {
                let (fact, other) = match (&**a, &**b) {
                    (Expr::Path(p, _), o) => (p.as_str(), o),
                    (o, Expr::Path(p, _)) => (p.as_str(), o),
                    _ => return false,
                };
                if fact == self.fact() {
                    return match op {
                        CmpOp::Eq => matches!(other, Expr::Bool(true, _)),
                        CmpOp::Ne => matches!(other, Expr::Bool(false, _)),
                        _ => false,
                    };
                }
                // `target.thread.status == "active"`, `target.thread.id != null`: a
                // comparison that a missing thread (null) fails.
                matches!(self, Guard::HasThread)
                    && fact.starts_with("target.thread.")
                    && match op {
                        CmpOp::Ne => matches!(other, Expr::Null(_)),
                        CmpOp::NotIn => false,
                        _ => !matches!(other, Expr::Null(_)),
                    }
            }
            _ => false,
        }
    }

    /// Whether the guard failing means `e` holds (for the atomic forms): `not has_thread`.
    fn negated_atom(self, e: &Expr) -> bool {
        match e {
            Expr::Cmp(a, op, b, _) => {
                let (fact, other) = match (&**a, &**b) {
                    (Expr::Path(p, _), o) => (p.as_str(), o),
                    (o, Expr::Path(p, _)) => (p.as_str(), o),
                    _ => return false,
                };
                fact == self.fact()
                    && match op {
                        CmpOp::Eq => matches!(other, Expr::Bool(false, _)),
                        CmpOp::Ne => matches!(other, Expr::Bool(true, _)),
                        _ => false,
                    }
            }
            _ => false,
        }
    }
}

/// Whether `e` holding implies the guard.
fn implies(merged: &Merged<'_>, e: &Expr, g: Guard, depth: usize) -> bool {
    if g.atom(e) {
        return true;
    }
    match e {
        Expr::Bool(false, _) => true,
        Expr::And(xs, _) => xs.iter().any(|x| implies(merged, x, g, depth)),
        Expr::Or(xs, _) => xs.iter().all(|x| implies(merged, x, g, depth)),
        Expr::Not(x, _) => covers_failure(merged, x, g, depth),
        Expr::Path(p, _) => signal_when(merged, p, depth).is_some_and(|ws| {
            !ws.is_empty() && ws.iter().all(|w| implies(merged, w, g, depth.saturating_add(1)))
        }),
        _ => false,
    }
}

/// Whether the guard failing implies that `e` holds (so a rule with `e` matches first).
fn covers_failure(merged: &Merged<'_>, e: &Expr, g: Guard, depth: usize) -> bool {
    if g.negated_atom(e) {
        return true;
    }
    match e {
        Expr::Bool(true, _) => true,
        Expr::Not(x, _) => implies(merged, x, g, depth),
        Expr::Or(xs, _) => xs.iter().any(|x| covers_failure(merged, x, g, depth)),
        Expr::And(xs, _) => xs.iter().all(|x| covers_failure(merged, x, g, depth)),
        Expr::Path(p, _) => signal_when(merged, p, depth).is_some_and(|ws| {
            ws.iter()
                .any(|w| covers_failure(merged, w, g, depth.saturating_add(1)))
        }),
        _ => false,
    }
}

/// The conditions behind `stale` (every signal) or `stale.NAME` (that one), within the
/// depth bound.
fn signal_when<'m>(merged: &'m Merged<'_>, path: &str, depth: usize) -> Option<Vec<&'m Expr>> {
    if depth >= MAX_SIGNAL_DEPTH {
        return None;
    }
    if path == "stale" {
        return Some(merged.stales.iter().map(|s| &s.when).collect());
    }
    let name = path.strip_prefix("stale.")?;
    let s = merged.stales.iter().rev().find(|s| s.name.node == name)?;
    Some(vec![&s.when])
}

/// Whether a rule with condition `when` (`None`: `otherwise`) at position `i` of a
/// first-match list is guarded: its condition implies the guard, or a rule above matches
/// whenever the guard fails.
fn guarded(merged: &Merged<'_>, above: &[Option<&Expr>], when: Option<&Expr>, g: Guard) -> bool {
    when.is_some_and(|w| implies(merged, w, g, 0))
        || above
            .iter()
            .any(|w| w.map(|w| covers_failure(merged, w, g, 0)).unwrap_or(true))
}

fn offband_without_file_read(c: &mut Checker<'_>, merged: &Merged<'_>) {
    let Some(d) = merged.delivery else {
        return;
    };
    let known = known(merged);
    let mut above: Vec<Option<&Expr>> = Vec::new();
    for r in &d.rules {
        if above.iter().any(|w| w.map(Expr::is_literal_true).unwrap_or(true)) {
            break; // unreachable: its own lint
        }
        let when = r.when.as_ref();
        if r.off_band && !guarded(merged, &above, when, Guard::FileRead) {
            match when.and_then(provider_set) {
                Some(set) => {
                    // The policy's `providers` block, else shipped caps, say whether a provider
                    // reads files; a provider baton does not ship (declared in
                    // `known_providers`) cannot unless a state says so. Unknown names have
                    // their own warning.
                    let blind: Vec<String> = set
                        .iter()
                        .filter(|p| known.contains(p))
                        .filter(|p| {
                            !merged.declared_file_read(p).unwrap_or_else(|| {
                                default_caps(p).is_some_and(|caps| caps.file_read)
                            })
                        })
                        .map(|p| format!("`{p}`"))
                        .collect();
                    if !blind.is_empty() {
                        c.warn(
                            r.span,
                            format!(
                                "this rule delivers off-band to {}, which cannot read files: its agent would never see the document",
                                blind.join(", ")
                            ),
                            Some("a provider baton does not ship reads files only when a state's `providers:` entry sets `file_read: true`: add `and target.caps.file_read` to the condition, or deliver inline to it".into()),
                        );
                    }
                }
                None => c.warn(
                    r.span,
                    "this rule can deliver off-band to a provider that cannot read files: its agent would never see the document",
                    Some("add `and target.caps.file_read` to the condition (the default policy's `off_band when target.caps.file_read`), or put `inline when not target.caps.file_read` above it; a state's `providers:` entry can set `file_read: false` for any provider".into()),
                ),
            }
        }
        above.push(when);
    }
}

/// The providers a condition restricts the target to (`target.provider == "x"` or
/// `target.provider in [...]` as a conjunct), if it does.
fn provider_set(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::And(xs, _) => xs.iter().find_map(provider_set),
        Expr::Cmp(a, op, b, _) => {
            let (Expr::Path(p, _), other) = (&**a, &**b) else {
                return None;
            };
            if p != "target.provider" {
                return None;
            }
            match (op, other) {
                (CmpOp::Eq, Expr::Str(s, _)) => Some(vec![s.clone()]),
                (CmpOp::In, Expr::List(xs, _)) => Some(
                    xs.iter()
                        .filter_map(|x| match x {
                            Expr::Str(s, _) => Some(s.clone()),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => None,
            }
        }
        _ => None,
    }
}

fn resume_without_thread(c: &mut Checker<'_>, merged: &Merged<'_>) {
    let Some(l) = merged.strategy else {
        return;
    };
    let mut above: Vec<Option<&Expr>> = Vec::new();
    for r in &l.rules {
        if above.iter().any(|w| w.map(Expr::is_literal_true).unwrap_or(true)) {
            break; // unreachable: its own lint
        }
        let when = r.when.as_ref();
        let name = r.strategy.node.as_str();
        let how = if when.is_some() {
            "add `and target.has_thread` to its condition, or put `full_new when not target.has_thread` above it"
        } else {
            "put `full_new when not target.has_thread` above it"
        };
        match name {
            "delta_existing" | "full_existing"
                if !guarded(merged, &above, when, Guard::HasThread) =>
            {
                c.warn(
                    r.strategy.span,
                    format!("`{name}` may have no thread to resume: nothing guarantees `target.has_thread` here, and the decision fails when the target has no provider thread"),
                    Some(how.to_string()),
                );
            }
            "native_fork" if !guarded(merged, &above, when, Guard::NativeFork) => {
                c.warn(
                    r.strategy.span,
                    "`native_fork` may have no thread to fork: nothing guarantees `fork.native_possible` here, and the decision fails when the thread is not a fork of a run with a provider thread",
                    Some("add `and fork.native_possible` to its condition".into()),
                );
            }
            _ => {}
        }
        above.push(when);
    }
}
