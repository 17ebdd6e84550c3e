//! Secret redaction (docs/redaction.md): the rules' samples, the recall corpus (every
//! positive sample planted in every item kind and position of a thread, rendered under every
//! shipped profile: no secret may reach anything that leaves the thread), the policy's
//! `redact` block, what the decision reports, failing closed, and bad input.

use baton::redact::{redact, Context, Redactor, Spec};
use rstest::rstest;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Deserialize)]
struct RuleSamples {
    rule: String,
    positive: Vec<Positive>,
    negative: Vec<String>,
}

#[derive(Deserialize, Clone)]
struct Positive {
    text: String,
    secret: String,
}

fn samples() -> Vec<RuleSamples> {
    let text = std::fs::read_to_string("tests/fixtures/redaction/samples.yaml").unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn builtin_context() -> Context {
    Context::new(Redactor::builtin().unwrap())
}

#[test]
fn every_builtin_rule_has_samples() {
    let s = samples();
    for id in baton::redact::rules::ids() {
        let r = s.iter().find(|r| r.rule == id);
        assert!(
            r.is_some_and(|r| !r.positive.is_empty() && !r.negative.is_empty()),
            "{id}"
        );
    }
}

#[test]
fn positive_samples_are_redacted_by_their_rule() {
    for r in samples() {
        for p in &r.positive {
            let mut cx = builtin_context();
            let out = redact(&mut cx, "item", &p.text).unwrap();
            assert!(!out.contains(&p.secret), "{}: {out}", r.rule);
            assert!(
                out.contains(&format!("[REDACTED:{}#1]", r.rule)),
                "{}: {out}",
                r.rule
            );
        }
    }
}

#[test]
fn negative_samples_are_left_alone() {
    for r in samples() {
        for n in &r.negative {
            let mut cx = builtin_context();
            let out = redact(&mut cx, "item", n).unwrap();
            assert_eq!(out, n.as_str(), "{}", r.rule);
        }
    }
}

/// Filler for long outputs: ordinary build output, 5,000 characters or more.
fn filler() -> String {
    (0..120)
        .map(|i| format!("   Compiling crate{i} v0.{i}.0 (ok)\n"))
        .collect()
}

/// A thread (runs on Codex, the request for Claude) with `p` planted in every item kind and
/// position; `fork`: the request is a fork whose anchor holds it too.
fn planted(p: &Positive, fork: bool) -> baton::State {
    let t = p.text.as_str();
    let one_line = t.replace('\n', " ");
    let long = filler();
    let items = json!([
        {"kind": "user_message", "text": format!("Please fix this: {t}")},
        {"kind": "assistant_message", "text": format!("I found {t} in the logs.")},
        {"kind": "decision", "text": format!("Decided to rotate {one_line}")},
        {"kind": "command", "command": format!("deploy --with '{one_line}'"), "exit_code": 0,
         "output": format!("{t}\n{long}")},
        {"kind": "command", "command": "cargo test", "exit_code": 0, "output": format!("{long}{t}\n")},
        {"kind": "tool_call", "tool": "Bash", "input": format!("echo {one_line}"),
         "status": "completed", "output": format!("{long}{t}")},
        {"kind": "file_change", "path": "config/.env", "change": "modified", "diff_lines": 3,
         "diff": format!("--- a/.env\n+++ b/.env\n@@ -1 +1,2 @@\n-OLD=1\n+{}\n", t.replace('\n', "\n+"))},
        {"kind": "plan", "steps": [{"text": format!("Remove {one_line}"), "status": "pending"}]},
        {"kind": "subagent_result", "agent": "scanner", "text": format!("found: {t}")},
        {"kind": "narration", "text": format!("Looking at {t}")},
        {"kind": "error", "text": format!("leaked {t}")},
        {"kind": "question", "text": format!("Is {t} still live?"), "answered": false},
        {"kind": "approval", "text": format!("Allow writing {t}?"), "resolved": false},
        {"kind": "command", "command": format!("curl check {one_line}"), "exit_code": 1,
         "output": format!("{long}error near {t}\nfailed")},
    ]);
    let mut state = json!({
        "version": 1,
        "thread": {
            "id": "th_redact",
            "title": format!("Rotate {one_line}"),
            "compact_summary": format!("Earlier the user pasted {t}."),
            "compact_summary_through": 1,
        },
        "provider_threads": [{"id": "C1", "provider": "codex", "status": "active"}],
        "runs": [
            {"ordinal": 1, "provider": "codex", "provider_thread": "C1", "status": "completed",
             "items": [{"kind": "user_message", "text": "Set up the deploy."}]},
            {"ordinal": 2, "provider": "codex", "provider_thread": "C1", "status": "completed",
             "items": items},
        ],
        "request": {"provider": "claude", "message": "Carry on."},
    });
    if fork {
        state["thread"]["parent"] = json!({"thread": "th_parent", "run": 2});
        state["request"]["kind"] = json!("fork");
        state["request"]["fork_anchor"] = json!({"role": "user", "text": format!("Anchor: {t}")});
    }
    baton::state::parse_str(&state.to_string(), baton::state::Format::Json, "planted").unwrap()
}

/// Everything a handoff sends out of the thread, as text.
fn outgoing(o: &baton::Outcome) -> Vec<(&'static str, String)> {
    let mut out = vec![("decision", o.decision.to_json())];
    if let Some(r) = &o.rendered {
        out.push(("document", r.document.clone()));
        out.push(("inline", r.inline.clone()));
        out.push((
            "handoff.json",
            serde_json::to_string(&r.provenance).unwrap(),
        ));
        out.extend(r.inline_fallback.clone().map(|f| ("inline_fallback", f)));
        out.extend(r.transcript.clone().map(|t| ("transcript.md", t)));
    }
    if let Some(s) = &o.summary {
        // The external summarizer's input carries the selection as serialised here.
        out.push(("summary", serde_json::to_string(s).unwrap()));
    }
    out
}

/// The recall corpus: 100% of the planted secrets are redacted in every shipped profile,
/// for a switch and for a fork.
#[rstest]
fn planted_secrets_never_leave_the_thread(#[values(false, true)] fork: bool) {
    let engines: Vec<(String, baton::Engine)> = baton::policy::source::shipped_names()
        .into_iter()
        .map(|n| (n.to_string(), baton::Engine::new(n).unwrap()))
        .collect();
    let mut planted_count = 0usize;
    for r in samples() {
        for p in &r.positive {
            let state = planted(p, fork);
            for (name, engine) in &engines {
                let o = engine.run(&state, None).unwrap();
                assert!(o.rendered.is_some(), "{name}: no handoff for {}", r.rule);
                for (what, text) in outgoing(&o) {
                    assert!(
                        !text.contains(&p.secret),
                        "{name}, {}: the secret reached the {what}: {:?}\n{text}",
                        r.rule,
                        p.text
                    );
                }
                let doc = &o.rendered.as_ref().unwrap().document;
                assert!(
                    doc.contains(&format!("[REDACTED:{}#", r.rule)),
                    "{name}, {}: no redaction marker in the document:\n{doc}",
                    r.rule
                );
                let reported = o.decision.redactions.iter().find(|x| x.rule == r.rule);
                assert!(reported.is_some_and(|x| x.count >= 1 && !x.items.is_empty()));
                planted_count += 1;
            }
        }
    }
    assert!(planted_count > 100);
}

#[test]
fn the_report_names_rules_and_items_never_secrets() {
    let p = Positive {
        text: "export GITHUB_TOKEN=ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345".into(),
        secret: "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345".into(),
    };
    let engine = baton::Engine::new("default").unwrap();
    let o = engine.run(&planted(&p, false), None).unwrap();
    let r = o
        .decision
        .redactions
        .iter()
        .find(|r| r.rule == "github-token")
        .unwrap();
    // One secret, however many items held it; the title among them.
    let doc = &o.rendered.as_ref().unwrap().document;
    assert_eq!(r.count, 1, "{doc}");
    assert!(r.items.contains(&"thread.title".to_string()));
    let json: serde_json::Value = serde_json::from_str(&o.decision.to_json()).unwrap();
    assert_eq!(json["redactions"][0]["rule"], "github-token");
    let explained = engine.explain(&o.decision);
    assert!(
        explained.contains("redacted  1 secret by github-token in "),
        "{explained}"
    );
    let trace = engine.explain_verbose(&o.decision);
    assert!(trace.contains("redact github-token"), "{trace}");
    assert!(!trace.contains(&p.secret));
    let handoff = serde_json::to_value(&o.rendered.as_ref().unwrap().provenance).unwrap();
    assert_eq!(handoff["redactions"][0]["count"], 1);
}

#[test]
fn the_request_message_is_sent_as_written() {
    let secret = "ghp_RequestMessageKeptAsWritten0000000000";
    let state = baton::state::parse_str(
        &format!(
            "version: 1\nthread: {{id: th_m}}\nprovider_threads:\n  - {{id: C1, provider: codex}}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {{kind: user_message, text: 'use {secret}'}}\nrequest: {{provider: claude, message: 'now use {secret}'}}\n"
        ),
        baton::state::Format::Yaml,
        "m",
    )
    .unwrap();
    let o = baton::Engine::new("default")
        .unwrap()
        .run(&state, None)
        .unwrap();
    let r = o.rendered.unwrap();
    assert!(r.inline.contains(&format!("now use {secret}")));
    assert!(r.inline.contains("use [REDACTED:github-token#1]"));
}

const POLICY_HEAD: &str = "policy \"p\" {\n  extends \"default\"\n}\n";

fn run_with(policy: &str, text: &str) -> String {
    let engine = baton::Engine::from_text("p.policy", &format!("{POLICY_HEAD}{policy}")).unwrap();
    let state = baton::state::parse_str(
        &format!(
            "version: 1\nthread: {{id: th_p}}\nprovider_threads:\n  - {{id: C1, provider: codex}}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {{kind: user_message, text: {}}}\nrequest: {{provider: claude}}\n",
            serde_json::to_string(text).unwrap()
        ),
        baton::state::Format::Yaml,
        "p",
    )
    .unwrap();
    engine.run(&state, None).unwrap().rendered.unwrap().document
}

#[test]
fn a_policy_adds_rules_exceptions_and_disables_builtins() {
    let block = r#"redact {
  redact employee-id pattern "\bEMP-[0-9]{6}\b"
  allow pattern "AKIAIOSFODNN7EXAMPLE"
  disable jwt
}
"#;
    let doc = run_with(
        block,
        "EMP-123456 AKIAIOSFODNN7EXAMPLE AKIAZ7QF4EXAMPLX2KQ3 eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2ln",
    );
    assert!(doc.contains("[REDACTED:employee-id#1]"), "{doc}");
    assert!(doc.contains("AKIAIOSFODNN7EXAMPLE"), "{doc}");
    assert!(doc.contains("[REDACTED:aws-access-key-id#1]"), "{doc}");
    assert!(
        doc.contains("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2ln"),
        "{doc}"
    );
}

