//! Session adapters end to end: the Claude Code and Codex CLI fixtures (written in each tool's
//! format, covering every entry type the mapping names, a malformed line, non-UTF-8 bytes and
//! a truncated last line) imported item by item; the handoff rendered from them; bad input;
//! `baton sessions list` on a temporary HOME; `baton handoff` and `baton db import --from`.


use baton::import::{self, ImportOptions, Tool};
use baton::state::{FileChangeKind, Item, RunStatus, StepStatus, ToolStatus};
use std::path::{Path, PathBuf};

/// What tests/common gives the integration tests, for the ones moved here.
mod common {
    /// Where the tests' decisions put off-band documents, so that paths are stable.
    pub const DOC_ROOT: &str = "/tmp/baton-test-docs";

    /// Replace every short policy hash (`sha256 0123456789ab`) with `sha256 <policy>`, so that
    /// snapshots of explain output and documents do not change with every edit of a policy.
    pub fn redact_sha(text: &str) -> String {
        const TAG: &str = "sha256 ";
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find(TAG) {
            let (head, tail) = rest.split_at(i + TAG.len());
            out.push_str(head);
            let hex = tail.chars().take_while(|c| c.is_ascii_hexdigit()).count();
            if hex >= 12 {
                out.push_str("<policy>");
                rest = &tail[hex..];
            } else {
                rest = tail;
            }
        }
        out.push_str(rest);
        out
    }
}

