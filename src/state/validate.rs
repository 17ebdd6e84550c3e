//! Cross-reference checks that serde cannot express. Every problem names its path.

use super::{item_id, State, StateProblem, KNOWN_PROVIDERS};
use std::collections::{HashMap, HashSet};

struct Problems(Vec<StateProblem>);

impl Problems {
    fn add(&mut self, at: impl Into<String>, message: impl Into<String>) {
        self.0.push(StateProblem {
            at: at.into(),
            line: None,
            column: None,
            message: message.into(),
        });
    }
}

fn known(state: &State, provider: &str) -> bool {
    KNOWN_PROVIDERS.contains(&provider) || state.providers.contains_key(provider)
}

fn unknown_provider(state: &State, provider: &str) -> String {
    let mut names: Vec<&str> = KNOWN_PROVIDERS.to_vec();
    names.extend(state.providers.keys().map(|s| s.as_str()));
    names.sort();
    names.dedup();
    let hint = crate::suggest::did_you_mean(provider, names.iter().copied())
        .map(|s| format!("did you mean \"{s}\"? "))
        .unwrap_or_default();
    format!(
        "unknown provider \"{provider}\"; {hint}known providers are {}; declare others under `providers:`",
        names.join(", ")
    )
}

pub(super) fn validate(state: &State) -> Vec<StateProblem> {
    let mut p = Problems(Vec::new());
    version_and_id(state, &mut p);
    let pts = provider_threads(state, &mut p);
    // Handoff ids first, so runs can refer to them.
    let handoff_ids = handoff_ids(state, &mut p);
    runs(state, &pts, &handoff_ids, &mut p);
    handoffs(state, &pts, &handoff_ids, &mut p);
    transfers(state, &handoff_ids, &mut p);
    run_references(state, &mut p);
    request(state, &mut p);
    p.0
}

/// The state's version and the thread's id.
fn version_and_id(state: &State, p: &mut Problems) {
    if state.version != 1 {
        p.add(
            "version",
            format!(
                "unsupported state version {}; this baton reads version 1",
                state.version
            ),
        );
    }
    if state.thread.id.trim().is_empty() {
        p.add("thread.id", "must not be empty");
    } else if state.thread.id.chars().any(char::is_control) {
        // It is printed in documents, prompts, logs and terminals.
        p.add(
            "thread.id",
            format!(
                "{:?} contains a control character (a line break, tab or escape code); thread ids are printed in documents, prompts and logs",
                state.thread.id
            ),
        );
    } else if let Err(crate::ids::InvalidId { why, .. }) =
        crate::ids::validate_id("thread id", &state.thread.id)
    {
        // The thread id names the directory of its off-band documents and pre-grants.
        p.add(
            "thread.id",
            format!("{why}: the thread id becomes a directory name for its handoff documents"),
        );
    }
}

/// Provider threads: ids unique, providers known. Their providers, by id.
fn provider_threads<'s>(state: &'s State, p: &mut Problems) -> HashMap<&'s str, &'s str> {
    let mut pts: HashMap<&str, &str> = HashMap::new();
    for (i, pt) in state.provider_threads.iter().enumerate() {
        if pt.id.trim().is_empty() {
            p.add(format!("provider_threads[{i}].id"), "must not be empty");
        }
        if pts.insert(pt.id.as_str(), pt.provider.as_str()).is_some() {
            p.add(
                format!("provider_threads[{i}].id"),
                format!("duplicate provider thread id \"{}\"", pt.id),
            );
        }
        if !known(state, &pt.provider) {
            p.add(
                format!("provider_threads[{i}].provider"),
                unknown_provider(state, &pt.provider),
            );
        }
    }
    pts
}

/// The handoff ids, each once.
fn handoff_ids<'s>(state: &'s State, p: &mut Problems) -> HashSet<&'s str> {
    let mut handoff_ids: HashSet<&str> = HashSet::new();
    for (i, h) in state.handoffs.iter().enumerate() {
        if !handoff_ids.insert(h.id.as_str()) {
            p.add(
                format!("handoffs[{i}].id"),
                format!("duplicate handoff id \"{}\"", h.id),
            );
        }
    }
    handoff_ids
}

/// Runs: ordinals in order, providers and provider threads known, references resolved,
/// only the last one running, item ids unique.
fn runs(state: &State, pts: &HashMap<&str, &str>, handoff_ids: &HashSet<&str>, p: &mut Problems) {
    let mut item_ids: HashMap<String, String> = HashMap::new();
    for (i, run) in state.runs.iter().enumerate() {
        let expected = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(1);
        if run.ordinal != expected {
            p.add(
                format!("runs[{i}].ordinal"),
                format!(
                    "expected ordinal {expected}, found {}: ordinals run 1, 2, 3, ... with no gaps, in order",
                    run.ordinal
                ),
            );
        }
        if !known(state, &run.provider) {
            p.add(
                format!("runs[{i}].provider"),
                unknown_provider(state, &run.provider),
            );
        }
        if let Some(pt) = &run.provider_thread {
            match pts.get(pt.as_str()) {
                None => p.add(
                    format!("runs[{i}].provider_thread"),
                    format!(
                        "unknown provider thread \"{pt}\"; declare it under `provider_threads:`"
                    ),
                ),
                Some(prov) if *prov != run.provider => p.add(
                    format!("runs[{i}].provider_thread"),
                    format!(
                        "provider thread \"{pt}\" belongs to {prov}, but the run is on {}",
                        run.provider
                    ),
                ),
                _ => {}
            }
        }
        if let Some(h) = &run.handoff {
            if !handoff_ids.contains(h.as_str()) {
                p.add(
                    format!("runs[{i}].handoff"),
                    format!("unknown handoff \"{h}\""),
                );
            }
        }
        if run.status == super::RunStatus::Running && i.saturating_add(1) != state.runs.len() {
            p.add(
                format!("runs[{i}].status"),
                "only the last run can be running",
            );
        }
        for (j, item) in run.items.iter().enumerate() {
            let id = item_id(item, run.ordinal, j);
            let here = format!("runs[{i}].items[{j}]");
            if let Some(prev) = item_ids.insert(id.clone(), here.clone()) {
                p.add(
                    format!("{here}.id"),
                    format!("duplicate item id \"{id}\" (also at {prev})"),
                );
            }
        }
    }
}

