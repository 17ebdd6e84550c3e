//! A rollback leaves nothing behind (issue 11): in the store (`baton rollback`) and in a state
//! file, nothing of a rolled-back run (its items, plan, checkpoint) and no compaction summary or
//! handoff that covers one reaches a handoff document.

use crate::common;
use crate::common::backend::{Backend, TestDb};
use rstest_reuse::apply;
use std::path::Path;

const THREAD: &str = "version: 1
thread:
  id: th_rb
  title: Payments
  compact_summary: 'Charges work. LEAK-summary-after-rollback refunds were added in run 5.'
  compact_summary_through: 5
provider_threads:
  - {id: C1, provider: codex}
runs:
  - {ordinal: 1, provider: codex, provider_thread: C1, items: [{kind: user_message, text: 'Add charges. KEEP-charges'}]}
  - {ordinal: 2, provider: codex, provider_thread: C1, items: [{kind: file_change, path: src/charge.rs, change: created}]}
  - {ordinal: 3, provider: codex, provider_thread: C1, items: [{kind: assistant_message, text: 'Charges work.'}]}
  - {ordinal: 4, provider: codex, provider_thread: C1, items: [{kind: user_message, text: 'Add refunds LEAK-run-4'}]}
  - {ordinal: 5, provider: codex, provider_thread: C1, items: [{kind: file_change, path: src/LEAK-refund.rs, change: created}, {kind: plan, steps: [{text: 'LEAK-plan-step'}]}]}
checkpoints:
  - {run: 3, files_changed: 1, diff_summary: 'charge.rs added'}
  - {run: 5, files_changed: 2, diff_summary: 'LEAK-checkpoint refund.rs added'}
request: {provider: codex}
";

/// A database of one backend holding one thread, and `baton` run on it (tests/common).
struct Db(TestDb);

impl std::ops::Deref for Db {
    type Target = TestDb;
    fn deref(&self) -> &TestDb {
        &self.0
    }
}

impl Db {
    fn new(backend: Backend, state: &str) -> Db {
        let d = Db(TestDb::new(backend));
        let file = d.dir.path().join("thread.yaml");
        std::fs::write(&file, state).unwrap();
        d.ok(&["db", "init"]);
        d.ok(&["db", "import", file.to_str().unwrap()]);
        d
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[apply(crate::common::backend::backends)]
fn rollback_drops_a_compaction_summary_covering_rolled_back_runs(#[case] backend: Backend) {
    let db = Db::new(backend, THREAD);
    let r = db.json(&["rollback", "--thread", "th_rb", "--to", "3", "--json"]);
    assert_eq!(r["runs_rolled_back"], serde_json::json!([4, 5]));
    assert_eq!(r["compact_summary_dropped"], true);
    let exported = db.ok(&["db", "export", "--thread", "th_rb"]);
    assert!(!exported.contains("compact_summary"), "{exported}");

    // The next dispatch to another provider hands over runs 1-3 and nothing of runs 4-5.
    let d = db.json(&[
        "dispatch",
        "--thread",
        "th_rb",
        "--target",
        "claude",
        "--message",
        "Try again",
        "--json",
    ]);
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 1, "to": 3}));
    let doc = read(Path::new(d["handoff"]["document_path"].as_str().unwrap()));
    assert!(doc.contains("KEEP-charges"), "{doc}");
    assert!(
        doc.contains("run 3: 1 file changed: charge.rs added"),
        "{doc}"
    );
    assert!(!doc.contains("LEAK-"), "{doc}");
    let prompt = d["handoff"]["inline_prompt"].as_str().unwrap_or("");
    assert!(!prompt.contains("LEAK-"), "{prompt}");
}

#[apply(crate::common::backend::backends)]
fn the_human_output_says_the_summary_was_dropped(#[case] backend: Backend) {
    let db = Db::new(backend, THREAD);
    let out = db.ok(&["rollback", "--thread", "th_rb", "--to", "4"]);
    assert_eq!(
        out,
        "rolled th_rb back to run 4\n  runs rolled back: 5\n  handoffs superseded: none\n  provider threads: C1 (codex) divergent\n  compaction summary: dropped (it covered a rolled-back run)\n  codex thread C1: discard it, do not resume it (its turn for run 5 was undone); the next run on codex (run 6) starts a new thread (full_new; stale: diverged)\n"
    );
}