#[test]
fn a_policy_without_a_redact_block_gets_every_builtin() {
    let doc = run_with("", "token ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345");
    assert!(doc.contains("[REDACTED:github-token#1]"), "{doc}");
}

fn check_errors(block: &str) -> String {
    match baton::Engine::from_text("p.policy", &format!("{POLICY_HEAD}{block}")) {
        Ok(e) => e
            .policy()
            .warnings
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => e
            .diagnostics()
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[rstest]
#[case::invalid_pattern(
    "redact {\n  redact bad pattern \"ab(c\"\n}\n",
    "p.policy:5:25: error: invalid redaction pattern: unclosed group"
)]
#[case::unknown_builtin(
    "redact {\n  disable github-tokens\n}\n",
    "p.policy:5:11: error: `disable github-tokens`: no built-in redaction rule `github-tokens`"
)]
#[case::builtin_name_taken(
    "redact {\n  redact jwt pattern \"x+\"\n}\n",
    "p.policy:5:10: error: `jwt` is a built-in redaction rule: name your own rule differently"
)]
#[case::empty_match(
    "redact {\n  redact maybe pattern \"a*\"\n}\n",
    "p.policy:5:24: warning: this pattern matches the empty string (empty matches are never redacted)"
)]
#[case::matches_everything(
    "redact {\n  redact all pattern \".+\"\n}\n",
    "p.policy:5:22: warning: this pattern matches any text: every text would be redacted whole"
)]
#[case::allow_everything(
    "redact {\n  allow pattern \"(?s).*\"\n}\n",
    "p.policy:5:17: warning: this exception matches any text: nothing would be redacted"
)]
fn the_checker_reports_bad_redact_blocks(#[case] block: &str, #[case] expected: &str) {
    let got = check_errors(block);
    assert!(got.contains(expected), "expected {expected:?} in:\n{got}");
}

