//! The evaluator: policy + state -> [`Decision`] with a full trace.
//!
//! Public entry point: [`evaluate_with`] (what [`crate::pipeline::plan`] calls, with the
//! store's [`DecisionContext`] and an off-band root resolved before; no I/O). Order: eligible
//! runs, every staleness signal, the strategy ladder (first match wins), coverage, delivery,
//! pre-grant. Deterministic: no clocks, no randomness, no hash-map iteration order in the
//! output.

mod providers;

use crate::decision::*;
use crate::facts::{Fact, Facts, ItemCtx, RunCtx, Sizer, SummarySizer, Value};
use crate::policy::ast::CmpOp;
use crate::policy::{CExpr, Policy, Strategy};
use crate::state::{HandoffStrategy, RequestKind, RunRange, RunStatus, State};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Options for one evaluation.
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// Evaluate for this provider instead of `request.provider`.
    pub target: Option<String>,
    /// Root of the off-band document directory (for the pre-grant path).
    pub document_root: Option<PathBuf>,
}

/// A decision that could not be made. Each names the policy location at fault as a field
/// (`at`); `Display` is the message only, and [`EvalError::help`] the fix in the policy (the
/// shells print `file:line:col: error: message` and `= help: ...`, see [`crate::located`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error("strategy `{strategy}` resumes the target's thread, but {provider} has no provider thread in this app thread")]
    /// A rung that resumes the target's thread matched, but the target has none.
    NoThreadToResume {
        /// The deciding rule's `file:line:col`.
        at: String,
        /// The strategy of that rule.
        strategy: String,
        /// The target provider.
        provider: String,
    },
    #[error("strategy `native_fork` needs a fork whose source provider thread can be forked, but {reason}")]
    /// `native_fork` matched, but the fork's source cannot be forked natively (fields: the rule's `file:line:col`, why).
    NoNativeFork {
        /// The deciding rule's `file:line:col`.
        at: String,
        /// Why it cannot be forked.
        reason: String,
    },
    #[error("unknown provider \"{0}\"; known providers are claude, codex, copilot, cursor, or those declared under `providers:` in the state or in the policy's `providers` block")]
    /// A target provider baton does not know (the `baton` command prints it as an error of
    /// its `--target`).
    UnknownTarget(String),
}

impl EvalError {
    /// The deciding rule's `file:line:col`, when the error is about a rule.
    pub fn at(&self) -> Option<&str> {
        match self {
            EvalError::NoThreadToResume { at, .. } | EvalError::NoNativeFork { at, .. } => Some(at),
            EvalError::UnknownTarget(_) => None,
        }
    }

    /// How to fix the policy, when the error is about a rule.
    pub fn help(&self) -> Option<&'static str> {
        match self {
            EvalError::NoThreadToResume { .. } => Some(
                "guard the rule with `target.has_thread`, or put `full_new when not target.has_thread` above it",
            ),
            EvalError::NoNativeFork { .. } => Some("guard the rule with `fork.native_possible`"),
            EvalError::UnknownTarget(_) => None,
        }
    }
}

/// The default sizer: characters of every item that the policy's summary would consider
/// (everything but reasoning and protocol noise), used when no selector is supplied.
pub struct RoughSizer;

impl SummarySizer for RoughSizer {
    fn chars(&self, facts: &Facts<'_>, runs: &[u32]) -> i64 {
        runs.iter()
            .filter_map(|o| facts.run(*o))
            .flat_map(|r| r.items.iter())
            .filter(|i| !matches!(i.kind(), "reasoning" | "protocol"))
            .map(|i| i.char_len() as i64)
            .sum()
    }
}

struct Env<'f, 'a> {
    facts: &'f Facts<'a>,
    signals: &'f [bool],
    run: Option<&'f RunCtx<'f>>,
    item: Option<&'f ItemCtx<'f>>,
}

/// What a traced evaluation read, in reading order: a name read twice appears twice, and the
/// trace keeps the last value (as a map filled in this order would).
type Seen<'s> = Option<&'s mut Vec<(ValueName, Value)>>;

/// A value an evaluation produced: borrowed from the policy (a constant, a `let`), owned,
/// or the `i`th value the trace recorded (a fact's value is recorded, not copied).
enum Got<'e> {
    Ref(&'e Value),
    Own(Value),
    Seen(usize),
}

/// `null`, for a recorded value that is not there (never: [`Got::Seen`] indexes what the
/// evaluation itself recorded).
static NULL: Value = Value::Null;

impl Got<'_> {
    /// The value, looked up in `seen` when it was recorded there.
    fn get<'a>(&'a self, seen: &'a Seen<'_>) -> &'a Value {
        match self {
            Got::Ref(v) => v,
            Got::Own(v) => v,
            Got::Seen(i) => seen
                .as_deref()
                .and_then(|s| s.get(*i))
                .map(|(_, v)| v)
                .unwrap_or(&NULL),
        }
    }

    fn truthy(&self, seen: &Seen<'_>) -> bool {
        self.get(seen).truthy()
    }

    fn into_value(self, seen: &Seen<'_>) -> Value {
        match self {
            Got::Own(v) => v,
            other => other.get(seen).clone(),
        }
    }
}

