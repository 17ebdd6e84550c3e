//! `baton serve` over both transports and both framings: the seed example's decisions, the
//! policy sha256 on every decision, the socket's mode and its stale-file handling.

use crate::serve_support;

use serde_json::json;
use serve_support::*;
use std::os::unix::fs::PermissionsExt;

fn assert_run9(r: &serde_json::Value) {
    let d = &r["decision"];
    assert_eq!(d["strategy"], "delta_existing");
    assert_eq!(
        d["provider_thread"],
        json!({"action": "resume", "id": "C1"})
    );
    assert_eq!(d["covered_runs"], json!({"from": 6, "to": 8}));
    assert_eq!(d["policy"]["sha256"], r["policy"]["sha256"]);
    assert_eq!(r["policy"]["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn stdio_content_length_explains_and_renders_the_seed_example() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let status = s.client.result("policy/status", json!({}));
    let r9 = s.client.result(
        "explain",
        json!({"state": example_state("seed-switch.yaml")}),
    );
    assert_run9(&r9);
    assert_eq!(r9["policy"]["sha256"], status["sha256"]);
    assert!(r9["explanation"]
        .as_str()
        .unwrap()
        .contains("delta_existing"));
    let r6 = s
        .client
        .result("render", json!({"state": example_state("seed-run6.yaml")}));
    assert_eq!(r6["decision"]["strategy"], "full_new");
    assert_eq!(r6["decision"]["provider_thread"]["action"], "create");
    assert_eq!(r6["decision"]["covered_runs"], json!({"from": 1, "to": 5}));
    assert!(r6["handoff"]["document"]
        .as_str()
        .unwrap()
        .contains("OAuth"));
    assert_eq!(
        r6["handoff"]["provenance"]["policy"]["sha256"],
        status["sha256"]
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn stdio_lines_framing_and_state_text() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &["--framing", "lines", "--policy", "t3code"]);
    let text = std::fs::read_to_string(format!("{ROOT}/examples/seed-switch.yaml")).unwrap();
    let r = s
        .client
        .result("explain", json!({"stateText": text, "target": "claude"}));
    assert_eq!(r["decision"]["target"], "claude");
    assert_eq!(r["policy"]["name"], "t3code");
    let h = s.client.result("health", json!({}));
    assert_eq!(h["status"], "ok");
    assert_eq!(h["policy"]["name"], "t3code");
    assert_eq!(s.stop(), 0);
}

#[test]
fn end_of_input_finishes_the_request_in_flight_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let id = s
        .client
        .start("explain", json!({"state": long_state("th_eof", 400)}));
    drop(s.client.w_take());
    let r = s.client.response_to(id);
    assert_eq!(r["result"]["decision"]["strategy"], "full_new");
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

#[test]
fn socket_serves_several_clients_and_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("baton.sock");
    let mut child = serve_cmd(dir.path(), &["--socket", sock.to_str().unwrap()])
        .spawn()
        .unwrap();
    let mut a = Client::connect(&sock, false);
    let mut b = Client::connect(&sock, false);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let ia = a.start(
        "explain",
        json!({"state": example_state("seed-switch.yaml")}),
    );
    let ib = b.start("explain", json!({"state": example_state("seed-run6.yaml")}));
    assert_run9(&a.response_to(ia)["result"]);
    assert_eq!(
        b.response_to(ib)["result"]["decision"]["strategy"],
        "full_new"
    );
    // One client leaving does not stop the server.
    drop(b);
    assert_eq!(a.result("health", json!({}))["status"], "ok");
    a.result("shutdown", json!({}));
    a.notify("exit", json!({}));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!sock.exists(), "the socket file is removed on exit");
}

#[test]
fn socket_replaces_a_stale_socket_but_never_another_file() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("stale.sock");
    // A socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let mut child = serve_cmd(dir.path(), &["--socket", sock.to_str().unwrap()])
        .spawn()
        .unwrap();
    let mut c = Client::connect(&sock, false);
    assert_eq!(c.result("health", json!({}))["status"], "ok");
    c.result("shutdown", json!({}));
    c.notify("exit", json!({}));
    assert_eq!(child.wait().unwrap().code(), Some(0));

    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "precious").unwrap();
    let out = serve_cmd(dir.path(), &["--socket", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "not-a-socket: error: cannot listen: a file that is not a socket is in the way"
        ),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
}