#[test]
fn an_invalid_pattern_is_shown_with_a_caret() {
    let got = check_errors("redact {\n  redact bad pattern \"ab(c\"\n}\n");
    assert!(got.contains('^'), "{got}");
}

#[test]
fn a_handoff_whose_redaction_cannot_run_is_not_made() {
    let mut policy = baton::policy::load("default").unwrap();
    let mut r = Redactor::new(&Spec::default()).unwrap();
    r.max_text_bytes = 64;
    policy.redact.redactor = Some(Arc::new(r));
    let state = planted(
        &Positive {
            text: "x".into(),
            secret: "x".into(),
        },
        false,
    );
    let o = baton::pipeline::run(
        &policy,
        &state,
        &baton::EvalOptions::default(),
        &baton::render::RenderOptions::default(),
    )
    .unwrap();
    assert_eq!(o.decision.strategy.as_str(), "unsupported");
    assert!(o.rendered.is_none());
    let why = o.decision.decided_by.because.clone().unwrap();
    assert!(
        why.starts_with("redaction refused the text of `")
            && why.ends_with("over the redaction limit of 64 bytes; the handoff is not made"),
        "{why}"
    );
    assert_eq!(o.decision.decided_by.rule, "redact unsupported");
}

#[test]
fn a_50_mb_line_is_redacted_in_one_pass() {
    let mut line = "a".repeat(50 << 20);
    line.push_str(" ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345");
    let mut cx = builtin_context();
    let out = redact(&mut cx, "big", &line).unwrap();
    assert!(out.ends_with(" [REDACTED:github-token#1]"));
    assert_eq!(out.len(), (50 << 20) + " [REDACTED:github-token#1]".len());
}