/// Evaluate a compiled condition to a value, recording every fact, `let` and signal it read.
fn eval(e: &CExpr, env: &Env<'_, '_>, seen: &mut Seen<'_>) -> Value {
    eval_got(e, env, seen).into_value(seen)
}

/// Evaluate a compiled condition, recording every fact, `let` and signal it read, without
/// copying constants or recorded values.
fn eval_got<'e>(e: &'e CExpr, env: &Env<'_, '_>, seen: &mut Seen<'_>) -> Got<'e> {
    match e {
        CExpr::Const(v) => Got::Ref(v),
        CExpr::Let(name, v) => {
            if let Some(seen) = seen.as_deref_mut() {
                seen.push((Cow::Owned(name.clone()), v.clone()));
            }
            Got::Ref(v)
        }
        CExpr::Fact(f) => {
            let v = env.facts.value(*f, env.run, env.item);
            match seen.as_deref_mut() {
                Some(seen) => {
                    seen.push((Cow::Borrowed(f.name()), v));
                    Got::Seen(seen.len().saturating_sub(1))
                }
                None => Got::Own(v),
            }
        }
        CExpr::Signal(i, name) => {
            let v = Value::Bool(env.signals.get(*i).copied().unwrap_or(false));
            if let Some(seen) = seen.as_deref_mut() {
                seen.push((Cow::Owned(format!("stale.{name}")), v.clone()));
            }
            Got::Own(v)
        }
        CExpr::AnyStale => {
            let v = Value::Bool(env.signals.iter().any(|s| *s));
            if let Some(seen) = seen.as_deref_mut() {
                seen.push((Cow::Borrowed("stale"), v.clone()));
            }
            Got::Own(v)
        }
        CExpr::List(xs) => Got::Own(Value::List(xs.iter().map(|x| eval(x, env, seen)).collect())),
        CExpr::Not(x) => Got::Own(Value::Bool(!eval_got(x, env, seen).truthy(seen))),
        CExpr::And(xs) => {
            for x in xs {
                if !eval_got(x, env, seen).truthy(seen) {
                    return Got::Own(Value::Bool(false));
                }
            }
            Got::Own(Value::Bool(true))
        }
        CExpr::Or(xs) => {
            for x in xs {
                if eval_got(x, env, seen).truthy(seen) {
                    return Got::Own(Value::Bool(true));
                }
            }
            Got::Own(Value::Bool(false))
        }
        CExpr::Sum(xs) => Got::Own(Value::sum(
            xs.iter().map(|(neg, x)| (*neg, eval(x, env, seen))),
        )),
        CExpr::Cmp(a, op @ (CmpOp::In | CmpOp::NotIn), b) if matches!(**b, CExpr::List(_)) => {
            // `x in [...]` with a list written in the rule: compare against the elements in
            // place instead of building (and cloning) the list on every evaluation.
            let a = eval_got(a, env, seen);
            let found = match &**b {
                // Literals only (the usual `in ["completed", "failed"]`), or nothing traced:
                // stop at the first match.
                CExpr::List(xs)
                    if seen.is_none() || xs.iter().all(|x| matches!(x, CExpr::Const(_))) =>
                {
                    let mut found = false;
                    for x in xs {
                        let hit = match x {
                            CExpr::Const(v) => v == a.get(seen),
                            other => {
                                let x = eval_got(other, env, seen);
                                x.get(seen) == a.get(seen)
                            }
                        };
                        if hit {
                            found = true;
                            break;
                        }
                    }
                    found
                }
                // Elements that read facts are all evaluated, so that the trace records
                // every value the rule read.
                CExpr::List(xs) => xs.iter().fold(false, |found, x| {
                    let hit = match x {
                        CExpr::Const(v) => v == a.get(seen),
                        other => {
                            let x = eval_got(other, env, seen);
                            x.get(seen) == a.get(seen)
                        }
                    };
                    found || hit
                }),
                other => {
                    let b = eval_got(other, env, seen);
                    compare(a.get(seen), CmpOp::In, b.get(seen))
                }
            };
            Got::Own(Value::Bool((*op == CmpOp::In) == found))
        }
        CExpr::Cmp(a, op, b) => {
            let a = eval_got(a, env, seen);
            let b = eval_got(b, env, seen);
            Got::Own(Value::Bool(compare(a.get(seen), *op, b.get(seen))))
        }
    }
}

fn compare(a: &Value, op: CmpOp, b: &Value) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => match (a, b) {
            (Value::Int(x), Value::Int(y)) => match op {
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                _ => x >= y,
            },
            // Ordering with null is false, whatever the operator.
            _ => false,
        },
        CmpOp::In | CmpOp::NotIn => {
            let found = match b {
                Value::List(xs) => xs.contains(a),
                _ => return false,
            };
            (op == CmpOp::In) == found
        }
    }
}

