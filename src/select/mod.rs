//! Selection: which items of the covered runs go into the handoff, in which section and form,
//! under the text rule and the budget.
//!
//! Public entry point: [`select`]. Exclusion always wins over inclusion; hidden reasoning is
//! never included, whatever the policy says (the checker also rejects `include reasoning`).

mod text;

pub use text::{compact, cut_at_whitespace};

use crate::decision::Decision;
use crate::eval::item_holds;
use crate::facts::{item_contexts, synthetic_item, Facts, ItemCtx, SummarySizer};
use crate::policy::check::BUILTIN_SECTIONS;
use crate::policy::{CSummary, Form, Policy};
use crate::state::{Item, RequestKind, State};
use serde::Serialize;

/// One line (or block) of a section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub id: String,
    pub kind: String,
    pub run: u32,
    pub text: String,
    /// The budget cut this entry short.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Section {
    pub name: String,
    pub title: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Omitted {
    pub id: String,
    pub kind: String,
    pub reason: String,
}

/// What the selector chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Non-empty sections in document order.
    pub sections: Vec<Section>,
    pub included: Vec<String>,
    pub omitted: Vec<Omitted>,
    /// Characters of every entry's text.
    pub chars: usize,
    pub budget: Option<usize>,
}

impl Summary {
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }
}

struct Candidate {
    ctx: ItemCtx,
    section: String,
    text: String,
}

/// A summary block to use when the policy has none: seed 000's inclusion list.
fn fallback_summary() -> Option<CSummary> {
    crate::policy::load("default").ok().and_then(|p| p.summary)
}

