//! State files: loading (YAML or JSON), validation, and provider capability defaults.
//!
//! Public entry point: [`load_file`] (or [`parse_str`] for text already in memory), which
//! returns a validated [`State`] or every problem found, each naming its path.

mod aliases;
mod api;
mod depth;
mod locate;
mod model;
mod validate;

pub use model::*;

use std::fmt;
use std::path::{Path, PathBuf};

/// The format of a state document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// YAML (libyaml through serde_yaml); the default, and standard input's format.
    Yaml,
    /// JSON (a `.json` file).
    Json,
}

impl Format {
    /// JSON for a `.json` extension, YAML otherwise (and for `-`, standard input).
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Yaml,
        }
    }
}

/// One problem with a state file. As JSON (`explain --json`, the service's error data):
/// `{at, line, column, message}`, with null line and column when unknown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StateProblem {
    /// Where in the document: `runs[3].provider_thread`, or empty for the whole document.
    pub at: String,
    /// 1-based line and column when the parser knows them.
    pub line: Option<usize>,
    /// 1-based column, with `line`; `None` for problems found after parsing (validation).
    pub column: Option<usize>,
    /// What is wrong, e.g. `unknown provider thread "C9"`.
    pub message: String,
}

/// Everything wrong with one state file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct StateError {
    /// The file as given (`-` for standard input), or the name a caller passed for text.
    pub file: String,
    /// Every problem found, in document order; never empty.
    pub problems: Vec<StateProblem>,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", self.file)?;
            if let (Some(l), Some(c)) = (p.line, p.column) {
                write!(f, ":{l}:{c}")?;
            }
            write!(f, ": error: ")?;
            if !p.at.is_empty() {
                write!(f, "{}: ", p.at)?;
            }
            write!(f, "{}", p.message)?;
        }
        Ok(())
    }
}

impl StateError {
    fn one(file: &str, at: impl Into<String>, message: impl Into<String>) -> StateError {
        StateError {
            file: file.to_string(),
            problems: vec![StateProblem {
                at: at.into(),
                line: None,
                column: None,
                message: message.into(),
            }],
        }
    }
}

/// Largest state file read: 256 MiB. (Through `baton serve`, `--max-message` bounds a state.)
pub const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Read and validate a state file; `-` reads YAML from standard input.
pub fn load_file(path: &Path) -> Result<State, StateError> {
    let name = path.display().to_string();
    let bytes = if path == Path::new("-") {
        let mut buf = Vec::new();
        let mut input = std::io::Read::take(std::io::stdin(), MAX_STATE_BYTES + 1);
        std::io::Read::read_to_end(&mut input, &mut buf)
            .map_err(|e| StateError::one("<stdin>", "", format!("cannot read: {e}")))?;
        if buf.len() as u64 > MAX_STATE_BYTES {
            return Err(StateError::one(
                "<stdin>",
                "",
                format!(
                    "the state is over the state size limit of {MAX_STATE_BYTES} bytes (256 MiB)"
                ),
            ));
        }
        buf
    } else {
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.is_file() && meta.len() > MAX_STATE_BYTES {
                return Err(StateError::one(
                    &name,
                    "",
                    format!(
                        "state file is {} bytes, over the state size limit of {MAX_STATE_BYTES} bytes (256 MiB)",
                        meta.len()
                    ),
                ));
            }
        }
        // Bounded while reading, and only a regular file: a device or a FIFO is refused.
        crate::input::read(path, MAX_STATE_BYTES, " (256 MiB, the state size limit)")
            .map_err(|e| StateError::one(&name, "", format!("cannot read state file: {e}")))?
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        StateError::one(
            &name,
            "",
            format!(
                "not a text file: invalid UTF-8 at byte {} (state files are YAML or JSON)",
                e.valid_up_to()
            ),
        )
    })?;
    parse_str(text, Format::from_path(path), &name)
}

/// `thread.id` of a YAML or JSON state document, read without building the state (for
/// ordering requests by thread before the state is parsed). The same limits as [`parse_str`]
/// apply first (flow nesting, alias expansion); a document past them, or not a document,
/// names no thread.
pub fn thread_id_in_text(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        thread: Option<Named>,
    }
    #[derive(serde::Deserialize)]
    struct Named {
        id: Option<String>,
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if depth::too_deep(text).is_some() || aliases::check(text).is_err() {
        return None;
    }
    serde_yaml::from_str::<Doc>(text).ok()?.thread?.id
}

