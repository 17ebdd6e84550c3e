//! t3code's handoff text, ported from `apps/server/src/orchestration-v2/ContextHandoffService.test.ts`
//! (pingdotgg/t3code) and from the text rules its service implements (`summarizeDeltaItem`,
//! `makeProviderHandoffSummary`, `makeForkDeltaSummary`, `makeLegacyImportSummary`,
//! `providerMessageWithContextHandoffs`), which that suite exercises through its assertions.
//! Profiles: `t3code` and `t3code-legacy`.

use super::support::{document, outcome, outcome_with, prompt, state};
use baton::render::RenderOptions;
use baton::state::HandoffStrategy;
use rstest::rstest;

/// One codex run with the given user and assistant texts; the request goes to claude, which
/// has no thread yet (a full handoff; for the legacy profile, the continuation).
fn imported(messages: &[(&str, &str)]) -> baton::State {
    let mut items = String::new();
    for (role, text) in messages {
        let text = serde_json::to_string(text).expect("a string serialises");
        items.push_str(&format!("      - {{kind: {role}_message, text: {text}}}\n"));
    }
    state(&format!(
        "version: 1
thread: {{id: thread-legacy-context}}
provider_threads:
  - {{id: C1, provider: codex}}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
{items}request: {{provider: claude, message: \"Continue from there.\"}}
"
    ))
}

const LEGACY_HEADER: &str = "Imported conversation history from the previous T3 Code orchestrator. Use it as context; do not repeat it unless the user asks.";

/// Mirrors `ContextHandoffService legacy import > prepares imported history for the first
/// native v2 turn`.
#[test]
fn legacy_import_prepares_history_for_the_first_turn() {
    let s = imported(&[
        ("user", "What did we decide?"),
        ("assistant", "We decided to keep the migration lightweight."),
    ]);
    let o = outcome("t3code-legacy", &s);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::ManualContext)
    );
    let r = o.rendered.expect("a handoff is rendered");
    assert_eq!(
        r.document,
        format!(
            "{LEGACY_HEADER}\n\nUser:\nWhat did we decide?\n\nAssistant:\nWe decided to keep the migration lightweight.\n"
        )
    );
    let summary_text = r.document.trim_end_matches('\n');
    assert!(r.inline.contains(summary_text), "{}", r.inline);
    assert!(
        r.inline
            .ends_with("\n\nUser message:\nContinue from there."),
        "{}",
        r.inline
    );
    assert!(
        r.inline.starts_with("Context handoff (manual_context):\n"),
        "{}",
        r.inline
    );
}

/// Mirrors `ContextHandoffService legacy import > preserves role attribution when truncating
/// imported history` (lifecycle bug 3: the newest *tail* is kept, with its role label).
#[test]
fn legacy_import_keeps_the_newest_tail_with_its_role_label() {
    let text = format!("{} retained final words", "x".repeat(35_000));
    let doc = document("t3code-legacy", &imported(&[("user", &text)]));
    let summary_text = doc.trim_end_matches('\n');
    assert!(
        summary_text.chars().count() <= 32_000,
        "{}",
        summary_text.len()
    );
    assert!(summary_text.contains("User:\n... retained final words"));
    // Not the x-run glued to the final words: the cut moved to the next whitespace.
    assert!(!summary_text.contains("x retained final words"));
    assert_eq!(
        summary_text,
        format!("{LEGACY_HEADER}\n\nUser:\n... retained final words")
    );
}

/// Mirrors `ContextHandoffService legacy import > retains the newest oversized import even
/// when it has no whitespace`. baton counts characters where t3code counts UTF-16 code units,
/// so the single token is 40,000 emoji here (oversized in characters as t3code's 20,000 are in
/// code units).
#[test]
fn legacy_import_keeps_a_whitespace_free_newest_message() {
    let token = format!("{}LATEST_SINGLE_TOKEN", "🧪".repeat(40_000));
    let doc = document(
        "t3code-legacy",
        &imported(&[("assistant", "older message"), ("user", &token)]),
    );
    let summary_text = doc.trim_end_matches('\n');
    assert_eq!(summary_text.chars().count(), 32_000);
    assert!(summary_text.contains("User:\n... 🧪"));
    assert!(summary_text.ends_with("🧪LATEST_SINGLE_TOKEN"));
    assert!(!summary_text.contains('\u{fffd}'));
    assert!(
        !summary_text.contains("older message"),
        "no room left for it"
    );
}

