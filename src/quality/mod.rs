//! Handoff quality: render every state of a corpus for every target provider and measure what
//! the next provider gets (docs/cli.md, `baton quality`).
//!
//! Public entry points: [`measure_corpus`] (a directory of state files) and [`measure_state`]
//! (one state, for tests that build states in memory). The figures, per document:
//!
//! - **changed-files recall**: files changed in the covered runs, named as the document must
//!   name them (relative to `thread.workspace`, else the full path), that the text shows;
//! - **open-problem recall**: open problems of the covered runs (`item.open`) the text shows
//!   whole: a question's or approval's text, a failing command's command line and exit code, a
//!   failing tool call's tool and input;
//! - **latest user message**: the newest user message of the covered runs and the request's
//!   message are present verbatim (up to whitespace);
//! - **user-instruction recall**: `KEEP-…` sentinels planted in the covered user messages, the
//!   compaction summary (when the document covers it and it is still valid) and the fork anchor
//!   that the text shows;
//! - **leaks**: `LEAK-…` sentinels anywhere in the state that the text shows (planted in
//!   excluded kinds, rolled-back runs, superseded outputs, invalidated summaries);
//! - **budget kept**: the first-turn message fits the target's `max_input_chars_per_turn`;
//! - **grapheme cuts**: no text of the state appears cut inside a grapheme cluster.
//!
//! "The text" is what the target reads: the first-turn message and, off-band, the document.
//! Whitespace runs count as one space in every comparison.

pub mod long;
pub mod sessions;

use crate::facts::{item_contexts, ItemCtx};
use crate::pipeline;
use crate::policy::Policy;
use crate::render::RenderOptions;
use crate::select::display_path;
use crate::state::{Item, RunStatus, State};
use crate::eval::EvalOptions;
use serde::Serialize;
use std::path::{Path, PathBuf};
use unicode_segmentation::UnicodeSegmentation;

pub mod secrets;

/// Prefix of a sentinel that must reach the document whenever the text carrying it is covered.
pub const KEEP: &str = "KEEP-";
/// Prefix of a sentinel that must never reach any document.
pub const LEAK: &str = "LEAK-";
/// The providers every state is rendered for (plus those a state declares).
pub const TARGETS: &[&str] = &["claude", "codex", "copilot", "cursor"];

/// A corpus that cannot be measured. `Display` is the message; the corpus file is its
/// location ([`crate::Located`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QualityError {
    /// A corpus file or directory that cannot be read.
    #[error(transparent)]
    Corpus(#[from] crate::diff::DiffError),
    /// A corpus state that does not load (its problems are located each).
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

impl crate::Located for QualityError {
    fn location(&self) -> Option<String> {
        match self {
            QualityError::Corpus(e) => crate::Located::location(e),
            QualityError::State(_) => None,
        }
    }

    fn message(&self) -> String {
        match self {
            QualityError::Corpus(e) => crate::Located::message(e),
            QualityError::State(e) => e.to_string(),
        }
    }
}

/// How many of the expected things the text shows, and which it misses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Recall {
    pub expected: usize,
    pub present: usize,
    pub missing: Vec<String>,
}

impl Recall {
    fn check(&mut self, present: bool, what: impl FnOnce() -> String) {
        self.expected = self.expected.saturating_add(1);
        if present {
            self.present = self.present.saturating_add(1);
        } else {
            self.missing.push(what());
        }
    }
}

/// The first-turn message against the target's per-turn budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Budget {
    pub limit: u64,
    pub first_turn_chars: usize,
    pub document_chars: usize,
    pub kept: bool,
}

