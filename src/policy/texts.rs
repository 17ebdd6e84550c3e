//! The trace texts of a policy's rules (label, `file:line:col`, the rule as written on one
//! line, its `because`), formatted once per policy on the first decision that needs them
//! instead of on every decision. A decision's trace refers to them by index and copies them
//! only when it is read or printed (docs/performance.md, "Engine").

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
    /// The rule's `because` text, as its trace entry carries it (`None` for `eligible` and
    /// `pregrant` rules, which have none).
    pub because: Option<String>,
}

/// Every traced rule's [`RuleText`], in a fixed order: `eligible` (when the policy has the
/// rule), the `stale` signals, the ladder, the `delivery` rules, the `pregrant` grants. A
/// trace entry names its rule by its index here ([`TraceTexts::stale`], ...).
#[derive(Debug, PartialEq, Eq)]
pub struct TraceTexts {
    rules: Vec<RuleText>,
    /// Index of each rule by (source, start, end) of its span.
    by_span: BTreeMap<(usize, usize, usize), usize>,
    stales: usize,
    ladder: usize,
    delivery: usize,
    grants: usize,
}

impl TraceTexts {
    /// The text of rule `index`.
    pub fn get(&self, index: usize) -> Option<&RuleText> {
        self.rules.get(index)
    }

    /// How many rules the policy traces.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the policy traces no rule (clippy's `len_without_is_empty` asks for it where
    /// the type is public, with `unstable`; nothing in baton calls it).
    #[cfg(feature = "unstable")]
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the `eligible` rule (meaningful when the policy has one).
    pub fn eligible(&self) -> usize {
        0
    }

    /// The index of `stale` signal `i` (policy order).
    pub fn stale(&self, i: usize) -> usize {
        self.stales.saturating_add(i)
    }

    /// The index of ladder rule `i`.
    pub fn ladder(&self, i: usize) -> usize {
        self.ladder.saturating_add(i)
    }

    /// The index of `delivery` rule `i`.
    pub fn delivery(&self, i: usize) -> usize {
        self.delivery.saturating_add(i)
    }

    /// The index of `pregrant` grant `i`.
    pub fn grant(&self, i: usize) -> usize {
        self.grants.saturating_add(i)
    }
}

/// A policy's [`TraceTexts`]; built on first use and shared by the policy's clones.
#[derive(Debug, Clone, Default)]
pub struct RuleTexts(OnceLock<Arc<TraceTexts>>);

impl Policy {
    unstable_pub! {
        /// The trace texts of every rule (formatted once per policy).
        fn trace_texts(&self) -> &Arc<TraceTexts> {
            self.rule_texts.0.get_or_init(|| {
                let text = |span: Span, label: String, because: Option<&String>| RuleText {
                    label,
                    at: self.at(span),
                    when: self.text(span),
                    because: because.cloned(),
                };
                let mut rules: Vec<RuleText> = Vec::new();
                rules.extend(
                    self.eligible
                        .iter()
                        .map(|(s, _)| text(*s, "eligible".to_string(), None)),
                );
                let stales = rules.len();
                rules.extend(
                    self.stales
                        .iter()
                        .map(|s| text(s.span, format!("stale {}", s.name), s.because.as_ref())),
                );
                let ladder = rules.len();
                rules.extend(self.ladder.iter().map(|r| {
                    let label = format!("strategy {}", r.strategy.as_str());
                    text(r.span, label, r.because.as_ref())
                }));
                let delivery = rules.len();
                rules.extend(self.delivery.rules.iter().map(|r| {
                    let mode = if r.off_band { "off_band" } else { "inline" };
                    text(r.span, format!("delivery {mode}"), r.because.as_ref())
                }));
                let grants = rules.len();
                rules.extend(self.pregrant.iter().flat_map(|p| {
                    p.grants.iter().map(|g| {
                        let label = format!("pregrant {}", g.tool.to_lowercase());
                        text(g.span, label, None)
                    })
                }));
                let spans = self
                    .eligible
                    .iter()
                    .map(|(s, _)| *s)
                    .chain(self.stales.iter().map(|s| s.span))
                    .chain(self.ladder.iter().map(|r| r.span))
                    .chain(self.delivery.rules.iter().map(|r| r.span))
                    .chain(
                        self.pregrant
                            .iter()
                            .flat_map(|p| p.grants.iter().map(|g| g.span)),
                    );
                let by_span = spans
                    .enumerate()
                    .map(|(i, s)| ((s.source, s.start, s.end), i))
                    .collect();
                Arc::new(TraceTexts {
                    rules,
                    by_span,
                    stales,
                    ladder,
                    delivery,
                    grants,
                })
            })
        }
    }

}
