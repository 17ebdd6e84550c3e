//! `baton serve` over the store: seed 000 driven run by run, per-thread ordering of pipelined
//! lifecycle requests, nothing lost when a client disconnects mid-request, and the store's
//! errors as JSON-RPC errors. Each test that goes through the store runs on both backends
//! (`crate::common::backend`).

use crate::serve_support;

use crate::common::backend::{Backend, TestDb};
use rstest_reuse::apply;
use serde_json::{json, Value};
use serve_support::*;

fn empty_thread(id: &str) -> Value {
    json!({"state": {"version": 1, "thread": {"id": id}, "request": {"provider": "codex"}}})
}

fn items(n: u32) -> Value {
    json!([
        {"kind": "user_message", "text": format!("Step {n}: keep going.")},
        {"kind": "assistant_message", "text": format!("Step {n} done.")},
    ])
}

fn stop_socket(mut child: std::process::Child, c: &mut Client) {
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[apply(crate::common::backend::backends)]
fn seed_000_run_by_run_over_the_socket(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let (child, sock) = socket_on(&db, &[]);
    let mut c = Client::connect(&sock, false);
    let sha = c.result("policy/status", json!({}))["sha256"].clone();
    assert_eq!(
        c.result("thread/import", empty_thread("th_1"))["thread"],
        "th_1"
    );
    let mut decisions = Vec::new();
    for (n, target) in (1..=8).zip([
        "codex", "codex", "codex", "codex", "codex", "claude", "claude", "claude",
    ]) {
        let d = c.result("dispatch", json!({"thread": "th_1", "target": target}));
        assert_eq!(d["recorded"]["run"], n);
        assert_eq!(d["run"], n, "the decision's run is the run started");
        assert_eq!(d["policy"]["sha256"], sha);
        let done = c.result(
            "completeRun",
            json!({"thread": "th_1", "run": n, "items": items(n)}),
        );
        assert_eq!(done["status"], "completed");
        decisions.push(d);
    }
    let codex = decisions[0]["recorded"]["provider_thread"].clone();
    let r6 = &decisions[5];
    assert_eq!(r6["strategy"], "full_new");
    assert_eq!(r6["provider_thread"]["action"], "create");
    assert_eq!(r6["covered_runs"], json!({"from": 1, "to": 5}));
    let d9 = c.result("dispatch", json!({"thread": "th_1", "target": "codex"}));
    assert_eq!(d9["strategy"], "delta_existing");
    assert_eq!(
        d9["provider_thread"],
        json!({"action": "resume", "id": codex})
    );
    assert_eq!(d9["covered_runs"], json!({"from": 6, "to": 8}));
    assert_eq!(d9["handoff"]["id"], d9["handoff_id"]);

    // The child reads its document once.
    let path = d9["pregrant"]["path"].clone();
    let v = c.result(
        "pregrant/check",
        json!({"thread": "th_1", "run": 9, "tool": "Read", "args": {"file_path": path}}),
    );
    assert_eq!(v["allow"], true, "{v}");
    let v = c.result(
        "pregrant/check",
        json!({"thread": "th_1", "run": 9, "tool": "Read", "path": path}),
    );
    assert_eq!(v["allow"], false);

    c.result(
        "completeRun",
        json!({"thread": "th_1", "run": 9, "items": items(9)}),
    );
    // Explain and render read the stored thread.
    let e = c.result("explain", json!({"thread": "th_1", "target": "claude"}));
    assert_eq!(e["decision"]["target"], "claude");
    assert_eq!(e["decision"]["run"], 10);
    let exported = c.result("thread/export", json!({"thread": "th_1"}));
    assert_eq!(exported["state"]["runs"].as_array().unwrap().len(), 9);

    // Fork at run 5, work in the fork, merge back; roll the parent back.
    let f = c.result("fork", json!({"thread": "th_1", "at": 5, "child": "th_1f"}));
    assert_eq!(f["child"], "th_1f");
    let d = c.result("dispatch", json!({"thread": "th_1f", "target": "claude"}));
    c.result(
        "completeRun",
        json!({"thread": "th_1f", "run": d["recorded"]["run"], "items": items(6)}),
    );
    let m = c.result("mergeBack", json!({"thread": "th_1f"}));
    assert_eq!(m["handoff_strategy"], "fork_delta_summary");
    assert_eq!(m["policy"]["sha256"], sha);
    let rb = c.result("rollback", json!({"thread": "th_1", "to": 7}));
    assert_eq!(rb["runs_rolled_back"], json!([8, 9]));
    stop_socket(child, &mut c);
}

/// Pipelined without waiting, dispatch N+1 only succeeds if completeRun N ran before it:
/// one thread's requests run in arrival order.
#[apply(crate::common::backend::backends)]
fn pipelined_lifecycle_requests_for_one_thread_run_in_order(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let mut s = stdio_on(&db, &[]);
    s.client.result("thread/import", empty_thread("th_p"));
    s.client.result("thread/import", empty_thread("th_q"));
    let mut ids = Vec::new();
    for n in 1..=6u32 {
        for t in ["th_p", "th_q"] {
            ids.push(
                s.client
                    .start("dispatch", json!({"thread": t, "target": "codex"})),
            );
            ids.push(s.client.start(
                "completeRun",
                json!({"thread": t, "run": n, "items": items(n)}),
            ));
        }
    }
    for id in ids {
        let r = s.client.response_to(id);
        assert!(r.get("error").is_none(), "{r}");
    }
    for t in ["th_p", "th_q"] {
        let st = s.client.result("thread/export", json!({"thread": t}));
        let runs = st["state"]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 6);
        assert!(runs
            .iter()
            .all(|r| r["status"] == "completed" || r.get("status").is_none()));
    }
    assert_eq!(s.stop(), 0);
}

