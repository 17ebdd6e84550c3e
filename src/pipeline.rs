//! The one main path, in two calls every caller makes (docs/architecture.md#the-one-path):
//!
//! * [`plan`]: decide ([`crate::eval::evaluate_with`], summaries sized by the policy's own
//!   selection rules) in a [`Setup`]: the target, the off-band root resolved once, the
//!   decision context the store passes in (a window's history, a merge-back's numbering, a
//!   waiting handoff), the templates. No I/O.
//! * [`finish`]: select, summarize (through the [`Summarizer`] the caller gives: the
//!   delivery layer's command runner, or [`Deterministic`](crate::summarize::Deterministic)), fit the handoff to its budget
//!   ([`crate::fit`]: degradation, off-band, or `unsupported`) and render it.
//!
//! Fitting is always part of [`finish`], so every caller (the `Engine`, the CLI, the store's
//! dispatch, regenerate, merge-back, rollback advice, stored explain and replay, the
//! service, the language server, `baton test`, `quality` and `diff`) gets the same decision
//! for the same (policy, state, target, context). Delivery of the rendered handoff is the
//! next stage, [`crate::deliver::deliver`].

use crate::decision::Decision;
use crate::eval::{DecisionContext, EvalError, EvalOptions};
use crate::facts::{Facts, Sizer};
use crate::ids::DocumentRoot;
use crate::policy::Policy;
use crate::render::{RenderError, RenderOptions};
use crate::select::{ReusingSizer, RuleHit, Summary};
use std::rc::Rc;
use crate::state::State;
pub use crate::summarize::{Summarizer, SummaryRequest};

/// A decision that could not be made or a handoff that could not be rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The policy asked for a decision the state cannot carry out.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The handoff could not be rendered.
    #[error(transparent)]
    Render(#[from] RenderError),
}

pub use crate::outcome::Outcome;

/// Everything a decision is made in besides the policy and the state.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The provider the next run starts on (`None`: `request.provider`).
    pub target: Option<String>,
    /// The off-band root, resolved once (when the engine is built, or when a store
    /// operation starts).
    pub root: DocumentRoot,
    /// What the store passes in: a window's history, a merge-back's numbering, a waiting
    /// handoff (empty for a state file).
    pub context: DecisionContext,
    /// The templates the handoff is rendered (and measured) with; its `document_root` is
    /// set to `root`.
    pub render: RenderOptions,
}

impl Setup {
    /// The setup of [`EvalOptions`] (its root resolved now) and `render`, with no context.
    pub fn of(eval: &EvalOptions, render: &RenderOptions) -> Setup {
        Setup {
            target: eval.target.clone(),
            root: DocumentRoot::resolve(eval.document_root.clone()),
            context: DecisionContext::default(),
            render: render.clone(),
        }
    }

    /// This setup in `context`.
    #[cfg(any(feature = "unstable", feature = "store"))]
    pub fn in_context(self, context: DecisionContext) -> Setup {
        Setup { context, ..self }
    }
}

/// A decision made, its handoff not yet selected, summarized, fitted or rendered: the first
/// of the two calls (`plan`); `finish` is the second.
pub struct Plan<'a> {
    policy: &'a Policy,
    state: &'a State,
    decision: Decision,
    facts: Facts<'a>,
    /// The facts' sizer, which keeps the selection it sized for `finish` to reuse.
    sizer: Rc<ReusingSizer<'a>>,
    render: RenderOptions,
    observe: bool,
}

impl std::fmt::Debug for Plan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("decision", &self.decision)
            .finish_non_exhaustive()
    }
}

impl<'a> Plan<'a> {
    /// The decision as the ladder made it, before fitting: `finish` may still move its
    /// handoff off-band or make it `unsupported`. Read it to choose what to do next (the
    /// store reloads items when its covered runs reach before those it loaded), never as
    /// the answer.
    pub fn evaluated(&self) -> &Decision {
        &self.decision
    }