/// The figures of one rendered document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figures {
    pub changed_files: Recall,
    pub open_problems: Recall,
    /// `None` when there is no user message to look for.
    pub latest_user_message: Option<bool>,
    pub user_instructions: Recall,
    pub leaks: Vec<String>,
    pub budget: Budget,
    /// Texts found cut inside a grapheme cluster (empty when every cut is clean).
    pub broken_graphemes: Vec<String>,
    /// Planted secrets (sentinel [`secrets::SECRET`]) the text shows: must be empty.
    pub secrets_leaked: Vec<String>,
    /// Redactions in texts that hold no planted secret (`RULE in ITEM`): false positives.
    pub false_redactions: Vec<String>,
    /// Characters of what the target reads (the false-positive rate's denominator).
    pub chars_read: usize,
}

/// One (state, target) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DocReport {
    pub state: String,
    pub target: String,
    pub strategy: String,
    /// `off_band` or `inline`; `None` when no document was rendered.
    pub delivery: Option<String>,
    /// `None` when the decision needs no document (`no_handoff`, `native_fork`, `unsupported`).
    pub figures: Option<Figures>,
    /// The decision or rendering failed.
    pub error: Option<String>,
}

/// Totals over every document.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub documents: usize,
    pub errors: usize,
    pub changed_files: Ratio,
    pub open_problems: Ratio,
    pub latest_user_message: Ratio,
    pub user_instructions: Ratio,
    pub leaks: usize,
    pub budget_kept: Ratio,
    pub grapheme_safe: Ratio,
    /// Planted secrets shown, over every document (the gate: 0).
    pub secrets_leaked: usize,
    /// Redactions of text that holds no secret, over every document.
    pub false_redactions: usize,
    /// Characters read, over every document.
    pub chars_read: usize,
}

/// `present` of `expected`, as a percentage (100 when nothing was expected).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ratio {
    pub present: usize,
    pub expected: usize,
    pub percent: f64,
}