#[test]
fn a_million_near_matches_are_linear() {
    // Every rule's keyword, a million times, with nothing that completes a secret.
    let near = "ghp_x AKIA1 sk-a eyJx. password= Authorization x://a:b ";
    let text = near.repeat(1_000_000 / 8);
    let mut cx = builtin_context();
    let out = redact(&mut cx, "near", &text).unwrap();
    assert_eq!(out.len(), text.len());
}

#[test]
fn invalid_utf8_in_an_output_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    let mut bytes = b"version: 1\nthread: {id: t}\nprovider_threads: []\nruns:\n  - ordinal: 1\n    provider: codex\n    items:\n      - {kind: command, command: cat, output: \"".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe, b'A']);
    bytes.extend_from_slice(b"\"}\nrequest: {provider: claude}\n");
    std::fs::write(&path, bytes).unwrap();
    let e = baton::State::load(&path).unwrap_err().to_string();
    assert!(e.contains("UTF-8") || e.contains("utf-8"), "{e}");
}

#[test]
fn fmt_lays_out_the_redact_block_and_keeps_rule_ids_whole() {
    let src = "redact {\ndisable   github-token\n    redact employee-id   pattern \"\\bEMP-[0-9]{6}\\b\"\n allow pattern \"x\"\n}\n";
    let out = baton::fmt::format_source("p.policy", src).unwrap();
    assert_eq!(
        out,
        "redact {\n  disable github-token\n  redact employee-id pattern \"\\bEMP-[0-9]{6}\\b\"\n  allow pattern \"x\"\n}\n"
    );
    assert_eq!(baton::fmt::format_source("p.policy", &out).unwrap(), out);
}

#[test]
fn a_policy_test_asserts_what_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.policy"),
        format!("{POLICY_HEAD}redact {{\n  redact employee-id pattern \"EMP-[0-9]{{6}}\"\n}}\n"),
    )
    .unwrap();
    let state = "version: 1\nthread: {id: t}\nprovider_threads:\n  - {id: C1, provider: codex}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {kind: user_message, text: 'EMP-123456 and psql postgres://app:hunter2@db/x'}\nrequest: {provider: claude}\n";
    std::fs::write(dir.path().join("s.yaml"), state).unwrap();
    let test = |redacted: &str| {
        format!(
            "policy: p.policy\ncases:\n  - name: redacts\n    state: s.yaml\n    expect:\n      redacted: {redacted}\n      document:\n        contains: ['[REDACTED:employee-id#1]']\n        not_contains: [hunter2]\n"
        )
    };
    let path = dir.path().join("p.test.yaml");
    std::fs::write(&path, test("{employee-id: 1, url-password: 1}")).unwrap();
    let report =
        baton::testing::run_paths(std::slice::from_ref(&path), &Default::default()).unwrap();
    assert_eq!(report.failed(), 0, "{report:?}");
    std::fs::write(&path, test("{}")).unwrap();
    let report = baton::testing::run_paths(&[path], &Default::default()).unwrap();
    let text = format!("{report:?}");
    assert_eq!(report.failed(), 1, "{text}");
    assert!(text.contains("employee-id: 1, url-password: 1"), "{text}");
}