    /// Whether the facts of a windowed state fell short of the whole thread's (see
    /// `facts::Facts::window_short`).
    pub fn window_short(&self) -> bool {
        self.facts.window_short()
    }

    /// Record which summary rules selected each item (for rule coverage, `baton test`).
    pub fn observe_rules(mut self) -> Self {
        self.observe = true;
        self
    }

    /// The plan with `decision` in place of the one made (`baton import --render` renders a
    /// decision it adjusted): finishing selects and fits for that decision.
    pub fn with_decision(mut self, decision: Decision) -> Self {
        self.facts.set_outcome(
            Some(decision.strategy.as_str()),
            decision.delivery.as_ref().map(|d| d.mode.as_str()),
        );
        self.decision = decision;
        self
    }
}

/// The first call: decide for `setup` on `state`. Summary sizes are measured by the policy's
/// own selection rules; nothing is selected or rendered yet.
pub fn plan<'a>(
    policy: &'a Policy,
    state: &'a State,
    setup: &Setup,
) -> Result<Plan<'a>, EvalError> {
    let sizer = Rc::new(ReusingSizer::new(policy, state));
    let (decision, facts) = crate::eval::evaluate_with(
        policy,
        state,
        setup.target.as_deref(),
        &setup.root,
        &setup.context,
        Sizer::Shared(sizer.clone()),
    )?;
    let render = RenderOptions {
        document_root: Some(setup.root.path().to_path_buf()),
        ..setup.render.clone()
    };
    Ok(Plan {
        policy,
        state,
        decision,
        facts,
        sizer,
        render,
        observe: false,
    })
}

/// What [`finish_full`] gives besides the outcome.
#[derive(Debug)]
pub struct Finished {
    /// The fitted decision and its handoff.
    pub outcome: Outcome,
    /// The summary rules' evaluations, when the plan observed them.
    pub hits: Vec<RuleHit>,
    /// The windowed facts fell short while fitting (the whole thread must decide).
    pub window_short: bool,
}

/// The second call: select the handoff's items, summarize them with `summarizer` when the
/// policy names an external source, fit the handoff to its budget and render it. A decision
/// that needs no handoff comes back as it was made.
pub fn finish(plan: Plan<'_>, summarizer: &dyn Summarizer) -> Result<Outcome, PipelineError> {
    finish_full(plan, summarizer).map(|f| f.outcome)
}

/// [`finish`], also giving the summary rules' evaluations and whether a windowed state's
/// facts fell short.
pub fn finish_full(
    plan: Plan<'_>,
    summarizer: &dyn Summarizer,
) -> Result<Finished, PipelineError> {
    let Plan {
        policy,
        state,
        decision,
        facts,
        sizer,
        render,
        observe,
    } = plan;
    if !decision.needs_handoff() {
        return Ok(Finished {
            outcome: Outcome {
                decision,
                summary: None,
                rendered: None,
            },
            hits: Vec::new(),
            window_short: facts.window_short(),
        });
    }
    let (summary, hits) = if observe {
        crate::select::select_observed(policy, &facts, &decision)
    } else {
        // The delta sized while deciding (`summary.delta_chars`) is selected once: the sizer
        // hands back its selection when it covered these same runs and no summary rule reads
        // the outcome (`select::ReusingSizer`); otherwise it selects them now.
        let runs = crate::select::decision_runs(&facts, &decision);
        (sizer.select(&facts, &runs), Vec::new())
    };
    let render = summarize(policy, state, &decision, &summary, &render, summarizer);
    let f = crate::fit::fit(policy, state, &facts, decision, summary, &render)?;
    Ok(Finished {
        outcome: Outcome {
            decision: f.decision,
            summary: f.summary,
            rendered: f.rendered,
        },
        hits,
        window_short: facts.window_short(),
    })
}

/// Both calls, with the delivery layer's command runner as the summarizer: what a handoff
/// made for delivery goes through.
#[cfg(any(feature = "unstable", feature = "cli"))]
pub fn run(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let setup = Setup::of(eval, render);
    finish(plan(policy, state, &setup)?, &crate::deliver::CommandRunner)
}

