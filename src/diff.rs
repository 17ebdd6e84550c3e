//! Policy diff over a corpus: decide every state with two policy versions, for every provider
//! it involves (or every known provider, or one), and report each decision field that
//! changes, credited to the rule that decides it now.
//!
//! Public entry point: [`diff_corpus`]. Both versions decide through an [`Engine`] as
//! `baton explain` does (decide, select and fit), so the `budget` is compared too. Compared
//! fields: strategy, handoff_strategy, provider_thread, covered_runs, stale, delivery,
//! pregrant and budget ([`compare`]); the budget by its outcome (scope, limits, kept, steps,
//! reasons), not by its sizes, which move with any change of the text. A handoff whose
//! included items drop to zero is reported too (`included`: the new summary selects nothing).

pub mod compare;

pub use compare::Change;
#[cfg(feature = "unstable")]
pub use compare::{Cause, Effect};

use crate::engine::Engine;
use crate::state::State;
use crate::testing::runner::files_in;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Why a corpus could not be compared. `Display` is the message; the corpus or log it is
/// about is [`DiffError::path`] (the `baton` command prints `PATH: error: message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// The corpus directory (`.0`) cannot be read (`.1`: why).
    #[error("the corpus is not a readable directory: {1}")]
    Corpus(String, String),
    /// The corpus directory (`.0`) holds no state file.
    #[error("the corpus has no state files (*.yaml, *.yml, *.json)")]
    Empty(String),
    /// The decision log (`.0`) cannot be read (`.1`: why).
    #[error("cannot read the decision log: {1}")]
    Log(String, String),
    /// No line of the decision log (`.0`) carries the input of its decision (`.1` lines read).
    #[error("no line of the log carries its decision's input ({1} lines read); log inputs with the policy's `log {{ keep input }}` (docs/policy-language.md#log), or export the store's with their inputs")]
    NoInput(String, usize),
    /// The target names a provider that is neither known nor declared by any state.
    #[error("unknown provider \"{0}\"; known providers are claude, codex, copilot, cursor, or those declared under `providers:` in a state of the corpus")]
    UnknownTarget(String),
}

impl crate::error::Located for DiffError {
    fn location(&self) -> Option<String> {
        self.path().map(str::to_string)
    }
}

impl DiffError {
    /// The corpus directory or decision log the error is about (none for an unknown target,
    /// which is about the target asked for).
    pub fn path(&self) -> Option<&str> {
        match self {
            DiffError::Corpus(p, _)
            | DiffError::Empty(p)
            | DiffError::Log(p, _)
            | DiffError::NoInput(p, _) => Some(p),
            DiffError::UnknownTarget(_) => None,
        }
    }
}

/// The providers each state is decided for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Targets {
    /// Every provider the state involves: `request.provider`, the providers of its runs and
    /// provider threads, and those it declares under `providers:` (in name order).
    #[default]
    State,
    /// The four known providers and those the state declares (`--target all`).
    All,
    /// One provider (`--target NAME`); a state that neither knows nor declares it is not
    /// decided for it.
    One(String),
}

impl Targets {
    /// `all` is [`Targets::All`]; any other name is [`Targets::One`].
    pub fn parse(s: &str) -> Targets {
        if s == "all" {
            Targets::All
        } else {
            Targets::One(s.to_string())
        }
    }

    /// The providers `state` is decided for.
    pub fn of(&self, state: &State) -> Vec<String> {
        let known = |p: &str| {
            crate::state::KNOWN_PROVIDERS.contains(&p) || state.providers.contains_key(p)
        };
        match self {
            Targets::State => {
                let mut set: BTreeSet<&str> = BTreeSet::new();
                set.insert(state.request.provider.as_str());
                set.extend(state.runs.iter().map(|r| r.provider.as_str()));
                set.extend(state.provider_threads.iter().map(|p| p.provider.as_str()));
                set.extend(state.providers.keys().map(String::as_str));
                set.into_iter()
                    .filter(|p| known(p))
                    .map(str::to_string)
                    .collect()
            }
            Targets::All => {
                let mut v: Vec<String> = crate::state::KNOWN_PROVIDERS
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                for p in state.providers.keys() {
                    if !v.contains(p) {
                        v.push(p.clone());
                    }
                }
                v
            }
            Targets::One(p) if known(p) => vec![p.clone()],
            Targets::One(_) => Vec::new(),
        }
    }
}

