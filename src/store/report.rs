//! The JSON of the store's operations, one shape for `baton ... --json` and the service
//! (`baton serve`): snake_case like the decision contract (DESIGN §4), built here once so the
//! CLI and the service are thin shells that print or send the same value.
//!
//! Public entry points: [`DispatchReport`] (dispatch, merge-back, regenerate),
//! [`ImportReport`] (`db import` and `thread/import`), [`RenderReport`] (`render`), [`to_value`] (any result, with or
//! without the decision trace). [`super::Completed`], [`super::RollbackReport`] and
//! [`super::ForkReport`] are serialized as they are.

use super::lifecycle::{Dispatched, HandoffRecord};
use crate::decision::Decision;
use serde::Serialize;
use serde_json::Value;

/// The result of `dispatch`, `merge_back` and `regenerate`: the decision (DESIGN §4, its
/// fields at the top level, as `baton explain --json` prints it) plus what was recorded.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DispatchReport {
    /// The decision, exactly as `baton explain --json` prints it.
    #[serde(flatten)]
    pub decision: Decision,
    /// The handoff recorded for the run, or null.
    pub handoff: Option<HandoffRecord>,
    /// A fork's merge-back the run takes beside a handoff of its own (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_back: Option<HandoffRecord>,
    /// With a native fork (`provider_thread.action` is `fork_native`), where the app forks
    /// the parent's provider thread; null otherwise.
    pub fork_point: Option<super::lifecycle::ForkPoint>,
    /// What the store recorded.
    pub recorded: Recorded,
    /// The run's one first-turn prompt, what the app sends first: the handoff's prompt; with
    /// a merge-back beside a handoff of its own, both in one (the merge-back's, then the
    /// handoff's, the run's message once at the end); with no handoff, the run's message;
    /// null when there is none.
    pub prompt: Option<String>,
}

/// The run a dispatch recorded.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Recorded {
    /// The run started (for a merge-back: the parent's next run, which the handoff is for).
    pub run: u32,
    /// The provider thread the run uses (its new id when one was created), or null.
    pub provider_thread: Option<String>,
    /// Whether a run was started (false for `unsupported`, a merge-back and a regenerate).
    pub started: bool,
}

impl From<Dispatched> for DispatchReport {
    fn from(d: Dispatched) -> DispatchReport {
        DispatchReport {
            decision: d.decision,
            handoff: d.handoff,
            merge_back: d.merge_back,
            fork_point: d.fork_point,
            recorded: Recorded {
                run: d.run,
                provider_thread: d.provider_thread,
                started: d.started,
            },
            prompt: d.prompt,
        }
    }
}

/// The result of importing one thread (`baton db import --json` prints one per file).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ImportReport {
    /// The thread's id.
    pub thread: String,
    /// How many runs it has.
    pub runs: usize,
}

/// The result of the service's `render` (and `baton render --json`): the policy, the decision
/// and the rendered handoff (null when the decision needs none).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RenderReport {
    /// The policy set that decided (the decision's own `policy`).
    pub policy: crate::decision::PolicyRef,
    /// The decision, as `baton explain --json` prints it.
    pub decision: Decision,
    /// The document, the first-turn prompt (`inline`), `document_path`, `inline_note` and
    /// `provenance`; null when no handoff is needed.
    pub handoff: Option<crate::render::Rendered>,
}

impl RenderReport {
    /// The report of a decide-and-render outcome.
    pub fn new(outcome: crate::outcome::Outcome) -> RenderReport {
        RenderReport {
            policy: outcome.decision.policy.clone(),
            decision: outcome.decision,
            handoff: outcome.rendered,
        }
    }
}

/// The result of the service's `explain`: the policy, the decision (what `baton explain
/// --json` prints) and the human explanation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ExplainReport {
    /// The policy set that decided (the decision's own `policy`).
    pub policy: crate::decision::PolicyRef,
    /// The decision, as `baton explain --json` prints it.
    pub decision: Decision,
    /// What `baton explain` prints (with `verbose`, `baton explain --verbose`).
    pub explanation: String,
}

/// `value` as JSON; without `trace`, every decision's `trace` (about 8 KB) is left out: the
/// top-level one of a [`DispatchReport`] and the one under `decision` of an explain or
/// render result.
pub fn to_value<T: Serialize>(value: &T, trace: bool) -> Value {
    let mut v = serde_json::to_value(value).unwrap_or(Value::Null);
    if !trace {
        strip_trace(&mut v);
    }
    v
}

/// Remove a decision's `trace` from `v` (a decision, or an object holding one as
/// `decision`).
pub fn strip_trace(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        if o.contains_key("decided_by") {
            o.remove("trace");
        }
        if let Some(d) = o.get_mut("decision").and_then(Value::as_object_mut) {
            d.remove("trace");
        }
    }
}
