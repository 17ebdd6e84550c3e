//! Budgets: fit a rendered handoff to what the target can take (docs/rendering.md#budgets).
//!
//! Public entry point: [`fit`]. The first-turn message (the inline prompt, or the pointer
//! prompt of an off-band document) must fit the target's `max_input_chars_per_turn`; an
//! off-band document must fit the policy's `document max`. Over either, the policy's
//! degradation steps run in order, each applied to the selection made once (see
//! [`crate::select::Prepared`]) and re-rendered, until the handoff fits;
//! the last resort keeps only the must-keep items. When even those do not fit, an inline
//! handoff moves off-band where the target can read files, or the decision becomes
//! `unsupported` with the reason. Every step is recorded in the decision's `budget`, in
//! `handoff.json` and in the trace.

use crate::decision::{
    BudgetReport, BudgetStep, DecidedBy, FilesCounted, FirstTurnSource, Decision, Delivery, DeliveryMode, RuleOutcome as TraceOutcome,
    Pregrant, ProviderThreadAction, ThreadAction, TraceEntry,
};
use crate::facts::{Facts, Value};
use crate::policy::{DegradeStep, Policy, Strategy, TurnLimit, DEFAULT_DOCUMENT_MAX};
use crate::render::{RenderError, RenderOptions, Rendered};
use crate::select::ladder::NEWEST_RUNS_KEPT;
use crate::select::{select_degraded, select_runs, Degrade, Summary};
use crate::state::{HandoffStrategy, RunRange, State};
use std::collections::{BTreeMap, HashSet};

/// The name of the staleness signal whose full handoff must not outgrow the delta it replaces.
pub const OVER_BUDGET_SIGNAL: &str = "over_budget";

