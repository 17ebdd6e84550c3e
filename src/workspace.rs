//! The workspace step: read a repository, read-only, and write what it says into the state
//! before a decision (docs/facts.md, "Time and workspace").
//!
//! The engine never opens a repository: the facts `workspace.*` read only the state's
//! snapshots (`runs[].workspace`, `request.workspace`) and the history precomputed under
//! `request.workspace.git.since`. This step fills them from the repository on this machine,
//! so the decision log holds what the decision saw and replays exactly after the repository
//! moved on. The CLI, the store and the service call it; a library user may call it too, or
//! write the same fields itself.
//!
//! What cannot be read becomes a note, never an error: a cwd that is not a repository, a bare
//! or corrupt one, an unborn branch, an earlier HEAD that is gone (rebased away, a shallow
//! clone). Lists are bounded ([`MAX_LISTED`] paths, the rest counted) and so is the history
//! walk ([`MAX_COMMITS`]).

#[cfg(feature = "git")]
use crate::facts::workspace::short;
use crate::facts::workspace::{last_target_run, same_commit};
use crate::state::{GitSince, GitSnapshot, Run, State, Workspace};

/// Most paths a snapshot lists (dirty files, files changed since); the rest are counted.
pub const MAX_LISTED: usize = 1_000;

/// Most commits counted between two HEADs; past it the count is bounded, with a note.
pub const MAX_COMMITS: u64 = 100_000;

/// Most commits whose own changes order the changed files newest first; files changed only
/// by older commits follow in path order.
#[cfg(feature = "git")]
const ORDERED_COMMITS: usize = 200;

/// The live workspace of `cwd`: the directory and, when it is in a git repository, its HEAD,
/// branch and dirty files. Notes say what could not be read.
pub fn live(cwd: &str) -> (Workspace, Vec<String>) {
    let mut notes = Vec::new();
    let git = read_git(cwd, &mut notes);
    (
        Workspace {
            cwd: Some(cwd.to_string()),
            git,
            notes: notes.clone(),
        },
        notes,
    )
}

/// Fill `request.workspace.git.since` from the repository at `request.workspace.cwd`: the
/// commits and files changed between the target thread's last run's HEAD and the request's
/// HEAD. Does nothing when the state names no such workspace, when HEAD did not move, or when
/// `since` is already there for that HEAD (an app wrote it, or a replayed log). Returns notes
/// on what could not be read (also kept in `since.notes`).
pub fn fill_since(state: &mut State, target: &str) -> Vec<String> {
    fill_since_before(state, &[], target)
}

/// [`fill_since`] on a windowed state: `before` holds runs before its window (the target's
/// last run among them).
pub fn fill_since_before(state: &mut State, before: &[Run], target: &str) -> Vec<String> {
    let pt = crate::facts::find_target_thread(state, target);
    let Some(then) = last_target_run(state, before, pt)
        .and_then(|r| r.workspace.as_ref())
        .and_then(|w| w.git.as_ref())
        .and_then(|g| g.head.clone())
    else {
        return Vec::new();
    };
    let Some(ws) = state.request.workspace.as_mut() else {
        return Vec::new();
    };
    let Some(cwd) = ws.cwd.clone() else {
        return Vec::new();
    };
    let Some(git) = ws.git.as_mut() else {
        return Vec::new();
    };
    let Some(now) = git.head.clone() else {
        return Vec::new();
    };
    if same_commit(&then, &now)
        || git
            .since
            .as_ref()
            .is_some_and(|s| same_commit(&s.head, &then))
    {
        return Vec::new();
    }
    let since = read_since(&cwd, &then, &now);
    let notes = since.notes.clone();
    git.since = Some(since);
    notes
}

/// The live workspace of the request's cwd and its history since the target's last run:
/// [`live`] when the request names a cwd but no git state, then [`fill_since`]. What the CLI,
/// the store and the service call before deciding.
pub fn enrich(state: &mut State, target: &str) -> Vec<String> {
    enrich_before(state, &[], target)
}

/// [`enrich`] on a windowed state: `before` holds runs before its window.
pub fn enrich_before(state: &mut State, before: &[Run], target: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(ws) = state.request.workspace.as_mut() {
        if let (Some(cwd), None) = (ws.cwd.clone(), ws.git.as_ref()) {
            let (live, n) = live(&cwd);
            ws.git = live.git;
            ws.notes.extend(n.iter().cloned());
            notes.extend(n);
        }
    }
    notes.extend(fill_since_before(state, before, target));
    notes
}

