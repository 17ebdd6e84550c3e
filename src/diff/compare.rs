//! Two decisions of one (state, target) compared field by field, each changed field credited
//! to the rule of the new policy that decided it, read from the decision trace.

use crate::decision::{Decision, DeliveryMode, RuleOutcome, TraceEntry};
use crate::facts::Value;
use crate::policy::Policy;
use serde::Serialize;
use std::collections::BTreeMap;

/// One decision field that changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `strategy`, `handoff_strategy`, `provider_thread`, `covered_runs`, `stale`,
    /// `delivery`, `pregrant` or `budget`; `included` when the handoff's included items drop
    /// to zero ([`included_dropped`]).
    pub field: String,
    /// The field as the old policy decided it (the decision's JSON value).
    pub old: serde_json::Value,
    /// The field as the new policy decides it.
    pub new: serde_json::Value,
    /// The old value as `baton diff` prints it (`1-4`, `resume C1`, `[model_changed]`).
    #[serde(skip)]
    pub old_text: String,
    /// The new value as `baton diff` prints it.
    #[serde(skip)]
    pub new_text: String,
    /// The rules behind the change (usually one; one per flipped signal for `stale`).
    pub causes: Vec<Cause>,
}

/// A rule a change is credited to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// The rule as the trace names it: `strategy full_new`, `stale model_changed`,
    /// `delivery off_band`, `pregrant read`, `budget document`, `eligible`, or a setting
    /// (`delivery inline_limit`, `pregrant turns uses`); for `none_matched`, the kind of rule.
    pub rule: String,
    /// `file:line:col` of the rule (empty for `none_matched`).
    pub at: String,
    /// What the rule did.
    pub effect: Effect,
    /// For a staleness signal that flipped, the values it read (thresholds included), as
    /// the trace records them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, Value>,
}

/// How a rule brought a change about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The rule of the new policy that decides the field.
    Decides,
    /// A staleness signal that holds under the new policy and did not under the old.
    Holds,
    /// A staleness signal that held under the old policy and no longer does.
    NoLongerHolds,
    /// A rule of the old policy that the new one does not have (`at` is in the old policy).
    Removed,
    /// No rule of that kind matched under the new policy (delivery is then inline, and there
    /// is no pre-grant).
    NoneMatched,
    /// A setting of the new policy rather than a rule (`inline_limit`, `turns ... uses ...`).
    Setting,
}

impl Cause {
    fn of(t: &TraceEntry, effect: Effect) -> Cause {
        let flipped = matches!(effect, Effect::Holds | Effect::NoLongerHolds);
        Cause {
            rule: t.rule.clone(),
            at: t.at.clone(),
            effect,
            values: if flipped {
                t.values.clone()
            } else {
                BTreeMap::new()
            },
        }
    }

    /// A cause without values.
    fn plain(rule: &str, at: String, effect: Effect) -> Cause {
        Cause {
            rule: rule.to_string(),
            at,
            effect,
            values: BTreeMap::new(),
        }
    }

    /// The cause as `baton diff` prints it.
    pub fn text(&self) -> String {
        let values = self
            .values
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let read = if values.is_empty() {
            String::new()
        } else {
            format!(": {values}")
        };
        match self.effect {
            Effect::Decides => format!("now decided by {} at {}", self.rule, self.at),
            Effect::Holds => format!("{} at {} now holds{read}", self.rule, self.at),
            Effect::NoLongerHolds => {
                format!("{} at {} no longer holds{read}", self.rule, self.at)
            }
            Effect::Removed => format!("{} at {} is gone", self.rule, self.at),
            Effect::NoneMatched => format!("no {} rule matched", self.rule),
            Effect::Setting => format!("now set by {} at {}", self.rule, self.at),
        }
    }
}

impl Change {
    /// `FIELD: OLD -> NEW (CAUSE; CAUSE)`, as `baton diff` prints a change.
    pub fn text(&self) -> String {
        let causes: Vec<String> = self.causes.iter().map(Cause::text).collect();
        let mut line = format!("{}: {} -> {}", self.field, self.old_text, self.new_text);
        if !causes.is_empty() {
            line.push_str(&format!(" ({})", causes.join("; ")));
        }
        line
    }
}

