//! Concurrency in `baton serve`: per-thread ordering, cancellation, graceful shutdown, and
//! policy hot reload (including the race with requests in flight and a rejected set).

use crate::serve_support;

use crate::common::backend::{Backend, TestDb};
use rstest::rstest;
use serde_json::{json, Value};
use serve_support::*;
use std::collections::HashSet;

/// Requests for one thread are answered in arrival order, even when an early one is much
/// slower than the ones queued behind it.
#[test]
fn requests_for_one_thread_run_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_order", 1500);
    let mut light = example_state("seed-run6.yaml");
    light["thread"]["id"] = json!("th_order");
    let mut ids = Vec::new();
    for i in 0..12 {
        let st = if i % 3 == 0 { &heavy } else { &light };
        ids.push(s.client.start("explain", json!({"state": st})));
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

/// Every form that names a thread queues the request on that thread: a stored `thread`, an
/// inline `state` object, a `stateText` in YAML or in JSON, a fork's `child`. A quick request
/// sent behind a slow render of the same thread is answered after it, while a request for
/// another thread is not held up.
#[rstest]
#[case::state_object("state")]
#[case::state_text_yaml("yaml")]
#[case::state_text_json("json")]
fn every_form_naming_a_thread_queues_on_it(#[case] form: &str) {
    queues_on_its_thread(&TestDb::new(Backend::Sqlite), form);
}

/// The forms that name a stored thread (`thread`, a fork's `child`) queue on it on either
/// backend: the queue is the service's, whatever holds the thread.
#[rstest_reuse::apply(crate::common::backend::backends)]
fn every_form_naming_a_stored_thread_queues_on_it(#[case] backend: Backend) {
    for form in ["thread", "child"] {
        queues_on_its_thread(&TestDb::new(backend), form);
    }
}

/// [`every_form_naming_a_thread_queues_on_it`] for one `form`, on `db`.
fn queues_on_its_thread(db: &TestDb, form: &str) {
    // The render is held in its summarizer until the test lets it go (it used to sleep one
    // second, and a loaded machine took longer than that to answer the other thread).
    let gated = GatedPolicy::new(db.path());
    let mut s = stdio_on(
        db,
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let mut st = example_state("seed-run6.yaml");
    st["thread"]["id"] = json!("th_q");
    let mut parent = st.clone();
    parent["thread"]["id"] = json!("th_parent");
    s.client.result("thread/import", json!({"state": st}));
    s.client.result("thread/import", json!({"state": parent}));
    let slow = s.client.start("render", json!({"state": st}));
    gated.wait_started();
    let (method, params) = match form {
        "thread" => ("explain", json!({"thread": "th_q"})),
        "state" => ("explain", json!({"state": st})),
        "yaml" => (
            "explain",
            json!({"stateText": serde_yaml::to_string(&st).unwrap()}),
        ),
        "json" => ("explain", json!({"stateText": st.to_string()})),
        _ => (
            "fork",
            json!({"thread": "th_parent", "at": 1, "child": "th_q"}),
        ),
    };
    let queued = s.client.start(method, params);
    let mut other_st = st.clone();
    other_st["thread"]["id"] = json!("th_other");
    let other = s.client.start("explain", json!({"state": other_st}));
    // While the render is held, only th_other can be answered.
    let mut order = vec![s.client.response()["id"].as_i64().unwrap()];
    gated.release();
    order.extend((0..2).map(|_| s.client.response()["id"].as_i64().unwrap()));
    assert_eq!(
        order,
        vec![other, slow, queued],
        "the {form} request waits for the slow render of th_q; th_other does not"
    );
    assert_eq!(
        s.client.result("health", json!({}))["queued_threads"],
        0,
        "no queue entry is left behind"
    );
    assert_eq!(s.stop(), 0);
}

/// Each policy generation renders with its own templates, compiled once when it was loaded:
/// a render that started before a reload finishes with the old templates, the next one uses
/// the new ones, and nothing is written to the temp directory for it.
#[test]
fn each_generation_renders_with_its_own_compiled_templates() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let tdir = dir.path().join("templates");
    std::fs::create_dir_all(&tdir).unwrap();
    let inline = std::fs::read_to_string(format!("{ROOT}/templates/inline.md.j2")).unwrap();
    std::fs::write(tdir.join("inline.md.j2"), format!("FIRST {inline}")).unwrap();
    let gated = GatedPolicy::new(dir.path());
    let policy = gated.policy.clone();
    let tmp_entries = || std::fs::read_dir(&tmp).unwrap().count();
    let mut cmd = serve_cmd(
        dir.path(),
        &[
            "--stdio",
            "--policy",
            policy.to_str().unwrap(),
            "--templates",
            tdir.to_str().unwrap(),
            "--no-watch",
        ],
    );
    cmd.env("TMPDIR", &tmp);
    let mut s = spawn_stdio(cmd, false);
    assert_eq!(s.client.result("health", json!({}))["status"], "ok");
    assert_eq!(tmp_entries(), 0, "no template snapshot on disk");
    // A slow render holds generation 1 while generation 2 is swapped in.
    let mut st = example_state("seed-run6.yaml");
    st["thread"]["id"] = json!("th_snap");
    let slow = s.client.start("render", json!({"state": st.clone()}));
    // The render has taken generation 1 once its summary command runs; it waits there.
    gated.wait_started();
    std::fs::write(tdir.join("inline.md.j2"), format!("SECOND {inline}")).unwrap();
    let reload = s.client.start("policy/reload", json!({}));
    let r = s.client.response_to(reload);
    assert_eq!(r["result"]["changed"], true, "{r}");
    gated.release();
    let r = s.client.response_to(slow);
    assert!(
        r["result"]["handoff"]["inline"]
            .as_str()
            .unwrap()
            .starts_with("FIRST "),
        "{r}"
    );
    // The next render runs the gated summary command too: let it through when it starts.
    let r = std::thread::scope(|scope| {
        scope.spawn(|| {
            gated.wait_started();
            gated.release();
        });
        s.client.result("render", json!({"state": st}))
    });
    assert!(
        r["handoff"]["inline"]
            .as_str()
            .unwrap()
            .starts_with("SECOND "),
        "{r}"
    );
    assert_eq!(tmp_entries(), 0, "no template snapshot on disk");
    assert_eq!(s.stop(), 0);
}

/// A request waiting behind a slow one on the same thread can be cancelled; the slow one
/// still completes and the server keeps serving.
#[test]
fn cancel_request_answers_minus_32800() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let heavy = long_state("th_cancel", 3000);
    let mut light = example_state("seed-run6.yaml");
    light["thread"]["id"] = json!("th_cancel");
    // One write: the heavy request, the queued one, and its cancellation.
    let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"state": heavy}});
    let queued =
        json!({"jsonrpc": "2.0", "id": 2, "method": "explain", "params": {"state": light}});
    let cancel = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}});
    let after = json!({"jsonrpc": "2.0", "id": 3, "method": "explain", "params": {"state": light}});
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
    // The request behind the cancelled one still waits for the slow one.
    let r1 = s.client.response();
    assert_eq!(r1["id"], 1);
    assert_eq!(r1["result"]["decision"]["strategy"], "full_new");
    let r3 = s.client.response();
    assert_eq!(r3["id"], 3);
    assert!(r3.get("result").is_some(), "{r3}");
    assert_eq!(s.client.result("health", json!({}))["status"], "ok");
    assert_eq!(s.stop(), 0);
}

