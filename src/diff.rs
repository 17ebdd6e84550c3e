//! Policy diff over a corpus: decide every state with two policy versions and report each
//! decision field that changes.
//!
//! Public entry point: [`diff_corpus`]. Each state is decided for its own `request.provider`.
//! Compared fields: strategy, handoff_strategy, provider_thread, covered_runs, stale,
//! delivery (mode), pregrant (tool).

use crate::decision::Decision;
use crate::eval::EvalOptions;
use crate::policy::Policy;
use crate::testing::runner::{files_in, list, opt_str, run_range, thread};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Why a corpus could not be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error("{0}: error: the corpus is not a readable directory: {1}")]
    Corpus(String, String),
    #[error("{0}: error: the corpus has no state files (*.yaml, *.yml, *.json)")]
    Empty(String),
}

/// One decision field that changed for one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub state: String,
    pub field: String,
    pub old: String,
    pub new: String,
    /// The rule that decides under the new policy, `rule at file:line:col`.
    pub decided_by: String,
}

/// A state neither policy version could decide the same way (a state or evaluation error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateProblem {
    pub state: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct DiffReport {
    pub changes: Vec<Change>,
    /// States with at least one change.
    pub states_changed: usize,
    pub states_compared: usize,
    /// States that failed to load or to decide with one of the versions.
    pub problems: Vec<StateProblem>,
}

impl DiffReport {
    /// `N decisions changed in M states (K states compared)`
    pub fn summary_line(&self) -> String {
        format!(
            "{} decisions changed in {} states ({} states compared)",
            self.changes.len(),
            self.states_changed,
            self.states_compared
        )
    }
}

/// The state files of a corpus directory, sorted.
pub fn corpus_files(dir: &Path) -> Result<Vec<PathBuf>, DiffError> {
    let name = crate::state::display_path(dir);
    let files = files_in(dir, &["yaml", "yml", "json"])
        .map_err(|e| DiffError::Corpus(name.clone(), e.to_string()))?;
    if files.is_empty() {
        return Err(DiffError::Empty(name));
    }
    Ok(files)
}

/// The compared fields of a decision, as (field, printed value), printed as test failures
/// print them.
fn fields(d: &Decision) -> Vec<(&'static str, String)> {
    let pt = &d.provider_thread;
    vec![
        ("strategy", d.strategy.as_str().to_string()),
        (
            "handoff_strategy",
            opt_str(d.handoff_strategy.map(|h| h.as_str())),
        ),
        (
            "provider_thread",
            thread(pt.action.as_str(), pt.id.as_deref()),
        ),
        (
            "covered_runs",
            run_range(d.covered_runs.as_ref().map(|r| (r.from, r.to))),
        ),
        ("stale", list(&d.stale)),
        (
            "delivery",
            opt_str(d.delivery.as_ref().map(|x| x.mode.as_str())),
        ),
        (
            "pregrant",
            opt_str(d.pregrant.as_ref().map(|p| p.tool.as_str())),
        ),
    ]
}

/// Decide every state of `corpus` with `old` and `new` and report what changes.
pub fn diff_corpus(old: &Policy, new: &Policy, corpus: &Path) -> Result<DiffReport, DiffError> {
    let files = corpus_files(corpus)?;
    let mut report = DiffReport::default();
    let opts = EvalOptions::default();
    for f in &files {
        let name = crate::state::display_path(f);
        let state = match crate::state::load_file(f) {
            Ok(s) => s,
            Err(e) => {
                report.problems.push(StateProblem {
                    state: name,
                    old: Some(e.to_string()),
                    new: None,
                });
                continue;
            }
        };
        let a = crate::pipeline::decide(old, &state, &opts);
        let b = crate::pipeline::decide(new, &state, &opts);
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                report.problems.push(StateProblem {
                    state: name,
                    old: a.err().map(|e| e.to_string()),
                    new: b.err().map(|e| e.to_string()),
                });
                continue;
            }
        };
        report.states_compared = report.states_compared.saturating_add(1);
        let mut changed = false;
        for ((field, old_v), (_, new_v)) in fields(&a).into_iter().zip(fields(&b)) {
            if old_v != new_v {
                changed = true;
                report.changes.push(Change {
                    state: name.clone(),
                    field: field.to_string(),
                    old: old_v,
                    new: new_v,
                    decided_by: format!("{} at {}", b.decided_by.rule, b.decided_by.at),
                });
            }
        }
        if changed {
            report.states_changed = report.states_changed.saturating_add(1);
        }
    }
    Ok(report)
}
