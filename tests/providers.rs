//! The policy's `providers` block through public interfaces: policy text and a state in, a
//! decision (its facts, its trace, its explanation) or the diagnostic the user sees out.
//! Also the facts `target.thread.first_run` and `item.output_chars`.

use baton::{Engine, State};
use rstest::rstest;
use std::fs;

use crate::common;
use common::baton;

/// A state on cursor (no thread yet) that sets some cursor capabilities itself.
const STATE: &str = r#"
version: 1
thread: {id: t}
providers:
  cursor: {file_read: true, max_input_chars_per_turn: 50000}
provider_threads:
  - {id: C1, provider: codex, status: active}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {kind: user_message, text: "Add a login page."}
      - {kind: command, command: cargo build, exit_code: 0, output: "Compiling web v0.1.0\nFinished"}
      - {kind: tool_call, tool: Read, input: src/main.rs, status: completed, output: "fn main() {}"}
      - {kind: assistant_message, text: "Done."}
  - ordinal: 2
    provider: codex
    provider_thread: C1
    items:
      - {kind: user_message, text: "Now tests."}
request: {provider: cursor, message: "Go on."}
"#;

fn state(text: &str) -> State {
    baton::testing::state_from_yaml(text).expect("the state loads")
}

/// The capability facts a decision read, as `name = value` from the trace.
fn traced(engine: &Engine, st: &State, target: &str, fact: &str) -> Option<serde_json::Value> {
    let d = engine.decide(st, Some(target)).expect("a decision");
    d.trace
        .iter()
        .find_map(|t| t.values.get(fact))
        .map(|v| serde_json::to_value(v).expect("json"))
}

/// The trace entry of the policy's `providers` entry for `target` (the capabilities it set).
fn provider_entry(engine: &Engine, st: &State, target: &str) -> serde_json::Value {
    let d = engine.decide(st, Some(target)).expect("a decision");
    let entry = d
        .trace
        .iter()
        .find(|t| t.rule == format!("providers {target}"))
        .expect("a providers trace entry");
    serde_json::to_value(entry).expect("json")
}

/// A policy whose ladder reads `fact`, so that the trace records its value.
fn reading(fact: &str, providers: &str) -> String {
    format!(
        "policy \"p\" {{}}\n{providers}\nstrategy {{\n  full_new when {fact} == {fact} or true\n  full_new otherwise\n}}\n"
    )
}

/// Each case of the precedence rule: shipped < policy default < state < policy `force`.
#[rstest]
// The state says nothing about copilot: the policy's default holds over the shipped 16,000.
#[case::policy_default_over_shipped(
    "copilot { max_input_chars_per_turn 4000 }",
    "copilot",
    "target.caps.max_input_chars_per_turn",
    "4000"
)]
// The state sets cursor's budget: it wins over the policy's default.
#[case::state_over_policy_default(
    "cursor { max_input_chars_per_turn 4000 }",
    "cursor",
    "target.caps.max_input_chars_per_turn",
    "50000"
)]
// `force`: the policy's value wins over the state's.
#[case::forced_policy_over_state(
    "cursor { max_input_chars_per_turn 4000 force }",
    "cursor",
    "target.caps.max_input_chars_per_turn",
    "4000"
)]
#[case::forced_bool_over_state(
    "cursor { file_read false force }",
    "cursor",
    "target.caps.file_read",
    "false"
)]
#[case::state_bool_over_default(
    "cursor { file_read false }",
    "cursor",
    "target.caps.file_read",
    "true"
)]
// Nothing anywhere: the shipped value.
#[case::shipped(
    "claude { summarize false }",
    "cursor",
    "target.caps.summarize",
    "false"
)]
#[case::enum_word(
    "copilot { handoff_channel preamble }",
    "copilot",
    "target.caps.handoff_channel",
    "\"preamble\""
)]
#[case::enum_string(
    "copilot { handoff_channel \"system\" }",
    "copilot",
    "target.caps.handoff_channel",
    "\"system\""
)]
fn precedence(
    #[case] entry: &str,
    #[case] target: &str,
    #[case] fact: &str,
    #[case] expected: &str,
) {
    let engine = Engine::from_text(
        "p.policy",
        &reading(fact, &format!("providers {{ {entry} }}")),
    )
    .expect("the policy checks");
    let got = traced(&engine, &state(STATE), target, fact).expect("the fact was read");
    assert_eq!(got.to_string(), expected, "{entry} for {target}");
}

