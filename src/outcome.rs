//! The result of the whole main path: a decision and, when it needs one, the handoff.

use crate::decision::Decision;
use crate::render::Rendered;
use crate::select::Summary;

/// A decision and, when it needs one, the handoff.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What the policy decided, with its trace.
    pub decision: Decision,
    /// The selected items, when the decision needs a handoff.
    pub summary: Option<Summary>,
    /// The rendered handoff (document, inline prompt, provenance), when it needs one.
    pub rendered: Option<Rendered>,
}
