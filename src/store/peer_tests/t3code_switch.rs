//! t3code's provider-switch ladder, ported from
//! `apps/server/src/orchestration-v2/testkit/ProviderSwitch.integration.test.ts`
//! (pingdotgg/t3code): the decision baton takes at each dispatch of the peer scenario and the
//! provider message the target receives. Profile: `t3code`.

use super::support::{outcome, state};
use baton::decision::Strategy;
use baton::decision::ThreadAction;
use baton::state::HandoffStrategy;
use rstest::rstest;

const FIRST_PROMPT: &str = "Respond with exactly: codex before switch";
const CLAUDE_PROMPT: &str = "Respond with exactly: claude switched response";
const RETURN_PROMPT: &str = "Respond with exactly: codex after return";

/// Codex ran run 1; with `claude_ran`, claude then ran run 2 after handoff H1.
fn switch_state(claude_ran: bool, target: &str, message: &str) -> baton::State {
    let claude = if claude_ran {
        format!(
            "  - ordinal: 2
    provider: claude
    provider_thread: L1
    handoff: H1
    items:
      - {{kind: user_message, text: \"{CLAUDE_PROMPT}\"}}
      - {{kind: assistant_message, text: \"claude switched response\"}}
handoffs:
  - {{id: H1, target_run: 2, from_provider_threads: [C1], to_provider_thread: L1,
     covered: {{from: 1, to: 1}}, strategy: full_thread_summary, status: ready,
     summary: \"Full conversation context for provider handoff. - User: {FIRST_PROMPT} - Assistant: codex before switch\"}}
"
        )
    } else {
        String::new()
    };
    let claude_thread = if claude_ran {
        "  - {id: L1, provider: claude}\n"
    } else {
        ""
    };
    state(&format!(
        "version: 1
thread: {{id: \"thread:provider-switch\", title: Provider switch}}
provider_threads:
  - {{id: C1, provider: codex}}
{claude_thread}runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {{kind: user_message, text: \"{FIRST_PROMPT}\"}}
      - {{kind: assistant_message, text: \"codex before switch\"}}
{claude}request: {{provider: {target}, message: \"{message}\"}}
"
    ))
}

/// Mirrors `orchestration v2 provider switching > switches Codex to Claude and returns to the
/// original Codex thread with handoffs`, first switch: claude gets the full thread summary in a
/// new provider thread.
#[test]
fn switch_to_claude_sends_the_full_thread_summary() {
    let o = outcome("t3code", &switch_state(false, "claude", CLAUDE_PROMPT));
    assert_eq!(o.decision.strategy, Strategy::FullNew);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::Create);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::FullThreadSummary)
    );
    let turn = o.rendered.expect("a handoff is rendered").inline;
    assert!(
        turn.starts_with("Context handoff (full_thread_summary):\n"),
        "{turn}"
    );
    assert!(turn.contains("codex before switch"), "{turn}");
    assert!(
        turn.ends_with(&format!("User message:\n{CLAUDE_PROMPT}")),
        "{turn}"
    );
}

/// Same peer test, the return: codex resumes its own thread with the delta since it last
/// participated, which carries claude's reply and not codex's own earlier context, not even
/// through the handoff claude consumed (t3code skips handoff items in provider handoffs).
#[test]
fn return_to_codex_resumes_its_thread_with_the_delta() {
    let o = outcome("t3code", &switch_state(true, "codex", RETURN_PROMPT));
    assert_eq!(o.decision.strategy, Strategy::DeltaExisting);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::Resume);
    assert_eq!(o.decision.provider_thread.id.as_deref(), Some("C1"));
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::DeltaSinceTargetLastSeen)
    );
    let turn = o.rendered.expect("a handoff is rendered").inline;
    assert!(
        turn.starts_with("Context handoff (delta_since_target_last_seen):\n"),
        "{turn}"
    );
    assert!(turn.contains("claude switched response"), "{turn}");
    assert!(
        turn.ends_with(&format!("User message:\n{RETURN_PROMPT}")),
        "{turn}"
    );
    assert!(!turn.contains("codex before switch"), "{turn}");
    assert!(!turn.contains("- Handoff:"), "{turn}");
}

/// Mirrors `resolves a Claude fork into portable Codex context on first dispatch`: a fork of a
/// claude thread dispatched on codex gets portable context (a full summary) in a new thread.
#[test]
fn cross_provider_fork_gets_portable_context() {
    let s = state(
        "version: 1
thread: {id: \"thread:cross-provider-fork:target\", parent: {thread: \"thread:cross-provider-fork:source\", run: 1}}
provider_threads:
  - {id: L1, provider: claude}
runs:
  - ordinal: 1
    provider: claude
    provider_thread: L1
    items:
      - {kind: user_message, text: \"Remember that the release color is violet.\"}
      - {kind: assistant_message, text: \"I will remember violet.\"}
request: {provider: codex, kind: fork, message: \"What release color did we choose?\"}
",
    );
    let o = outcome("t3code", &s);
    assert_eq!(o.decision.strategy, Strategy::FullNew);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::Create);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::FullThreadSummary)
    );
    let turn = o.rendered.expect("a handoff is rendered").inline;
    assert!(
        turn.starts_with("Context handoff (full_thread_summary):\n"),
        "{turn}"
    );
    assert!(turn.contains("Remember that the release color is violet."));
    assert!(turn.contains("I will remember violet."));
    assert!(turn.ends_with("User message:\nWhat release color did we choose?"));
}

/// The native rung of t3code's fork resolution (`ThreadFork` / `ProviderSwitch` tests: a fork
/// on the source's own provider resolves as `native_fork`): Codex and Claude fork natively.
#[rstest]
#[case::codex("codex")]
#[case::claude("claude")]
fn same_provider_fork_is_native(#[case] provider: &str) {
    let s = state(&format!(
        "version: 1
thread: {{id: th_fork, parent: {{thread: th_source, run: 1}}}}
provider_threads:
  - {{id: P1, provider: {provider}}}
runs:
  - ordinal: 1
    provider: {provider}
    provider_thread: P1
    items:
      - {{kind: user_message, text: \"Remember that the release color is violet.\"}}
request: {{provider: {provider}, kind: fork, message: \"Which color?\"}}
"
    ));
    let o = outcome("t3code", &s);
    assert_eq!(o.decision.strategy, Strategy::NativeFork);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::ForkNative);
    assert_eq!(o.decision.provider_thread.id.as_deref(), Some("P1"));
    assert!(o.rendered.is_none(), "a native fork needs no document");
}

/// The resume-failure rung (the peer adapter's `failResume`): a provider thread that cannot be
/// resumed is replaced by a new one that gets a full summary of every run, not a delta.
#[test]
fn failed_resume_falls_back_to_a_full_summary() {
    let s = state(
        "version: 1
thread: {id: th}
provider_threads:
  - {id: C1, provider: codex, resume_failed: true}
  - {id: L1, provider: claude}
runs:
  - {ordinal: 1, provider: codex, provider_thread: C1, items: [{kind: user_message, text: one}]}
  - {ordinal: 2, provider: codex, provider_thread: C1, items: [{kind: assistant_message, text: two}]}
  - {ordinal: 3, provider: claude, provider_thread: L1, items: [{kind: assistant_message, text: three}]}
request: {provider: codex, message: back}
",
    );
    let o = outcome("t3code", &s);
    assert_eq!(o.decision.strategy, Strategy::FullNew);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::Create);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::FullThreadSummary)
    );
    let r = o.decision.covered_runs.expect("runs are covered");
    assert_eq!((r.from, r.to), (1, 3));
    let turn = o.rendered.expect("a handoff is rendered").inline;
    assert!(
        turn.contains("- User: one\n- Assistant: two\n- Assistant: three\n"),
        "{turn}"
    );
}

/// The refusal rung (`CommandPolicyCapabilityUnsupportedError` in the peer suite): a provider
/// that cannot take a handoff is refused, with no thread action and no document.
#[test]
fn provider_without_handoff_support_is_refused() {
    let s = state(
        "version: 1
thread: {id: th}
providers:
  legacybot: {accepts_handoff: false}
provider_threads:
  - {id: C1, provider: codex}
runs:
  - {ordinal: 1, provider: codex, provider_thread: C1, items: [{kind: user_message, text: one}]}
request: {provider: legacybot, message: next}
",
    );
    let o = outcome("t3code", &s);
    assert_eq!(o.decision.strategy, Strategy::Unsupported);
    assert_eq!(o.decision.provider_thread.action, ThreadAction::None);
    assert!(o.decision.handoff_strategy.is_none());
    assert!(o.rendered.is_none());
}

/// Mirrors `switches providers while consuming a pending cross-provider merge-back`, the
/// merge-back part: the target's turn carries `Context handoff (merge_back /
/// fork_delta_summary):` with the fork's prompt and reply, then the user's message.
#[test]
fn merge_back_turn_carries_the_fork_delta() {
    let s = state(
        "version: 1
thread: {id: \"thread:cross-provider-merge:fork\", parent: {thread: \"thread:cross-provider-merge:source\", run: 2}}
provider_threads:
  - {id: C1, provider: codex}
  - {id: L1, provider: claude}
  - {id: C2, provider: codex}
runs:
  - {ordinal: 1, provider: codex, provider_thread: C1, items: [{kind: user_message, text: \"Remember that the first source marker is amber.\"}]}
  - {ordinal: 2, provider: claude, provider_thread: L1, items: [{kind: user_message, text: \"Remember that the second source marker is violet.\"}]}
  - ordinal: 3
    provider: codex
    provider_thread: C2
    items:
      - {kind: user_message, text: \"Remember that the fork marker is cobalt.\"}
      - {kind: assistant_message, text: \"I will remember cobalt.\"}
request: {provider: codex, kind: merge_back, message: \"Report all three remembered markers.\"}
",
    );
    let o = outcome("t3code", &s);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::ForkDeltaSummary)
    );
    let turn = o.rendered.expect("a handoff is rendered").inline;
    assert!(
        turn.starts_with("Context handoff (merge_back / fork_delta_summary):\n"),
        "{turn}"
    );
    assert!(turn.contains("- User: Remember that the fork marker is cobalt.\n"));
    assert!(turn.contains("- Assistant: I will remember cobalt.\n"));
    assert!(
        !turn.contains("amber"),
        "the parent's own runs are not in the fork delta"
    );
    assert!(turn.ends_with("User message:\nReport all three remembered markers."));
}