/// The budget walk goes on after a cut while room is left, as t3code's does: a short older
/// message still fits when moving the cut to a word boundary freed room.
#[test]
fn legacy_import_fits_older_messages_into_room_freed_by_the_cut() {
    // The cut lands 20 characters into a 60-character word, so the tail starts after it and
    // about 60 characters stay free for the older message.
    let body_room = 31_871 - "User:\n... ".len();
    let filler = "y".repeat(body_room - 40);
    let newest = format!("{} {}", "z".repeat(60), filler);
    let doc = document(
        "t3code-legacy",
        &imported(&[("assistant", "ok"), ("user", "long ago"), ("user", &newest)]),
    );
    assert!(
        doc.contains("User:\nlong ago\n\nUser:\n... yyy"),
        "{}",
        &doc[..300]
    );
    assert!(doc.contains("Assistant:\nok\n\n"), "{}", &doc[..300]);
}

fn provider_switch(target: &str, from_seen_run: bool) -> baton::State {
    // Codex ran run 1, claude run 2; the request goes to `target`.
    let claude_thread = if from_seen_run {
        "  - {id: L1, provider: claude}\n"
    } else {
        ""
    };
    state(&format!(
        "version: 1
thread: {{id: thread-switch}}
provider_threads:
  - {{id: C1, provider: codex}}
{claude_thread}runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {{kind: user_message, text: \"Please refactor the parser.\"}}
      - {{kind: assistant_message, text: \"Refactored parser.ts.\"}}
      - {{kind: command, command: \"pnpm   test\\n --filter parser\"}}
      - {{kind: file_change, path: src/parser/parser.ts, change: modified}}
      - {{kind: reasoning, text: \"hidden\"}}
  - ordinal: 2
    provider: {second}
    provider_thread: {second_thread}
    items:
      - {{kind: assistant_message, text: \"Checked the parser.\"}}
checkpoints:
  - {{run: 1, files_changed: 2}}
request: {{provider: {target}, message: \"Keep going.\"}}
",
        second = if from_seen_run { "claude" } else { "codex" },
        second_thread = if from_seen_run { "L1" } else { "C1" },
    ))
}

/// The full provider handoff, byte for byte as `makeProviderHandoffSummary` writes it, wrapped
/// by `providerMessageWithContextHandoffs`. Mirrors `ContextHandoffService AI fallback > falls
/// back to the template summary when generation fails` (no summarizer: the template).
#[test]
fn full_provider_handoff_text() {
    let s = provider_switch("claude", false);
    let expected = "Full conversation context for provider handoff.
From driver: codex
To driver: claude
Covered app runs: 1-2

Canonical conversation context:
- User: Please refactor the parser.
- Assistant: Refactored parser.ts.
- Command: pnpm test --filter parser
- File change: parser.ts
- Checkpoint: 2 files
- Assistant: Checked the parser.
";
    assert_eq!(document("t3code", &s), expected);
    assert_eq!(
        prompt("t3code", &s),
        format!(
            "Context handoff (full_thread_summary):\n{}\n\nUser message:\nKeep going.",
            expected.trim_end_matches('\n')
        )
    );
}

/// The delta header (`delta_since_target_last_seen`): codex saw run 1, claude ran run 2.
#[test]
fn delta_provider_handoff_text() {
    let s = provider_switch("codex", true);
    let expected = "Conversation delta since this provider last participated.
From driver: claude
To driver: codex
Covered app runs: 2-2

Canonical conversation context:
- Assistant: Checked the parser.
";
    assert_eq!(document("t3code", &s), expected);
    assert!(prompt("t3code", &s).starts_with("Context handoff (delta_since_target_last_seen):\n"));
}

/// `makeProviderHandoffSummary`'s empty case: covered runs with nothing user-visible.
#[test]
fn provider_handoff_without_visible_items() {
    let s = state(
        "version: 1
thread: {id: th}
provider_threads:
  - {id: C1, provider: codex}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {kind: reasoning, text: hidden}
      - {kind: narration, text: thinking aloud}
request: {provider: claude}
",
    );
    assert!(document("t3code", &s)
        .ends_with("Canonical conversation context:\n- No user-visible context items.\n"));
}

/// `summarizeDeltaItem`: one `- ` line per item kind t3code hands over, through the
/// 240-character compact rule (237 characters then `...`); every other kind is skipped.
#[rstest]
#[case::user("{kind: user_message, text: \"a\\n\\n  b\"}", Some("- User: a b"))]
#[case::assistant("{kind: assistant_message, text: done}", Some("- Assistant: done"))]
#[case::command(
    "{kind: command, command: \"cargo  test\", exit_code: 1, output: boom}",
    Some("- Command: cargo test")
)]
#[case::file_change(
    "{kind: file_change, path: a/b/c.rs, diff_lines: 900}",
    Some("- File change: c.rs")
)]
#[case::long_user(&format!("{{kind: user_message, text: {}}}", "w".repeat(300)), Some(&*format!("- User: {}...", "w".repeat(237))))]
#[case::exactly_240(&format!("{{kind: user_message, text: {}}}", "w".repeat(240)), Some(&*format!("- User: {}", "w".repeat(240))))]
#[case::tool_call("{kind: tool_call, tool: Read, input: x.rs}", None)]
#[case::narration("{kind: narration, text: musing}", None)]
#[case::error("{kind: error, text: failed}", None)]
#[case::plan("{kind: plan, steps: [{text: one, status: pending}]}", None)]
fn item_lines(#[case] item: &str, #[case] line: Option<&str>) {
    let s = state(&format!(
        "version: 1
thread: {{id: th}}
provider_threads:
  - {{id: C1, provider: codex}}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {item}
request: {{provider: claude}}
"
    ));
    let doc = document("t3code", &s);
    let body = doc
        .split_once("Canonical conversation context:\n")
        .map(|(_, b)| b)
        .unwrap_or("");
    match line {
        Some(l) => assert_eq!(body, format!("{l}\n")),
        None => assert_eq!(body, "- No user-visible context items.\n"),
    }
}

fn merge_back(child_items: &str) -> baton::State {
    state(&format!(
        "version: 1
thread: {{id: thread-fork, parent: {{thread: thread-source, run: 1}}}}
provider_threads:
  - {{id: C1, provider: codex}}
  - {{id: C2, provider: codex}}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {{kind: user_message, text: \"Before the fork.\"}}
  - ordinal: 2
    provider: codex
    provider_thread: C2
    items:
{child_items}request: {{provider: codex, kind: merge_back, message: \"Report all three markers.\"}}
"
    ))
}

/// `makeForkDeltaSummary` and the merge-back label of `providerMessageWithContextHandoffs`
/// (`ProviderSwitch.integration.test.ts > switches providers while consuming a pending
/// cross-provider merge-back` asserts `Context handoff (merge_back / fork_delta_summary):`).
#[test]
fn merge_back_fork_delta_text() {
    let s = merge_back(
        "      - {kind: user_message, text: \"Remember that the fork marker is cobalt.\"}
      - {kind: assistant_message, text: \"I will remember cobalt.\"}
",
    );
    let o = outcome("t3code", &s);
    assert_eq!(
        o.decision.handoff_strategy,
        Some(HandoffStrategy::ForkDeltaSummary)
    );
    let r = o.rendered.expect("a handoff is rendered");
    assert_eq!(
        r.inline,
        "Context handoff (merge_back / fork_delta_summary):
Merge-back context from forked conversation.
Source thread: thread-fork
Target thread: thread-source
Covered fork runs: 2-2

Fork delta:
- User: Remember that the fork marker is cobalt.
- Assistant: I will remember cobalt.

User message:
Report all three markers."
    );
}

/// `makeForkDeltaSummary`'s empty case.
#[test]
fn merge_back_without_visible_items() {
    let s = merge_back("      - {kind: reasoning, text: hidden}\n");
    assert!(document("t3code", &s).ends_with("Fork delta:\n- No user-visible delta items.\n"));
}

/// `ContextHandoffService AI provider handoff > uses the AI-generated summary when generation
/// succeeds`: the header stays, the summary replaces the canonical context.
#[test]
fn summarizer_text_replaces_the_canonical_context() {
    let s = provider_switch("claude", false);
    let render = RenderOptions {
        created_by: Some("summarizer".into()),
        summary_text: Some("AI compacted summary (codex -> claude)".into()),
        ..RenderOptions::default()
    };
    let doc = outcome_with("t3code", &s, &render)
        .rendered
        .expect("a handoff is rendered")
        .document;
    assert!(doc.starts_with("Full conversation context for provider handoff.\n"));
    assert!(doc.contains("Covered app runs: 1-2\n\nAI compacted summary (codex -> claude)\n"));
    assert!(!doc.contains("Canonical conversation context:"));
}
