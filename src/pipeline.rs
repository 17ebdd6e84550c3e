//! The whole pipeline in one call: decide, select, render. The CLI and the service use this.

use crate::decision::Decision;
use crate::eval::{EvalError, EvalOptions};
use crate::facts::Facts;
use crate::policy::Policy;
use crate::render::{RenderError, RenderOptions, Rendered};
use crate::select::{PolicySizer, Summary};
use crate::state::State;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// A decision and, when it needs one, the handoff.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub decision: Decision,
    pub summary: Option<Summary>,
    pub rendered: Option<Rendered>,
}

/// Decide with summary sizes measured by the policy's own selection rules.
pub fn decide(policy: &Policy, state: &State, opts: &EvalOptions) -> Result<Decision, EvalError> {
    let target = opts
        .target
        .clone()
        .unwrap_or_else(|| state.request.provider.clone());
    let sizer = PolicySizer { policy, target };
    crate::eval::decide(policy, state, opts, &sizer)
}

/// Decide, then select and render the handoff if the decision needs one.
pub fn run(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let mut decision = decide(policy, state, eval)?;
    if !decision.needs_handoff() {
        return Ok(Outcome {
            decision,
            summary: None,
            rendered: None,
        });
    }
    let rough = crate::eval::RoughSizer;
    let eligible = crate::eval::eligible_runs(policy, state, &rough, &decision.target);
    let facts = Facts::new(state, &decision.target, eligible, &rough);
    let summary = crate::select::select(policy, state, &facts, &decision);
    let mut render = render.clone();
    if render.document_root.is_none() {
        render.document_root = eval.document_root.clone();
    }
    let rendered = crate::render::render(policy, state, &decision, &summary, &render)?;
    if let (Some(d), Some(note)) = (decision.delivery.as_mut(), rendered.inline_note.clone()) {
        d.inline_note = Some(note);
    }
    Ok(Outcome {
        decision,
        summary: Some(summary),
        rendered: Some(rendered),
    })
}
