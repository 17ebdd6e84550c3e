//! The silent traps and the syntax errors people make, through `baton check FILE` (the exact
//! text the user sees), `--json`, the library's miette diagnostic and the language server:
//! unknown provider names, off-band delivery to a provider that cannot read files, ladder
//! rungs that resume or fork a thread that may not exist; unclosed openers, operators from
//! other languages, misspelt keywords, sizes with units; type errors that point at the `let`
//! that defined the value. Fixtures: `tests/fixtures/policies/` and its `syntax/`.

use rstest::rstest;
use serde_json::{json, Value};

use crate::common;
use crate::lsp_support;
use common::baton;

const F: &str = "tests/fixtures/policies";

#[rstest]
#[case::provider_typo(
    "provider-typo.policy",
    "provider-typo.policy:4:36: warning: unknown provider \"claud\": no shipped or declared provider has this name
  |
4 |   full_new when target.provider == \"claud\" because \"always fresh on Claude\"
  |                                    ^^^^^^^
  = help: did you mean \"claude\"? (known providers: claude, codex, copilot, cursor; a provider baton does not ship is named in the policy header: `known_providers [\"claud\"]`)"
)]
#[case::provider_typo_in_a_let(
    "provider-typo-let.policy",
    "provider-typo-let.policy:3:34: warning: unknown provider \"copilt\": no shipped or declared provider has this name
  |
3 | let fresh_providers = [\"cursor\", \"copilt\"]
  |                                  ^^^^^^^^
  = help: did you mean \"copilot\"? (known providers: claude, codex, copilot, cursor; a provider baton does not ship is named in the policy header: `known_providers [\"copilt\"]`)"
)]
#[case::offband_to_any_provider(
    "offband-always.policy",
    "offband-always.policy:8:3: warning: this rule can deliver off-band to a provider that cannot read files: its agent would never see the document
  |
8 |   off_band otherwise
  |   ^^^^^^^^^^^^^^^^^^
  = help: add `and target.caps.file_read` to the condition (the default policy's `off_band when target.caps.file_read`), or put `inline when not target.caps.file_read` above it; a state's `providers:` entry can set `file_read: false` for any provider"
)]
#[case::offband_to_a_provider_that_cannot_read(
    "offband-declared.policy",
    "offband-declared.policy:10:3: warning: this rule delivers off-band to `pastebot`, which cannot read files: its agent would never see the document
   |
10 |   off_band when target.provider == \"pastebot\"
   |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  = help: a provider baton does not ship reads files only when a state's `providers:` entry sets `file_read: true`: add `and target.caps.file_read` to the condition, or deliver inline to it"
)]
#[case::resume_otherwise_without_a_guard(
    "resume-unguarded.policy",
    "resume-unguarded.policy:5:3: warning: `delta_existing` may have no thread to resume: nothing guarantees `target.has_thread` here, and the decision fails when the target has no provider thread
  |
5 |   delta_existing otherwise because \"resume and send the delta\"
  |   ^^^^^^^^^^^^^^
  = help: put `full_new when not target.has_thread` above it"
)]
#[case::resume_when_without_a_guard(
    "resume-unguarded-when.policy",
    "resume-unguarded-when.policy:4:3: warning: `full_existing` may have no thread to resume: nothing guarantees `target.has_thread` here, and the decision fails when the target has no provider thread
  |
4 |   full_existing when target.chained_handoffs >= 2
  |   ^^^^^^^^^^^^^
  = help: add `and target.has_thread` to its condition, or put `full_new when not target.has_thread` above it"
)]
#[case::native_fork_without_a_guard(
    "fork-unguarded.policy",
    "fork-unguarded.policy:4:3: warning: `native_fork` may have no thread to fork: nothing guarantees `fork.native_possible` here, and the decision fails when the thread is not a fork of a run with a provider thread
  |
4 |   native_fork when request.kind == \"fork\"
  |   ^^^^^^^^^^^
  = help: add `and fork.native_possible` to its condition"
)]
#[case::summary_that_drops_the_base_includes(
    "summary-drops-base-includes.policy",
    "summary-drops-base-includes.policy:4:1: warning: this `summary` block includes nothing: it replaces the block of `default.policy` whole, dropping its 17 `include` rules, so every handoff says \"No items from these runs are included\"
  |
4 | summary {
  | ^^^^^^^^^
  = help: a block in an extending policy replaces the base's: restate the base's block with your rule added (`baton policy show NAME` prints a shipped one; docs/policy-language.md, \"Adding a rule to the base's summary\")"
)]
#[case::summary_that_includes_nothing(
    "summary-includes-nothing.policy",
    "summary-includes-nothing.policy:5:1: warning: this `summary` block includes nothing, so every handoff says \"No items from these runs are included\"
  |
