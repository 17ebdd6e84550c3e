//! `baton lsp`: the policy language in the editor, over the Language Server Protocol.
//!
//! Public entry points: [`run_stdio`](crate::lsp::run_stdio) (what `baton lsp` runs) and [`serve`](crate::lsp::serve) (the same server
//! on any [`lsp_server::Connection`], e.g. [`lsp_server::Connection::memory`] in tests).
//!
//! The transport is `lsp-server` (rust-analyzer's synchronous scaffold): one thread owns the
//! open documents and answers every message in order, so there is no locking, and the
//! in-memory connection tests the real loop. Documents are `*.policy` files and YAML policy
//! test files. A change schedules a re-check after a quiet time ([`Options::debounce`](crate::lsp::Options::debounce));
//! opening a document checks it at once. Every handler runs under a panic guard: a bug shows
//! as an error response, never as a dead server.

mod catalog;
mod policy_doc;
mod scan;
mod test_doc;
mod text;
mod transport;

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, Completion, Formatting, GotoDefinition, HoverRequest, References,
    Request as _,
};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams,
    CodeActionProviderCapability, CompletionOptions, CompletionParams, CompletionResponse,
    Diagnostic, DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    DidSaveTextDocumentParams, DocumentFormattingParams, GotoDefinitionParams,
    GotoDefinitionResponse, Hover, HoverContents, HoverParams, HoverProviderCapability,
    InitializeParams, MarkupContent, MarkupKind, OneOf, PublishDiagnosticsParams, ReferenceParams,
    ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind, TextEdit,
    Url, WorkspaceEdit,
};
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use text::Document;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Quiet time after a change before the document is checked again.
    pub debounce: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            debounce: Duration::from_millis(150),
        }
    }
}

/// Why the server stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LspError {
    /// The client broke the protocol (no `initialize`, a message after `exit`, ...).
    #[error("lsp: protocol error: {0}")]
    Protocol(String),
    /// Standard input or output failed.
    #[error("lsp: i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<lsp_server::ProtocolError> for LspError {
    fn from(e: lsp_server::ProtocolError) -> LspError {
        LspError::Protocol(e.to_string())
    }
}

/// What the server can do, as sent in the `initialize` response.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".into(), "\"".into(), " ".into()]),
            ..CompletionOptions::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
        ..ServerCapabilities::default()
    }
}

/// Run the server on standard input and output until the client says `exit`.
pub fn run_stdio(options: Options) -> Result<(), LspError> {
    // lsp-server's `Connection::stdio` reads any announced body length into memory and ends
    // on the first body that does not parse: this transport bounds and answers both.
    let (connection, io_threads) = transport::stdio()?;
    serve(&connection, options)?;
    drop(connection);
    io_threads.join()?;
    Ok(())
}

/// Run the server on a connection: the `initialize` handshake, then every message until
/// `shutdown` and `exit` (or until the client hangs up).
pub fn serve(connection: &Connection, options: Options) -> Result<(), LspError> {
    let caps =
        serde_json::to_value(capabilities()).map_err(|e| LspError::Protocol(e.to_string()))?;
    let (id, params) = connection.initialize_start()?;
    // The parameters are not needed beyond checking that they are an `initialize` request's.
    let _: Option<InitializeParams> = serde_json::from_value(params).ok();
    let info = ServerInfo {
        name: "baton".into(),
        version: Some(env!("CARGO_PKG_VERSION").into()),
    };
    // The response is sent without waiting for `initialized`: a client that skips it (or
    // sends a document first) is still served.
    let result = serde_json::json!({ "capabilities": caps, "serverInfo": info });
    connection
        .sender
        .send(Message::Response(Response::new_ok(id, result)))
        .map_err(|e| LspError::Protocol(e.to_string()))?;
    let mut server = Server {
        docs: BTreeMap::new(),
        diagnostics: HashMap::new(),
        policies: HashMap::new(),
        cases: HashMap::new(),
        pending: BTreeMap::new(),
        options,
        out: connection.sender.clone(),
    };
    loop {
        let next = server.pending.values().min().copied();
        let msg = match next {
            Some(when) => {
                let wait = when.saturating_duration_since(Instant::now());
                match connection.receiver.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                    Err(_) => return Ok(()),
                }
            }
            None => match connection.receiver.recv() {
                Ok(m) => Some(m),
                Err(_) => return Ok(()),
            },
        };
        match msg {
            None => server.run_due(),
            Some(Message::Request(req)) => {
                if connection.handle_shutdown(&req)? {
                    return Ok(());
                }
                let resp = server.request(req);
                server.send(Message::Response(resp));
            }
            Some(Message::Notification(n)) => {
                if n.method == "exit" {
                    // `exit` before `shutdown`: the client gave up on the server (exit code 1).
                    return Err(LspError::Protocol("`exit` without `shutdown`".into()));
                }
                server.notification(n);
            }
            Some(Message::Response(_)) => {}
        }
    }
}

