//! The decision (DESIGN §4, contract): what `baton explain --json` prints.

use crate::facts::Value;
use crate::policy::Strategy;
use crate::state::{HandoffStrategy, RunRange};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Decision {
    pub policy: PolicyRef,
    pub target: String,
    pub strategy: Strategy,
    pub handoff_strategy: Option<HandoffStrategy>,
    pub provider_thread: ProviderThreadAction,
    pub covered_runs: Option<RunRange>,
    pub stale: Vec<String>,
    pub delivery: Option<Delivery>,
    pub pregrant: Option<Pregrant>,
    /// Ordinal of the run about to start.
    pub run: u32,
    /// Id the new handoff gets when one is made.
    pub handoff_id: Option<String>,
    /// The ladder rule that decided.
    pub decided_by: DecidedBy,
    /// The budget the handoff was fitted to (set once the handoff is rendered; absent for a
    /// decision without one, and from `decide` alone). Additive to DESIGN §4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    pub trace: Vec<TraceEntry>,
}

/// How a handoff was fitted to its budget (docs/rendering.md#budgets): recorded in the
/// decision, in `handoff.json` and, step by step, in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BudgetReport {
    /// What is measured against `limit`: `first_turn` (the inline prompt, document included)
    /// or `document` (the off-band document).
    pub scope: String,
    /// The limit in characters.
    pub limit: usize,
    /// The target's `max_input_chars_per_turn`.
    pub first_turn_limit: usize,
    /// The policy's off-band document budget (`document max`).
    pub document_limit: usize,
    /// A full handoff that replaces an `over_budget` delta is held to the delta's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_chars: Option<usize>,
    /// Characters of what `scope` measures, before and after degradation.
    pub before: usize,
    pub after: usize,
    /// Characters of the first-turn prompt as sent.
    pub first_turn: usize,
    /// Every degradation step taken, in order.
    pub steps: Vec<BudgetStep>,
    /// Whether the handoff is within its limits.
    pub kept: bool,
    /// Why it is not, or why delivery changed: `must_keep_over_budget`,
    /// `request_over_budget`, `moved_off_band`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// One degradation step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BudgetStep {
    /// The step as the policy writes it (`drop narration`, `drop_oldest_runs`, ...) or
    /// `must_keep_only`.
    pub step: String,
    pub before: usize,
    pub after: usize,
    /// Items this step left out.
    pub dropped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PolicyRef {
    pub name: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadAction {
    Resume,
    Create,
    ForkNative,
    None,
}

impl ThreadAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadAction::Resume => "resume",
            ThreadAction::Create => "create",
            ThreadAction::ForkNative => "fork_native",
            ThreadAction::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ProviderThreadAction {
    pub action: ThreadAction,
    pub id: Option<String>,
}

impl ProviderThreadAction {
    pub fn new(action: ThreadAction, id: Option<&str>) -> ProviderThreadAction {
        ProviderThreadAction {
            action,
            id: id.map(str::to_string),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    OffBand,
    Inline,
}

impl DeliveryMode {
    /// `OffBand` when `off_band` holds, else `Inline`.
    pub fn of(off_band: bool) -> DeliveryMode {
        if off_band {
            DeliveryMode::OffBand
        } else {
            DeliveryMode::Inline
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryMode::OffBand => "off_band",
            DeliveryMode::Inline => "inline",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivery {
    pub mode: DeliveryMode,
    pub inline_limit: usize,
    /// The off-band document's stable path (null when inline).
    pub document: Option<String>,
    /// Why delivery is not what the policy chose (an off-band write that failed, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// Set when the inline prompt cannot fit `inline_limit` (the message is never cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pregrant {
    pub tool: String,
    pub path: String,
    pub turns: u32,
    pub uses: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DecidedBy {
    pub rule: String,
    pub at: String,
    pub because: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Matched,
    NotMatched,
}

impl Outcome {
    pub fn of(matched: bool) -> Outcome {
        if matched {
            Outcome::Matched
        } else {
            Outcome::NotMatched
        }
    }
}

/// One evaluated rule with the values of the facts it read.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TraceEntry {
    pub rule: String,
    pub at: String,
    pub outcome: Outcome,
    /// The facts the rule read, with their values (plain JSON values).
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub values: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
}

impl Decision {
    /// The trace entry of the ladder rule that decided (the last evaluation of it), with the
    /// values it read. `explain` and `baton test` show it.
    pub fn deciding_entry(&self) -> Option<&TraceEntry> {
        self.trace
            .iter()
            .rev()
            .find(|t| t.rule == self.decided_by.rule && t.at == self.decided_by.at)
    }

    /// The decision as pretty JSON (deterministic: same policy and state, same bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Whether a handoff document is part of this decision.
    pub fn needs_handoff(&self) -> bool {
        self.handoff_strategy.is_some()
    }
}
