//! Issue 11, points 1, 2, 3 and 7: text rules that keep meaning, must-keep items never cut,
//! budgets kept by degradation, and thread text that cannot break the document. Every case goes
//! through the public API: a state in, a decision and a document out.

use baton::eval::EvalOptions;
use baton::pipeline::{run, Outcome};
use baton::render::RenderOptions;
use baton::select::{head, head_tail, tail, Cut};
use baton::state::{parse_str, Format};
use rstest::rstest;
use serde_json::{json, Value};
use std::path::PathBuf;

fn state(v: &Value) -> baton::State {
    parse_str(&v.to_string(), Format::Json, "state.json").expect("state is valid")
}

fn run_with(policy: &baton::Policy, s: &baton::State, target: Option<&str>) -> Outcome {
    let eval = EvalOptions {
        target: target.map(str::to_string),
        document_root: Some(PathBuf::from("/tmp/baton-budget-docs")),
    };
    run(policy, s, &eval, &RenderOptions::default()).expect("pipeline runs")
}

fn shipped(name: &str) -> baton::Policy {
    baton::policy::load(name).expect("shipped policy checks")
}

fn policy_text(name: &str, text: &str) -> baton::Policy {
    baton::policy::load_text(name, text).expect("policy checks")
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

// ---- cutting ----

#[rstest]
#[case::head(
    Cut::Head(10),
    "alpha beta gamma delta epsilon",
    "alpha beta [... 20 characters cut]"
)]
#[case::tail(
    Cut::Tail(11),
    "alpha beta gamma delta epsilon",
    "[23 characters cut ...] epsilon"
)]
#[case::head_tail(
    Cut::HeadTail(12),
    "alpha beta gamma delta epsilon",
    "alpha [... 19 characters cut ...] psilon"
)]
#[case::whole(Cut::Whole, "  alpha beta  ", "alpha beta")]
#[case::short_is_untouched(Cut::Head(100), "short text", "short text")]
#[case::compact(Cut::Compact(10), "alpha   beta\ngamma", "alpha b...")]
#[case::head_prefers_a_line(
    Cut::Head(16),
    "1. first step\n2. second step",
    "1. first step\n[... 15 characters cut]"
)]
#[case::thousands(Cut::Head(1), &"x".repeat(1235), "x [... 1,234 characters cut]")]
fn text_forms(#[case] cut: Cut, #[case] input: &str, #[case] expected: &str) {
    assert_eq!(cut.apply(input), expected);
}

/// Graphemes: (text, cut) -> the cut never splits a cluster.
#[rstest]
#[case::family_emoji("👨\u{200d}👩\u{200d}👧\u{200d}👦", "👨\u{200d}👩\u{200d}👧\u{200d}👦")]
#[case::flag("🇫🇷", "🇫🇷")]
#[case::combining_accent("e\u{301}", "e\u{301}")]
fn cuts_fall_on_grapheme_boundaries(#[case] cluster: &str, #[case] whole: &str) {
    let text = format!("ab{cluster}{cluster}cd");
    for n in 1..chars(&text) {
        for out in [
            head(&text, n),
            tail(&text, n),
            head_tail(&text, n),
            baton::select::compact(&text, n.max(4)),
        ] {
            // Only the kept text counts, not the marker.
            let out = match (out.find('['), out.find(']')) {
                (Some(a), Some(b)) => format!("{}{}", &out[..a], &out[b + 1..]),
                _ => out.trim_end_matches("...").to_string(),
            };
            // Every occurrence of the cluster's first scalar starts a whole cluster.
            let first = whole.chars().next().unwrap();
            for (i, c) in out.char_indices() {
                if c == first {
                    assert!(
                        out[i..].starts_with(whole),
                        "cut at {n} split a cluster: {out:?}"
                    );
                }
            }
            // And no cluster tail is left dangling at the start of the kept text.
            let last = whole.chars().last().unwrap();
            if whole.chars().count() > 1 {
                for (i, c) in out.char_indices() {
                    if c == last {
                        assert!(
                            out[..i + c.len_utf8()].ends_with(whole),
                            "cut at {n} split a cluster: {out:?}"
                        );
                    }
                }
            }
        }
    }
}

#[rstest]
#[case::head_tail(Cut::HeadTail(240))]
#[case::tail(Cut::Tail(240))]
fn a_300_character_path_keeps_its_file_name(#[case] cut: Cut) {
    let path = format!("{}/payment_reconciler.rs", "deeply/nested/dir".repeat(17));
    assert!(chars(&path) >= 300);
    let out = cut.apply(&path);
    assert!(out.ends_with("payment_reconciler.rs"), "{out}");
    assert!(out.contains("characters cut"), "{out}");
}

#[test]
fn text_max_keeps_working_and_spares_must_keep_items() {
    let p = policy_text(
        "legacy.policy",
        r#"policy "legacy" {}
strategy { full_new otherwise }
summary {
  text max 40
  include user_message into goals
  include assistant_message into messages
}
"#,
    );
    let long = "word ".repeat(30);
    let s = state(&json!({
        "version": 1, "thread": {"id": "th"},
        "runs": [{"ordinal": 1, "provider": "codex", "items": [
            {"kind": "user_message", "text": format!("first {long}")},
            {"kind": "assistant_message", "text": format!("reply {long}")},
            {"kind": "user_message", "text": format!("latest {long}")},
        ]}],
        "request": {"provider": "claude"}
    }));
    let doc = run_with(&p, &s, None).rendered.unwrap().document;
    assert!(
        doc.contains("- first word word word word word word w...\n"),
        "{doc}"
    );
    assert!(
        doc.contains("- reply word word word word word word w...\n"),
        "{doc}"
    );
    assert!(doc.contains(long.trim()), "latest user message cut:\n{doc}");
}

#[test]
fn the_most_specific_text_rule_wins() {
    let p = policy_text(
        "rules.policy",
        r#"policy "rules" {}
strategy { full_new otherwise }
summary {
  text head 10
  text tail 10 for assistant_message
  text whole in decisions
  document max 2000
  include decision into decisions
  include assistant_message into messages
  include narration into narration
  include error into failures
}
delivery { off_band otherwise }
"#,
    );
    // Text rules cut only over the limit: a 3,000-character error takes the document over
    // its 2,000 characters.
    let s = state(&json!({
        "version": 1, "thread": {"id": "th"},
        "runs": [{"ordinal": 1, "provider": "codex", "items": [
            {"kind": "decision", "text": "use the oauth2 crate everywhere"},
            {"kind": "assistant_message", "text": "the callback route works now"},
            {"kind": "narration", "text": "reading the router module first"},
            {"kind": "error", "text": "e ".repeat(1500)},
        ]}],
        "request": {"provider": "claude"}
    }));
    let doc = run_with(&p, &s, None).rendered.unwrap().document;
    assert!(doc.contains("- use the oauth2 crate everywhere"), "{doc}");
    assert!(doc.contains("- [19 characters cut ...] works now"), "{doc}");
    assert!(doc.contains("- reading [... 24 characters cut]"), "{doc}");
}

// ---- must-keep ----

