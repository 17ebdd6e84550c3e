//! The scoped pre-grant: the child may `Read` exactly one canonical path, on exactly one
//! turn of exactly one thread, a bounded number of times (normally once).
//!
//! Check order (the first failing rule decides the reason):
//! 1. the tool arguments must carry a path (`file_path`, else `path`); both present and
//!    different, a non-string value under either, or another path-naming key next to them
//!    is ambiguous and denied;
//! 2. a grant must exist for the thread and turn;
//! 3. the tool must equal the grant's tool exactly;
//! 4. the path must not contain a `..` component, must be absolute, and must not end in a
//!    separator (`doc/` or `doc/.` names a directory; normalising would drop the slash);
//! 5. neither the requested path nor any directory on the way to it may be a symlink;
//! 6. the lexically normalised path must equal the granted canonical path;
//! 7. the path must exist and canonicalise to the granted path;
//! 8. the grant must have a use left; an allow consumes one.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::DeliveryError;

pub use crate::ids::GRANTABLE_TOOL;

/// A pre-grant for one tool on one canonical path for one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The thread the child runs in.
    pub thread: String,
    /// The turn (run number) the grant is for.
    pub run: u32,
    /// The granted tool; always `Read`.
    pub tool: String,
    /// The canonical path of the granted document.
    pub path: PathBuf,
    /// Remaining uses.
    pub uses_left: u32,
    /// The handoff id the document belongs to.
    pub handoff: String,
}

/// Storage for grants. The memory store is below; a SQLite store implements the same trait.
pub trait GrantStore {
    /// All grants for `thread` on turn `run` (including used-up ones).
    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError>;
    /// Take one use of the grant for (`thread`, `run`, `path`); `Ok(false)` if there is no
    /// such grant or it has no use left.
    fn consume(&mut self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError>;
    /// Store a grant.
    fn insert(&mut self, g: Grant) -> Result<(), DeliveryError>;
}

/// An in-memory [`GrantStore`].
#[derive(Debug, Default, Clone)]
pub struct MemoryGrantStore {
    grants: HashMap<(String, u32), Vec<Grant>>,
}

impl MemoryGrantStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl GrantStore for MemoryGrantStore {
    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError> {
        Ok(self
            .grants
            .get(&(thread.to_string(), run))
            .cloned()
            .unwrap_or_default())
    }

