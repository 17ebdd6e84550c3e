//! Lints: warnings that ride along with the check (unreachable rules).

use crate::policy::ast::*;
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
