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

/// Library errors are data: `Display` is the message about the input, with no location, no
/// `error:` and no command-line flag or `baton` command in it; where the error is (a database,
/// a rule's `file:line:col`, `template:line`) is a field, and `baton::located` lays the two
/// out as the `baton` command and the service print them.
#[test]
fn library_errors_are_messages_with_their_location_as_data() {
    use baton::store::{ForkRefusal, RegenerateRefusal, Store, StoreError, StoreErrorKind};
    use baton::{located, EvalError, Located, PipelineError, RenderError};

    let store = Store::open_in_memory().unwrap();
    let e: StoreError = store.load("nope").unwrap_err();
    assert!(
        matches!(e.kind(), StoreErrorKind::ThreadNotFound { thread } if thread == "nope"),
        "{e:?}"
    );
    assert_eq!(e.database(), ":memory:");
    assert_eq!(e.code(), "baton::store::thread_not_found");
    assert_eq!(e.thread(), Some("nope"));
    assert_eq!(e.to_string(), "no thread \"nope\" in the database");
    assert_eq!(
        located(&e),
        ":memory:: error: no thread \"nope\" in the database"
    );

    let rule = EvalError::NoThreadToResume {
        at: "p.policy:5:3".into(),
        strategy: "delta_existing".into(),
        provider: "cursor".into(),
    };
    assert_eq!(rule.at(), Some("p.policy:5:3"));
    assert_eq!(
        located(&rule),
        "p.policy:5:3: error: strategy `delta_existing` resumes the target's thread, but cursor \
         has no provider thread in this app thread\n  = help: guard the rule with \
         `target.has_thread`, or put `full_new when not target.has_thread` above it"
    );
    let template = RenderError {
        template: "handoff.md.j2".into(),
        line: 3,
        message: "undefined variable `x`".into(),
    };
    assert_eq!(
        located(&template),
        "handoff.md.j2:3: error: undefined variable `x`"
    );
    let inside = StoreError::new(
        "baton.db",
        StoreErrorKind::Pipeline {
            thread: "t".into(),
            source: Box::new(PipelineError::Render(template.clone())),
        },
    );
    assert_eq!(inside.to_string(), "thread \"t\": undefined variable `x`");
    assert_eq!(
        located(&inside),
        "baton.db: error: thread \"t\": handoff.md.j2:3: error: undefined variable `x`"
    );

    // One of each kind that the `baton` command gives advice for, and the others.
    let db = |kind| StoreError::new("baton.db", kind);
    let errors: Vec<Box<dyn Located>> = vec![
        Box::new(e),
        Box::new(db(StoreErrorKind::ReadOnly {
            during: "starting a dispatch".into(),
        })),
        Box::new(db(StoreErrorKind::NeedsMigration {
            found: 1,
            supported: baton::store::SCHEMA_VERSION,
        })),
        Box::new(db(StoreErrorKind::ThreadExists { thread: "t".into() })),
        Box::new(db(StoreErrorKind::RunInProgress {
            thread: "t".into(),
            run: 3,
        })),
        Box::new(db(StoreErrorKind::MergeBackWaiting {
            thread: "t".into(),
            handoff: "H2".into(),
            fork: "f".into(),
        })),
        Box::new(db(StoreErrorKind::BadForkPoint {
            thread: "t".into(),
            run: 2,
            why: ForkRefusal::ChildExists { child: "c".into() },
        })),
        Box::new(db(StoreErrorKind::NotRegenerable {
            thread: "t".into(),
            handoff: "H1".into(),
            why: RegenerateRefusal::MergeBack { fork: "f".into() },
        })),
        Box::new(inside),
        Box::new(rule),
        Box::new(EvalError::NoNativeFork {
            at: "p.policy:4:3".into(),
            reason: "the thread is not a fork".into(),
        }),
        Box::new(EvalError::UnknownTarget("aider".into())),
        Box::new(template),
        Box::new(baton::testing::TestFileError::Invalid {
            file: "t.yaml".into(),
            line: 2,
            col: 5,
            message: "unknown key `expekt`".into(),
            snippet: String::new(),
        }),
        Box::new(baton::testing::TestFileError::NoTestFiles {
            dir: "tests".into(),
        }),
        Box::new(baton::testing::CaseStateError::MissingFile {
            file: "t.yaml".into(),
            line: 4,
            column: 5,
            case: "c".into(),
            state: "s.yaml".into(),
        }),
    ];
    for e in &errors {
        let message = e.to_string();
        assert!(!message.contains("error:"), "{message}");
        assert!(!message.contains("--"), "{message}");
        assert!(!message.contains("`baton "), "{message}");
        assert!(!message.contains("baton.db"), "{message}");
        if let Some(at) = e.location() {
            assert!(
                located(e.as_ref()).starts_with(&format!("{at}: error: ")),
                "{}",
                located(e.as_ref())
            );
        }
    }
}

/// The service's start-up errors are messages with their place as data, and name the service's
/// settings as [`baton::serve::SettingNames`] gives them: the `ServeConfig` fields' own names
/// unless the caller gives others (`baton serve` gives its flags).
#[test]
fn service_start_errors_are_messages_naming_settings_not_flags() {
    use baton::serve::{
        DecisionLogConfig, LogTarget, MetricsEndpoint, ServeConfig, ServeError, Transport,
    };
    use baton::{located, Located};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let config = || ServeConfig::new(Transport::Stdio, "default", &db);

    let mut cfg = config();
    cfg.decision_log = Some(DecisionLogConfig::new(LogTarget::Stdout));
    let e = baton::serve::serve(cfg).unwrap_err();
    assert!(matches!(e, ServeError::LogOnStdout { .. }), "{e:?}");
    assert_eq!(e.location(), None);
    assert_eq!(
        e.to_string(),
        "decision_log writes to standard output, which the stdio transport uses for its messages; give the log a file path"
    );

    let mut cfg = config();
    cfg.decision_log = Some(DecisionLogConfig::new(LogTarget::File(
        dir.path().to_path_buf(),
    )));
    let e = baton::serve::serve(cfg).unwrap_err();
    let at = dir.path().display().to_string();
    assert_eq!(e.location().as_deref(), Some(at.as_str()));
    assert!(
        e.to_string().starts_with("cannot write the decision log: "),
        "{e}"
    );
    assert!(
        located(&e).starts_with(&format!("{at}: error: cannot write the decision log: ")),
        "{}",
        located(&e)
    );

    let mut cfg = config();
    cfg.metrics = Some(MetricsEndpoint {
        addr: "0.0.0.0:0".into(),
        allow_remote: false,
    });
    let e = baton::serve::serve(cfg).unwrap_err();
    assert_eq!(
        located(&e),
        "0.0.0.0:0: error: cannot serve metrics: 0.0.0.0 is not a loopback address: metrics are served on loopback only (127.0.0.1 or ::1); pass metrics.allow_remote to serve them on another interface"
    );
    assert!(!e.to_string().contains("--"), "{e}");
}
