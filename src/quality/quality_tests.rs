//! `baton::quality`: the project's corpus (tests/fixtures/quality), states
//! with megabyte outputs generated here, and proof that each figure catches what it measures.

use baton::policy;
use baton::quality::{self, measure_state, report, DocReport};
use baton::state::{self, Format, State};
use std::path::Path;

const CORPUS: &str = "tests/fixtures/quality";

fn corpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS)
}

fn yaml(text: &str) -> State {
    state::parse_str(text, Format::Yaml, "test.yaml").unwrap()
}

fn default() -> policy::Policy {
    policy::load("default").unwrap()
}

#[test]
fn the_corpus_has_at_least_25_states_and_every_one_is_valid() {
    let files = baton::diff::corpus_files(&corpus()).unwrap();
    assert!(files.len() >= 25, "only {} states", files.len());
    for f in files {
        state::load_file(&f).unwrap();
    }
}

/// The figures that hold whatever the cutting rules: nothing leaks, every changed file and
/// every open problem reaches the document, no state fails. (The whole gate, with the latest
/// user message, instructions, budgets and grapheme cuts, runs in `.ci/run` through the CLI.)
#[test]
fn default_on_the_corpus_leaks_nothing_and_recalls_every_file_and_open_problem() {
    let r = quality::measure_corpus(&default(), &corpus()).unwrap();
    let t = &r.totals;
    let bad: Vec<&DocReport> = r
        .documents
        .iter()
        .filter(|d| {
            d.error.is_some()
                || d.figures.as_ref().is_some_and(|f| {
                    !f.leaks.is_empty()
                        || !f.changed_files.missing.is_empty()
                        || !f.open_problems.missing.is_empty()
                })
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert_eq!(t.errors, 0);
    assert_eq!(t.leaks, 0);
    assert!(t.changed_files.expected >= 100, "{t:?}");
    assert!(t.open_problems.expected >= 40, "{t:?}");
    // Every state is rendered for the four known providers (and the ones it declares).
    assert!(t.documents >= 4 * 28, "{t:?}");
}

/// A megabyte of output in a failing command, a superseded tool call and a diff: the document
/// keeps the failure's tail, leaks nothing superseded and the first turn fits every budget.
#[test]
fn megabyte_outputs_pass_the_gate() {
    let mb = |line: &str| line.repeat(1_048_576 / line.len() + 1);
    let mut s = yaml(
        "version: 1
thread: {id: big, workspace: /w}
runs:
  - ordinal: 1
    provider: codex
    items:
      - {kind: user_message, text: 'Find the flaky test. KEEP-flaky'}
      - {kind: tool_call, tool: Read, input: logs/ci.txt, status: completed, output: ''}
      - {kind: tool_call, tool: Read, input: logs/ci.txt, status: completed, output: 'short'}
      - {kind: command, command: cargo test, exit_code: 101, output: ''}
      - {kind: file_change, path: /w/Cargo.lock, change: modified, diff: ''}
request: {provider: claude, message: 'Keep going.'}
",
    );
    let items = &mut s.runs[0].items;
    if let state::Item::ToolCall { output, .. } = &mut items[1] {
        *output = Some(format!("{}LEAK-superseded-megabyte", mb("old log line\n")));
    }
    if let state::Item::Command { output, .. } = &mut items[3] {
        *output = Some(format!(
            "{}test flaky::timing ... FAILED\ntest result: FAILED. 1 failed",
            mb("test ok ... ok\n")
        ));
    }
    if let state::Item::FileChange { diff, .. } = &mut items[4] {
        *diff = Some(mb("+line\n"));
    }
    let docs = measure_state(&default(), &s, "generated/megabyte.yaml");
    let r = report(&default(), "generated", docs);
    assert!(r.pass, "{:#?}", r.totals);
    assert_eq!(r.totals.open_problems.present, 4);
    assert_eq!(r.totals.changed_files.present, 4);
}

/// Each figure catches what it measures: a policy that hands over protocol noise leaks, one
/// that keeps file names only loses the path, one that drops questions loses an open problem,
/// a strict compact rule of 20 characters cuts the latest message and its instructions, and an
/// inline target with a tiny budget is over it. (A cut inside a grapheme cluster can no longer
/// be produced by any policy; `quality`'s unit tests show the figure catches one.)
#[test]
fn every_figure_catches_its_failure() {
    let bad = policy::load_text(
        "bad.policy",
        r#"policy "bad" {}
strategy { full_new otherwise }
delivery { inline otherwise }
summary {
  text compact 20 strict
  include protocol     into history
  include file_change  into files as line
  include user_message into goals
}
"#,
    )
    .unwrap();
    let s = yaml(
        "version: 1
thread: {id: t, workspace: /w}
providers: {tiny: {file_read: true, max_input_chars_per_turn: 50}}
runs:
  - ordinal: 1
    provider: codex
    items:
      - {kind: user_message, text: 'Please keep KEEP-instruction-1 and the family 👨‍👩‍👧‍👦👨‍👩‍👧‍👦 whole'}
      - {kind: protocol, text: 'LEAK-noise'}
      - {kind: file_change, path: /w/src/deep/index.ts}
      - {kind: question, text: 'Which one?'}
request: {provider: codex, message: 'go'}
",
    );
    let docs = measure_state(&bad, &s, "t.yaml");
    let codex = docs.iter().find(|d| d.target == "codex").unwrap();
    let f = codex.figures.as_ref().unwrap();
    assert_eq!(f.leaks, ["LEAK-noise"]);
    assert_eq!(f.changed_files.missing, ["src/deep/index.ts"]);
    assert_eq!(f.open_problems.missing, ["r1.4"]);
    assert_eq!(f.latest_user_message, Some(false));
    assert_eq!(f.user_instructions.missing, ["KEEP-instruction-1"]);
    let tiny = docs.iter().find(|d| d.target == "tiny").unwrap();
    let f = tiny.figures.as_ref().unwrap();
    assert!(!f.budget.kept, "{:?}", f.budget);
    let r = report(&bad, "t", docs);
    assert!(!r.pass);
    // Every target but tiny (degraded down to its must-keep items) leaks the noise.
    assert_eq!(r.totals.leaks, 4);
}

/// The redaction figures catch their failures: a policy that turns the GitHub rule off shows
/// the planted token (`secrets`, and the report fails), and a rule of its own that matches an
/// ordinary word makes a false redaction (reported, not gated).
#[test]
fn secret_figures_catch_a_shown_secret_and_a_false_redaction() {
    let lax = policy::load_text(
        "lax.policy",
        "policy \"lax\" { extends \"default\" }\nredact {\n  disable github-token\n  disable secret-assignment\n  redact word pattern \"\\bdeploy\\b\"\n}\n",
    )
    .unwrap();
    let s = yaml(
        "version: 1
thread: {id: t}
provider_threads:
  - {id: C1, provider: codex}
runs:
  - ordinal: 1
    provider: codex
    provider_thread: C1
    items:
      - {kind: user_message, text: 'GITHUB_TOKEN=ghp_SNTL0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f'}
      - {kind: assistant_message, text: 'then deploy'}
      - {kind: user_message, text: 'ok'}
request: {provider: claude, message: 'go'}
",
    );
    let docs = measure_state(&lax, &s, "t.yaml");
    let claude = docs.iter().find(|d| d.target == "claude").unwrap();
    let f = claude.figures.as_ref().unwrap();
    assert!(
        f.secrets_leaked
            .contains(&"GITHUB_TOKEN=ghp_SNTL0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f".to_string()),
        "{:?}",
        f.secrets_leaked
    );
    assert_eq!(f.false_redactions, ["word in r1.2"]);
    let r = report(&lax, "t", docs);
    assert!(!r.pass);
    assert!(r.totals.secrets_leaked >= 1);
    // The default profile redacts the token and nothing else.
    let docs = measure_state(&default(), &s, "t.yaml");
    let f = docs[0].figures.as_ref().unwrap();
    assert!(
        f.secrets_leaked.is_empty() && f.false_redactions.is_empty(),
        "{f:?}"
    );
}

/// Issue 24, point 7: `mcode` lists shell commands as Mcode runs them, Bash tool calls with
/// their status, so every failing command and tool call the corpus leaves open reaches its
/// documents; and, as Mcode's agents ask the user and request permission through tool calls
/// that Path D lists with their status, every open question and approval too (`Question
/// (unanswered): ...`, `Approval (awaiting approval): ...`). Its open-problem recall on the
/// corpus went from 15.1% to 49.1% (commands), then to 100% (questions and approvals: the
/// 27 it missed were all of those kinds).
#[test]
fn mcode_recalls_every_open_failing_command_and_tool_call() {
    let r = quality::measure_corpus(&policy::load("mcode").unwrap(), &corpus()).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for d in &r.documents {
        let Some(f) = &d.figures else { continue };
        if f.open_problems.missing.is_empty() {
            continue;
        }
        let s = state::load_file(&corpus().join(&d.state)).unwrap();
        for id in &f.open_problems.missing {
            let kind = s
                .runs
                .iter()
                .flat_map(|run| {
                    run.items
                        .iter()
                        .enumerate()
                        .map(move |(i, it)| (format!("r{}.{}", run.ordinal, i + 1), it))
                })
                .find(|(item_id, it)| item_id == id || it.id() == Some(id.as_str()))
                .map(|(_, it)| it.kind().to_string())
                .unwrap_or_default();
            kinds.insert(kind);
        }
    }
    let expected: std::collections::BTreeSet<String> = ["approval", "question"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert!(kinds.is_subset(&expected), "mcode missed open {kinds:?}");
    let t = &r.totals.open_problems;
    assert!(t.present * 100 >= t.expected * 45, "{t:?}");
    assert!(kinds.is_empty(), "mcode missed open {kinds:?}");
    assert_eq!(t.present, t.expected, "{t:?}");
}