#[test]
fn coverage_counts_a_policys_own_redaction_rule() {
    let engine = baton::Engine::from_text(
        "p.policy",
        &format!("{POLICY_HEAD}redact {{\n  redact employee-id pattern \"EMP-[0-9]{{6}}\"\n  redact unused pattern \"NEVER-[0-9]+\"\n}}\n"),
    )
    .unwrap();
    let state = baton::state::parse_str(
        "version: 1\nthread: {id: t}\nprovider_threads:\n  - {id: C1, provider: codex}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {kind: user_message, text: 'EMP-123456'}\nrequest: {provider: claude}\n",
        baton::state::Format::Yaml,
        "s",
    )
    .unwrap();
    let o = engine.run(&state, None).unwrap();
    let mut cov = baton::coverage::Coverage::new();
    cov.record(engine.policy(), &o.decision, &[]);
    let table = cov.table();
    assert!(table.contains("redact employee-id"), "{table}");
    let rules: Vec<_> = cov.files().into_iter().flat_map(|f| f.rules).collect();
    let own = |l: &str| rules.iter().find(|r| r.label == l).unwrap().true_count;
    assert_eq!(own("redact employee-id"), 1);
    assert_eq!(own("redact unused"), 0);
}

/// Every text redaction reads in a state (not the request's message, sent as written).
fn state_texts(s: &baton::State) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    out.extend(s.thread.title.clone());
    out.extend(s.thread.compact_summary.clone());
    out.extend(s.request.fork_anchor.as_ref().map(|a| a.text.clone()));
    out.extend(s.handoffs.iter().filter_map(|h| h.summary.clone()));
    for r in &s.runs {
        for i in &r.items {
            out.extend(
                baton::quality::secrets::item_texts(i)
                    .into_iter()
                    .map(str::to_string),
            );
        }
    }
    out
}

fn yaml_states(dir: &str) -> Vec<baton::State> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| baton::state::load_file(f).ok())
        .collect()
}

/// The false-positive rate on the real-format sessions (tests/fixtures/import, imported) and
/// the project's state fixtures, planted secrets (`SNTL`) left out: at most 1 redaction per
/// 100,000 characters (docs/redaction.md#measured prints the figures this measures).
#[test]
fn false_positives_on_the_fixture_corpus_stay_under_one_per_100k_chars() {
    let mut states = Vec::new();
    for dir in [
        "tests/fixtures/quality",
        "tests/fixtures/state",
        "tests/fixtures/render",
        "tests/fixtures/db",
        "examples",
    ] {
        states.extend(yaml_states(dir));
    }
    for (tool, dir) in [
        (
            baton::import::Tool::ClaudeCode,
            "tests/fixtures/import/claude-code",
        ),
        (baton::import::Tool::Codex, "tests/fixtures/import/codex"),
    ] {
        for f in std::fs::read_dir(dir).unwrap() {
            let f = f.unwrap().path();
            let imported =
                baton::import::import_file(tool, &f, &baton::import::ImportOptions::default())
                    .unwrap();
            states.push(imported.state);
        }
    }
    let (mut chars, mut found) = (0usize, Vec::new());
    for s in &states {
        for t in state_texts(s) {
            if t.contains(baton::quality::secrets::SECRET) {
                continue;
            }
            chars += t.chars().count();
            let mut cx = builtin_context();
            let out = redact(&mut cx, "x", &t).unwrap();
            if out != t.as_str() {
                found.push(format!("{}: {out}", s.thread.id));
            }
        }
    }
    let per_100k = found.len() as f64 * 100_000.0 / chars as f64;
    println!(
        "false positives: {} in {chars} characters of {} states ({per_100k:.2} per 100,000)",
        found.len(),
        states.len()
    );
    for f in &found {
        println!("  {f}");
    }
    assert!(chars > 100_000, "{chars}");
    assert!(per_100k <= 1.0, "{per_100k}: {found:#?}");
}