5 | summary {
  | ^^^^^^^^^
  = help: add `include KIND into SECTION` rules (docs/policy-language.md#summary)"
)]
fn trap_is_a_warning(#[case] fixture: &str, #[case] warning: &str) {
    let path = format!("{F}/{fixture}");
    let out = baton(&["check", &path]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{F}/{warning}\n")
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with(&format!("ok: {path} ")), "{stdout}");
    assert!(stdout.ends_with(", 1 warnings)\n"), "{stdout}");
    assert_eq!(out.status.code(), Some(0));
    let denied = baton(&["check", "--deny-warnings", &path]);
    assert_eq!(denied.status.code(), Some(1));
}

#[test]
fn trap_codes_in_json() {
    for (fixture, code) in [
        ("provider-typo.policy", "baton::check::unknown_provider"),
        (
            "offband-always.policy",
            "baton::check::offband_without_file_read",
        ),
        (
            "offband-declared.policy",
            "baton::check::offband_without_file_read",
        ),
        (
            "resume-unguarded.policy",
            "baton::check::resume_without_thread",
        ),
        ("fork-unguarded.policy", "baton::check::fork_without_source"),
        (
            "summary-drops-base-includes.policy",
            "baton::lint::summary_replaces_base",
        ),
        (
            "summary-includes-nothing.policy",
            "baton::lint::summary_includes_nothing",
        ),
    ] {
        let out = baton(&["check", "--json", &format!("{F}/{fixture}")]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let d = &v[0]["diagnostics"][0];
        assert_eq!(d["code"], code, "{fixture}");
        assert_eq!(d["severity"], "warning", "{fixture}");
        assert!(d["help"].is_string(), "{fixture}");
        assert!(d["range"]["start"].is_u64(), "{fixture}");
    }
}

/// Guarded forms, declared providers and the shipped policies check without a trap warning.
#[rstest]
#[case::declared_provider(
    "policy \"p\" {\n  known_providers [\"pastebot\"]\n}\nstrategy {\n  full_new when target.provider == \"pastebot\" or \"pastebot\" in thread.providers\n  no_handoff otherwise\n}\n"
)]
#[case::provider_list_of_known_names(
    "let fresh = [\"cursor\", \"copilot\"]\nstrategy {\n  full_new when target.provider in fresh or run_provider_is_ok\n  no_handoff otherwise\n}\nlet run_provider_is_ok = false\n"
)]
#[case::resume_guarded_by_its_own_condition(
    "strategy {\n  delta_existing when target.has_thread and target.chained_handoffs < 2\n  full_new otherwise\n}\n"
)]
#[case::resume_guarded_by_a_rule_above(
    "strategy {\n  full_new when not target.has_thread\n  delta_existing otherwise\n}\n"
)]
#[case::resume_guarded_by_a_disjunct_above(
    "strategy {\n  full_new when request.clean_context or not target.has_thread\n  full_existing otherwise\n}\n"
)]
#[case::resume_guarded_by_a_thread_fact(
    "strategy {\n  delta_existing when target.thread.status == \"active\"\n  full_new otherwise\n}\n"
)]
#[case::resume_guarded_through_a_signal(
    "stale gone when not target.has_thread\nstrategy {\n  full_new when stale\n  delta_existing otherwise\n}\n"
)]
#[case::fork_guarded(
    "strategy {\n  native_fork when request.kind == \"fork\" and fork.native_possible\n  full_new otherwise\n}\n"
)]
#[case::offband_guarded_by_its_own_condition(
    "strategy { full_new otherwise }\ndelivery {\n  off_band when target.caps.file_read and summary.full_chars > 500\n  inline otherwise\n}\n"
)]
#[case::offband_guarded_by_a_rule_above(
    "strategy { full_new otherwise }\ndelivery {\n  inline when not target.caps.file_read\n  off_band otherwise\n}\n"
)]
#[case::offband_to_shipped_providers_that_read_files(
    "strategy { full_new otherwise }\ndelivery {\n  off_band when target.provider in [\"claude\", \"codex\"]\n  inline otherwise\n}\n"
)]
fn guarded_rules_check_clean(#[case] policy: &str) {
    let p = common::policy_text("clean.policy", policy).expect("checks");
    let shown: Vec<String> = p.warnings().iter().map(|w| w.to_string()).collect();
    assert!(shown.is_empty(), "{shown:#?}");
}