/// Options of a corpus diff.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// The providers each state is decided for.
    pub targets: Targets,
}

/// One (state, target) whose decision changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionDiff {
    /// The state file, as given.
    pub state: String,
    /// The provider decided for.
    pub target: String,
    /// The run about to start.
    pub run: u32,
    /// Every field that changed, in decision order.
    pub changes: Vec<Change>,
}

/// A state, or a (state, target), that could not be compared: a state that does not load, or
/// a decision one of the versions cannot make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateProblem {
    /// The state file, as given.
    pub state: String,
    /// The provider, or `None` when the state itself did not load.
    pub target: Option<String>,
    /// The old policy's error (or the state's own).
    pub old: Option<String>,
    /// The new policy's error.
    pub new: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct DiffReport {
    /// Decisions (state, target) made by both versions and compared.
    pub decisions_compared: usize,
    /// Decisions with at least one changed field.
    pub decisions_changed: usize,
    /// Changed fields over all decisions.
    pub fields_changed: usize,
    /// States with at least one compared decision.
    pub states_compared: usize,
    /// States with at least one changed decision.
    pub states_changed: usize,
    /// The changed decisions, in corpus then target order.
    pub decisions: Vec<DecisionDiff>,
    /// What could not be compared.
    pub problems: Vec<StateProblem>,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl DiffReport {
    /// `N of M decisions changed (K fields) in S of T states`, and `; P skipped` when
    /// something could not be compared.
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{} of {} changed ({}) in {} of {}",
            self.decisions_changed,
            plural(self.decisions_compared, "decision", "decisions"),
            plural(self.fields_changed, "field", "fields"),
            self.states_changed,
            plural(self.states_compared, "state", "states"),
        );
        if !self.problems.is_empty() {
            line.push_str(&format!("; {} skipped", self.problems.len()));
        }
        line
    }

    /// The human report: per changed decision a `STATE -> TARGET:` line and one line per
    /// field, then [`DiffReport::summary_line`].
    pub fn text(&self) -> String {
        let mut out = String::new();
        for d in &self.decisions {
            out.push_str(&format!("{} -> {}:\n", d.state, d.target));
            for c in &d.changes {
                out.push_str(&format!("  {}\n", c.text()));
            }
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
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

/// Decide `state` (shown as `name`) with both engines for every target of `opts` and add
/// what changed to `report`.
pub fn diff_state(
    old: &Engine,
    new: &Engine,
    state: &State,
    name: &str,
    opts: &DiffOptions,
    report: &mut DiffReport,
) {
    let mut compared = false;
    let mut changed = false;
    // Decide, select and fit, as `Engine::decide` does, keeping the selection: its included
    // items are compared too.
    let decide = |engine: &Engine, target: &str| {
        let plan = engine.plan(state, Some(target), &crate::engine::Context::default())?;
        engine.finish(plan, &crate::summarize::Deterministic)
    };
    for target in opts.targets.of(state) {
        let a = decide(old, &target);
        let b = decide(new, &target);
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                report.problems.push(StateProblem {
                    state: name.to_string(),
                    target: Some(target),
                    old: a.err().map(|e| crate::error::located(&e)),
                    new: b.err().map(|e| crate::error::located(&e)),
                });
                continue;
            }
        };
        compared = true;
        report.decisions_compared = report.decisions_compared.saturating_add(1);
        let mut changes = compare::compare(&a.decision, &b.decision, new.policy());
        changes.extend(compare::included_dropped(&a, &b, new.policy()));
        if changes.is_empty() {
            continue;
        }
        changed = true;
        report.decisions_changed = report.decisions_changed.saturating_add(1);
        report.fields_changed = report.fields_changed.saturating_add(changes.len());
        report.decisions.push(DecisionDiff {
            state: name.to_string(),
            target,
            run: b.decision.run,
            changes,
        });
    }
    if compared {
        report.states_compared = report.states_compared.saturating_add(1);
    }
    if changed {
        report.states_changed = report.states_changed.saturating_add(1);
    }
}

