//! Malformed input to `baton serve`: every class gets the standard JSON-RPC error code and a
//! message that says what was wrong, and the server keeps serving afterwards.

use crate::serve_support;

use rstest::rstest;
use serde_json::{json, Value};
use serve_support::*;

/// Send `raw` bytes as they are, read one error response, then check a valid request is still
/// answered.
fn after_raw(framing_lines: bool, raw: &[u8], extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--max-message", "4096"];
    if framing_lines {
        args.extend(["--framing", "lines"]);
    }
    args.extend(extra);
    let mut s = stdio(dir.path(), &args);
    s.client.send_raw(raw);
    let err = s.client.response();
    assert_eq!(
        s.client.result("health", json!({}))["status"],
        "ok",
        "still serving"
    );
    assert_eq!(s.stop(), 0);
    err
}

fn lsp(body: &str) -> Vec<u8> {
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

#[rstest]
#[case::invalid_json(lsp("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": "), -32700, "invalid JSON at line 1 column 38: EOF while parsing a value")]
#[case::not_utf8_json(lsp("\u{00ff}nope"), -32700, "invalid JSON at line 1 column 1")]
#[case::non_numeric_length(b"Content-Length: ten\r\n\r\n".to_vec(), -32700, "bad header: Content-Length `ten` is not a byte count")]
#[case::missing_length(b"Content-Type: application/json\r\n\r\n{\"x\":1}".to_vec(), -32700, "bad header: no Content-Length header")]
#[case::not_a_header(b"hello there\r\n\r\n".to_vec(), -32700, "bad header: `hello there` is not `Name: value`")]
#[case::oversized(lsp(&format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"health\",\"params\":{{\"pad\":\"{}\"}}}}", "x".repeat(5000))), -32600, "message of 5062 bytes exceeds the limit of 4096 bytes")]
#[case::not_an_object(lsp("[1, 2]"), -32600, "batch requests (arrays) are not supported")]
#[case::scalar(lsp("42"), -32600, "a JSON-RPC message must be a JSON object")]
#[case::wrong_version(lsp("{\"jsonrpc\": \"1.0\", \"id\": 3, \"method\": \"health\"}"), -32600, "`jsonrpc` must be \"2.0\", not \"1.0\"")]
#[case::no_method(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3}"), -32600, "missing `method`")]
#[case::bad_id(lsp("{\"jsonrpc\": \"2.0\", \"id\": {\"a\": 1}, \"method\": \"health\"}"), -32600, "`id` must be an integer or a string")]
#[case::unknown_method(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explian\"}"), -32601, "unknown method `explian`; methods: explain, render")]
#[case::scalar_params(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": 7}"), -32602, "`params` must be an object or an array, not 7")]
#[case::unknown_param(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": {\"sate\": {}}}"), -32602, "invalid params for `explain`: sate: unknown field `sate`, expected one of")]
#[case::wrong_param_type(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": {\"target\": 5}}"), -32602, "invalid params for `explain`: target: invalid type: integer `5`, expected a string")]
#[case::no_state(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"render\", \"params\": {}}"), -32602, "give the thread's state as `state`")]
#[case::bad_state(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": {\"state\": {\"version\": 1, \"thread\": {\"id\": \"t\"}, \"request\": {\"provider\": \"codex\"}, \"runz\": []}}}"), -32002, "params.state")]
#[case::bad_state_text(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": {\"state_text\": \"thread: [1]\\n\"}}"), -32002, "params.state_text:1:9: error: thread: invalid type: sequence, expected struct Thread")]
#[case::unknown_target(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"explain\", \"params\": {\"state\": {\"version\": 1, \"thread\": {\"id\": \"t\"}, \"request\": {\"provider\": \"codex\"}}, \"target\": \"gemini\"}}"), -32602, "unknown provider \"gemini\"")]
#[case::params_for_health(lsp("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"health\", \"params\": {\"verbose\": true}}"), -32602, "invalid params for `health`: verbose: unknown field `verbose`")]
fn content_length_errors(#[case] raw: Vec<u8>, #[case] code: i64, #[case] message: &str) {
    let err = after_raw(false, &raw, &[]);
    assert_eq!(err["error"]["code"], code, "{err}");
    let got = err["error"]["message"].as_str().unwrap();
    assert!(got.contains(message), "message {got:?} lacks {message:?}");
}

#[rstest]
#[case::invalid_json(b"{not json}\n".to_vec(), -32700, "invalid JSON at line 1 column 2")]
#[case::oversized(format!("{{\"pad\":\"{}\"}}\n", "y".repeat(5000)).into_bytes(), -32600, "message line exceeds the limit of 4096 bytes")]
#[case::unknown_method(b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"nope\"}\n".to_vec(), -32601, "unknown method `nope`")]
fn line_framing_errors(#[case] raw: Vec<u8>, #[case] code: i64, #[case] message: &str) {
    let err = after_raw(true, &raw, &[]);
    assert_eq!(err["error"]["code"], code, "{err}");
    let got = err["error"]["message"].as_str().unwrap();
    assert!(got.contains(message), "message {got:?} lacks {message:?}");
}

#[test]
fn error_responses_keep_the_request_id_when_it_is_known() {
    let err = after_raw(
        false,
        &lsp("{\"jsonrpc\": \"2.0\", \"id\": \"req-7\", \"method\": \"nope\"}"),
        &[],
    );
    assert_eq!(err["id"], "req-7");
    let err = after_raw(false, &lsp("{\"id\": 1, "), &[]);
    assert_eq!(err["id"], Value::Null);
}

#[test]
fn state_errors_carry_the_problems_as_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let mut st = example_state("seed-switch.yaml");
    st["runs"][2]["provider_thread"] = json!("X9");
    let r = s.client.call("explain", json!({"state": st}));
    assert_eq!(r["error"]["code"], -32002);
    let problems = r["error"]["data"]["problems"].as_array().unwrap();
    assert_eq!(problems[0]["at"], "runs[2].provider_thread", "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("params.state: error: runs[2].provider_thread"));
    // An object has no text the client wrote: the path locates the problem, no line/column.
    assert_eq!(problems[0]["line"], Value::Null, "{r}");
    assert_eq!(problems[0]["column"], Value::Null, "{r}");
    assert_eq!(s.stop(), 0);
}

/// A `stateText` that parses but fails validation: each problem carries the line and column
/// of the node its path names, in the message and in `data.problems`.
#[test]
fn semantic_state_errors_in_state_text_carry_positions() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let text = "version: 1\nthread: {id: t}\nprovider_threads:\n  - {id: C1, provider: codex}\nruns:\n  - ordinal: 2\n    provider: codex\n    provider_thread: C1\nrequest: {provider: codex}\n";
    let r = s.client.call("explain", json!({"stateText": text}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert_eq!(
        r["error"]["message"],
        "params.state_text:6:14: error: runs[0].ordinal: expected ordinal 1, found 2: ordinals run 1, 2, 3, ... with no gaps, in order"
    );
    assert_eq!(
        r["error"]["data"]["problems"],
        json!([{"at": "runs[0].ordinal", "line": 6, "column": 14,
                "message": "expected ordinal 1, found 2: ordinals run 1, 2, 3, ... with no gaps, in order"}])
    );
    assert_eq!(s.stop(), 0);
}

/// Reading methods never create the database: a stored thread asked of a service whose
/// `--db` names no file is a store error naming the path, and no file appears.
#[test]
fn reading_methods_never_create_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typo.db");
    let db_arg = db.to_str().unwrap();
    let mut s = stdio(dir.path(), &["--db", db_arg]);
    for (method, params) in [
        ("explain", json!({"thread": "th_1"})),
        ("render", json!({"thread": "th_1"})),
        ("thread/export", json!({"thread": "th_1"})),
    ] {
        let r = s.client.call(method, params);
        assert_eq!(r["error"]["code"], -32004, "{method}: {r}");
        assert_eq!(
            r["error"]["message"],
            format!("{db_arg}: error: no baton database here (reading methods never create one; the first method that writes, such as `thread/import`, does); check the service's --db"),
            "{method}"
        );
    }
    assert_eq!(s.stop(), 0);
    assert!(!db.exists(), "a reading method created {}", db.display());
}

#[test]
fn notifications_never_get_a_response_even_when_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    s.client.notify("$/setTrace", json!({"value": "off"}));
    s.client.notify("no/such/notification", json!({}));
    s.client.notify("$/cancelRequest", json!({"id": 999}));
    // The next message on the wire is the answer to this request, not to the notifications.
    let id = s.client.start("health", json!({}));
    assert_eq!(s.client.response()["id"], id);
    assert_eq!(s.stop(), 0);
}
