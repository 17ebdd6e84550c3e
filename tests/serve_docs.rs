//! docs/service.md cannot rot: every ```json request block is sent, in order, to a live
//! service, and the response must have the shape of the ```json response block after it: the
//! same id, an error with the same code, or a result with the same top-level fields.

use crate::serve_support;

use serde_json::Value;
use serve_support::*;
use std::collections::BTreeSet;

fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                open = Some((
                    line.trim_start_matches('`').trim().to_string(),
                    String::new(),
                ))
            }
            (Some(_), true) => out.extend(open.take()),
            (Some((_, body)), false) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, false) => {}
        }
    }
    out
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn every_documented_request_gets_the_documented_response_shape() {
    let text = std::fs::read_to_string(format!("{ROOT}/docs/service.md")).unwrap();
    let blocks = blocks(&text);
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let mut checked = 0;
    let mut pending: Option<Value> = None;
    for (info, body) in &blocks {
        match info.as_str() {
            "json request" => {
                let req: Value = serde_json::from_str(body)
                    .unwrap_or_else(|e| panic!("request block is not JSON: {e}\n{body}"));
                s.client.send(&req);
                pending = Some(req);
            }
            "json response" => {
                let req = pending
                    .take()
                    .expect("a response block follows a request block");
                let doc: Value = serde_json::from_str(body)
                    .unwrap_or_else(|e| panic!("response block is not JSON: {e}\n{body}"));
                let got = s.client.response_to(req["id"].as_i64().unwrap());
                assert_eq!(got["id"], doc["id"]);
                if doc.get("error").is_some() {
                    assert_eq!(got["error"]["code"], doc["error"]["code"], "{got}");
                } else {
                    assert!(
                        got.get("error").is_none(),
                        "{} failed: {got}",
                        req["method"]
                    );
                    assert_eq!(
                        keys(&got["result"]),
                        keys(&doc["result"]),
                        "result fields of {}",
                        req["method"]
                    );
                    if let Some(sha) = got["result"]["decision"]["policy"]["sha256"].as_str() {
                        assert_eq!(Some(sha), got["result"]["policy"]["sha256"].as_str());
                    }
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 6, "only {checked} examples found");
    s.client.notify("exit", serde_json::json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}
