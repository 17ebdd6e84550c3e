//! The library as a user sees it: only what the crate root and its public modules export
//! (no `unstable` internals), each type a public signature names written out by name. The
//! lint `unnameable_types` (denied in `cargo clippy --lib`, .ci/run) keeps every such type
//! nameable; this test shows a user can write them.

use baton::decision::{DeliveryMode, RuleOutcome, Strategy, ThreadAction, TraceEntry, Value};
use baton::handoff::{Chars, Provenance, Section, Summary};
use baton::summarize::{Deterministic, SummarizerFailure, SummaryRequest};
use baton::{
    CommandRunner, Context, Decision, Engine, Error, Outcome, Plan, Policy, Rendered, State,
    Summarizer,
};

/// A summarizer of the user's own: the text it writes, counted.
struct Fixed {
    calls: std::sync::atomic::AtomicUsize,
}

impl Summarizer for Fixed {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Option<Result<String, SummarizerFailure>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert!(request.budget > 0);
        Some(Ok("The user's own summary.".to_string()))
    }
}

/// A policy that names an external summary source (the user's summarizer writes it).
const SUMMARIZED: &str = r#"policy "summarized" {
  extends "default"
}

summary {
  include user_message into goals
  source command "never-run" timeout_ms 1000
}
"#;

#[test]
fn plan_then_finish_is_the_main_path() {
    let engine: Engine = Engine::new("default").unwrap();
    let policy: &Policy = engine.policy();
    assert_eq!(policy.name(), "default");
    assert_eq!(policy.sha256().len(), 64);
    let state: State = State::load("examples/seed-switch.yaml").unwrap();
    let plan: Plan<'_> = engine.plan(&state, Some("codex"), &Context::new()).unwrap();
    let evaluated: &Decision = plan.evaluated();
    assert_eq!(evaluated.strategy, Strategy::DeltaExisting);
    let outcome: Outcome = engine.finish(plan, &Deterministic).unwrap();
    let decision: Decision = outcome.decision;
    assert_eq!(decision, engine.decide(&state, Some("codex")).unwrap());
    assert_eq!(decision.provider_thread.action, ThreadAction::Resume);
    let mode: Option<DeliveryMode> = decision.delivery.as_ref().map(|d| d.mode);
    assert_eq!(mode, Some(DeliveryMode::OffBand));
    let entry: &TraceEntry = decision.trace.iter().next().unwrap();
    let _: RuleOutcome = entry.outcome;
    let _: Option<&Value> = entry.values.values().next();
    let summary: &Summary = outcome.summary.as_ref().unwrap();
    let section: &Section = summary.sections.first().unwrap();
    assert!(!section.entries.is_empty());
    let rendered: &Rendered = outcome.rendered.as_ref().unwrap();
    let provenance: &Provenance = &rendered.provenance;
    let chars: &Chars = &provenance.chars;
    assert_eq!(chars.document, rendered.document.chars().count());
}

#[test]
fn a_users_summarizer_writes_the_summary() {
    let engine = Engine::from_text("summarized.policy", SUMMARIZED).unwrap();
    let state = State::load("examples/seed-switch.yaml").unwrap();
    let mine = Fixed {
        calls: Default::default(),
    };
    let plan = engine
        .plan(&state, Some("codex"), &Context::default())
        .unwrap();
    let outcome = engine.finish(plan, &mine).unwrap();
    assert_eq!(mine.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let rendered = outcome.rendered.unwrap();
    assert_eq!(rendered.provenance.created_by, "command:never-run");
    assert!(rendered.document.contains("The user's own summary."));
    // Deterministic runs nothing and records no fallback; the command runner runs the
    // policy's command, which does not exist here: it falls back and says why.
    let plan = engine
        .plan(&state, Some("codex"), &Context::default())
        .unwrap();
    let det = engine
        .finish(plan, &Deterministic)
        .unwrap()
        .rendered
        .unwrap();
    assert_eq!(det.provenance.fallback_reason, None);
    let plan = engine
        .plan(&state, Some("codex"), &Context::default())
        .unwrap();
    let ran = engine
        .finish(plan, &CommandRunner)
        .unwrap()
        .rendered
        .unwrap();
    assert_eq!(ran.provenance.created_by, "deterministic");
    assert_eq!(
        ran.provenance.fallback_reason.as_deref(),
        Some("exit_status")
    );
}

#[test]
fn errors_are_named_and_open_for_extension() {
    let e: Error = Engine::shipped("no-such-profile").unwrap_err();
    // `baton::Error` is `#[non_exhaustive]`: a user's match needs a catch-all arm.
    #[allow(unreachable_patterns)]
    let kind = match &e {
        Error::Policy(_) => "policy",
        _ => "other",
    };
    assert_eq!(kind, "policy");
    let state = State::load("examples/seed-switch.yaml").unwrap();
    let e: Error = Engine::new("default")
        .unwrap()
        .decide(&state, Some("no-such-provider"))
        .unwrap_err();
    assert!(
        matches!(e, Error::Eval(baton::EvalError::UnknownTarget(_))),
        "{e}"
    );
}
