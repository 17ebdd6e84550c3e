//! The degradation ladder's finer steps (docs/rendering.md#budgets): texts to their first line,
//! successful outputs left out, file changes grouped by directory, older items counted.
//!
//! Each step reaches only the oldest runs it needs (the budget searches for the fewest, see
//! `fit`); a [`Degrade`](super::Degrade) records how far each reaches. What a step cannot
//! reach: must-keep items, the newest [`NEWEST_REQUESTS`] user messages and the decisions of
//! the newest [`NEWEST_DECISION_RUNS`] runs (only the last resort, `must_keep_only`, leaves
//! those out).

use super::{Candidate, Entry};
use crate::cut::thousands;
use crate::policy::Form;
use crate::state::Item;

/// The newest user messages no degradation step cuts or counts.
pub const NEWEST_REQUESTS: usize = 10;
/// The newest runs whose decisions no degradation step drops or counts.
pub const NEWEST_DECISION_RUNS: u32 = 100;
/// The newest runs `drop_oldest_runs` never reaches.
pub const NEWEST_RUNS_KEPT: usize = 10;

/// What a kind is called in a count line (`312 earlier requests`).
pub fn noun(kind: &str, n: usize) -> String {
    let one = n == 1;
    let word = match kind {
        "user_message" => ["request", "requests"],
        "assistant_message" => ["reply", "replies"],
        "decision" => ["decision", "decisions"],
        "command" => ["command", "commands"],
        "tool_call" => ["tool call", "tool calls"],
        "file_change" => ["file", "files"],
        "narration" => ["narration segment", "narration segments"],
        "error" => ["error", "errors"],
        "subagent_result" => ["subagent result", "subagent results"],
        _ => ["item", "items"],
    };
    let w = if one { word[0] } else { word[1] };
    format!("{} earlier {w}", thousands(n))
}

/// Where what the budget left out can be read, for a count line.
pub fn elsewhere(transcript: Option<&str>) -> String {
    match transcript {
        Some(p) => format!("read them whole in the transcript `{p}`"),
        None => "they are not sent".to_string(),
    }
}

/// The count line that stands for the `n` items of `kind` of runs `from`-`to` a step left out.
pub fn count_entry(kind: &'static str, n: usize, from: u32, to: u32, transcript: Option<&str>) -> Entry {
    let runs = if from == to {
        format!("run {from}")
    } else {
        format!("runs {from}-{to}")
    };
    Entry {
        id: format!("count:{kind}"),
        kind,
        run: from,
        text: format!(
            "{} ({runs}) are left out to fit the budget; {}.",
            noun(kind, n),
            elsewhere(transcript)
        ),
        truncated: false,
        degraded: false,
        must_keep: false,
    }
}

fn dir_and_name(shown: &str) -> (&str, &str) {
    match shown.rfind(['/', '\\']) {
        Some(at) => (
            shown.get(..=at).unwrap_or(""),
            shown.get(at.saturating_add(1)..).unwrap_or(shown),
        ),
        None => ("", shown),
    }
}

/// What [`group_files`] counted instead of naming.
#[derive(Debug, Default)]
pub(super) struct Counted {
    /// The ids of the counted files' items (every change of each), to be recorded as left out.
    pub ids: Vec<String>,
    /// Distinct files counted per directory, not named.
    pub files: usize,
    /// Distinct files grouped (named or counted).
    pub grouped: usize,
}

/// A directory's file-change entries in one section, as [`group_files`] groups them.
#[derive(Default)]
struct Group {
    dir: String,
    section: usize,
    /// Index in `chosen` of the candidate that becomes the group's entry.
    head: Option<usize>,
    first: usize,
    names: Vec<String>,
    /// Ids of the named files' items other than the head's.
    named_ids: Vec<String>,
    counted: Vec<String>,
    /// Distinct files counted (`counted` holds every change of each).
    counted_files: usize,
    from: u32,
    to: u32,
}

