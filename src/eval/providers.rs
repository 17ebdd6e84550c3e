//! The trace entry that says where the target's capabilities came from (the policy's
//! `providers` block, the state, baton's shipped ones).

use crate::decision::{RuleOutcome, TraceEntry};
use crate::facts::Fact;
use crate::policy::providers::ProviderCaps;
use crate::policy::Policy;
use std::collections::BTreeMap;

/// `providers TARGET`: every capability fact with its value, and where each came from
/// (`because`). Only for a policy with a `providers` block, so that the traces of policies
/// without one are unchanged.
pub(super) fn trace_entry(policy: &Policy, caps: &ProviderCaps) -> Option<TraceEntry> {
    if !caps.policy_has_providers {
        return None;
    }
    let values: BTreeMap<String, crate::facts::Value> = Fact::caps()
        .map(|d| (d.name.to_string(), caps.value(d.fact)))
        .collect();
    Some(TraceEntry {
        rule: format!("providers {}", caps.provider),
        at: caps.at.map(|s| policy.at(s)).unwrap_or_default(),
        outcome: RuleOutcome::Matched,
        values,
        when: None,
        because: Some(caps.describe()),
    })
}
