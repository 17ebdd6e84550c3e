//! An inline `explain`/`render` with a `state_text` reads its threads and, when none is
//! busy, runs where they were read (`session::KeysHop`): on the connection's worker when the
//! text is small (at most `COMPUTE_WHERE_READ_MAX`, 16 KiB), in one hop to the blocking pool
//! when it is larger. The per-thread order and cancellation hold on both paths, as for any
//! request: every test runs with a small and a large `state_text`.

use crate::serve_support;

use rstest::rstest;
use serde_json::{json, Value};
use serve_support::*;

/// Which path a `state_text` takes: small texts are answered on the worker, large ones hop.
#[derive(Debug, Clone, Copy)]
enum Size {
    Small,
    Large,
}

/// The YAML text of `state` renamed to thread `id`, padded past the 16 KiB worker limit
/// when `size` is `Large` (more runs of the same shape).
fn text(id: &str, size: Size) -> String {
    let mut state: Value = match size {
        Size::Small => example_state("seed-run6.yaml"),
        Size::Large => long_state(id, 80),
    };
    state["thread"]["id"] = json!(id);
    let text = serde_yaml::to_string(&state).unwrap();
    match size {
        Size::Small => assert!(text.len() <= 16 * 1024, "{} bytes", text.len()),
        Size::Large => assert!(text.len() > 16 * 1024, "{} bytes", text.len()),
    }
    text
}

/// `state_text` requests for one thread, pipelined behind a slow request of that thread,
/// are answered in arrival order; requests of other threads do not wait for them.
#[rstest]
fn state_text_requests_for_one_thread_answer_in_arrival_order(
    #[values(Size::Small, Size::Large)] size: Size,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_pool", 1500);
    let text = text("th_pool", size);
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
#[rstest]
fn a_queued_state_text_request_is_cancelled_once(#[values(Size::Small, Size::Large)] size: Size) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_pool_cancel", 3000);
    let text = text("th_pool_cancel", size);
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
#[rstest]
fn a_running_state_text_request_gets_one_answer_when_cancelled(
    #[values(Size::Small, Size::Large)] size: Size,
) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let text = text("th_pool_running", size);
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

/// A small inline `render` under a policy with an external summarizer runs a command, which
/// may take seconds: it goes to the blocking pool, never to a runtime worker. With as many
/// such renders held in their summarizer as the runtime has workers, the server still
/// answers `health` (with the renders on the workers, it could not read it).
#[test]
fn a_render_that_runs_a_summarizer_never_holds_a_worker() {
    let dir = tempfile::tempdir().unwrap();
    let gated = GatedPolicy::new(dir.path());
    let mut s = stdio(
        dir.path(),
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let held: Vec<i64> = (0..workers)
        .map(|n| {
            let mut state = example_state("seed-switch.yaml");
            state["thread"]["id"] = json!(format!("th_held_{n}"));
            let text = serde_yaml::to_string(&state).unwrap();
            assert!(text.len() <= 16 * 1024);
            s.client.start("render", json!({"state_text": text}))
        })
        .collect();
    gated.wait_started_n(held.len());
    // Every render waits in its summarizer: the server still reads and answers. (Should it
    // not, a watchdog ends the server after HANG_GUARD, so the test fails instead of hanging:
    // a hang guard, not a budget; the answer ends the watchdog's wait at once.)
    let (answered, watched) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let pid = s.child.id();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                watched.recv_timeout(HANG_GUARD)
            {
                let _ = std::process::Command::new("kill")
                    .arg(pid.to_string())
                    .status();
            }
        })
    };
    let health = s.client.call("health", json!({}));
    answered.send(()).unwrap();
    watchdog.join().unwrap();
    assert_eq!(health["result"]["status"], "ok", "{health}");
    let go = gated.release_n(held.len());
    for id in held {
        let r = s.client.response_to(id);
        assert!(
            r["result"]["handoff"]["document"]
                .as_str()
                .is_some_and(|d| d.contains("Written when let go.")),
            "{r}"
        );
    }
    drop(go);
    assert_eq!(s.stop(), 0);
}
