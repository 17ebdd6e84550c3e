//! The human form of a decision: the answer and why first, the rest on `--verbose`.

use crate::decision::{Decision, RuleOutcome, ThreadAction, TraceEntry};
use crate::facts::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

fn values(v: &BTreeMap<String, Value>) -> String {
    v.iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Lines under a label in the left column: `  label     first`, then indented continuations.
fn labelled(out: &mut String, label: &str, lines: impl Iterator<Item = String>) {
    for (i, line) in lines.enumerate() {
        let head = if i == 0 { label } else { "" };
        let _ = writeln!(out, "  {head:<10}{line}");
    }
}

fn headline(d: &Decision) -> String {
    let thread = match (d.provider_thread.action, &d.provider_thread.id) {
        (ThreadAction::Resume, Some(id)) => format!("resume {id}"),
        (ThreadAction::ForkNative, Some(id)) => format!("fork {id} natively"),
        (ThreadAction::Create, _) => "create a new provider thread".to_string(),
        _ => "no provider thread".to_string(),
    };
    let handoff = match (&d.handoff_strategy, &d.covered_runs) {
        (Some(hs), Some(r)) if r.from == r.to => {
            format!(", hand over run {} ({})", r.from, hs.as_str())
        }
        (Some(hs), Some(r)) => format!(", hand over runs {}-{} ({})", r.from, r.to, hs.as_str()),
        _ => ", no handoff".to_string(),
    };
    format!(
        "run {} on {}: {} - {thread}{handoff}",
        d.run,
        d.target,
        d.strategy.as_str()
    )
}

/// Render a decision for people. `verbose` appends the whole trace; without it the last line
/// counts the rules evaluated (`; 20 rules evaluated`).
pub fn render(d: &Decision, verbose: bool) -> String {
    render_with(d, verbose, None)
}

/// The short explanation ([`render`] without the trace), its last line naming how the reader
/// asks for all the rules: `; OPTION shows all N rules evaluated` (the `baton` command passes
/// `--verbose`, the service its `verbose: true` parameter).
pub fn render_pointing_to(d: &Decision, option: &str) -> String {
    render_with(d, false, Some(option))
}

fn render_with(d: &Decision, verbose: bool, option: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(d));
    if let Some(b) = &d.decided_by.because {
        let _ = writeln!(out, "  why       {b}");
    }
    let deciding = d.deciding_entry();
    let _ = writeln!(
        out,
        "  rule      {} at {}",
        d.decided_by.rule, d.decided_by.at
    );
    if let Some(t) = deciding {
        if let Some(w) = &t.when {
            let _ = writeln!(out, "            {w}");
        }
        if !t.values.is_empty() {
            let _ = writeln!(out, "            {}", values(&t.values));
        }
    }
    let stale: Vec<&TraceEntry> = d
        .trace
        .iter()
        .filter(|t| t.rule.starts_with("stale ") && t.outcome == RuleOutcome::Matched)
        .collect();
    let checked = d
        .trace
        .iter()
        .filter(|t| t.rule.starts_with("stale "))
        .count();
    if stale.is_empty() {
        let _ = writeln!(out, "  stale     no signal held ({checked} checked)");
    } else {
        labelled(
            &mut out,
            "stale",
            stale.iter().map(|t| {
                let name = t.rule.trim_start_matches("stale ");
                let why = t
                    .because
                    .as_deref()
                    .map(|b| format!(" ({b})"))
                    .unwrap_or_default();
                format!("{name}: {}{why}", values(&t.values))
            }),
        );
    }
    if let Some(w) = &d.workspace {
        let mut lines: Vec<String> = w.line.iter().cloned().collect();
        lines.extend(w.notes.iter().map(|n| format!("note: {n}")));
        if let Some(n) = &w.note {
            lines.push(format!(
                "sends the workspace note ({} characters) with the first turn",
                crate::cut::thousands(n.chars().count())
            ));
        }
        labelled(&mut out, "workspace", lines.into_iter());
    }
    // Where the target's capabilities came from, when the policy sets any.
    if let Some(t) = d.trace.iter().find(|t| t.rule.starts_with("providers ")) {
        if let Some(b) = &t.because {
            labelled(&mut out, "providers", b.split("; ").map(str::to_string));
        }
    }
    match &d.delivery {
        Some(del) => {
            let mut line = format!("  delivery  {}", delivery_words(del));
            if let Some(r) = &del.fallback_reason {
                let _ = write!(line, "; fell back: {r}");
            }
            let _ = writeln!(out, "{line}");
        }
        None => {
            let _ = writeln!(out, "  delivery  none (no handoff document)");
        }
    }
    if let Some(p) = &d.pregrant {
        let _ = writeln!(
            out,
            "  pregrant  {} {} for {} turn, {} use",
            p.tool, p.path, p.turns, p.uses
        );
    }
    if let Some(b) = &d.budget {
        labelled(&mut out, "budget", budget_lines(b).into_iter());
    }
    if !d.redactions.is_empty() {
        labelled(
            &mut out,
            "redacted",
            d.redactions.iter().map(|r| {
                let items = match r.items.len() {
                    n if n <= 6 => r.items.join(", "),
                    n => format!(
                        "{} and {} more",
                        r.items.get(..5).unwrap_or_default().join(", "),
                        n.saturating_sub(5)
                    ),
                };
                format!(
                    "{} secret{} by {} in {items}",
                    r.count,
                    if r.count == 1 { "" } else { "s" },
                    r.rule
                )
            }),
        );
    }
    let skipped: Vec<&TraceEntry> = d
        .trace
        .iter()
        .filter(|t| t.rule.starts_with("strategy ") && t.outcome == RuleOutcome::NotMatched)
        .collect();
    labelled(
        &mut out,
        "passed",
        skipped.iter().map(|t| {
            let name = t.rule.trim_start_matches("strategy ");
            format!("{name} ({}): {}", t.at, values(&t.values))
        }),
    );
    let short = d.policy.sha256.get(..12).unwrap_or(&d.policy.sha256);
    let _ = write!(out, "  policy    {} (sha256 {short})", d.policy.name);
    if verbose {
        let _ = writeln!(out);
        write_trace(&mut out, d);
    } else {
        let n = d.trace.len();
        let _ = match option {
            Some(o) => write!(out, "; {o} shows all {n} rules evaluated"),
            None => write!(out, "; {n} rules evaluated"),
        };
        let _ = writeln!(out);
    }
    out
}