fn must_keep_state() -> Value {
    let spec: String = (1..=40)
        .map(|i| format!("{i}. requirement number {i} must hold exactly as written\n"))
        .collect();
    let question = format!("Which of these {} options?", "many ".repeat(100));
    let command = format!("cargo test --package api -- {}", "--flag ".repeat(60));
    json!({
        "version": 1, "thread": {"id": "th_mk", "title": "Must keep"},
        "runs": [
            {"ordinal": 1, "provider": "codex", "items": [
                {"kind": "user_message", "text": format!("old request {}", "x ".repeat(1500))},
                {"kind": "command", "command": "ls", "exit_code": 0, "output": "a b"},
            ]},
            {"ordinal": 2, "provider": "codex", "items": [
                {"kind": "user_message", "text": format!("Go ahead with all forty:\n{spec}")},
                {"kind": "question", "text": question, "answered": false},
                {"kind": "approval", "text": format!("Allow {}?", "rm -rf build ".repeat(40)), "resolved": false},
                {"kind": "command", "command": command, "exit_code": 101, "output": "error: test failed"},
            ]}
        ],
        "request": {"provider": "claude", "message": "Continue."}
    })
}

#[rstest]
#[case("default")]
#[case("mcode")]
fn must_keep_items_are_never_cut(#[case] policy: &str) {
    let mut v = must_keep_state();
    // Text rules cut only over the limit: 70,000 characters of a successful build log in the
    // older run take the document over default's 60,000.
    v["runs"][0]["items"][1]["output"] = json!("Compiling a crate\n".repeat(3_900));
    let s = state(&v);
    let doc = run_with(&shipped(policy), &s, None)
        .rendered
        .unwrap()
        .document;
    let latest = v["runs"][1]["items"][0]["text"].as_str().unwrap();
    for line in latest.trim().lines() {
        assert!(doc.contains(line), "{policy}: lost {line:?}\n{doc}");
    }
    if policy == "default" {
        for i in 1..=3 {
            let text = v["runs"][1]["items"][i]
                .get("text")
                .or(v["runs"][1]["items"][i].get("command"))
                .and_then(Value::as_str)
                .unwrap();
            // Whole, though a list entry may collapse runs of spaces.
            let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                words(&doc).contains(&words(text)),
                "{policy}: cut {text:?}\n{doc}"
            );
        }
        assert!(doc.contains("(exit 101"), "{doc}");
        // The older message is not must-keep: its rule cuts it, and says so.
        assert!(doc.contains("characters cut"), "{doc}");
    }
}

// ---- budgets ----

/// A thread far over every budget: 60 runs, each with a long message, a megabyte-ish
/// output spread over commands, narration and many file changes.
fn far_over_budget(target: &str, providers: Value) -> Value {
    let runs: Vec<Value> = (1..=60)
        .map(|i| {
            json!({"ordinal": i, "provider": "claude", "items": [
                {"kind": "user_message", "text": format!("request {i}: {}", "please refactor the module ".repeat(40))},
                {"kind": "narration", "text": format!("narrating step {i} {}", "looking around ".repeat(60))},
                {"kind": "tool_call", "tool": "Bash", "input": format!("run {i}"), "status": "completed",
                 "output": format!("line of output {i}\n").repeat(400)},
                {"kind": "command", "command": format!("cargo build -p crate{i}"), "exit_code": 0,
                 "output": "Compiling things\n".repeat(300)},
                {"kind": "file_change", "path": format!("src/module_{i}/very/deep/path/file_{i}.rs"), "change": "modified", "diff_lines": 10},
                {"kind": "assistant_message", "text": format!("done with {i}: {}", "explanation ".repeat(80))},
            ]})
        })
        .collect();
    json!({
        "version": 1,
        "thread": {"id": "th_big", "title": "Big"},
        "providers": providers,
        "runs": runs,
        "request": {"provider": target, "message": "Keep going with the refactor."}
    })
}

#[rstest]
#[case::codex_off_band("codex", json!({}))]
#[case::inline_only("plain", json!({"plain": {"file_read": false, "max_input_chars_per_turn": 12000, "resume": true}}))]
fn the_budget_is_kept_on_a_far_over_budget_thread(#[case] target: &str, #[case] providers: Value) {
    let s = state(&far_over_budget(target, providers));
    let o = run_with(&shipped("default"), &s, None);
    let r = o.rendered.as_ref().expect("a handoff");
    let b = o.decision.budget.as_ref().expect("a budget report");
    assert!(b.kept, "{b:?}");
    assert!(chars(&r.inline) <= b.first_turn_limit, "{b:?}");
    if target == "codex" {
        assert_eq!(b.scope, "document");
        assert!(chars(&r.document) <= 60_000, "{}", chars(&r.document));
    } else {
        assert_eq!(b.scope, "first_turn");
        assert!(chars(&r.inline) <= 12_000);
    }
    assert!(b.before > b.after && !b.steps.is_empty(), "{b:?}");
    // Provenance and the trace record the steps.
    assert_eq!(r.provenance.budget.as_ref(), Some(b));
    assert!(o
        .decision
        .trace
        .iter()
        .any(|t| t.rule.starts_with("degrade drop narration")));
    // The latest user message survives whole.
    let latest = format!("request 60: {}", "please refactor the module ".repeat(40));
    assert!(r.document.contains(latest.trim()));
    // explain shows budget, sizes and steps.
    let explained = baton::explain::render(&o.decision, false);
    assert!(explained.contains("  budget    "), "{explained}");
    assert!(explained.contains("drop narration: "), "{explained}");
    assert!(explained.contains("before degrading"), "{explained}");
}

fn without_over_budget(text: &str) -> String {
    let start = text.find("stale over_budget").unwrap();
    let end = start + text[start..].find("\n\n").unwrap();
    format!("{}{}", &text[..start], &text[end..])
}

/// Codex ran runs 1-50, Claude 51-60: a 10-run delta of about 50,000 characters.
fn ten_run_delta(codex: Value) -> baton::State {
    let mut v = far_over_budget("codex", json!({"codex": codex}));
    v["provider_threads"] = json!([
        {"id": "C1", "provider": "codex", "status": "active"},
        {"id": "L1", "provider": "claude", "status": "active"}
    ]);
    let runs = v["runs"].as_array_mut().unwrap();
    for (i, r) in runs.iter_mut().enumerate() {
        let (p, t) = if i < 50 {
            ("codex", "C1")
        } else {
            ("claude", "L1")
        };
        r["provider"] = json!(p);
        r["provider_thread"] = json!(t);
    }
    state(&v)
}

#[test]
fn over_budget_never_produces_a_larger_handoff() {
    // Codex cannot read files here: the delta goes inline, far over its 16,000-character turn.
    let s = ten_run_delta(json!({"file_read": false, "max_input_chars_per_turn": 16000}));
    let default_text = std::fs::read_to_string("policies/default.policy").unwrap();
    let delta_policy = policy_text("delta.policy", &without_over_budget(&default_text));
    let delta = run_with(&delta_policy, &s, None);
    assert_eq!(delta.decision.strategy.as_str(), "delta_existing");

    let full = run_with(&shipped("default"), &s, None);
    assert_eq!(full.decision.stale, vec!["over_budget".to_string()]);
    assert_eq!(full.decision.strategy.as_str(), "full_new");
    let b = full.decision.budget.as_ref().unwrap();
    assert!(b.kept, "{b:?}");
    let full_turn = chars(&full.rendered.unwrap().inline);
    let replaced = b.replaced_chars.expect("held to the delta's size");
    assert!(
        full_turn <= replaced.min(16_000),
        "{full_turn} > {replaced}"
    );
}

