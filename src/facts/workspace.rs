//! Staleness from the clock and the workspace (docs/facts.md, "Time and workspace"): how long
//! the target thread has been idle, and what changed in its workspace since it last ran.
//!
//! Everything here reads the state only: the times the app wrote (`runs[].started_at`,
//! `ended_at`, `request.at`), the workspace snapshots (`runs[].workspace`,
//! `request.workspace`) and the history the workspace step or the app precomputed
//! (`request.workspace.git.since`). baton never reads the clock or the repository while
//! deciding, so a logged state replays to the same decision after the repository moved on.
//! A value that cannot be known is `None` (the fact is null) and a note says why; nothing is
//! guessed.

use crate::state::{GitSnapshot, Item, ProviderThread, Run, RunStatus, State, Workspace};
use std::collections::HashSet;

/// Most paths `workspace.files_changed_outside` lists; its count still counts them all.
pub const MAX_FILES: usize = 1_000;

/// Shortest abbreviated commit id compared with a full one (as git abbreviates).
const MIN_ABBREV: usize = 7;

/// The time and workspace facts for one target, with the notes `baton explain` shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Staleness {
    /// Seconds from the end of the target thread's last run to `request.at`.
    pub idle_seconds: Option<i64>,
    /// Seconds from the start of the thread's first run to `request.at`.
    pub age_seconds: Option<i64>,
    /// The request's cwd differs from the one the target's last run ran in.
    pub cwd_changed: Option<bool>,
    /// The request's branch differs from the one the target's last run ran on.
    pub branch_changed: Option<bool>,
    /// The request's HEAD differs from the one at the target's last run.
    pub head_moved: Option<bool>,
    /// HEAD at the target's last run and now, when both are known.
    pub heads: Option<(String, String)>,
    /// Commits between the two HEADs.
    pub commits: Option<u64>,
    /// Files changed between the two HEADs or dirty now that no run of the thread since the
    /// target's last run changed, newest first, at most [`MAX_FILES`].
    pub files_outside: Option<Vec<String>>,
    /// How many such files (with those beyond the bounds of the snapshot).
    pub files_outside_count: Option<i64>,
    /// Dirty files now (for the workspace note).
    pub dirty: Vec<String>,
    /// Why a value is null or bounded.
    pub notes: Vec<String>,
    /// Whether the state carries any time or workspace field at all (else explain says
    /// nothing).
    pub any: bool,
}

/// The target thread's newest run that was not rolled back, in `state` or else among
/// `before` (runs before a windowed state's window).
pub fn last_target_run<'a>(
    state: &'a State,
    before: &'a [Run],
    pt: Option<&ProviderThread>,
) -> Option<&'a Run> {
    let pt = pt?;
    let of_pt = |r: &&Run| {
        r.status != RunStatus::RolledBack && r.provider_thread.as_deref() == Some(pt.id.as_str())
    };
    state
        .runs
        .iter()
        .rev()
        .find(of_pt)
        .or_else(|| before.iter().rev().find(of_pt))
}

fn parse_time(
    value: Option<&str>,
    field: &str,
    notes: &mut Vec<String>,
) -> Option<jiff::Timestamp> {
    let text = value?;
    match text.trim().parse::<jiff::Timestamp>() {
        Ok(t) => Some(t),
        Err(_) => {
            notes.push(format!(
                "{field} {text:?} is not an RFC 3339 date (2026-01-05T10:00:00Z)"
            ));
            None
        }
    }
}

/// Whole seconds from `from` to `to`; `None` (with a note) when `from` is later.
fn seconds_between(
    from: jiff::Timestamp,
    to: jiff::Timestamp,
    what: &str,
    notes: &mut Vec<String>,
) -> Option<i64> {
    let secs = to.as_second().checked_sub(from.as_second())?;
    if secs < 0 {
        notes.push(format!(
            "{what} is after request.at ({from} > {to}): timestamps out of order, left unknown"
        ));
        return None;
    }
    Some(secs)
}

/// Whether two commit ids name the same commit: equal, or one an abbreviation (7 hex digits
/// or more) of the other.
pub fn same_commit(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() < MIN_ABBREV && short.len() != long.len() {
        return false;
    }
    long.get(..short.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(short))
}

