//! Files changed, aggregated: one entry per file and section, never one per edit.
//!
//! The file is named by its path relative to the thread's workspace root (`thread.workspace`),
//! or by its full path when no root is known or the file lies outside it. A `full` entry adds
//! what happened to it: created, deleted, renamed or modified (created then deleted when both),
//! the number of changes, and the lines added and removed (counted in the diffs, when the
//! state carries them; else the diff lines it reports). `line` entries (seed 004's
//! `File changed: <name>` lines) are left as they are.

use super::Candidate;
use crate::policy::Form;
use crate::state::{FileChangeKind, Item};
use std::collections::HashMap;

/// A file change's path as the document names it.
pub fn display_path(path: &str, workspace: Option<&str>) -> String {
    let Some(root) = workspace
        .map(|w| w.trim_end_matches(['/', '\\']))
        .filter(|r| !r.is_empty())
    else {
        return path.to_string();
    };
    match path.strip_prefix(root) {
        Some(rest) if rest.starts_with(['/', '\\']) && rest.len() > 1 => {
            rest.get(1..).unwrap_or(rest).to_string()
        }
        _ => path.to_string(),
    }
}

/// Lines added and removed in a unified diff (`+`/`-` lines, not the `+++`/`---` headers).
fn added_removed(diff: &str) -> (u64, u64) {
    let mut added = 0u64;
    let mut removed = 0u64;
    for line in diff.lines() {
        if line.starts_with('+') && !line.starts_with("+++") {
            added = added.saturating_add(1);
        } else if line.starts_with('-') && !line.starts_with("---") {
            removed = removed.saturating_add(1);
        }
    }
    (added, removed)
}

/// Merge the file-change candidates of one section that name the same file (all forms but
/// `line`) into the first of them, whose text becomes the aggregate and whose `merged` lists
/// the others' ids (provenance still names every included item).
pub(super) fn aggregate(
    chosen: &mut Vec<Candidate<'_>>,
    workspace: Option<&str>,
    red: &mut crate::redact::Context,
) {
    // (section, path as shown) -> the group of candidates naming that file.
    let mut first: HashMap<(usize, String), usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; chosen.len()];
    for (i, c) in chosen.iter().enumerate() {
        let Some(Item::FileChange { path, .. }) = c.ctx.item else {
            continue;
        };
        if c.form == Form::Line {
            continue;
        }
        let key = (c.section, display_path(path, workspace));
        let g = *first.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len().saturating_sub(1)
        });
        if let Some(members) = groups.get_mut(g) {
            members.push(i);
        }
        if let Some(slot) = group_of.get_mut(i) {
            *slot = Some(g);
        }
    }
    let mut texts: Vec<Option<String>> = groups
        .iter()
        .map(|members| Some(aggregate_text(chosen, members, workspace, red)))
        .collect();
    // Where each group's first candidate landed in `keep`.
    let mut kept_at: Vec<Option<usize>> = vec![None; groups.len()];
    let mut keep: Vec<Candidate<'_>> = Vec::with_capacity(chosen.len());
    for (i, c) in std::mem::take(chosen).into_iter().enumerate() {
        let Some(g) = group_of.get(i).copied().flatten() else {
            keep.push(c);
            continue;
        };
        match texts.get_mut(g).and_then(Option::take) {
            Some(text) => {
                if let Some(slot) = kept_at.get_mut(g) {
                    *slot = Some(keep.len());
                }
                keep.push(Candidate { text, ..c });
            }
            None => {
                let at = kept_at.get(g).copied().flatten();
                if let Some(first) = at.and_then(|k| keep.get_mut(k)) {
                    first.merged.push(c.ctx.id);
                }
            }
        }
    }
    *chosen = keep;
}

fn aggregate_text(
    chosen: &[Candidate<'_>],
    members: &[usize],
    workspace: Option<&str>,
    red: &mut crate::redact::Context,
) -> String {
    use std::fmt::Write as _;
    let mut full = false;
    let mut path = "";
    let mut id = "";
    let mut n = 0usize;
    let (mut first, mut last, mut renamed) = (None, None, false);
    let mut diff = None::<(u64, u64)>;
    let mut diff_lines = None::<i64>;
    for c in members.iter().filter_map(|i| chosen.get(*i)) {
        full |= c.form == Form::Full;
        let Some(Item::FileChange {
            path: p,
            change,
            diff: d,
            diff_lines: dl,
            ..
        }) = c.ctx.item
        else {
            continue;
        };
        n = n.saturating_add(1);
        path = p;
        id = &c.ctx.id;
        if let Some(k) = change {
            first.get_or_insert(*k);
            last = Some(*k);
            renamed |= *k == FileChangeKind::Renamed;
        }
        if let Some(d) = d {
            let (a, r) = added_removed(d);
            let (a0, r0) = diff.unwrap_or((0, 0));
            diff = Some((a0.saturating_add(a), r0.saturating_add(r)));
        } else if let Some(dl) = dl {
            diff_lines = Some(diff_lines.unwrap_or(0).saturating_add(*dl));
        }
    }
    let mut shown = red.text(id, &display_path(path, workspace)).into_owned();
    if !full {
        return shown;
    }
    let what = match (first, last) {
        (Some(FileChangeKind::Created), Some(FileChangeKind::Deleted)) => "created, then deleted",
        (Some(FileChangeKind::Created), _) => "created",
        (_, Some(FileChangeKind::Deleted)) => "deleted",
        _ if renamed => "renamed",
        _ => "modified",
    };
    // One string, written in place (this runs for every file of every selection).
    shown.reserve(48);
    let _ = write!(
        shown,
        " ({what}; {n} change{}",
        if n == 1 { "" } else { "s" }
    );
    let _ = match (diff, diff_lines) {
        (Some((a, r)), _) => write!(shown, "; +{a} -{r} lines"),
        (None, Some(d)) => write!(shown, "; {d} diff lines"),
        (None, None) => Ok(()),
    };
    shown.push(')');
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_relative_to_the_workspace() {
        assert_eq!(display_path("/w/p/src/a.rs", Some("/w/p")), "src/a.rs");
        assert_eq!(display_path("/w/p/src/a.rs", Some("/w/p/")), "src/a.rs");
        assert_eq!(display_path("/w/pq/a.rs", Some("/w/p")), "/w/pq/a.rs");
        assert_eq!(display_path("/w/p/src/a.rs", None), "/w/p/src/a.rs");
        assert_eq!(display_path("src/a.rs", Some("/w/p")), "src/a.rs");
    }

    #[test]
    fn diff_counts() {
        assert_eq!(added_removed("--- a\n+++ b\n@@\n+x\n-y\n z\n+w\n"), (2, 1));
    }
}
