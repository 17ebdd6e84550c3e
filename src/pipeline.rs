//! The whole pipeline in one call: decide, select, render. The CLI and the service use this.

use crate::decision::Decision;
use crate::eval::{EvalError, EvalOptions};
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
    crate::eval::decide(policy, state, opts, &PolicySizer { policy })
}

/// Decide, then select and render the handoff if the decision needs one.
pub fn run(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let sizer = PolicySizer { policy };
    let (mut decision, facts) = crate::eval::evaluate(policy, state, eval, &sizer)?;
    if !decision.needs_handoff() {
        return Ok(Outcome {
            decision,
            summary: None,
            rendered: None,
        });
    }
    let summary = crate::select::select(policy, &facts, &decision);
    let rendered = crate::render::render(policy, state, &decision, &summary, render)?;
    if let (Some(d), Some(note)) = (decision.delivery.as_mut(), rendered.inline_note.clone()) {
        d.inline_note = Some(note);
    }
    Ok(Outcome {
        decision,
        summary: Some(summary),
        rendered: Some(rendered),
    })
}