/// Evaluate `cond` against the facts (no run or item in scope).
pub fn eval_condition(
    cond: &CExpr,
    facts: &Facts<'_>,
    signals: &[bool],
) -> (bool, BTreeMap<String, Value>) {
    let env = Env {
        facts,
        signals,
        run: None,
        item: None,
    };
    let mut seen = Vec::new();
    let mut traced = Some(&mut seen);
    let v = eval_got(cond, &env, &mut traced).truthy(&traced);
    let values = seen
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v))
        .collect();
    (v, values)
}

/// Evaluate `cond` against the facts (no run or item in scope), appending what it read to
/// `seen`.
fn holds_traced(
    cond: &CExpr,
    facts: &Facts<'_>,
    signals: &[bool],
    seen: &mut Vec<(ValueName, Value)>,
) -> bool {
    let env = Env {
        facts,
        signals,
        run: None,
        item: None,
    };
    let mut seen = Some(seen);
    eval_got(cond, &env, &mut seen).truthy(&seen)
}

/// Evaluate `cond` about one item without recording what it read (the selector's hot path).
pub fn item_holds(cond: &CExpr, facts: &Facts<'_>, item: &ItemCtx) -> bool {
    let env = Env {
        facts,
        signals: &[],
        run: None,
        item: Some(item),
    };
    eval_got(cond, &env, &mut None).truthy(&None)
}

/// Which runs the policy's `eligible` rule admits (all but running and rolled-back runs when
/// the policy has no rule), with the target's capabilities already resolved (a decision
/// resolves them once, for its trace); `caps` is needed only when the policy has an `eligible`
/// rule. `eligible[i]` is run `i+1`.
pub(crate) fn eligible_with_caps(
    policy: &Policy,
    state: &State,
    target: &str,
    caps: Option<crate::state::ResolvedCaps>,
) -> Vec<bool> {
    match &policy.eligible {
        None => state
            .runs
            .iter()
            .map(|r| !matches!(r.status, RunStatus::Running | RunStatus::RolledBack))
            .collect(),
        Some((_, cond)) => {
            // The checker keeps eligibility-derived and summary facts out of `eligible`, so
            // these facts need neither eligibility nor a sizer. Per-run values are not traced.
            let caps = caps.unwrap_or_else(|| policy.provider_caps(state, target).caps);
            let facts = Facts::new(state, target, Vec::new(), Sizer::Borrowed(&RoughSizer)).with_caps(caps);
            let holds = |r: &crate::state::Run| run_holds(cond, &facts, r);
            // A rule that reads only run facts with few distinct values (status, provider,
            // handoff) is evaluated once per distinct combination of the ones it reads, not
            // once per run.
            let per_value = !reads_any(cond, &[Fact::RunOrdinal, Fact::RunItems]);
            let provider = reads_any(cond, &[Fact::RunProvider]);
            let handoff = reads_any(cond, &[Fact::RunHasHandoff]);
            // Only the status (`run.status in [...]`): one slot per status, looked up.
            let mut by_status: [Option<bool>; RunStatus::NAMES.len()] = Default::default();
            let by_status_only = per_value && !provider && !handoff;
            let mut seen: Vec<(RunKey<'_>, bool)> = Vec::new();
            state
                .runs
                .iter()
                .map(|r| {
                    // A rolled-back run is never eligible, whatever the rule says.
                    if r.status == RunStatus::RolledBack {
                        return false;
                    }
                    if by_status_only {
                        if let Some(slot) = by_status.get_mut(r.status as usize) {
                            return *slot.get_or_insert_with(|| holds(r));
                        }
                    }
                    if !per_value {
                        return holds(r);
                    }
                    let key = (
                        r.status,
                        handoff && r.handoff.is_some(),
                        provider.then_some(r.provider.as_str()),
                    );
                    // Runs come in blocks: the last combination seen is the likeliest.
                    if let Some((_, v)) = seen.iter().rev().find(|(k, _)| *k == key) {
                        return *v;
                    }
                    let v = holds(r);
                    // Many distinct providers: stop remembering, keep evaluating.
                    if seen.len() < DISTINCT_RUN_VALUES {
                        seen.push((key, v));
                    }
                    v
                })
                .collect()
        }
    }
}

/// Whether the `eligible` condition `cond` holds for `run` (untraced: per-run values are not
/// recorded).
fn run_holds(cond: &CExpr, facts: &Facts<'_>, run: &crate::state::Run) -> bool {
    let ctx = RunCtx { run };
    let env = Env {
        facts,
        signals: &[],
        run: Some(&ctx),
        item: None,
    };
    eval_got(cond, &env, &mut None).truthy(&None)
}

/// What an `eligible` rule can tell runs apart by: status, whether it took a handoff (when the
/// rule reads `run.has_handoff`), provider (when it reads `run.provider`).
type RunKey<'s> = (RunStatus, bool, Option<&'s str>);
/// The eligibility of each combination of a windowed state's history (`None` where the rule
/// reads more than the run's status, provider and handoff, the request and the target's
/// capabilities: then the window falls short and the caller decides on the whole thread).
fn window_of(
    policy: &Policy,
    state: &State,
    target: &str,
    caps: &crate::state::ResolvedCaps,
    history: &crate::facts::History,
) -> crate::facts::Window {
    let facts = Facts::new(state, target, Vec::new(), Sizer::Borrowed(&RoughSizer)).with_caps(caps.clone());
    let per_key = |status: RunStatus, provider: &str, has_handoff: bool| -> Option<bool> {
        if status == RunStatus::RolledBack {
            return Some(false);
        }
        let Some((_, cond)) = &policy.eligible else {
            return Some(status != RunStatus::Running);
        };
        if !reads_only(cond, &|f| {
            matches!(
                f,
                Fact::RunStatus
                    | Fact::RunProvider
                    | Fact::RunHasHandoff
                    | Fact::TargetProvider
                    | Fact::RequestProvider
                    | Fact::RequestModel
                    | Fact::RequestRuntimeMode
                    | Fact::RequestCleanContext
                    | Fact::RequestKind
                    | Fact::RequestMessageChars
                    | Fact::TargetCapsResume
                    | Fact::TargetCapsNativeFork
                    | Fact::TargetCapsRollback
                    | Fact::TargetCapsAcceptsHandoff
                    | Fact::TargetCapsHandoffChannel
                    | Fact::TargetCapsFileRead
                    | Fact::TargetCapsSummarize
                    | Fact::TargetCapsMaxInputChars
            )
        }) {
            return None;
        }
        let run = crate::state::Run {
            ordinal: 0,
            provider: provider.to_string(),
            provider_thread: None,
            status,
            handoff: has_handoff.then(String::new),
            items: Vec::new(),
            started_at: None,
            ended_at: None,
            workspace: None,
        };
        Some(run_holds(cond, &facts, &run))
    };
    crate::facts::Window {
        history: history.clone(),
        tally_eligible: history
            .tally
            .iter()
            .map(|t| per_key(t.status, &t.provider, t.has_handoff))
            .collect(),
        prefix_eligible: history
            .prefix
            .iter()
            .map(|p| per_key(p.status, &p.provider, p.has_handoff))
            .collect(),
    }
}

