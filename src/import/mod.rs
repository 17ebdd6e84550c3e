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
mod codex_turns;
pub mod mapping;
pub mod sessions;
mod unified_exec;
mod when;

use crate::state::State;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

pub use sessions::{list_sessions, SessionDirs};
#[cfg(feature = "unstable")]
pub use sessions::SessionInfo;

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

}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A problem that makes a log unreadable as a whole. Malformed lines are not errors: they are
/// skipped and reported as [`Warning`]s. `Display` is the message; the log is
/// [`ImportError::path`] (the `baton` command prints `PATH: error: message`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The log cannot be read.
    #[error("cannot read session log: {reason}")]
    Io {
        /// The log.
        path: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// The log is not the expected tool's.
    #[error("not a {expected} session log: {recognised}")]
    NotRecognised {
        /// The log.
        path: String,
        /// The tool asked for (`Claude Code`, `Codex CLI`, or `Claude Code or Codex CLI` when
        /// it was to be detected).
        expected: &'static str,
        /// What the first lines look like instead.
        recognised: Recognised,
    },
}

impl ImportError {
    /// The log the error is about.
    pub fn path(&self) -> &str {
        match self {
            ImportError::Io { path, .. } | ImportError::NotRecognised { path, .. } => path,
        }
    }
}

/// What the first lines of a log that is not the expected tool's look like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Recognised {
    /// Another tool's log (import it as that tool's).
    #[error("recognised {}", tool_lines(.0))]
    Tool(Tool),
    /// A Codex rollout in the legacy unwrapped format, which baton does not read.
    #[error(
        "recognised a Codex CLI rollout in the legacy unwrapped format (lines without \
         `payload`, written by Codex before mid-2025), which this baton does not read; \
         open the session once with a current Codex to rewrite it, or import a newer rollout"
    )]
    LegacyCodex,
    /// No line is JSON.
    #[error("no JSON lines in it")]
    NoJsonLines,
    /// JSON lines of a tool (or a version) baton does not know.
    #[error("{}; baton reads Claude Code sessions and Codex CLI rollouts", unknown_lines(.lines, .types))]
    Unknown {
        /// How many lines were looked at.
        lines: u32,
        /// Their `type` fields, in the order first seen.
        types: Vec<String>,
    },
}

fn tool_lines(tool: &Tool) -> &'static str {
    match tool {
        Tool::Codex => "a Codex CLI rollout (`session_meta`/`response_item` lines)",
        Tool::ClaudeCode => "a Claude Code session (`sessionId`/`message` lines)",
    }
}

/// `recognised 8 JSON lines of an unknown tool or version (their `type`s are chat)`.
pub(crate) fn unknown_lines(lines: &u32, types: &[String]) -> String {
    let types = if types.is_empty() {
        "none has a `type` field".to_string()
    } else {
        format!("their `type`s are {}", types.join(", "))
    };
    format!(
        "recognised {lines} JSON line{} of an unknown tool or version ({types})",
        if *lines == 1 { "" } else { "s" }
    )
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
    /// The 1-based line number, for warnings.
    pub no: u64,
}

