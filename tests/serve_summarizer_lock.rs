//! `baton serve` runs the external summarizer of a dispatch, a regeneration and a merge-back
//! before it takes its writer lock: while one thread's summarizer runs, another thread's write
//! is answered, on both backends (on PostgreSQL the two threads' locks are separate rows). The summarizer waits on a
//! FIFO the test controls, so the order is set by events, not timing.

use crate::serve_support;

use crate::common;
use crate::common::backend::{Backend, TestDb};
use baton::state::RunStatus;
use baton::store::DispatchRequest;
use rstest_reuse::apply;
use serde_json::json;

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &std::sync::Arc<baton::Policy>, docs: &std::path::Path) -> baton::Engine {
    common::engine_of(p, Some(docs.to_path_buf()))
}
use serve_support::*;

#[apply(crate::common::backend::backends)]
fn a_write_on_another_thread_is_answered_while_a_dispatch_summarizes(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let gated = GatedPolicy::new(db.path());
    {
        // Threads A and B (the seed example twice); B has a running run to complete.
        let mut store = db.open();
        let seed = baton::state::load_file(std::path::Path::new(&format!(
            "{}/examples/seed-switch.yaml",
            env!("CARGO_MANIFEST_DIR")
        )))
        .unwrap();
        for id in ["A", "B"] {
            let mut s = seed.clone();
            s.thread.id = id.to_string();
            store.import(&s).unwrap();
        }
        let req = DispatchRequest {
            thread: "B".into(),
            target: "codex".into(),
            ..Default::default()
        };
        let engine = engine(&common::policy("default").unwrap(), &db.doc_root());
        let d = store.dispatch(&engine, &req).unwrap();
        assert_eq!(d.run, 9);
    }
    let mut s = stdio_on(
        &db,
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let slow = s
        .client
        .start("dispatch", json!({"thread": "A", "target": "codex"}));
    gated.wait_started();
    // A's summarizer is running and waits: B's completion goes through meanwhile.
    let done = s
        .client
        .result("completeRun", json!({"thread": "B", "run": 9, "items": []}));
    assert_eq!(done["status"], "completed");
    gated.release();
    let r = s.client.response_to(slow);
    assert_eq!(r["result"]["recorded"]["run"], 9, "{r}");
    s.client.result("shutdown", json!({}));
    s.client.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

/// Threads A and B (the seed example twice), each with a running run 9 dispatched to codex
/// under `default`; with `fork`, also a fork `F` of A at run 8 with a completed run of its own.
/// Returns A's handoff.
fn two_running_threads(db: &TestDb, fork: bool) -> String {
    let mut store = db.open();
    let seed = baton::state::load_file(std::path::Path::new(&format!(
        "{}/examples/seed-switch.yaml",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap();
    for id in ["A", "B"] {
        let mut s = seed.clone();
        s.thread.id = id.to_string();
        store.import(&s).unwrap();
    }
    let default = engine(&common::policy("default").unwrap(), &db.doc_root());
    let req = |thread: &str, target: &str| DispatchRequest {
        thread: thread.into(),
        target: target.into(),
        ..Default::default()
    };
    if fork {
        store.fork("A", 8, Some("F")).unwrap();
        let d = store.dispatch(&default, &req("F", "claude")).unwrap();
        store
            .complete_run("F", d.run, Vec::new(), RunStatus::Completed)
            .unwrap();
    }
    let b = store.dispatch(&default, &req("B", "codex")).unwrap();
    assert_eq!(b.run, 9);
    let a = store.dispatch(&default, &req("A", "codex")).unwrap();
    assert_eq!(a.run, 9);
    a.handoff.expect("a handoff to codex").id
}

#[apply(crate::common::backend::backends)]
fn a_write_on_another_thread_is_answered_while_a_regeneration_summarizes(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let gated = GatedPolicy::new(db.path());
    let old = two_running_threads(&db, false);
    let mut s = stdio_on(
        &db,
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let slow = s
        .client
        .start("regenerate", json!({"thread": "A", "handoff": old}));
    gated.wait_started();
    // A's summarizer is running and waits: B's completion goes through meanwhile.
    let done = s
        .client
        .result("completeRun", json!({"thread": "B", "run": 9, "items": []}));
    assert_eq!(done["status"], "completed");
    gated.release();
    let r = s.client.response_to(slow);
    assert_eq!(r["result"]["handoff"]["supersedes"], json!(old), "{r}");
    s.client.result("shutdown", json!({}));
    s.client.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

#[apply(crate::common::backend::backends)]
fn a_write_on_another_thread_is_answered_while_a_merge_back_summarizes(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let gated = GatedPolicy::new(db.path());
    two_running_threads(&db, true);
    let mut s = stdio_on(
        &db,
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let slow = s.client.start("mergeBack", json!({"thread": "F"}));
    gated.wait_started();
    // F's summarizer is running and waits: B's completion goes through meanwhile.
    let done = s
        .client
        .result("completeRun", json!({"thread": "B", "run": 9, "items": []}));
    assert_eq!(done["status"], "completed");
    gated.release();
    let r = s.client.response_to(slow);
    assert_eq!(r["result"]["handoff"]["covered_thread"], "F", "{r}");
    assert_eq!(r["result"]["recorded"]["run"], 10, "{r}");
    s.client.result("shutdown", json!({}));
    s.client.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}