/// The `budget` lines of [`render`]: the size against its limit, the first turn's cap and
/// where it comes from, each degradation step, the reasons and warnings.
fn budget_lines(b: &crate::decision::BudgetReport) -> Vec<String> {
    let scope = if b.scope == "document" {
        "off-band document"
    } else {
        "first-turn message"
    };
    let n = crate::cut::thousands;
    // `turn max none`: the first turn has no limit.
    let of = |limit: usize| {
        if limit == crate::policy::NO_TURN_LIMIT {
            "no limit (turn max none)".to_string()
        } else {
            n(limit)
        }
    };
    let mut line = if b.limit == crate::policy::NO_TURN_LIMIT {
        format!("{scope} {} characters, no limit (turn max none)", n(b.after))
    } else {
        format!(
            "{scope} {} of {} characters ({})",
            n(b.after),
            n(b.limit),
            if b.kept { "kept" } else { "NOT kept" }
        )
    };
    if b.before != b.after {
        let _ = write!(line, "; {} before degrading", n(b.before));
    }
    let mut lines = vec![line];
    if b.first_turn_limit == crate::policy::NO_TURN_LIMIT {
        lines.push(format!(
            "first turn {}, {}; document max {}",
            n(b.first_turn),
            of(b.first_turn_limit),
            n(b.document_limit)
        ));
    } else {
        // Where the per-turn cap comes from: the target, or the policy's `turn max`.
        let source = match b.first_turn_source {
            crate::decision::FirstTurnSource::TurnMax => "the policy's turn max",
            crate::decision::FirstTurnSource::Target
            | crate::decision::FirstTurnSource::TurnMaxNone => {
                "the target's max_input_chars_per_turn"
            }
        };
        lines.push(format!(
            "first turn {} of {} ({source}); document max {}",
            n(b.first_turn),
            n(b.first_turn_limit),
            n(b.document_limit)
        ));
    }
    if let Some(r) = b.replaced_chars {
        lines.push(format!(
            "held to the {} characters of the delta it replaces",
            n(r)
        ));
    }
    for s in &b.steps {
        let dropped = match s.dropped.len() {
            0 => String::new(),
            n if n <= 6 => format!(", dropped {}", s.dropped.join(", ")),
            n => format!(
                ", dropped {} and {} more",
                s.dropped.get(..5).unwrap_or_default().join(", "),
                n.saturating_sub(5)
            ),
        };
        lines.push(format!(
            "{}: {} -> {}{dropped}",
            s.step,
            n(s.before),
            n(s.after)
        ));
    }
    if !b.reasons.is_empty() {
        lines.push(format!("reasons: {}", b.reasons.join(", ")));
    }
    for w in &b.warnings {
        lines.push(format!("warning: {w}"));
    }
    lines
}

/// The whole trace, as `--verbose` appends it to [`render`]: every rule evaluated, matched or
/// not, with its condition and the values it read.
fn write_trace(out: &mut String, d: &Decision) {
    let _ = writeln!(out, "\ntrace ({} rules evaluated):", d.trace.len());
    for t in &d.trace {
        let mark = match t.outcome {
            RuleOutcome::Matched => "matched    ",
            RuleOutcome::NotMatched => "not matched",
        };
        let _ = writeln!(out, "  {mark}  {}  {}", t.rule, t.at);
        if let Some(w) = &t.when {
            let _ = writeln!(out, "               {w}");
        }
        if !t.values.is_empty() {
            let _ = writeln!(out, "               {}", values(&t.values));
        }
        if t.rule.starts_with("providers ") {
            if let Some(b) = &t.because {
                let _ = writeln!(out, "               {b}");
            }
        }
    }
}

/// How a decision's delivery reads in `explain` and `baton diff`: the mode, and what
/// `inline_limit` limits, named so that it cannot be read as a limit on an inline handoff
/// (issue 27: "inline (inline limit 500)" stood above a 1,398-character inline prompt).
/// Off-band, the limit is the pointer prompt's; inline, nothing limits the prompt.
pub fn delivery_words(d: &crate::decision::Delivery) -> String {
    match d.mode {
        crate::decision::DeliveryMode::OffBand => format!(
            "{} (pointer prompt limit {} characters)",
            d.mode.as_str(),
            d.inline_limit
        ),
        crate::decision::DeliveryMode::Inline => format!(
            "{} (the handoff is in the prompt, whole; inline_limit limits only an off-band pointer prompt)",
            d.mode.as_str()
        ),
    }
}
