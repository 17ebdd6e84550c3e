//! Shadow policies (`baton serve --shadow SPEC`, the `policy/shadow` method): a candidate
//! policy that decides every decision beside the active one and changes nothing (an
//! `explain` or `render` on its state, a `dispatch`, `mergeBack` or `regenerate` on the input
//! the store logged for it). What it decides differently is found by `baton diff`'s own comparison
//! ([`crate::diff::diff_state`]: both policies decide the state, and every changed field is
//! credited to the candidate's rule that decides it), and goes to the decision log
//! (`divergences`) and to the metrics. A candidate that does not check is refused and never
//! touches the active policy.

use super::policy_set::{PolicyHolder, PolicySet};
use crate::diff::{diff_state, DiffOptions, DiffReport, Targets};
use crate::engine::Engine;
use crate::policy::PolicyError;
use crate::state::State;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// A loaded candidate.
#[derive(Debug)]
pub struct Candidate {
    /// The `--shadow` / `policy/shadow` argument.
    pub spec: String,
    /// The checked set (policy, templates, engine, load time).
    pub set: Arc<PolicySet>,
}

/// The shadow slot: empty, or one candidate.
#[derive(Debug, Default)]
pub struct Shadow {
    current: RwLock<Option<Arc<Candidate>>>,
}

impl Shadow {
    /// Load and check a candidate (blocking: file I/O and parsing).
    pub fn load(
        spec: &str,
        templates: Option<PathBuf>,
        document_root: Option<PathBuf>,
    ) -> Result<Arc<Candidate>, PolicyError> {
        let holder = PolicyHolder::load(spec, templates, document_root)?;
        Ok(Arc::new(Candidate {
            spec: spec.to_string(),
            set: holder.current(),
        }))
    }

    /// The candidate deciding beside the active policy now, if any.
    pub fn current(&self) -> Option<Arc<Candidate>> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Put `c` in the slot (or empty it).
    pub fn set(&self, c: Option<Arc<Candidate>>) {
        match self.current.write() {
            Ok(mut g) => *g = c,
            Err(p) => *p.into_inner() = c,
        }
    }

    /// `{name, sha256, spec, loaded_at_ms}` of the candidate, or null.
    pub fn status(&self) -> Value {
        match self.current() {
            None => Value::Null,
            Some(c) => json!({
                "name": c.set.policy.name,
                "sha256": c.set.policy.sha256,
                "spec": c.spec,
                "loaded_at_ms": c.set.loaded_at_ms,
            }),
        }
    }
}

/// What the candidate decides differently from `active` for `state` and `target` (the
/// state's `request.provider` when `None`), as `baton diff --from ACTIVE --to CANDIDATE`
/// reports it: `{policy, changes: [{field, old, new, causes}], error?}`, and the changed
/// field names (for the metrics).
pub fn divergences(
    active: &Engine,
    candidate: &Candidate,
    state: &State,
    target: Option<&str>,
) -> (Value, Vec<String>) {
    let target = target.unwrap_or(&state.request.provider).to_string();
    let opts = DiffOptions {
        targets: Targets::One(target),
    };
    let mut report = DiffReport::default();
    diff_state(
        active,
        &candidate.set.engine,
        state,
        &state.thread.id,
        &opts,
        &mut report,
    );
    let policy = json!({
        "name": candidate.set.policy.name,
        "sha256": candidate.set.policy.sha256,
    });
    let changes: Vec<Value> = report
        .decisions
        .iter()
        .flat_map(|d| d.changes.iter())
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    let mut fields: Vec<String> = report
        .decisions
        .iter()
        .flat_map(|d| d.changes.iter().map(|c| c.field.clone()))
        .collect();
    let mut v = json!({"policy": policy, "changes": changes});
    if let Some(p) = report.problems.first() {
        // One of the two could not decide: the candidate's error is the divergence.
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "error".into(),
                json!({"active": p.old, "shadow": p.new}),
            );
        }
        fields.push("error".into());
    }
    (v, fields)
}

/// What the candidate decides differently from `active` (the decision the store made and
/// logged) when it decides `input` as the store does (its context included), compared as
/// `baton diff` compares ([`crate::diff::compare::compare`]).
pub fn stored_divergences(
    active: &crate::decision::Decision,
    candidate: &Candidate,
    input: &crate::store::DecisionInput,
) -> (Value, Vec<String>) {
    let policy = &candidate.set.policy;
    let mut v = json!({
        "policy": {"name": policy.name, "sha256": policy.sha256},
        "changes": [],
    });
    let fields = match crate::store::decide_input(policy, input) {
        Ok(new) => {
            let changes = crate::diff::compare::compare(active, &new, policy);
            if let Some(o) = v.as_object_mut() {
                o.insert(
                    "changes".into(),
                    serde_json::to_value(&changes).unwrap_or(Value::Null),
                );
            }
            changes.into_iter().map(|c| c.field).collect()
        }
        Err(e) => {
            if let Some(o) = v.as_object_mut() {
                o.insert(
                    "error".into(),
                    json!({"active": null, "shadow": crate::error::located(&e)}),
                );
            }
            vec!["error".to_string()]
        }
    };
    (v, fields)
}