struct Server {
    docs: BTreeMap<Url, Document>,
    /// The diagnostics last published per document (for code actions).
    diagnostics: HashMap<Url, Vec<Diagnostic>>,
    /// The last compiled policy of a policy document that checks (for `let` values).
    policies: HashMap<Url, crate::policy::Policy>,
    /// The cases of a test file as last run (for hovers).
    cases: HashMap<Url, Vec<test_doc::CaseInfo>>,
    /// Documents waiting for a re-check, and when it is due.
    pending: BTreeMap<Url, Instant>,
    options: Options,
    out: crossbeam_channel::Sender<Message>,
}

/// What kind of document a URI is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DocKind {
    Policy,
    Test,
    Other,
}

fn path_of(uri: &Url) -> Option<PathBuf> {
    (uri.scheme() == "file")
        .then(|| uri.to_file_path().ok())
        .flatten()
}

fn params<P: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<P, (i32, String)> {
    serde_json::from_value(v).map_err(|e| (ErrorCode::InvalidParams as i32, e.to_string()))
}

fn ok<R: serde::Serialize>(r: R) -> Result<serde_json::Value, (i32, String)> {
    serde_json::to_value(r).map_err(|e| (ErrorCode::InternalError as i32, e.to_string()))
}

fn markdown(value: String, range: Option<lsp_types::Range>) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range,
    }
}

impl Server {
    fn send(&self, m: Message) {
        // The client is gone when this fails; the receive loop then ends.
        let _ = self.out.send(m);
    }

    fn kind(&self, uri: &Url) -> DocKind {
        let path = uri.path();
        if path.ends_with(".policy")
            || self
                .docs
                .get(uri)
                .is_some_and(|d| d.language == "baton-policy")
        {
            return DocKind::Policy;
        }
        if path.ends_with(".yaml") || path.ends_with(".yml") {
            if let Some(d) = self.docs.get(uri) {
                if test_doc::is_test_file(&d.text) {
                    return DocKind::Test;
                }
            }
        }
        DocKind::Other
    }

    /// The open policy buffers, read instead of their files.
    fn overlay(&self) -> policy_doc::Overlay {
        self.docs
            .iter()
            .filter(|(u, _)| u.path().ends_with(".policy"))
            .filter_map(|(u, d)| Some((path_of(u)?, d.text.clone())))
            .collect()
    }

    fn notification(&mut self, n: Notification) {
        let method = n.method.clone();
        let r = catch_unwind(AssertUnwindSafe(|| self.notification_inner(n)));
        if r.is_err() {
            self.log(&format!("baton lsp: internal error handling `{method}`"));
        }
    }

    fn log(&self, message: &str) {
        let n = Notification::new(
            "window/logMessage".into(),
            serde_json::json!({ "type": 1, "message": message }),
        );
        self.send(Message::Notification(n));
    }