/// `shutdown` answers only after the requests in flight have finished; later requests are
/// refused; `exit` ends the process with status 0.
#[test]
fn graceful_shutdown_finishes_in_flight_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let work: Vec<i64> = (0..4)
        .map(|i| {
            s.client.start(
                "explain",
                json!({"state": long_state(&format!("th_sd{i}"), 1000)}),
            )
        })
        .collect();
    let sd = s.client.start("shutdown", json!({}));
    let mut order = Vec::new();
    for _ in 0..=work.len() {
        let r = s.client.response();
        assert!(r.get("error").is_none(), "{r}");
        order.push(r["id"].as_i64().unwrap());
    }
    assert_eq!(order.last(), Some(&sd), "shutdown answered last: {order:?}");
    let after = s.client.call("health", json!({}));
    assert_eq!(after["error"]["code"], -32007);
    assert_eq!(
        after["error"]["message"],
        "the server is shutting down; `health` was not run"
    );
    s.client.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

fn sha_of(r: &Value) -> String {
    r["result"]["decision"]["policy"]["sha256"]
        .as_str()
        .unwrap_or_else(|| panic!("not a decision: {r}"))
        .to_string()
}

/// Edit the policy while requests are in flight: every response carries the old or the new
/// sha256, never an error, and the new set is eventually the one serving.
#[test]
fn hot_reload_race_every_response_has_the_old_or_new_sha() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_copy(dir.path());
    let pdir = file.parent().unwrap().to_str().unwrap().to_string();
    let mut s = stdio(dir.path(), &["--policy", &pdir, "--debounce-ms", "20"]);
    let old = s.client.result("policy/status", json!({}))["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = format!("{text}\n# edited while requests are in flight\n");
    let state = example_state("seed-switch.yaml");
    let mut seen = HashSet::new();
    let mut answered = 0;
    // Keep requests in flight (pipelined batches over 7 threads) from before the edit until
    // responses carry the new sha256 (bounded), so that the swap lands among requests in flight.
    // Bounded by the swap: the watcher's `policy/loaded` notification arrives among the
    // responses, and the batches after it carry the new sha256.
    for batch in 0..100_000 {
        if batch == 5 {
            replace(&file, &edited);
        }
        let ids: Vec<i64> = (0..20)
            .map(|i| {
                let mut st = state.clone();
                st["thread"]["id"] = json!(format!("th_{}", i % 7));
                s.client.start("explain", json!({"state": st}))
            })
            .collect();
        for id in ids {
            // `sha_of` fails the test on an error response.
            seen.insert(sha_of(&s.client.response_to(id)));
            answered += 1;
        }
        if batch > 5 && seen.len() > 1 {
            break;
        }
    }
    assert!(seen.contains(&old), "requests before the swap: {seen:?}");
    assert_eq!(
        seen.len(),
        2,
        "the new set answered too, after {answered} responses: {seen:?}"
    );
    let new = s.client.result("policy/status", json!({}))["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(new, old, "the edit was picked up");
    assert!(seen.contains(&new), "{seen:?}");
    let last = s.client.call("explain", json!({"state": state}));
    assert_eq!(sha_of(&last), new);
    assert!(s
        .client
        .notes
        .iter()
        .any(|n| n["method"] == "policy/loaded"));
    assert_eq!(s.stop(), 0);
}

/// A set that does not check is rejected with diagnostics; the last good set keeps serving.
#[test]
fn rejected_reload_keeps_the_last_good_set() {
    let dir = tempfile::tempdir().unwrap();
    let file = policy_copy(dir.path());
    let pdir = file.parent().unwrap().to_str().unwrap().to_string();
    let mut s = stdio(dir.path(), &["--policy", &pdir, "--no-watch"]);
    let good = s.client.result("policy/status", json!({}))["sha256"].clone();
    let text = std::fs::read_to_string(&file).unwrap();
    replace(
        &file,
        &format!("{text}\nstale broken when target.nonsense\n"),
    );
    let r = s.client.call("policy/reload", json!({}));
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("policy set rejected; still serving the last good set: "),
        "{msg}"
    );
    let diags = r["error"]["data"]["diagnostics"].as_array().unwrap();
    assert!(
        diags[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("default.policy"),
        "{r}"
    );
    assert_eq!(r["error"]["data"]["serving"]["sha256"], good);
    let note = s
        .client
        .notes
        .iter()
        .find(|n| n["method"] == "policy/rejected")
        .cloned()
        .or_else(|| {
            let m = s.client.read().unwrap();
            Some(m)
        })
        .unwrap();
    assert_eq!(note["method"], "policy/rejected");
    assert_eq!(
        note["params"]["diagnostics"],
        r["error"]["data"]["diagnostics"]
    );
    let d = s.client.result(
        "explain",
        json!({"state": example_state("seed-switch.yaml")}),
    );
    assert_eq!(d["decision"]["policy"]["sha256"], good);
    let st = s.client.result("policy/status", json!({}));
    assert_eq!(st["sha256"], good);
    assert_eq!(
        st["last_rejection"]["diagnostics"],
        r["error"]["data"]["diagnostics"]
    );
    // Fixing the file and reloading swaps in the new set.
    replace(&file, &format!("{text}\n# fixed\n"));
    let ok = s.client.result("policy/reload", json!({}));
    assert_eq!(ok["changed"], true);
    assert_ne!(ok["policy"]["sha256"], good);
    let again = s.client.result("policy/reload", json!({}));
    assert_eq!(again["changed"], false);
    assert_eq!(s.stop(), 0);
}

/// Templates are part of the set: an edited template is used after reload, a broken one is
/// rejected with its file and line.
#[test]
fn template_directory_reloads_with_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let tdir = dir.path().join("templates");
    std::fs::create_dir_all(&tdir).unwrap();
    let inline = std::fs::read_to_string(format!("{ROOT}/templates/inline.md.j2")).unwrap();
    std::fs::write(tdir.join("inline.md.j2"), format!("FIRST {inline}")).unwrap();
    let t = tdir.to_str().unwrap().to_string();
    let mut s = stdio(dir.path(), &["--templates", &t, "--no-watch"]);
    let st = example_state("seed-run6.yaml");
    let r = s.client.result("render", json!({"state": st}));
    assert!(r["handoff"]["inline"]
        .as_str()
        .unwrap()
        .starts_with("FIRST "));
    std::fs::write(tdir.join("inline.md.j2"), format!("SECOND {inline}")).unwrap();
    assert_eq!(s.client.result("policy/reload", json!({}))["changed"], true);
    let r = s.client.result("render", json!({"state": st}));
    assert!(r["handoff"]["inline"]
        .as_str()
        .unwrap()
        .starts_with("SECOND "));
    std::fs::write(tdir.join("inline.md.j2"), "line one\n{% if %}\n").unwrap();
    let bad = s.client.call("policy/reload", json!({}));
    assert_eq!(bad["error"]["code"], -32001);
    let d = &bad["error"]["data"]["diagnostics"][0];
    assert!(
        d["file"].as_str().unwrap().ends_with("inline.md.j2"),
        "{bad}"
    );
    assert_eq!(d["line"], 2);
    let r = s.client.result("render", json!({"state": st}));
    assert!(r["handoff"]["inline"]
        .as_str()
        .unwrap()
        .starts_with("SECOND "));
    assert_eq!(s.stop(), 0);
}