/// Handoffs: ranges within the thread, references resolved.
fn handoffs(
    state: &State,
    pts: &HashMap<&str, &str>,
    handoff_ids: &HashSet<&str>,
    p: &mut Problems,
) {
    let n = u32::try_from(state.runs.len()).unwrap_or(u32::MAX);
    let transfer_ids: HashSet<&str> = state.transfers.iter().map(|t| t.id.as_str()).collect();
    for (i, h) in state.handoffs.iter().enumerate() {
        let at = format!("handoffs[{i}]");
        if h.covered.from == 0 || h.covered.from > h.covered.to {
            p.add(
                format!("{at}.covered"),
                format!(
                    "invalid run range {}-{}: `from` must be at least 1 and not after `to`",
                    h.covered.from, h.covered.to
                ),
            );
        } else if h.covers_own_runs(&state.thread.id) && h.covered.to > n {
            p.add(
                format!("{at}.covered"),
                format!(
                    "covers runs {}-{} but the thread has {} run{}",
                    h.covered.from,
                    h.covered.to,
                    n,
                    if n == 1 { "" } else { "s" }
                ),
            );
        }
        if let Some(t) = h.target_run {
            if t == 0 || t > n.saturating_add(1) {
                p.add(
                    format!("{at}.target_run"),
                    format!("run {t} does not exist (the thread has {n} runs)"),
                );
            }
        }
        for (k, f) in h.from_provider_threads.iter().enumerate() {
            if !pts.contains_key(f.as_str()) {
                p.add(
                    format!("{at}.from_provider_threads[{k}]"),
                    format!("unknown provider thread \"{f}\""),
                );
            }
        }
        if let Some(to) = &h.to_provider_thread {
            if !pts.contains_key(to.as_str()) {
                p.add(
                    format!("{at}.to_provider_thread"),
                    format!("unknown provider thread \"{to}\""),
                );
            }
        }
        if let Some(t) = &h.transfer {
            if !transfer_ids.contains(t.as_str()) {
                p.add(
                    format!("{at}.transfer"),
                    format!("unknown transfer \"{t}\""),
                );
            }
        }
        if let Some(s) = &h.supersedes {
            if !handoff_ids.contains(s.as_str()) {
                p.add(
                    format!("{at}.supersedes"),
                    format!("unknown handoff \"{s}\""),
                );
            }
        }
    }
}

/// Transfers: ids unique, handoffs resolved.
fn transfers(state: &State, handoff_ids: &HashSet<&str>, p: &mut Problems) {
    let mut seen_t: HashSet<&str> = HashSet::new();
    for (i, t) in state.transfers.iter().enumerate() {
        if !seen_t.insert(t.id.as_str()) {
            p.add(
                format!("transfers[{i}].id"),
                format!("duplicate transfer id \"{}\"", t.id),
            );
        }
        if let Some(h) = &t.handoff {
            if !handoff_ids.contains(h.as_str()) {
                p.add(
                    format!("transfers[{i}].handoff"),
                    format!("unknown handoff \"{h}\""),
                );
            }
        }
    }
}

/// Checkpoints and the thread's compaction and fork point: the runs they name exist.
fn run_references(state: &State, p: &mut Problems) {
    let n = u32::try_from(state.runs.len()).unwrap_or(u32::MAX);
    // Checkpoints.
    for (i, c) in state.checkpoints.iter().enumerate() {
        if c.run == 0 || c.run > n {
            p.add(
                format!("checkpoints[{i}].run"),
                format!("run {} does not exist (the thread has {n} runs)", c.run),
            );
        }
    }

    // Thread.
    if let Some(t) = state.thread.compact_summary_through {
        if t > n {
            p.add(
                "thread.compact_summary_through",
                format!("run {t} does not exist (the thread has {n} runs)"),
            );
        }
    }
    if let Some(parent) = &state.thread.parent {
        if parent.thread == state.thread.id {
            p.add(
                "thread.parent.thread",
                format!(
                    "thread \"{}\" cannot be its own parent: a fork names the thread it was forked from",
                    parent.thread
                ),
            );
        }
        if parent.run == 0 || parent.run > n {
            p.add(
                "thread.parent.run",
                format!(
                    "fork point run {} does not exist: a fork's state lists the parent's runs 1..{} it inherits (the thread has {n} runs)",
                    parent.run, parent.run
                ),
            );
        }
    }
}

/// The request: its provider known, its kind and fork anchor consistent with the thread.
fn request(state: &State, p: &mut Problems) {
    if !known(state, &state.request.provider) {
        p.add(
            "request.provider",
            unknown_provider(state, &state.request.provider),
        );
    }
    match state.request.kind {
        super::RequestKind::Fork | super::RequestKind::MergeBack
            if state.thread.parent.is_none() =>
        {
            p.add(
                "request.kind",
                format!(
                    "`{}` needs a forked thread: set `thread.parent: {{thread: ID, run: N}}`",
                    state.request.kind.as_str()
                ),
            );
        }
        _ => {}
    }
    if state.request.fork_anchor.is_some() && state.request.kind != super::RequestKind::Fork {
        p.add(
            "request.fork_anchor",
            "a fork anchor only applies to `kind: fork`",
        );
    }
}
