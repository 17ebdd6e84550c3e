//! Session adapters: read a coding tool's own session log and produce a baton thread state.
//!
//! Public entry point: [`import_file`] (or [`import_reader`] for bytes from elsewhere). It
//! streams the log line by line, so memory is bounded by the largest line plus the state it
//! builds (long tool outputs are elided, see [`MAX_OUTPUT_CHARS`]), and never writes to the
//! source. The mapping from each tool's entry types to baton's item kinds is documented in
//! docs/import.md; [`claude`] and [`codex`] hold one adapter each, [`mapping`] what they share,
//! and [`sessions`] finds the logs in the tools' default locations.
//!
//! This module depends on [`crate::state`] only: the store and the CLI call into it.

pub mod claude;
pub mod codex;
pub mod mapping;
pub mod sessions;
mod when;

use crate::state::State;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub use sessions::{list_sessions, SessionDirs, SessionInfo};

/// Longest tool output, tool input or diff kept on an item, in characters; the middle of a
/// longer one is elided (head and tail are kept) and the report counts it.
pub const MAX_OUTPUT_CHARS: usize = 32 * 1024;
/// Longest message text kept on an item, in characters.
pub const MAX_MESSAGE_CHARS: usize = 256 * 1024;

/// A coding tool whose session logs baton reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// Claude Code: `~/.claude/projects/<slug>/<session>.jsonl`.
    ClaudeCode,
    /// Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`.
    Codex,
}

impl Tool {
    pub const NAMES: &'static [&'static str] = &["claude-code", "codex"];

    /// The `--from` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::ClaudeCode => "claude-code",
            Tool::Codex => "codex",
        }
    }

    /// The baton provider the tool's runs are recorded under.
    pub fn provider(self) -> &'static str {
        match self {
            Tool::ClaudeCode => "claude",
            Tool::Codex => "codex",
        }
    }

    /// The tool's name for people.
    pub fn display(self) -> &'static str {
        match self {
            Tool::ClaudeCode => "Claude Code",
            Tool::Codex => "Codex CLI",
        }
    }

    pub fn parse(s: &str) -> Option<Tool> {
        match s {
            "claude-code" | "claude" => Some(Tool::ClaudeCode),
            "codex" => Some(Tool::Codex),
            _ => None,
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A problem that makes a log unreadable as a whole. Malformed lines are not errors: they are
/// skipped and reported as [`Warning`]s.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: error: cannot read session log: {reason}")]
    Io { path: String, reason: String },
    #[error("{path}: error: not a {expected} session log: {recognised}")]
    NotRecognised {
        path: String,
        /// The tool asked for (`--from`).
        expected: &'static str,
        /// What the first lines look like instead.
        recognised: String,
    },
    #[error("{path}: error: {message}")]
    Invalid { path: String, message: String },
}

/// Something the import skipped or changed, with the file and 1-based line it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub file: String,
    /// 0 when the warning is about the whole file.
    pub line: u64,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: warning: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}: warning: {}", self.file, self.message)
        }
    }
}

/// What an import read and how it went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Lines read (blank lines included).
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Lines skipped because they are not JSON (each also has a warning).
    pub malformed: u64,
    /// Whether the last line was incomplete (a session still being written) and ignored.
    pub truncated_tail: bool,
    /// Entries of a type this baton does not know, kept as `protocol` items: (type, count).
    pub unknown: Vec<(String, u64)>,
    /// Entries that repeat another entry (Codex's `event_msg` echoes), not imported twice.
    pub echoes: u64,
    /// Texts whose middle was elided because they exceed the size limits.
    pub elided: u64,
    pub warnings: Vec<Warning>,
}

impl ImportReport {
    pub(crate) fn count_unknown(&mut self, kind: &str) {
        match self.unknown.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n = n.saturating_add(1),
            None => self.unknown.push((kind.to_string(), 1)),
        }
    }

    /// Every warning, with one more summarising the unknown entry types (if any).
    pub fn all_warnings(&self, file: &str) -> Vec<Warning> {
        let mut out = self.warnings.clone();
        if !self.unknown.is_empty() {
            let total: u64 = self.unknown.iter().map(|(_, n)| n).sum();
            let kinds: Vec<String> = self
                .unknown
                .iter()
                .map(|(k, n)| format!("{k} ({n})"))
                .collect();
            out.push(Warning {
                file: file.to_string(),
                line: 0,
                message: format!(
                    "{total} entr{} of unknown type kept as protocol items: {}",
                    if total == 1 { "y" } else { "ies" },
                    kinds.join(", ")
                ),
            });
        }
        out
    }
}

/// A thread state built from one session log, and how the import went.
#[derive(Debug, Clone)]
pub struct Imported {
    pub state: State,
    pub report: ImportReport,
    pub tool: Tool,
    /// The tool's session id (also the provider thread's id).
    pub session_id: String,
    /// The working directory the session ran in, when the log says.
    pub cwd: Option<String>,
}