#[cfg(feature = "git")]
fn read_git(cwd: &str, notes: &mut Vec<String>) -> Option<GitSnapshot> {
    imp::read_git(cwd, notes)
}

#[cfg(not(feature = "git"))]
fn read_git(_cwd: &str, notes: &mut Vec<String>) -> Option<GitSnapshot> {
    notes.push("baton was built without the `git` feature: the repository is not read".into());
    None
}

#[cfg(feature = "git")]
fn read_since(cwd: &str, then: &str, now: &str) -> GitSince {
    imp::read_since(cwd, then, now)
}

#[cfg(not(feature = "git"))]
fn read_since(_cwd: &str, then: &str, _now: &str) -> GitSince {
    GitSince {
        head: then.to_string(),
        notes: vec!["baton was built without the `git` feature: the repository is not read".into()],
        ..GitSince::default()
    }
}

#[cfg(feature = "git")]
mod imp {
    use super::{short, GitSince, GitSnapshot, MAX_COMMITS, MAX_LISTED, ORDERED_COMMITS};
    use git2::{Delta, DiffOptions, ErrorCode, Oid, Repository, StatusOptions};
    use std::collections::HashSet;
    use std::path::Path;

    fn open(cwd: &str, notes: &mut Vec<String>) -> Option<Repository> {
        let path = Path::new(cwd);
        if !path.is_dir() {
            notes.push(format!("{cwd} is not a directory on this machine"));
            return None;
        }
        match Repository::discover(path) {
            Ok(r) => Some(r),
            Err(e) if e.code() == ErrorCode::NotFound => {
                notes.push(format!("{cwd} is not in a git repository"));
                None
            }
            Err(e) => {
                notes.push(format!(
                    "cannot read the repository at {cwd}: {}",
                    e.message()
                ));
                None
            }
        }
    }

    pub(super) fn read_git(cwd: &str, notes: &mut Vec<String>) -> Option<GitSnapshot> {
        let repo = open(cwd, notes)?;
        let mut snap = GitSnapshot::default();
        match repo.head() {
            Ok(head) => {
                if head.is_branch() {
                    snap.branch = head.shorthand().ok().map(str::to_string);
                }
                match head.peel_to_commit() {
                    Ok(c) => snap.head = Some(c.id().to_string()),
                    Err(e) => notes.push(format!("HEAD names no commit: {}", e.message())),
                }
            }
            Err(e) if e.code() == ErrorCode::UnbornBranch => {
                notes.push("HEAD is on a branch with no commit yet".to_string());
                snap.branch = unborn_branch(&repo);
            }
            Err(e) => notes.push(format!("cannot read HEAD: {}", e.message())),
        }
        if repo.is_bare() {
            notes.push(format!("{cwd} is a bare repository: no files are dirty"));
            return Some(snap);
        }
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .exclude_submodules(true);
        match repo.statuses(Some(&mut opts)) {
            Ok(statuses) => {
                let workdir = repo.workdir().map(Path::to_path_buf);
                let mut dirty: Vec<(Option<std::time::SystemTime>, String)> = statuses
                    .iter()
                    .filter_map(|e| e.path().ok().map(str::to_string))
                    .map(|p| {
                        let mtime = workdir
                            .as_ref()
                            .and_then(|w| std::fs::symlink_metadata(w.join(&p)).ok())
                            .and_then(|m| m.modified().ok());
                        (mtime, p)
                    })
                    .collect();
                // Newest first; a deleted file (no mtime) last; then by path.
                dirty.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                let total = dirty.len();
                snap.dirty = dirty.into_iter().take(MAX_LISTED).map(|(_, p)| p).collect();
                snap.dirty_more = u64::try_from(total.saturating_sub(MAX_LISTED)).unwrap_or(0);
            }
            Err(e) => notes.push(format!("cannot list dirty files: {}", e.message())),
        }
        Some(snap)
    }

    fn unborn_branch(repo: &Repository) -> Option<String> {
        let head = repo.find_reference("HEAD").ok()?;
        let target = head.symbolic_target().ok()??;
        target.strip_prefix("refs/heads/").map(str::to_string)
    }

