//! Shared helpers: build a state from YAML, run a shipped profile over it.

use baton::eval::EvalOptions;
use baton::pipeline::{run, Outcome};
use baton::render::RenderOptions;
use baton::State;
use std::path::PathBuf;

/// Off-band documents are never written by these tests; their paths only need a fixed root.
pub const DOC_ROOT: &str = "/tmp/baton-peer-tests";

pub fn state(yaml: &str) -> State {
    baton::testing::state_from_yaml(yaml).expect("the state is valid")
}

pub fn outcome_with(policy: &str, state: &State, render: &RenderOptions) -> Outcome {
    outcome_in(policy, state, render, PathBuf::from(DOC_ROOT))
}

/// The pipeline with off-band documents under `root`.
pub fn outcome_in(policy: &str, state: &State, render: &RenderOptions, root: PathBuf) -> Outcome {
    let policy = baton::policy::load(policy).expect("the shipped profile checks");
    let eval = EvalOptions {
        target: None,
        document_root: Some(root),
    };
    run(&policy, state, &eval, render).expect("the pipeline runs")
}

pub fn outcome(policy: &str, state: &State) -> Outcome {
    outcome_with(policy, state, &RenderOptions::default())
}

/// The handoff document (t3code: the handoff's summary text plus one closing newline).
pub fn document(policy: &str, state: &State) -> String {
    outcome(policy, state)
        .rendered
        .expect("a handoff is rendered")
        .document
}

/// The first-turn prompt (t3code: the provider message).
pub fn prompt(policy: &str, state: &State) -> String {
    outcome(policy, state)
        .rendered
        .expect("a handoff is rendered")
        .inline
}
