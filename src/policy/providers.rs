//! Provider capabilities a policy sets (`providers { cursor { file_read false } }`), and how
//! they combine with the state's `providers:` entry and baton's shipped capabilities.
//!
//! Public entry point: [`Policy::provider_caps`]. The precedence, per capability
//! (docs/policy-language.md#providers):
//!
//! 1. `KEY VALUE force` in the policy: the policy's value, whatever the state says;
//! 2. the state's explicit value (its `providers:` entry sets the key);
//! 3. `KEY VALUE` in the policy: a default for states that say nothing;
//! 4. baton's shipped capabilities for the provider ([`crate::state::shipped_caps`]).
//!
//! A budget is not special: `max_input_chars_per_turn 4000` is a default like any other, and
//! `max_input_chars_per_turn 4000 force` holds even when the state says more (or less).

use super::ast::Span;
use super::Policy;
use crate::facts::{Fact, Value};
use crate::state::{Caps, HandoffChannel, ResolvedCaps, State};

/// A checked capability value of a `providers` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapValue {
    Bool(bool),
    /// A character count (`max_input_chars_per_turn`), at least 1.
    Chars(u64),
    Channel(HandoffChannel),
}

impl CapValue {
    /// The value as a fact value.
    pub fn to_value(self) -> Value {
        match self {
            CapValue::Bool(b) => Value::Bool(b),
            CapValue::Chars(n) => Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
            CapValue::Channel(c) => Value::Str(c.as_str().into()),
        }
    }
}

/// One compiled `KEY VALUE [force]` setting.
#[derive(Debug, Clone, PartialEq)]
pub struct CCapSetting {
    /// The capability fact it sets (`target.caps.file_read`).
    pub fact: Fact,
    pub value: CapValue,
    /// `force`: the policy's value wins over the state's.
    pub force: bool,
    pub span: Span,
}

/// One provider's settings, merged across the policy set.
#[derive(Debug, Clone, PartialEq)]
pub struct CProvider {
    pub name: String,
    /// The last entry that names the provider (where traces point).
    pub span: Span,
    pub settings: Vec<CCapSetting>,
}

/// The compiled `providers` blocks of a policy set (empty when it has none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CProviders {
    /// The providers, in order of first appearance.
    pub providers: Vec<CProvider>,
    /// The last `providers` block of the set, if any.
    pub span: Option<Span>,
}

/// Where a capability's value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum CapOrigin {
    /// baton's shipped capabilities for the provider.
    Shipped,
    /// The state's `providers:` entry.
    State,
    /// The state's `providers:` entry, over the policy's default (`policy` is its value and
    /// `at` where the policy sets it).
    StateOverPolicy { policy: CapValue, at: String },
    /// The policy's `providers` block (`force` when written so); `over_state` is the state's
    /// value it won over.
    Policy {
        at: String,
        force: bool,
        over_state: Option<CapValue>,
    },
}

/// A provider's capabilities as a decision sees them, with where each came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderCaps {
    pub provider: String,
    pub caps: ResolvedCaps,
    /// Every capability fact, in catalogue order, with its origin.
    pub origins: Vec<(Fact, CapOrigin)>,
    /// Whether the policy has a `providers` block at all (then decisions trace the origins).
    pub policy_has_providers: bool,
    /// Where the policy names this provider (its last entry), else its last `providers`
    /// block.
    pub at: Option<Span>,
}

impl ProviderCaps {
    /// The value of capability fact `fact`.
    pub fn value(&self, fact: Fact) -> Value {
        get(&self.caps, fact)
            .map(CapValue::to_value)
            .unwrap_or(Value::Null)
    }

    /// One line per capability that is not the shipped default, saying where it came from:
    /// `file_read false from the policy (team.policy:4:5, force)`. Ends with what the rest is.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let show = |v: Value| v.to_string();
        for (fact, origin) in &self.origins {
            let key = fact.def().cap_key().unwrap_or(fact.name());
            let v = show(self.value(*fact));
            match origin {
                CapOrigin::Shipped => {}
                CapOrigin::State => parts.push(format!("{key} {v} from the state")),
                CapOrigin::StateOverPolicy { policy, at } => parts.push(format!(
                    "{key} {v} from the state, over the policy's default {} ({at})",
                    show(policy.to_value())
                )),
                CapOrigin::Policy {
                    at,
                    force,
                    over_state,
                } => parts.push(format!(
                    "{key} {v} from the policy ({at}{}{})",
                    if *force { ", force" } else { "" },
                    over_state
                        .map(|s| format!(", over the state's {}", show(s.to_value())))
                        .unwrap_or_default()
                )),
            }
        }
        let rest = if parts.is_empty() {
            format!("every capability is {}'s shipped default", self.provider)
        } else {
            format!("the rest are {}'s shipped defaults", self.provider)
        };
        parts.push(rest);
        parts.join("; ")
    }
}