/// `1-4`, `4` for a single run, `null` without runs (as `baton explain` prints ranges).
pub(crate) fn range_text(d: &Decision) -> String {
    crate::testing::runner::run_range(d.covered_runs.as_ref().map(|r| (r.from, r.to)))
}

fn thread_text(d: &Decision) -> String {
    match &d.provider_thread.id {
        Some(id) => format!("{} {id}", d.provider_thread.action.as_str()),
        None => d.provider_thread.action.as_str().to_string(),
    }
}

fn delivery_text(d: &Decision) -> String {
    match &d.delivery {
        Some(x) => match x.mode {
            DeliveryMode::OffBand => format!(
                "{} (pointer prompt limit {})",
                x.mode.as_str(),
                x.inline_limit
            ),
            DeliveryMode::Inline => format!(
                "{} (no pointer prompt; inline_limit {} unused)",
                x.mode.as_str(),
                x.inline_limit
            ),
        },
        None => "null".into(),
    }
}

fn pregrant_text(d: &Decision) -> String {
    match &d.pregrant {
        Some(p) => format!(
            "{} for {} turn{}, {} use{}",
            p.tool,
            p.turns,
            if p.turns == 1 { "" } else { "s" },
            p.uses,
            if p.uses == 1 { "" } else { "s" }
        ),
        None => "null".into(),
    }
}

/// The budget as `baton diff` prints it: `document 960 of 60,000 (kept)`, with the first
/// turn, the degradation steps and the reasons when they differ from `other`'s.
fn budget_text(d: &Decision, other: &Decision) -> String {
    let Some(b) = &d.budget else {
        return "null".into();
    };
    let o = other.budget.as_ref();
    let n = crate::cut::thousands;
    let scope = if b.scope == "document" {
        "document"
    } else {
        "first turn"
    };
    let mut notes = vec![if b.kept { "kept" } else { "NOT kept" }.to_string()];
    if b.before != b.after {
        notes.push(format!("{} before degrading", n(b.before)));
    }
    if b.scope == "document" && o.is_none_or(|o| o.first_turn != b.first_turn) {
        notes.push(format!(
            "first turn {} of {}",
            n(b.first_turn),
            n(b.first_turn_limit)
        ));
    }
    if !b.steps.is_empty() && o.is_none_or(|o| o.steps != b.steps) {
        let steps: Vec<&str> = b.steps.iter().map(|s| s.step.as_str()).collect();
        notes.push(format!("steps {}", steps.join(", ")));
    }
    if !b.reasons.is_empty() {
        notes.push(b.reasons.join(", "));
    }
    format!("{scope} {} of {} ({})", n(b.after), n(b.limit), notes.join("; "))
}

/// What a budget decided, compared by `baton diff`: what is measured against which limits,
/// whether it is kept, the degradation steps taken and the reasons. Sizes are shown, not
/// compared: they move with any change of the text (the policy's name is in the document).
fn budget_outcome(d: &Decision) -> Option<serde_json::Value> {
    d.budget.as_ref().map(|b| {
        serde_json::json!({
            "scope": b.scope,
            "limit": b.limit,
            "first_turn_limit": b.first_turn_limit,
            "document_limit": b.document_limit,
            "replaced_chars": b.replaced_chars,
            "kept": b.kept,
            "steps": b.steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(),
            "reasons": b.reasons,
        })
    })
}

/// What delivery decided: the mode, the inline limit, the document and a fallback. The
/// inline note is shown, not compared: it counts characters of the prompt.
fn delivery_outcome(d: &Decision) -> Option<serde_json::Value> {
    d.delivery.as_ref().map(|x| {
        serde_json::json!({
            "mode": x.mode.as_str(),
            "inline_limit": x.inline_limit,
            "document": x.document,
            "fallback_reason": x.fallback_reason,
        })
    })
}