const CLAUDE: &str = "tests/fixtures/import/claude-code/session.jsonl";
const CODEX: &str = "tests/fixtures/import/codex/rollout-2026-11-30T11-00-00-0199aa11-2222-7333-8444-555566667777.jsonl";
const CLAUDE_ID: &str = "3f1c2a9e-7b4d-4c61-9e2a-5d8f0b6a1c23";
const CODEX_ID: &str = "0199aa11-2222-7333-8444-555566667777";

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn import(tool: Tool, p: &str) -> import::Imported {
    let imported = import::import_file(tool, &fixture(p), &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    baton::state::validate(&imported.state, p).unwrap_or_else(|e| panic!("{e}"));
    imported
}

/// Items of a run without the protocol noise, as (kind, primary text).
fn kinds(items: &[Item]) -> Vec<(&'static str, String)> {
    items
        .iter()
        .filter(|i| i.kind() != "protocol")
        .map(|i| (i.kind(), i.primary_text().to_string()))
        .collect()
}

#[test]
fn claude_code_mapping_item_by_item() {
    let im = import(Tool::ClaudeCode, CLAUDE);
    let s = &im.state;
    assert_eq!(im.session_id, CLAUDE_ID);
    assert_eq!(s.thread.id, CLAUDE_ID);
    assert_eq!(s.thread.title.as_deref(), Some("Add GitHub OAuth login"));
    assert_eq!(
        s.thread.compact_summary.as_deref(),
        Some("The user is adding GitHub OAuth login; sessions live in Postgres; CSRF check added.")
    );
    assert_eq!(s.thread.compact_summary_through, Some(2));
    assert_eq!(im.cwd.as_deref(), Some("/home/dev/oauth-app"));
    let pt = &s.provider_threads[0];
    assert_eq!(
        (pt.id.as_str(), pt.provider.as_str()),
        (CLAUDE_ID, "claude")
    );
    assert_eq!(pt.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(s.runs.len(), 3);
    assert!(s
        .runs
        .iter()
        .all(|r| r.provider == "claude" && r.provider_thread.as_deref() == Some(CLAUDE_ID)));

    // Run 1: the meta, caveat, argument-less slash command and local output before the
    // prompt are protocol; the prompt starts the run.
    let r1 = &s.runs[0];
    assert_eq!(r1.status, RunStatus::Interrupted);
    let protocol_before: Vec<&Item> = r1
        .items
        .iter()
        .take_while(|i| i.kind() == "protocol")
        .collect();
    assert_eq!(protocol_before.len(), 4, "{protocol_before:?}");
    assert!(protocol_before[2].primary_text().contains("/clear"));
    assert_eq!(
        kinds(&r1.items),
        vec![
            ("user_message", "Add GitHub OAuth login to the web app. Keep sessions in Postgres.".into()),
            ("reasoning", "SECRET-REASONING: the user wants OAuth; look at the router first.".into()),
            ("narration", "I'll look at the router first.".into()),
            ("command", "ls src".into()),
            ("command", "cargo test".into()),
            ("file_change", "/home/dev/oauth-app/src/router.rs".into()),
            ("file_change", "/home/dev/oauth-app/migrations/0004_sessions.sql".into()),
            ("tool_call", "Edit".into()),
            ("tool_call", "Edit".into()),
            ("approval", "Allow Edit: /home/dev/oauth-app/.env.example? (declined)".into()),
            // The interruption says so, with what the run had finished by then.
            ("error", "The user interrupted run 1 before it finished ([Request interrupted by user for tool use]). What it had finished by then:\n- ran ls src (exit 0):\n  main.rs\n  router.rs\n- ran cargo test (exit 101):\n  test auth::callback ... FAILED\n".into()),
            ("plan", "".into()),
            ("user_message", "also check the logout route".into()),
            ("assistant_message", "The callback route is in place; the session table migration is written. Tests still fail on the callback.".into()),
        ]
    );
    let real: Vec<&Item> = r1.items.iter().filter(|i| i.kind() != "protocol").collect();
    match real[3] {
        Item::Command {
            exit_code, output, ..
        } => {
            assert_eq!(*exit_code, Some(0));
            assert_eq!(output.as_deref(), Some("main.rs\nrouter.rs"));
        }
        other => panic!("{other:?}"),
    }
    match real[4] {
        Item::Command {
            exit_code, output, ..
        } => {
            assert_eq!(*exit_code, Some(101));
            assert!(output.as_deref().unwrap_or("").contains("FAILED"));
        }
        other => panic!("{other:?}"),
    }
    match real[5] {
        Item::FileChange {
            change, diff_lines, ..
        } => {
            assert_eq!(*change, Some(FileChangeKind::Modified));
            assert_eq!(*diff_lines, Some(3));
        }
        other => panic!("{other:?}"),
    }
    match real[6] {
        Item::FileChange {
            change, diff_lines, ..
        } => {
            assert_eq!(*change, Some(FileChangeKind::Created));
            assert_eq!(*diff_lines, Some(5));
        }
        other => panic!("{other:?}"),
    }
    // A failed edit is a failed tool call; a rejected one a declined call plus a resolved
    // approval.
    assert!(
        matches!(real[7], Item::ToolCall { status: Some(ToolStatus::Failed), input: Some(i), .. } if i.ends_with("src/main.rs"))
    );
    assert!(matches!(
        real[8],
        Item::ToolCall {
            status: Some(ToolStatus::Declined),
            ..
        }
    ));
    assert!(matches!(real[9], Item::Approval { resolved: true, .. }));
    match real[11] {
        Item::Plan { steps, .. } => {
            let st: Vec<StepStatus> = steps.iter().map(|s| s.status).collect();
            assert_eq!(
                st,
                vec![
                    StepStatus::Done,
                    StepStatus::InProgress,
                    StepStatus::Pending
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    // The TodoWrite result is consumed, not reported as a stray result.
    assert!(!r1
        .items
        .iter()
        .any(|i| i.primary_text().contains("unknown call")));

    // Run 2: a slash command with arguments is a user message; Task + result; MultiEdit;
    // AskUserQuestion answered; ExitPlanMode approved.
    let r2 = &s.runs[1];
    assert_eq!(
        kinds(&r2.items).iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![
            "user_message",
            "narration",
            "tool_call",
            "subagent_result",
            "file_change",
            "question",
            "approval",
            "assistant_message"
        ]
    );
    assert_eq!(r2.items[0].primary_text(), "/review src/router.rs for CSRF");
    let real: Vec<&Item> = r2.items.iter().filter(|i| i.kind() != "protocol").collect();
    assert!(
        matches!(real[3], Item::SubagentResult { agent, text, .. } if agent == "code-reviewer" && text.contains("never checked"))
    );
    assert!(matches!(
        real[4],
        Item::FileChange {
            diff_lines: Some(5),
            ..
        }
    ));
    assert!(matches!(real[5], Item::Question { answered: true, text, .. } if text.contains("Lax")));
    assert!(
        matches!(real[6], Item::Approval { resolved: true, text, .. } if text.contains("Sign the state cookie"))
    );
    // The unknown entry is kept as protocol.
    assert!(r2
        .items
        .iter()
        .any(|i| i.kind() == "protocol" && i.primary_text().contains("mystery-entry")));

    // Run 3: the prompt with non-UTF-8 bytes (replaced), reasoning, the answer; the truncated
    // last line is ignored.
    let r3 = &s.runs[2];
    assert_eq!(
        kinds(&r3.items).iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec!["user_message", "reasoning", "assistant_message"]
    );
    assert!(r3.items[0]
        .primary_text()
        .starts_with("Now add rate limiting"));
    assert!(r3.items[0].primary_text().contains('\u{FFFD}'));
}

#[test]
fn codex_mapping_item_by_item() {
    let im = import(Tool::Codex, CODEX);
    let s = &im.state;
    assert_eq!(s.thread.id, CODEX_ID);
    assert_eq!(
        s.thread.title.as_deref(),
        Some("Add GitHub OAuth login to the web app. Keep sessions in Postgres.")
    );
    assert_eq!(im.cwd.as_deref(), Some("/home/dev/oauth-app"));
    assert_eq!(s.provider_threads[0].provider, "codex");
    assert_eq!(s.provider_threads[0].model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(
        s.thread.compact_summary.as_deref(),
        Some("The user is adding GitHub OAuth login; sessions live in Postgres; the callback test fails.")
    );
    assert_eq!(s.runs.len(), 2);
    let r1 = &s.runs[0];
    // session_meta, developer message, AGENTS.md, environment context, turn_context,
    // task_started: protocol before the prompt.
    assert_eq!(
        r1.items
            .iter()
            .take_while(|i| i.kind() == "protocol")
            .count(),
        6
    );
    assert_eq!(
        kinds(&r1.items).iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![
            "user_message",
            "reasoning",
            "command",
            "command",
            "narration",
            "file_change",
            "file_change",
            "tool_call",
            "tool_call",
            "approval",
            "plan",
            "assistant_message"
        ]
    );
    let real: Vec<&Item> = r1.items.iter().filter(|i| i.kind() != "protocol").collect();
    assert!(
        matches!(real[2], Item::Command { command, exit_code: Some(101), .. } if command == "cargo test")
    );
    assert!(
        matches!(real[3], Item::Command { command, exit_code: Some(0), output: Some(o), .. } if command == "ls src" && o == "main.rs\nrouter.rs\n")
    );
    assert!(
        matches!(real[5], Item::FileChange { path, change: Some(FileChangeKind::Created), diff_lines: Some(3), .. } if path == "migrations/0004_sessions.sql")
    );
    assert!(
        matches!(real[6], Item::FileChange { path, change: Some(FileChangeKind::Modified), diff_lines: Some(3), .. } if path == "src/router.rs")
    );
    assert!(
        matches!(real[7], Item::ToolCall { tool, status: Some(ToolStatus::Failed), .. } if tool == "apply_patch")
    );
    assert!(
        matches!(real[8], Item::ToolCall { tool, status: Some(ToolStatus::Declined), .. } if tool == "shell_command")
    );
    assert!(matches!(real[9], Item::Approval { resolved: true, .. }));
    assert!(matches!(real[10], Item::Plan { steps, .. } if steps.len() == 3));
    // The echoes (event_msg user_message, agent_message, agent_reasoning) are not doubled.
    assert_eq!(
        r1.items
            .iter()
            .filter(|i| i.kind() == "user_message")
            .count(),
        1
    );
    assert_eq!(im.report.echoes, 4);

    let r2 = &s.runs[1];
    assert_eq!(r2.status, RunStatus::Interrupted);
    assert_eq!(
        kinds(&r2.items).iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![
            "user_message",
            "tool_call",
            "tool_call",
            "command",
            "error",
            "reasoning",
            "assistant_message",
            // `turn_aborted`: the interruption, said.
            "error"
        ]
    );
    let real: Vec<&Item> = r2.items.iter().filter(|i| i.kind() != "protocol").collect();
    assert!(
        matches!(real[3], Item::Command { command, exit_code: Some(0), .. } if command == "rg state src")
    );
    assert!(matches!(real[4], Item::Error { text, .. } if text.starts_with("stream disconnected")));
    assert_eq!(real[5].primary_text(), "[encrypted reasoning]");
    let unknown: Vec<&str> = im.report.unknown.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        unknown,
        vec![
            "response_item/mystery_item",
            "event_msg/mystery_event",
            "mystery_line"
        ]
    );
}

#[test]
fn bad_lines_are_warnings_naming_file_and_line() {
    for (tool, p, malformed, utf8, last) in [
        (Tool::ClaudeCode, CLAUDE, 27, 44, 47),
        (Tool::Codex, CODEX, 13, 32, 47),
    ] {
        let im = import(tool, p);
        let p = fixture(p).display().to_string();
        let w: Vec<String> = im
            .report
            .all_warnings(&p)
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert_eq!(im.report.malformed, 1);
        assert!(im.report.truncated_tail);
        assert!(
            w.iter()
                .any(|w| w.starts_with(&format!("{p}:{malformed}: warning: malformed JSON"))),
            "{w:#?}"
        );
        assert!(w
            .iter()
            .any(|w| w.starts_with(&format!("{p}:{utf8}: warning: invalid UTF-8"))));
        assert!(w.contains(&format!(
            "{p}:{last}: warning: the last line is incomplete (the session is still being written); ignored"
        )));
        assert!(w
            .iter()
            .any(|w| w.contains("of unknown type kept as protocol items")));
    }
}

#[test]
fn handoff_has_latest_message_every_changed_file_and_no_reasoning() {
    for (tool, p, latest, files) in [
        (
            Tool::ClaudeCode,
            CLAUDE,
            "Now add rate limiting to the login endpoint.",
            &[
                "/home/dev/oauth-app/src/router.rs",
                "/home/dev/oauth-app/migrations/0004_sessions.sql",
                "/home/dev/oauth-app/src/auth.rs",
            ][..],
        ),
        (
            Tool::Codex,
            CODEX,
            "Review the OAuth flow for CSRF issues.",
            &["migrations/0004_sessions.sql", "src/router.rs"][..],
        ),
    ] {
        let opts = ImportOptions {
            request_provider: Some(
                if tool == Tool::Codex {
                    "claude"
                } else {
                    "codex"
                }
                .to_string(),
            ),
            request_message: Some("Carry on.".to_string()),
        };
        let im = import::import_file(tool, &fixture(p), &opts).unwrap();
        let policy = baton::policy::load("default").unwrap();
        let out = baton::pipeline::run(
            &policy,
            &im.state,
            &baton::EvalOptions::default(),
            &baton::render::RenderOptions::default(),
        )
        .unwrap();
        let doc = &out.rendered.as_ref().expect("a handoff").document;
        assert!(doc.contains(latest), "{doc}");
        // Files are listed relative to the session's working directory (the workspace).
        let cwd = im.state.thread.workspace.clone().unwrap_or_default();
        for f in files {
            let rel = f.strip_prefix(&format!("{cwd}/")).unwrap_or(f);
            assert!(doc.contains(rel), "{rel} missing from\n{doc}");
        }
        assert!(!doc.contains("SECRET-REASONING"), "{doc}");
        assert!(!doc.contains("encrypted reasoning"), "{doc}");
    }
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn claude_line(ty: &str, content: serde_json::Value) -> String {
    serde_json::json!({
        "type": ty, "sessionId": "big-session", "cwd": "/w", "uuid": "u",
        "message": {"role": ty, "content": content}
    })
    .to_string()
}

#[test]
fn ten_megabyte_tool_output_is_elided_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let big = "x".repeat(10 * 1024 * 1024 - 3) + "END";
    write_lines(
        &path,
        &[
            claude_line("user", serde_json::json!("Dump the log.")),
            claude_line(
                "assistant",
                serde_json::json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat big.log"}}]),
            ),
            claude_line(
                "user",
                serde_json::json!([{"type": "tool_result", "tool_use_id": "t1", "content": big}]),
            ),
            claude_line(
                "assistant",
                serde_json::json!([{"type": "text", "text": "Done."}]),
            ),
        ],
    );
    let im = import::import_file(Tool::ClaudeCode, &path, &ImportOptions::default()).unwrap();
    baton::state::validate(&im.state, "big").unwrap();
    let Item::Command {
        output: Some(out),
        exit_code,
        ..
    } = &im.state.runs[0].items[1]
    else {
        panic!("{:?}", im.state.runs[0].items);
    };
    assert_eq!(*exit_code, Some(0));
    assert!(out.chars().count() < import::MAX_OUTPUT_CHARS + 100);
    assert!(out.starts_with("xxxx") && out.ends_with("END"));
    assert!(out.contains("characters elided by baton import"));
    assert_eq!(im.report.elided, 1);
}

/// The handoff documents of both fixtures, as a model taking over would read them.
#[test]
fn handoff_documents_of_the_fixtures() {
    for (name, tool, p, to) in [
        ("claude_code_to_codex", Tool::ClaudeCode, CLAUDE, "codex"),
        ("codex_to_claude", Tool::Codex, CODEX, "claude"),
    ] {
        let opts = ImportOptions {
            request_provider: Some(to.to_string()),
            request_message: Some("Carry on where the session stopped.".to_string()),
        };
        let im = import::import_file(tool, &fixture(p), &opts).unwrap();
        let policy = baton::policy::load("default").unwrap();
        let out = baton::pipeline::run(
            &policy,
            &im.state,
            &baton::EvalOptions {
                target: None,
                document_root: Some(PathBuf::from(common::DOC_ROOT)),
            },
            &baton::render::RenderOptions::default(),
        )
        .unwrap();
        let doc = &out.rendered.as_ref().expect("a handoff").document;
        insta::assert_snapshot!(format!("handoff_{name}"), common::redact_sha(doc));
    }
}

// ---- the real-format corpus (tests/fixtures/import/corpus) ----

const CORPUS: &str = "tests/fixtures/import/corpus";

fn corpus(name: &str) -> import::Imported {
    let p = format!("{CORPUS}/{name}");
    let tool = import::detect_tool(&fixture(&p)).unwrap();
    import(tool, &p)
}

fn open_problems(state: &baton::state::State) -> Vec<String> {
    let runs: Vec<u32> = state.runs.iter().map(|r| r.ordinal).collect();
    baton::facts::item_contexts(state, &runs)
        .iter()
        .filter(|c| c.is_open())
        .map(|c| match c.item {
            Some(Item::Command { command, .. }) => command.clone(),
            Some(i) => format!("{} {}", i.kind(), i.primary_text()),
            None => c.kind.to_string(),
        })
        .collect()
}

/// Codex 0.128 writes prompts only as `user_message` events: each is kept, the turn markers
/// make the runs, and a prompt sent while a turn ran is a message of that run.
#[test]
fn codex_event_only_prompts_keep_every_prompt_and_turn() {
    let im = corpus("codex-0128-unified-exec.jsonl");
    let s = &im.state;
    assert_eq!(
        s.thread.title.as_deref(),
        Some("Add per-client rate limiting to the /transfers endpoint: 20 requests a minute, ...")
    );
    assert_eq!(s.runs.len(), 3);
    let prompts: Vec<Vec<String>> = s
        .runs
        .iter()
        .map(|r| {
            r.items
                .iter()
                .filter_map(|i| match i {
                    Item::UserMessage { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    assert!(prompts[0][0].starts_with("Add per-client rate limiting"));
    assert!(prompts[1][0].starts_with("Now write tests for it"));
    assert_eq!(
        prompts[2],
        [
            "Start the dev server so I can try it with curl.",
            "Use port 9090, 8080 is taken by the gateway."
        ]
    );
    // Each answer once, though written as an event and a response item.
    let answers = s.runs[0]
        .items
        .iter()
        .filter(|i| matches!(i, Item::Narration { .. } | Item::AssistantMessage { .. }))
        .count();
    assert_eq!(answers, 2);
    assert!(im.report.warnings.is_empty(), "{:?}", im.report.warnings);
}

/// Unified exec: the polls give their command its output and final exit code and are no
/// items; a process still running at the end keeps its output, without an exit code.
#[test]
fn unified_exec_polls_complete_their_commands() {
    let im = corpus("codex-0128-unified-exec.jsonl");
    let commands: Vec<(&str, Option<i64>, &str)> = im
        .state
        .runs
        .iter()
        .flat_map(|r| r.items.iter())
        .filter_map(|i| match i {
            Item::Command {
                command,
                exit_code,
                output,
                ..
            } => Some((
                command.as_str(),
                *exit_code,
                output.as_deref().unwrap_or(""),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(commands.len(), 9, "{commands:?}");
    let build = commands[2];
    assert_eq!((build.0, build.1), ("cargo build", Some(101)));
    assert_eq!(
        build.2,
        "   Compiling ledger-api v0.4.0 (/home/dev/ledger-api)\n   Compiling tower v0.5.1\nerror[E0412]: cannot find type `RedisError` in this scope\n --> src/middleware/rate_limit.rs:5:55\nerror: could not compile `ledger-api` (lib) due to 1 previous error\n"
    );
    assert_eq!((commands[3].0, commands[3].1), ("cargo build", Some(0)));
    let stopped = commands[7];
    assert_eq!(
        (stopped.0, stopped.1),
        ("cargo run --bin ledger-api", Some(130))
    );
    assert!(stopped.2.contains("[stdin: \\u{3}]"), "{}", stopped.2);
    let server = commands[8];
    assert_eq!(
        server,
        (
            "PORT=9090 cargo run --bin ledger-api",
            None,
            "listening on 127.0.0.1:9090\n"
        )
    );
    assert!(!im
        .state
        .runs
        .iter()
        .flat_map(|r| r.items.iter())
        .any(|i| matches!(i, Item::ToolCall { tool, .. } if tool == "write_stdin")));
    assert_eq!(im.state.runs[2].status, RunStatus::Completed);
}

/// Open problems on real-format logs: only what is still broken.
#[rstest::rstest]
#[case::codex(
    "codex-0128-unified-exec.jsonl",
    // Not: the build and test fixed later, the patch applied on the second try, the `rg` that
    // found nothing, the server stopped with Ctrl-C.
    &["cargo clippy --all-targets -- -D warnings"]
)]
#[case::claude(
    "claude-compacted-fixes.jsonl",
    // Not: the Read of a missing file, the `rg` with no match, the Edit redone, the test fixed.
    &["npx eslint src/cart"]
)]
#[case::claude_interrupted("claude-interrupted-research.jsonl", &[])]
#[case::codex_interrupted("codex-interrupted-research.jsonl", &[])]
fn open_problems_are_the_live_ones(#[case] log: &str, #[case] open: &[&str]) {
    let im = corpus(log);
    assert_eq!(open_problems(&im.state), open);
}

/// A run the user interrupted says so, with the research it had finished.
#[test]
fn an_interrupted_run_keeps_what_it_finished() {
    let im = corpus("claude-interrupted-research.jsonl");
    let r1 = &im.state.runs[0];
    assert_eq!(r1.status, RunStatus::Interrupted);
    let said = r1
        .items
        .iter()
        .find_map(|i| match i {
            Item::Error { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .unwrap();
    assert!(said.starts_with(
        "The user interrupted run 1 before it finished ([Request interrupted by user for tool use]). What it had finished by then:\n- WebSearch RDS PostgreSQL point-in-time recovery RPO:\n"
    ), "{said}");
    assert!(said.contains("RESEARCH-RDS-5MIN") && said.contains("RESEARCH-CLOUDSQL-WAL"));
    // The handoff document carries it.
    let opts = ImportOptions {
        request_provider: Some("codex".into()),
        request_message: Some("Go on.".into()),
    };
    let im = import::import_file(
        Tool::ClaudeCode,
        &fixture(&format!("{CORPUS}/claude-interrupted-research.jsonl")),
        &opts,
    )
    .unwrap();
    let policy = baton::policy::load("default").unwrap();
    let out = baton::pipeline::run(
        &policy,
        &im.state,
        &baton::EvalOptions {
            target: None,
            document_root: Some(PathBuf::from(common::DOC_ROOT)),
        },
        &baton::render::RenderOptions::default(),
    )
    .unwrap();
    let doc = &out.rendered.unwrap().document;
    assert!(
        doc.contains("The user interrupted run 1") && doc.contains("RESEARCH-RDS-5MIN"),
        "{doc}"
    );
    assert!(doc.contains("The user interrupted run 3"), "{doc}");
}

/// Bad input: what was skipped and why, never a silent loss of a prompt.
#[test]
fn bad_codex_input_is_named_in_warnings() {
    let im = corpus("codex-interrupted-research.jsonl");
    let file = fixture(&format!("{CORPUS}/codex-interrupted-research.jsonl"))
        .display()
        .to_string();
    let warnings: Vec<String> = im
        .report
        .all_warnings(&file)
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(
        warnings,
        [
            format!("{file}:18: warning: write_stdin call call_orphan_poll polls process session 4242, which no exec_command of this log started (the command is missing); its output is kept as a protocol item only"),
            format!("{file}:24: warning: the last line is incomplete (the session is still being written); ignored"),
            format!("{file}:12: warning: timestamp 2026-11-20T08:49:58.000Z is earlier than 2026-11-20T09:00:12.000Z on an earlier line (clock skew); 3 entries more than a minute out of time order kept in file order, nothing skipped"),
            format!("{file}: warning: 1 entry of unknown type kept as protocol items: event_msg/mcp_startup_update (1)"),
        ]
    );
    // Every prompt is there once, from either form.
    let prompts: Vec<&str> = im
        .state
        .runs
        .iter()
        .flat_map(|r| r.items.iter())
        .filter_map(|i| match i {
            Item::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    assert_eq!(im.state.runs[0].status, RunStatus::Interrupted);
}

/// A skipped line that carried a prompt says the prompt is lost.
#[test]
fn a_lost_prompt_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rollout.jsonl");
    let lines = [
        r#"{"timestamp":"2026-11-20T09:00:00.000Z","type":"session_meta","payload":{"id":"s1","cwd":"/w","cli_version":"0.128.0"}}"#.to_string(),
        r#"{"timestamp":"2026-11-20T09:00:01.000Z","type":"event_msg","payload":{"type":"task_started"}}"#.to_string(),
        r#"{"timestamp":"2026-11-20T09:00:02.000Z","type":"event_msg","payload":{"type":"user_message","message":"Add rate limiting to the API"#.to_string(),
        r#"{"timestamp":"2026-11-20T09:00:03.000Z","type":"event_msg","payload":{"type":"user_message","message":"Keep it simple"}}"#.to_string(),
    ];
    write_lines(&p, &lines);
    let im = import::import_file(Tool::Codex, &p, &ImportOptions::default()).unwrap();
    let w: Vec<String> = im
        .report
        .warnings
        .iter()
        .map(|w| w.message.clone())
        .collect();
    assert_eq!(
        w,
        ["malformed JSON (EOF while parsing a string at column 131); line skipped; it looks like a user prompt, which is lost: \"Add rate limiting to the API...\""]
    );
}

/// A provider that never had a thread in the session has nothing to go stale: a long Claude
/// Code session handed to Codex reports no `too_many_off_provider_runs`.
#[test]
fn no_staleness_for_a_provider_without_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long.jsonl");
    let mut lines = Vec::new();
    for n in 0..14 {
        lines.push(claude_line(
            "user",
            serde_json::json!(format!("step {n}: do it")),
        ));
        lines.push(claude_line(
            "assistant",
            serde_json::json!([{"type": "text", "text": format!("done {n}")}]),
        ));
    }
    write_lines(&p, &lines);
    let opts = ImportOptions {
        request_provider: Some("codex".into()),
        request_message: Some("Go on.".into()),
    };
    let im = import::import_file(Tool::ClaudeCode, &p, &opts).unwrap();
    assert_eq!(im.state.runs.len(), 14);
    let policy = baton::policy::load("default").unwrap();
    let d = baton::pipeline::decide(
        &policy,
        &im.state,
        &baton::EvalOptions {
            target: None,
            document_root: Some(PathBuf::from(common::DOC_ROOT)),
        },
    )
    .unwrap();
    assert!(d.stale.is_empty(), "{:?}", d.stale);
    assert_eq!(d.strategy.as_str(), "full_new");
}

/// The library's error is the fact, with the log as a field; `baton import` adds the location
/// and the `--from` flags (tests/import_cli.rs asserts the command's whole line).
#[test]
fn an_unknown_format_is_the_fact_with_the_log_as_a_field() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.jsonl");
    write_lines(
        &other,
        &(0..10)
            .map(|i| format!(r#"{{"type":"chat","n":{i}}}"#))
            .collect::<Vec<_>>(),
    );
    let e = import::import_file(Tool::ClaudeCode, &other, &ImportOptions::default()).unwrap_err();
    assert_eq!(e.path(), other.display().to_string());
    assert_eq!(
        e.to_string(),
        "not a Claude Code session log: recognised 8 JSON lines of an unknown tool or version (their `type`s are chat); baton reads Claude Code sessions and Codex CLI rollouts"
    );
}