#[test]
fn redact_blocks_add_up_along_extends() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("base.policy"),
        "policy \"base\" {\n  extends \"default\"\n}\nredact {\n  redact employee-id pattern \"EMP-[0-9]{6}\"\n}\n",
    )
    .unwrap();
    let child = dir.path().join("child.policy");
    std::fs::write(
        &child,
        "policy \"child\" {\n  extends \"base.policy\"\n}\nredact {\n  disable github-token\n}\n",
    )
    .unwrap();
    let engine = baton::Engine::new(child.to_str().unwrap()).unwrap();
    let state = baton::state::parse_str(
        "version: 1\nthread: {id: t}\nprovider_threads:\n  - {id: C1, provider: codex}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {kind: user_message, text: 'EMP-123456 ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345 AKIAZ7QF4EXAMPLX2KQ3'}\nrequest: {provider: claude}\n",
        baton::state::Format::Yaml,
        "s",
    )
    .unwrap();
    let doc = engine.run(&state, None).unwrap().rendered.unwrap().document;
    assert!(doc.contains("[REDACTED:employee-id#1]"), "{doc}");
    assert!(
        doc.contains("ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly012345"),
        "{doc}"
    );
    assert!(doc.contains("[REDACTED:aws-access-key-id#1]"), "{doc}");
}

/// The transcript beside an off-band document (docs/rendering.md#what-the-budget-leaves-out)
/// is redacted like the document and with its numbers: a secret in an item the budget leaves
/// out is in the transcript only as `[REDACTED:RULE#N]`, with the N the document gives it.
#[test]
fn the_transcript_is_redacted_with_the_documents_numbers() {
    use baton::quality::long::{generate, Handover};
    use baton::state::Item;
    let rule = "aws-access-key-id";
    let samples = samples();
    let positives = &samples.iter().find(|r| r.rule == rule).unwrap().positive;
    let (first, second) = (&positives[0], &positives[1]);
    assert_ne!(first.secret, second.secret);
    let mut s = generate(400, Handover::Fresh).unwrap();
    // The title is redacted first: its secret is #1.
    s.thread.title = Some(format!("Rotate {}", first.text.replace('\n', " ")));
    // The second secret in the oldest run, which the budget leaves out, and in the newest
    // request, which the document shows whole: #2 in both.
    let (at, command) = (s.runs[0].items.iter_mut().enumerate())
        .find(|(_, i)| matches!(i, Item::Command { .. }))
        .unwrap();
    let Item::Command { output, .. } = command else {
        unreachable!()
    };
    *output = Some(format!("Found this in the logs: {}", second.text));
    let old_id = format!("r1.{}", at + 1);
    let newest = s.runs.last_mut().unwrap();
    let Some(Item::UserMessage { text, .. }) = newest
        .items
        .iter_mut()
        .find(|i| matches!(i, Item::UserMessage { .. }))
    else {
        panic!("every generated run starts with a request")
    };
    text.push_str(&format!(" Also rotate {}", second.text));
    let tmp = tempfile::TempDir::new().unwrap();
    let eval = baton::eval::EvalOptions {
        target: Some("claude".into()),
        document_root: Some(tmp.path().join("docs")),
    };
    let policy = baton::policy::load("default").unwrap();
    let o = baton::pipeline::run(&policy, &s, &eval, &Default::default()).unwrap();
    let r = o.rendered.as_ref().expect("a handoff");
    let marker = format!("[REDACTED:{rule}#2]");
    assert!(r.document.contains(&marker), "{}", r.document);
    // The budget left the planted item out: the transcript carries it, redacted.
    assert!(
        r.provenance
            .omitted
            .iter()
            .any(|o| o.id == old_id && o.reason.starts_with("dropped to fit the budget")),
        "{old_id} is not left out by the budget"
    );
    let transcript = r.transcript.as_deref().expect("a transcript");
    let at = transcript
        .find(&format!("\n## {old_id} ("))
        .expect("the planted item is in the transcript");
    let section = &transcript[at..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |e| e + 1)];
    assert!(section.contains("Found this in the logs"), "{section}");
    assert!(section.contains(&marker), "{section}");
    for (what, text) in outgoing(&o) {
        assert!(
            !text.contains(&first.secret),
            "the first secret reached the {what}"
        );
        assert!(
            !text.contains(&second.secret),
            "the second secret reached the {what}"
        );
    }
}