#[apply(crate::common::backend::backends)]
fn a_summary_before_the_rollback_point_is_kept(#[case] backend: Backend) {
    let db = Db::new(
        backend,
        &THREAD.replace("compact_summary_through: 5", "compact_summary_through: 2"),
    );
    let r = db.json(&["rollback", "--thread", "th_rb", "--to", "3", "--json"]);
    assert_eq!(r["compact_summary_dropped"], false);
    let exported = db.ok(&["db", "export", "--thread", "th_rb"]);
    assert!(
        exported.contains("compact_summary_through: 2"),
        "{exported}"
    );
}

#[apply(crate::common::backend::backends)]
fn a_summary_that_does_not_say_what_it_covers_is_dropped(#[case] backend: Backend) {
    let db = Db::new(
        backend,
        &THREAD.replace("  compact_summary_through: 5\n", ""),
    );
    let r = db.json(&["rollback", "--thread", "th_rb", "--to", "3", "--json"]);
    assert_eq!(r["compact_summary_dropped"], true);
}

// No database: a state file.
/// A state file whose app rolled back without baton: runs 4-5 `rolled_back`, the summary through
/// run 5 still there, and a later live run that took a handoff over runs 3-4. Neither the
/// summary nor that handoff reaches the document, and handoff.json says why.
#[test]
fn in_a_state_file_a_summary_or_handoff_over_a_rolled_back_run_is_omitted_with_the_reason() {
    let state = THREAD
        .replace(
            "items: [{kind: user_message, text: 'Add refunds LEAK-run-4'}]}",
            "status: rolled_back, items: [{kind: user_message, text: 'Add refunds LEAK-run-4'}]}",
        )
        .replace(
            "items: [{kind: file_change, path: src/LEAK-refund.rs, change: created}, {kind: plan, steps: [{text: 'LEAK-plan-step'}]}]}",
            "status: rolled_back, items: [{kind: file_change, path: src/LEAK-refund.rs, change: created}, {kind: plan, steps: [{text: 'LEAK-plan-step'}]}]}",
        )
        .replace("  - {id: C1, provider: codex}\n", "  - {id: C1, provider: codex}\n  - {id: L1, provider: claude}\n")
        .replace(
            "checkpoints:\n",
            "  - {ordinal: 6, provider: claude, provider_thread: L1, handoff: H1, items: [{kind: user_message, text: 'KEEP-run-6'}]}
handoffs:
  - {id: H1, to_provider_thread: L1, covered: {from: 3, to: 4}, strategy: delta_since_target_last_seen, status: ready, summary: 'LEAK-handoff-summary'}
checkpoints:\n",
        )
        .replace("request: {provider: codex}", "request: {provider: cursor}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, state).unwrap();
    let out = dir.path().join("out");
    let o = common::baton(&[
        "render",
        "--state",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = read(&out.join("handoff.md"));
    assert!(doc.contains("KEEP-charges"), "{doc}");
    assert!(!doc.contains("LEAK-"), "{doc}");
    let prov: serde_json::Value = serde_json::from_str(&read(&out.join("handoff.json"))).unwrap();
    let omitted = prov["omitted"].as_array().unwrap();
    for (id, kind) in [("compact_summary", "compact_summary"), ("H1", "handoff")] {
        let want =
            serde_json::json!({"id": id, "kind": kind, "reason": "it covers a rolled-back run"});
        assert!(omitted.contains(&want), "{omitted:?}");
    }
    assert!(doc.contains("KEEP-run-6"), "{doc}");
    // The facts agree: the thread has no usable compaction summary.
    let e = common::baton(&["explain", "--state", file.to_str().unwrap(), "--json"]);
    assert!(e.status.success());
    let s = baton::state::load_file(&file).unwrap();
    // `thread.has_compact_summary` is false although the state has one: it covers a rolled-back
    // run. A probe policy reads the fact.
    let probe = baton::Engine::from_text(
        "probe.policy",
        "policy \"probe\" {}\nstrategy {\n  no_handoff when not thread.has_compact_summary\n  unsupported otherwise\n}\n",
    )
    .unwrap();
    assert!(s.thread.compact_summary.is_some());
    let d = probe.decide(&s, None).unwrap();
    assert_eq!(
        d.strategy,
        baton::decision::Strategy::NoHandoff,
        "{}",
        probe.explain(&d)
    );
}