/// The documented way to add one rule to the base's summary (restate its block with the rule
/// added) checks clean, and its handoffs still include items; the trap's include none.
#[test]
fn restating_the_base_summary_with_one_more_rule_keeps_its_items() {
    let state = baton::State::load("examples/seed-switch.yaml").unwrap();
    let items = |policy: &str| {
        let engine = baton::Engine::new(policy).unwrap();
        let o = engine.run(&state, Some("codex")).unwrap();
        (
            engine.policy().warnings().len(),
            o.summary.map(|s| s.included.len()),
        )
    };
    let (default_warnings, default_items) = items("default");
    assert_eq!(default_warnings, 0);
    let (warnings, kept) = items("docs/examples/summary-one-more-rule.policy");
    assert_eq!(warnings, 0);
    assert_eq!(
        kept, default_items,
        "no tool call in this state is over 2,000 characters"
    );
    assert!(kept.is_some_and(|n| n > 0), "{kept:?}");
    let (warnings, trapped) = items("docs/examples/summary-trap.policy");
    assert_eq!(warnings, 1);
    assert_eq!(trapped, Some(0));
}

#[test]
fn shipped_policies_have_no_trap_warnings() {
    for name in ["default", "t3code", "t3code-legacy", "mcode"] {
        let p = common::policy(name).expect("shipped policy checks");
        assert!(p.warnings().is_empty(), "{name}: {:#?}", p.warnings());
    }
}

#[test]
fn known_providers_add_up_along_extends() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("base.policy"),
        "policy \"base\" {\n  known_providers [\"acme\"]\n}\nstrategy { full_new otherwise }\n",
    )
    .unwrap();
    let child = dir.path().join("child.policy");
    std::fs::write(
        &child,
        "policy \"child\" {\n  extends \"base.policy\"\n  known_providers [\"pastebot\",]\n}\nstrategy {\n  full_new when target.provider in [\"acme\", \"pastebot\", \"acne\"]\n  no_handoff otherwise\n}\n",
    )
    .unwrap();
    let p = common::policy(child.to_str().unwrap()).expect("checks");
    let messages: Vec<&str> = p.warnings().iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        messages,
        ["unknown provider \"acne\": no shipped or declared provider has this name"]
    );
    assert_eq!(
        p.warnings()[0].help.as_deref(),
        Some("did you mean \"acme\"? (known providers: claude, codex, copilot, cursor, acme, pastebot; a provider baton does not ship is named in the policy header: `known_providers [\"acne\"]`)")
    );
}

#[test]
fn a_providers_block_declares_providers_and_their_file_reading() {
    // `gemini` is declared by the `providers` block (no `known_providers` needed), and the
    // block's `file_read` is what the off-band check reads: false warns, true is clean.
    let policy = |file_read: bool| {
        format!(
            "providers {{\n  gemini {{ file_read {file_read} }}\n}}\nstrategy {{\n  full_new when target.provider == \"gemini\" or target.provider == \"gemni\"\n  full_new otherwise\n}}\ndelivery {{\n  off_band when target.provider == \"gemini\"\n  inline otherwise\n}}\n"
        )
    };
    let p = common::policy_text("blind.policy", &policy(false)).expect("checks");
    let messages: Vec<&str> = p.warnings().iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "unknown provider \"gemni\": no shipped or declared provider has this name",
            "this rule delivers off-band to `gemini`, which cannot read files: its agent would never see the document",
        ]
    );
    assert!(p.warnings()[0]
        .help
        .as_deref()
        .unwrap()
        .starts_with("did you mean \"gemini\"?"));
    let p = common::policy_text("reads.policy", &policy(true)).expect("checks");
    let messages: Vec<&str> = p.warnings().iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        messages,
        ["unknown provider \"gemni\": no shipped or declared provider has this name"]
    );
}

#[rstest]
#[case::single_equals(
    "single-equals.policy",
    "single-equals.policy:4:33: error: `=` only defines a `let`: compare with `==`
  |
4 |   full_new when target.provider = \"claude\"
  |                                 ^
  = help: did you mean `==`?"
)]
#[case::double_ampersand(
    "double-ampersand.policy",
    "double-ampersand.policy:4:37: error: `&&` is not an operator in a policy: write `and`
  |
4 |   no_handoff when target.has_thread && target.runs_since_last_seen == 0
  |                                     ^^
  = help: did you mean `and`?"
)]
#[case::double_pipe(
    "double-pipe.policy",
    "double-pipe.policy:4:39: error: `||` is not an operator in a policy: write `or`
  |
4 |   full_new when not target.has_thread || request.clean_context
  |                                       ^^
  = help: did you mean `or`?"
)]
#[case::bang(
    "bang.policy",
    "bang.policy:4:17: error: `!` is not an operator in a policy: write `not`
  |
