//! A decision's trace, kept as rule ids and values while it is made and formatted into
//! [`TraceEntry`]s only when it is read or printed.
//!
//! Evaluating a rule appends an entry that names the rule by its index in the policy's
//! [`TraceTexts`] (label, location, text and `because`, formatted once per policy) and the
//! range of the values it read in one list shared by the whole trace. Nothing of the rule's
//! text is copied, and the values need no map of their own, until the trace is read (it
//! dereferences to `[TraceEntry]`) or serialized; what it prints is exactly what the entries
//! built on the spot printed.

use super::{RuleOutcome, TraceEntry};
use crate::facts::Value;
use crate::policy::TraceTexts;
use serde::{Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The name of a value a rule read: a fact's or a fixed name, or a `let`'s.
pub type ValueName = Cow<'static, str>;

/// Every rule evaluated, in evaluation order, with the values of the facts it read
/// (`trace` in DESIGN §4). It reads as a slice of [`TraceEntry`] (`d.trace.iter()`,
/// `d.trace.first()`) and serializes as the JSON list of them.
#[derive(Clone, Default)]
pub struct Trace {
    /// The policy's rule texts the entries refer to.
    texts: Option<Arc<TraceTexts>>,
    entries: Vec<Entry>,
    /// The values of every [`Entry::Rule`], in the order the rules read them.
    values: Vec<(ValueName, Value)>,
    /// The entries as [`TraceEntry`]s, built on first read.
    full: OnceLock<Vec<TraceEntry>>,
}

#[derive(Clone)]
enum Entry {
    /// A rule of the policy: its index in `texts`, and its values `values[from..to]`.
    Rule {
        text: usize,
        outcome: RuleOutcome,
        from: usize,
        to: usize,
    },
    /// An entry built whole (providers, budget and degradation entries).
    Full(Box<TraceEntry>),
}

impl Trace {
    unstable_pub! {
        /// An empty trace with room for `entries` entries and `values` values.
        fn with_capacity(texts: Arc<TraceTexts>, entries: usize, values: usize) -> Trace {
            Trace {
                texts: Some(texts),
                entries: Vec::with_capacity(entries),
                values: Vec::with_capacity(values),
                full: OnceLock::new(),
            }
        }
    }

    /// Append an entry built whole.
    pub fn push(&mut self, entry: TraceEntry) {
        self.full.take();
        self.entries.push(Entry::Full(Box::new(entry)));
    }

    /// The list the next rule's values go into (see [`Trace::push_rule`]).
    pub fn values_mut(&mut self) -> &mut Vec<(ValueName, Value)> {
        &mut self.values
    }

    /// How many values the trace holds: where the next rule's values start.
    pub fn values_len(&self) -> usize {
        self.values.len()
    }

    /// Append the entry of rule `text` (an index in the policy's `TraceTexts`) whose values
    /// were added since `from` ([`Trace::values_len`] before the rule was evaluated).
    pub fn push_rule(&mut self, text: usize, outcome: RuleOutcome, from: usize) {
        self.full.take();
        self.entries.push(Entry::Rule {
            text,
            outcome,
            from,
            to: self.values.len(),
        });
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the trace has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, built on first use.
    fn full(&self) -> &Vec<TraceEntry> {
        self.full.get_or_init(|| {
            self.entries
                .iter()
                .map(|e| match e {
                    Entry::Full(t) => TraceEntry::clone(t),
                    Entry::Rule {
                        text,
                        outcome,
                        from,
                        to,
                    } => {
                        let rule = self.texts.as_ref().and_then(|t| t.get(*text));
                        let values = self
                            .values
                            .get(*from..*to)
                            .unwrap_or_default()
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.clone()))
                            .collect::<BTreeMap<_, _>>();
                        TraceEntry {
                            rule: rule.map(|r| r.label.clone()).unwrap_or_default(),
                            at: rule.map(|r| r.at.clone()).unwrap_or_default(),
                            outcome: *outcome,
                            values,
                            when: Some(rule.map(|r| r.when.clone()).unwrap_or_default()),
                            because: rule.and_then(|r| r.because.clone()),
                        }
                    }
                })
                .collect()
        })
    }
}

impl std::ops::Deref for Trace {
    type Target = [TraceEntry];

    fn deref(&self) -> &[TraceEntry] {
        self.full()
    }
}

impl<'a> IntoIterator for &'a Trace {
    type Item = &'a TraceEntry;
    type IntoIter = std::slice::Iter<'a, TraceEntry>;

    fn into_iter(self) -> Self::IntoIter {
        self.full().iter()
    }
}

impl From<Vec<TraceEntry>> for Trace {
    fn from(entries: Vec<TraceEntry>) -> Trace {
        Trace {
            entries: entries
                .into_iter()
                .map(|e| Entry::Full(Box::new(e)))
                .collect(),
            ..Trace::default()
        }
    }
}

impl PartialEq for Trace {
    fn eq(&self, other: &Trace) -> bool {
        self.full() == other.full()
    }
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.full(), f)
    }
}

impl Serialize for Trace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.full().serialize(serializer)
    }
}
