//! The whole pipeline in one call: decide, select, summarize (an external summarizer when the
//! policy names one), render. The CLI and the service use this; delivery of the rendered
//! handoff is the next stage, [`crate::deliver::deliver`].

use crate::decision::Decision;
use crate::eval::{EvalError, EvalOptions};
use crate::facts::Facts;
use crate::policy::Policy;
use crate::render::{RenderError, RenderOptions};
use crate::select::{PolicySizer, Summary};
use crate::state::State;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Render(#[from] RenderError),
}

pub use crate::outcome::Outcome;

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
    let (decision, facts) = crate::eval::evaluate(policy, state, eval, &sizer)?;
    finish(policy, state, decision, &facts, render)
}

/// The rest of [`run`] once `decision` is made from `facts`: select, summarize and render
/// the handoff if the decision needs one. For callers that evaluate themselves (the store
/// renumbers a merge-back's decision for the parent thread, and decides again on more
/// items when a dispatch's decision reaches before the items it loaded).
pub fn finish(
    policy: &Policy,
    state: &State,
    decision: Decision,
    facts: &Facts<'_>,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    if !decision.needs_handoff() {
        return Ok(Outcome {
            decision,
            summary: None,
            rendered: None,
        });
    }
    let summary = crate::select::select(policy, facts, &decision);
    let render = summarize(policy, state, &decision, &summary, render);
    fit_selected(policy, state, facts, decision, summary, &render)
}

/// Fit the handoff of `decision`, selected as `summary`, to its budget and render it
/// ([`crate::fit`]): degradation steps, delivery moved off-band, or `unsupported` when what
/// the next provider must act on cannot reach it.
pub fn fit_selected(
    policy: &Policy,
    state: &State,
    facts: &Facts<'_>,
    decision: Decision,
    summary: Summary,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let f = crate::fit::fit(policy, state, facts, decision, summary, render)?;
    Ok(Outcome {
        decision: f.decision,
        summary: f.summary,
        rendered: f.rendered,
    })
}

/// Decide, select and fit the handoff to its budget, without running an external
/// summarizer: what `baton explain` shows (the decision with its `budget`). `render` names the
/// templates the handoff is measured with; its document root is `eval`'s.
pub fn explain(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let sizer = PolicySizer { policy };
    let (decision, facts) = crate::eval::evaluate(policy, state, eval, &sizer)?;
    if !decision.needs_handoff() {
        return Ok(Outcome {
            decision,
            summary: None,
            rendered: None,
        });
    }
    let summary = crate::select::select(policy, &facts, &decision);
    let render = RenderOptions {
        document_root: eval.document_root.clone(),
        ..render.clone()
    };
    fit_selected(policy, state, &facts, decision, summary, &render)
}

/// [`explain`] on a windowed state (its runs after `history.base`; see
/// [`crate::facts::History`]). `None` when the outcome could differ from [`explain`]'s on the
/// whole thread: the facts fall short, the covered runs reach before the window, or it fails
/// (the whole thread then decides, and fails, as it would have).
pub fn explain_windowed(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
    history: &crate::facts::History,
) -> Option<Outcome> {
    let sizer = PolicySizer { policy };
    let cx = crate::eval::DecisionContext {
        history: Some(history.clone()),
        ..Default::default()
    };
    let (decision, facts) = crate::eval::evaluate_in(policy, state, eval, &cx, &sizer).ok()?;
    let reaches_back = decision
        .covered_runs
        .as_ref()
        .is_some_and(|c| c.from <= history.base);
    if facts.window_short() || reaches_back {
        return None;
    }
    if !decision.needs_handoff() {
        return Some(Outcome {
            decision,
            summary: None,
            rendered: None,
        });
    }
    let summary = crate::select::select(policy, &facts, &decision);
    let render = RenderOptions {
        document_root: eval.document_root.clone(),
        ..render.clone()
    };
    let outcome = fit_selected(policy, state, &facts, decision, summary, &render).ok()?;
    (!facts.window_short()).then_some(outcome)
}

/// Render the handoff of `decision` from an already selected `summary` (no summarizer runs;
/// `render` says who wrote it), and carry the inline note into the decision, without fitting
/// it to a budget ([`fit_selected`] does both).
pub fn render_selected(
    policy: &Policy,
    state: &State,
    mut decision: Decision,
    summary: Summary,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
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

/// The summarizer's output budget when the policy's summary block sets no `budget`.
pub const DEFAULT_SUMMARIZER_BUDGET: usize = 32_000;

/// Run the policy's external summarizer, if it names one, and say in the render options who
/// wrote the summary. The command gets the decision, the thread and the selected summary
/// as JSON on stdin; any failure falls back to the deterministic sections and is recorded.
fn summarize(
    policy: &Policy,
    state: &State,
    decision: &Decision,
    summary: &Summary,
    render: &RenderOptions,
) -> RenderOptions {
    let mut opts = render.clone();
    let Some(source) = policy.summary.as_ref().map(|s| &s.source) else {
        return opts;
    };
    let Some(cmd) = crate::deliver::ExternalCommand::from_source(source) else {
        return opts;
    };
    let budget = summary.budget.unwrap_or(DEFAULT_SUMMARIZER_BUDGET);
    // The summarizer is outside the thread: it gets the redacted title and selection.
    let input = serde_json::json!({
        "thread": { "id": state.thread.id, "title": summary.redaction.title },
        "budget": budget,
        "decision": decision,
        "summary": summary,
    });
    match crate::deliver::run_external_blocking(&cmd, &input, budget) {
        Ok(text) => {
            opts.created_by = Some(crate::deliver::created_by(source));
            // Its output goes through the same rules (it saw only redacted text, but may
            // hold a secret of its own making or from its environment).
            let mut cx = summary.redaction.context.clone();
            opts.summary_text = Some(cx.text("summary_text", &text).into_owned());
        }
        Err(failure) => {
            opts.created_by = Some("deterministic".to_string());
            opts.fallback_reason = Some(failure.kind().to_string());
            opts.fallback_detail = Some(failure.to_string());
            opts.summary_text = None;
        }
    }
    opts
}