/// Whether `e` reads only facts that `ok` admits (and no signal).
fn reads_only(e: &CExpr, ok: &dyn Fn(Fact) -> bool) -> bool {
    !reads_where(e, &|read| !read.is_some_and(ok))
}

/// How many distinct (status, provider, handoff) combinations [`eligible_with_caps`] remembers.
const DISTINCT_RUN_VALUES: usize = 32;

/// Whether `e` reads any of `facts`.
fn reads_any(e: &CExpr, facts: &[Fact]) -> bool {
    reads_where(e, &|read| read.is_some_and(|f| facts.contains(&f)))
}

/// Whether `e` reads something `hit` picks: a fact (`Some`) or a signal (`None`).
fn reads_where(e: &CExpr, hit: &dyn Fn(Option<Fact>) -> bool) -> bool {
    match e {
        CExpr::Fact(f) => hit(Some(*f)),
        CExpr::Const(_) | CExpr::Let(..) => false,
        CExpr::Signal(..) | CExpr::AnyStale => hit(None),
        CExpr::List(xs) | CExpr::And(xs) | CExpr::Or(xs) => xs.iter().any(|x| reads_where(x, hit)),
        CExpr::Not(x) => reads_where(x, hit),
        CExpr::Cmp(a, _, b) => reads_where(a, hit) || reads_where(b, hit),
        CExpr::Sum(xs) => xs.iter().any(|(_, x)| reads_where(x, hit)),
    }
}

/// The ladder's decision alone, without fitting (baton's own tests and benchmarks; every
/// caller of the library decides through [`crate::pipeline::plan`] and
/// [`crate::pipeline::finish`]). `sizer` measures summaries when a rule reads `summary.*`.
#[cfg(feature = "unstable")]
pub fn decide(
    policy: &Policy,
    state: &State,
    opts: &EvalOptions,
    sizer: &dyn SummarySizer,
) -> Result<Decision, EvalError> {
    evaluate(policy, state, opts, sizer).map(|(decision, _)| decision)
}

/// [`decide`], also returning the facts it computed, so that selection reuses them (the
/// eligible runs, coverage and cached summary sizes) instead of computing them again.
#[cfg(any(test, feature = "unstable"))]
pub fn evaluate<'a>(
    policy: &Policy,
    state: &'a State,
    opts: &EvalOptions,
    sizer: &'a dyn SummarySizer,
) -> Result<(Decision, Facts<'a>), EvalError> {
    // Resolved per call: these two are for baton's own tests and benchmarks, which hold
    // `EvalOptions`; the main path resolves the root once and calls [`evaluate_with`].
    let root = crate::ids::DocumentRoot::resolve(opts.document_root.clone());
    evaluate_with(
        policy,
        state,
        opts.target.as_deref(),
        &root,
        &DecisionContext::default(),
        Sizer::Borrowed(sizer),
    )
}

