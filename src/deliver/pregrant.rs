//! The scoped pre-grant: the child may `Read` exactly one canonical path, on exactly one
//! turn of exactly one thread, a bounded number of times (normally once).
//!
//! Check order (the first failing rule decides the reason):
//! 1. the tool arguments must carry a path (`file_path`, else `path`; both present and
//!    different is ambiguous and denied);
//! 2. a grant must exist for the thread and turn;
//! 3. the tool must equal the grant's tool exactly;
//! 4. the path must not contain a `..` component, and must be absolute;
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
                g.uses_left -= 1;
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// Extract the requested path from the arguments.
fn requested_path(args: &PathArg) -> Result<PathBuf, String> {
    match args {
        PathArg::Path(p) => Ok(p.clone()),
        PathArg::Args(v) => {
            let get = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
            match (get("file_path"), get("path")) {
                (Some(a), Some(b)) if a != b => Err(format!(
                    "tool arguments are ambiguous: file_path {a:?} and path {b:?} differ"
                )),
                (Some(a), _) => Ok(PathBuf::from(a)),
                (None, Some(b)) => Ok(PathBuf::from(b)),
                (None, None) => Err("tool arguments carry no `file_path` or `path` string".into()),
            }
        }
    }
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
        Err(reason) => return Ok(Verdict::deny(reason)),
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