/// Options of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The provider the state's request is for (default: the tool's own provider).
    pub request_provider: Option<String>,
    /// The user's message for the requested run.
    pub request_message: Option<String>,
}

/// One JSON line of a log, parsed.
pub(crate) struct Line<'a> {
    pub value: &'a serde_json::Value,
}

/// An adapter: fed the log's lines in order, then finished into a state.
pub(crate) trait Adapter {
    fn feed(&mut self, line: Line<'_>, report: &mut ImportReport, file: &str);
    fn finish(self: Box<Self>, report: &mut ImportReport, opts: &ImportOptions) -> Imported;
}

/// Import the session log at `path`, written by `tool`. The file is opened read-only.
pub fn import_file(tool: Tool, path: &Path, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| ImportError::Io {
        path: name.clone(),
        reason: crate::state::io_reason(&e),
    })?;
    import_reader(tool, file, &name, opts)
}

/// Import a session log read from `reader`; `file` names it in warnings and errors.
pub fn import_reader<R: Read>(
    tool: Tool,
    reader: R,
    file: &str,
    opts: &ImportOptions,
) -> Result<Imported, ImportError> {
    let mut reader = BufReader::with_capacity(256 * 1024, reader);
    let mut report = ImportReport::default();
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut sniff = Sniffer::default();
    let mut adapter: Option<Box<dyn Adapter>> = None;
    // Lines read before the format is known are held (parsed) until it is.
    let mut held: Vec<serde_json::Value> = Vec::new();
    let mut no: u64 = 0;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| ImportError::Io {
                path: file.to_string(),
                reason: crate::state::io_reason(&e),
            })?;
        if n == 0 {
            break;
        }
        no = no.saturating_add(1);
        report.lines = report.lines.saturating_add(1);
        report.bytes = report.bytes.saturating_add(n as u64);
        let complete = buf.last() == Some(&b'\n');
        let Some(value) = parse_line(&buf, no, complete, file, &mut report) else {
            continue;
        };
        match adapter.as_mut() {
            Some(a) => a.feed(Line { value: &value }, &mut report, file),
            None => {
                sniff.look(&value);
                held.push(value);
                if let Some(a) = sniff.decide(tool) {
                    let mut a = a;
                    for v in held.drain(..) {
                        a.feed(Line { value: &v }, &mut report, file);
                    }
                    adapter = Some(a);
                } else if let Some(recognised) = sniff.wrong_tool(tool) {
                    return Err(ImportError::NotRecognised {
                        path: file.to_string(),
                        expected: tool.display(),
                        recognised,
                    });
                }
            }
        }
    }
    let adapter = match adapter {
        Some(a) => a,
        None => {
            if let Some(recognised) = sniff.wrong_tool(tool).or_else(|| sniff.nothing(tool)) {
                return Err(ImportError::NotRecognised {
                    path: file.to_string(),
                    expected: tool.display(),
                    recognised,
                });
            }
            // Recognised lines but too few to be sure: take them.
            let mut a = new_adapter(tool);
            for v in held.drain(..) {
                a.feed(Line { value: &v }, &mut report, file);
            }
            a
        }
    };
    Ok(adapter.finish(&mut report, opts))
}

fn new_adapter(tool: Tool) -> Box<dyn Adapter> {
    match tool {
        Tool::ClaudeCode => Box::new(claude::ClaudeAdapter::new()),
        Tool::Codex => Box::new(codex::CodexAdapter::new()),
    }
}

/// Parse one line; `None` for blank, malformed (warned) or incomplete last lines.
fn parse_line(
    buf: &[u8],
    no: u64,
    complete: bool,
    file: &str,
    report: &mut ImportReport,
) -> Option<serde_json::Value> {
    let bytes = trim_ascii(buf);
    if bytes.is_empty() {
        return None;
    }
    let text: std::borrow::Cow<'_, str> = match std::str::from_utf8(bytes) {
        Ok(t) => t.into(),
        Err(e) => {
            report.warnings.push(Warning {
                file: file.to_string(),
                line: no,
                message: format!(
                    "invalid UTF-8 at byte {} of the line; the bad bytes are replaced with U+FFFD",
                    e.valid_up_to()
                ),
            });
            String::from_utf8_lossy(bytes)
        }
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v.is_object() => Some(v),
        Ok(_) => {
            report.malformed = report.malformed.saturating_add(1);
            report.warnings.push(Warning {
                file: file.to_string(),
                line: no,
                message: "not a JSON object; line skipped".to_string(),
            });
            None
        }
        Err(e) if !complete && e.is_eof() => {
            report.truncated_tail = true;
            report.warnings.push(Warning {
                file: file.to_string(),
                line: no,
                message:
                    "the last line is incomplete (the session is still being written); ignored"
                        .to_string(),
            });
            None
        }
        Err(e) => {
            report.malformed = report.malformed.saturating_add(1);
            report.warnings.push(Warning {
                file: file.to_string(),
                line: no,
                message: format!(
                    "malformed JSON ({} at column {}); line skipped",
                    describe_json_error(&e),
                    e.column()
                ),
            });
            None
        }
    }
}