/// [`group_files`]' first pass: the group of each file-change entry of `chosen` (by section
/// and directory, as redacted in `red`), named or counted (first changed before
/// `count_before` and not in `keep`). Returns the groups, each entry's group, and how many
/// files were grouped and counted.
fn collect_groups(
    chosen: &[Candidate<'_>],
    workspace: Option<&str>,
    count_before: Option<u32>,
    keep: &std::collections::BTreeSet<String>,
    red: &mut crate::redact::Context,
) -> (Vec<Group>, Vec<Option<usize>>, usize, usize) {
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; chosen.len()];
    let (mut grouped, mut files_counted) = (0usize, 0usize);
    let mut group_at: std::collections::HashMap<(usize, String), usize> = Default::default();
    for (i, c) in chosen.iter().enumerate() {
        let path = match c.ctx.item {
            Some(Item::FileChange { path, .. }) if c.form != Form::Line && !c.must_keep => path,
            _ => continue,
        };
        // Redacted as the file's own entry is (`files::aggregate`): the same secret, the same
        // number.
        let shown = red
            .text(&c.ctx.id, &super::files::display_path(path, workspace))
            .into_owned();
        let (dir, name) = dir_and_name(&shown);
        // Found by (section, directory) in a map: a thread of thousands of directories would
        // otherwise search the groups once per file.
        let g = match group_at.get(&(c.section, dir.to_string())) {
            Some(g) => *g,
            None => {
                group_at.insert((c.section, dir.to_string()), groups.len());
                groups.push(Group {
                    dir: dir.to_string(),
                    section: c.section,
                    first: i,
                    from: u32::MAX,
                    ..Group::default()
                });
                groups.len().saturating_sub(1)
            }
        };
        if let Some(slot) = group_of.get_mut(i) {
            *slot = Some(g);
        }
        let Some(group) = groups.get_mut(g) else {
            continue;
        };
        let ids = std::iter::once(c.ctx.id.clone()).chain(c.merged.iter().cloned());
        let kept = keep.contains(&c.ctx.id) || c.merged.iter().any(|m| keep.contains(m));
        grouped = grouped.saturating_add(1);
        if count_before.is_some_and(|b| c.ctx.run < b) && !kept {
            files_counted = files_counted.saturating_add(1);
            group.counted_files = group.counted_files.saturating_add(1);
            group.counted.extend(ids);
            group.from = group.from.min(c.ctx.run);
            group.to = group.to.max(c.ctx.run);
        } else {
            group.names.push(name.to_string());
            if group.head.is_none() {
                group.head = Some(i);
                group.named_ids.extend(c.merged.iter().cloned());
            } else {
                group.named_ids.extend(ids);
            }
        }
    }
    (groups, group_of, grouped, files_counted)
}

// Where two or more directories of a section have every file counted, one line stands for
// all of them (a line per directory would cost more than it saves when each directory
// holds a file or two): `2,990 earlier files in 2,990 directories under src/ first changed
// in runs 1-2,990`. Per section: (index of its first such group, files, directories,
// top-level directories, runs from, to).
struct Rest {
    first: usize,
    files: usize,
    dirs: usize,
    tops: Vec<String>,
    from: u32,
    to: u32,
}

/// [`group_files`]' second pass: per section, the directories whose every file is counted.
fn merge_counted_dirs(groups: &[Group]) -> Vec<(usize, Rest)> {
    let mut rest: Vec<(usize, Rest)> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if group.head.is_some() {
            continue;
        }
        let top = match group.dir.find(['/', '\\']) {
            Some(at) => group.dir.get(..=at).unwrap_or(&group.dir).to_string(),
            None => "./".to_string(),
        };
        match rest.iter_mut().find(|(s, _)| *s == group.section) {
            Some((_, r)) => {
                r.files = r.files.saturating_add(group.counted_files);
                r.dirs = r.dirs.saturating_add(1);
                if !r.tops.contains(&top) {
                    r.tops.push(top);
                }
                r.from = r.from.min(group.from);
                r.to = r.to.max(group.to);
            }
            None => rest.push((
                group.section,
                Rest {
                    first: g,
                    files: group.counted_files,
                    dirs: 1,
                    tops: vec![top],
                    from: group.from,
                    to: group.to,
                },
            )),
        }
    }
    rest
}