#[test]
fn the_trace_and_explain_say_where_each_capability_came_from() {
    let policy = "policy \"team\" { extends \"default\" }\n\nproviders {\n  cursor {\n    max_input_chars_per_turn 4000\n    file_read false force\n    resume false\n  }\n}\n";
    let engine = Engine::from_text("team.policy", policy).expect("checks");
    let d = engine
        .decide(&state(STATE), Some("cursor"))
        .expect("decides");
    let entry = d
        .trace
        .first()
        .filter(|t| t.rule == "providers cursor")
        .expect("the first trace entry is the providers one");
    assert_eq!(entry.at, "team.policy:4:3");
    assert_eq!(
        entry.because.as_deref(),
        Some(
            "resume false from the policy (team.policy:7:5); \
             file_read false from the policy (team.policy:6:5, force, over the state's true); \
             max_input_chars_per_turn 50000 from the state, over the policy's default 4000 (team.policy:5:5); \
             the rest are cursor's shipped defaults"
        )
    );
    assert_eq!(
        serde_json::to_value(&entry.values["target.caps.file_read"]).unwrap(),
        serde_json::json!(false)
    );
    // file_read false (forced): the default policy delivers inline.
    assert_eq!(
        d.delivery.as_ref().map(|x| x.mode.as_str()),
        Some("inline"),
        "{}",
        engine.explain(&d)
    );
    let text = engine.explain(&d);
    assert!(
        text.contains("  providers resume false from the policy (team.policy:7:5)\n            file_read false"),
        "{text}"
    );
    // A target the block does not name: every capability from the state or shipped.
    let d = engine
        .decide(&state(STATE), Some("codex"))
        .expect("decides");
    assert_eq!(
        d.trace.first().and_then(|t| t.because.as_deref()),
        Some("every capability is codex's shipped default")
    );
    // A policy without a providers block traces nothing new.
    let engine = Engine::new("default").expect("default");
    let d = engine
        .decide(&state(STATE), Some("cursor"))
        .expect("decides");
    assert!(d.trace.iter().all(|t| !t.rule.starts_with("providers")));
}

#[test]
fn the_budget_a_policy_sets_is_the_one_the_handoff_is_fitted_to() {
    let policy = "policy \"team\" { extends \"default\" }\nproviders { cursor { max_input_chars_per_turn 3000 force } }\n";
    let engine = Engine::from_text("team.policy", policy).expect("checks");
    let d = engine
        .decide(&state(STATE), Some("cursor"))
        .expect("decides");
    let budget = d.budget.clone().expect("a handoff was fitted");
    assert_eq!(budget.first_turn_limit, 3000);
    // Rendering a decision made earlier fits it to the same budget.
    let out = engine.render(&state(STATE), &d).expect("renders");
    let budget = out.decision.budget.expect("a handoff was fitted");
    assert_eq!(budget.first_turn_limit, 3000);
    let out = engine.run(&state(STATE), Some("cursor")).expect("runs");
    assert_eq!(out.decision.budget.map(|b| b.first_turn_limit), Some(3000));
}

#[test]
fn a_provider_the_policy_declares_can_be_the_target() {
    let st = state(STATE);
    let engine = Engine::new("default").expect("default");
    let err = engine.decide(&st, Some("aider")).unwrap_err().to_string();
    assert!(err.contains("unknown provider \"aider\""), "{err}");
    assert!(err.contains("the policy's `providers` block"), "{err}");
    let policy = "policy \"team\" { extends \"default\" }\nproviders {\n  aider { file_read true resume true }\n  \"gemini-cli\" { accepts_handoff false }\n}\n";
    let engine = Engine::from_text("team.policy", policy).expect("checks");
    assert_eq!(
        engine.policy().declared_providers(),
        ["aider", "gemini-cli"]
    );
    let d = engine
        .decide(&st, Some("aider"))
        .expect("aider is declared");
    assert_eq!(d.strategy.as_str(), "full_new");
    // Unset capabilities of a new provider are the conservative ones.
    let d = engine.decide(&st, Some("gemini-cli")).expect("declared");
    assert_eq!(d.strategy.as_str(), "unsupported", "{}", engine.explain(&d));
}