4 |   full_new when !target.has_thread
  |                 ^^^^^^^^^^^^^^^^^^
  = help: did you mean `not target.has_thread`?"
)]
#[case::misspelt_keyword(
    "offband.policy",
    "offband.policy:8:3: error: unknown keyword `offband`
  |
8 |   offband when target.caps.file_read
  |   ^^^^^^^
  = help: did you mean `off_band`?"
)]
#[case::misspelt_block(
    "block-typo.policy",
    "block-typo.policy:3:1: error: unknown keyword `stratgy`
  |
3 | stratgy {
  | ^^^^^^^
  = help: did you mean `strategy`?"
)]
#[case::misspelt_because(
    "because-typo.policy",
    "because-typo.policy:4:39: error: unknown keyword `becuase`
  |
4 |   full_new when not target.has_thread becuase \"no thread yet\"
  |                                       ^^^^^^^
  = help: did you mean `because`?"
)]
#[case::size_with_a_unit(
    "size-unit.policy",
    "size-unit.policy:8:10: error: `2KB`: numbers take no unit
  |
8 |   budget 2KB
  |          ^^^
  = help: did you mean `2_000`? sizes count characters and timeouts milliseconds, written as plain numbers"
)]
#[case::size_with_a_unit_in_a_condition(
    "size-unit-in-rule.policy",
    "size-unit-in-rule.policy:4:39: error: `32k`: numbers take no unit
  |
4 |   full_new when summary.delta_chars > 32k because \"too much to resend\"
  |                                       ^^^
  = help: did you mean `32_000`? sizes count characters and timeouts milliseconds, written as plain numbers"
)]
#[case::single_quotes(
    "single-quotes.policy",
    "single-quotes.policy:4:36: error: strings use double quotes
  |
4 |   full_new when target.provider == 'cursor'
  |                                    ^^^^^^^^
  = help: did you mean `\"cursor\"`?"
)]
#[case::unclosed_brace(
    "unclosed-brace.policy",
    "unclosed-brace.policy:3:10: error: this `{` opened at 3:10 is never closed
  |
3 | strategy {
  |          ^
  = note: tests/fixtures/policies/syntax/unclosed-brace.policy:7:10: the parser stopped here: expected `otherwise` or `when`, found `{`
  = help: add the `}` that ends this block before line 7, where the next block starts"
)]
#[case::unclosed_paren(
    "unclosed-paren.policy",
    "unclosed-paren.policy:4:17: error: this `(` opened at 4:17 is never closed
  |
4 |   full_new when (not target.has_thread or request.clean_context
  |                 ^
  = note: tests/fixtures/policies/syntax/unclosed-paren.policy:5:3: the parser stopped here: expected `+` or `-`, `and`, `or` or a comparison, found `no_handoff`
  = help: add the `)` that closes it"
)]
#[case::unclosed_list(
    "unclosed-list.policy",
    "unclosed-list.policy:3:29: error: this `[` opened at 3:29 is never closed
  |
3 | eligible when run.status in [\"completed\", \"failed\"
  |                             ^
  = note: tests/fixtures/policies/syntax/unclosed-list.policy:5:1: the parser stopped here: expected `+` or `-`, `and`, `or` or a comparison, found `strategy`
  = help: add the `]` that closes it"
)]
#[case::stray_brace(
    "stray-brace.policy",
    "stray-brace.policy:6:1: error: this `}` closes nothing
  |