/// Select the items of `runs` (ordinals, oldest first) under the policy's summary rules.
pub fn select_runs(policy: &Policy, state: &State, facts: &Facts<'_>, runs: &[u32]) -> Summary {
    let owned;
    let rules = match &policy.summary {
        Some(s) => s,
        None => {
            owned = fallback_summary();
            match &owned {
                Some(s) => s,
                None => {
                    return Summary {
                        sections: Vec::new(),
                        included: Vec::new(),
                        omitted: Vec::new(),
                        chars: 0,
                        budget: None,
                    }
                }
            }
        }
    };
    let mut items: Vec<(ItemCtx, Option<&Item>)> = Vec::new();
    // Synthetic items first: the fork anchor, then the compaction summary.
    if state.request.kind == RequestKind::Fork {
        if let Some(a) = &state.request.fork_anchor {
            let run = state.thread.parent.as_ref().map(|p| p.run).unwrap_or(0);
            items.push((
                synthetic_item(
                    "fork_anchor",
                    "fork_anchor".into(),
                    run,
                    a.text.chars().count() as i64,
                ),
                None,
            ));
        }
    }
    if let Some(cs) = state
        .thread
        .compact_summary
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        let through = state.thread.compact_summary_through.unwrap_or(u32::MAX);
        if runs.first().map(|f| *f <= through).unwrap_or(false) {
            let run = state.thread.compact_summary_through.unwrap_or(0);
            items.push((
                synthetic_item(
                    "compact_summary",
                    "compact_summary".into(),
                    run,
                    cs.chars().count() as i64,
                ),
                None,
            ));
        }
    }
    items.extend(item_contexts(state, runs));

    let mut omitted = Vec::new();
    let mut chosen: Vec<Candidate> = Vec::new();
    'items: for (ctx, item) in items {
        if ctx.kind == "reasoning" {
            omitted.push(Omitted {
                id: ctx.id.clone(),
                kind: ctx.kind.into(),
                reason: "hidden reasoning never leaves the thread".into(),
            });
            continue;
        }
        for ex in rules.excludes.iter().filter(|e| e.kind == ctx.kind) {
            let held = ex
                .when
                .as_ref()
                .map(|w| item_holds(w, facts, &ctx))
                .unwrap_or(true);
            if held {
                omitted.push(Omitted {
                    id: ctx.id.clone(),
                    kind: ctx.kind.into(),
                    reason: ex.because.clone().unwrap_or_else(|| {
                        format!("excluded by the rule at {}", policy.at(ex.span))
                    }),
                });
                continue 'items;
            }
        }
        let mut placed = false;
        for inc in rules.includes.iter().filter(|i| i.kind == ctx.kind) {
            let held = inc
                .when
                .as_ref()
                .map(|w| item_holds(w, facts, &ctx))
                .unwrap_or(true);
            if held {
                let text = entry_text(state, &ctx, item, inc.form, rules.text_max);
                chosen.push(Candidate {
                    ctx: ctx.clone(),
                    section: inc.section.clone(),
                    text,
                });
                placed = true;
                break;
            }
        }
        if !placed {
            omitted.push(Omitted {
                id: ctx.id.clone(),
                kind: ctx.kind.into(),
                reason: "no include rule matched".into(),
            });
        }
    }

    // Budget: walk back from the newest, keep whole entries while they fit, cut the first that
    // does not at a whitespace boundary, omit the rest.
    let mut truncated_id = None;
    if let Some((budget, newest_first)) = rules.budget {
        let order: Vec<usize> = if newest_first {
            (0..chosen.len()).rev().collect()
        } else {
            (0..chosen.len()).collect()
        };
        let mut used = 0usize;
        let mut keep = vec![false; chosen.len()];
        let mut full = false;
        for i in order {
            if full {
                continue;
            }
            let len = chosen[i].text.chars().count();
            if used + len <= budget {
                used += len;
                keep[i] = true;
            } else {
                let room = budget - used;
                let cut = cut_at_whitespace(&chosen[i].text, room);
                if !cut.is_empty() {
                    used += cut.chars().count();
                    chosen[i].text = cut;
                    keep[i] = true;
                    truncated_id = Some(chosen[i].ctx.id.clone());
                }
                full = true;
            }
        }
        let mut kept = Vec::new();
        for (c, k) in chosen.into_iter().zip(keep) {
            if k {
                kept.push(c);
            } else {
                omitted.push(Omitted {
                    id: c.ctx.id.clone(),
                    kind: c.ctx.kind.into(),
                    reason: format!("over the {budget}-character budget"),
                });
            }
        }
        chosen = kept;
    }

    // Sections in document order: built-ins in seed 000's order, then declared ones.
    let mut order: Vec<(String, String)> = BUILTIN_SECTIONS
        .iter()
        .map(|(n, t)| {
            let title = rules
                .sections
                .iter()
                .find(|(dn, _)| dn == n)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| t.to_string());
            (n.to_string(), title)
        })
        .collect();
    for (n, t) in &rules.sections {
        if !order.iter().any(|(on, _)| on == n) {
            order.push((n.clone(), t.clone()));
        }
    }
    let included: Vec<String> = chosen.iter().map(|c| c.ctx.id.clone()).collect();
    let mut chars = 0;
    let mut sections = Vec::new();
    for (name, title) in order {
        let entries: Vec<Entry> = chosen
            .iter()
            .filter(|c| c.section == name)
            .map(|c| {
                chars += c.text.chars().count();
                Entry {
                    id: c.ctx.id.clone(),
                    kind: c.ctx.kind.to_string(),
                    run: c.ctx.run,
                    text: c.text.clone(),
                    truncated: truncated_id.as_deref() == Some(c.ctx.id.as_str()),
                }
            })
            .collect();
        if !entries.is_empty() {
            sections.push(Section {
                name,
                title,
                entries,
            });
        }
    }
    omitted.sort_by(|a, b| a.id.cmp(&b.id));
    Summary {
        sections,
        included,
        omitted,
        chars,
        budget: rules.budget.map(|(b, _)| b),
    }
}

/// Select for a decision: the covered runs that are eligible.
pub fn select(policy: &Policy, state: &State, facts: &Facts<'_>, decision: &Decision) -> Summary {
    let runs: Vec<u32> = match &decision.covered_runs {
        Some(r) => facts
            .eligible_runs()
            .into_iter()
            .filter(|o| *o >= r.from && *o <= r.to)
            .collect(),
        None => Vec::new(),
    };
    select_runs(policy, state, facts, &runs)
}

/// Sizes summaries with the policy's own selection rules (for `summary.*` facts).
pub struct PolicySizer<'p> {
    pub policy: &'p Policy,
    pub target: String,
}

impl SummarySizer for PolicySizer<'_> {
    fn chars(&self, state: &State, runs: &[u32]) -> i64 {
        let rough = crate::eval::RoughSizer;
        let eligible = crate::eval::eligible_runs(self.policy, state, &rough, &self.target);
        let facts = Facts::new(state, &self.target, eligible, &rough);
        select_runs(self.policy, state, &facts, runs).chars as i64
    }
}