/// Decide every state of `corpus` with `old` and `new` and report what changes.
pub fn diff_corpus(
    old: &Engine,
    new: &Engine,
    corpus: &Path,
    opts: &DiffOptions,
) -> Result<DiffReport, DiffError> {
    let files = corpus_files(corpus)?;
    let mut report = DiffReport::default();
    let mut target_known = match &opts.targets {
        Targets::One(p) => crate::state::KNOWN_PROVIDERS.contains(&p.as_str()),
        _ => true,
    };
    for f in &files {
        let name = crate::state::display_path(f);
        let state = match crate::state::load_file(f) {
            Ok(s) => s,
            Err(e) => {
                report.problems.push(StateProblem {
                    state: name,
                    target: None,
                    old: Some(e.to_string()),
                    new: None,
                });
                continue;
            }
        };
        target_known = target_known || !opts.targets.of(&state).is_empty();
        diff_state(old, new, &state, &name, opts, &mut report);
    }
    match &opts.targets {
        Targets::One(p) if !target_known => Err(DiffError::UnknownTarget(p.clone())),
        _ => Ok(report),
    }
}

/// Decide again, with `old` and `new`, every decision of a decision log (`baton serve
/// --decision-log`, `baton log export`) whose line carries its input (`input.state`; a policy
/// logs it with `log { keep input }`), for the line's target (or `opts`' targets when they
/// name one), and report what changes as [`diff_corpus`] does. Each decision is named
/// `LOG:LINE`. Lines without an input are passed over; a log none of whose lines has one is an
/// error.
pub fn diff_log(
    old: &Engine,
    new: &Engine,
    log: &Path,
    opts: &DiffOptions,
) -> Result<DiffReport, DiffError> {
    let name = crate::state::display_path(log);
    let text = std::fs::read_to_string(log)
        .map_err(|e| DiffError::Log(name.clone(), crate::state::io_reason(&e)))?;
    let mut report = DiffReport::default();
    let (mut lines, mut with_input) = (0usize, 0usize);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        lines = lines.saturating_add(1);
        let at = format!("{name}:{}", i.saturating_add(1));
        let v: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                report.problems.push(StateProblem {
                    state: at,
                    target: None,
                    old: Some(format!(
                        "{name}:{}: error: not a JSON line: {e}",
                        i.saturating_add(1)
                    )),
                    new: None,
                });
                continue;
            }
        };
        let Some(input) = v.pointer("/input/state") else {
            continue;
        };
        with_input = with_input.saturating_add(1);
        let text = input.to_string();
        let state = match crate::state::parse_str(&text, crate::state::Format::Json, &at) {
            Ok(s) => s,
            Err(e) => {
                report.problems.push(StateProblem {
                    state: at,
                    target: None,
                    old: Some(e.to_string()),
                    new: None,
                });
                continue;
            }
        };
        let target = v
            .pointer("/input/target")
            .and_then(serde_json::Value::as_str)
            .or_else(|| v.get("target").and_then(serde_json::Value::as_str))
            .unwrap_or(&state.request.provider)
            .to_string();
        let line_opts = match &opts.targets {
            Targets::One(_) => opts.clone(),
            _ => DiffOptions {
                targets: Targets::One(target),
            },
        };
        diff_state(old, new, &state, &at, &line_opts, &mut report);
    }
    if with_input == 0 {
        return Err(DiffError::NoInput(name, lines));
    }
    Ok(report)
}