/// Where a decision's handoff is recorded when that is not the evaluated thread's own next
/// run: a merge-back is decided on the fork, as the parent's provider sees it, and recorded
/// in the parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordIn {
    /// The thread that holds the handoff (the parent).
    pub thread: String,
    /// The run the handoff is for (the parent's next run).
    pub run: u32,
    /// The handoff's id in that thread.
    pub handoff_id: String,
    /// The provider thread that run would resume; none when it would create one.
    pub provider_thread: Option<String>,
    /// The handoff goes into the provider thread of the run that takes it, which this
    /// decision does not start: its `provider_thread` is `none` (a merge-back since the
    /// merge-back is bound to the run that takes it). False in merge-backs logged before: their
    /// decisions name `provider_thread` as `resume` or `create`, and replay so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bound_by_run: bool,
}

/// A handoff already made and delivered for the run being decided (a fork's merge-back
/// waiting for the parent's next run), as its own decision delivered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The waiting handoff's id.
    pub handoff_id: String,
    /// How its own decision delivered it.
    pub delivery: Option<Delivery>,
    /// The pre-grant its own decision issued.
    pub pregrant: Option<Pregrant>,
}

/// What a decision depends on besides the policy, the state and [`EvalOptions`]: the store
/// passes it for merge-backs and for the run that takes one, and logs it with the decision,
/// so that every logged decision re-derives from (policy, state, context).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The thread and run the decision is recorded in (a merge-back), when not its own.
    pub record_in: Option<RecordIn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// A handoff already made for this run (a fork's merge-back).
    pub waiting: Option<Waiting>,
    /// The state is a window (its runs start after `history.base`): what the runs before it
    /// were (see [`crate::facts::History`]). The store decides a dispatch on a window when it
    /// can, so that its cost does not grow with the thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::facts::History>,
}

/// The evaluator, as the main path ([`crate::pipeline::plan`]) calls it: decide for `target`
/// (`None`: `request.provider`) in `cx`, with an off-band root resolved before, so no I/O and
/// no environment. A merge-back's decision is numbered, named and delivered for the thread
/// that records it (`cx.record_in`), and a run that makes no handoff of its own but takes a
/// waiting one (`cx.waiting`) says how that one is delivered and granted.
pub fn evaluate_with<'a>(
    policy: &Policy,
    state: &'a State,
    target: Option<&str>,
    root: &crate::ids::DocumentRoot,
    cx: &DecisionContext,
    sizer: Sizer<'a>,
) -> Result<(Decision, Facts<'a>), EvalError> {
    let target = target
        .map(str::to_string)
        .unwrap_or_else(|| state.request.provider.clone());
    if crate::state::default_caps(&target).is_none()
        && !state.providers.contains_key(&target)
        && !policy.declares_provider(&target)
    {
        return Err(EvalError::UnknownTarget(target));
    }
    let texts = policy.trace_texts();
    // Room for every rule (a decision evaluates each at most once), the providers entry and
    // the budget's, and a few values per rule.
    let rules = texts.len().saturating_add(2);
    let mut trace = Trace::with_capacity(texts.clone(), rules, rules.saturating_mul(3));

    // 0. The target's capabilities: the policy's `providers` block over the state's and
    // baton's shipped ones; traced (where each came from) when the policy has such a block.
    // Without a block they are the state's over baton's shipped ones.
    let caps = if policy.providers.span.is_none() && policy.providers.providers.is_empty() {
        crate::state::caps_for(state, &target)
    } else {
        let caps = policy.provider_caps(state, &target);
        if let Some(entry) = providers::trace_entry(policy, &caps) {
            trace.push(entry);
        }
        caps.caps
    };

    // 1. Eligible runs.
    let eligible = eligible_with_caps(policy, state, &target, Some(caps.clone()));
    let window = cx
        .history
        .as_ref()
        .map(|h| window_of(policy, state, &target, &caps, h));
    if policy.eligible.is_some() {
        trace_eligible(state, &eligible, window.as_ref(), texts, &mut trace);
    }
    let mut facts = Facts::new(state, &target, eligible, sizer).with_caps(caps);
    if let Some(w) = window {
        facts = facts.with_window(w);
    }

    // 2. Staleness signals: all evaluated, each reported.
    let signals: Vec<bool> = policy
        .stales
        .iter()
        .enumerate()
        .map(|(i, s)| Rule::new(texts.stale(i), Some(&s.when)).eval(&facts, &[], &mut trace))
        .collect();
    let stale: Vec<String> = policy
        .stales
        .iter()
        .zip(&signals)
        .filter(|(_, h)| **h)
        .map(|(s, _)| s.name.clone())
        .collect();

    // 3. The ladder: first match wins. The checker guarantees an `otherwise`.
    let (strategy, override_handoff, decided_by) =
        climb_ladder(policy, texts, &facts, &signals, &mut trace);
    let at = decided_by.at.clone();

    // 4. Provider thread and coverage.
    let provider_thread = provider_thread_action(state, &facts, cx, strategy, &target, &at)?;
    let (handoff_strategy, runs) = handed_over(state, &facts, strategy, override_handoff);
    let (handoff_strategy, covered_runs) = match (runs.first(), runs.last()) {
        (Some(f), Some(t)) => (handoff_strategy, Some(RunRange { from: *f, to: *t })),
        // Nothing to hand over: no document.
        _ => (None, None),
    };
    let handoff_id = handoff_strategy.map(|_| match &cx.record_in {
        Some(r) => r.handoff_id.clone(),
        None => match &cx.history {
            Some(h) => h.next_handoff_id.clone(),
            None => next_handoff_id(state),
        },
    });
    let record_thread = cx
        .record_in
        .as_ref()
        .map(|r| r.thread.as_str())
        .unwrap_or(state.thread.id.as_str());

    // 5. Delivery: first match wins; inline when no rule matches. Off-band, the decision names
    // the document's stable path. 6. Pre-grant: only for an off-band document.
    let (delivery, pregrant) = deliver(
        policy,
        texts,
        &facts,
        &signals,
        &mut trace,
        strategy,
        handoff_id.as_ref(),
        root,
        record_thread,
    );

    // No handoff of its own, but one waits for this run: the decision says how that one is
    // delivered and granted (as its own decision delivered it).
    let (handoff_id, delivery, pregrant) = match (&handoff_id, &cx.waiting) {
        (None, Some(w)) if strategy != Strategy::Unsupported => (
            Some(w.handoff_id.clone()),
            w.delivery.clone(),
            w.pregrant.clone(),
        ),
        _ => (handoff_id, delivery, pregrant),
    };
    let run = match &cx.record_in {
        Some(r) => r.run,
        None => facts.run_count().saturating_add(1),
    };
    let decided_by = recorded_in(decided_by, cx, state, &target);
    let decision = Decision {
        policy: PolicyRef {
            name: policy.name.clone(),
            sha256: policy.sha256.clone(),
        },
        target,
        strategy,
        handoff_strategy,
        provider_thread,
        covered_runs,
        stale,
        delivery,
        pregrant,
        run,
        handoff_id,
        decided_by,
        budget: None,
        workspace: workspace_report(policy, &facts, strategy),
        redactions: Vec::new(),
        trace,
    };
    Ok((decision, facts))
}