impl Ratio {
    fn add(&mut self, present: usize, expected: usize) {
        self.present = self.present.saturating_add(present);
        self.expected = self.expected.saturating_add(expected);
    }
    fn finish(&mut self) {
        self.percent = if self.expected == 0 {
            100.0
        } else {
            // Counts are far below 2^52: exact in f64.
            (self.present as f64) * 100.0 / (self.expected as f64)
        };
    }
    pub fn full(&self) -> bool {
        self.present == self.expected
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QualityReport {
    pub policy: String,
    pub corpus: String,
    pub documents: Vec<DocReport>,
    pub totals: Totals,
    /// Every recall figure at 100%, no leak, every budget kept, no broken grapheme, no error.
    pub pass: bool,
}

/// Measure every state file of `dir` (`*.yaml`, `*.yml`, `*.json`, sorted) under `policy`.
pub fn measure_corpus(policy: &Policy, dir: &Path) -> Result<QualityReport, QualityError> {
    let files = crate::diff::corpus_files(dir)?;
    let mut documents = Vec::new();
    for f in &files {
        let state = crate::state::load_file(f)?;
        documents.extend(measure_state(policy, &state, &name_of(dir, f)));
    }
    Ok(report(policy, &crate::state::display_path(dir), documents))
}

/// Assemble a report from measured documents (totals and the pass verdict).
pub fn report(policy: &Policy, corpus: &str, documents: Vec<DocReport>) -> QualityReport {
    let mut t = Totals {
        documents: documents.len(),
        ..Totals::default()
    };
    for d in &documents {
        if d.error.is_some() {
            t.errors = t.errors.saturating_add(1);
        }
        let Some(f) = &d.figures else { continue };
        t.changed_files
            .add(f.changed_files.present, f.changed_files.expected);
        t.open_problems
            .add(f.open_problems.present, f.open_problems.expected);
        if let Some(ok) = f.latest_user_message {
            t.latest_user_message.add(usize::from(ok), 1);
        }
        t.user_instructions
            .add(f.user_instructions.present, f.user_instructions.expected);
        t.leaks = t.leaks.saturating_add(f.leaks.len());
        t.budget_kept.add(usize::from(f.budget.kept), 1);
        t.grapheme_safe
            .add(usize::from(f.broken_graphemes.is_empty()), 1);
        t.secrets_leaked = t.secrets_leaked.saturating_add(f.secrets_leaked.len());
        t.false_redactions = t.false_redactions.saturating_add(f.false_redactions.len());
        t.chars_read = t.chars_read.saturating_add(f.chars_read);
    }
    for r in [
        &mut t.changed_files,
        &mut t.open_problems,
        &mut t.latest_user_message,
        &mut t.user_instructions,
        &mut t.budget_kept,
        &mut t.grapheme_safe,
    ] {
        r.finish();
    }
    let pass = t.errors == 0
        && t.leaks == 0
        && t.secrets_leaked == 0
        && [
            t.changed_files,
            t.open_problems,
            t.latest_user_message,
            t.user_instructions,
            t.budget_kept,
            t.grapheme_safe,
        ]
        .iter()
        .all(Ratio::full);
    QualityReport {
        policy: policy.name.clone(),
        corpus: corpus.to_string(),
        documents,
        totals: t,
        pass,
    }
}

fn name_of(dir: &Path, f: &Path) -> String {
    f.strip_prefix(dir)
        .map(PathBuf::from)
        .unwrap_or_else(|_| f.to_path_buf())
        .display()
        .to_string()
}

/// The targets a state is rendered for: the four known providers and those it declares.
pub fn targets(state: &State) -> Vec<String> {
    let mut v: Vec<String> = TARGETS.iter().map(|t| t.to_string()).collect();
    for p in state.providers.keys() {
        if !v.contains(p) {
            v.push(p.clone());
        }
    }
    v
}

/// Render `state` for every target (see [`targets`]) and measure each document.
pub fn measure_state(policy: &Policy, state: &State, name: &str) -> Vec<DocReport> {
    targets(state)
        .into_iter()
        .map(|target| measure_one(policy, state, name, &target))
        .collect()
}

fn measure_one(policy: &Policy, state: &State, name: &str, target: &str) -> DocReport {
    let eval = EvalOptions {
        target: Some(target.to_string()),
        document_root: Some(PathBuf::from("/baton-quality")),
    };
    let mut doc = DocReport {
        state: name.to_string(),
        target: target.to_string(),
        strategy: String::new(),
        delivery: None,
        figures: None,
        error: None,
    };
    let outcome = match pipeline::run(policy, state, &eval, &RenderOptions::default()) {
        Ok(o) => o,
        Err(e) => {
            doc.error = Some(crate::error::located(&e));
            return doc;
        }
    };
    doc.strategy = outcome.decision.strategy.as_str().to_string();
    let (Some(rendered), Some(range)) = (&outcome.rendered, &outcome.decision.covered_runs) else {
        return doc;
    };
    doc.delivery = Some(rendered.provenance.delivery.clone());
    let read = if rendered.document_path.is_some() {
        format!("{}\n{}", rendered.inline, rendered.document)
    } else {
        rendered.inline.clone()
    };
    let read = collapse(&read);
    let secrets_leaked = secrets::leaked(&read);
    let chars_read = read.chars().count();
    let runs: Vec<u32> = state
        .runs
        .iter()
        .filter(|r| (range.from..=range.to).contains(&r.ordinal))
        .filter(|r| !matches!(r.status, RunStatus::RolledBack | RunStatus::Running))
        .map(|r| r.ordinal)
        .collect();
    let items = item_contexts(state, &runs);
    let limit = policy
        .provider_caps(state, target)
        .caps
        .max_input_chars_per_turn;
    let first_turn_chars = rendered.inline.chars().count();
    doc.figures = Some(Figures {
        changed_files: changed_files(state, &items, &read),
        open_problems: open_problems(&items, &read),
        latest_user_message: latest_user_message(state, &items, &read),
        user_instructions: user_instructions(state, &items, runs.first().copied(), &read),
        leaks: leaks(state, &read),
        budget: Budget {
            limit,
            first_turn_chars,
            document_chars: rendered.document.chars().count(),
            kept: u64::try_from(first_turn_chars).is_ok_and(|n| n <= limit),
        },
        broken_graphemes: broken_graphemes(state, &items, &read),
        false_redactions: secrets::false_redactions(state, &items, &outcome.decision.redactions),
        secrets_leaked,
        chars_read,
    });
    doc
}

/// `text` with every whitespace run as one space, trimmed.
pub(crate) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn has(read: &str, text: &str) -> bool {
    let t = collapse(text);
    !t.is_empty() && read.contains(&t)
}

fn changed_files(state: &State, items: &[ItemCtx<'_>], read: &str) -> Recall {
    let mut r = Recall::default();
    let mut seen = Vec::new();
    for ctx in items {
        if let Some(Item::FileChange { path, .. }) = ctx.item {
            let shown = display_path(path, state.thread.workspace.as_deref());
            if !seen.contains(&shown) {
                r.check(has(read, &shown), || shown.clone());
                seen.push(shown);
            }
        }
    }
    r
}

pub(crate) fn open_problems(items: &[ItemCtx<'_>], read: &str) -> Recall {
    let mut r = Recall::default();
    for ctx in items.iter().filter(|c| c.is_open()) {
        let present = match ctx.item {
            Some(Item::Approval { text, .. } | Item::Question { text, .. }) => has(read, text),
            Some(Item::Command {
                command, exit_code, ..
            }) => {
                has(read, command) && exit_code.is_none_or(|c| read.contains(&format!("exit {c}")))
            }
            Some(Item::ToolCall { tool, input, .. }) => {
                has(read, tool) && input.as_deref().is_none_or(|i| has(read, i))
            }
            _ => true,
        };
        r.check(present, || ctx.id.clone());
    }
    r
}

fn latest_user_message(state: &State, items: &[ItemCtx<'_>], read: &str) -> Option<bool> {
    let latest = items.iter().rev().find_map(|c| match c.item {
        Some(Item::UserMessage { text, .. }) => Some(text.as_str()),
        _ => None,
    });
    let texts: Vec<&str> = latest
        .into_iter()
        .chain(state.request.message.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return None;
    }
    Some(texts.iter().all(|t| has(read, t)))
}

/// Every sentinel with `prefix` in `text`: the prefix and the letters, digits, `_` and `-`
/// after it.
pub fn sentinels(text: &str, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let tail = text.get(at.saturating_add(prefix.len())..).unwrap_or("");
        let n: usize = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .map(char::len_utf8)
            .sum();
        if n > 0 {
            let s = format!("{prefix}{}", tail.get(..n).unwrap_or(""));
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

fn user_instructions(
    state: &State,
    items: &[ItemCtx<'_>],
    first_run: Option<u32>,
    read: &str,
) -> Recall {
    let mut sources: Vec<&str> = items
        .iter()
        .filter_map(|c| match c.item {
            Some(Item::UserMessage { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if let (Some(cs), Some(first)) = (state.thread.compact_summary.as_deref(), first_run) {
        let through = state.thread.compact_summary_through.unwrap_or(u32::MAX);
        if first <= through && !crate::facts::compact_summary_rolled_back(state) {
            sources.push(cs);
        }
    }
    if state.request.kind == crate::state::RequestKind::Fork {
        if let Some(a) = &state.request.fork_anchor {
            sources.push(&a.text);
        }
    }
    sources.extend(state.request.message.as_deref());
    let mut r = Recall::default();
    let mut seen = Vec::new();
    for s in sources {
        for k in sentinels(s, KEEP) {
            if !seen.contains(&k) {
                r.check(read.contains(&k), || k.clone());
                seen.push(k);
            }
        }
    }
    r
}

fn leaks(state: &State, read: &str) -> Vec<String> {
    let all = serde_json::to_string(state).unwrap_or_default();
    sentinels(&all, LEAK)
        .into_iter()
        .filter(|s| read.contains(s.as_str()))
        .collect()
}

/// Texts of the covered items (and the thread's summary and the request's message) that the
/// text shows cut inside a grapheme cluster: a copy of the text that stops (or starts) at a
/// point inside a cluster. Checked with a 16-character window before (after) each such point.
fn broken_graphemes(state: &State, items: &[ItemCtx<'_>], read: &str) -> Vec<String> {
    const WINDOW: usize = 16;
    const POINTS: usize = 64;
    let mut texts: Vec<(String, &str)> = Vec::new();
    for c in items {
        if let Some(item) = c.item {
            for t in item_texts(item) {
                texts.push((c.id.clone(), t));
            }
        }
    }
    texts.extend(
        state
            .thread
            .compact_summary
            .as_deref()
            .map(|t| ("compact_summary".to_string(), t)),
    );
    texts.extend(
        state
            .request
            .message
            .as_deref()
            .map(|t| ("request.message".to_string(), t)),
    );
    let mut broken = Vec::new();
    for (id, text) in texts {
        let t = collapse(text);
        if t.is_ascii() {
            continue;
        }
        // Char boundaries that are not grapheme boundaries.
        let mut inside = Vec::new();
        for (start, g) in t.grapheme_indices(true) {
            for (off, _) in g.char_indices().skip(1) {
                inside.push(start.saturating_add(off));
                if inside.len() >= POINTS {
                    break;
                }
            }
        }
        let cut_here = inside.iter().any(|&k| {
            let (Some(before), Some(after)) = (t.get(..k), t.get(k..)) else {
                return false;
            };
            let head: String = {
                let n = before.chars().count();
                before.chars().skip(n.saturating_sub(WINDOW)).collect()
            };
            let tail: String = after.chars().take(WINDOW).collect();
            let next = after.chars().next();
            let prev = before.chars().next_back();
            let stops = read
                .match_indices(head.as_str())
                .any(|(at, m)| {
                    read.get(at.saturating_add(m.len())..)
                        .and_then(|r| r.chars().next())
                        != next
                });
            let starts = read
                .match_indices(tail.as_str())
                .any(|(at, _)| read.get(..at).and_then(|r| r.chars().next_back()) != prev);
            stops || starts
        });
        if cut_here && !broken.contains(&id) {
            broken.push(id);
        }
    }
    broken
}

fn item_texts(item: &Item) -> Vec<&str> {
    match item {
        Item::Command {
            command, output, ..
        } => std::iter::once(command.as_str())
            .chain(output.as_deref())
            .collect(),
        Item::ToolCall { input, output, .. } => input
            .as_deref()
            .into_iter()
            .chain(output.as_deref())
            .collect(),
        Item::Plan { steps, .. } => steps.iter().map(|s| s.text.as_str()).collect(),
        Item::FileChange { path, .. } => vec![path.as_str()],
        other => vec![other.primary_text()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_tokens() {
        assert_eq!(
            sentinels("a KEEP-x1 b KEEP-y_2. KEEP-x1 KEEP- z", KEEP),
            ["KEEP-x1", "KEEP-y_2"]
        );
    }

    /// A document that stops inside a ZWJ sequence is caught (the renderer never cuts there
    /// any more, so no policy can produce one for the integration test).
    #[test]
    fn a_cut_inside_a_grapheme_cluster_is_caught() {
        let state: State = serde_yaml::from_str(
            "version: 1\nthread: {id: t}\nrequest: {provider: codex, message: 'the family 👨‍👩‍👧‍👦 whole'}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let whole = broken_graphemes(&state, &[], "- the family 👨‍👩‍👧‍👦 whole");
        assert!(whole.is_empty(), "{whole:?}");
        let family = "👨‍👩‍👧‍👦";
        let cut_at = family.char_indices().nth(2).map_or(0, |(i, _)| i);
        let read = format!("- the family {}...", &family[..cut_at]);
        assert_eq!(broken_graphemes(&state, &[], &read), ["request.message"]);
    }
}

#[cfg(test)]
mod quality_tests;