6 | }
  | ^
  = help: remove it, or add the opener it was meant to close"
)]
fn syntax_error_says_how_to_fix_it(#[case] fixture: &str, #[case] diagnostic: &str) {
    let path = format!("{F}/syntax/{fixture}");
    let out = baton(&["check", &path]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{F}/syntax/{diagnostic}\n")
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("fail: {path}\n")
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn syntax_codes_in_json() {
    for (fixture, code) in [
        ("single-equals.policy", "baton::parse::foreign_operator"),
        ("double-ampersand.policy", "baton::parse::foreign_operator"),
        ("offband.policy", "baton::parse::unknown_keyword"),
        ("size-unit.policy", "baton::parse::number_unit"),
        ("single-quotes.policy", "baton::parse::single_quotes"),
        ("unclosed-brace.policy", "baton::parse::unclosed"),
        ("stray-brace.policy", "baton::parse::unclosed"),
    ] {
        let out = baton(&["check", "--json", &format!("{F}/syntax/{fixture}")]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v[0]["diagnostics"][0]["code"], code, "{fixture}");
    }
}

#[test]
fn unclosed_brace_labels_where_the_parser_stopped_in_json() {
    let path = format!("{F}/syntax/unclosed-brace.policy");
    let out = baton(&["check", "--json", &path]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v[0]["diagnostics"][0];
    assert_eq!(d["message"], "this `{` opened at 3:10 is never closed");
    assert_eq!((d["line"].as_u64(), d["col"].as_u64()), (Some(3), Some(10)));
    assert_eq!(
        d["labels"],
        json!([{
            "file": path,
            "line": 7,
            "col": 10,
            "range": {"start": 104, "end": 105},
            "message": "the parser stopped here: expected `otherwise` or `when`, found `{`"
        }])
    );
}

#[test]
fn a_quoted_number_is_flagged_at_its_use_and_its_let() {
    let path = format!("{F}/quoted-let.policy");
    let out = baton(&["check", &path]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{path}:6:44: error: `>=` needs ints, but `max_chained` is string
  |
6 |   full_new when target.chained_handoffs >= max_chained
  |                                            ^^^^^^^^^^^
  = note: {path}:3:19: `max_chained` is defined here, as string
  = help: `max_chained` holds the string \"3\": remove the quotes where it is defined: `let max_chained = 3`
"
        )
    );
    assert_eq!(out.status.code(), Some(1));

    let out = baton(&["check", "--json", &path]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v[0]["diagnostics"][0];
    assert_eq!(d["code"], "baton::check::type_mismatch");
    assert_eq!(
        d["labels"],
        json!([{
            "file": path,
            "line": 3,
            "col": 19,
            "range": {"start": 42, "end": 45},
            "message": "`max_chained` is defined here, as string"
        }])
    );
}

#[test]
fn a_quoted_number_literal_gets_the_number() {
    let err = common::policy_text(
        "q.policy",
        "strategy {\n  full_new when target.chained_handoffs >= \"2\"\n  no_handoff otherwise\n}\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "q.policy:2:44: error: `>=` needs ints, but `\"2\"` is string
  |
2 |   full_new when target.chained_handoffs >= \"2\"
  |                                            ^^^
  = help: did you mean `2`? a number in quotes is a string"
    );
}

#[test]
fn the_let_is_a_second_miette_label() {
    use miette::Diagnostic as _;
    let text = std::fs::read_to_string(format!("{F}/quoted-let.policy")).unwrap();
    let err = baton::Engine::from_text("quoted-let.policy", &text).unwrap_err();
    let d = &err.diagnostics()[0];
    let labels: Vec<(String, Option<String>)> = d
        .labels()
        .unwrap()
        .map(|l| {
            (
                text[l.offset()..l.offset() + l.len()].to_string(),
                l.label().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("max_chained".to_string(), None),
            (
                "\"3\"".to_string(),
                Some("`max_chained` is defined here, as string".to_string())
            )
        ]
    );
}

/// In the editor: the fixes are quick fixes, and the `let` is related information.
#[test]
fn the_editor_offers_the_fixes_and_shows_the_let() {
    use lsp_support::Client;
    let mut c = Client::start(10);
    let cases = [
        (
            "untitled:Untitled-1.policy",
            "strategy {\n  full_new when target.provider == \"claud\"\n  no_handoff otherwise\n}\n",
            "\"claude\"",
        ),
        (
            "untitled:Untitled-2.policy",
            "strategy {\n  full_new when target.has_thread && request.clean_context\n  no_handoff otherwise\n}\n",
            "and",
        ),
        (
            "untitled:Untitled-3.policy",
            "strategy {\n  full_new otherwise\n}\ndelivery {\n  offband otherwise\n}\n",
            "off_band",
        ),
    ];
    for (u, text, fix) in cases {
        c.open(u, "baton-policy", text);
        let diags = c.diagnostics(u, 1);
        assert_eq!(diags.len(), 1, "{diags:#?}");
        let r = c.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": u}, "range": diags[0]["range"], "context": {"diagnostics": diags}}),
        );
        assert_eq!(
            r["result"][0]["edit"]["changes"][u][0]["newText"], fix,
            "{u}"
        );
    }
    let u = "untitled:Untitled-4.policy";
    c.open(
        u,
        "baton-policy",
        "let limit = \"3\"\nstrategy {\n  full_new when target.chained_handoffs >= limit\n  no_handoff otherwise\n}\n",
    );
    let diags = c.diagnostics(u, 1);
    let related = &diags[0]["relatedInformation"];
    assert_eq!(related[1]["message"], "`limit` is defined here, as string");
    assert_eq!(
        related[1]["location"]["range"],
        json!({"start": {"line": 0, "character": 12}, "end": {"line": 0, "character": 15}})
    );
    c.stop();
}
