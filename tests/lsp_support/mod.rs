//! An LSP client over lsp-server's in-memory connection, driving the real server loop
//! (`baton::lsp::serve`) on a thread.

#![allow(dead_code)]

use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{json, Value};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a test waits for a message before it fails instead of hanging: a hang guard, not
/// a budget (every wait ends at a message, or at once when the server thread ends and the
/// connection closes); generous so that a loaded machine never fails a test (issue 27).
const PATIENCE: Duration = Duration::from_secs(600);

pub struct Client {
    conn: Connection,
    server: Option<JoinHandle<()>>,
    next_id: i32,
    /// Notifications received while waiting for something else.
    pub backlog: Vec<Notification>,
}

impl Client {
    /// Start a server and do the `initialize` handshake.
    pub fn start(debounce_ms: u64) -> Client {
        let (server_side, client_side) = Connection::memory();
        let server = std::thread::spawn(move || {
            let opts = baton::lsp::Options {
                debounce: Duration::from_millis(debounce_ms),
            };
            baton::lsp::serve(&server_side, opts).expect("server loop");
        });
        let mut c = Client {
            conn: client_side,
            server: Some(server),
            next_id: 0,
            backlog: Vec::new(),
        };
        let caps = c.request("initialize", json!({ "capabilities": {} }));
        assert_eq!(caps["result"]["serverInfo"]["name"], "baton");
        c.notify("initialized", json!({}));
        c
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.conn
            .sender
            .send(Message::Notification(Notification::new(
                method.into(),
                params,
            )))
            .expect("send");
    }

    fn recv(&self) -> Message {
        self.conn
            .receiver
            .recv_timeout(PATIENCE)
            .expect("the server stopped answering")
    }

    /// Send a request and wait for its response (as JSON: `result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.conn
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.into(),
                params,
            )))
            .expect("send");
        loop {
            match self.recv() {
                Message::Response(r) if r.id == id => {
                    return serde_json::to_value(&r).expect("json");
                }
                Message::Notification(n) => self.backlog.push(n),
                _ => {}
            }
        }
    }

    /// Wait for the diagnostics of `uri` at document version `version`.
    pub fn diagnostics(&mut self, uri: &str, version: i32) -> Vec<Value> {
        let matches = |n: &Notification| {
            n.method == "textDocument/publishDiagnostics"
                && n.params["uri"] == uri
                && n.params["version"] == version
        };
        if let Some(i) = self.backlog.iter().position(matches) {
            let n = self.backlog.remove(i);
            return n.params["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
        loop {
            if let Message::Notification(n) = self.recv() {
                if matches(&n) {
                    return n.params["diagnostics"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                }
                self.backlog.push(n);
            }
        }
    }

    pub fn open(&self, uri: &str, language: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": language, "version": 1, "text": text } }),
        );
    }

    pub fn change(&self, uri: &str, version: i32, changes: Value) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
        );
    }

    pub fn at(&mut self, method: &str, uri: &str, line: u32, character: u32) -> Value {
        let mut params = json!({
            "textDocument": { "uri": uri },
            "position": { "line": line, "character": character },
        });
        if method == "textDocument/references" {
            params["context"] = json!({ "includeDeclaration": true });
        }
        self.request(method, params)
    }

    /// `shutdown`, `exit`, and the server thread ends cleanly.
    pub fn stop(mut self) {
        let r = self.request("shutdown", Value::Null);
        assert!(r.get("error").is_none(), "{r}");
        self.notify("exit", Value::Null);
        if let Some(h) = self.server.take() {
            h.join().expect("the server thread panicked");
        }
    }
}

/// A `file://` URI for a path.
pub fn uri(path: &std::path::Path) -> String {
    lsp_types::Url::from_file_path(path)
        .expect("absolute path")
        .to_string()
}

/// The (line, character) of the first occurrence of `needle` in `text`, plus `skip`
/// characters.
pub fn pos(text: &str, needle: &str, skip: u32) -> (u32, u32) {
    let at = text.find(needle).expect("needle in text");
    let before = &text[..at];
    let line = before.matches('\n').count() as u32;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() as u32;
    (line, col + skip)
}