/// An adapter: fed the log's lines in order, then finished into a state.
pub(crate) trait Adapter {
    fn feed(&mut self, line: Line<'_>, report: &mut ImportReport, file: &str);
    fn finish(self: Box<Self>, report: &mut ImportReport, opts: &ImportOptions) -> Imported;
}

/// Import the session log at `path`, written by `tool`. The file is opened read-only.
pub fn import_file(tool: Tool, path: &Path, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let name = path.display().to_string();
    let file = crate::input::open(path).map_err(|e| ImportError::Io {
        path: name.clone(),
        reason: e.to_string(),
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
    let mut held: Vec<(u64, serde_json::Value)> = Vec::new();
    let mut no: u64 = 0;
    let mut clock = Clock::default();
    loop {
        buf.clear();
        let (n, over) =
            read_line_bounded(&mut reader, &mut buf, MAX_LINE_BYTES).map_err(|e| {
                ImportError::Io {
                    path: file.to_string(),
                    reason: crate::state::io_reason(&e),
                }
            })?;
        if n == 0 {
            break;
        }
        no = no.saturating_add(1);
        report.lines = report.lines.saturating_add(1);
        report.bytes = report.bytes.saturating_add(n);
        if over {
            report.malformed = report.malformed.saturating_add(1);
            report.warnings.push(Warning {
                file: file.to_string(),
                line: no,
                message: format!(
                    "the line is over the line limit of {MAX_LINE_BYTES} bytes (64 MiB); line skipped"
                ),
            });
            continue;
        }
        let complete = buf.last() == Some(&b'\n');
        let Some(value) = parse_line(&buf, no, complete, file, &mut report) else {
            continue;
        };
        clock.look(&value, no);
        match adapter.as_mut() {
            Some(a) => a.feed(Line { value: &value, no }, &mut report, file),
            None => {
                sniff.look(&value);
                held.push((no, value));
                if let Some(a) = sniff.decide(tool) {
                    let mut a = a;
                    for (n, v) in held.drain(..) {
                        a.feed(Line { value: &v, no: n }, &mut report, file);
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
            for (n, v) in held.drain(..) {
                a.feed(Line { value: &v, no: n }, &mut report, file);
            }
            a
        }
    };
    if let Some(w) = clock.warning(file) {
        report.warnings.push(w);
    }
    Ok(adapter.finish(&mut report, opts))
}

/// Entries whose `timestamp` is more than [`SKEW_TOLERANCE_SECS`] earlier than an entry
/// before them (clock skew, or lines appended out of order): they are kept in file order, and
/// one warning says so. Smaller steps back are normal (Claude Code stamps a streamed message
/// when it starts and writes it when it ends). Entries that carry a time of their own
/// (`queue-operation`, `file-history-snapshot`) are not compared.
#[derive(Default)]
struct Clock {
    /// The latest time seen: seconds since 1970, and the text.
    last: Option<(i64, String)>,
    backwards: u64,
    first: Option<(u64, String, String)>,
}

/// How far back a timestamp may step without a warning.
const SKEW_TOLERANCE_SECS: i64 = 60;

impl Clock {
    fn look(&mut self, v: &serde_json::Value, no: u64) {
        let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if matches!(ty, "queue-operation" | "file-history-snapshot") {
            return;
        }
        let Some(ts) = v.get("timestamp").and_then(|t| t.as_str()) else {
            return;
        };
        let Some(t) = epoch_seconds(ts) else {
            return;
        };
        if let Some((prev, prev_text)) = &self.last {
            if t < *prev {
                if prev.saturating_sub(t) > SKEW_TOLERANCE_SECS {
                    self.backwards = self.backwards.saturating_add(1);
                    if self.first.is_none() {
                        self.first = Some((no, ts.to_string(), prev_text.clone()));
                    }
                }
                return;
            }
        }
        self.last = Some((t, ts.to_string()));
    }

    fn warning(&self, file: &str) -> Option<Warning> {
        let (line, ts, prev) = self.first.as_ref()?;
        Some(Warning {
            file: file.to_string(),
            line: *line,
            message: format!(
                "timestamp {ts} is earlier than {prev} on an earlier line (clock skew); {} entr{} more than a minute out of time order kept in file order, nothing skipped",
                self.backwards,
                if self.backwards == 1 { "y" } else { "ies" }
            ),
        })
    }
}

fn new_adapter(tool: Tool) -> Box<dyn Adapter> {
    match tool {
        Tool::ClaudeCode => Box::new(claude::ClaudeAdapter::new()),
        Tool::Codex => Box::new(codex::CodexAdapter::new()),
    }
}

/// Parse one line; `None` for blank, malformed (warned) or incomplete last lines.
/// The longest log line read: 64 MiB. A longer line is skipped (with a warning) without
/// being held in memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Read one line (up to and including `\n`) into `buf`, keeping at most `max` bytes of it.
/// Returns the bytes consumed (0 at the end of input) and whether the line was longer than
/// `max` (then `buf` is cleared and the rest of the line consumed).
fn read_line_bounded<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(u64, bool)> {
    let mut consumed: u64 = 0;
    let mut over = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok((consumed, over));
        }
        let (n, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i.saturating_add(1), true),
            None => (chunk.len(), false),
        };
        if !over && buf.len().saturating_add(n) <= max {
            buf.extend_from_slice(chunk.get(..n).unwrap_or(chunk));
        } else {
            over = true;
            buf.clear();
        }
        reader.consume(n);
        consumed = consumed.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        if done {
            return Ok((consumed, over));
        }
    }
}

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
                    "malformed JSON ({} at column {}); line skipped{}",
                    describe_json_error(&e),
                    e.column(),
                    lost_prompt_note(&text)
                ),
            });
            None
        }
    }
}