fn t(text: &str, max: Option<usize>) -> String {
    match max {
        Some(m) => compact(text, m),
        None => text.trim().to_string(),
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The text of one entry in one form.
fn entry_text(
    state: &State,
    ctx: &ItemCtx,
    item: Option<&Item>,
    form: Form,
    max: Option<usize>,
) -> String {
    match ctx.kind {
        "fork_anchor" => {
            let a = state.request.fork_anchor.as_ref();
            return t(a.map(|a| a.text.as_str()).unwrap_or(""), max);
        }
        "compact_summary" => {
            return t(state.thread.compact_summary.as_deref().unwrap_or(""), max);
        }
        "checkpoint" => {
            let c = state.checkpoints.iter().find(|c| c.run == ctx.run);
            let n = c.map(|c| c.files_changed).unwrap_or(0);
            let files = format!("{n} file{} changed", if n == 1 { "" } else { "s" });
            return match (form, c.and_then(|c| c.diff_summary.as_deref())) {
                (Form::Count, _) => files,
                (Form::Line, _) => format!("Checkpoint: {files}"),
                (_, Some(d)) => format!("run {}: {files}: {}", ctx.run, t(d, max)),
                (_, None) => format!("run {}: {files}", ctx.run),
            };
        }
        "handoff" => {
            let h = state.handoffs.iter().find(|h| h.id == ctx.id);
            let summary = h.and_then(|h| h.summary.as_deref()).unwrap_or("");
            return match (form, h) {
                (Form::Line, _) | (Form::Text, _) => format!("Handoff: {}", t(summary, max)),
                (_, Some(h)) => format!(
                    "{} (runs {}-{}, {}): {}",
                    h.id,
                    h.covered.from,
                    h.covered.to,
                    h.strategy.as_str(),
                    t(summary, max)
                ),
                (_, None) => t(summary, max),
            };
        }
        _ => {}
    }
    let Some(item) = item else {
        return String::new();
    };
    match (item, form) {
        (Item::UserMessage { text, .. }, Form::Line) => format!("User: {}", t(text, max)),
        (Item::AssistantMessage { text, .. }, Form::Line) => format!("Assistant: {}", t(text, max)),
        (Item::Command { command, .. }, Form::Line) => format!("Command: {}", t(command, max)),
        (Item::FileChange { path, .. }, Form::Line) => {
            format!("File changed: {}", t(file_name(path), max))
        }
        (Item::FileChange { path, .. }, Form::PathOnly) => t(path, max),
        (
            Item::FileChange {
                path,
                change,
                diff_lines,
                ..
            },
            _,
        ) => {
            let mut s = t(path, max);
            let mut bits = Vec::new();
            if let Some(c) = change {
                bits.push(c.as_str().to_string());
            }
            if let Some(d) = diff_lines {
                bits.push(format!("{d} diff lines"));
            }
            if !bits.is_empty() {
                s.push_str(&format!(" ({})", bits.join(", ")));
            }
            s
        }
        (
            Item::Command {
                command,
                exit_code,
                output,
                ..
            },
            Form::Full,
        ) => {
            let mut s = format!("`{}`", t(command, max));
            if let Some(c) = exit_code {
                s.push_str(&format!(" (exit {c})"));
            }
            if let Some(o) = output.as_deref().filter(|o| !o.trim().is_empty()) {
                s.push_str(&format!(": {}", compact(o, max.unwrap_or(240))));
            }
            s
        }
        (
            Item::ToolCall {
                tool,
                input,
                status,
                output,
                ..
            },
            Form::Full,
        ) => {
            let mut s = tool.clone();
            if let Some(i) = input.as_deref().filter(|i| !i.trim().is_empty()) {
                s.push_str(&format!(" {}", compact(i, max.unwrap_or(240))));
            }
            if let Some(st) = status {
                s.push_str(&format!(" ({})", st.as_str()));
            }
            if let Some(o) = output.as_deref().filter(|o| !o.trim().is_empty()) {
                s.push_str(&format!(": {}", compact(o, max.unwrap_or(240))));
            }
            s
        }
        (Item::Plan { steps, .. }, _) => steps
            .iter()
            .map(|st| {
                let mark = match st.status {
                    crate::state::StepStatus::Done => "[x]",
                    crate::state::StepStatus::InProgress => "[~]",
                    crate::state::StepStatus::Pending => "[ ]",
                };
                format!("{mark} {}", t(&st.text, max))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        (Item::SubagentResult { agent, text, .. }, _) => format!("{agent}: {}", t(text, max)),
        (Item::Approval { text, resolved, .. }, Form::Full) => {
            format!(
                "{} ({})",
                t(text, max),
                if *resolved {
                    "resolved"
                } else {
                    "awaiting approval"
                }
            )
        }
        (Item::Question { text, answered, .. }, Form::Full) => {
            format!(
                "{} ({})",
                t(text, max),
                if *answered { "answered" } else { "unanswered" }
            )
        }
        (other, _) => t(other.primary_text(), max),
    }
}