/// The value of a capability fact in `caps`.
fn get(caps: &ResolvedCaps, fact: Fact) -> Option<CapValue> {
    Some(match fact {
        Fact::TargetCapsResume => CapValue::Bool(caps.resume),
        Fact::TargetCapsNativeFork => CapValue::Bool(caps.native_fork),
        Fact::TargetCapsRollback => CapValue::Bool(caps.rollback),
        Fact::TargetCapsAcceptsHandoff => CapValue::Bool(caps.accepts_handoff),
        Fact::TargetCapsHandoffChannel => CapValue::Channel(caps.handoff_channel),
        Fact::TargetCapsFileRead => CapValue::Bool(caps.file_read),
        Fact::TargetCapsSummarize => CapValue::Bool(caps.summarize),
        Fact::TargetCapsMaxInputChars => CapValue::Chars(caps.max_input_chars_per_turn),
        _ => return None,
    })
}

/// Set capability fact `fact` of `caps` to `v`; false when `fact` is no capability or `v`
/// is not of its type (the checker rules both out).
pub(crate) fn set(caps: &mut ResolvedCaps, fact: Fact, v: CapValue) -> bool {
    match (fact, v) {
        (Fact::TargetCapsResume, CapValue::Bool(b)) => caps.resume = b,
        (Fact::TargetCapsNativeFork, CapValue::Bool(b)) => caps.native_fork = b,
        (Fact::TargetCapsRollback, CapValue::Bool(b)) => caps.rollback = b,
        (Fact::TargetCapsAcceptsHandoff, CapValue::Bool(b)) => caps.accepts_handoff = b,
        (Fact::TargetCapsHandoffChannel, CapValue::Channel(c)) => caps.handoff_channel = c,
        (Fact::TargetCapsFileRead, CapValue::Bool(b)) => caps.file_read = b,
        (Fact::TargetCapsSummarize, CapValue::Bool(b)) => caps.summarize = b,
        (Fact::TargetCapsMaxInputChars, CapValue::Chars(n)) => caps.max_input_chars_per_turn = n,
        _ => return false,
    }
    true
}

/// Whether the state's `providers:` entry sets capability `fact` explicitly.
fn state_sets(caps: &Caps, fact: Fact) -> bool {
    match fact {
        Fact::TargetCapsResume => caps.resume.is_some(),
        Fact::TargetCapsNativeFork => caps.native_fork.is_some(),
        Fact::TargetCapsRollback => caps.rollback.is_some(),
        Fact::TargetCapsAcceptsHandoff => caps.accepts_handoff.is_some(),
        Fact::TargetCapsHandoffChannel => caps.handoff_channel.is_some(),
        Fact::TargetCapsFileRead => caps.file_read.is_some(),
        Fact::TargetCapsSummarize => caps.summarize.is_some(),
        Fact::TargetCapsMaxInputChars => caps.max_input_chars_per_turn.is_some(),
        _ => false,
    }
}

impl Policy {
    /// The provider names the policy's `providers` blocks declare (across `extends`), in
    /// order of first appearance. A provider named there counts as declared: it can be a
    /// decision's target without a `providers:` entry in the state, and checks for unknown
    /// provider names accept it.
    pub fn declared_providers(&self) -> Vec<&str> {
        self.providers
            .providers
            .iter()
            .map(|p| p.name.as_str())
            .collect()
    }

    /// Whether the policy's `providers` blocks name `provider`.
    pub fn declares_provider(&self, provider: &str) -> bool {
        self.providers.providers.iter().any(|p| p.name == provider)
    }

    unstable_pub! {
        /// The capabilities of `provider` for a decision on `state`: per capability, a `force`d
        /// policy value, else the state's explicit value, else the policy's value, else baton's
        /// shipped one (module docs). Each comes with its origin.
        fn provider_caps(&self, state: &State, provider: &str) -> ProviderCaps {
            let from_state = state.providers.get(provider);
            let stated_caps = crate::state::caps_for(state, provider);
            let mut caps = stated_caps.clone();
            let entry = self.providers.providers.iter().find(|p| p.name == provider);
            let mut origins = Vec::new();
            for def in Fact::caps() {
                let fact = def.fact;
                let stated = from_state.is_some_and(|c| state_sets(c, fact));
                let setting = entry.and_then(|e| e.settings.iter().rfind(|s| s.fact == fact));
                let origin = match setting {
                    Some(s) if s.force || !stated => {
                        set(&mut caps, fact, s.value);
                        CapOrigin::Policy {
                            at: self.at(s.span),
                            force: s.force,
                            over_state: stated.then(|| get(&stated_caps, fact)).flatten(),
                        }
                    }
                    Some(s) => CapOrigin::StateOverPolicy {
                        policy: s.value,
                        at: self.at(s.span),
                    },
                    None if stated => CapOrigin::State,
                    None => CapOrigin::Shipped,
                };
                origins.push((fact, origin));
            }
            ProviderCaps {
                provider: provider.to_string(),
                caps,
                origins,
                policy_has_providers: self.providers.span.is_some(),
                at: entry.map(|e| e.span).or(self.providers.span),
            }
        }
    }
}