/// A slow external summarizer on one thread does not hold up requests for other threads.
#[test]
fn a_slow_summarizer_on_one_thread_does_not_block_others() {
    let dir = tempfile::tempdir().unwrap();
    // Held until the quick ones are answered (an event, not a one-second sleep).
    let gated = GatedPolicy::new(dir.path());
    let mut s = stdio(
        dir.path(),
        &["--policy", gated.policy.to_str().unwrap(), "--no-watch"],
    );
    let mut slow_state = example_state("seed-run6.yaml");
    slow_state["thread"]["id"] = json!("th_slow");
    let slow = s.client.start("render", json!({"state": slow_state}));
    gated.wait_started();
    let quick: Vec<i64> = (0..5)
        .map(|i| {
            let mut st = example_state("seed-switch.yaml");
            st["thread"]["id"] = json!(format!("th_quick{i}"));
            s.client.start("explain", json!({"state": st}))
        })
        .collect();
    let mut first: Vec<i64> = (0..quick.len())
        .map(|_| s.client.response()["id"].as_i64().unwrap())
        .collect();
    first.sort();
    assert_eq!(first, quick, "the other threads were answered first");
    gated.release();
    let r = s.client.response();
    assert_eq!(r["id"], slow);
    let prov = &r["result"]["handoff"]["provenance"];
    assert!(prov.to_string().contains("gated.sh"), "{prov}");
    assert_eq!(s.stop(), 0);
}