/// A client that disconnects right after sending loses nothing: every request it sent runs
/// and commits.
#[apply(crate::common::backend::backends)]
fn disconnect_mid_request_loses_nothing_committed(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let (child, sock) = socket_on(&db, &[]);
    let mut a = Client::connect(&sock, false);
    a.result("thread/import", empty_thread("th_d"));
    let mut bytes = Vec::new();
    for n in 1..=10u32 {
        for m in [
            json!({"jsonrpc": "2.0", "id": n * 2, "method": "dispatch", "params": {"thread": "th_d", "target": "codex"}}),
            json!({"jsonrpc": "2.0", "id": n * 2 + 1, "method": "completeRun", "params": {"thread": "th_d", "run": n, "items": items(n)}}),
        ] {
            bytes.extend(a.frame(m.to_string().as_bytes()));
        }
    }
    a.send_raw(&bytes);
    drop(a);
    // The server reads what the first client sent even though it has gone, and runs it all.
    // (Poll until that event: another connection's request is not ordered after frames still
    // unread. Only HANG_GUARD ends the polling, so a loaded machine is never a failure.)
    let mut b = Client::connect(&sock, false);
    let mut runs = Vec::new();
    let polling = std::time::Instant::now();
    while polling.elapsed() < HANG_GUARD {
        let st = b.result("thread/export", json!({"thread": "th_d"}));
        runs = st["state"]["runs"].as_array().cloned().unwrap_or_default();
        let done = runs.len() == 10
            && runs
                .iter()
                .all(|r| r.get("status").is_none() || r["status"] == "completed");
        if done {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert_eq!(runs.len(), 10, "every dispatch committed");
    assert!(
        runs.iter()
            .all(|r| r.get("status").is_none() || r["status"] == "completed"),
        "every run completed: {runs:?}"
    );
    stop_socket(child, &mut b);
}

#[apply(crate::common::backend::backends)]
fn store_errors_are_json_rpc_errors(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let mut s = stdio_on(&db, &[]);
    let r = s
        .client
        .call("dispatch", json!({"thread": "nope", "target": "codex"}));
    assert_eq!(r["error"]["code"], -32003, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no thread \"nope\" in the database"));
    // The error's fields as data, beside the message (a service client runs no `baton`
    // command, so the message names none).
    assert!(
        !r["error"]["message"].as_str().unwrap().contains("baton db"),
        "{r}"
    );
    assert_eq!(
        r["error"]["data"]["code"], "baton::store::thread_not_found",
        "{r}"
    );
    assert_eq!(r["error"]["data"]["thread"], "nope", "{r}");
    assert!(r["error"]["data"]["database"].is_string(), "{r}");
    let r = s.client.call("explain", json!({"thread": "nope"}));
    assert_eq!(r["error"]["code"], -32003);

    s.client.result("thread/import", empty_thread("th_e"));
    s.client
        .result("dispatch", json!({"thread": "th_e", "target": "codex"}));
    let r = s
        .client
        .call("dispatch", json!({"thread": "th_e", "target": "codex"}));
    assert_eq!(r["error"]["code"], -32004, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("run 1 of thread \"th_e\" is still running"));
    let r = s.client.call(
        "completeRun",
        json!({"thread": "th_e", "run": 1, "items": [{"kind": "telepathy"}]}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid params for `completeRun`: items[0]"),
        "{r}"
    );
    let r = s
        .client
        .call("completeRun", json!({"thread": "th_e", "run": 7}));
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let r = s.client.call("thread/import", empty_thread("th_e"));
    assert_eq!(r["error"]["code"], -32004, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already in the database"));
    let r = s.client.call(
        "pregrant/check",
        json!({"thread": "th_e", "run": 1, "tool": "Read"}),
    );
    assert_eq!(r["error"]["code"], -32602);
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("give the requested path as `path`"));
    let r = s.client.call(
        "explain",
        json!({"thread": "th_e", "stateText": "version: 1"}),
    );
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(s.stop(), 0);
}

/// The service's periodic sweep removes the documents of a thread the store does not know,
/// keeps a live handoff's document and anything baton did not create, and tells the client.
#[apply(crate::common::backend::backends)]
fn periodic_sweep_removes_orphaned_documents_and_tells_clients(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let (child, sock) = socket_on(&db, &["--gc-every", "200ms"]);
    let mut c = Client::connect(&sock, false);
    // The orphan is written once the client's connection is served (answered once: the
    // server subscribes a connection to notifications before it reads a request): a sweep that
    // ran before would remove it unseen (on PostgreSQL the database exists at start, so the
    // first sweep does; a connection accepted but not yet subscribed misses the notification).
    c.result("health", json!({}));
    let root = db.doc_root();
    let offband = baton::store::OffbandStore::new(Some(root.clone()));
    let orphan = offband
        .write("ghost", "H1", &[("handoff.md", b"# an old handoff\n")])
        .unwrap();
    let foreign = root.join("ghost").join("notes.txt");
    std::fs::write(&foreign, "not baton's").unwrap();
    c.result(
        "thread/import",
        json!({"state": example_state("seed-run6.yaml")}),
    );
    let d = c.result("dispatch", json!({"thread": "th_1", "target": "claude"}));
    let live = std::path::PathBuf::from(d["handoff"]["document_path"].as_str().unwrap());
    assert!(live.is_file(), "{d}");

    // Wait for a sweep that removed the orphan (the first may run before it is looked at). A
    // sweep may have told while the import or the dispatch was answered (slower on
    // PostgreSQL): the client keeps those notifications, so they are looked at first.
    let removal = |m: &serde_json::Value| {
        m["method"] == "handoffs/collected"
            && !m["params"]["removed"].as_array().unwrap().is_empty()
    };
    let kept = c.notes.iter().find(|m| removal(m)).cloned();
    let note = match kept {
        Some(m) => m,
        None => loop {
            let m = c.read().expect("a notification before end of stream");
            if removal(&m) {
                break m;
            }
        },
    };
    let removed = &note["params"]["removed"][0];
    assert_eq!(
        removed["path"].as_str().unwrap(),
        orphan.parent().unwrap().to_str().unwrap()
    );
    assert!(
        removed["reason"]
            .as_str()
            .unwrap()
            .contains("no longer exists"),
        "{note}"
    );
    assert!(!orphan.exists());
    assert!(live.is_file(), "the live handoff's document is kept");
    assert!(
        foreign.is_file(),
        "a file baton did not create is left alone"
    );
    stop_socket(child, &mut c);
}

#[test]
fn a_zero_sweep_interval_is_bad_usage() {
    let dir = tempfile::tempdir().unwrap();
    let out = serve_cmd(dir.path(), &["--stdio", "--gc-every", "0s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --gc-every must be longer than zero (use --no-gc to turn the sweep off)\n"
    );
}

/// A merge-back writes into the fork's parent: pipelined with a `dispatch` of the parent, it
/// runs first (it queues on the parent too), so that dispatch delivers the merge-back.
#[apply(crate::common::backend::backends)]
fn merge_back_is_ordered_before_a_later_dispatch_of_the_parent(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let (child, sock) = socket_on(&db, &[]);
    let mut c = Client::connect(&sock, false);
    c.result("thread/import", empty_thread("p"));
    c.result("dispatch", json!({"thread": "p", "target": "codex"}));
    c.result(
        "completeRun",
        json!({"thread": "p", "run": 1, "items": items(1)}),
    );
    c.result("fork", json!({"thread": "p", "at": 1, "child": "c"}));
    c.result("dispatch", json!({"thread": "c", "target": "claude"}));
    c.result(
        "completeRun",
        json!({"thread": "c", "run": 2, "items": items(2)}),
    );
    // Both sent before either is answered.
    let m = c.start("mergeBack", json!({"thread": "c"}));
    let d = c.start("dispatch", json!({"thread": "p", "target": "codex"}));
    let merged = c.response_to(m);
    assert_eq!(
        merged["result"]["handoff"]["strategy"], "fork_delta_summary",
        "{merged}"
    );
    let parent = c.response_to(d);
    let handoff = &parent["result"]["handoff"];
    assert_eq!(handoff["id"], merged["result"]["handoff"]["id"], "{parent}");
    assert_eq!(handoff["strategy"], "fork_delta_summary");
    assert_eq!(parent["result"]["recorded"]["run"], 2);
    stop_socket(child, &mut c);
}