/// A delta that goes off-band binds to the document limit, not to the per-turn cap: a
/// 50,000-character delta to codex, which reads files, resumes its thread (issue 24).
#[test]
fn an_off_band_delta_within_the_document_limit_is_not_over_budget() {
    let s = ten_run_delta(json!({}));
    let o = run_with(&shipped("default"), &s, None);
    assert_eq!(
        o.decision.strategy.as_str(),
        "delta_existing",
        "{:?}",
        o.decision.stale
    );
    assert!(o.decision.stale.is_empty());
    let b = o.decision.budget.as_ref().unwrap();
    assert_eq!(
        (b.scope.as_str(), b.limit, b.kept),
        ("document", 60_000, true)
    );
}

/// What the document shows of runs `from..=to` of a generated thread: files named, requests
/// (first line), decisions, open problems.
fn recall_of(read: &str, s: &baton::State, from: u32, to: u32) -> [(usize, usize); 3] {
    use baton::quality::long::file_named;
    let mut files = Vec::new();
    let (mut req, mut dec) = ((0, 0), (0, 0));
    for r in s.runs.iter().filter(|r| (from..=to).contains(&r.ordinal)) {
        for it in &r.items {
            match it {
                baton::state::Item::FileChange { path, .. } => {
                    let p = path.trim_start_matches("/work/app/").to_string();
                    if !files.contains(&p) {
                        files.push(p);
                    }
                }
                baton::state::Item::UserMessage { .. } => {
                    req.1 += 1;
                    req.0 += usize::from(read.contains(&format!("Request {}:", r.ordinal)));
                }
                baton::state::Item::Decision { .. } => {
                    dec.1 += 1;
                    dec.0 += usize::from(read.contains(&format!("Decision {}:", r.ordinal)));
                }
                _ => {}
            }
        }
    }
    let named = files.iter().filter(|p| file_named(read, p)).count();
    [(named, files.len()), req, dec]
}

/// The full handoff that replaces an over-budget delta carries at least what that delta would
/// have carried of its own runs: its files, its newest requests, its decisions (older
/// requests may give way to the files the full handoff must also name).
#[rstest]
fn a_full_handoff_replacing_an_over_budget_delta_recalls_no_less(#[values(1600, 3200)] runs: u32) {
    let s = generate(runs, Handover::Back).unwrap();
    // Without the signal that hundreds of off-provider runs raise first.
    let text = std::fs::read_to_string("policies/default.policy").unwrap();
    let at = text.find("stale too_many_off_provider_runs").unwrap();
    let end = at + text[at..].find("\nstale too_many_chained").unwrap() + 1;
    let text = format!("{}{}", &text[..at], &text[end..]);
    let full_policy = policy_text("full.policy", &text);
    let delta_policy = policy_text("delta.policy", &without_over_budget(&text));
    let delta = run_with(&delta_policy, &s, None);
    assert_eq!(delta.decision.strategy.as_str(), "delta_existing");
    let range = delta.decision.covered_runs.clone().unwrap();
    let full = run_with(&full_policy, &s, None);
    assert_eq!(full.decision.stale, vec!["over_budget".to_string()]);
    let d = recall_of(&delta.rendered.unwrap().document, &s, range.from, range.to);
    let f = recall_of(&full.rendered.unwrap().document, &s, range.from, range.to);
    for (what, (d, f)) in ["files", "requests", "decisions"]
        .iter()
        .zip(d.iter().zip(f.iter()))
    {
        if *what == "requests" {
            continue;
        }
        assert!(
            f.0 >= d.0,
            "{what} of runs {}-{}: full {f:?}, delta {d:?}",
            range.from,
            range.to
        );
    }
}

#[test]
fn a_request_over_the_turn_goes_into_an_off_band_document() {
    let message = "Implement the following. ".repeat(1000);
    let mut v = must_keep_state();
    v["request"] = json!({"provider": "codex", "message": message});
    let o = run_with(&shipped("t3code"), &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(
        b.reasons.contains(&"request_over_budget".to_string()),
        "{b:?}"
    );
    assert_eq!(
        o.decision.delivery.as_ref().unwrap().mode.as_str(),
        "off_band"
    );
    let r = o.rendered.unwrap();
    assert!(r.document.contains(message.trim()));
    assert!(chars(&r.inline) <= 16_000, "{}", chars(&r.inline));
    assert!(r.inline.contains("too long for one turn"), "{}", r.inline);
}

#[test]
fn a_request_over_the_turn_of_a_target_that_cannot_read_files_is_unsupported() {
    let mut v = must_keep_state();
    v["providers"] = json!({"plain": {"file_read": false, "max_input_chars_per_turn": 2000}});
    v["request"] = json!({"provider": "plain", "message": "x".repeat(3000)});
    let o = run_with(&shipped("default"), &state(&v), None);
    assert_eq!(o.decision.strategy.as_str(), "unsupported");
    assert!(o.rendered.is_none());
    let why = o.decision.decided_by.because.unwrap();
    assert!(
        why.contains("3000 characters") && why.contains("cannot read files"),
        "{why}"
    );
    let json = serde_json::to_value(&o.decision.trace).unwrap();
    assert!(json.to_string().contains("request_over_budget"));
}

#[test]
fn must_keep_items_over_an_inline_budget_move_off_band() {
    let mut v = must_keep_state();
    v["providers"] =
        json!({"small": {"file_read": true, "max_input_chars_per_turn": 2500, "resume": true}});
    v["request"] = json!({"provider": "small", "message": "Continue."});
    let p = policy_text(
        "inline.policy",
        "policy \"inline\" { extends \"default\" }\ndelivery { inline otherwise }\n",
    );
    let o = run_with(&p, &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(
        b.reasons.contains(&"must_keep_over_budget".to_string()),
        "{b:?}"
    );
    assert!(b.reasons.contains(&"moved_off_band".to_string()), "{b:?}");
    let d = o.decision.delivery.as_ref().unwrap();
    assert_eq!(d.mode.as_str(), "off_band");
    assert!(o.decision.pregrant.is_some());
    assert!(chars(&o.rendered.unwrap().inline) <= 2500);
}

#[test]
fn a_budget_too_small_for_must_keep_items_is_a_checker_warning() {
    let p = policy_text(
        "tiny.policy",
        r#"policy "tiny" { extends "default" }
summary {
  document max 500
  include user_message into goals
}
"#,
    );
    let w: Vec<String> = p.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter().any(|w| w
            .contains("tiny.policy:3:16: warning: a document budget of 500 characters cannot hold the must-keep items")),
        "{w:?}"
    );
}

#[rstest]
#[case::whole_with_number("text whole 30", "`text whole` takes no number")]
#[case::head_without_number("text head", "`text head` needs a number of characters")]
#[case::unknown_kind("text head 30 for comand", "unknown item kind `comand`")]
#[case::unknown_section("text head 30 in goalz", "unknown section `goalz`")]
#[case::paths_of_commands(
    "degrade paths command",
    "only `file_change` items can be listed as paths"
)]
#[case::group_of_commands(
    "degrade group command",
    "only `file_change` items can be grouped by directory"
)]
#[case::outputs_of_messages(
    "degrade drop_output user_message",
    "`user_message` items have no output to leave out"
)]
#[case::count_of_unknown_kind("degrade count requests", "unknown item kind `requests`")]
#[case::text_rules_misspelt(
    "degrade text_rule",
    "unknown keyword `text_rule`\n  |\n4 |   degrade text_rule\n  |           ^^^^^^^^^\n  = help: did you mean `text_rules`?"
)]
fn bad_text_and_budget_rules_are_errors(#[case] rule: &str, #[case] message: &str) {
    let text = format!(
        "policy \"bad\" {{}}\nstrategy {{ full_new otherwise }}\nsummary {{\n  {rule}\n}}\n"
    );
    let e = baton::policy::load_text("bad.policy", &text).unwrap_err();
    assert!(e.to_string().contains(message), "{e}");
}