pub(crate) fn io_reason(e: &std::io::Error) -> String {
    crate::input::io_reason(e)
}

/// Parse and validate a state document held in memory. `file` names it in errors. A UTF-8
/// byte order mark before the document is skipped.
pub fn parse_str(text: &str, format: Format, file: &str) -> Result<State, StateError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let state = deserialize(text, format, file)?;
    let mut problems = validate::validate(&state);
    if problems.is_empty() {
        Ok(state)
    } else {
        locate_problems(text, &mut problems);
        Err(StateError {
            file: file.to_string(),
            problems,
        })
    }
}

/// Give each validation problem the line and column of the node its path names (or of the
/// deepest ancestor the text holds), read again from the text (`locate.rs`).
fn locate_problems(text: &str, problems: &mut [StateProblem]) {
    let paths: Vec<&str> = problems.iter().map(|p| p.at.as_str()).collect();
    let found = locate::locate(text, &paths);
    for (p, at) in problems.iter_mut().zip(found) {
        if p.line.is_none() {
            if let Some((line, column)) = at {
                p.line = Some(line);
                p.column = Some(column);
            }
        }
    }
}

/// Validate a state built in memory (for library users and the store).
pub fn validate(state: &State, file: &str) -> Result<(), StateError> {
    let problems = validate::validate(state);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StateError {
            file: file.to_string(),
            problems,
        })
    }
}

fn deserialize(text: &str, format: Format, file: &str) -> Result<State, StateError> {
    if text.trim().is_empty() {
        return Err(StateError::one(
            file,
            "",
            "empty state file: expected at least `version: 1`, `thread: {id: ...}` and `request: {provider: ...}`",
        ));
    }
    let fail =
        |at: String, line: Option<usize>, column: Option<usize>, message: String| StateError {
            file: file.to_string(),
            problems: vec![StateProblem {
                at,
                line,
                column,
                message,
            }],
        };
    match format {
        Format::Yaml => {
            if let Some((line, column)) = depth::too_deep(text) {
                return Err(fail(
                    String::new(),
                    Some(line),
                    Some(column),
                    format!(
                        "flow collections nested deeper than {} levels; a state file needs a few",
                        depth::MAX_FLOW_DEPTH
                    ),
                ));
            }
            if let Err(at) = aliases::check(text) {
                return Err(fail(
                    String::new(),
                    at.map(|a| a.0),
                    at.map(|a| a.1),
                    aliases::message(text.len()),
                ));
            }
            let de = serde_yaml::Deserializer::from_str(text);
            serde_path_to_error::deserialize::<_, State>(de).map_err(|e| {
                let at = clean_path(&e.path().to_string());
                let inner = e.into_inner();
                let loc = inner.location();
                fail(
                    at,
                    loc.as_ref().map(|l| l.line()),
                    loc.as_ref().map(|l| l.column()),
                    clean_message(&inner.to_string()),
                )
            })
        }
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize::<_, State>(&mut de).map_err(|e| {
                let at = clean_path(&e.path().to_string());
                let inner = e.into_inner();
                let (line, col) = if inner.line() > 0 {
                    (Some(inner.line()), Some(inner.column()))
                } else {
                    (None, None)
                };
                fail(at, line, col, clean_message(&inner.to_string()))
            })
        }
    }
}

fn clean_path(p: &str) -> String {
    if p == "." || p == "?" {
        String::new()
    } else {
        p.to_string()
    }
}

/// serde messages end with " at line X column Y"; we print the location ourselves.
fn clean_message(m: &str) -> String {
    let m = match m.find(" at line ") {
        Some(i) => &m[..i],
        None => m,
    };
    // serde_yaml prefixes its own idea of the path; we print ours.
    if let Some((head, rest)) = m.split_once(": ") {
        if !head.is_empty() && !head.contains(char::is_whitespace) {
            return rest.to_string();
        }
    }
    m.to_string()
}

/// Providers whose capabilities baton knows without a `providers:` entry.
pub const KNOWN_PROVIDERS: &[&str] = &["claude", "codex", "copilot", "cursor"];