    fn consume(&mut self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError> {
        let Some(grants) = self.grants.get_mut(&(thread.to_string(), run)) else {
            return Ok(false);
        };
        match grants
            .iter_mut()
            .find(|g| g.path == path && g.uses_left > 0)
        {
            Some(g) => {
                g.uses_left = g.uses_left.saturating_sub(1);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, g: Grant) -> Result<(), DeliveryError> {
        self.grants
            .entry((g.thread.clone(), g.run))
            .or_default()
            .push(g);
        Ok(())
    }
}

/// Issue a grant for `tool` (must be `Read`) on `document_path` for `thread`'s turn `run`,
/// with `uses` uses (at least 1).
///
/// The path is canonicalised now, so the document must exist. The grant's `handoff` is
/// the name of the directory containing the document (the off-band layout is
/// `<root>/<thread>/<handoff>/handoff.md`).
pub fn issue(
    store: &mut dyn GrantStore,
    thread: &str,
    run: u32,
    tool: &str,
    document_path: &Path,
    uses: u32,
) -> Result<Grant, DeliveryError> {
    let invalid = |why: String| DeliveryError::InvalidGrant {
        path: document_path.to_path_buf(),
        why,
    };
    if tool != GRANTABLE_TOOL {
        return Err(invalid(format!(
            "only {GRANTABLE_TOOL} can be pre-granted, not {tool}"
        )));
    }
    if uses == 0 {
        return Err(invalid("a grant needs at least one use".to_string()));
    }
    if thread.is_empty() {
        return Err(invalid("the thread id is empty".to_string()));
    }
    if has_parent_component(document_path) {
        return Err(invalid("the path contains `..`".to_string()));
    }
    let canonical = fs::canonicalize(document_path)
        .map_err(|e| invalid(format!("it cannot be resolved: {e}")))?;
    let meta = fs::metadata(&canonical).map_err(|e| DeliveryError::from_io(&canonical, e))?;
    if !meta.is_file() {
        return Err(invalid("it is not a regular file".to_string()));
    }
    let handoff = canonical
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let grant = Grant {
        thread: thread.to_string(),
        run,
        tool: tool.to_string(),
        path: canonical,
        uses_left: uses,
        handoff,
    };
    store.insert(grant.clone())?;
    Ok(grant)
}

/// Where the requested path comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathArg {
    /// A plain path.
    Path(PathBuf),
    /// A tool's JSON arguments; the path is taken from `file_path` (Claude's Read) or
    /// `path` (other tools).
    Args(serde_json::Value),
}

/// A permission check the child's tool call triggers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRequest {
    /// The thread the tool call happens in.
    pub thread: String,
    /// The turn the tool call happens on.
    pub run: u32,
    /// The tool name, exactly as the provider reports it.
    pub tool: String,
    /// The requested path.
    pub args: PathArg,
}

/// The answer to a [`CheckRequest`]; serialises as `{"allow":..,"reason":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// Whether the call may proceed without prompting.
    pub allow: bool,
    /// Why, in words.
    pub reason: String,
}

impl Verdict {
    fn deny(reason: impl Into<String>) -> Self {
        Verdict {
            allow: false,
            reason: reason.into(),
        }
    }
}

fn has_parent_component(p: &Path) -> bool {
    p.components().any(|c| matches!(c, Component::ParentDir))
}

/// The argument keys a path is read from, in order of preference: `file_path` (Claude's
/// `Read`), then `path` (other tools).
const PATH_KEYS: [&str; 2] = ["file_path", "path"];

/// Other argument keys some file-reading tools take a path from. A call that carries one of
/// these next to `file_path`/`path` is ambiguous: the tool might read that path instead of the
/// one checked.
const OTHER_PATH_KEYS: [&str; 10] = [
    "filePath",
    "file",
    "filename",
    "fileName",
    "target_file",
    "targetFile",
    "notebook_path",
    "uri",
    "paths",
    "files",
];

/// Extract the requested path from the arguments.
///
/// JSON arguments must be an object whose `file_path` and `path`, where present, are strings
/// naming the same path, with no other key that names a path. Anything else is ambiguous:
/// the checked path might not be the one the tool reads.
fn requested_path(args: &PathArg) -> Result<PathBuf, ToolArgsError> {
    let v = match args {
        PathArg::Path(p) => return Ok(p.clone()),
        PathArg::Args(v) => v,
    };
    let Some(obj) = v.as_object() else {
        return Err(ToolArgsError::NotAnObject { got: json_kind(v) });
    };
    let mut found: Option<(&str, &str)> = None;
    for key in PATH_KEYS {
        let Some(value) = obj.get(key) else { continue };
        let Some(text) = value.as_str() else {
            return Err(ToolArgsError::PathNotAString {
                key,
                got: json_kind(value),
            });
        };
        match found {
            Some((k, a)) if a != text => {
                return Err(ToolArgsError::PathsDiffer {
                    first: (k, a.to_string()),
                    second: (key, text.to_string()),
                })
            }
            Some(_) => {}
            None => found = Some((key, text)),
        }
    }
    let Some((_, text)) = found else {
        return Err(ToolArgsError::NoPath);
    };
    if let Some(other) = OTHER_PATH_KEYS.iter().find(|k| obj.contains_key(**k)) {
        return Err(ToolArgsError::OtherPathKey { key: other });
    }
    Ok(PathBuf::from(text))
}

/// Why a tool call's arguments name no one path a pre-grant can be checked against
/// ([`parse_tool_args`], [`check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolArgsError {
    /// The text is not JSON.
    #[error("not valid JSON: {reason}")]
    NotJson {
        /// The JSON parser's message (with its line and column).
        reason: String,
    },
    /// A top-level key is given more than once.
    #[error("the arguments are ambiguous: key {key:?} is given more than once")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// The arguments are not a JSON object.
    #[error("tool arguments are not a JSON object (got {got})")]
    NotAnObject {
        /// What they are instead (`an array`, `a string`, ...).
        got: &'static str,
    },
    /// A key that names the path holds something other than a string.
    #[error("tool arguments are ambiguous: `{key}` is {got}, not a path string")]
    PathNotAString {
        /// The key (`file_path`, `path`).
        key: &'static str,
        /// What it holds instead.
        got: &'static str,
    },
    /// Two keys that name the path name different paths.
    #[error("tool arguments are ambiguous: {} {:?} and {} {:?} differ", .first.0, .first.1, .second.0, .second.1)]
    PathsDiffer {
        /// The first key and its path.
        first: (&'static str, String),
        /// The second key and its path.
        second: (&'static str, String),
    },
    /// No key names the path.
    #[error("tool arguments carry no `file_path` or `path` string")]
    NoPath,
    /// Another key names a path as well (`paths`, `uri`, ...).
    #[error("tool arguments are ambiguous: they name a path in `{key}` as well")]
    OtherPathKey {
        /// The other key.
        key: &'static str,
    },
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Parse a tool call's arguments from JSON text for [`PathArg::Args`], refusing an object
/// that gives a top-level key more than once (`{"path": "a", "path": "b"}`): a JSON parser
/// keeps one of the two, and which one differs between parsers, so the path checked might
/// not be the one the tool reads.
pub fn parse_tool_args(text: &str) -> Result<serde_json::Value, ToolArgsError> {
    let not_json = |e: serde_json::Error| ToolArgsError::NotJson {
        reason: e.to_string(),
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(not_json)?;
    if value.is_object() {
        let keys: DuplicateKeys = serde_json::from_str(text).map_err(not_json)?;
        if let Some(key) = keys.0 {
            return Err(ToolArgsError::DuplicateKey { key });
        }
    }
    Ok(value)
}

/// The first top-level key of a JSON object that occurs twice, if any.
struct DuplicateKeys(Option<String>);

impl<'de> Deserialize<'de> for DuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = DuplicateKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<DuplicateKeys, A::Error> {
                let mut seen = std::collections::HashSet::new();
                let mut dup = None;
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if !seen.insert(key.clone()) && dup.is_none() {
                        dup = Some(key);
                    }
                }
                Ok(DuplicateKeys(dup))
            }
        }
        d.deserialize_map(V)
    }
}