fn trim_dir(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        p
    } else {
        t
    }
}

/// A path as the repository names it: relative to `roots` (the first that holds it) and
/// without a leading `./`.
fn repo_relative<'p>(path: &'p str, roots: &[&str]) -> &'p str {
    for root in roots {
        let root = trim_dir(root);
        if let Some(rest) = path.strip_prefix(root) {
            if let Some(rel) = rest.strip_prefix('/') {
                return rel;
            }
        }
    }
    path.strip_prefix("./").unwrap_or(path)
}

/// The time and workspace facts of `state` for the target thread `pt`. On a windowed state,
/// `before` holds the runs before the window the facts read: `first` (the thread's first run,
/// `None` when it has no start time) and the target's last run at the window's base.
pub fn staleness(
    state: &State,
    before: Option<(Option<&Run>, Option<&Run>)>,
    pt: Option<&ProviderThread>,
) -> Staleness {
    let mut s = Staleness {
        any: state.request.at.is_some()
            || state.request.workspace.is_some()
            || state
                .runs
                .iter()
                .any(|r| r.started_at.is_some() || r.ended_at.is_some() || r.workspace.is_some()),
        ..Staleness::default()
    };
    if !s.any {
        return s;
    }
    let mut notes: Vec<String> = state
        .request
        .workspace
        .iter()
        .flat_map(|w| w.notes.iter().cloned())
        .collect();
    let base: Vec<Run> = before
        .and_then(|(_, last)| last)
        .into_iter()
        .cloned()
        .collect();
    let last = last_target_run(state, &base, pt);
    let at = parse_time(state.request.at.as_deref(), "request.at", &mut notes);

    // Idle time: from the end of the target's last run.
    if let (Some(at), Some(run)) = (at, last) {
        let field = format!("runs[{}].ended_at", run.ordinal);
        match parse_time(run.ended_at.as_deref(), &field, &mut notes) {
            Some(end) => s.idle_seconds = seconds_between(end, at, &field, &mut notes),
            None if run.ended_at.is_none() && run.status != RunStatus::Running => {
                notes.push(format!("run {} has no ended_at: idle time unknown", run.ordinal))
            }
            None => {}
        }
        // A start after the end is out of order too: nothing is derived from that run.
        let start = parse_time(run.started_at.as_deref(), "", &mut Vec::new());
        let end = parse_time(run.ended_at.as_deref(), "", &mut Vec::new());
        if let (Some(b), Some(e)) = (start, end) {
            if b > e {
                notes.push(format!(
                    "run {} ended before it started ({e} < {b}): idle time unknown",
                    run.ordinal
                ));
                s.idle_seconds = None;
            }
        }
    }
    // Age: from the start of the thread's first run.
    if let Some(at) = at {
        let first = match before {
            Some((first, _)) => first,
            None => state.runs.iter().find(|r| r.status != RunStatus::RolledBack),
        };
        if let Some(first) = first.filter(|r| r.status != RunStatus::RolledBack) {
            let field = format!("runs[{}].started_at", first.ordinal);
            if let Some(b) = parse_time(first.started_at.as_deref(), &field, &mut notes) {
                s.age_seconds = seconds_between(b, at, &field, &mut notes);
            }
        }
    }

    // Workspace: the target's last run's snapshot against the request's.
    let then: Option<&Workspace> = last.and_then(|r| r.workspace.as_ref());
    let now: Option<&Workspace> = state.request.workspace.as_ref();
    if let (Some(then), Some(now)) = (then, now) {
        if let (Some(a), Some(b)) = (&then.cwd, &now.cwd) {
            s.cwd_changed = Some(trim_dir(a) != trim_dir(b));
        }
        let (tg, ng) = (then.git.as_ref(), now.git.as_ref());
        if let (Some(tg), Some(ng)) = (tg, ng) {
            match (&tg.branch, &ng.branch) {
                (Some(a), Some(b)) => s.branch_changed = Some(a != b),
                (None, _) | (_, None) if tg.head.is_some() && ng.head.is_some() => notes.push(
                    "a detached HEAD has no branch: workspace.branch_changed unknown".to_string(),
                ),
                _ => {}
            }
            if let (Some(a), Some(b)) = (&tg.head, &ng.head) {
                let moved = !same_commit(a, b);
                s.head_moved = Some(moved);
                s.heads = Some((a.clone(), b.clone()));
            }
        }
        history(state, last, ng, &mut s, &mut notes);
    }
    if let Some(g) = now.and_then(|w| w.git.as_ref()) {
        s.dirty = g.dirty.clone();
    }
    s.notes = notes;
    s
}