/// Step 1 of [`evaluate_with`], traced: how many runs are eligible and which are excluded
/// (a window's excluded prefix first, then the loaded runs the rule excludes).
fn trace_eligible(
    state: &State,
    eligible: &[bool],
    window: Option<&crate::facts::Window>,
    texts: &crate::policy::TraceTexts,
    trace: &mut Trace,
) {
    let first = state.runs.first().map(|r| r.ordinal).unwrap_or(1);
    let mut excluded: Vec<Value> = window
        .map(|w| w.prefix_excluded())
        .unwrap_or_default()
        .into_iter()
        .map(|o| Value::Int(i64::from(o)))
        .collect();
    excluded.extend(
        eligible
            .iter()
            .zip(first..)
            .filter(|(e, _)| !**e)
            .map(|(_, o)| Value::Int(i64::from(o))),
    );
    let count = match window {
        Some(w) => i64::try_from(w.eligible_count()).unwrap_or(i64::MAX),
        None => eligible.iter().filter(|e| **e).count() as i64,
    };
    let from = trace.values_len();
    let values = trace.values_mut();
    values.push((Cow::Borrowed("eligible_runs"), Value::Int(count)));
    values.push((Cow::Borrowed("excluded_runs"), Value::List(excluded)));
    trace.push_rule(texts.eligible(), RuleOutcome::Matched, from);
}

/// Step 3 of [`evaluate_with`]: the ladder's first matching rung (the checker guarantees an
/// `otherwise`), the handoff strategy it sets, and what decided it.
fn climb_ladder(
    policy: &Policy,
    texts: &crate::policy::TraceTexts,
    facts: &Facts<'_>,
    signals: &[bool],
    trace: &mut Trace,
) -> (Strategy, Option<HandoffStrategy>, DecidedBy) {
    let chosen = policy.ladder.iter().enumerate().find(|(i, r)| {
        Rule::new(texts.ladder(*i), r.when.as_ref()).eval(facts, signals, trace)
    });
    match chosen {
        Some((i, r)) => (
            r.strategy,
            r.handoff,
            DecidedBy {
                rule: format!("strategy {}", r.strategy.as_str()),
                at: texts
                    .get(texts.ladder(i))
                    .map(|t| t.at.clone())
                    .unwrap_or_else(|| policy.at(r.span)),
                because: r.because.clone(),
            },
        ),
        None => (
            Strategy::Unsupported,
            None,
            DecidedBy {
                rule: "strategy (none matched)".into(),
                at: String::new(),
                because: Some("no ladder rule matched".into()),
            },
        ),
    }
}