/// Whether the path, as written, ends in a separator (`doc/`) or in `/.` (`doc/.`): it then
/// names a directory, and lexical normalisation would silently drop that.
fn names_a_directory(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    b.len() > 1 && (b.ends_with(b"/") || b.ends_with(b"/."))
}

/// Lexical normalisation: drop `.` components and duplicate separators. (`..` has been
/// rejected before this is called.)
fn normalise(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// The first symlink on the way to `p` (inclusive), if any. Stops at the first component
/// that does not exist.
fn first_symlink(p: &Path) -> Option<PathBuf> {
    let mut cur = PathBuf::new();
    for c in p.components() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return Some(cur),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Decide whether a tool call may proceed under a pre-grant. An allow consumes one use.
pub fn check(store: &mut dyn GrantStore, req: &CheckRequest) -> Result<Verdict, DeliveryError> {
    let raw = match requested_path(&req.args) {
        Ok(p) => p,
        Err(reason) => return Ok(Verdict::deny(reason.to_string())),
    };
    let shown = raw.display();

    let grants = store.find(&req.thread, req.run)?;
    if grants.is_empty() {
        return Ok(Verdict::deny(format!(
            "no pre-grant for thread {} turn {}",
            req.thread, req.run
        )));
    }
    let for_tool: Vec<&Grant> = grants.iter().filter(|g| g.tool == req.tool).collect();
    if for_tool.is_empty() {
        return Ok(Verdict::deny(format!(
            "tool {} is not granted (only {})",
            req.tool, GRANTABLE_TOOL
        )));
    }
    if has_parent_component(&raw) {
        return Ok(Verdict::deny(format!("path {shown} contains `..`")));
    }
    if !raw.is_absolute() {
        return Ok(Verdict::deny(format!("path {shown} is not absolute")));
    }
    if names_a_directory(&raw) {
        return Ok(Verdict::deny(format!(
            "path {shown} ends with `/`, so it names a directory, not the granted document"
        )));
    }
    let lexical = normalise(&raw);
    if let Some(link) = first_symlink(&lexical) {
        return Ok(Verdict::deny(if link == lexical {
            format!("path {shown} is a symlink")
        } else {
            format!(
                "path {shown} passes through a symlink at {}",
                link.display()
            )
        }));
    }
    let Some(grant) = for_tool.iter().find(|g| g.path == lexical) else {
        let granted = for_tool
            .iter()
            .map(|g| g.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Ok(Verdict::deny(format!(
            "path {shown} is not the granted document {granted}"
        )));
    };
    let canonical = match fs::canonicalize(&lexical) {
        Ok(c) => c,
        Err(e) => {
            return Ok(Verdict::deny(format!(
                "path {shown} cannot be resolved: {e}"
            )))
        }
    };
    if canonical != grant.path {
        return Ok(Verdict::deny(format!(
            "path {shown} resolves to {}, not the granted document {}",
            canonical.display(),
            grant.path.display()
        )));
    }
    if grant.uses_left == 0 || !store.consume(&req.thread, req.run, &grant.path)? {
        return Ok(Verdict::deny("pre-grant already used"));
    }
    Ok(Verdict {
        allow: true,
        reason: format!(
            "pre-grant for thread {} turn {} allows {} of {} ({} use(s) left)",
            req.thread,
            req.run,
            req.tool,
            grant.path.display(),
            grant.uses_left.saturating_sub(1)
        ),
    })
}