#[test]
fn extends_merges_provider_entries_per_key() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("base.policy"),
        "policy \"base\" { extends \"default\" }\nproviders {\n  cursor { max_input_chars_per_turn 4000 force  resume false }\n  copilot { file_read false }\n}\n",
    )
    .unwrap();
    let team = dir.path().join("team.policy");
    fs::write(
        &team,
        "policy \"team\" { extends \"base.policy\" }\nproviders {\n  cursor { max_input_chars_per_turn 8000 }\n  codex { summarize true }\n}\n",
    )
    .unwrap();
    let engine = Engine::new(team.to_str().unwrap()).expect("checks");
    assert_eq!(
        engine.policy().declared_providers(),
        ["cursor", "copilot", "codex"]
    );
    let st = state(STATE);
    let caps =
        |target: &str, fact: &str| provider_entry(&engine, &st, target)["values"][fact].clone();
    // The child's key replaces the base's value and its `force`: the state's 50,000 wins.
    assert_eq!(
        caps("cursor", "target.caps.max_input_chars_per_turn"),
        50_000
    );
    // The base's other key stays.
    assert_eq!(caps("cursor", "target.caps.resume"), false);
    // The base's other provider stays; the child's new one is added.
    assert_eq!(caps("copilot", "target.caps.file_read"), false);
    assert_eq!(caps("codex", "target.caps.summarize"), true);
}

/// The diagnostic a user sees for each bad entry: message, line:col, help.
#[rstest]
#[case::unknown_key(
    "cursor { file_reads false }",
    "p.policy:2:22: error: unknown provider capability `file_reads`",
    Some("did you mean `file_read`? (provider capabilities: resume, native_fork, rollback, accepts_handoff, handoff_channel, file_read, summarize, max_input_chars_per_turn)")
)]
#[case::bool_given_a_number(
    "cursor { file_read 1 }",
    "p.policy:2:32: error: `file_read` takes `true` or `false`, not 1",
    None
)]
#[case::number_given_a_word(
    "cursor { max_input_chars_per_turn lots }",
    "p.policy:2:47: error: `max_input_chars_per_turn` takes a number of characters, not `lots`",
    None
)]
#[case::zero_budget(
    "cursor { max_input_chars_per_turn 0 }",
    "p.policy:2:47: error: `max_input_chars_per_turn` is 0, out of range: it must be between 1 and 4294967295",
    Some("a character count; every count in a policy is at most 4294967295")
)]
#[case::huge_budget(
    "cursor { max_input_chars_per_turn 5_000_000_000 }",
    "p.policy:2:47: error: `max_input_chars_per_turn` is 5000000000, out of range: it must be between 1 and 4294967295",
    Some("a character count; every count in a policy is at most 4294967295")
)]
#[case::bad_channel(
    "cursor { handoff_channel usr }",
    "p.policy:2:38: error: `usr` is not a possible value of `handoff_channel`",
    Some("did you mean `user`? (values: system, developer, user, preamble)")
)]
#[case::null(
    "cursor { resume null }",
    "p.policy:2:29: error: `resume` cannot be null",
    Some("leave the key out: the state's value, else baton's shipped one, applies")
)]
#[case::key_twice(
    "cursor { resume true resume false }",
    "p.policy:2:34: error: `resume` is set twice for `cursor` (first at line 2)",
    Some("keep one of the two")
)]
#[case::provider_twice(
    "cursor { resume true } cursor { rollback true }",
    "p.policy:2:36: error: provider `cursor` has a second entry in this `providers` block (the first is at line 2)",
    Some("merge the two entries into one")
)]
#[case::empty_name(
    "\"\" { resume true }",
    "p.policy:2:13: error: a provider name cannot be empty",
    None
)]
fn bad_entries_are_located_errors(
    #[case] entry: &str,
    #[case] headline: &str,
    #[case] help: Option<&str>,
) {
    let text = format!("policy \"p\" {{ extends \"default\" }}\nproviders {{ {entry} }}\n");
    let err = common::policy_text("p.policy", &text).expect_err("the policy must not check");
    let d = err
        .diagnostics
        .iter()
        .find(|d| d.is_error())
        .expect("an error");
    assert_eq!(
        format!("{}:{}:{}: error: {}", d.file, d.line, d.col, d.message),
        headline
    );
    assert_eq!(d.help.as_deref(), help);
}