/// Seconds since 1970 of a UTC timestamp `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what both tools
/// write); `None` for anything else.
fn epoch_seconds(ts: &str) -> Option<i64> {
    let ts = ts.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, min, s) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || !(0..=9999).contains(&y) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), every step checked.
    let y = if m <= 2 { y.checked_sub(1)? } else { y };
    let era = y.div_euclid(400);
    let yoe = y.checked_sub(era.checked_mul(400)?)?;
    let mp = m.checked_add(9)?.rem_euclid(12);
    let doy = mp
        .checked_mul(153)?
        .checked_add(2)?
        .checked_div(5)?
        .checked_add(day)?
        .checked_sub(1)?;
    let doe = yoe
        .checked_mul(365)?
        .checked_add(yoe.checked_div(4)?)?
        .checked_sub(yoe.checked_div(100)?)?
        .checked_add(doy)?;
    let days = era.checked_mul(146_097)?.checked_add(doe)?.checked_sub(719_468)?;
    days.checked_mul(86_400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(min.checked_mul(60)?)?
        .checked_add(s)
}

/// A note for a skipped line that looks like it carried a user prompt: the prompt is lost, and
/// the warning says so with its first words.
fn lost_prompt_note(text: &str) -> String {
    let prompt_like = text.contains("\"user_message\"")
        || text.contains("\"role\":\"user\"")
        || text.contains("\"role\": \"user\"")
        || (text.contains("\"type\":\"user\"") && !text.contains("tool_result"));
    if !prompt_like {
        return String::new();
    }
    let start = ["\"message\":\"", "\"message\": \"", "\"text\":\"", "\"text\": \"", "\"content\":\""]
        .iter()
        .filter_map(|k| text.find(k).map(|i| i.saturating_add(k.len())))
        .min();
    let words: String = start
        .and_then(|i| text.get(i..))
        .unwrap_or("")
        .chars()
        .take_while(|c| *c != '"')
        .take(80)
        .collect();
    if words.is_empty() {
        "; it looks like a user prompt, which is lost".to_string()
    } else {
        format!("; it looks like a user prompt, which is lost: \"{words}...\"")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(epoch_seconds("2026-11-30T10:23:00.000Z"), Some(1_796_034_180));
        assert_eq!(epoch_seconds("2026-11-30 10:23"), None);
    }
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
    fn wrong_tool(&self, tool: Tool) -> Option<Recognised> {
        let mine = match tool {
            Tool::ClaudeCode => self.claude,
            Tool::Codex => self.codex,
        };
        if mine > 0 {
            return None;
        }
        if self.codex_legacy > 0 {
            return Some(Recognised::LegacyCodex);
        }
        if tool == Tool::ClaudeCode && self.codex > 0 {
            return Some(Recognised::Tool(Tool::Codex));
        }
        if tool == Tool::Codex && self.claude > 0 {
            return Some(Recognised::Tool(Tool::ClaudeCode));
        }
        (self.seen >= SNIFF_LINES).then(|| self.describe())
    }

    fn nothing(&self, tool: Tool) -> Option<Recognised> {
        let mine = match tool {
            Tool::ClaudeCode => self.claude,
            Tool::Codex => self.codex,
        };
        (mine == 0).then(|| self.describe())
    }

    fn describe(&self) -> Recognised {
        if self.seen == 0 {
            return Recognised::NoJsonLines;
        }
        Recognised::Unknown {
            lines: self.seen,
            types: self.types.clone(),
        }
    }
}

/// Guess which tool wrote a log from its first lines (for `baton handoff --from FILE`).
pub fn detect_tool(path: &Path) -> Result<Tool, ImportError> {
    let name = path.display().to_string();
    let file = crate::input::open(path).map_err(|e| ImportError::Io {
        path: name.clone(),
        reason: e.to_string(),
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

#[cfg(test)]
mod bounded_lines {
    use super::read_line_bounded;

    #[test]
    fn a_line_over_the_limit_is_consumed_without_being_kept() {
        let input = b"short\nmuch too long a line\nok\nend";
        let mut r = std::io::BufReader::with_capacity(4, &input[..]);
        let mut lines = Vec::new();
        loop {
            let mut buf = Vec::new();
            let (n, over) = read_line_bounded(&mut r, &mut buf, 8).expect("reads");
            if n == 0 {
                break;
            }
            assert!(buf.len() <= 8);
            lines.push((n, over, String::from_utf8(buf).expect("utf-8")));
        }
        assert_eq!(
            lines,
            vec![
                (6, false, "short\n".to_string()),
                (21, true, String::new()),
                (3, false, "ok\n".into()),
                (3, false, "end".into()),
            ]
        );
    }
}

#[cfg(test)]
mod import_tests;