/// Steps 5 and 6 of [`evaluate_with`]: how the handoff `handoff_id` (if `strategy` makes one)
/// is delivered, the first matching `delivery` rule, inline when none matches (off-band, the
/// decision names the document's stable path under `root` in `record_thread`); and, only for
/// an off-band document, its pre-grant.
#[allow(clippy::too_many_arguments)]
fn deliver(
    policy: &Policy,
    texts: &crate::policy::TraceTexts,
    facts: &Facts<'_>,
    signals: &[bool],
    trace: &mut Trace,
    strategy: Strategy,
    handoff_id: Option<&String>,
    root: &crate::ids::DocumentRoot,
    record_thread: &str,
) -> (Option<Delivery>, Option<Pregrant>) {
    facts.set_outcome(Some(strategy.as_str()), None);
    let delivery = handoff_id.map(|hid| {
        let chosen = policy
            .delivery
            .rules
            .iter()
            .enumerate()
            .find(|(i, r)| {
                Rule::new(texts.delivery(*i), r.when.as_ref()).eval(facts, signals, trace)
            })
            .map(|(_, r)| r);
        let mode = DeliveryMode::of(chosen.map(|r| r.off_band).unwrap_or(false));
        let document = (mode == DeliveryMode::OffBand).then(|| {
            let path = root.document_path(record_thread, hid);
            // The path as `display` writes it, without formatting when it is UTF-8.
            path.into_os_string()
                .into_string()
                .unwrap_or_else(|p| std::path::Path::new(&p).display().to_string())
        });
        Delivery {
            mode,
            inline_limit: policy.delivery.inline_limit,
            document,
            fallback_reason: None,
            fallback_kind: None,
            inline_note: None,
        }
    });

    // 6. Pre-grant: only for an off-band document.
    facts.set_outcome(
        Some(strategy.as_str()),
        delivery.as_ref().map(|d| d.mode.as_str()),
    );
    let mut pregrant = None;
    if let (Some(p), Some(document)) = (
        &policy.pregrant,
        delivery.as_ref().and_then(|d| d.document.as_ref()),
    ) {
        let granted = p.grants.iter().enumerate().find(|(i, g)| {
            Rule::new(texts.grant(*i), g.when.as_ref()).eval(facts, signals, trace)
        });
        pregrant = granted.map(|(_, g)| Pregrant {
            tool: g.tool.clone(),
            path: document.clone(),
            turns: p.turns,
            uses: p.uses,
        });
    }
    (delivery, pregrant)
}

/// A decision made on one thread and recorded in another (`cx.record_in`, a merge-back): the
/// reason says which view it was decided on and where it goes, so that it is not read as a
/// reason about the recording thread.
fn recorded_in(decided_by: DecidedBy, cx: &DecisionContext, state: &State, target: &str) -> DecidedBy {
    match &cx.record_in {
        Some(r) => {
            let why = decided_by
                .because
                .clone()
                .unwrap_or_else(|| decided_by.rule.clone());
            DecidedBy {
                because: Some(format!(
                    "{why} (decided on {} as {target} sees it; recorded in thread {} for its run {})",
                    state.thread.id, r.thread, r.run
                )),
                ..decided_by
            }
        }
        None => decided_by,
    }
}

/// Step 4 of [`evaluate_with`]: what happens to the target's provider thread under
/// `strategy` (`at`: the deciding rule's location, for the errors).
fn provider_thread_action(
    state: &State,
    facts: &Facts<'_>,
    cx: &DecisionContext,
    strategy: Strategy,
    target: &str,
    at: &str,
) -> Result<ProviderThreadAction, EvalError> {
    let resume = facts
        .target_thread()
        .map(|p| ProviderThreadAction::new(ThreadAction::Resume, Some(&p.id)));
    Ok(match strategy {
        Strategy::Unsupported => ProviderThreadAction::new(ThreadAction::None, None),
        // Recorded in another thread: the provider thread of that thread's next run.
        _ if cx.record_in.is_some() => {
            let bound_by_run = cx.record_in.as_ref().is_some_and(|r| r.bound_by_run);
            let pt = cx
                .record_in
                .as_ref()
                .and_then(|r| r.provider_thread.as_deref());
            match pt {
                _ if bound_by_run => ProviderThreadAction::new(ThreadAction::None, None),
                Some(id) => ProviderThreadAction::new(ThreadAction::Resume, Some(id)),
                None => ProviderThreadAction::new(ThreadAction::Create, None),
            }
        }
        Strategy::FullNew => ProviderThreadAction::new(ThreadAction::Create, None),
        Strategy::NoHandoff => {
            resume.unwrap_or_else(|| ProviderThreadAction::new(ThreadAction::Create, None))
        }
        Strategy::DeltaExisting | Strategy::FullExisting => {
            resume.ok_or_else(|| EvalError::NoThreadToResume {
                at: at.to_string(),
                strategy: strategy.as_str().into(),
                provider: target.to_string(),
            })?
        }
        Strategy::NativeFork => match (facts.fork_source_thread(), &state.thread.parent) {
            (Some(p), Some(_)) => ProviderThreadAction::new(ThreadAction::ForkNative, Some(&p.id)),
            (_, parent) => {
                return Err(EvalError::NoNativeFork {
                    at: at.to_string(),
                    reason: if parent.is_none() {
                        "the thread is not a fork".into()
                    } else {
                        "the fork's source run has no provider thread".into()
                    },
                })
            }
        },
    })
}

