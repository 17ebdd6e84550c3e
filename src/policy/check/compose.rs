//! Composition: the files of a policy set merged along `extends`, later files overriding
//! earlier ones by name.

use crate::policy::ast::*;
use std::collections::HashMap;

/// Merged view of a policy set after `extends`: later files override earlier ones by name.
pub(super) struct Merged<'a> {
    pub(super) name: Option<&'a Spanned<String>>,
    pub(super) description: Option<&'a String>,
    pub(super) template: Option<&'a Spanned<String>>,
    /// Every file's `known_providers`, bases first (they add up).
    pub(super) known_providers: Vec<&'a Spanned<String>>,
    pub(super) lets: Vec<&'a Let>,
    pub(super) eligible: Option<&'a Condition>,
    pub(super) stales: Vec<&'a StaleRule>,
    pub(super) strategy: Option<&'a Ladder>,
    pub(super) summary: Option<&'a SummaryBlock>,
    /// The last `summary` block with `include` rules that a later file's block replaced (the
    /// base's block an extending policy drops; see `traps::summary_includes_nothing`).
    pub(super) summary_replaced: Option<&'a SummaryBlock>,
    pub(super) delivery: Option<&'a DeliveryBlock>,
    pub(super) pregrant: Option<&'a PregrantBlock>,
    /// The `providers` entries merged per provider and per key, providers in order of first
    /// appearance (see [`merge_providers`]).
    pub(super) providers: Vec<MergedProvider<'a>>,
    /// The last `providers` block of the set (where a trace points when the block does not
    /// name the target).
    pub(super) providers_span: Option<Span>,
    /// Every `redact` block of the set, bases first (they add up; docs/redaction.md).
    pub(super) redact: Vec<&'a RedactBlock>,
    /// Every `log` block of the set, bases first (they add up).
    pub(super) log: Vec<&'a LogBlock>,
}

/// One provider's settings across the files of a set: a later file's key replaces an
/// earlier file's value (and its `force`) in place; other keys are kept.
pub(super) struct MergedProvider<'a> {
    pub(super) name: &'a Spanned<String>,
    /// Every entry that names the provider, in load order (the last one is where traces
    /// point).
    pub(super) entries: Vec<&'a ProviderEntry>,
    pub(super) settings: Vec<&'a ProviderSetting>,
}

impl Merged<'_> {
    /// The provider names the composed policy declares in its `providers` blocks, in order of
    /// first appearance. A provider named there counts as declared: a policy may target it
    /// and read its capabilities, and checks for unknown provider names accept it.
    pub(super) fn declared_providers(&self) -> Vec<&str> {
        self.providers.iter().map(|p| p.name.node.as_str()).collect()
    }

    /// The `file_read` value the composed `providers` block sets for `provider` (the last
    /// setting along `extends` wins), if it sets one.
    pub(super) fn declared_file_read(&self, provider: &str) -> Option<bool> {
        let p = self.providers.iter().find(|p| p.name.node == provider)?;
        p.settings
            .iter()
            .rev()
            .find(|s| s.key.node == "file_read")
            .and_then(|s| match s.value.node {
                crate::policy::ast::SettingValue::Bool(b) => Some(b),
                _ => None,
            })
    }
}

/// Merge `providers` blocks along `extends`: per provider, then per key (the rule `let`s
/// follow), because each capability is an independent named value, unlike the rules of a
/// ladder whose order is their meaning.
fn merge_providers<'a>(merged: &mut Vec<MergedProvider<'a>>, block: &'a ProvidersBlock) {
    for entry in &block.providers {
        match merged.iter_mut().find(|p| p.name.node == entry.name.node) {
            Some(p) => {
                // Within one file a second entry is an error the checker reports; keep its
                // settings so that each is still checked.
                p.entries.push(entry);
                override_by_name(&mut p.settings, &entry.settings, |s| &s.key);
            }
            None => {
                let mut settings = Vec::new();
                override_by_name(&mut settings, &entry.settings, |s| &s.key);
                merged.push(MergedProvider {
                    name: &entry.name,
                    entries: vec![entry],
                    settings,
                });
            }
        }
    }
}

/// Add `items` of a later file to `merged`: one with the name of an item from an earlier file
/// replaces it in place; the others are appended. Names are looked up in an index, so a file
/// of n items costs O(n), not O(n²).
pub(super) fn override_by_name<'a, T>(
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

pub(super) fn merge(files: &[PolicyFile]) -> Merged<'_> {
    let mut m = Merged {
        name: None,
        description: None,
        template: None,
        known_providers: Vec::new(),
        lets: Vec::new(),
        eligible: None,
        stales: Vec::new(),
        strategy: None,
        summary: None,
        summary_replaced: None,
        delivery: None,
        pregrant: None,
        providers: Vec::new(),
        providers_span: None,
        redact: Vec::new(),
        log: Vec::new(),
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
        m.known_providers.extend(f.known_providers.iter());
        override_by_name(&mut m.lets, &f.lets, |l| &l.name);
        if f.eligible.is_some() {
            m.eligible = f.eligible.as_ref();
        }
        override_by_name(&mut m.stales, &f.stales, |s| &s.name);
        if f.strategy.is_some() {
            m.strategy = f.strategy.as_ref();
        }
        if f.summary.is_some() {
            if let Some(prev) = m.summary.filter(|s| !s.includes.is_empty()) {
                m.summary_replaced = Some(prev);
            }
            m.summary = f.summary.as_ref();
        }
        if f.delivery.is_some() {
            m.delivery = f.delivery.as_ref();
        }
        if f.pregrant.is_some() {
            m.pregrant = f.pregrant.as_ref();
        }
        if let Some(p) = &f.providers {
            merge_providers(&mut m.providers, p);
            m.providers_span = Some(p.span);
        }
        m.redact.extend(f.redact.as_ref());
        m.log.extend(f.log.as_ref());
    }
    m
}
