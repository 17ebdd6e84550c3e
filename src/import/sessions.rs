//! Finding session logs in the tools' default locations: Claude Code's
//! `$HOME/.claude/projects/<slug>/<session>.jsonl` and Codex CLI's
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` (`$CODEX_HOME` defaults to
//! `$HOME/.codex`). Only the head of each log is read (see [`HEAD_BYTES`]).

use super::{import_reader, ImportOptions, Tool, Warning};
use crate::state::Item;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How much of each log `list_sessions` reads to find its id, directory and first prompt.
pub const HEAD_BYTES: u64 = 256 * 1024;

/// Where to look for each tool's sessions (`None`: do not look).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionDirs {
    /// Claude Code's projects directory (`~/.claude/projects`).
    pub claude: Option<PathBuf>,
    /// Codex CLI's sessions directory (`~/.codex/sessions`).
    pub codex: Option<PathBuf>,
}

impl SessionDirs {
    /// The default locations for `home` (else `$HOME`), honouring `$CODEX_HOME`.
    pub fn defaults(home: Option<PathBuf>) -> SessionDirs {
        let home = home.or_else(|| std::env::var_os("HOME").map(PathBuf::from));
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".codex")));
        SessionDirs {
            claude: home.as_ref().map(|h| h.join(".claude").join("projects")),
            codex: codex_home.map(|c| c.join("sessions")),
        }
    }
}

/// One session log found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionInfo {
    #[serde(serialize_with = "ser_tool")]
    pub tool: Tool,
    /// The session id (the provider thread id after import).
    pub id: String,
    pub path: PathBuf,
    /// The working directory the session ran in, when its head says.
    pub cwd: Option<String>,
    /// The first real user prompt (one line), when its head has one.
    pub first_prompt: Option<String>,
    /// Size of the log in bytes.
    pub size: u64,
    /// Last modification of the log.
    #[serde(skip)]
    pub modified: SystemTime,
}

fn ser_tool<S: serde::Serializer>(t: &Tool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.as_str())
}

/// Every session of `tool` (or of both tools) in `dirs`, newest first; with `cwd`, only
/// sessions that ran in that directory. Logs that cannot be read are reported as warnings.
pub fn list_sessions(
    dirs: &SessionDirs,
    tool: Option<Tool>,
    cwd: Option<&Path>,
) -> (Vec<SessionInfo>, Vec<Warning>) {
    let mut files: Vec<(Tool, PathBuf)> = Vec::new();
    if tool.is_none() || tool == Some(Tool::ClaudeCode) {
        if let Some(d) = &dirs.claude {
            for project in read_dir_sorted(d) {
                if project.is_dir() {
                    for f in read_dir_sorted(&project) {
                        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        if name.ends_with(".jsonl") && !name.starts_with("agent-") && f.is_file() {
                            files.push((Tool::ClaudeCode, f));
                        }
                    }
                }
            }
        }
    }
    if tool.is_none() || tool == Some(Tool::Codex) {
        if let Some(d) = &dirs.codex {
            walk_rollouts(d, 0, &mut files);
        }
    }
    let want_cwd = cwd.map(normalise);
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for (tool, path) in files {
        match describe(tool, &path) {
            Ok(info) => {
                if let Some(w) = &want_cwd {
                    if info.cwd.as_deref().map(|c| normalise(Path::new(c))) != Some(w.clone()) {
                        continue;
                    }
                }
                out.push(info);
            }
            Err(w) => warnings.push(w),
        }
    }
    out.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.id.cmp(&b.id)));
    (out, warnings)
}

/// Why [`find_session`] found no one session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FindSessionError {
    /// A log named for the id exists but cannot be read (a FIFO, a device, ...).
    #[error("the session log {file} cannot be read: {reason}")]
    Unreadable {
        /// The log's path, as shown.
        file: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// No session's id is or starts with the id.
    #[error("no session \"{id}\" in {searched}")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The directories searched, as shown.
        searched: String,
    },
    /// More than one session's id starts with the id.
    #[error("\"{id}\" matches {count} sessions ({}); give more of the id", .some.join(", "))]
    Ambiguous {
        /// The id asked for.
        id: String,
        /// How many sessions match.
        count: usize,
        /// The first few matching ids.
        some: Vec<String>,
    },
}

/// The session whose id is `id` (or starts with it, when only one does).
pub fn find_session(dirs: &SessionDirs, id: &str) -> Result<SessionInfo, FindSessionError> {
    let (all, unreadable) = list_sessions(dirs, None, None);
    if let Some(s) = all.iter().find(|s| s.id == id) {
        return Ok(s.clone());
    }
    let matches: Vec<&SessionInfo> = all.iter().filter(|s| s.id.starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            // A log named for the id that could not be read (a FIFO, a device, ...): say so.
            let named = unreadable.iter().find(|w| {
                Path::new(&w.file)
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(|s| s.contains(id))
            });
            Err(match named {
                Some(w) => FindSessionError::Unreadable {
                    file: w.file.clone(),
                    reason: w
                        .message
                        .strip_prefix("cannot read: ")
                        .unwrap_or(&w.message)
                        .to_string(),
                },
                None => FindSessionError::NotFound {
                    id: id.to_string(),
                    searched: searched(dirs),
                },
            })
        }
        many => Err(FindSessionError::Ambiguous {
            id: id.to_string(),
            count: many.len(),
            some: many.iter().take(5).map(|s| s.id.clone()).collect(),
        }),
    }
}

fn searched(dirs: &SessionDirs) -> String {
    let mut v = Vec::new();
    if let Some(c) = &dirs.claude {
        v.push(c.display().to_string());
    }
    if let Some(c) = &dirs.codex {
        v.push(c.display().to_string());
    }
    if v.is_empty() {
        "no directory (HOME is not set)".to_string()
    } else {
        v.join(" and ")
    }
}

fn describe(tool: Tool, path: &Path) -> Result<SessionInfo, Warning> {
    let warn = |message: String| Warning {
        file: path.display().to_string(),
        line: 0,
        message,
    };
    // A FIFO or a device named like a log is refused without blocking on it.
    let file = crate::input::open(path).map_err(|e| warn(format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| warn(format!("cannot read: {}", crate::state::io_reason(&e))))?;
    let name = path.display().to_string();
    let imported = import_reader(
        tool,
        file.take(HEAD_BYTES),
        &name,
        &ImportOptions::default(),
    )
    .map_err(|e| warn(format!("skipped: {e}")))?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("")
        .to_string();
    let id = if imported.state.thread.id == format!("{}-session", tool.as_str()) {
        stem
    } else {
        imported.session_id.clone()
    };
    let first_prompt = imported
        .state
        .runs
        .iter()
        .flat_map(|r| r.items.iter())
        .find_map(|i| match i {
            Item::UserMessage { text, .. } => Some(super::mapping::one_line(text, 80)),
            _ => None,
        });
    Ok(SessionInfo {
        tool,
        id,
        path: path.to_path_buf(),
        cwd: imported.cwd,
        first_prompt,
        size: meta.len(),
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

fn walk_rollouts(dir: &Path, depth: u32, out: &mut Vec<(Tool, PathBuf)>) {
    if depth > 4 {
        return;
    }
    for p in read_dir_sorted(dir) {
        if p.is_dir() {
            walk_rollouts(&p, depth.saturating_add(1), out);
        } else {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("rollout-") && name.ends_with(".jsonl") {
                out.push((Tool::Codex, p));
            }
        }
    }
}

fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn normalise(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        let s = p.display().to_string();
        PathBuf::from(s.trim_end_matches('/'))
    })
}