/// Commits and files changed since the target's last run.
fn history(
    state: &State,
    last: Option<&Run>,
    now: Option<&GitSnapshot>,
    s: &mut Staleness,
    notes: &mut Vec<String>,
) {
    let (Some(now), Some(moved)) = (now, s.head_moved) else {
        return;
    };
    let mut changed: Vec<&str> = Vec::new();
    let mut more: u64 = 0;
    if moved {
        let from = s.heads.as_ref().map(|h| h.0.as_str()).unwrap_or_default();
        let Some(since) = now.since.as_ref().filter(|g| same_commit(&g.head, from)) else {
            notes.push(format!(
                "no history since {} in the state: commits and files changed unknown",
                short(from)
            ));
            return;
        };
        notes.extend(since.notes.iter().cloned());
        s.commits = since.commits;
        let Some(files) = &since.files else {
            return;
        };
        changed.extend(files.iter().map(String::as_str));
        more = more.saturating_add(since.files_more);
    } else {
        s.commits = Some(0);
    }
    // Dirty files are the newest changes: they come first.
    let mut candidates: Vec<&str> = now.dirty.iter().map(String::as_str).collect();
    candidates.extend(changed);
    more = more.saturating_add(now.dirty_more);

    // What the thread itself changed since the target's last run is in the handoff already.
    let roots: Vec<&str> = [
        state.request.workspace.as_ref().and_then(|w| w.cwd.as_deref()),
        state.thread.workspace.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let after = last.map(|r| r.ordinal).unwrap_or(0);
    let by_thread: HashSet<&str> = state
        .runs
        .iter()
        .filter(|r| r.ordinal > after && r.status != RunStatus::RolledBack)
        .flat_map(|r| r.items.iter())
        .filter_map(|i| match i {
            Item::FileChange { path, .. } => Some(repo_relative(path, &roots)),
            _ => None,
        })
        .collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut outside: Vec<String> = Vec::new();
    let mut count: u64 = 0;
    for path in candidates {
        let rel = repo_relative(path, &roots);
        if by_thread.contains(rel) || !seen.insert(rel) {
            continue;
        }
        count = count.saturating_add(1);
        if outside.len() < MAX_FILES {
            outside.push(rel.to_string());
        }
    }
    if more > 0 {
        notes.push(format!(
            "{more} more changed files beyond the snapshot's bound are counted, not listed or matched against the thread's own changes"
        ));
    }
    let total = count.saturating_add(more);
    if total > outside.len() as u64 && more == 0 {
        notes.push(format!(
            "workspace.files_changed_outside lists the first {MAX_FILES} of {total} files"
        ));
    }
    s.files_outside_count = Some(i64::try_from(total).unwrap_or(i64::MAX));
    s.files_outside = Some(outside);
}

/// A commit id as people read it: its first 7 characters.
pub fn short(id: &str) -> &str {
    id.get(..MIN_ABBREV).unwrap_or(id)
}

/// A duration as `3 d 4 h`, `5 h 2 min`, `40 s`: the two largest units.
pub fn human_duration(secs: i64) -> String {
    const UNITS: [(i64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "min"), (1, "s")];
    let mut rest = secs.max(0);
    let mut parts = Vec::new();
    for (size, name) in UNITS {
        let n = rest.checked_div(size).unwrap_or(0);
        if n > 0 || (parts.is_empty() && size == 1) {
            parts.push(format!("{n} {name}"));
            rest = rest.checked_rem(size).unwrap_or(0);
        } else if !parts.is_empty() {
            break;
        }
        if parts.len() == 2 {
            break;
        }
    }
    parts.join(" ")
}

impl Staleness {
    /// The one line `baton explain` shows: "idle 3 d 4 h; HEAD moved a1b2c3d -> e4f5g6h (14
    /// commits), 23 files changed outside the thread". `None` when nothing is known.
    pub fn line(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(i) = self.idle_seconds {
            parts.push(format!("idle {}", human_duration(i)));
        }
        let mut ws: Vec<String> = Vec::new();
        if self.cwd_changed == Some(true) {
            ws.push("cwd changed".to_string());
        }
        if self.branch_changed == Some(true) {
            ws.push("branch changed".to_string());
        }
        match (&self.heads, self.head_moved) {
            (Some((a, b)), Some(true)) => {
                let mut h = format!("HEAD moved {} -> {}", short(a), short(b));
                if let Some(c) = self.commits {
                    let _ = std::fmt::Write::write_fmt(
                        &mut h,
                        format_args!(" ({c} commit{})", if c == 1 { "" } else { "s" }),
                    );
                }
                ws.push(h);
            }
            (Some((a, _)), Some(false)) => ws.push(format!("HEAD unchanged at {}", short(a))),
            _ => {}
        }
        if let Some(n) = self.files_outside_count {
            ws.push(format!(
                "{n} file{} changed outside the thread",
                if n == 1 { "" } else { "s" }
            ));
        }
        if !ws.is_empty() {
            parts.push(ws.join(", "));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Most paths of each list the workspace note names; the rest are counted.
const NOTE_PATHS: usize = 20;

fn listed(paths: &[String], total: u64) -> String {
    let shown: Vec<&str> = paths.iter().take(NOTE_PATHS).map(String::as_str).collect();
    let more = total.saturating_sub(shown.len() as u64);
    let mut out = shown.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

impl Staleness {
    /// Whether the workspace moved under the target thread: HEAD moved, or files changed
    /// outside the thread (committed or dirty).
    pub fn moved(&self) -> bool {
        self.head_moved == Some(true) || self.files_outside_count.is_some_and(|n| n > 0)
    }

    /// The workspace note (the `workspace` item's text): HEAD from -> to and its commits, the
    /// files changed outside the thread and the dirty files, newest first, each list cut at 20
    /// paths with the rest counted. `None` when the workspace did not move.
    pub fn note(&self) -> Option<String> {
        if !self.moved() {
            return None;
        }
        let mut lines = vec!["The workspace changed since this thread last ran.".to_string()];
        if let (Some((a, b)), Some(true)) = (&self.heads, self.head_moved) {
            let commits = match self.commits {
                Some(c) => format!(" ({c} commit{})", if c == 1 { "" } else { "s" }),
                None => String::new(),
            };
            lines.push(format!("- HEAD moved {} -> {}{commits}", short(a), short(b)));
        }
        if self.branch_changed == Some(true) {
            lines.push("- the branch changed".to_string());
        }
        if let (Some(files), Some(n)) = (&self.files_outside, self.files_outside_count) {
            if n > 0 {
                let total = u64::try_from(n).unwrap_or(0);
                lines.push(format!(
                    "- {n} file{} changed outside this thread (newest first): {}",
                    if n == 1 { "" } else { "s" },
                    listed(files, total)
                ));
            }
        }
        if !self.dirty.is_empty() {
            lines.push(format!(
                "- uncommitted now: {}",
                listed(&self.dirty, self.dirty.len() as u64)
            ));
        }
        lines.push("Re-read these files before relying on what the thread knew of them.".into());
        Some(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_two_units() {
        assert_eq!(human_duration(3 * 86_400 + 4 * 3_600 + 59), "3 d 4 h");
        assert_eq!(human_duration(40), "40 s");
        assert_eq!(human_duration(0), "0 s");
        assert_eq!(human_duration(3_600), "1 h");
        assert_eq!(human_duration(-5), "0 s");
    }

    #[test]
    fn abbreviated_commits_match() {
        assert!(same_commit("a1b2c3d", "a1b2c3d4e5f6"));
        assert!(!same_commit("a1b2", "a1b2c3d4e5f6"));
        assert!(same_commit("A1B2C3D", "a1b2c3d"));
        assert!(!same_commit("a1b2c3e", "a1b2c3d4e5f6"));
    }
}