    fn notification_inner(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) {
                    let d = p.text_document;
                    self.docs.insert(
                        d.uri.clone(),
                        Document::new(d.text, d.version, d.language_id),
                    );
                    self.recheck(&d.uri);
                    // Documents that read this one (bases, directory sets) see the change.
                    self.schedule_dependents(&d.uri);
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(n.params) {
                    let uri = p.text_document.uri;
                    if let Some(doc) = self.docs.get_mut(&uri) {
                        doc.apply(p.text_document.version, p.content_changes);
                        let due = deadline(self.options.debounce);
                        self.pending.insert(uri.clone(), due);
                        self.schedule_dependents(&uri);
                    }
                }
            }
            DidSaveTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidSaveTextDocumentParams>(n.params) {
                    // States and closed files are read from the disk: a save may change them.
                    self.schedule_dependents(&p.text_document.uri);
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) {
                    let uri = p.text_document.uri;
                    self.docs.remove(&uri);
                    self.pending.remove(&uri);
                    self.policies.remove(&uri);
                    self.cases.remove(&uri);
                    self.diagnostics.remove(&uri);
                    self.publish(&uri, Vec::new(), None);
                    self.schedule_dependents(&uri);
                }
            }
            _ => {}
        }
    }

    /// Every other open document is re-checked after the quiet time: any of them may extend
    /// this one, compose with it in a directory, or test it.
    fn schedule_dependents(&mut self, uri: &Url) {
        let due = deadline(self.options.debounce);
        let others: Vec<Url> = self
            .docs
            .keys()
            .filter(|u| *u != uri && self.kind(u) != DocKind::Other)
            .cloned()
            .collect();
        for u in others {
            self.pending.entry(u).or_insert(due);
        }
    }

    fn run_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Url> = self
            .pending
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(u, _)| u.clone())
            .collect();
        for u in due {
            self.pending.remove(&u);
            let r = catch_unwind(AssertUnwindSafe(|| self.recheck(&u)));
            if r.is_err() {
                self.log(&format!("baton lsp: internal error checking {u}"));
            }
        }
    }

    fn publish(&self, uri: &Url, diagnostics: Vec<Diagnostic>, version: Option<i32>) {
        let p = PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics,
            version,
        };
        self.send(Message::Notification(Notification::new(
            PublishDiagnostics::METHOD.into(),
            p,
        )));
    }

    /// Check a document now and publish its diagnostics.
    fn recheck(&mut self, uri: &Url) {
        let Some(doc) = self.docs.get(uri) else {
            return;
        };
        let version = doc.version;
        let path = path_of(uri);
        let diagnostics = match self.kind(uri) {
            DocKind::Policy => {
                let overlay = self.overlay();
                let c = policy_doc::check(uri, path.as_deref(), &doc.text, &overlay);
                match c.policy {
                    Some(p) => {
                        self.policies.insert(uri.clone(), p);
                    }
                    None => {
                        // Keep the last good policy: `let` values stay known while typing.
                    }
                }
                c.diagnostics
            }
            DocKind::Test => {
                let Some(path) = path else {
                    return;
                };
                let c = test_doc::check(&path, &doc.text, &self.overlay());
                self.cases.insert(uri.clone(), c.cases);
                c.diagnostics
            }
            DocKind::Other => Vec::new(),
        };
        self.diagnostics.insert(uri.clone(), diagnostics.clone());
        self.publish(uri, diagnostics, Some(version));
    }

    fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        let method = req.method.clone();
        match catch_unwind(AssertUnwindSafe(|| self.request_inner(req))) {
            Ok(Ok(v)) => Response::new_ok(id, v),
            Ok(Err((code, msg))) => Response::new_err(id, code, msg),
            Err(_) => Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                format!("baton lsp: internal error handling `{method}`"),
            ),
        }
    }

    fn request_inner(&mut self, req: Request) -> Result<serde_json::Value, (i32, String)> {
        match req.method.as_str() {
            HoverRequest::METHOD => {
                let p: HoverParams = params(req.params)?;
                ok(self.hover(p))
            }
            Completion::METHOD => {
                let p: CompletionParams = params(req.params)?;
                ok(self.completion(p).map(CompletionResponse::Array))
            }
            GotoDefinition::METHOD => {
                let p: GotoDefinitionParams = params(req.params)?;
                let tdp = p.text_document_position_params;
                let uri = tdp.text_document.uri;
                let Some(doc) = self.docs.get(&uri) else {
                    return ok(None::<GotoDefinitionResponse>);
                };
                if self.kind(&uri) != DocKind::Policy {
                    return ok(None::<GotoDefinitionResponse>);
                }
                let offset = text::offset_of(&doc.text, tdp.position);
                let locs = policy_doc::definition(
                    &uri,
                    &doc.text,
                    offset,
                    path_of(&uri).as_deref(),
                    &self.overlay(),
                );
                ok(match locs.len() {
                    0 => None,
                    _ => Some(GotoDefinitionResponse::Array(locs)),
                })
            }
            References::METHOD => {
                let p: ReferenceParams = params(req.params)?;
                let uri = p.text_document_position.text_document.uri;
                let Some(doc) = self.docs.get(&uri) else {
                    return ok(None::<Vec<lsp_types::Location>>);
                };
                if self.kind(&uri) != DocKind::Policy {
                    return ok(None::<Vec<lsp_types::Location>>);
                }
                let offset = text::offset_of(&doc.text, p.text_document_position.position);
                ok(Some(policy_doc::references(
                    &uri,
                    &doc.text,
                    offset,
                    path_of(&uri).as_deref(),
                    &self.overlay(),
                    p.context.include_declaration,
                )))
            }
            Formatting::METHOD => {
                let p: DocumentFormattingParams = params(req.params)?;
                let uri = p.text_document.uri;
                let Some(doc) = self.docs.get(&uri) else {
                    return ok(None::<Vec<TextEdit>>);
                };
                if self.kind(&uri) != DocKind::Policy {
                    return ok(None::<Vec<TextEdit>>);
                }
                let name = uri
                    .path()
                    .rsplit('/')
                    .next()
                    .unwrap_or("policy")
                    .to_string();
                ok(policy_doc::format(&name, &doc.text))
            }
            CodeActionRequest::METHOD => {
                let p: CodeActionParams = params(req.params)?;
                ok(Some(self.code_actions(p)))
            }
            _ => Err((
                ErrorCode::MethodNotFound as i32,
                format!("baton lsp does not handle `{}`", req.method),
            )),
        }
    }

    fn hover(&self, p: HoverParams) -> Option<Hover> {
        let tdp = p.text_document_position_params;
        let uri = tdp.text_document.uri;
        let doc = self.docs.get(&uri)?;
        match self.kind(&uri) {
            DocKind::Policy => {
                let offset = text::offset_of(&doc.text, tdp.position);
                let (md, range) = policy_doc::hover(
                    &doc.text,
                    offset,
                    path_of(&uri).as_deref(),
                    &self.overlay(),
                    self.policies.get(&uri),
                )?;
                Some(markdown(md, Some(range)))
            }
            DocKind::Test => {
                let line = usize::try_from(tdp.position.line).ok()?.saturating_add(1);
                let md = test_doc::hover(self.cases.get(&uri)?, line)?;
                Some(markdown(md, None))
            }
            DocKind::Other => None,
        }
    }

    fn completion(&self, p: CompletionParams) -> Option<Vec<lsp_types::CompletionItem>> {
        let tdp = p.text_document_position;
        let uri = tdp.text_document.uri;
        let doc = self.docs.get(&uri)?;
        if self.kind(&uri) != DocKind::Policy {
            return None;
        }
        let offset = text::offset_of(&doc.text, tdp.position);
        Some(policy_doc::completion(
            &doc.text,
            offset,
            path_of(&uri).as_deref(),
            &self.overlay(),
        ))
    }

    /// A quick fix for every diagnostic in the request whose help says "did you mean".
    fn code_actions(&self, p: CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = p.text_document.uri;
        let published = self.diagnostics.get(&uri);
        let mut out = Vec::new();
        for d in &p.context.diagnostics {
            let fix = d
                .data
                .as_ref()
                .and_then(|v| v.get("fix"))
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .or_else(|| {
                    // A client that drops `data`: match the published diagnostic.
                    published?
                        .iter()
                        .find(|e| e.range == d.range && e.message == d.message)?
                        .data
                        .as_ref()?
                        .get("fix")?
                        .as_str()
                        .map(str::to_string)
                });
            let Some(fix) = fix else {
                continue;
            };
            let edit = TextEdit::new(d.range, fix.clone());
            out.push(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Replace with `{fix}`"),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![d.clone()]),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                    ..WorkspaceEdit::default()
                }),
                is_preferred: Some(true),
                ..CodeAction::default()
            }));
        }
        out
    }
}

/// When a debounce of `wait` from now ends (now itself if that overflows the clock).
fn deadline(wait: std::time::Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait).unwrap_or(now)
}
