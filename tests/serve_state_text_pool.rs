//! An inline `explain`/`render` with a `state_text` reads its threads and, when none is
//! busy, runs in the same hop to the blocking pool (`session::KeysHop`): the per-thread
//! order and cancellation hold on that path as for any request.

mod serve_support;

use serde_json::json;
use serve_support::*;

/// `state_text` requests for one thread, pipelined behind a slow request of that thread,
/// are answered in arrival order; requests of other threads do not wait for them.
#[test]
fn state_text_requests_for_one_thread_answer_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_pool", 1500);
    let mut light = example_state("seed-run6.yaml");
    light["thread"]["id"] = json!("th_pool");
    let text = serde_yaml::to_string(&light).unwrap();
    let mut ids = Vec::new();
    for i in 0..12 {
        let id = if i % 4 == 0 {
            s.client.start("explain", json!({"state": heavy}))
        } else if i % 2 == 0 {
            s.client.start("render", json!({"state_text": text}))
        } else {
            s.client.start("explain", json!({"state_text": text}))
        };
        ids.push(id);
    }
    let answered: Vec<i64> = (0..ids.len())
        .map(|_| {
            let r = s.client.response();
            assert!(r.get("result").is_some(), "{r}");
            r["id"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(answered, ids, "one thread's responses in request order");
    assert_eq!(s.stop(), 0);
}

/// A `state_text` request queued behind a slow one on its thread can be cancelled: it is
/// answered at once with -32800, once; the slow one and the next one still answer, in order.
#[test]
fn a_queued_state_text_request_is_cancelled_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_pool_cancel", 3000);
    let mut light = example_state("seed-run6.yaml");
    light["thread"]["id"] = json!("th_pool_cancel");
    let text = serde_yaml::to_string(&light).unwrap();
    let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"state": heavy}});
    let queued = json!({"jsonrpc": "2.0", "id": 2, "method": "explain",
        "params": {"state_text": text}});
    let cancel = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}});
    let after = json!({"jsonrpc": "2.0", "id": 3, "method": "render",
        "params": {"state_text": text}});
    let mut bytes = Vec::new();
    for m in [&slow, &queued, &cancel, &after] {
        bytes.extend(s.client.frame(m.to_string().as_bytes()));
    }
    s.client.send_raw(&bytes);
    let r2 = s.client.response();
    assert_eq!(
        r2["id"], 2,
        "the cancelled request is answered at once: {r2}"
    );
    assert_eq!(r2["error"]["code"], -32800, "{r2}");
    assert_eq!(
        r2["error"]["message"],
        "`explain` was cancelled by the client"
    );
    let r1 = s.client.response();
    assert_eq!(r1["id"], 1, "{r1}");
    assert!(r1.get("result").is_some(), "{r1}");
    let r3 = s.client.response();
    assert_eq!(r3["id"], 3, "{r3}");
    assert!(r3.get("result").is_some(), "{r3}");
    // Nothing else was sent for request 2: the next response is the health check's.
    assert_eq!(s.client.result("health", json!({}))["status"], "ok");
    assert_eq!(s.stop(), 0);
}

/// A cancellation racing a `state_text` request that runs at once gets exactly one answer:
/// its result or -32800.
#[test]
fn a_running_state_text_request_gets_one_answer_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"),
    )
    .unwrap();
    for n in 0..20 {
        let id = 100 + n;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "explain",
            "params": {"state_text": text}});
        let cancel = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}});
        let mut bytes = Vec::new();
        for m in [&req, &cancel] {
            bytes.extend(s.client.frame(m.to_string().as_bytes()));
        }
        s.client.send_raw(&bytes);
        let r = s.client.response();
        assert_eq!(r["id"], id, "{r}");
        assert!(
            r.get("result").is_some() || r["error"]["code"] == -32800,
            "{r}"
        );
    }
    assert_eq!(s.client.result("health", json!({}))["status"], "ok");
    assert_eq!(s.stop(), 0);
}