/// Step 4 of [`evaluate_with`]: the handoff strategy under `strategy` (the rule's
/// `override_handoff` over the default) and the runs it hands over.
fn handed_over(
    state: &State,
    facts: &Facts<'_>,
    strategy: Strategy,
    override_handoff: Option<HandoffStrategy>,
) -> (Option<HandoffStrategy>, Vec<u32>) {
    let fork_point = state.thread.parent.as_ref().map(|p| p.run).unwrap_or(0);
    match strategy {
        Strategy::NoHandoff | Strategy::Unsupported | Strategy::NativeFork => (None, Vec::new()),
        _ if state.request.kind == RequestKind::MergeBack => (
            Some(override_handoff.unwrap_or(HandoffStrategy::ForkDeltaSummary)),
            facts
                .all_eligible_runs()
                .iter()
                .copied()
                .filter(|o| *o > fork_point)
                .collect(),
        ),
        Strategy::DeltaExisting => (
            Some(override_handoff.unwrap_or(HandoffStrategy::DeltaSinceTargetLastSeen)),
            facts.delta_runs().to_vec(),
        ),
        Strategy::FullExisting | Strategy::FullNew => {
            let hs = override_handoff.unwrap_or(HandoffStrategy::FullThreadSummary);
            let mut runs = facts.all_eligible_runs().to_vec();
            if state.request.kind == RequestKind::Fork {
                runs.retain(|o| *o <= fork_point);
            }
            if hs == HandoffStrategy::CheckpointSummary {
                let latest = facts.latest_checkpoint_run();
                runs.retain(|o| *o <= latest);
            }
            (Some(hs), runs)
        }
    }
}

/// One rule about to be evaluated and traced.
struct Rule<'p> {
    /// The rule's index in the policy's trace texts ([`crate::policy::TraceTexts`]).
    text: usize,
    /// `None` for an unconditional rule (`otherwise`).
    when: Option<&'p CExpr>,
}

impl<'p> Rule<'p> {
    fn new(text: usize, when: Option<&'p CExpr>) -> Self {
        Rule { text, when }
    }

    /// Evaluate the rule, append its trace entry (the rule's index and the values it read),
    /// and say whether it matched.
    fn eval(self, facts: &Facts<'_>, signals: &[bool], trace: &mut Trace) -> bool {
        let from = trace.values_len();
        let matched = match self.when {
            None => true,
            Some(w) => holds_traced(w, facts, signals, trace.values_mut()),
        };
        trace.push_rule(self.text, RuleOutcome::of(matched), from);
        matched
    }
}

/// The id a new handoff gets: `H<n>` for the smallest n above the number of handoffs that is
/// not taken.
pub fn next_handoff_id(state: &State) -> String {
    let taken = |id: &str| state.handoffs.iter().any(|h| h.id == id);
    let first = format!("H{}", state.handoffs.len().saturating_add(1));
    if !taken(&first) {
        return first;
    }
    // Unusual ids: look the rest up in a set rather than rescanning per candidate.
    let taken: std::collections::HashSet<&str> =
        state.handoffs.iter().map(|h| h.id.as_str()).collect();
    (state.handoffs.len().saturating_add(2)..)
        .map(|n| format!("H{n}"))
        .find(|id| !taken.contains(id.as_str()))
        .unwrap_or(first)
}

/// The decision's time and workspace report; with the workspace note when the ladder sends
/// nothing (`no_handoff`) but the workspace moved and the policy's summary takes `workspace`
/// items (a policy without a summary block takes the default's, which does).
fn workspace_report(
    policy: &Policy,
    facts: &Facts<'_>,
    strategy: Strategy,
) -> Option<crate::decision::WorkspaceReport> {
    let w = facts.staleness();
    if !w.any {
        return None;
    }
    let takes = policy
        .summary
        .as_ref()
        .is_none_or(|s| s.includes.iter().any(|i| i.kind == "workspace"));
    let note = (strategy == Strategy::NoHandoff && takes)
        .then(|| w.note())
        .flatten()
        .map(|n| {
            let limit = usize::try_from(facts.caps.max_input_chars_per_turn).unwrap_or(usize::MAX);
            crate::cut::head(&n, limit.min(NOTE_MAX_CHARS))
        });
    let report = crate::decision::WorkspaceReport {
        line: w.line(),
        notes: w.notes.clone(),
        note,
    };
    // Nothing to say (a request time alone): no report.
    (report.line.is_some() || !report.notes.is_empty() || report.note.is_some()).then_some(report)
}

/// The most characters of a workspace note sent without a handoff.
const NOTE_MAX_CHARS: usize = 4_000;