// ---- safe text ----

#[test]
fn thread_text_cannot_break_the_document() {
    let v = json!({
        "version": 1,
        "thread": {"id": "th_x", "title": "Fix login\n# Injected heading\u{1b}[31m"},
        "runs": [{"ordinal": 1, "provider": "codex", "items": [
            {"kind": "user_message", "text": "Do this:\n# Not a heading\n```\n---\nbell\u{7} nul\u{0} done"},
            {"kind": "command", "command": "cat notes.md", "exit_code": 0,
             "output": "intro\n```rust\nfn main() {}\n```\n# end\n"},
        ]}],
        "request": {"provider": "claude", "message": "Continue."}
    });
    let doc = run_with(&shipped("default"), &state(&v), None)
        .rendered
        .unwrap()
        .document;
    let mut in_fence = false;
    let headings: Vec<&str> = doc
        .lines()
        .filter(|l| {
            // A fence may open a list item (`- ````markdown`).
            let t = l.trim_start();
            if t.strip_prefix("- ").unwrap_or(t).starts_with("````") {
                in_fence = !in_fence;
            }
            !in_fence && l.trim_start().starts_with('#')
        })
        .collect();
    assert!(
        headings
            .iter()
            .all(|h| h.starts_with("# Handoff: ") || h.starts_with("## ")),
        "{headings:?}\n{doc}"
    );
    assert_eq!(
        doc.lines().filter(|l| l.starts_with("# ")).count(),
        1,
        "{doc}"
    );
    assert!(
        doc.starts_with("# Handoff: Fix login # Injected heading\\u{1b}[31m\n"),
        "{doc}"
    );
    for c in ['\u{0}', '\u{7}', '\u{1b}'] {
        assert!(!doc.contains(c), "raw control {c:?} in\n{doc}");
    }
    // The message's own markdown is quoted whole in a longer fence, not backslash-escaped.
    assert!(
        doc.contains("- ````markdown\n  Do this:\n  # Not a heading\n  ```\n  ---\n"),
        "{doc}"
    );
    assert!(!doc.contains("\\#") && !doc.contains("\\```"), "{doc}");
    // The output is fenced longer than its own backtick runs, and kept verbatim inside.
    assert!(
        doc.contains("  ````\n  intro\n  ```rust\n  fn main() {}\n  ```\n  # end\n  ````"),
        "{doc}"
    );
}

/// The worked example in docs/rendering.md#worked-example is what `baton explain` prints.
#[test]
fn the_worked_example_in_the_docs_is_current() {
    let docs = std::fs::read_to_string("docs/rendering.md").unwrap();
    let at = docs
        .find("#### Worked example")
        .expect("the worked example exists");
    let block = &docs[at..];
    let start = block.find("```text\n").unwrap() + "```text\n".len();
    let end = start + block[start..].find("```").unwrap();
    let s = baton::state::load_file(std::path::Path::new(
        "tests/fixtures/budget/far-over-budget.yaml",
    ))
    .unwrap();
    let o = run_with(&shipped("default"), &s, None);
    let explained = baton::explain::render(&o.decision, false);
    for line in block[start..end].lines() {
        assert!(
            explained.contains(line),
            "docs/rendering.md worked example line not in explain output:\n{line}\n---\n{explained}"
        );
    }
    let doc = o.rendered.unwrap().document;
    // 24: the outputs of runs 1-21 left out, those of runs 22-24 cut to their text rule
    // (over the limit, text rules are the first step).
    assert!(doc.contains("To fit the budget, 24 older or less important items were shortened"));
    assert!(doc.contains("[output of 81 lines left out]"), "{doc}");
    assert!(doc.contains("They are not sent; handoff.json lists their ids."));
    assert!(doc.contains("- Should the old paths return 301 or 308? (unanswered)"));
}

/// Issue 12 (mcode): the off-band document keeps the compaction summary whole, as Mcode's
/// builder does; other texts still go through the 240-character rule.
#[test]
fn mcode_keeps_the_compaction_summary_whole() {
    let summary: String = (1..=8)
        .map(|i| {
            format!("Constraint {i}: never touch the billing tables without a migration review.\n")
        })
        .collect();
    let v = json!({
        "version": 1,
        "thread": {"id": "th_mc", "compact_summary": summary, "compact_summary_through": 1},
        "runs": [
            {"ordinal": 1, "provider": "claude", "items": [
                {"kind": "user_message", "text": "Set up billing."},
            ]},
            {"ordinal": 2, "provider": "claude", "items": [
                {"kind": "assistant_message", "text": format!("Done. {}", "detail ".repeat(60))},
                {"kind": "user_message", "text": "Now add invoices."},
            ]}
        ],
        "request": {"provider": "codex", "message": "Continue."}
    });
    let o = run_with(&shipped("mcode"), &state(&v), None);
    assert_eq!(
        o.decision.delivery.as_ref().unwrap().mode.as_str(),
        "off_band"
    );
    let doc = o.rendered.unwrap().document;
    for line in summary.lines() {
        assert!(doc.contains(line), "lost {line:?}\n{doc}");
    }
    assert!(doc.contains("detail detail ...\n"), "{doc}");
}