/// The compared fields: (name, JSON value, printed value; the budget's is made by
/// [`budget_text`], which needs both decisions).
fn fields(d: &Decision) -> Vec<(&'static str, serde_json::Value, String)> {
    let json = |v: Result<serde_json::Value, serde_json::Error>| v.unwrap_or_default();
    vec![
        (
            "strategy",
            json(serde_json::to_value(d.strategy)),
            d.strategy.as_str().to_string(),
        ),
        (
            "handoff_strategy",
            json(serde_json::to_value(d.handoff_strategy)),
            d.handoff_strategy
                .map_or_else(|| "null".to_string(), |h| h.as_str().to_string()),
        ),
        (
            "provider_thread",
            json(serde_json::to_value(&d.provider_thread)),
            thread_text(d),
        ),
        (
            "covered_runs",
            json(serde_json::to_value(&d.covered_runs)),
            range_text(d),
        ),
        (
            "stale",
            json(serde_json::to_value(&d.stale)),
            format!("[{}]", d.stale.join(", ")),
        ),
        (
            "delivery",
            json(serde_json::to_value(&d.delivery)),
            delivery_text(d),
        ),
        (
            "pregrant",
            json(serde_json::to_value(&d.pregrant)),
            pregrant_text(d),
        ),
        (
            "budget",
            json(serde_json::to_value(&d.budget)),
            String::new(),
        ),
    ]
}

/// The first trace entry whose rule starts with `prefix` and that matched.
fn matched<'d>(d: &'d Decision, prefix: &str) -> Option<&'d TraceEntry> {
    d.trace
        .iter()
        .find(|t| t.rule.starts_with(prefix) && t.outcome == RuleOutcome::Matched)
}

fn entry<'d>(d: &'d Decision, rule: &str) -> Option<&'d TraceEntry> {
    d.trace.iter().find(|t| t.rule == rule)
}

/// The budget's own trace entry (`budget document`, `budget first_turn`, `budget unsupported`).
fn budget_entry(d: &Decision) -> Option<&TraceEntry> {
    d.trace.iter().rev().find(|t| t.rule.starts_with("budget "))
}

fn decided_by(d: &Decision) -> Cause {
    Cause::plain(&d.decided_by.rule, d.decided_by.at.clone(), Effect::Decides)
}

/// The budget moved an inline handoff off-band (`fit`), choosing delivery and pre-grant.
fn moved_off_band(d: &Decision) -> bool {
    d.budget
        .as_ref()
        .is_some_and(|b| b.reasons.iter().any(|r| r == "moved_off_band"))
}

/// What the ladder decides (strategy, handoff strategy, provider thread, covered runs): the
/// deciding rule, unless the strategy and its rule stayed and only the runs the `eligible`
/// rule admits changed.
fn ladder_cause(field: &str, old: &Decision, new: &Decision) -> Cause {
    let same_rule =
        old.strategy == new.strategy && old.decided_by.rule == new.decided_by.rule;
    let eligible = (entry(old, "eligible"), entry(new, "eligible"));
    if field != "strategy" && same_rule {
        if let (Some(a), Some(b)) = eligible {
            if a.values != b.values {
                return Cause::of(b, Effect::Decides);
            }
        }
    }
    decided_by(new)
}

fn stale_causes(old: &Decision, new: &Decision) -> Vec<Cause> {
    let mut out = Vec::new();
    for name in new.stale.iter().filter(|s| !old.stale.contains(s)) {
        if let Some(t) = entry(new, &format!("stale {name}")) {
            out.push(Cause::of(t, Effect::Holds));
        }
    }
    for name in old.stale.iter().filter(|s| !new.stale.contains(s)) {
        let rule = format!("stale {name}");
        match (entry(new, &rule), entry(old, &rule)) {
            (Some(t), _) => out.push(Cause::of(t, Effect::NoLongerHolds)),
            (None, Some(t)) => out.push(Cause::of(t, Effect::Removed)),
            (None, None) => {}
        }
    }
    out
}

fn delivery_cause(old: &Decision, new: &Decision, policy: &Policy) -> Cause {
    let Some(got) = &new.delivery else {
        // No handoff document: the ladder decided there is nothing to deliver.
        return decided_by(new);
    };
    if moved_off_band(new) {
        if let Some(t) = budget_entry(new) {
            return Cause::of(t, Effect::Decides);
        }
    }
    let only_limit = old
        .delivery
        .as_ref()
        .is_some_and(|o| o.mode == got.mode && o.inline_limit != got.inline_limit);
    if only_limit {
        let at = policy.delivery.span.map(|s| policy.at(s)).unwrap_or_default();
        return Cause::plain("delivery inline_limit", at, Effect::Setting);
    }
    match matched(new, "delivery ") {
        Some(t) => Cause::of(t, Effect::Decides),
        None => Cause::plain("delivery", String::new(), Effect::NoneMatched),
    }
}