/// Default capabilities of a known provider (documented in docs/facts.md).
pub fn default_caps(provider: &str) -> Option<ResolvedCaps> {
    let c =
        |resume, native_fork, rollback, handoff_channel, summarize, max_input_chars_per_turn| {
            ResolvedCaps {
                resume,
                native_fork,
                rollback,
                accepts_handoff: true,
                handoff_channel,
                file_read: true,
                summarize,
                max_input_chars_per_turn,
            }
        };
    Some(match provider {
        "codex" => c(true, true, false, HandoffChannel::Developer, false, 16_000),
        "claude" => c(true, true, true, HandoffChannel::System, true, 180_000),
        "cursor" => c(true, false, false, HandoffChannel::User, false, 32_000),
        "copilot" => c(true, false, false, HandoffChannel::User, false, 16_000),
        _ => return None,
    })
}

/// What baton ships for `provider`: [`default_caps`] for a known provider, else the most
/// conservative capabilities (the last row of docs/facts.md's table).
pub fn shipped_caps(provider: &str) -> ResolvedCaps {
    default_caps(provider).unwrap_or(ResolvedCaps {
        resume: false,
        native_fork: false,
        rollback: false,
        accepts_handoff: true,
        handoff_channel: HandoffChannel::User,
        file_read: false,
        summarize: false,
        max_input_chars_per_turn: 16_000,
    })
}

/// Capabilities of `provider` in `state`: the state's `providers:` entry over the defaults.
/// A provider that is neither known nor declared gets the most conservative capabilities
/// (validation rejects such a provider, so this only matters for library users).
pub fn caps_for(state: &State, provider: &str) -> ResolvedCaps {
    let base = shipped_caps(provider);
    match state.providers.get(provider) {
        None => base,
        Some(o) => ResolvedCaps {
            resume: o.resume.unwrap_or(base.resume),
            native_fork: o.native_fork.unwrap_or(base.native_fork),
            rollback: o.rollback.unwrap_or(base.rollback),
            accepts_handoff: o.accepts_handoff.unwrap_or(base.accepts_handoff),
            handoff_channel: o.handoff_channel.unwrap_or(base.handoff_channel),
            file_read: o.file_read.unwrap_or(base.file_read),
            summarize: o.summarize.unwrap_or(base.summarize),
            max_input_chars_per_turn: o
                .max_input_chars_per_turn
                .unwrap_or(base.max_input_chars_per_turn),
        },
    }
}

/// The id of item `index` (0-based) of run `ordinal`: its own id or `r<ordinal>.<index+1>`.
pub fn item_id(item: &Item, ordinal: u32, index: usize) -> String {
    match item.id() {
        Some(id) => id.to_string(),
        None => {
            // Written digit by digit: every selection names every item of the covered runs,
            // and `format!` cost more than the rest of naming them.
            let mut s = String::with_capacity(24);
            s.push('r');
            push_decimal(&mut s, u64::from(ordinal));
            s.push('.');
            push_decimal(
                &mut s,
                u64::try_from(index.saturating_add(1)).unwrap_or(u64::MAX),
            );
            s
        }
    }
}

/// Append `n` in decimal.
fn push_decimal(s: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at = at.saturating_sub(1);
        if let Some(d) = digits.get_mut(at) {
            // `n % 10` is a single digit.
            *d = b'0'.saturating_add(u8::try_from(n % 10).unwrap_or(0));
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    for &d in digits.get(at..).unwrap_or_default() {
        s.push(char::from(d));
    }
}

/// Serialize a state back to YAML (used by export and `fmt`-like tooling).
pub fn to_yaml(state: &State) -> String {
    serde_yaml::to_string(state).unwrap_or_default()
}

/// A path helper for callers that want to name a file in errors.
pub fn display_path(p: &Path) -> String {
    PathBuf::from(p).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_item_ids_name_the_run_and_the_position() {
        let item = Item::Decision {
            id: None,
            text: "x".into(),
        };
        assert_eq!(item_id(&item, 6, 2), "r6.3");
        assert_eq!(item_id(&item, 0, 0), "r0.1");
        assert_eq!(item_id(&item, 10, 9), "r10.10");
        assert_eq!(
            item_id(&item, u32::MAX, 1_000_000),
            format!("r{}.1000001", u32::MAX)
        );
        let named = Item::Decision {
            id: Some("d1".into()),
            text: "x".into(),
        };
        assert_eq!(item_id(&named, 6, 2), "d1");
    }
}