/// A message that fits the turn alone but not with the pointer prompt also goes into the
/// document: the first turn always fits.
#[test]
fn a_message_that_fits_only_without_its_pointer_goes_into_the_document() {
    let message = "m".repeat(15_950);
    let mut v = must_keep_state();
    v["request"] = json!({"provider": "codex", "message": message});
    let o = run_with(&shipped("default"), &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(b.kept, "{b:?}");
    assert!(
        b.reasons.contains(&"request_over_budget".to_string()),
        "{b:?}"
    );
    let r = o.rendered.unwrap();
    assert!(chars(&r.inline) <= 16_000);
    assert!(r.document.contains(&message));
}

/// Off-band, must-keep items larger than `document max` stay whole; the decision (and its
/// JSON) says the budget is not kept and why.
#[test]
fn must_keep_items_over_the_document_budget_are_kept_and_reported() {
    let p = policy_text(
        "small.policy",
        "policy \"small\" { extends \"default\" }\nsummary {\n  text head_tail 200\n  document max 2000\n  include user_message into goals\n  include question into open when not item.answered\n  include assistant_message into messages\n}\n",
    );
    let latest = format!("Latest: {}", "keep every word of this ".repeat(120));
    let v = json!({
        "version": 1, "thread": {"id": "th_doc"},
        "runs": [{"ordinal": 1, "provider": "claude", "items": [
            {"kind": "assistant_message", "text": "a reply ".repeat(100)},
            {"kind": "user_message", "text": latest},
        ]}],
        "request": {"provider": "codex", "message": "Continue."}
    });
    let o = run_with(&p, &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert_eq!(b.scope, "document");
    assert!(!b.kept);
    assert_eq!(b.reasons, vec!["must_keep_over_budget".to_string()]);
    assert_eq!(b.steps.last().unwrap().step, "must_keep_only");
    let doc = o.rendered.unwrap().document;
    assert!(doc.contains(latest.trim()));
    assert!(!doc.contains("a reply"));
    let json = o.decision.to_json();
    assert!(
        json.contains("\"reasons\": [\n      \"must_keep_over_budget\"\n    ]"),
        "{json}"
    );
    let explained = baton::explain::render(&o.decision, false);
    assert!(
        explained.contains("(NOT kept)") && explained.contains("reasons: must_keep_over_budget")
    );
}

// ---- long threads (issue 24) ----

use baton::quality::long::{generate, measure, Handover};

/// Every shipped policy on generated threads of 50 to 3,200 runs: what the policy includes
/// survives the budget (every changed file named, the newest 10 requests whole, every decision
/// of the newest 100 runs, every open problem), the budget is kept, and what is shed is the
/// oldest of its kind.
#[rstest]
fn long_threads_degrade_without_cliffs(
    #[values(50, 100, 400, 800, 1600, 3200)] runs: u32,
    #[values("default", "mcode", "t3code", "t3code-legacy")] policy: &str,
    #[values(Handover::Fresh, Handover::Back)] handover: Handover,
) {
    let s = generate(runs, handover).expect("generated state is valid");
    let f = measure(&shipped(policy), &s, handover.target()).expect("renders");
    let at = format!("{policy} {handover:?} {runs}: {f:?}");
    assert!(f.kept, "budget not kept: {at}");
    assert!(f.oldest_first, "newer content shed before older: {at}");
    if f.strategy == "no_handoff" {
        return;
    }
    match policy {
        "default" => {
            assert_eq!(f.open.0, f.open.1, "open problems: {at}");
            assert_eq!(f.files.0, f.files.1, "files: {at}");
            assert_eq!(
                f.newest_requests.0, f.newest_requests.1,
                "newest requests: {at}"
            );
            assert_eq!(f.decisions.0, f.decisions.1, "decisions: {at}");
        }
        "mcode" => {
            assert_eq!(f.files.0, f.files.1, "files: {at}");
        }
        // Seed 004's strict 240-character lines name files by their name alone and cut every
        // line (the newest requests too): what holds is that shedding is oldest first.
        "t3code" => {}
        // The legacy continuation walks back from the newest within 32,000 characters.
        _ => assert_eq!(
            f.newest_requests.0, f.newest_requests.1,
            "newest requests: {at}"
        ),
    }
}

// ---- the transcript (issue 24, point 4) ----

/// An off-band handoff the budget degraded writes the transcript beside its document: every
/// item the policy includes that the budget left out or cut, whole, under its id; never an
/// excluded one. handoff.json names it, the pre-grant covers it for the first turn, GC removes
/// it with its document.
#[test]
fn an_off_band_handoff_keeps_what_it_leaves_out_in_the_transcript() {
    use baton::deliver::{
        check, deliver, gc, CheckRequest, HandoffLiveness, MemoryGrantStore, OffbandStore, PathArg,
        Retention,
    };
    let tmp = tempfile::TempDir::new().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("docs");
    let mut s = generate(400, Handover::Fresh).unwrap();
    // An excluded item never reaches the transcript.
    s.runs[0].items.push(baton::state::Item::Reasoning {
        id: None,
        text: "LEAK-reasoning hidden thoughts".into(),
    });
    let eval = EvalOptions {
        target: Some("claude".into()),
        document_root: Some(root.clone()),
    };
    let mut o = run(&shipped("default"), &s, &eval, &RenderOptions::default()).unwrap();
    let r = o.rendered.clone().unwrap();
    let transcript = r.transcript.clone().expect("a transcript");
    assert!(!transcript.contains("LEAK-reasoning"));
    // Every item the budget left out or shortened is in it, whole, under its id.
    let budget_ids: Vec<&str> = r
        .provenance
        .omitted
        .iter()
        .filter(|o| o.reason.starts_with("dropped to fit the budget"))
        .map(|o| o.id.as_str())
        .collect();
    assert!(budget_ids.len() > 100, "{}", budget_ids.len());
    for id in &budget_ids {
        assert!(transcript.contains(&format!("\n## {id} (")), "{id} missing");
    }
    let first = &s.runs[0].items[0];
    let baton::state::Item::UserMessage { text, .. } = first else {
        panic!("a request first")
    };
    assert!(
        transcript.contains(text.as_str()),
        "the oldest request whole"
    );
    // The document's receipt says where.
    let path = r
        .provenance
        .transcript
        .clone()
        .expect("handoff.json names it");
    assert!(r.document.contains(&format!("in the transcript `{path}`")));
    assert!(r
        .document
        .contains("## Left out or shortened to fit the budget"));

    let off = OffbandStore::new(Some(root.clone()));
    let mut grants = MemoryGrantStore::new();
    let delivered = deliver(&mut o, &off, &s.thread.id, &mut grants);
    let doc = delivered.document_path.clone().expect("written");
    let written = doc.with_file_name("transcript.md");
    assert_eq!(written.display().to_string(), path);
    assert_eq!(std::fs::read_to_string(&written).unwrap(), transcript);
    let json = std::fs::read_to_string(doc.with_file_name("handoff.json")).unwrap();
    assert!(
        json.contains(&format!("\"transcript\": \"{path}\"")),
        "{json}"
    );
    // The first turn may read it without prompting.
    assert!(delivered.transcript_grant.is_some());
    let read = |p: &std::path::Path| CheckRequest {
        thread: s.thread.id.clone(),
        run: o.decision.run,
        tool: "Read".into(),
        args: PathArg::Args(json!({"file_path": p.display().to_string()})),
    };
    assert!(check(&mut grants, &read(&written)).unwrap().allow);
    assert!(check(&mut grants, &read(&doc)).unwrap().allow);
    // GC removes it with its document.
    let retention = Retention {
        max_age: None,
        max_per_thread: Some(0),
    };
    let report = gc(
        &off,
        &retention,
        &|_, _| HandoffLiveness::Unknown,
        std::time::SystemTime::now(),
        false,
    )
    .unwrap();
    assert!(!report.removed.is_empty(), "{report:?}");
    assert!(!written.exists() && !doc.exists());
}

/// An inline handoff has no transcript: its receipt says the rest is not sent.
#[test]
fn an_inline_handoff_says_the_rest_is_not_sent() {
    let mut s = generate(400, Handover::Fresh).unwrap();
    s.providers.insert(
        "claude".into(),
        serde_json::from_value(json!({"file_read": false, "max_input_chars_per_turn": 30000}))
            .unwrap(),
    );
    let o = run_with(&shipped("default"), &s, Some("claude"));
    let r = o.rendered.unwrap();
    assert_eq!(r.provenance.delivery, "inline");
    assert!(r.transcript.is_none() && r.provenance.transcript.is_none());
    assert!(r
        .inline
        .contains("They are not sent; handoff.json lists their ids."));
    assert!(
        r.inline.contains("earlier requests (runs 1-"),
        "counted requests"
    );
    assert!(r.inline.contains("they are not sent."));
}

/// Bad input: one 50 MB tool output (and a 50 MB failing command's output) under every shipped
/// policy and for both kinds of target: the handoff is made within its limits, the failing
/// command named with its exit code where the policy lists commands; nothing crashes.
#[rstest]
fn a_50_mb_output_renders_within_the_limits_under_every_policy(
    #[values("default", "mcode", "t3code", "t3code-legacy")] policy: &str,
    #[values("claude", "codex")] target: &str,
) {
    let output = "x".repeat(99) + "\n";
    let output = output.repeat(500_000);
    let v = json!({
        "version": 1,
        "thread": {"id": "th_huge", "title": "Huge"},
        "runs": [{"ordinal": 1, "provider": "cursor", "items": [
            {"kind": "user_message", "text": "Read the whole log."},
            {"kind": "tool_call", "tool": "Bash", "input": "cat big.log", "status": "completed", "output": output},
            {"kind": "command", "command": "make check", "exit_code": 2, "output": output},
        ]}],
        "request": {"provider": target, "message": "Go on."}
    });
    let o = run_with(&shipped(policy), &state(&v), None);
    let b = o.decision.budget.as_ref().expect("a budget report");
    assert!(b.kept, "{policy} -> {target}: {b:?}");
    let r = o.rendered.expect("a handoff");
    assert!(chars(&r.inline) <= b.first_turn_limit, "{b:?}");
    if r.document_path.is_some() {
        assert!(chars(&r.document) <= b.document_limit, "{b:?}");
    }
    let read = if r.document_path.is_some() {
        &r.document
    } else {
        &r.inline
    };
    assert!(
        read.contains("Read the whole log."),
        "{policy}: the latest request"
    );
    if policy != "t3code-legacy" {
        assert!(read.contains("make check"), "{policy}: the failing command");
    }
}

/// Bad input: one 50 MB tool output renders within the document limit, the output's end kept,
/// its whole text in the transcript.
#[test]
fn a_50_mb_tool_output_renders_within_the_limit() {
    let output = "x".repeat(99) + "\n";
    let output = output.repeat(500_000);
    let v = json!({
        "version": 1,
        "thread": {"id": "th_huge", "title": "Huge"},
        "runs": [{"ordinal": 1, "provider": "codex", "items": [
            {"kind": "user_message", "text": "Read the whole log."},
            {"kind": "command", "command": "cat big.log", "exit_code": 1, "output": output},
            {"kind": "tool_call", "tool": "Bash", "input": "cat big.log", "status": "completed", "output": output},
        ]}],
        "request": {"provider": "claude", "message": "Go on."}
    });
    let s = state(&v);
    let o = run_with(&shipped("default"), &s, None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(b.kept, "{b:?}");
    let r = o.rendered.unwrap();
    assert!(chars(&r.document) <= 60_000);
    assert!(r.document.contains("cat big.log") && r.document.contains("exit 1"));
}

// ---- cut only when the budget binds (issue 24, point 3) ----

/// A reply of 3,407 characters, with paragraphs, as a real Claude Code reply.
fn long_reply() -> String {
    let para = "I traced the failure to the session cache: it keeps the token after logout, so the next request reuses it and the middleware accepts it. ";
    let mut s = String::from("Summary of what I changed and why.\n\n");
    let mut n = 0;
    while chars(&s) < 3_200 {
        s.push_str(para);
        n += 1;
        if n % 4 == 0 {
            s.push_str("\n\n");
        }
    }
    let s = format!("{}\n\nDone.", s.trim());
    let pad = 3_407 - chars(&s);
    let s = format!("{s}{}", " Really.".repeat(pad / 8)) + &"!".repeat(pad % 8);
    assert_eq!(chars(&s), 3_407);
    s
}

/// A short thread whose texts are over the default's text rules (a 3,407-character reply, a
/// 2,600-character older request, a 2,000-character test output) but whose document is far
/// under its limit.
fn short_thread_with_long_texts(target: &str) -> Value {
    let reply = long_reply();
    let request = format!(
        "Please fix logout. {}",
        "The token must be gone after logout. ".repeat(70)
    );
    let output: String = (0..80)
        .map(|i| format!("test auth::case_{i} ... ok\n"))
        .collect();
    json!({
        "version": 1, "thread": {"id": "th_short", "title": "Logout"},
        "runs": [{"ordinal": 1, "provider": "claude", "items": [
            {"kind": "user_message", "text": request},
            {"kind": "command", "command": "cargo test -p auth", "exit_code": 0, "output": output},
            {"kind": "assistant_message", "text": reply},
            {"kind": "user_message", "text": "Thanks. Now the refresh path."},
        ]}],
        "request": {"provider": target, "message": "Carry on."}
    })
}

/// Under its limit, a document carries every text whole: the text rules (`head_tail 2000`,
/// `tail 1500 for command`) are ceilings that only the budget applies. The newest reply of
/// 3,407 characters is whole in a document of about 9,000 characters whose limit is 60,000.
/// (The same thread over its limit: `text_rules_cut_when_the_budget_binds`.)
#[test]
fn under_its_limit_every_text_is_whole() {
    let v = short_thread_with_long_texts("claude");
    let o = run_with(&shipped("default"), &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(b.kept && b.steps.is_empty(), "{b:?}");
    let doc = o.rendered.unwrap().document;
    assert!(chars(&doc) < 20_000, "{}", chars(&doc));
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let items = v["runs"][0]["items"].as_array().unwrap();
    for text in [&items[0]["text"], &items[1]["output"], &items[2]["text"]] {
        let text = text.as_str().unwrap();
        assert!(
            words(&doc).contains(&words(text)),
            "cut under the limit: {text:.80}\n{doc}"
        );
    }
    assert!(!doc.contains("characters cut"), "{doc}");
    assert!(!doc.contains("To fit the budget"), "{doc}");
}

/// Over its limit, the text rules are the first step, oldest runs first: a target that takes
/// the handoff inline binds it to its per-turn input, so the same thread to a 7,000-character
/// turn cuts the older request, the output and the reply to their rules' ceilings (the trace names
/// `text_rules`), and keeps the newest reply whole as far as the budget allows.
#[rstest]
#[case::inline_turn_binds(json!({"file_read": false, "max_input_chars_per_turn": 7000}), true)]
#[case::inline_under_the_turn(json!({"file_read": false, "max_input_chars_per_turn": 30000}), false)]
fn text_rules_cut_when_the_budget_binds(#[case] caps: Value, #[case] binds: bool) {
    let mut v = short_thread_with_long_texts("plain");
    v["providers"] = json!({"plain": caps});
    v["version"] = json!(1);
    let o = run_with(&shipped("default"), &state(&v), Some("plain"));
    let b = o.decision.budget.as_ref().unwrap();
    assert_eq!(b.scope, "first_turn");
    assert!(b.kept, "{b:?}");
    let r = o.rendered.unwrap();
    assert_eq!(r.provenance.delivery, "inline");
    let cut = r.inline.contains("characters cut");
    assert_eq!(cut, binds, "{b:?}\n{}", r.inline);
    assert_eq!(
        b.steps.first().map(|s| s.step.starts_with("text_rules")),
        binds.then_some(true),
        "{b:?}"
    );
    if binds {
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        let latest = v["runs"][0]["items"][3]["text"].as_str().unwrap();
        assert!(words(&r.inline).contains(latest));
    }
}

/// `degrade text_rules` places the text rules' step: a policy that writes it after `degrade
/// drop_output command` sheds the successful test output before it cuts any text to its rule,
/// where `default` (no `degrade text_rules`: first) cuts the texts first. Named twice, it runs
/// once, where it is first named.
#[rstest]
#[case::after_drop_output("  degrade drop_output command\n  degrade text_rules\n")]
#[case::named_twice("  degrade drop_output command\n  degrade text_rules\n  degrade text_rules\n")]
fn a_policy_places_the_text_rules_step(#[case] steps: &str) {
    let mut v = short_thread_with_long_texts("plain");
    v["providers"] = json!({"plain": {"file_read": false, "max_input_chars_per_turn": 7000}});
    let s = state(&v);
    let labels = |p: &baton::Policy| {
        let o = run_with(p, &s, Some("plain"));
        let b = o.decision.budget.clone().unwrap();
        assert!(b.kept, "{b:?}");
        let inline = o.rendered.unwrap().inline;
        let steps: Vec<String> = b.steps.iter().map(|s| s.step.clone()).collect();
        (steps, inline)
    };
    let (default_steps, _) = labels(&shipped("default"));
    assert!(
        default_steps[0].starts_with("text_rules"),
        "{default_steps:?}"
    );
    let text = std::fs::read_to_string("policies/default.policy")
        .unwrap()
        .replace("policy \"default\"", "policy \"placed\"")
        .replace("  degrade drop_output command\n", steps);
    let (placed, inline) = labels(&policy_text("placed.policy", &text));
    let at = |prefix: &str| placed.iter().position(|s| s.starts_with(prefix));
    let drop_output = at("drop_output command").expect("drop_output command ran");
    assert!(
        at("text_rules").is_none_or(|t| t > drop_output),
        "text_rules before drop_output: {placed:?}"
    );
    assert_eq!(
        placed
            .iter()
            .filter(|s| s.starts_with("text_rules"))
            .count(),
        at("text_rules").map_or(0, |_| 1),
        "{placed:?}"
    );
    assert!(
        inline.contains("[output of 80 lines left out]"),
        "{placed:?}\n{inline}"
    );
}

/// `baton quality --long-threads`'s gate measures it: a generated thread with a long reply
/// and a long output under the limit has no cut text.
#[test]
fn the_long_thread_gate_sees_a_cut_under_the_limit() {
    let s = generate(20, Handover::Fresh).unwrap();
    let f = measure(&shipped("default"), &s, "claude").unwrap();
    assert!(!f.cut_under_limit, "{f:?}");
    assert!(baton::quality::long::failures(&f).is_empty(), "{f:?}");
    // A policy whose text rules are formats (`compact`) cuts whatever the budget: the gate
    // reports it.
    let p = policy_text(
        "compact.policy",
        "policy \"compact\" { extends \"default\" }\nsummary {\n  text compact 200\n  include user_message into goals\n  include assistant_message into messages\n  include command into commands\n}\n",
    );
    let f = measure(&p, &s, "claude").unwrap();
    assert!(f.cut_under_limit, "{f:?}");
}

// ---- t3code-legacy: one budget, no per-provider cap (issue 24, point 7) ----

/// t3code's legacy continuation has one 32,000-character budget and no per-provider cap: five
/// 10,000-character messages to codex (16,000 characters per turn) keep the three newest whole.
#[test]
fn t3code_legacy_is_not_cut_to_the_targets_turn() {
    let msgs: Vec<Value> = (1..=5)
        .map(|i| {
            let kind = if i % 2 == 1 {
                "user_message"
            } else {
                "assistant_message"
            };
            let text = format!("message {i} {}", "w".repeat(9_990));
            json!({"kind": kind, "text": text})
        })
        .collect();
    let v = json!({
        "version": 1, "thread": {"id": "th_legacy"},
        "runs": [{"ordinal": 1, "provider": "claude", "items": msgs}],
        "request": {"provider": "codex", "message": "Continue."}
    });
    let o = run_with(&shipped("t3code-legacy"), &state(&v), None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(b.kept && b.steps.is_empty(), "{b:?}");
    let r = o.rendered.unwrap();
    assert_eq!(r.provenance.delivery, "inline");
    for m in &msgs[2..] {
        let t = m["text"].as_str().unwrap();
        assert_eq!(chars(t), 10_000);
        assert!(r.inline.contains(t), "newest message cut");
    }
    assert!(!r.inline.contains(msgs[0]["text"].as_str().unwrap()));
    let explained = baton::explain::render(&o.decision, false);
    assert!(
        explained.contains("no limit (turn max none)"),
        "{explained}"
    );
}

/// The budget report says where the first-turn limit comes from (`first_turn_source`, absent
/// for the target's cap), and explain names it: the target's cap, the policy's `turn max N`,
/// or no limit.
#[rstest]
#[case::target("", "", "of 180,000 (the target's max_input_chars_per_turn)")]
#[case::turn_max("  turn max 9_000\n", "turn_max", "of 9,000 (the policy's turn max)")]
#[case::turn_max_none("  turn max none\n", "turn_max_none", "no limit (turn max none)")]
fn explain_names_where_the_first_turn_limit_comes_from(
    #[case] rule: &str,
    #[case] source: &str,
    #[case] explained: &str,
) {
    let text = std::fs::read_to_string("policies/default.policy")
        .unwrap()
        .replace("policy \"default\"", "policy \"turns\"")
        .replace(
            "  document max 60_000\n",
            &format!("  document max 60_000\n{rule}"),
        );
    let v = short_thread_with_long_texts("claude");
    let o = run_with(&policy_text("turns.policy", &text), &state(&v), None);
    let json = serde_json::to_value(&o.decision).unwrap();
    // The target's own cap is the default: absent, so decisions logged before the field
    // replay identically.
    let expected = match source {
        "" => Value::Null,
        s => json!(s),
    };
    assert_eq!(
        json["budget"]["first_turn_source"], expected,
        "{:?}",
        json["budget"]
    );
    let out = baton::explain::render(&o.decision, false);
    assert!(out.contains(explained), "{out}");
}

// ---- monotone across thread lengths (issue 24, point 1) ----

/// The runs whose request, decision and reply `read` shows (by the generated markers), and the
/// runs whose request of several lines it shows whole (a one-line request is whole whenever
/// its first line is shown).
fn shown_runs(read: &str, runs: u32) -> [Vec<u32>; 4] {
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let collapsed = words(read);
    let mut out: [Vec<u32>; 4] = Default::default();
    for i in 1..=runs {
        if read.contains(&format!("Request {i}:")) {
            out[0].push(i);
            let request = baton::quality::long::request_of(i);
            if request.contains('\n') && collapsed.contains(&words(&request)) {
                out[1].push(i);
            }
        }
        if read.contains(&format!("Decision {i}:")) {
            out[2].push(i);
        }
        if read.contains(&format!("Done with request {i}.")) {
            out[3].push(i);
        }
    }
    out
}

/// Adding runs never makes the newest runs' content disappear while older content stays: for
/// every shipped policy, handover and kind, what the document of a thread of N runs shows and
/// the document of the same thread with k more runs no longer shows is older than everything
/// of that kind both show.
#[rstest]
fn adding_runs_sheds_the_oldest_content_first(
    #[values((100, 1), (100, 37), (400, 13), (1200, 150))] sizes: (u32, u32),
    #[values("default", "mcode", "t3code", "t3code-legacy")] policy: &str,
    #[values(Handover::Fresh, Handover::Back)] handover: Handover,
) {
    let (n, k) = sizes;
    let p = shipped(policy);
    let read = |runs: u32| {
        let s = generate(runs, handover).unwrap();
        let o = run_with(&p, &s, Some(handover.target()));
        let covered = o.decision.covered_runs.map(|r| (r.from, r.to));
        let text = o.rendered.map(|r| {
            if r.document_path.is_some() {
                r.document
            } else {
                r.inline
            }
        });
        (covered, text.unwrap_or_default())
    };
    let (short_range, short) = read(n);
    let (long_range, long) = read(n + k);
    let (a, b) = (shown_runs(&short, n), shown_runs(&long, n + k));
    let kinds = ["request", "request (whole)", "decision", "reply"];
    for ((kind, was), now) in kinds.iter().zip(&a).zip(&b) {
        // Runs the longer document does not cover (a delta starts later) are not compared.
        let from = long_range.map_or(1, |r| r.0);
        let lost: Vec<u32> = was
            .iter()
            .copied()
            .filter(|r| *r >= from && !now.contains(r))
            .collect();
        let kept: Vec<u32> = was.iter().copied().filter(|r| now.contains(r)).collect();
        if let (Some(newest_lost), Some(oldest_kept)) = (lost.last(), kept.first()) {
            assert!(
                newest_lost < oldest_kept,
                "{policy} {handover:?} {n}+{k}: the {kind} of run {newest_lost} disappeared while that of run {oldest_kept} stays (covered {short_range:?} -> {long_range:?})"
            );
        }
    }
}

/// Where "every changed file named" stops (docs/limits.md#rendering): 3,000 files, each in a
/// directory of its own, do not fit a 60,000-character document even grouped by directory
/// (about 40 characters a line). The oldest are counted per directory, and the handoff says
/// so: `budget.files_counted`, a warning in `budget.warnings` and in explain, and every
/// counted file named in the transcript; every file is named in one of the two.
#[test]
fn files_that_cannot_all_be_named_are_counted_with_a_warning() {
    let runs: Vec<Value> = (1..=3_000u32)
        .map(|i| {
            json!({"ordinal": i, "provider": "codex", "items": [
                {"kind": "user_message", "text": format!("Request {i}: move file {i}.")},
                {"kind": "file_change", "path": format!("src/area_{i}/module_{i}/file_{i}.rs"), "change": "modified"},
            ]})
        })
        .collect();
    let s = state(&json!({
        "version": 1, "thread": {"id": "th_files", "title": "Files"},
        "runs": runs,
        "request": {"provider": "claude", "message": "Carry on."}
    }));
    let o = run_with(&shipped("default"), &s, None);
    let b = o.decision.budget.clone().unwrap();
    assert!(b.kept, "{b:?}");
    let f = b
        .files_counted
        .unwrap_or_else(|| panic!("files counted: {b:?}"));
    assert_eq!(f.grouped, 3_000, "{f:?}");
    assert!(f.counted > 0 && f.counted < 3_000, "{f:?}");
    let json = serde_json::to_value(&o.decision).unwrap();
    let warning = json["budget"]["warnings"][0].as_str().unwrap().to_string();
    assert_eq!(
        warning,
        format!(
            "{} of 3,000 changed files are counted, not named: even grouped by directory their names do not fit the 60,000-character document; each is named, with every change, in the transcript beside the document",
            baton::cut::thousands(f.counted)
        )
    );
    assert_eq!(json["budget"]["files_counted"]["counted"], f.counted);
    let explained = baton::explain::render(&o.decision, false);
    assert!(
        explained.contains(&format!("warning: {warning}")),
        "{explained}"
    );
    let r = o.rendered.unwrap();
    assert!(chars(&r.document) <= 60_000);
    let transcript = r.transcript.expect("a transcript");
    let (mut named, mut in_transcript) = (0, 0);
    for i in 1..=3_000 {
        let path = format!("src/area_{i}/module_{i}/file_{i}.rs");
        if baton::quality::long::file_named(&r.document, &path) {
            named += 1;
        } else {
            assert!(
                transcript.contains(&path),
                "{path} neither named nor in the transcript"
            );
            in_transcript += 1;
        }
    }
    assert_eq!((named, in_transcript), (3_000 - f.counted, f.counted));
}

/// Bad input: a thread of 100,000 runs (each a request, every tenth a test run) renders
/// within its limit with the same guarantees: the newest 10 requests whole, the latest one
/// and the open question kept, what is shed counted in one line. (The generated thread of
/// 100,000 runs of real-looking work is measured in docs/limits.md#rendering.)
#[test]
fn a_thread_of_100_000_runs_renders_within_its_limit() {
    let runs: Vec<baton::state::Run> = (1..=100_000u32)
        .map(|i| {
            let mut items = vec![baton::state::Item::UserMessage {
                id: None,
                text: format!("Request {i}: fix case {i}.\nKeep the API."),
            }];
            if i % 10 == 0 {
                items.push(baton::state::Item::Command {
                    id: None,
                    command: format!("cargo test case_{i}"),
                    exit_code: Some(0),
                    output: Some("test result: ok. 1 passed".into()),
                });
            }
            if i == 100_000 {
                items.push(baton::state::Item::Question {
                    id: None,
                    text: "Per tenant or global?".into(),
                    answered: false,
                });
            }
            baton::state::Run {
                ordinal: i,
                provider: "codex".into(),
                provider_thread: None,
                status: baton::state::RunStatus::Completed,
                handoff: None,
                items,
                started_at: None,
                ended_at: None,
                workspace: None,
            }
        })
        .collect();
    let mut s = state(&json!({
        "version": 1, "thread": {"id": "th_100k", "title": "100,000 runs"},
        "request": {"provider": "claude", "message": "Carry on."}
    }));
    s.runs = runs;
    let o = run_with(&shipped("default"), &s, None);
    let b = o.decision.budget.as_ref().unwrap();
    assert!(b.kept, "{b:?}");
    let r = o.rendered.unwrap();
    assert!(chars(&r.document) <= 60_000, "{}", chars(&r.document));
    for i in 99_991..=100_000 {
        assert!(
            r.document
                .contains(&format!("Request {i}: fix case {i}.\n")),
            "request {i} not whole"
        );
    }
    assert!(r.document.contains("Per tenant or global?"));
    assert!(r.document.contains("earlier requests (runs 1-"), "counted");
}