/// The one line that stands for a section's fully counted directories, when there are two
/// or more.
fn merged_line(r: &Rest) -> Option<String> {
    if r.dirs < 2 {
        return None;
    }
    let shown = r.tops.len().min(3);
    let mut under = r.tops.get(..shown).unwrap_or_default().join(", ");
    if r.tops.len() > shown {
        under.push_str(&format!(" and {} more", thousands(r.tops.len().saturating_sub(shown))));
    }
    Some(format!(
        "{} in {} directories under {under} first changed in runs {}-{}",
        noun("file_change", r.files),
        thousands(r.dirs),
        r.from,
        r.to
    ))
}

/// Group the file-change entries of each section by directory (`degrade group file_change`):
/// one entry per directory naming every file in it (`src/api/: a.rs, b.rs`). Files first changed
/// before `count_before` are counted per directory instead of named (`degrade count
/// file_change`); their ids are returned to be recorded as left out, with how many distinct
/// files were counted of how many grouped. Paths are redacted in `red`, the handoff's context.
pub(super) fn group_files(
    chosen: &mut Vec<Candidate<'_>>,
    workspace: Option<&str>,
    count_before: Option<u32>,
    keep: &std::collections::BTreeSet<String>,
    red: &mut crate::redact::Context,
) -> Counted {
    let (mut groups, group_of, grouped, files_counted) =
        collect_groups(chosen.as_slice(), workspace, count_before, keep, red);
    let rest = merge_counted_dirs(&groups);
    let mut counted_ids = Vec::new();
    let mut out: Vec<Candidate<'_>> = Vec::with_capacity(chosen.len());
    for (i, mut c) in std::mem::take(chosen).into_iter().enumerate() {
        let Some(g) = group_of.get(i).copied().flatten() else {
            out.push(c);
            continue;
        };
        let Some(group) = groups.get_mut(g) else {
            continue;
        };
        let head = group.head.unwrap_or(group.first);
        if i != head {
            continue;
        }
        if group.head.is_none() {
            let merged = rest
                .iter()
                .find(|(s, _)| *s == group.section)
                .and_then(|(_, r)| merged_line(r).map(|line| (r.first == g, line)));
            if let Some((first, line)) = merged {
                counted_ids.append(&mut group.counted);
                if first {
                    c.text = line;
                    c.degraded = true;
                    c.ctx.id = "count:file_change".to_string();
                    c.merged = Vec::new();
                    out.push(c);
                }
                continue;
            }
        }
        let mut text = if group.dir.is_empty() {
            "./: ".to_string()
        } else {
            format!("{}: ", group.dir)
        };
        text.push_str(&group.names.join(", "));
        if !group.counted.is_empty() {
            if !group.names.is_empty() {
                text.push_str(" and ");
            }
            text.push_str(&format!(
                "{} first changed in runs {}-{}",
                noun("file_change", group.counted.len()),
                group.from,
                group.to
            ));
        }
        c.text = text;
        c.degraded = true;
        if group.head.is_some() {
            c.merged = std::mem::take(&mut group.named_ids);
        } else {
            // Every file of the group is counted: its entry stands for them, with no id of its own.
            c.ctx.id = format!("count:file_change:{}", group.dir);
            c.merged = Vec::new();
        }
        counted_ids.append(&mut group.counted);
        out.push(c);
    }
    *chosen = out;
    Counted {
        ids: counted_ids,
        files: files_counted,
        grouped,
    }
}
