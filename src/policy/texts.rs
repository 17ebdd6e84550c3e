//! The trace texts of a policy's rules (`file:line:col` and the rule as written, on one line),
//! formatted once per policy on the first decision that needs them instead of on every
//! decision (docs/performance.md, "Engine").

use super::ast::Span;
use super::Policy;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The location and one-line text of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleText {
    /// The rule's label in the trace (`stale NAME`, `strategy NAME`, `delivery MODE`,
    /// `pregrant TOOL`, `eligible`).
    pub label: String,
    /// `file:line:col`, as [`Policy::at`] formats it.
    pub at: String,
    /// The rule as written, on one line, as [`Policy::text`] formats it.
    pub when: String,
}

/// Every rule's [`RuleText`], keyed by the rule's span; built on first use and shared by the
/// policy's clones.
#[derive(Debug, Clone, Default)]
pub struct RuleTexts(OnceLock<Arc<BySpan>>);

/// Rule texts by (source, start, end) of the rule's span.
type BySpan = BTreeMap<(usize, usize, usize), RuleText>;

impl Policy {
    /// The trace text of the rule at `span` (formatted once per policy). Spans of the
    /// policy's own rules are cached; any other span is formatted on the spot.
    pub fn rule_text(&self, span: Span) -> std::borrow::Cow<'_, RuleText> {
        let texts = self.rule_texts.0.get_or_init(|| {
            let spans = self
                .eligible
                .iter()
                .map(|(s, _)| (*s, "eligible".to_string()))
                .chain(self.stales.iter().map(|s| (s.span, format!("stale {}", s.name))))
                .chain(
                    self.ladder
                        .iter()
                        .map(|r| (r.span, format!("strategy {}", r.strategy.as_str()))),
                )
                .chain(self.delivery.rules.iter().map(|r| {
                    let mode = if r.off_band { "off_band" } else { "inline" };
                    (r.span, format!("delivery {mode}"))
                }))
                .chain(self.pregrant.iter().flat_map(|p| {
                    p.grants
                        .iter()
                        .map(|g| (g.span, format!("pregrant {}", g.tool.to_lowercase())))
                }));
            Arc::new(
                spans
                    .map(|(s, label)| {
                        let text = RuleText {
                            label,
                            at: self.at(s),
                            when: self.text(s),
                        };
                        ((s.source, s.start, s.end), text)
                    })
                    .collect(),
            )
        });
        match texts.get(&(span.source, span.start, span.end)) {
            Some(t) => std::borrow::Cow::Borrowed(t),
            None => std::borrow::Cow::Owned(RuleText {
                label: String::new(),
                at: self.at(span),
                when: self.text(span),
            }),
        }
    }
}
