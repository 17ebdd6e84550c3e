//! When and where each imported run ran: the timestamps, working directory and git state the
//! session logs write per entry (Claude Code: `timestamp`, `cwd`, `gitBranch` on every entry;
//! Codex: `timestamp` on every line, `cwd` and `git` in `session_meta`, `cwd` in
//! `turn_context`). Each adapter extracts an [`Observed`] per entry with its own helper; the
//! builder folds them into the run the entry belongs to. Nothing is parsed or guessed here:
//! the strings go into the state as the log wrote them, and the facts layer notes a date it
//! cannot read.

use crate::state::{GitSnapshot, Workspace};

/// What one log entry says about when and where it was written.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Observed<'a> {
    pub at: Option<&'a str>,
    pub cwd: Option<&'a str>,
    pub branch: Option<&'a str>,
    pub head: Option<&'a str>,
}

/// A run's times and workspace so far: the first timestamp starts it, the last ends it, the
/// newest cwd and git state are where it ended.
#[derive(Debug, Default, Clone)]
pub(crate) struct RunWhere {
    started_at: Option<String>,
    ended_at: Option<String>,
    cwd: Option<String>,
    branch: Option<String>,
    head: Option<String>,
}

fn set(slot: &mut Option<String>, value: Option<&str>) {
    if let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) {
        *slot = Some(v.to_string());
    }
}

impl RunWhere {
    /// Fold in one entry.
    pub(crate) fn observe(&mut self, o: Observed<'_>) {
        if self.started_at.is_none() {
            set(&mut self.started_at, o.at);
        }
        set(&mut self.ended_at, o.at);
        set(&mut self.cwd, o.cwd);
        set(&mut self.branch, o.branch);
        set(&mut self.head, o.head);
    }

    /// What the log said before the first run (Codex's `session_meta`) fills what the first
    /// run's own entries did not say.
    pub(crate) fn inherit(&mut self, before: &RunWhere) {
        for (slot, value) in [
            (&mut self.cwd, &before.cwd),
            (&mut self.branch, &before.branch),
            (&mut self.head, &before.head),
        ] {
            if slot.is_none() {
                slot.clone_from(value);
            }
        }
    }

    /// `(started_at, ended_at, workspace)` for the run.
    pub(crate) fn into_fields(self) -> (Option<String>, Option<String>, Option<Workspace>) {
        let git = (self.branch.is_some() || self.head.is_some()).then(|| GitSnapshot {
            head: self.head,
            branch: self.branch,
            ..GitSnapshot::default()
        });
        let workspace = (self.cwd.is_some() || git.is_some()).then(|| Workspace {
            cwd: self.cwd,
            git,
            notes: Vec::new(),
        });
        (self.started_at, self.ended_at, workspace)
    }
}