/// What fitting produced: the (possibly changed) decision, and the handoff unless the
/// decision became `unsupported`.
pub struct Fitted {
    pub decision: Decision,
    pub summary: Option<Summary>,
    pub rendered: Option<Rendered>,
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The limits of one handoff.
struct Limits {
    first_turn: usize,
    document: usize,
    replaced: Option<usize>,
    /// For a full handoff that replaces an over-budget delta: the items that delta, fitted to
    /// its budget, would have carried; no step leaves them out (`Degrade::keep`).
    floor: std::collections::BTreeSet<String>,
}

impl Limits {
    /// (scope, limit, measured characters) of a rendered handoff in `mode`.
    fn measure(&self, mode: DeliveryMode, r: &Rendered) -> (&'static str, usize, usize) {
        match mode {
            DeliveryMode::Inline => (
                "first_turn",
                self.replaced
                    .map_or(self.first_turn, |x| x.min(self.first_turn)),
                chars(&r.inline),
            ),
            DeliveryMode::OffBand => (
                "document",
                self.replaced
                    .map_or(self.document, |x| x.min(self.document)),
                chars(&r.document),
            ),
        }
    }
}

fn mode_of(d: &Decision) -> DeliveryMode {
    d.delivery
        .as_ref()
        .map(|d| d.mode)
        .unwrap_or(DeliveryMode::Inline)
}

/// Fit the handoff of `decision` (selected as `summary`) to its budget, and render it.
pub fn fit(
    policy: &Policy,
    state: &State,
    facts: &Facts<'_>,
    mut decision: Decision,
    summary: Summary,
    opts: &RenderOptions,
) -> Result<Fitted, RenderError> {
    // The target's capabilities as the decision saw them (the policy's `providers` block
    // over the state's).
    let caps = facts.caps.clone();
    let (limits, first_turn_source) = limits(policy, &caps);
    // Fail closed: a handoff whose texts could not all be redacted is not made.
    if let Some(e) = summary.redaction.failure() {
        let at = policy
            .redact
            .span
            .map(|s| policy.at(s))
            .unwrap_or_else(|| budget_at(policy));
        let why = e.to_string();
        let reasons = vec!["redaction_failed".to_string()];
        return Ok(unsupported_by(decision, "redact unsupported", &why, reasons, &at));
    }
    let mut limits = limits;
    let mut opts = opts.clone();
    let mut reasons = Vec::new();
    if let Some((size, floor)) = replaced_delta(policy, state, facts, &decision, &opts, &limits)? {
        limits.replaced = Some(size);
        limits.floor = floor;
    }

    // The request's message alone over the first turn: it goes into an off-band document.
    let message_chars = state.request.message.as_deref().map(chars).unwrap_or(0);
    if message_chars > limits.first_turn {
        reasons.push("request_over_budget".to_string());
        if !caps.file_read {
            let why = format!(
                "the request's message ({message_chars} characters) exceeds {target}'s {limit}-character turn, and {target} cannot read files",
                target = decision.target,
                limit = limits.first_turn
            );
            return Ok(unsupported(decision, &why, reasons, &budget_at(policy)));
        }
        if mode_of(&decision) == DeliveryMode::Inline {
            move_off_band(policy, facts, &mut decision, &opts);
            reasons.push("moved_off_band".to_string());
        }
        opts.message_in_document = true;
    }

    // The summary moves into the attempt; the retries below start again from it
    // (`Attempt::initial`), so the common case (it fits) never copies it.
    let mut attempt = fit_mode(policy, state, facts, &decision, summary, &opts, &limits)?;
    if !attempt.kept && mode_of(&decision) == DeliveryMode::Inline {
        reasons.push("must_keep_over_budget".to_string());
        if !caps.file_read {
            let why = format!(
                "the items the next provider must act on need {} characters, over {}'s {}-character turn, and it cannot read files",
                attempt.after, decision.target, limits.first_turn
            );
            return Ok(unsupported(decision, &why, reasons, &budget_at(policy)));
        }
        // Off-band only helps when its pointer prompt fits the turn; otherwise nothing fits
        // and the inline handoff, down to its must-keep items, is sent and reported.
        let mut off = decision.clone();
        move_off_band(policy, facts, &mut off, &opts);
        let initial = attempt.initial();
        let moved = fit_mode(policy, state, facts, &off, initial, &opts, &limits)?;
        if chars(&moved.rendered.inline) <= limits.first_turn {
            decision = off;
            attempt = moved;
            reasons.push("moved_off_band".to_string());
        }
    }
    // The message with its pointer still over the turn: the message goes into the document.
    if chars(&attempt.rendered.inline) > limits.first_turn
        && caps.file_read
        && !opts.message_in_document
        && message_chars > 0
    {
        let mut off = decision.clone();
        let was_inline = mode_of(&off) == DeliveryMode::Inline;
        if was_inline {
            move_off_band(policy, facts, &mut off, &opts);
        }
        let mut with_message = opts.clone();
        with_message.message_in_document = true;
        let initial = attempt.initial();
        let moved = fit_mode(policy, state, facts, &off, initial, &with_message, &limits)?;
        if chars(&moved.rendered.inline) <= limits.first_turn {
            decision = off;
            attempt = moved;
            reasons.push("request_over_budget".to_string());
            if was_inline {
                reasons.push("moved_off_band".to_string());
            }
        }
    }
    if !attempt.kept && !reasons.iter().any(|r| r == "must_keep_over_budget") {
        reasons.push("must_keep_over_budget".to_string());
    }
    let mode = mode_of(&decision);
    let (scope, limit, _) = limits.measure(mode, &attempt.rendered);
    let first_turn = chars(&attempt.rendered.inline);
    // Files counted, not named: the guarantee "every changed file named" stops here, and the
    // decision says so (docs/limits.md#rendering).
    let (counted, grouped) = attempt.summary.files_counted;
    let files_counted = (counted > 0).then_some(FilesCounted { counted, grouped });
    let warnings = files_counted_warnings(files_counted.as_ref(), mode, limit);
    let report = BudgetReport {
        scope: scope.to_string(),
        limit,
        first_turn_limit: limits.first_turn,
        first_turn_source,
        document_limit: limits.document,
        replaced_chars: limits.replaced,
        before: attempt.before,
        after: attempt.after,
        first_turn,
        steps: attempt.steps,
        kept: attempt.kept && first_turn <= limits.first_turn,
        reasons,
        files_counted,
        warnings,
    };
    trace_budget(&mut decision, &report, &budget_at(policy));
    decision.budget = Some(report.clone());
    trace_redactions(policy, &mut decision, &attempt.summary.redaction.report);
    decision.redactions = attempt.summary.redaction.report.clone();
    let mut rendered = attempt.rendered;
    rendered.provenance.budget = Some(report);
    // Off-band, the transcript carries whole every item the budget left out or shortened.
    if mode == DeliveryMode::OffBand {
        // Fail closed: a transcript whose texts could not all be redacted is not written, and
        // the document that names it is not made either.
        if let Err(e) = add_transcript(state, facts, &decision, &attempt.summary, &mut rendered) {
            let at = policy
                .redact
                .span
                .map(|s| policy.at(s))
                .unwrap_or_else(|| budget_at(policy));
            let why = e.to_string();
            let reasons = vec!["redaction_failed".to_string()];
            return Ok(unsupported_by(decision, "redact unsupported", &why, reasons, &at));
        }
    }
    if let (Some(d), Some(note)) = (decision.delivery.as_mut(), rendered.inline_note.clone()) {
        d.inline_note = Some(note);
    }
    Ok(Fitted {
        decision,
        summary: Some(attempt.summary),
        rendered: Some(rendered),
    })
}

/// The first turn's and the document's limits: the target's per-turn cap unless the policy
/// sets its own (`turn max`), and where the first turn's comes from.
fn limits(policy: &Policy, caps: &crate::state::ResolvedCaps) -> (Limits, FirstTurnSource) {
    // The first turn: the target's per-turn cap, unless the policy sets its own (`turn max`).
    let target_turn = usize::try_from(caps.max_input_chars_per_turn).unwrap_or(usize::MAX);
    let (first_turn, first_turn_source) = match policy.summary.as_ref().map(|s| s.turn_max) {
        Some(TurnLimit::Chars(n)) => (n, FirstTurnSource::TurnMax),
        Some(TurnLimit::Unlimited) => (crate::policy::NO_TURN_LIMIT, FirstTurnSource::TurnMaxNone),
        Some(TurnLimit::Target) | None => (target_turn, FirstTurnSource::Target),
    };
    let limits = Limits {
        first_turn,
        document: policy
            .summary
            .as_ref()
            .and_then(|s| s.document_max)
            .unwrap_or(DEFAULT_DOCUMENT_MAX),
        replaced: None,
        floor: Default::default(),
    };
    (limits, first_turn_source)
}

/// The warnings of a handoff whose changed files are counted, not named (`files_counted`):
/// the guarantee "every changed file named" stops there, and the decision says so
/// (docs/limits.md#rendering).
fn files_counted_warnings(
    files_counted: Option<&FilesCounted>,
    mode: DeliveryMode,
    limit: usize,
) -> Vec<String> {
    files_counted
        .iter()
        .map(|f| {
            let n = crate::cut::thousands;
            let what = if mode == DeliveryMode::OffBand {
                "document"
            } else {
                "first-turn message"
            };
            let where_ = if mode == DeliveryMode::OffBand {
                "each is named, with every change, in the transcript beside the document"
            } else {
                "they are not sent; handoff.json lists their ids"
            };
            format!(
                "{} of {} changed files are counted, not named: even grouped by directory their names do not fit the {}-character {what}; {where_}",
                n(f.counted),
                n(f.grouped),
                n(limit)
            )
        })
        .collect()
}

/// The transcript beside an off-band document (`rendered.document_path`): every item the
/// budget left out or shortened, whole. None is written when nothing was left out.
fn add_transcript(
    state: &State,
    facts: &Facts<'_>,
    decision: &Decision,
    summary: &Summary,
    rendered: &mut Rendered,
) -> Result<(), crate::redact::RedactError> {
    if let Some(doc) = rendered.document_path.as_deref() {
        let covered = crate::select::decision_runs(facts, decision);
        let hid = decision.handoff_id.as_deref().unwrap_or("");
        let note = facts.staleness().note();
        let text =
            crate::render::receipt::transcript(state, summary, hid, &covered, note.as_deref())?;
        if text.is_some() {
            rendered.provenance.transcript = Some(crate::render::receipt::transcript_path(doc));
        }
        rendered.transcript = text;
    }
    Ok(())
}

struct Attempt {
    summary: Summary,
    rendered: Rendered,
    before: usize,
    after: usize,
    steps: Vec<BudgetStep>,
    kept: bool,
    /// The summary the attempt started from, once a degradation step replaced it.
    original: Option<Summary>,
}

impl Attempt {
    /// A copy of the summary the attempt started from.
    fn initial(&self) -> Summary {
        self.original
            .as_ref()
            .unwrap_or(&self.summary)
            .clone()
    }
}

/// Degrade in the policy's order until the handoff fits the limit of the decision's
/// delivery mode. With a floor (what a replaced delta would have carried), the floor's items
/// are kept unless that costs the budget or a changed file's name; then the ladder runs
/// without it.
fn fit_mode(
    policy: &Policy,
    state: &State,
    facts: &Facts<'_>,
    decision: &Decision,
    summary: Summary,
    opts: &RenderOptions,
    limits: &Limits,
) -> Result<Attempt, RenderError> {
    if limits.floor.is_empty() {
        return fit_ladder(policy, state, facts, decision, summary, opts, limits);
    }
    let spare = summary.clone();
    let a = fit_ladder(policy, state, facts, decision, summary, opts, limits)?;
    let costly = a.steps.iter().any(|s| {
        s.step == "must_keep_only" || s.step.starts_with("count file_change")
    });
    if a.kept && !costly {
        return Ok(a);
    }
    let without = Limits {
        first_turn: limits.first_turn,
        document: limits.document,
        replaced: limits.replaced,
        floor: Default::default(),
    };
    fit_ladder(policy, state, facts, decision, spare, opts, &without)
}

/// [`fit_mode`]'s ladder.
fn fit_ladder(
    policy: &Policy,
    state: &State,
    facts: &Facts<'_>,
    decision: &Decision,
    summary: Summary,
    opts: &RenderOptions,
    limits: &Limits,
) -> Result<Attempt, RenderError> {
    let mode = mode_of(decision);
    let rendered = crate::render::render(policy, state, decision, &summary, opts)?;
    let (_, limit, before) = limits.measure(mode, &rendered);
    let mut attempt = Attempt {
        summary,
        rendered,
        before,
        after: before,
        steps: Vec::new(),
        kept: before <= limit,
        original: None,
    };
    // An external summarizer's text is held to its own budget; sections are not degraded.
    if attempt.kept || opts.summary_text.is_some() {
        return Ok(attempt);
    }
    // The text rules are ceilings, applied only over the limit (oldest runs first, as far as
    // needed): where the policy places `degrade text_rules`, else first; then the policy's
    // steps.
    let steps = DegradeStep::with_text_rules(
        policy
            .summary
            .as_ref()
            .map(|s| s.degrade.clone())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(DegradeStep::default_order),
    );
    // Off-band, what the budget leaves out is read whole in the transcript beside the document.
    let transcript = (mode == DeliveryMode::OffBand)
        .then(|| decision.delivery.as_ref().and_then(|d| d.document.as_deref()))
        .flatten()
        .map(crate::render::receipt::transcript_path);
    let mut degrade = Degrade {
        keep: limits.floor.clone(),
        transcript,
        ..Degrade::default()
    };
    // Selected once; each step applies its changes to that selection (no rule is evaluated
    // over the thread again).
    let prepared = crate::select::prepare(policy, facts, decision);
    let try_with = |degrade: &Degrade| -> Result<(Summary, Rendered, usize), RenderError> {
        let s = match &prepared {
            Some(p) => p.summary(degrade),
            None => select_degraded(policy, facts, decision, degrade),
        };
        let r = crate::render::render(policy, state, decision, &s, opts)?;
        let (_, _, n) = limits.measure(mode, &r);
        Ok((s, r, n))
    };
    let record = |attempt: &mut Attempt, label: String, s: Summary, r: Rendered, n: usize| {
        let before_ids: HashSet<&String> = attempt.summary.included.iter().collect();
        let now: HashSet<&String> = s.included.iter().collect();
        let dropped = before_ids
            .difference(&now)
            .map(|s| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        attempt.steps.push(BudgetStep {
            step: label,
            before: attempt.after,
            after: n,
            dropped,
        });
        attempt.after = n;
        attempt.kept = n <= limit;
        let replaced = std::mem::replace(&mut attempt.summary, s);
        if attempt.original.is_none() {
            attempt.original = Some(replaced);
        }
        attempt.rendered = r;
    };
    let runs: Vec<u32> = crate::select::decision_runs(facts, decision);
    for step in steps {
        if step == DegradeStep::DropOldestRuns {
            drop_oldest_runs(&mut attempt, &mut degrade, &runs, limit, &try_with, &record)?;
            if attempt.kept {
                return Ok(attempt);
            }
            continue;
        }
        // A step that reaches no included item changes nothing: the summary and its
        // rendering stay as they are.
        let untouched = step
            .kind()
            .is_some_and(|k| prepared.as_ref().is_some_and(|p| !p.touches(k)));
        if untouched {
            let (s, r) = (attempt.summary.clone(), attempt.rendered.clone());
            let n = attempt.after;
            record(&mut attempt, step.label(), s, r, n);
            continue;
        }
        let mut full = degrade.clone();
        apply_step(&mut full, &step);
        let (s, r, n) = try_with(&full)?;
        // Text rules that cut nothing (every text within its ceiling) are not a step.
        if step == DegradeStep::TextRules && n == attempt.after && s.sections == attempt.summary.sections {
            degrade = full;
            continue;
        }
        // Over the limit even where it reaches every run, or a step that has no reach (a
        // layout): it applies in full and the next step follows.
        let searchable = !matches!(step, DegradeStep::Group(_)) && runs.len() > 1;
        if n > limit || !searchable {
            degrade = full;
            record(&mut attempt, step.label(), s, r, n);
            if attempt.kept {
                return Ok(attempt);
            }
            continue;
        }
        // It fits: reach only the fewest oldest runs that make it fit.
        degrade = reach_fewest_runs(
            &mut attempt,
            (step.label(), full, (s, r, n)),
            &runs,
            limit,
            &try_with,
            &record,
        )?;
        if attempt.kept {
            return Ok(attempt);
        }
    }
    degrade.must_keep_only = true;
    let (s, r, n) = try_with(&degrade)?;
    record(&mut attempt, "must_keep_only".into(), s, r, n);
    Ok(attempt)
}

/// [`fit_ladder`]'s render of a summary selected with a degradation: the summary, its
/// rendering and the size the limit counts.
type TryWith<'a> = dyn Fn(&Degrade) -> Result<(Summary, Rendered, usize), RenderError> + 'a;
/// [`fit_ladder`]'s record of a step taken: its label and what it left.
type Record<'a> = dyn Fn(&mut Attempt, String, Summary, Rendered, usize) + 'a;

/// [`fit_ladder`]'s `drop_oldest_runs`: drop the items of the fewest oldest runs that make the
/// handoff fit (all but the newest runs when none does), and record the step.
fn drop_oldest_runs(
    attempt: &mut Attempt,
    degrade: &mut Degrade,
    runs: &[u32],
    limit: usize,
    try_with: &TryWith<'_>,
    record: &Record<'_>,
) -> Result<(), RenderError> {
    // The fewest oldest runs whose items must go (fewer dropped runs never make the
    // handoff smaller); the newest runs are never reached. A halving search over the
    // per-run sizes of the current summary guesses the count; rendered probes around
    // the guess confirm it.
    let reach = runs.len().saturating_sub(NEWEST_RUNS_KEPT);
    let Some(oldest) = runs.get(..reach).filter(|r| !r.is_empty()) else {
        return Ok(());
    };
    let guess =
        oldest_runs_guess(&attempt.summary, oldest, attempt.after.saturating_sub(limit));
    let mut best: Option<Probe> = None;
    let mut last: Option<Probe> = None;
    let last_index = oldest.len().saturating_sub(1);
    let mut fits = |i: usize| -> Result<bool, RenderError> {
        let mut d = degrade.clone();
        d.drop_runs_before = oldest.get(i).map(|r| r.saturating_add(1));
        let (s, r, n) = try_with(&d)?;
        let ok = n <= limit;
        if ok {
            if best.as_ref().is_none_or(|b| i < b.0) {
                best = Some((i, d, s, r, n));
            }
        } else if i == last_index {
            last = Some((i, d, s, r, n));
        }
        Ok(ok)
    };
    fewest_fitting(oldest.len(), guess, &mut fits)?;
    let (_, d, s, r, n) = match best.or(last) {
        Some(b) => b,
        None => {
            let mut d = degrade.clone();
            d.drop_runs_before = oldest.last().map(|r| r.saturating_add(1));
            let (s, r, n) = try_with(&d)?;
            (last_index, d, s, r, n)
        }
    };
    let label = match (oldest.first(), d.drop_runs_before) {
        (Some(f), Some(b)) if b > f.saturating_add(1) => {
            format!("drop_oldest_runs (runs {f}-{})", b.saturating_sub(1))
        }
        (Some(f), Some(_)) => format!("drop_oldest_runs (run {f})"),
        _ => "drop_oldest_runs".to_string(),
    };
    *degrade = d;
    record(attempt, label, s, r, n);
    Ok(())
}

/// [`fit_ladder`]'s step `full` that fits when it reaches every run (`tried`: its summary,
/// rendering and size): reach only the fewest oldest runs that make it fit, record it, and
/// return the degradation the next step starts from.
fn reach_fewest_runs(
    attempt: &mut Attempt,
    (label, full, (s, r, n)): (String, Degrade, (Summary, Rendered, usize)),
    runs: &[u32],
    limit: usize,
    try_with: &TryWith<'_>,
    record: &Record<'_>,
) -> Result<Degrade, RenderError> {
    let guess = savings_guess(&attempt.summary, &s, runs, attempt.after.saturating_sub(limit));
    let mut best: Option<Probe> = None;
    let last_index = runs.len().saturating_sub(1);
    let mut fits = |i: usize| -> Result<bool, RenderError> {
        if i == last_index {
            return Ok(true);
        }
        let mut d = full.clone();
        let before = runs.get(i).map_or(u32::MAX, |r| r.saturating_add(1));
        d.reach.push((label.clone(), before));
        let (s, r, n) = try_with(&d)?;
        let ok = n <= limit;
        if ok && best.as_ref().is_none_or(|b| i < b.0) {
            best = Some((i, d, s, r, n));
        }
        Ok(ok)
    };
    fewest_fitting(runs.len(), guess, &mut fits)?;
    let (label, d, s, r, n) = match best {
        Some((i, d, s, r, n)) => {
            let to = runs.get(i).copied().unwrap_or(0);
            let label = match runs.first() {
                Some(f) if *f < to => format!("{label} (runs {f}-{to})"),
                _ => format!("{label} (run {to})"),
            };
            (label, d, s, r, n)
        }
        None => (label, full, s, r, n),
    };
    record(attempt, label, s, r, n);
    Ok(d)
}

/// Add `step`, reaching every run, to `degrade`.
fn apply_step(degrade: &mut Degrade, step: &DegradeStep) {
    match step {
        DegradeStep::Drop(k) => degrade.drop_kinds.push(k.clone()),
        DegradeStep::Tail(k, n) => degrade.tail.push((k.clone(), *n)),
        DegradeStep::Paths(k) => degrade.paths.push(k.clone()),
        DegradeStep::Shorten(n) => {
            degrade.shorten = Some(degrade.shorten.map_or(*n, |m| m.min(*n)))
        }
        DegradeStep::DropOutput(k) => degrade.drop_output.push(k.clone()),
        DegradeStep::FirstLine(k) => degrade.first_line.push(k.clone()),
        DegradeStep::Group(k) => degrade.group.push(k.clone()),
        DegradeStep::Count(k) => degrade.count.push(k.clone()),
        DegradeStep::TextRules => degrade.ceilings = true,
        DegradeStep::DropOldestRuns => {}
    }
}

/// The index in `runs` of the newest run a step must reach to shed `excess` characters,
/// estimated from what it saves per run where it reaches every run: each entry of `now` that
/// `full` shortens or leaves out saves the difference (a halving search over the prefix sums).
fn savings_guess(now: &Summary, full: &Summary, runs: &[u32], excess: usize) -> usize {
    let after: std::collections::HashMap<&str, usize> = full
        .sections
        .iter()
        .flat_map(|s| &s.entries)
        .map(|e| (e.id.as_str(), chars(&e.text)))
        .collect();
    let mut per_run = vec![0usize; runs.len()];
    for e in now.sections.iter().flat_map(|s| &s.entries) {
        let was = chars(&e.text).saturating_add(3);
        let saved = match after.get(e.id.as_str()) {
            Some(n) => was.saturating_sub(n.saturating_add(3)),
            None => was,
        };
        let at = runs.partition_point(|r| *r < e.run);
        if let Some(n) = per_run.get_mut(at) {
            *n = n.saturating_add(saved);
        }
    }
    let mut sum = 0usize;
    let prefix: Vec<usize> = per_run
        .iter()
        .map(|n| {
            sum = sum.saturating_add(*n);
            sum
        })
        .collect();
    prefix
        .partition_point(|s| *s < excess)
        .min(runs.len().saturating_sub(1))
}

/// A probe of `drop_oldest_runs`: the index of the newest run dropped, the changes, the
/// summary, its rendering and its measured size.
type Probe = (usize, Degrade, Summary, Rendered, usize);

/// The index in `runs` of the newest run `drop_oldest_runs` must drop to shed `excess`
/// characters, estimated from the entries of `summary` it would drop (their texts and list
/// markers): a halving search over the prefix sums of the per-run sizes.
fn oldest_runs_guess(summary: &Summary, runs: &[u32], excess: usize) -> usize {
    let mut per_run = vec![0usize; runs.len()];
    for e in summary.sections.iter().flat_map(|s| &s.entries) {
        if e.must_keep
            || matches!(
                e.kind,
                "user_message" | "file_change" | "compact_summary" | "fork_anchor"
            )
        {
            continue;
        }
        // Dropping through `runs[i]` drops every run up to it.
        let at = runs.partition_point(|r| *r < e.run);
        if let Some(n) = per_run.get_mut(at) {
            *n = n.saturating_add(chars(&e.text).saturating_add(3));
        }
    }
    let mut sum = 0usize;
    let prefix: Vec<usize> = per_run
        .iter()
        .map(|n| {
            sum = sum.saturating_add(*n);
            sum
        })
        .collect();
    prefix
        .partition_point(|s| *s < excess)
        .min(runs.len().saturating_sub(1))
}

/// The least index in `0..len` for which `fits` holds (it holds for every index after one
/// where it holds), found from `guess`: a gallop away from it, then a halving search.
/// `None` when it holds nowhere. Costs two probes when the guess is right.
fn fewest_fitting<E>(
    len: usize,
    guess: usize,
    fits: &mut dyn FnMut(usize) -> Result<bool, E>,
) -> Result<Option<usize>, E> {
    let last = len.checked_sub(1);
    let Some(last) = last else {
        return Ok(None);
    };
    let guess = guess.min(last);
    // `lo`: an index known not to fit (None: below 0); `hi`: an index known to fit.
    let (mut lo, mut hi): (Option<usize>, usize);
    if fits(guess)? {
        hi = guess;
        lo = None;
        let mut step = 1usize;
        while hi > 0 {
            let c = hi.saturating_sub(step);
            if fits(c)? {
                hi = c;
                step = step.saturating_mul(2);
            } else {
                lo = Some(c);
                break;
            }
        }
    } else {
        if guess == last {
            return Ok(None);
        }
        lo = Some(guess);
        let mut step = 1usize;
        loop {
            let c = guess.saturating_add(step).min(last);
            if fits(c)? {
                hi = c;
                break;
            }
            lo = Some(c);
            if c == last {
                return Ok(None);
            }
            step = step.saturating_mul(2);
        }
    }
    // Halve between a known miss and a known fit.
    loop {
        let from = lo.map_or(0, |l| l.saturating_add(1));
        if from >= hi {
            return Ok(Some(hi));
        }
        let mid = from.saturating_add(hi.saturating_sub(from) / 2);
        if fits(mid)? {
            hi = mid;
        } else {
            lo = Some(mid);
        }
    }
}

/// For a full handoff that replaces a delta because `over_budget` held: the size of that
/// delta as it would have been rendered (the document off-band, the prompt inline), and the
/// items it would have carried once fitted to its budget.
fn replaced_delta(
    policy: &Policy,
    state: &State,
    facts: &Facts<'_>,
    decision: &Decision,
    opts: &RenderOptions,
    limits: &Limits,
) -> Result<Option<(usize, std::collections::BTreeSet<String>)>, RenderError> {
    let full = matches!(
        decision.strategy,
        Strategy::FullNew | Strategy::FullExisting
    );
    if !full || !decision.stale.iter().any(|s| s == OVER_BUDGET_SIGNAL) {
        return Ok(None);
    }
    let runs = facts.delta_runs().to_vec();
    let (Some(from), Some(to)) = (runs.first(), runs.last()) else {
        return Ok(None);
    };
    let mut delta = decision.clone();
    delta.strategy = Strategy::DeltaExisting;
    delta.handoff_strategy = Some(HandoffStrategy::DeltaSinceTargetLastSeen);
    delta.covered_runs = Some(RunRange {
        from: *from,
        to: *to,
    });
    let summary = select_runs(policy, facts, &runs);
    let r = crate::render::render(policy, state, &delta, &summary, opts)?;
    let size = match mode_of(decision) {
        DeliveryMode::Inline => chars(&r.inline),
        DeliveryMode::OffBand => chars(&r.document),
    };
    let own = Limits {
        first_turn: limits.first_turn,
        document: limits.document,
        replaced: None,
        floor: Default::default(),
    };
    let fitted = fit_mode(policy, state, facts, &delta, summary, opts, &own)?;
    let floor = fitted.summary.included.iter().cloned().collect();
    Ok(Some((size, floor)))
}

/// Move an inline handoff off-band: the document's stable path and, when a grant rule of
/// the policy holds, the scoped pre-grant.
fn move_off_band(
    policy: &Policy,
    facts: &Facts<'_>,
    decision: &mut Decision,
    opts: &RenderOptions,
) {
    let Some(hid) = decision.handoff_id.clone() else {
        return;
    };
    // The pipeline passes the root it resolved once (`crate::ids::DocumentRoot`).
    let document = match &opts.document_root {
        Some(root) => {
            crate::ids::DocumentRoot::resolved(root.clone()).document_path(&facts.state.thread.id, &hid)
        }
        None => crate::ids::document_path(None, &facts.state.thread.id, &hid),
    }
    .display()
    .to_string();
    let inline_limit = decision
        .delivery
        .as_ref()
        .map(|d| d.inline_limit)
        .unwrap_or(policy.delivery.inline_limit);
    decision.delivery = Some(Delivery {
        mode: DeliveryMode::OffBand,
        inline_limit,
        document: Some(document.clone()),
        fallback_reason: None,
        fallback_kind: None,
        inline_note: None,
    });
    facts.set_outcome(Some(decision.strategy.as_str()), Some("off_band"));
    let signals: Vec<bool> = policy
        .stales
        .iter()
        .map(|s| decision.stale.contains(&s.name))
        .collect();
    decision.pregrant = policy.pregrant.as_ref().and_then(|p| {
        p.grants
            .iter()
            .find(|g| {
                g.when
                    .as_ref()
                    .map(|w| crate::eval::eval_condition(w, facts, &signals).0)
                    .unwrap_or(true)
            })
            .map(|g| Pregrant {
                tool: g.tool.clone(),
                path: document.clone(),
                turns: p.turns,
                uses: p.uses,
            })
    });
}

/// The decision becomes `unsupported`: nothing the target can take holds what it must act on.
fn unsupported(decision: Decision, why: &str, reasons: Vec<String>, at: &str) -> Fitted {
    unsupported_by(decision, "budget unsupported", why, reasons, at)
}

/// [`unsupported`], decided by trace rule `rule`.
fn unsupported_by(
    mut decision: Decision,
    rule: &str,
    why: &str,
    reasons: Vec<String>,
    at: &str,
) -> Fitted {
    let mut values = BTreeMap::new();
    values.insert(
        "reasons".to_string(),
        Value::List(
            reasons
                .iter()
                .map(|r| Value::Str(r.clone().into()))
                .collect(),
        ),
    );
    decision.trace.push(TraceEntry {
        rule: rule.into(),
        at: at.to_string(),
        outcome: TraceOutcome::Matched,
        values,
        when: None,
        because: Some(why.to_string()),
    });
    decision.strategy = Strategy::Unsupported;
    decision.handoff_strategy = None;
    decision.covered_runs = None;
    decision.delivery = None;
    decision.pregrant = None;
    decision.handoff_id = None;
    decision.provider_thread = ProviderThreadAction::new(ThreadAction::None, None);
    decision.decided_by = DecidedBy {
        rule: rule.into(),
        at: at.to_string(),
        because: Some(why.to_string()),
    };
    decision.budget = None;
    Fitted {
        decision,
        summary: None,
        rendered: None,
    }
}

/// Where budget trace entries point: the policy's summary block (its `document max` and
/// `degrade` rules), else the policy's first line.
fn budget_at(policy: &Policy) -> String {
    let span = policy.summary.as_ref().map(|s| s.span).unwrap_or_default();
    policy.at(span)
}

/// One trace entry per redaction rule that replaced something (docs/redaction.md): the
/// number of distinct secrets and the items, never a secret. It points at the policy's own
/// rule, else its `redact` block, else its first line (built-ins of a policy without one).
fn trace_redactions(
    policy: &Policy,
    decision: &mut Decision,
    report: &[crate::redact::RedactionReport],
) {
    for r in report {
        let at = policy
            .redact
            .span_of(&r.rule)
            .map(|s| policy.at(s))
            .unwrap_or_else(|| policy.at(Default::default()));
        let mut values = BTreeMap::new();
        values.insert(
            "count".to_string(),
            Value::Int(i64::try_from(r.count).unwrap_or(i64::MAX)),
        );
        values.insert(
            "items".to_string(),
            Value::List(r.items.iter().map(|i| Value::Str(i.clone().into())).collect()),
        );
        decision.trace.push(TraceEntry {
            rule: format!("redact {}", r.rule),
            at,
            outcome: TraceOutcome::Matched,
            values,
            when: None,
            because: None,
        });
    }
}

/// One trace entry per degradation step, then the budget's outcome.
fn trace_budget(decision: &mut Decision, report: &BudgetReport, at: &str) {
    let int = |n: usize| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    for step in &report.steps {
        let mut values = BTreeMap::new();
        values.insert("chars_before".to_string(), int(step.before));
        values.insert("chars_after".to_string(), int(step.after));
        values.insert("limit".to_string(), int(report.limit));
        values.insert("dropped".to_string(), int(step.dropped.len()));
        decision.trace.push(TraceEntry {
            rule: format!("degrade {}", step.step),
            at: at.to_string(),
            outcome: TraceOutcome::Matched,
            values,
            when: None,
            because: None,
        });
    }
    let mut values = BTreeMap::new();
    values.insert("limit".to_string(), int(report.limit));
    values.insert("chars".to_string(), int(report.after));
    values.insert("first_turn".to_string(), int(report.first_turn));
    values.insert("first_turn_limit".to_string(), int(report.first_turn_limit));
    if let Some(f) = &report.files_counted {
        values.insert("files_counted".to_string(), int(f.counted));
    }
    decision.trace.push(TraceEntry {
        rule: format!("budget {}", report.scope),
        at: at.to_string(),
        outcome: TraceOutcome::of(report.kept),
        values,
        when: None,
        because: (!report.reasons.is_empty()).then(|| report.reasons.join(", ")),
    });
}

#[cfg(test)]
mod tests {
    use super::fewest_fitting;

    /// For every threshold and guess, the least fitting index, as a linear scan finds it.
    #[test]
    fn fewest_fitting_finds_the_least_fitting_index_from_any_guess() {
        for len in 0..40usize {
            for threshold in 0..=len {
                for guess in 0..len.saturating_add(3) {
                    let mut probes = 0;
                    let mut fits = |i: usize| -> Result<bool, ()> {
                        probes += 1;
                        Ok(i >= threshold)
                    };
                    let found = fewest_fitting(len, guess, &mut fits).unwrap();
                    let expected = (threshold < len).then_some(threshold);
                    assert_eq!(found, expected, "len {len} threshold {threshold} guess {guess}");
                    if guess == threshold && threshold > 0 && threshold < len {
                        assert_eq!(probes, 2, "a right guess costs two probes");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod prepared_tests;