fn pregrant_cause(old: &Decision, new: &Decision, policy: &Policy) -> Cause {
    let off_band = new
        .delivery
        .as_ref()
        .is_some_and(|d| d.mode == DeliveryMode::OffBand);
    if !off_band {
        // A pre-grant needs an off-band document: what decided delivery decided this.
        return delivery_cause(old, new, policy);
    }
    if moved_off_band(new) {
        if let Some(t) = budget_entry(new) {
            return Cause::of(t, Effect::Decides);
        }
    }
    if let (Some(a), Some(b), Some(p)) = (&old.pregrant, &new.pregrant, &policy.pregrant) {
        if a.tool == b.tool {
            return Cause::plain("pregrant turns uses", policy.at(p.span), Effect::Setting);
        }
    }
    match matched(new, "pregrant ") {
        Some(t) => Cause::of(t, Effect::Decides),
        None => Cause::plain("pregrant", String::new(), Effect::NoneMatched),
    }
}

fn budget_cause(old: &Decision, new: &Decision, policy: &Policy) -> Cause {
    let scope = |d: &Decision| d.budget.as_ref().map(|b| b.scope.clone());
    let delivered = |d: &Decision| d.delivery.as_ref().map(|x| x.mode);
    if scope(old).is_some()
        && scope(new).is_some()
        && scope(old) != scope(new)
        && delivered(old) != delivered(new)
        && !moved_off_band(new)
    {
        // What is measured follows delivery: the rule that moved it decided this.
        return delivery_cause(old, new, policy);
    }
    match (&new.budget, budget_entry(new)) {
        (Some(_), Some(t)) => Cause::of(t, Effect::Decides),
        _ => decided_by(new),
    }
}

/// The fields in which `new` (decided by `policy`) differs from `old`, each with its causes.
pub fn compare(old: &Decision, new: &Decision, policy: &Policy) -> Vec<Change> {
    let mut out = Vec::new();
    for ((field, old_v, old_text), (_, new_v, new_text)) in
        fields(old).into_iter().zip(fields(new))
    {
        let same = match field {
            "budget" => budget_outcome(old) == budget_outcome(new),
            "delivery" => delivery_outcome(old) == delivery_outcome(new),
            _ => old_v == new_v,
        };
        if same {
            continue;
        }
        let (old_text, new_text) = if field == "budget" {
            (budget_text(old, new), budget_text(new, old))
        } else {
            (old_text, new_text)
        };
        let causes = match field {
            "stale" => stale_causes(old, new),
            "delivery" => vec![delivery_cause(old, new, policy)],
            "pregrant" => vec![pregrant_cause(old, new, policy)],
            "budget" => vec![budget_cause(old, new, policy)],
            _ => vec![ladder_cause(field, old, new)],
        };
        out.push(Change {
            field: field.to_string(),
            old: old_v,
            new: new_v,
            old_text,
            new_text,
            causes,
        });
    }
    out
}

/// `included: 12 items -> 0 items` when the new policy's summary selects no item where the
/// old one selected some: every handoff would say "No items from these runs are included"
/// (an extending policy's `summary` block that drops the base's `include` rules; issue 27).
/// Credited to the new policy's `summary` block. Other changes of the count are not reported:
/// they follow any edit of the summary rules.
pub fn included_dropped(
    old: &crate::outcome::Outcome,
    new: &crate::outcome::Outcome,
    policy: &Policy,
) -> Option<Change> {
    let count = |o: &crate::outcome::Outcome| o.summary.as_ref().map(|s| s.included.len());
    let before = count(old).filter(|n| *n > 0)?;
    if count(new) != Some(0) {
        return None;
    }
    let at = policy
        .summary
        .as_ref()
        .map(|s| policy.at(s.span))
        .unwrap_or_default();
    let items = |n: usize| {
        format!(
            "{} {}",
            crate::cut::thousands(n),
            if n == 1 { "item" } else { "items" }
        )
    };
    Some(Change {
        field: "included".into(),
        old: serde_json::json!(before),
        new: serde_json::json!(0),
        old_text: items(before),
        new_text: format!("{} (the handoff includes nothing from these runs)", items(0)),
        causes: vec![Cause::plain("summary", at, Effect::Decides)],
    })
}
