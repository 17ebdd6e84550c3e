//! `baton lsp` on a 2,000-line policy, through the real server loop over an in-memory
//! connection: an edit until its diagnostics arrive (the whole check), and each request.
//! docs/performance.md reports the figures; the target is 50 ms for every answer.

use criterion::{criterion_group, criterion_main, Criterion};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;

/// A policy of about 2,000 lines: lets, staleness signals, a long ladder, a long summary.
fn big_policy() -> String {
    let mut s = String::from("policy \"big\" {\n  description \"A long policy.\"\n}\n\n");
    for i in 0..400 {
        let _ = writeln!(s, "let limit_{i} = {i}");
    }
    s.push('\n');
    for i in 0..400 {
        let _ = writeln!(
            s,
            "stale s_{i} when target.off_provider_runs > limit_{i} because \"over {i}\""
        );
    }
    s.push_str("\nstrategy {\n");
    for i in 0..400 {
        let _ = writeln!(
            s,
            "  full_new when stale.s_{i} and target.runs_since_last_seen > {i}\n           because \"rule {i}\""
        );
    }
    s.push_str("  delta_existing otherwise\n}\n\nsummary {\n  section risks \"Risks\"\n");
    for i in 0..400 {
        let _ = writeln!(s, "  include error into risks when item.chars > {i}");
    }
    s.push_str("}\n");
    s
}

/// The (line, character) of `needle` in `text`, plus `skip` characters.
fn find(text: &str, needle: &str, skip: u32) -> (u32, u32) {
    let at = text.find(needle).unwrap();
    let before = &text[..at];
    let line = u32::try_from(before.matches('\n').count()).unwrap();
    let col = u32::try_from(before.rsplit('\n').next().unwrap().len()).unwrap();
    (line, col + skip)
}

struct Client {
    conn: Connection,
    id: i32,
}

impl Client {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = RequestId::from(self.id);
        let req = Request::new(id.clone(), method.into(), params);
        self.conn.sender.send(Message::Request(req)).unwrap();
        loop {
            match self.conn.receiver.recv().unwrap() {
                Message::Response(r) if r.id == id => return serde_json::to_value(&r).unwrap(),
                _ => {}
            }
        }
    }

    fn notify(&self, method: &str, params: Value) {
        let n = Notification::new(method.into(), params);
        self.conn.sender.send(Message::Notification(n)).unwrap();
    }

    fn diagnostics(&self, version: i32) -> Value {
        loop {
            if let Message::Notification(n) = self.conn.receiver.recv().unwrap() {
                if n.method == "textDocument/publishDiagnostics" && n.params["version"] == version {
                    return n.params["diagnostics"].clone();
                }
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let text = big_policy();
    assert!(text.lines().count() >= 2000, "{}", text.lines().count());
    let (server, client) = Connection::memory();
    let handle = std::thread::spawn(move || {
        let opts = baton::lsp::Options {
            debounce: Duration::ZERO,
        };
        baton::lsp::serve(&server, opts).unwrap();
    });
    let mut cl = Client {
        conn: client,
        id: 0,
    };
    cl.request("initialize", json!({ "capabilities": {} }));
    cl.notify("initialized", json!({}));
    let uri = "untitled:big.policy";
    cl.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "baton-policy", "version": 1, "text": text}}),
    );
    let first = cl.diagnostics(1);
    assert_eq!(first, json!([]), "the benchmark policy checks cleanly");

    let mut g = c.benchmark_group("lsp_2000_lines");
    let mut version = 1;
    g.bench_function("edit_until_diagnostics", |b| {
        b.iter(|| {
            version += 1;
            // Type one character in a `let` value (and take it back on the next edit).
            let digit = if version % 2 == 0 { "7" } else { "" };
            cl.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version},
                       "contentChanges": [{"range": {"start": {"line": 4, "character": 15},
                                                     "end": {"line": 4, "character": 15 + u32::from(version % 2 != 0)}},
                                           "text": digit}]}),
            );
            cl.diagnostics(version)
        })
    });
    let at = |line: u32, character: u32| json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}});
    // Positions near the end of the file, where a scan has the most to read.
    let (l, ch) = find(&text, "item.chars > 390", 2);
    let h = cl.request("textDocument/hover", at(l, ch));
    assert!(h["result"]["contents"]["value"].is_string(), "{h}");
    g.bench_function("hover_fact", |b| {
        b.iter(|| cl.request("textDocument/hover", at(l, ch)))
    });
    let (l, ch) = find(&text, "target.runs_since_last_seen > 390", 7);
    let r = cl.request("textDocument/completion", at(l, ch));
    assert!(r["result"].as_array().is_some_and(|a| a.len() > 10), "{r}");
    g.bench_function("completion_after_target_dot", |b| {
        b.iter(|| cl.request("textDocument/completion", at(l, ch)))
    });
    let (l, ch) = find(&text, "limit_390 because", 2);
    let r = cl.request("textDocument/definition", at(l, ch));
    assert_eq!(r["result"][0]["range"]["start"]["line"], 394, "{r}");
    g.bench_function("definition_of_a_let", |b| {
        b.iter(|| cl.request("textDocument/definition", at(l, ch)))
    });
    g.bench_function("references_of_a_let", |b| {
        let mut p = at(l, ch);
        p["context"] = json!({"includeDeclaration": true});
        b.iter(|| cl.request("textDocument/references", p.clone()))
    });
    g.bench_function("formatting", |b| {
        b.iter(|| {
            cl.request(
                "textDocument/formatting",
                json!({"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": true}}),
            )
        })
    });
    g.finish();
    cl.request("shutdown", Value::Null);
    cl.notify("exit", Value::Null);
    handle.join().unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