#[test]
fn suspicious_entries_are_warnings() {
    let text = "policy \"p\" { extends \"default\" }\nproviders {\n  curosr { file_read false }\n  cursor { max_input_chars_per_turn 1000 }\n}\n";
    let policy = common::policy_text("p.policy", text).expect("warnings only");
    let w: Vec<String> = policy
        .warnings()
        .iter()
        .map(|d| {
            format!(
                "{}:{}: {} / {}",
                d.line,
                d.col,
                d.message,
                d.help.clone().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        w,
        [
            "3:3: `curosr` is not a provider baton knows, so this entry declares a new provider / did you mean `cursor`?",
            "4:37: a per-turn budget of 1000 characters cannot hold the must-keep items / the latest user message, open questions and approvals and the last failing command are never cut; leave them at least 2000 characters",
        ]
    );
}

#[test]
fn a_second_providers_block_and_syntax_errors_are_reported() {
    let err = common::policy_text(
        "p.policy",
        "policy \"p\" { extends \"default\" }\nproviders { }\nproviders { }\n",
    )
    .unwrap_err();
    assert_eq!(
        err.diagnostics[0].message,
        "a policy file has at most one `providers` block"
    );
    let err = common::policy_text(
        "p.policy",
        "policy \"p\" { extends \"default\" }\nproviders { cursor { file_read } }\n",
    )
    .unwrap_err();
    let d = &err.diagnostics[0];
    assert_eq!((d.line, d.col), (2, 32));
    assert!(
        d.message
            .contains("a value (`true`, `false`, a number or a word)"),
        "{}",
        d.message
    );
}

#[test]
fn baton_check_and_fmt_handle_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("team.policy");
    let messy = "policy \"team\" { extends \"default\" }\nproviders {\ncursor {   max_input_chars_per_turn   4000\nfile_read false    force }\n    \"gemini-cli\" { resume true  handoff_channel user }  # ours\n}\n";
    fs::write(&path, messy).unwrap();
    let out = baton(&["check", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fmt = baton(&["fmt", path.to_str().unwrap()]);
    assert!(
        fmt.status.success(),
        "{}",
        String::from_utf8_lossy(&fmt.stderr)
    );
    let formatted = fs::read_to_string(&path).unwrap();
    assert_eq!(
        formatted,
        "policy \"team\" { extends \"default\" }\nproviders {\n  cursor { max_input_chars_per_turn 4000\n    file_read false force }\n  \"gemini-cli\" { resume true handoff_channel user } # ours\n}\n"
    );
    // Idempotent, and the canonical layout of a block written one key a line is itself.
    let again = baton(&["fmt", "--check", path.to_str().unwrap()]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), formatted);
    let canonical = "providers {\n  cursor {\n    max_input_chars_per_turn 4000\n    file_read false force\n  }\n}\n";
    let p = dir.path().join("p.policy");
    fs::write(&p, canonical).unwrap();
    let same = baton(&["fmt", "--check", p.to_str().unwrap()]);
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
    assert_eq!(fs::read_to_string(&p).unwrap(), canonical);
    // The formatted text checks to the same policy: the same providers, each setting the same
    // capabilities (the trace entry of each, without its positions).
    let a = Engine::from_text("team.policy", messy).unwrap();
    let b = Engine::from_text("team.policy", &formatted).unwrap();
    assert_eq!(
        a.policy().declared_providers(),
        b.policy().declared_providers()
    );
    let st = state(STATE);
    for target in a.policy().declared_providers() {
        let (x, y) = (
            provider_entry(&a, &st, target),
            provider_entry(&b, &st, target),
        );
        assert_eq!(x["rule"], y["rule"]);
        assert_eq!(x["values"], y["values"]);
    }
}

/// `target.thread.first_run`: the first run on the target's provider thread; a thread's age
/// in runs is `request.run - target.thread.first_run` (run 3 on a thread first used at run 1).
#[rstest]
#[case::codex_thread_since_run_1("codex", "target.thread.first_run == 1", true, "1")]
#[case::age_in_runs("codex", "request.run - target.thread.first_run == 2", true, "1")]
#[case::not_older("codex", "request.run - target.thread.first_run > 2", false, "1")]
#[case::no_thread_is_null("cursor", "target.thread.first_run == null", true, "null")]
#[case::null_age_never_holds("cursor", "request.run - target.thread.first_run >= 0", false, "null")]
fn first_run_of_the_target_thread(
    #[case] target: &str,
    #[case] cond: &str,
    #[case] holds: bool,
    #[case] first_run: &str,
) {
    let policy = format!(
        "policy \"age\" {{}}\nstrategy {{\n  full_new when {cond} because \"old thread\"\n  full_new otherwise\n}}\n"
    );
    let engine = Engine::from_text("age.policy", &policy).expect("checks");
    let d = engine.decide(&state(STATE), Some(target)).expect("decides");
    let first = &d
        .trace
        .iter()
        .find(|t| t.rule == "strategy full_new")
        .unwrap();
    assert_eq!(
        first
            .values
            .get("target.thread.first_run")
            .map(|v| serde_json::to_value(v).unwrap().to_string())
            .as_deref(),
        Some(first_run)
    );
    assert_eq!(d.decided_by.because.as_deref() == Some("old thread"), holds);
}

#[test]
fn a_rolled_back_first_run_still_started_the_thread() {
    let text = STATE.replace(
        "  - ordinal: 2\n    provider: codex\n    provider_thread: C1\n",
        "  - ordinal: 2\n    provider: codex\n    provider_thread: C1\n    status: rolled_back\n",
    );
    let text = text.replace(
        "  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n",
        "  - ordinal: 1\n    provider: codex\n",
    );
    let policy = "policy \"age\" {}\nstrategy {\n  full_new when target.thread.first_run == 2\n  full_new otherwise\n}\n";
    let engine = Engine::from_text("age.policy", policy).expect("checks");
    let d = engine
        .decide(&state(&text), Some("codex"))
        .expect("decides");
    assert_eq!(d.decided_by.at, "age.policy:3:3");
}

/// `item.output_chars`: a command's or tool call's output in characters.
#[test]
fn output_chars_selects_items_by_output_size() {
    let policy = "policy \"out\" { extends \"default\" }\nsummary {\n  include user_message into goals\n  include command into commands when item.output_chars > 20\n  include tool_call into tools when item.output_chars < 20\n  exclude assistant_message when item.output_chars == null\n}\n";
    let engine = Engine::from_text("out.policy", policy).expect("checks");
    let st = state(STATE);
    let out = engine.run(&st, Some("cursor")).expect("renders");
    let doc = out.rendered.expect("a document").document;
    // The build's output is 29 characters, the read's 12.
    assert!(doc.contains("cargo build"), "{doc}");
    assert!(doc.contains("src/main.rs"), "{doc}");
    assert!(!doc.contains("Done."), "{doc}");
    let policy = policy.replace("item.output_chars > 20", "item.output_chars > 29");
    let engine = Engine::from_text("out.policy", &policy).expect("checks");
    let doc = engine
        .run(&st, Some("cursor"))
        .unwrap()
        .rendered
        .unwrap()
        .document;
    assert!(!doc.contains("cargo build"), "{doc}");
}

#[test]
fn new_facts_are_checked_like_the_others() {
    let err = common::policy_text(
        "p.policy",
        "policy \"p\" { extends \"default\" }\nstale big when item.output_chars > 10\n",
    )
    .unwrap_err();
    assert!(
        err.diagnostics[0]
            .message
            .contains("`item.output_chars` cannot be read in a staleness signal"),
        "{}",
        err.diagnostics[0].message
    );
    let err = common::policy_text(
        "p.policy",
        "policy \"p\" { extends \"default\" }\nstale old when target.thread.first_runs > 10\n",
    )
    .unwrap_err();
    assert_eq!(
        err.diagnostics[0].help.as_deref(),
        Some("did you mean `target.thread.first_run`?")
    );
}
