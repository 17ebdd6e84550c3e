//! Mcode's deterministic handoff (Path D) and its off-band storage, ported from
//! `apps/server/src/services/handoff/__tests__/` of Mzeey-Empire/mcode:
//! `path-d-deterministic.test.ts`, `handoff-pipeline.test.ts` and `handoff-storage.test.ts`.
//! Profile: `mcode`. Mcode's builder reads the parent thread's compaction summary, tool-call
//! records, narration segments, files changed and fork-anchor body; here they are the state's
//! `compact_summary`, `tool_call`, `narration` and `file_change` items and the request's
//! `fork_anchor`.

use super::support::{document, outcome, outcome_in, state};
use baton::deliver::{deliver, MemoryGrantStore, OffbandStore};
use baton::render::RenderOptions;
use rstest::rstest;

/// A fork of a claude parent (two runs), dispatched on claude, with optional parts.
#[derive(Default)]
struct Parent<'a> {
    compact_summary: Option<&'a str>,
    anchor: Option<(&'a str, &'a str)>,
    tools: Vec<(&'a str, &'a str, &'a str)>,
    narration: Vec<&'a str>,
    files: Vec<&'a str>,
    last_assistant: Option<&'a str>,
    child_provider: &'a str,
}

impl Parent<'_> {
    fn state(&self) -> baton::State {
        let mut items =
            String::from("      - {kind: user_message, text: \"Should we use Postgres?\"}\n");
        for (tool, input, status) in &self.tools {
            items.push_str(&format!(
                "      - {{kind: tool_call, tool: {tool}, input: \"{input}\", status: {status}, output: \"OUTPUT-NOT-SHOWN\"}}\n"
            ));
        }
        for n in &self.narration {
            items.push_str(&format!("      - {{kind: narration, text: \"{n}\"}}\n"));
        }
        for f in &self.files {
            items.push_str(&format!(
                "      - {{kind: file_change, path: {f}, change: modified}}\n"
            ));
        }
        if let Some(a) = self.last_assistant {
            items.push_str(&format!(
                "      - {{kind: assistant_message, text: \"{a}\"}}\n"
            ));
        }
        let compact = self
            .compact_summary
            .map(|c| format!("  compact_summary: \"{c}\"\n  compact_summary_through: 1\n"))
            .unwrap_or_default();
        let anchor = self
            .anchor
            .map(|(role, text)| format!(", fork_anchor: {{role: {role}, text: \"{text}\"}}"))
            .unwrap_or_default();
        let child = if self.child_provider.is_empty() {
            "claude"
        } else {
            self.child_provider
        };
        state(&format!(
            "version: 1
thread:
  id: t_child
  title: DB migration
  parent: {{thread: t_parent, run: 2}}
{compact}provider_threads:
  - {{id: P1, provider: cursor}}
runs:
  - ordinal: 1
    provider: cursor
    provider_thread: P1
    items:
      - {{kind: user_message, text: \"Plan the migration.\"}}
  - ordinal: 2
    provider: cursor
    provider_thread: P1
    items:
{items}request: {{provider: {child}, kind: fork, message: \"Carry on.\"{anchor}}}
"
        ))
    }

    fn document(&self) -> String {
        document("mcode", &self.state())
    }
}

fn base() -> Parent<'static> {
    Parent {
        last_assistant: Some("Yes because it scales."),
        ..Parent::default()
    }
}

/// Mirrors `runPathDDeterministic > always tags ladderStep D, generatedBy deterministic, and
/// matches characterCount` and `HandoffPipelineService.orchestrate > unsupported-resume provider
/// skips to D with reason null`: the deterministic builder writes the document, no fallback
/// reason, and the recorded size is the document's.
#[rstest]
#[case::claude("claude")]
#[case::codex("codex")]
fn deterministic_document_with_its_size(#[case] child: &str) {
    let o = outcome(
        "mcode",
        &Parent {
            child_provider: child,
            ..base()
        }
        .state(),
    );
    let r = o.rendered.expect("a handoff is rendered");
    assert_eq!(r.provenance.created_by, "deterministic");
    assert_eq!(r.provenance.fallback_reason, None);
    assert_eq!(r.provenance.chars.document, r.document.chars().count());
    assert!(!r.document.is_empty());
}

/// Mirrors `is deterministic for fixed input (modulo generatedAt)`.
#[test]
fn same_input_same_document() {
    let p = Parent {
        compact_summary: Some("We migrated the users table."),
        tools: vec![
            ("Read", "src/index.ts", "completed"),
            ("Edit", "src/index.ts", "completed"),
        ],
        narration: vec!["Considering the schema migration order."],
        files: vec!["a.ts", "b.ts"],
        ..base()
    };
    assert_eq!(p.document(), p.document());
}

/// Mirrors `section presence (a)` and `(b)`: no tool calls, no tool section; six tool calls,
/// each listed.
#[test]
fn tool_activity_section_presence() {
    assert!(!base().document().contains("## Recent tool activity"));
    let names: Vec<String> = (0..6).map(|i| format!("Tool{i}")).collect();
    let p = Parent {
        tools: names
            .iter()
            .map(|n| (n.as_str(), "src/index.ts", "completed"))
            .collect(),
        ..base()
    };
    let doc = p.document();
    assert!(doc.contains("## Recent tool activity"), "{doc}");
    for n in &names {
        assert!(doc.contains(&format!("- {n}: src/index.ts")), "{doc}");
    }
    assert!(
        !doc.contains("OUTPUT-NOT-SHOWN"),
        "Mcode lists a call's input, not its output"
    );
}

/// Recent tool activity keeps each call's status (`formatToolActivity`): a failed `git push`
/// reads as failed even when a later push of the same command succeeded; a completed call
/// shows no status.
#[test]
fn tool_activity_keeps_each_status() {
    let p = Parent {
        tools: vec![
            ("Bash", "git push", "failed"),
            ("Bash", "git push", "completed"),
        ],
        ..base()
    };
    let doc = p.document();
    assert!(
        doc.contains("## Recent tool activity\n\n- Bash (failed): git push\n- Bash: git push\n"),
        "{doc}"
    );
}

/// Issue 24, point 7: Mcode runs shell commands as Bash tool calls, so Path D's "Recent tool
/// activity" lists them with their status. A thread whose shell commands are `command` items
/// (a Codex thread) gets the same lines: a failing command reads as a failed Bash call (its exit
/// code kept beside the status), a successful one shows no status, in run order with the tool
/// calls; the open problem it leaves is in the document.
#[test]
fn commands_are_listed_as_bash_tool_activity_with_their_status() {
    let s = state(
        "version: 1
thread: {id: t_cmd, title: Tests}
runs:
  - ordinal: 1
    provider: codex
    items:
      - {kind: user_message, text: \"Run the tests.\"}
      - {kind: command, command: git status, exit_code: 0, output: \"OUTPUT-NOT-SHOWN\"}
      - {kind: tool_call, tool: Read, input: src/lib.rs, status: completed}
      - {kind: command, command: cargo test -p api, exit_code: 101, output: \"test failed\"}
request: {provider: claude, message: \"Fix the failing test.\"}
",
    );
    let doc = document("mcode", &s);
    assert!(
        doc.contains(
            "## Recent tool activity\n\n- Bash: git status\n- Read: src/lib.rs\n- Bash (failed, exit 101): cargo test -p api\n"
        ),
        "{doc}"
    );
    assert!(
        !doc.contains("OUTPUT-NOT-SHOWN"),
        "Mcode lists a call's input, not its output"
    );
}

/// Mcode's agents ask the user and request permission through tool calls, which Path D lists
/// with their status: an open question and a pending approval are in "Recent tool activity",
/// an answered question is not (issue 24: mcode's open-problem recall).
#[test]
fn open_questions_and_approvals_are_listed_as_tool_activity() {
    let s = state(
        "version: 1
thread: {id: t_ask, title: Release}
runs:
  - ordinal: 1
    provider: claude
    items:
      - {kind: user_message, text: \"Ship the release.\"}
      - {kind: question, text: \"Per IP or per account?\", answered: true}
      - {kind: command, command: make lint, exit_code: 0}
      - {kind: approval, text: \"Allow pushing the tag?\"}
      - {kind: question, text: \"Bump to 2.0 or 1.5?\"}
request: {provider: codex, message: \"1.5.\"}
",
    );
    let doc = document("mcode", &s);
    assert!(
        doc.contains(
            "## Recent tool activity\n\n- Bash: make lint\n- Approval (awaiting approval): Allow pushing the tag?\n- Question (unanswered): Bump to 2.0 or 1.5?\n"
        ),
        "{doc}"
    );
    assert!(!doc.contains("Per IP or per account?"), "{doc}");
}

/// Mirrors `(c) no compact summary` and `(d) present compact summary: uses Summary heading and
/// includes the text`.
#[test]
fn summary_section_presence() {
    assert!(!base().document().contains("## Summary"));
    let doc = Parent {
        compact_summary: Some("Migrated users table."),
        ..base()
    }
    .document();
    assert!(
        doc.contains("## Summary\n\n- Migrated users table.\n"),
        "{doc}"
    );
}

/// Mirrors `(e1) present filesChanged` and `(e2) absent filesChanged`.
#[test]
fn files_changed_section_presence() {
    let doc = Parent {
        files: vec!["x.ts", "y.ts"],
        ..base()
    }
    .document();
    assert!(
        doc.contains("## Recent files changed\n\n- x.ts\n- y.ts\n"),
        "{doc}"
    );
    assert!(!base().document().contains("## Recent files changed"));
}

/// Mirrors `(f1) present fork-anchor body with a compact summary`, `(f2) fork-anchor body used
/// as goal when no compact summary: no separate section` and `(f3) absent fork-anchor body`:
/// the anchor's body is in the document exactly once, also when it is the parent's latest
/// message, and there is no fork framing without an anchor.
#[rstest]
#[case::with_summary(Some("Summary here."))]
#[case::without_summary(None)]
fn fork_anchor_body_appears_once(#[case] compact: Option<&'static str>) {
    for (role, body) in [
        ("assistant", "Yes because it scales."),
        ("user", "Should we use Postgres?"),
    ] {
        let doc = Parent {
            compact_summary: compact,
            anchor: Some((role, body)),
            ..base()
        }
        .document();
        assert_eq!(doc.matches(body).count(), 1, "{doc}");
    }
    let doc = Parent {
        compact_summary: Some("Summary only."),
        ..base()
    }
    .document();
    assert!(!doc.contains("This thread is a fork"), "{doc}");
}

/// Mirrors `narration highlights: includes non-final segments, excludes final-response`: the
/// final response is the assistant message, never a narration highlight.
#[test]
fn narration_highlights_leave_out_the_final_response() {
    let doc = Parent {
        narration: vec!["planning step"],
        last_assistant: Some("final answer"),
        ..base()
    }
    .document();
    let highlights = doc
        .split_once("## Narration / reasoning highlights\n\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .expect("a narration section");
    assert_eq!(highlights, "- planning step");
}

/// Mcode surfaces at most 8 narration highlights (`MAX_NARRATION_HIGHLIGHTS`). baton keeps the
/// latest 8 where Mcode keeps the first 8 (a deliberate difference: the newest reasoning is
/// what the next provider needs).
#[test]
fn narration_keeps_the_latest_eight() {
    let segments: Vec<String> = (1..=10).map(|i| format!("segment {i:02}")).collect();
    let doc = Parent {
        narration: segments.iter().map(String::as_str).collect(),
        ..base()
    }
    .document();
    for s in &segments[..2] {
        assert!(!doc.contains(s.as_str()), "{doc}");
    }
    for s in &segments[2..] {
        assert!(doc.contains(&format!("- {s}\n")), "{doc}");
    }
}

/// Mirrors `empty everything: still produces a valid doc with title and metadata marker`.
#[test]
fn empty_parent_still_gets_a_document() {
    let doc = Parent {
        last_assistant: None,
        ..Parent::default()
    }
    .document();
    assert!(doc.starts_with("# Handoff: DB migration\n"), "{doc}");
    assert!(doc.contains("Provenance: policy `mcode`"), "{doc}");
    assert!(!doc.contains("## Recent tool activity"));
    assert!(!doc.contains("## Narration"));
}

/// Mirrors `HandoffStorage > write creates handoffs/<ulid>/handoff.md and handoff.json`: the
/// off-band delivery writes the document and its provenance side by side at a stable path
/// (`<root>/<thread>/<handoff>/`) and issues the one-shot Read pre-grant for that document.
#[test]
fn offband_write_keeps_document_and_provenance_together() {
    let root = std::env::temp_dir().join(format!("peer-mcode-storage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut o = outcome_in(
        "mcode",
        &base().state(),
        &RenderOptions::default(),
        root.clone(),
    );
    let store = OffbandStore::new(Some(root.clone()));
    let mut grants = MemoryGrantStore::new();
    let delivered = deliver(&mut o, &store, "t_child", &mut grants);
    assert_eq!(delivered.fallback_reason, None);
    let path = delivered.document_path.expect("written off-band");
    let dir = path.parent().expect("a handoff directory").to_path_buf();
    assert_eq!(dir, store.handoff_dir("t_child", "H1"));
    assert!(path.is_file());
    assert!(dir.join("handoff.json").is_file());
    let grant = delivered.grant.expect("a pre-grant");
    assert_eq!((grant.tool.as_str(), grant.uses_left), ("Read", 1));
    let _ = std::fs::remove_dir_all(&root);
}