/// Both calls with no external summarizer ([`Deterministic`](crate::summarize::Deterministic)): the fitted decision and the
/// deterministic handoff, what `baton explain` shows.
// Only baton's tests and benchmarks call it (`unstable`).
#[cfg(any(test, feature = "unstable"))]
pub fn explain(
    policy: &Policy,
    state: &State,
    eval: &EvalOptions,
    render: &RenderOptions,
) -> Result<Outcome, PipelineError> {
    let setup = Setup::of(eval, render);
    finish(plan(policy, state, &setup)?, &crate::summarize::Deterministic)
}

/// The fitted decision of [`explain`].
#[cfg(any(test, feature = "unstable"))]
pub fn decide(policy: &Policy, state: &State, opts: &EvalOptions) -> Result<Decision, PipelineError> {
    explain(policy, state, opts, &RenderOptions::default()).map(|o| o.decision)
}

/// [`explain`] on a windowed state (its runs after `history.base`; see
/// [`crate::facts::History`]) in `setup`. `None` when the outcome could differ from the
/// whole thread's: the facts fall short, the covered runs reach before the window, or it
/// fails (the whole thread then decides, and fails, as it would have).
#[cfg(any(feature = "unstable", feature = "store"))]
pub fn explain_windowed(
    policy: &Policy,
    state: &State,
    setup: &Setup,
    history: &crate::facts::History,
    summarizer: &dyn Summarizer,
) -> Option<Outcome> {
    let mut context = setup.context.clone();
    context.history = Some(history.clone());
    let setup = setup.clone().in_context(context);
    let plan = plan(policy, state, &setup).ok()?;
    let reaches_back = plan
        .evaluated()
        .covered_runs
        .as_ref()
        .is_some_and(|c| c.from <= history.base);
    if plan.window_short() || reaches_back {
        return None;
    }
    let finished = finish_full(plan, summarizer).ok()?;
    (!finished.window_short).then_some(finished.outcome)
}

/// The summarizer's output budget when the policy's summary block sets no `budget`.
pub const DEFAULT_SUMMARIZER_BUDGET: usize = 32_000;

/// Ask `summarizer` for the summary text when the policy names an external source, and say
/// in the render options who wrote the summary. It gets the decision, the thread and the
/// selected summary as JSON; any failure falls back to the deterministic sections and is
/// recorded.
fn summarize(
    policy: &Policy,
    state: &State,
    decision: &Decision,
    summary: &Summary,
    render: &RenderOptions,
    summarizer: &dyn Summarizer,
) -> RenderOptions {
    let mut opts = render.clone();
    let Some(source) = policy.summary.as_ref().map(|s| &s.source) else {
        return opts;
    };
    if matches!(source, crate::summarize::SummarySource::Deterministic) {
        return opts;
    }
    let budget = summary.budget.unwrap_or(DEFAULT_SUMMARIZER_BUDGET);
    // The summarizer is outside the thread: it gets the redacted title and selection.
    let input = serde_json::json!({
        "thread": { "id": state.thread.id, "title": summary.redaction.title },
        "budget": budget,
        "decision": decision,
        "summary": summary,
    });
    let request = SummaryRequest {
        source,
        input: &input,
        budget,
    };
    match summarizer.summarize(&request) {
        None => {}
        Some(Ok(text)) => {
            opts.created_by = Some(crate::summarize::created_by(source));
            // Its output goes through the same rules (it saw only redacted text, but may
            // hold a secret of its own making or from its environment).
            let mut cx = summary.redaction.context.clone();
            opts.summary_text = Some(cx.text("summary_text", &text).into_owned());
        }
        Some(Err(failure)) => {
            opts.created_by = Some("deterministic".to_string());
            opts.fallback_reason = Some(failure.kind().to_string());
            opts.fallback_detail = Some(failure.to_string());
            opts.summary_text = None;
        }
    }
    opts
}
