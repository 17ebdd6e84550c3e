//! Rule coverage: which rules of a policy the evaluated decisions exercised.
//!
//! Public entry point: [`Coverage`]. A rule is identified by its policy file, its kind and its
//! index among the rules of that kind in that file (plus a readable label), never by a line
//! number, so reformatting a policy cannot change the figures.
//!
//! Semantics: every evaluation of a rule is recorded as true (it held) or false (it did not).
//! A rule is **covered** when it held at least once: the signal was raised, the ladder rule
//! decided, the include or exclude rule took an item, the delivery or pre-grant rule chose.
//! **Branch** coverage is stricter: a rule with a condition must also have been evaluated
//! false at least once; a rule without one (`otherwise`, an unconditional include) only needs
//! to hold. Rules that were never reached are `never`. The `eligible` rule is true when it
//! admitted a run and false when it left one out.

use crate::decision::{Decision, RuleOutcome};
use crate::facts::Value;
use crate::policy::ast::Span;
use crate::policy::Policy;
use crate::select::{RuleHit, SummaryRuleKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// The kinds of rule coverage tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// The `eligible` rule.
    Eligible,
    /// A `stale` signal.
    Stale,
    /// A rung of the `strategy` ladder.
    Strategy,
    /// A summary `include` rule.
    Include,
    /// A summary `exclude` rule.
    Exclude,
    /// A `delivery` rule.
    Delivery,
    /// A `pregrant` rule.
    Pregrant,
    /// A policy's own redaction rule (`redact NAME pattern "..."`): covered when it redacted
    /// something in a handoff.
    Redact,
}

/// A rule's identity: file, kind and index among that file's rules of the kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RuleId {
    /// The policy file the rule is in.
    pub file: String,
    /// Which block the rule is in.
    pub kind: RuleKind,
    /// Its index among the rules of its kind in that file.
    pub index: usize,
}

/// What coverage knows about one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleCoverage {
    #[serde(flatten)]
    /// The rule.
    pub id: RuleId,
    /// `stale model_changed`, `strategy full_new`, `include file_change into files`, ...
    pub label: String,
    /// The rule's line in its file (where it was first seen; shown, never part of its
    /// identity).
    pub line: usize,
    /// Whether the rule has a condition (it can be false).
    pub conditional: bool,
    #[serde(rename = "true")]
    /// Evaluations in which its condition held.
    pub true_count: u64,
    #[serde(rename = "false")]
    /// Evaluations in which it did not hold.
    pub false_count: u64,
}

impl RuleCoverage {
    /// Held at least once.
    pub fn covered(&self) -> bool {
        self.true_count > 0
    }
    /// Every outcome the rule can take was seen.
    pub fn branch_covered(&self) -> bool {
        self.true_count > 0 && (!self.conditional || self.false_count > 0)
    }
    /// `true+false`, `true only`, `false only` or `never`.
    pub fn status(&self) -> &'static str {
        match (self.true_count > 0, self.false_count > 0) {
            (true, true) => "true+false",
            (true, false) => "true only",
            (false, true) => "false only",
            (false, false) => "never",
        }
    }
}

/// Coverage of one policy file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileCoverage {
    /// The policy file.
    pub file: String,
    /// Its rules, in policy order.
    pub rules: Vec<RuleCoverage>,
    /// Rules evaluated at least once.
    pub covered: usize,
    /// Rules in the file.
    pub total: usize,
    /// Covered rules in percent (100 for a file without rules).
    pub percent: f64,
    /// Branches (held, not held) seen, in percent of all.
    pub branch_percent: f64,
}

/// Coverage gathered over many decisions, possibly of several policies.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    rules: BTreeMap<RuleId, RuleCoverage>,
    /// Per policy sha: trace location (`file:line:col`) -> rule.
    by_at: BTreeMap<String, BTreeMap<String, RuleId>>,
    /// Per policy sha: summary rule (kind, index in the compiled block) -> rule.
    summary: BTreeMap<String, BTreeMap<(SummaryRuleKind, usize), RuleId>>,
}

impl Coverage {
    /// An empty coverage.
    pub fn new() -> Coverage {
        Coverage::default()
    }

