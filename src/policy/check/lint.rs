//! Lints: warnings that ride along with the check (unreachable rules, unused `let`s,
//! staleness signals no rule reads).

use crate::policy::ast::*;
use super::compose::Merged;
use super::Checker;

/// The unreachable-rule lint of a first-match list (the ladder, delivery): after a rule that
/// always matches (`otherwise`, or `when true`), every later rule is dead.
#[derive(Default)]
pub(super) struct FirstMatch {
    unconditional: Option<Span>,
}

impl FirstMatch {
    pub(super) fn visit(&mut self, c: &mut Checker<'_>, span: Span, when: Option<&Expr>) {
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

/// The lints of the composed policy once every rule is checked: unused `let`s, and staleness
/// signals that no rule reads.
pub(super) fn unused(c: &mut Checker<'_>, merged: &Merged<'_>) {
    for l in &merged.lets {
        // A `let` that does not check (a cycle, a fact in its value) has its error already:
        // a warning per link of a broken chain would bury it (issue 27).
        let name = l.name.node.as_str();
        if !c.used_lets.contains(name) && !c.let_failed.contains(name) {
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
}
