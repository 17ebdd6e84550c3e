//! Policy unit tests: the YAML test-file model, the runner behind `baton test`, and a small
//! API for testing policies from Rust (with rstest or plain `#[test]`).
//!
//! Public entry points: [`run_paths`] (what `baton test` runs) and [`PolicyUnderTest`]:
//!
//! ```
//! use baton::testing::{PolicyUnderTest, state_from_yaml};
//! let put = PolicyUnderTest::load("default").unwrap();
//! let state = baton::state::load_file("examples/seed-run6.yaml".as_ref()).unwrap();
//! put.decide(&state).unwrap().assert_strategy("full_new").assert_covered_runs(1, 5);
//! # let _ = state_from_yaml;
//! ```
//!
//! Every `assert_*` panics with expected vs actual and the rule that decided, with its values.

pub mod file;
pub mod paths;
pub mod runner;

pub use crate::coverage::{Coverage, FileCoverage, RuleCoverage, RuleId, RuleKind};
pub use crate::select::{RuleHit, SummaryRuleKind};
pub use file::{load as load_test_file, parse_str as parse_test_file, TestFile, TestFileError};
pub use paths::default_paths;
pub use runner::{run_paths, CaseResult, CaseStateError, Mismatch, RunOptions, RunReport};

use crate::decision::Decision;
use crate::eval::EvalOptions;
use crate::pipeline::{Outcome, PipelineError};
use crate::policy::{Policy, PolicyError};
use crate::render::RenderOptions;
use crate::state::State;
use std::path::Path;

/// A policy loaded for testing.
#[derive(Debug, Clone)]
pub struct PolicyUnderTest {
    /// The checked policy.
    pub policy: Policy,
}

/// Parse a state written as YAML text (for inline states in Rust tests).
pub fn state_from_yaml(text: &str) -> Result<State, crate::state::StateError> {
    crate::state::parse_str(text, crate::state::Format::Yaml, "<inline state>")
}

impl PolicyUnderTest {
    /// Load a policy file, directory or shipped profile name (`default`, `t3code`, ...).
    pub fn load(spec: &str) -> Result<PolicyUnderTest, PolicyError> {
        crate::policy::load(spec).map(Self::from_policy)
    }

    /// Test a policy already loaded.
    pub fn from_policy(policy: Policy) -> PolicyUnderTest {
        PolicyUnderTest { policy }
    }

    /// Decide (and render, when the decision needs a handoff) for `request.provider`.
    pub fn decide(&self, state: &State) -> Result<Checked, PipelineError> {
        check(&self.policy, state, None).map(|(c, _)| c)
    }

    /// Decide for `target` instead of `request.provider`.
    pub fn decide_for(&self, state: &State, target: &str) -> Result<Checked, PipelineError> {
        check(&self.policy, state, Some(target)).map(|(c, _)| c)
    }

    /// Load a state file and decide for its `request.provider`.
    pub fn decide_file(&self, path: impl AsRef<Path>) -> Result<Checked, crate::Error> {
        let state = crate::state::load_file(path.as_ref())?;
        Ok(self.decide(&state)?)
    }
}

/// Decide and render, also returning the summary rule evaluations (for coverage).
pub(crate) fn check(
    policy: &Policy,
    state: &State,
    target: Option<&str>,
) -> Result<(Checked, Vec<RuleHit>), PipelineError> {
    let opts = EvalOptions {
        target: target.map(str::to_string),
        document_root: Some(std::env::temp_dir().join("baton-test-docs")),
    };
    // The one path, observing the summary rules; tests never run an external summarizer.
    let setup = crate::pipeline::Setup::of(&opts, &RenderOptions::default());
    let plan = crate::pipeline::plan(policy, state, &setup)?.observe_rules();
    let finished = crate::pipeline::finish_full(plan, &crate::summarize::Deterministic)?;
    Ok((
        Checked {
            outcome: finished.outcome,
        },
        finished.hits,
    ))
}

/// A decision (and its document) to assert on. Each assertion returns `&Self` to chain.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The decision, the selected summary and the rendered handoff (when there is one).
    pub outcome: Outcome,
}

impl Checked {
    /// The decision.
    pub fn decision(&self) -> &Decision {
        &self.outcome.decision
    }

    /// The rendered handoff document, when there is one.
    pub fn document(&self) -> Option<&str> {
        self.outcome.rendered.as_ref().map(|r| r.document.as_str())
    }