    /// Make every rule of `policy` known (so that rules never reached show as `never`).
    pub fn register(&mut self, policy: &Policy) {
        if self.by_at.contains_key(&policy.sha256) {
            return;
        }
        let mut counts: BTreeMap<(String, RuleKind), usize> = BTreeMap::new();
        let mut by_at = BTreeMap::new();
        let mut summary = BTreeMap::new();
        let mut add =
            |this: &mut Coverage, span: Span, kind: RuleKind, label: String, conditional: bool| {
                let file = policy
                    .sources
                    .get(span.source)
                    .map(|s| s.name.clone())
                    .unwrap_or_else(|| "<policy>".into());
                let n = counts.entry((file.clone(), kind)).or_insert(0);
                let id = RuleId {
                    file,
                    kind,
                    index: *n,
                };
                *n = n.saturating_add(1);
                // Two rules that read alike (`full_new when ...` twice) are told apart by number.
                let same = this
                    .rules
                    .values()
                    .filter(|r| {
                        r.id.file == id.file && r.label.split(" #").next() == Some(label.as_str())
                    })
                    .count();
                let label = if same > 0 {
                    format!("{label} #{}", same.saturating_add(1))
                } else {
                    label
                };
                by_at.insert(policy.at(span), id.clone());
                this.rules.entry(id.clone()).or_insert(RuleCoverage {
                    id: id.clone(),
                    label,
                    line: span.line,
                    conditional,
                    true_count: 0,
                    false_count: 0,
                });
                id
            };
        if let Some((span, _)) = &policy.eligible {
            add(self, *span, RuleKind::Eligible, "eligible".into(), true);
        }
        for s in &policy.stales {
            add(
                self,
                s.span,
                RuleKind::Stale,
                format!("stale {}", s.name),
                true,
            );
        }
        for r in &policy.ladder {
            let label = format!("strategy {}", r.strategy.as_str());
            add(self, r.span, RuleKind::Strategy, label, r.when.is_some());
        }
        if let Some(sum) = &policy.summary {
            for (i, r) in sum.excludes.iter().enumerate() {
                let id = add(
                    self,
                    r.span,
                    RuleKind::Exclude,
                    format!("exclude {}", r.kind),
                    r.when.is_some(),
                );
                summary.insert((SummaryRuleKind::Exclude, i), id);
            }
            for (i, r) in sum.includes.iter().enumerate() {
                let label = format!("include {} into {}", r.kind, r.section);
                let id = add(self, r.span, RuleKind::Include, label, r.when.is_some());
                summary.insert((SummaryRuleKind::Include, i), id);
            }
        }
        for r in &policy.delivery.rules {
            let label = format!(
                "delivery {}",
                if r.off_band { "off_band" } else { "inline" }
            );
            add(self, r.span, RuleKind::Delivery, label, r.when.is_some());
        }
        if let Some(p) = &policy.pregrant {
            for g in &p.grants {
                let label = format!("pregrant {}", g.tool.to_lowercase());
                add(self, g.span, RuleKind::Pregrant, label, g.when.is_some());
            }
        }
        for (name, span) in &policy.redact.rules {
            add(self, *span, RuleKind::Redact, format!("redact {name}"), false);
        }
        self.by_at.insert(policy.sha256.clone(), by_at);
        self.summary.insert(policy.sha256.clone(), summary);
    }

    fn bump(rules: &mut BTreeMap<RuleId, RuleCoverage>, id: &RuleId, matched: bool) {
        if let Some(r) = rules.get_mut(id) {
            if matched {
                r.true_count = r.true_count.saturating_add(1);
            } else {
                r.false_count = r.false_count.saturating_add(1);
            }
        }
    }

    /// Record one decision of `policy` (its trace) and the summary rule evaluations behind its
    /// handoff (see `select::select_observed`).
    pub fn record(&mut self, policy: &Policy, decision: &Decision, hits: &[RuleHit]) {
        self.register(policy);
        let Some(by_at) = self.by_at.get(&policy.sha256) else {
            return;
        };
        for t in &decision.trace {
            let Some(id) = by_at.get(&t.at) else { continue };
            if id.kind == RuleKind::Eligible {
                let admitted =
                    matches!(t.values.get("eligible_runs"), Some(Value::Int(n)) if *n > 0);
                let excluded =
                    matches!(t.values.get("excluded_runs"), Some(Value::List(l)) if !l.is_empty());
                if admitted {
                    Self::bump(&mut self.rules, id, true);
                }
                if excluded {
                    Self::bump(&mut self.rules, id, false);
                }
                continue;
            }
            Self::bump(&mut self.rules, id, t.outcome == RuleOutcome::Matched);
        }
        let Some(summary) = self.summary.get(&policy.sha256) else {
            return;
        };
        for h in hits {
            if let Some(id) = summary.get(&(h.kind, h.index)) {
                Self::bump(&mut self.rules, id, h.matched);
            }
        }
    }

    /// Coverage per policy file, files in name order, rules in kind then index order.
    pub fn files(&self) -> Vec<FileCoverage> {
        let mut files: BTreeMap<&str, Vec<RuleCoverage>> = BTreeMap::new();
        for r in self.rules.values() {
            files.entry(r.id.file.as_str()).or_default().push(r.clone());
        }
        files
            .into_iter()
            .map(|(file, rules)| {
                let total = rules.len();
                let covered = rules.iter().filter(|r| r.covered()).count();
                let branch = rules.iter().filter(|r| r.branch_covered()).count();
                let pct = |n: usize| {
                    if total == 0 {
                        100.0
                    } else {
                        n as f64 * 100.0 / total as f64
                    }
                };
                FileCoverage {
                    file: file.to_string(),
                    covered,
                    total,
                    percent: pct(covered),
                    branch_percent: pct(branch),
                    rules,
                }
            })
            .collect()
    }

    /// The coverage as a table: one block per file, one line per rule.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for f in self.files() {
            out.push_str(&format!(
                "{}: {}/{} rules covered ({:.1}%), branches {:.1}%\n",
                f.file, f.covered, f.total, f.percent, f.branch_percent
            ));
            let width = f.rules.iter().map(|r| r.label.len()).max().unwrap_or(0);
            for r in &f.rules {
                let mark = if r.covered() { " " } else { "!" };
                out.push_str(&format!(
                    "  {mark} {:<width$}  {:>5} true {:>5} false  {:<10}  {}:{}\n",
                    r.label,
                    r.true_count,
                    r.false_count,
                    r.status(),
                    f.file,
                    r.line,
                ));
            }
        }
        out
    }

    /// The coverage as pretty JSON: `{"files": [...]}`.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Out {
            files: Vec<FileCoverage>,
        }
        serde_json::to_string_pretty(&Out {
            files: self.files(),
        })
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