#[test]
fn bad_usage_and_bad_policy_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = serve_cmd(dir.path(), &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("give exactly one of --stdio or --socket PATH"));
    let out = serve_cmd(dir.path(), &["--stdio", "--framing", "xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--framing must be `content-length` or `lines`, not `xml`"));
    let out = serve_cmd(dir.path(), &["--stdio", "--policy", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no policy file, directory or shipped profile named `nope`"));
}

#[test]
fn sigterm_on_a_socket_server_finishes_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("t.sock");
    let mut child = serve_cmd(dir.path(), &["--socket", sock.to_str().unwrap()])
        .spawn()
        .unwrap();
    let mut c = Client::connect(&sock, false);
    assert_eq!(c.result("health", json!({}))["status"], "ok");
    let id = c.start("explain", json!({"state": long_state("th_term", 2000)}));
    // Once this is answered, the explain before it has been read: it is in flight.
    let h = c.start("health", json!({}));
    c.response_to(h);
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let r = c.response_to(id);
    assert_eq!(r["result"]["decision"]["strategy"], "full_new", "{r}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!sock.exists());
}

fn socket_server(
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, std::path::PathBuf) {
    let sock = dir.join("s.sock");
    let args = [
        &["--socket", sock.to_str().unwrap(), "--no-watch", "--no-gc"],
        extra,
    ]
    .concat();
    (serve_cmd(dir, &args).spawn().unwrap(), sock)
}

/// Ask `health` (on `monitor`) until the server counts `n` connections partway through a
/// message: the event that the server has read their first bytes.
fn wait_incomplete(monitor: &mut Client, n: u64) {
    loop {
        let h = monitor.result("health", json!({}));
        if h["connections"]["incomplete"] == json!(n) {
            return;
        }
        // No sleep: each `health` round trip is the pause between two looks.
    }
}

/// Clients that start a message and never finish it cannot hold every connection slot: a new
/// client takes the slot of the idlest of them, which is told why and closed; clients between
/// messages keep theirs.
#[test]
fn a_new_client_takes_the_slot_of_the_idlest_incomplete_connection() {
    let dir = tempfile::tempdir().unwrap();
    // A long message timeout: the stalled clients are evicted, never timed out, however
    // slowly this test runs.
    let (mut child, sock) = socket_server(
        dir.path(),
        &["--max-connections", "3", "--message-timeout", "1h"],
    );
    let mut monitor = Client::connect(&sock, false);
    let h = monitor.result("health", json!({}));
    assert_eq!(h["connections"], json!({"open": 1, "incomplete": 0}));
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "health"}).to_string();
    let head = format!("Content-Length: {}\r\n\r\n{}", body.len(), &body[..5]);
    let mut a = Client::connect(&sock, false);
    a.send_raw(head.as_bytes());
    wait_incomplete(&mut monitor, 1);
    let mut b = Client::connect(&sock, false);
    b.send_raw(head.as_bytes());
    wait_incomplete(&mut monitor, 2);
    // Every slot is taken: the new client is served, in `a`'s place.
    let mut c = Client::connect(&sock, false);
    assert_eq!(c.result("health", json!({}))["status"], "ok");
    let closed = a.read().expect("the reason before the connection closes");
    assert_eq!(closed["error"]["code"], -32600, "{closed}");
    assert_eq!(
        closed["error"]["message"],
        "connection closed: all 3 connection slots were taken (serve --max-connections) and this connection had sent only part of a message, and nothing for the longest; finish each message you start"
    );
    assert!(a.read().is_none(), "then the connection is closed");
    // `b` keeps its slot and is answered once it finishes its message; the monitor, between
    // messages all along, keeps its own.
    let h = monitor.result("health", json!({}));
    assert_eq!(h["connections"], json!({"open": 3, "incomplete": 1}));
    b.send_raw(&body.as_bytes()[5..]);
    assert_eq!(b.response_to(7)["result"]["status"], "ok");
    // Full again, and nobody is partway through a message: a new client is refused.
    let mut d = Client::connect(&sock, false);
    let refused = d.read().expect("a refusal");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too many connections"),
        "{refused}"
    );
    monitor.result("shutdown", json!({}));
    monitor.notify("exit", json!({}));
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// The rest of a message must come within `--message-timeout` of its first byte; a client
/// idle between messages is not timed out.
#[test]
fn a_message_not_finished_in_time_closes_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, sock) = socket_server(dir.path(), &["--message-timeout", "50ms"]);
    let mut idle = Client::connect(&sock, false);
    assert_eq!(idle.result("health", json!({}))["status"], "ok");
    let mut slow = Client::connect(&sock, false);
    slow.send_raw(b"Content-Length: 40\r\n");
    let closed = slow
        .read()
        .expect("the reason before the connection closes");
    assert_eq!(closed["error"]["code"], -32600, "{closed}");
    assert_eq!(
        closed["error"]["message"],
        "connection closed: a message was started but not finished within 50 ms (serve --message-timeout)"
    );
    assert!(slow.read().is_none(), "then the connection is closed");
    // The idle client waited longer than the timeout, between messages: still served.
    assert_eq!(idle.result("health", json!({}))["status"], "ok");
    idle.result("shutdown", json!({}));
    idle.notify("exit", json!({}));
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