fn describe_json_error(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.find(" at line ") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |i| i.saturating_add(1));
    b.get(start..end).unwrap_or(&[])
}

/// Recognises which tool (and which generation of its format) wrote a log from its first
/// JSON lines.
#[derive(Default)]
struct Sniffer {
    seen: u32,
    claude: u32,
    codex: u32,
    codex_legacy: u32,
    types: Vec<String>,
}

const SNIFF_LINES: u32 = 8;

impl Sniffer {
    fn look(&mut self, v: &serde_json::Value) {
        self.seen = self.seen.saturating_add(1);
        let ty = v.get("type").and_then(|t| t.as_str());
        if let Some(t) = ty {
            if self.types.len() < 6 && !self.types.iter().any(|x| x == t) {
                self.types.push(t.to_string());
            }
        }
        if claude::looks_like(v) {
            self.claude = self.claude.saturating_add(1);
        } else if codex::looks_like(v) {
            self.codex = self.codex.saturating_add(1);
        } else if codex::looks_like_legacy(v) {
            self.codex_legacy = self.codex_legacy.saturating_add(1);
        }
    }

    fn decide(&self, tool: Tool) -> Option<Box<dyn Adapter>> {
        let mine = match tool {
            Tool::ClaudeCode => self.claude,
            Tool::Codex => self.codex,
        };
        (mine > 0 && (mine >= 2 || self.seen >= SNIFF_LINES)).then(|| new_adapter(tool))
    }

    /// What the lines look like when they are another tool's (or an older format's).
    fn wrong_tool(&self, tool: Tool) -> Option<String> {
        let mine = match tool {
            Tool::ClaudeCode => self.claude,
            Tool::Codex => self.codex,
        };
        if mine > 0 {
            return None;
        }
        if self.codex_legacy > 0 {
            return Some(
                "recognised a Codex CLI rollout in the legacy unwrapped format (lines without \
                 `payload`, written by Codex before mid-2025), which this baton does not read; \
                 open the session once with a current Codex to rewrite it, or import a newer rollout"
                    .to_string(),
            );
        }
        if tool == Tool::ClaudeCode && self.codex > 0 {
            return Some(
                "recognised a Codex CLI rollout (`session_meta`/`response_item` lines); use --from codex"
                    .to_string(),
            );
        }
        if tool == Tool::Codex && self.claude > 0 {
            return Some(
                "recognised a Claude Code session (`sessionId`/`message` lines); use --from claude-code"
                    .to_string(),
            );
        }
        (self.seen >= SNIFF_LINES).then(|| self.describe())
    }

    fn nothing(&self, tool: Tool) -> Option<String> {
        let mine = match tool {
            Tool::ClaudeCode => self.claude,
            Tool::Codex => self.codex,
        };
        (mine == 0).then(|| self.describe())
    }

    fn describe(&self) -> String {
        if self.seen == 0 {
            return "no JSON lines in it".to_string();
        }
        let types = if self.types.is_empty() {
            "none has a `type` field".to_string()
        } else {
            format!("their `type`s are {}", self.types.join(", "))
        };
        format!(
            "recognised {} JSON line{} of an unknown tool or version ({types}); baton reads \
             Claude Code sessions (--from claude-code) and Codex CLI rollouts (--from codex)",
            self.seen,
            if self.seen == 1 { "" } else { "s" }
        )
    }
}

/// Guess which tool wrote a log from its first lines (for `baton handoff --from FILE`).
pub fn detect_tool(path: &Path) -> Result<Tool, ImportError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| ImportError::Io {
        path: name.clone(),
        reason: crate::state::io_reason(&e),
    })?;
    let mut reader = BufReader::new(file.take(4 * 1024 * 1024));
    let mut sniff = Sniffer::default();
    let mut buf = Vec::new();
    let mut report = ImportReport::default();
    let mut no = 0u64;
    while sniff.seen < SNIFF_LINES {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                return Err(ImportError::Io {
                    path: name,
                    reason: crate::state::io_reason(&e),
                })
            }
        }
        no = no.saturating_add(1);
        let complete = buf.last() == Some(&b'\n');
        if let Some(v) = parse_line(&buf, no, complete, &name, &mut report) {
            sniff.look(&v);
        }
    }
    if sniff.claude > 0 && sniff.claude >= sniff.codex {
        Ok(Tool::ClaudeCode)
    } else if sniff.codex > 0 {
        Ok(Tool::Codex)
    } else {
        Err(ImportError::NotRecognised {
            path: name,
            expected: "Claude Code or Codex CLI",
            recognised: sniff
                .wrong_tool(Tool::Codex)
                .unwrap_or_else(|| sniff.describe()),
        })
    }
}

/// The default output path for a session imported into a directory.
pub fn state_file_name(imported: &Imported) -> PathBuf {
    PathBuf::from(format!("{}.yaml", imported.state.thread.id))
}