    /// `` `strategy full_new` at default.policy:41:3 (stale = [model_changed]; target.model = "o3") ``
    pub fn deciding_rule(&self) -> String {
        let d = &self.outcome.decision;
        let value = |(k, v): (&String, &crate::facts::Value)| {
            format!("{k} = {}", serde_json::to_string(v).unwrap_or_default())
        };
        let values = d
            .deciding_entry()
            .map(|t| {
                t.values
                    .iter()
                    // `stale` itself is printed as the list of held signals.
                    .filter(|(k, _)| k.as_str() != "stale")
                    .map(value)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut parts = vec![format!("stale = [{}]", d.stale.join(", "))];
        parts.extend(values);
        // Why each held signal held.
        for name in &d.stale {
            let label = format!("stale {name}");
            if let Some(t) = d.trace.iter().find(|t| t.rule == label) {
                let vals: Vec<String> = t.values.iter().map(value).collect();
                parts.push(format!("{name}: {}", vals.join(", ")));
            }
        }
        format!(
            "`{}` at {} ({})",
            d.decided_by.rule,
            d.decided_by.at,
            parts.join("; ")
        )
    }

    // An assertion helper for policy unit tests: panicking is how a failed assertion reports.
    #[allow(clippy::panic)]
    #[track_caller]
    fn fail(&self, field: &str, expected: &str, actual: &str) -> ! {
        panic!(
            "{field}: expected {expected}, got {actual}\n  decided by {}",
            self.deciding_rule()
        )
    }

    #[track_caller]
    fn expect(&self, e: &file::Expect) -> &Self {
        if let Some(m) = runner::check_expect(self, e).first() {
            self.fail(&m.field, &m.expected, &m.actual);
        }
        self
    }

    /// Assert every expectation of a test-file `expect:` block given as YAML text.
    // An assertion helper for policy unit tests: panicking is how a failed assertion reports.
    #[allow(clippy::panic)]
    #[track_caller]
    pub fn assert_expect_yaml(&self, yaml: &str) -> &Self {
        match serde_yaml::from_str::<file::Expect>(yaml) {
            Ok(e) => self.expect(&e),
            Err(e) => panic!("invalid expectation: {e}"),
        }
    }

    /// Assert the decision's `strategy` (`"full_new"`).
    #[track_caller]
    pub fn assert_strategy(&self, strategy: &str) -> &Self {
        let got = self.outcome.decision.strategy.as_str();
        if got != strategy {
            self.fail("strategy", strategy, got);
        }
        self
    }

    /// `None` expects no handoff.
    #[track_caller]
    pub fn assert_handoff_strategy(&self, expected: Option<&str>) -> &Self {
        let got = self.outcome.decision.handoff_strategy.map(|h| h.as_str());
        if got != expected {
            self.fail(
                "handoff_strategy",
                expected.unwrap_or("null"),
                got.unwrap_or("null"),
            );
        }
        self
    }

    /// Assert `provider_thread`: its action (`"resume"`) and id (`None` expects none).
    #[track_caller]
    pub fn assert_thread(&self, action: &str, id: Option<&str>) -> &Self {
        let pt = &self.outcome.decision.provider_thread;
        let got = runner::thread(pt.action.as_str(), pt.id.as_deref());
        let want = runner::thread(action, id);
        if got != want {
            self.fail("provider_thread", &want, &got);
        }
        self
    }

    /// Assert `covered_runs` is `from..=to`.
    #[track_caller]
    pub fn assert_covered_runs(&self, from: u32, to: u32) -> &Self {
        let got = self
            .outcome
            .decision
            .covered_runs
            .as_ref()
            .map(|r| (r.from, r.to));
        if got != Some((from, to)) {
            let want = runner::run_range(Some((from, to)));
            self.fail("covered_runs", &want, &runner::run_range(got));
        }
        self
    }

    /// The stale signals exactly, in policy order.
    #[track_caller]
    pub fn assert_stale(&self, signals: &[&str]) -> &Self {
        let got = &self.outcome.decision.stale;
        if got.iter().map(String::as_str).ne(signals.iter().copied()) {
            self.fail("stale", &format!("{signals:?}"), &format!("{got:?}"));
        }
        self
    }

    /// Assert `delivery.mode` (`"off_band"`, `"inline"`, or `"null"` for no delivery).
    #[track_caller]
    pub fn assert_delivery(&self, mode: &str) -> &Self {
        let got = self
            .outcome
            .decision
            .delivery
            .as_ref()
            .map(|d| d.mode.as_str())
            .unwrap_or("null");
        if got != mode {
            self.fail("delivery.mode", mode, got);
        }
        self
    }

    /// Assert the rendered document contains `text` (and that there is a document).
    #[track_caller]
    pub fn assert_document_contains(&self, text: &str) -> &Self {
        match self.document() {
            Some(d) if d.contains(text) => {}
            Some(_) => self.fail("document.contains", &format!("{text:?}"), "not found"),
            None => self.fail("document", "a document", "none"),
        }
        self
    }
}