    fn commit<'r>(repo: &'r Repository, id: &str) -> Option<git2::Commit<'r>> {
        let obj = repo.revparse_single(id).ok()?;
        obj.peel_to_commit().ok()
    }

    pub(super) fn read_since(cwd: &str, then: &str, now: &str) -> GitSince {
        let mut since = GitSince {
            head: then.to_string(),
            ..GitSince::default()
        };
        let Some(repo) = open(cwd, &mut since.notes) else {
            return since;
        };
        if repo.is_shallow() {
            since
                .notes
                .push("the repository is a shallow clone: its history may be cut".to_string());
        }
        let Some(old) = commit(&repo, then) else {
            since.notes.push(format!(
                "the target's last HEAD {} is not in the repository (rebased away, or cut by a shallow clone): commits and files changed unknown",
                short(then)
            ));
            return since;
        };
        let Some(new) = commit(&repo, now) else {
            since.notes.push(format!(
                "HEAD {} is not in the repository: commits and files changed unknown",
                short(now)
            ));
            return since;
        };
        let (order, commits) = walk(&repo, new.id(), old.id(), &mut since.notes);
        since.commits = commits;
        // The files changed between the two trees, in the order their newest commit changed
        // them; the rest by path.
        let changed = match (old.tree(), new.tree()) {
            (Ok(a), Ok(b)) => {
                let mut opts = DiffOptions::new();
                opts.ignore_submodules(true);
                match repo.diff_tree_to_tree(Some(&a), Some(&b), Some(&mut opts)) {
                    Ok(d) => d
                        .deltas()
                        .filter(|d| d.status() != Delta::Unmodified)
                        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
                        .filter_map(|p| p.to_str().map(str::to_string))
                        .collect::<Vec<_>>(),
                    Err(e) => {
                        since
                            .notes
                            .push(format!("cannot compare the two trees: {}", e.message()));
                        return since;
                    }
                }
            }
            _ => {
                since
                    .notes
                    .push("cannot read the commits' trees: files changed unknown".to_string());
                return since;
            }
        };
        let set: HashSet<&str> = changed.iter().map(String::as_str).collect();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut files: Vec<String> = Vec::new();
        for p in order
            .iter()
            .map(String::as_str)
            .filter(|p| set.contains(p))
            .chain(changed.iter().map(String::as_str))
        {
            if seen.insert(p) {
                files.push(p.to_string());
            }
        }
        let total = files.len();
        files.truncate(MAX_LISTED);
        since.files_more = u64::try_from(total.saturating_sub(MAX_LISTED)).unwrap_or(0);
        since.files = Some(files);
        since
    }

    /// The paths the newest commits between `old` and `new` changed, newest first, and how
    /// many commits `new` has that `old` has not (bounded).
    fn walk(
        repo: &Repository,
        new: Oid,
        old: Oid,
        notes: &mut Vec<String>,
    ) -> (Vec<String>, Option<u64>) {
        let mut order = Vec::new();
        let mut walk = match repo.revwalk() {
            Ok(w) => w,
            Err(e) => {
                notes.push(format!("cannot walk the history: {}", e.message()));
                return (order, None);
            }
        };
        if walk.push(new).is_err() || walk.hide(old).is_err() {
            notes.push("cannot walk the history between the two HEADs".to_string());
            return (order, None);
        }
        let mut count: u64 = 0;
        for (i, id) in walk.enumerate() {
            let Ok(id) = id else {
                notes.push(format!(
                    "the history walk stopped after {count} commits (a missing object: a shallow clone?)"
                ));
                return (order, None);
            };
            count = count.saturating_add(1);
            if count >= MAX_COMMITS {
                notes.push(format!(
                    "more than {MAX_COMMITS} commits since the target's last HEAD: counted up to the bound"
                ));
                break;
            }
            if i < ORDERED_COMMITS {
                order.extend(commit_paths(repo, id));
            }
        }
        (order, Some(count))
    }

    fn commit_paths(repo: &Repository, id: Oid) -> Vec<String> {
        let Ok(c) = repo.find_commit(id) else {
            return Vec::new();
        };
        let Ok(tree) = c.tree() else {
            return Vec::new();
        };
        let parent = c.parent(0).ok().and_then(|p| p.tree().ok());
        let Ok(diff) = repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), None) else {
            return Vec::new();
        };
        diff.deltas()
            .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
            .filter_map(|p| p.to_str().map(str::to_string))
            .collect()
    }
}
