//! The hand-written floor of select + render for benches/versus.rs: what the shipped `default`
//! policy's summary block selects, written directly in Rust against the state, concatenated
//! into the same markdown with plain string writes (no template engine), with the first-turn
//! prompt, the inline fallback of an off-band handoff and the provenance's item id lists.
//!
//! It does by hand what the policy says, for a request that is not a fork:
//! - the items of the covered runs whose status is eligible (`completed`, `failed`,
//!   `interrupted`), plus the run's handoff (when it has a summary), merge-backs it took, the
//!   compaction summary (when the covered runs start inside it) and the runs' checkpoints;
//! - left out: reasoning, protocol noise, superseded commands and tool calls (a later run of
//!   the same command line / tool and input), and every item no include rule takes (narration,
//!   handoffs, older plans, checkpoints and assistant messages, closed questions, ...);
//! - goals (user messages), decisions, files (one entry per path: what happened, how many
//!   changes, the diff lines), commands, the latest plan, open problems (unresolved approvals,
//!   unanswered questions, failing commands and tool calls no later run resolved; newest
//!   first), the latest checkpoint, failures, subagent results and the latest assistant
//!   message, in seed 000's section order;
//! - texts cut as the policy's `text` rules say (`head_tail 2000`, outputs `tail 1500`), except
//!   what the next provider must act on (the latest user message, open questions and approvals,
//!   the last failing command), which stays whole.
//!
//! Text cutting and markdown escaping call baton's public primitives (`baton::select::prose`,
//! `head_tail`, `tail`, `code_span`, ...): they cost the same on both sides of the comparison,
//! which therefore measures the selection machinery, the budget fitting and the templates.
//! The bench asserts that this renders byte for byte what `Engine::render` renders on its
//! thread, with the same item ids included and omitted.

use baton::select::{
    code_span, compact, escape_controls, fenced, head_tail, one_line, prose, tail,
};
use baton::state::{FileChangeKind, Item, RunStatus, State, ToolStatus};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// What the render needs from the decision (the same inputs `Engine::render` reads from it).
pub struct Job {
    pub target: String,
    pub strategy: String,
    pub handoff_id: String,
    pub handoff_strategy: String,
    pub from: u32,
    pub to: u32,
    /// The off-band document's path; `None` for inline delivery.
    pub document_path: Option<String>,
    pub inline_limit: usize,
    /// The target's characters per turn, and the policy's `document max`.
    pub first_turn_limit: usize,
    pub document_limit: usize,
    pub policy_name: String,
    pub policy_sha12: String,
}

/// The hand-written handoff.
pub struct HandHandoff {
    pub document: String,
    pub inline: String,
    pub inline_fallback: Option<String>,
    pub included: Vec<String>,
    /// (id, reason), sorted by id.
    pub omitted: Vec<(String, &'static str)>,
    /// Whether it fits the budget (this hand-written version does not degrade).
    pub fits: bool,
}

const HEAD_TAIL: usize = 2000;
const OUTPUT_TAIL: usize = 1500;
const TEST_WORDS: &[&str] = &[
    "test", "tests", "pytest", "jest", "vitest", "mocha", "rspec", "phpunit", "nextest", "ctest",
    "unittest",
];

// Sections, in document order.
const GOALS: usize = 0;
const DECISIONS: usize = 1;
const FILES: usize = 2;
const COMMANDS: usize = 3;
const PLAN: usize = 4;
const OPEN: usize = 5;
const CHECKPOINT: usize = 6;
const FAILURES: usize = 7;
const SUBAGENTS: usize = 8;
const MESSAGES: usize = 9;
const COMPACT: usize = 10;
const TITLES: [&str; 11] = [
    "User goals and constraints",
    "Decisions",
    "Files changed",
    "Commands and tests",
    "Plan and todo state",
    "Open problems (newest first)",
    "Current checkpoint",
    "Known failures",
    "Subagent results",
    "Conversation",
    "Compacted summary",
];
/// Section indexes in the order the document shows them (the compaction summary comes first).
const ORDER: [usize; 11] = [
    COMPACT, GOALS, DECISIONS, FILES, COMMANDS, PLAN, OPEN, CHECKPOINT, FAILURES, SUBAGENTS,
    MESSAGES,
];

fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_test(command: &str) -> bool {
    command.split_whitespace().any(|w| {
        let w = w.rsplit('/').next().unwrap_or(w);
        TEST_WORDS.contains(&w.split(':').next().unwrap_or(w))
    })
}

fn failed(item: &Item) -> bool {
    match item {
        Item::Command { exit_code, .. } => exit_code.is_some_and(|c| c != 0),
        Item::ToolCall { status, .. } => *status == Some(ToolStatus::Failed),
        _ => false,
    }
}

/// What the backwards pass learns about one item of the covered runs.
#[derive(Default, Clone, Copy)]
struct Flags {
    superseded: bool,
    latest: bool,
    resolved: bool,
}

/// A file's entry: the changes to one path.
struct FileGroup {
    /// The path as the document names it (relative to the workspace).
    shown: String,
    first: Option<FileChangeKind>,
    last: Option<FileChangeKind>,
    renamed: bool,
    /// Some change is listed in full (not `path_only`, which takes `diff_lines > 200`).
    full: bool,
    changes: usize,
    added_removed: Option<(u64, u64)>,
    diff_lines: Option<i64>,
    /// Position of the first change's id in `included`, and the ids of the others.
    at: usize,
    merged: Vec<String>,
}

fn added_removed(diff: &str) -> (u64, u64) {
    let (mut a, mut r) = (0, 0);
    for l in diff.lines() {
        if l.starts_with('+') && !l.starts_with("+++") {
            a += 1;
        } else if l.starts_with('-') && !l.starts_with("---") {
            r += 1;
        }
    }
    (a, r)
}

/// A text as the policy cuts it (trimmed; whole when the next provider must act on it).
fn cut(text: &str, whole: bool) -> String {
    let t = text.trim();
    if whole {
        t.to_string()
    } else {
        head_tail(t, HEAD_TAIL)
    }
}

fn lead(text: &str, whole: bool) -> String {
    prose(&cut(text, whole), true)
}

/// An output: on the line when short, else fenced.
fn output(o: &str) -> String {
    let out = tail(o.trim(), OUTPUT_TAIL);
    if !out.contains('\n') && !out.contains('`') && out.chars().count() <= 200 {
        format!(": {}", escape_controls(&out))
    } else {
        format!(":\n{}", fenced(&out))
    }
}

/// The last 12 non-blank lines of a failing command's output, fenced.
fn failure_tail(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let skipped = lines.len().saturating_sub(12);
    let kept: Vec<String> = lines[skipped..]
        .iter()
        .map(|l| {
            let l = escape_controls(l);
            match l.char_indices().nth(300) {
                Some((b, _)) => format!(
                    "{}[... {} characters cut ...]",
                    &l[..b],
                    l[b..].chars().count()
                ),
                None => l,
            }
        })
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    let ticks = kept.iter().map(|l| longest_ticks(l)).max().unwrap_or(0);
    let fence = "`".repeat((ticks + 1).max(3));
    let mut out = String::new();
    if skipped > 0 {
        let _ = writeln!(out, "({skipped} earlier lines not shown)");
    }
    let _ = writeln!(out, "{fence}text");
    for l in &kept {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&fence);
    out
}

fn longest_ticks(s: &str) -> usize {
    let (mut best, mut run) = (0, 0);
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// Append one entry to a section's body: a bullet, continuation lines indented.
fn bullet(body: &mut String, text: &str) {
    body.push_str("- ");
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            body.push_str("\n  ");
        }
        body.push_str(line);
    }
    body.push('\n');
}

fn sentence(t: &str) -> String {
    let s = compact(t, 140);
    if s.ends_with('.') || s.ends_with('?') || s.ends_with('!') || s.ends_with("...") {
        s
    } else {
        format!("{s}.")
    }
}

/// Select and render the handoff of `job` by hand.
pub fn hand_render(state: &State, job: &Job) -> HandHandoff {
    let runs: Vec<&baton::state::Run> = state
        .runs
        .get(job.from as usize - 1..job.to as usize)
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            matches!(
                r.status,
                RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
            )
        })
        .collect();

    // Backwards: superseded commands and tool calls, the latest of each kind, failures a
    // later run resolved, and what must be kept whole.
    let total: usize = runs.iter().map(|r| r.items.len()).sum();
    let mut flags = vec![Flags::default(); total];
    let mut seen_cmd: HashSet<String> = HashSet::new();
    let mut seen_tool: HashSet<(&str, &str)> = HashSet::new();
    let mut seen_kind: HashSet<&str> = HashSet::new();
    let (mut ok_lines, mut ok_tests) = (HashSet::new(), HashSet::new());
    let mut ok_tools: HashSet<(&str, &str)> = HashSet::new();
    let mut last_user = None;
    let mut last_failing = None;
    let mut k = total;
    for r in runs.iter().rev() {
        for item in r.items.iter().rev() {
            k -= 1;
            let f = &mut flags[k];
            f.latest = seen_kind.insert(item.kind());
            match item {
                Item::UserMessage { .. } if last_user.is_none() => last_user = Some(k),
                Item::Command {
                    command, exit_code, ..
                } => {
                    let w = words(command);
                    if exit_code.is_some_and(|c| c != 0) {
                        last_failing.get_or_insert(k);
                        let parts: Vec<&str> = command.split_whitespace().collect();
                        f.resolved = ok_lines.contains(&w)
                            || (is_test(command)
                                && (1..=parts.len())
                                    .any(|n| ok_tests.contains(&parts[..n].join(" "))));
                    } else if *exit_code == Some(0) {
                        if is_test(command) {
                            ok_tests.insert(w.clone());
                        }
                        ok_lines.insert(w.clone());
                    }
                    f.superseded = !seen_cmd.insert(w);
                }
                Item::ToolCall {
                    tool,
                    input,
                    status,
                    ..
                } => {
                    let key = (tool.as_str(), input.as_deref().unwrap_or(""));
                    match status {
                        Some(ToolStatus::Failed) => f.resolved = ok_tools.contains(&key),
                        Some(ToolStatus::Completed) => {
                            ok_tools.insert(key);
                        }
                        _ => {}
                    }
                    f.superseded = !seen_tool.insert(key);
                }
                _ => {}
            }
        }
    }
    let last_checkpoint = runs
        .iter()
        .rev()
        .find(|r| state.checkpoints.iter().any(|c| c.run == r.ordinal))
        .map(|r| r.ordinal);

    let mut bodies: [String; 11] = Default::default();
    let mut counts = [0usize; 11];
    let mut open: Vec<String> = Vec::new();
    let mut included: Vec<String> = Vec::with_capacity(total);
    let mut omitted: Vec<(String, &'static str)> = Vec::with_capacity(total);
    let mut files: Vec<FileGroup> = Vec::new();
    let mut file_at: HashMap<String, usize> = HashMap::new();
    let mut merges = false;
    // What the first-turn prompt's gist quotes: the first goal, the latest decision (else
    // message), the checkpoint (else the last file).
    let (mut gist_goal, mut gist_decision, mut gist_message) = (None, None, None);
    let (mut gist_checkpoint, mut gist_file) = (None, None);
    let mut add = |included: &mut Vec<String>, section: usize, id: String, text: String| {
        match section {
            GOALS if gist_goal.is_none() => gist_goal = Some(text.clone()),
            DECISIONS => gist_decision = Some(text.clone()),
            MESSAGES => gist_message = Some(text.clone()),
            CHECKPOINT => gist_checkpoint = Some(text.clone()),
            _ => {}
        }
        counts[section] += 1;
        if section == OPEN {
            open.push(text);
        } else {
            bullet(&mut bodies[section], &text);
        }
        included.push(id);
    };
    const NO_RULE: &str = "no include rule matched";

    if let Some(cs) = state.thread.compact_summary.as_deref() {
        let through = state.thread.compact_summary_through.unwrap_or(u32::MAX);
        if !cs.trim().is_empty() && runs.first().is_some_and(|r| r.ordinal <= through) {
            add(
                &mut included,
                COMPACT,
                "compact_summary".into(),
                lead(cs, true),
            );
        }
    }
    let mut k = 0;
    for r in &runs {
        let o = r.ordinal;
        // The handoff the run consumed (when it says something) and merge-backs it took.
        if let Some(h) = r
            .handoff
            .as_deref()
            .and_then(|h| state.handoffs.iter().find(|x| x.id == h))
        {
            if h.summary.as_deref().is_some_and(|t| !t.trim().is_empty()) {
                omitted.push((h.id.clone(), NO_RULE));
            }
        }
        for h in &state.handoffs {
            if h.target_run == Some(o)
                && h.status.is_live()
                && !h.covers_own_runs(&state.thread.id)
                && r.handoff.as_deref() != Some(h.id.as_str())
            {
                omitted.push((h.id.clone(), NO_RULE));
            }
        }
        for (i, item) in r.items.iter().enumerate() {
            let f = flags[k];
            let keep = last_user == Some(k) || last_failing == Some(k);
            k += 1;
            let id = match item.id() {
                Some(id) => id.to_string(),
                None => format!("r{o}.{}", i + 1),
            };
            match item {
                Item::Reasoning { .. } => {
                    omitted.push((id, "hidden reasoning never leaves the thread"))
                }
                Item::Protocol { .. } => omitted.push((id, "provider protocol noise")),
                Item::UserMessage { text, .. } => add(&mut included, GOALS, id, lead(text, keep)),
                Item::Decision { text, .. } => add(&mut included, DECISIONS, id, lead(text, false)),
                Item::Error { text, .. } => add(&mut included, FAILURES, id, lead(text, false)),
                Item::AssistantMessage { text, .. } if f.latest => {
                    add(&mut included, MESSAGES, id, lead(text, false))
                }
                Item::SubagentResult { agent, text, .. } => {
                    let t = format!(
                        "{}: {}",
                        escape_controls(agent),
                        prose(&cut(text, false), false)
                    );
                    add(&mut included, SUBAGENTS, id, t)
                }
                Item::Plan { steps, .. } if f.latest => {
                    let mut t = String::new();
                    for (n, st) in steps.iter().enumerate() {
                        if n > 0 {
                            t.push('\n');
                        }
                        t.push_str(match st.status {
                            baton::state::StepStatus::Done => "[x] ",
                            baton::state::StepStatus::InProgress => "[~] ",
                            // `StepStatus` is `#[non_exhaustive]`: a new status reads as pending.
                            _ => "[ ] ",
                        });
                        t.push_str(&escape_controls(&head_tail(&words(&st.text), HEAD_TAIL)));
                    }
                    add(&mut included, PLAN, id, t)
                }
                Item::Approval {
                    text,
                    resolved: false,
                    ..
                } => add(
                    &mut included,
                    OPEN,
                    id,
                    format!("{} (awaiting approval)", lead(text, true)),
                ),
                Item::Question {
                    text,
                    answered: false,
                    ..
                } => add(
                    &mut included,
                    OPEN,
                    id,
                    format!("{} (unanswered)", lead(text, true)),
                ),
                Item::Command { .. } | Item::ToolCall { .. } if f.superseded => omitted.push((
                    id,
                    if matches!(item, Item::Command { .. }) {
                        "superseded by a later run of the same command"
                    } else {
                        "superseded by a later call"
                    },
                )),
                Item::Command {
                    command,
                    exit_code,
                    output: out,
                    ..
                } if failed(item) && !f.resolved => {
                    let what = if is_test(command) {
                        "Failing test"
                    } else {
                        "Failing command"
                    };
                    let code = exit_code.map(|c| format!("exit {c}, ")).unwrap_or_default();
                    let mut t = format!("{what} {} ({code}run {o})", code_span(&one_line(command)));
                    if let Some(tail) = out.as_deref().map(failure_tail).filter(|t| !t.is_empty()) {
                        let _ = write!(t, "; last lines of output:\n{tail}");
                    }
                    add(&mut included, OPEN, id, t)
                }
                Item::ToolCall {
                    tool,
                    input,
                    output: out,
                    ..
                } if failed(item) && !f.resolved => {
                    let input = input
                        .as_deref()
                        .map(|i| format!(" {}", code_span(&one_line(i))))
                        .unwrap_or_default();
                    let mut t = format!("Failing tool call {tool}{input} (failed, run {o})");
                    if let Some(tail) = out.as_deref().map(failure_tail).filter(|t| !t.is_empty()) {
                        let _ = write!(t, "; last lines of output:\n{tail}");
                    }
                    add(&mut included, OPEN, id, t)
                }
                Item::Command {
                    command,
                    exit_code,
                    output: out,
                    ..
                } => {
                    let line = if keep {
                        command.trim().to_string()
                    } else {
                        tail(command.trim(), OUTPUT_TAIL)
                    };
                    let mut t = code_span(&line);
                    if let Some(c) = exit_code {
                        let _ = write!(t, " (exit {c})");
                    }
                    if let Some(o) = out.as_deref().filter(|o| !o.trim().is_empty()) {
                        t.push_str(&output(o));
                    }
                    add(&mut included, COMMANDS, id, t)
                }
                Item::FileChange {
                    path,
                    change,
                    diff_lines,
                    diff,
                    ..
                } => {
                    let shown =
                        baton::select::display_path(path, state.thread.workspace.as_deref());
                    let g = match file_at.get(&shown) {
                        Some(&g) => {
                            merges = true;
                            files[g].merged.push(id);
                            g
                        }
                        None => {
                            file_at.insert(shown.clone(), files.len());
                            files.push(FileGroup {
                                shown,
                                first: *change,
                                last: None,
                                renamed: false,
                                full: false,
                                changes: 0,
                                added_removed: None,
                                diff_lines: None,
                                at: included.len(),
                                merged: Vec::new(),
                            });
                            included.push(id);
                            files.len() - 1
                        }
                    };
                    let fg = &mut files[g];
                    fg.changes += 1;
                    fg.full |= !diff_lines.is_some_and(|d| d > 200);
                    if change.is_some() {
                        fg.last = *change;
                        fg.first = fg.first.or(*change);
                    }
                    fg.renamed |= *change == Some(FileChangeKind::Renamed);
                    if let Some(d) = diff {
                        let (a, r) = added_removed(d);
                        let (a0, r0) = fg.added_removed.unwrap_or((0, 0));
                        fg.added_removed = Some((a0 + a, r0 + r));
                    } else if let Some(dl) = diff_lines {
                        fg.diff_lines = Some(fg.diff_lines.unwrap_or(0) + dl);
                    }
                }
                _ => omitted.push((id, NO_RULE)),
            }
        }
        for c in state.checkpoints.iter().filter(|c| c.run == o) {
            let id = format!("checkpoint.{o}");
            if last_checkpoint == Some(o) {
                let n = c.files_changed;
                let files = format!("{n} file{} changed", if n == 1 { "" } else { "s" });
                let t = match c.diff_summary.as_deref() {
                    Some(d) => format!("run {o}: {files}: {}", prose(&cut(d, false), false)),
                    None => format!("run {o}: {files}"),
                };
                add(&mut included, CHECKPOINT, id, t);
            } else {
                omitted.push((id, NO_RULE));
            }
        }
    }
    // One entry per file, at its first change (files come before every later section).
    for fg in &files {
        // Paths stay whole; the file's entry says what happened to it.
        let what = match (fg.first, fg.last) {
            (Some(FileChangeKind::Created), Some(FileChangeKind::Deleted)) => {
                "created, then deleted"
            }
            (Some(FileChangeKind::Created), _) => "created",
            (_, Some(FileChangeKind::Deleted)) => "deleted",
            _ if fg.renamed => "renamed",
            _ => "modified",
        };
        if !fg.full {
            counts[FILES] += 1;
            bullet(&mut bodies[FILES], &fg.shown);
            gist_file = Some(fg.shown.clone());
            continue;
        }
        let mut t = format!(
            "{} ({what}; {} change{}",
            fg.shown,
            fg.changes,
            if fg.changes == 1 { "" } else { "s" }
        );
        match (fg.added_removed, fg.diff_lines) {
            (Some((a, r)), _) => {
                let _ = write!(t, "; +{a} -{r} lines");
            }
            (None, Some(d)) => {
                let _ = write!(t, "; {d} diff lines");
            }
            (None, None) => {}
        }
        t.push(')');
        counts[FILES] += 1;
        bullet(&mut bodies[FILES], &t);
        gist_file = Some(t);
    }
    if merges {
        // Merged changes are listed right after the change that carries their file's entry.
        let mut after: HashMap<usize, &[String]> = HashMap::new();
        for fg in &files {
            after.insert(fg.at, &fg.merged);
        }
        let mut with = Vec::with_capacity(included.len());
        for (i, id) in included.into_iter().enumerate() {
            with.push(id);
            with.extend(after.get(&i).into_iter().flat_map(|m| m.iter().cloned()));
        }
        included = with;
    }
    for t in open.iter().rev() {
        bullet(&mut bodies[OPEN], t);
    }
    omitted.sort_by(|a, b| a.0.cmp(&b.0));

    // The document.
    let mut doc = String::with_capacity(bodies.iter().map(String::len).sum::<usize>() + 1024);
    let title = state.thread.title.as_deref().map(one_line);
    let id = one_line(&state.thread.id);
    let _ = write!(
        doc,
        "# Handoff: {}\n\nYou are continuing app thread `{id}` on {}. This document summarises\n",
        title.as_deref().unwrap_or(&id),
        job.target
    );
    if job.from == job.to {
        let _ = write!(doc, "run {}", job.from);
    } else {
        let _ = write!(doc, "runs {}-{}", job.from, job.to);
    }
    let _ = write!(
        doc,
        " ({}), which happened without you. It is a portable\nsummary, not the providers' native context.\n\n",
        job.handoff_strategy
    );
    let mut any = false;
    for s in ORDER {
        if counts[s] > 0 {
            any = true;
            let _ = write!(doc, "## {}\n\n{}\n", TITLES[s], bodies[s]);
        }
    }
    if !any {
        let _ = write!(
            doc,
            "(No items from these runs are included under policy `{}`.)\n\n",
            job.policy_name
        );
    }
    let _ = writeln!(
        doc,
        "---\nProvenance: policy `{}` (sha256 {}), strategy {}, handoff {}, created by deterministic; {} items included, {} omitted.",
        job.policy_name,
        job.policy_sha12,
        job.strategy,
        job.handoff_id,
        included.len(),
        omitted.len()
    );

    // The first-turn prompt: for off-band delivery, a pointer, the gist and the message,
    // sentences dropped from the end until it fits the inline limit.
    let message = state.request.message.as_deref().unwrap_or("");
    let inline_doc = || format!("{doc}\n\n{message}");
    let (inline, fallback) = match &job.document_path {
        None => (inline_doc(), None),
        Some(path) => {
            let mut gist = Vec::with_capacity(3);
            if let Some(g) = &gist_goal {
                gist.push(format!("Goal: {}", sentence(g)));
            }
            if let Some(l) = gist_decision.as_ref().or(gist_message.as_ref()) {
                gist.push(format!("Latest: {}", sentence(l)));
            }
            if let Some(w) = gist_checkpoint.as_ref().or(gist_file.as_ref()) {
                gist.push(format!("Workspace: {}", sentence(w)));
            }
            let pointer = |gist: &[String]| {
                let mut s = format!(
                    "Before you start, read the handoff document at {path}: it summarises what happened in this thread while you were away.\n"
                );
                if !gist.is_empty() {
                    s.push_str(&gist.join(" "));
                    s.push('\n');
                }
                s.push_str(message);
                s
            };
            let mut n = gist.len();
            let inline = loop {
                let s = pointer(&gist[..n]);
                if n == 0 || s.chars().count() <= job.inline_limit {
                    break s;
                }
                n -= 1;
            };
            (inline, Some(inline_doc()))
        }
    };
    // The budget: the document (off-band) or the first turn (inline) must fit.
    let fits = match job.document_path {
        Some(_) => {
            doc.chars().count() <= job.document_limit
                && inline.chars().count() <= job.first_turn_limit
        }
        None => inline.chars().count() <= job.first_turn_limit,
    };
    HandHandoff {
        document: doc,
        inline,
        inline_fallback: fallback,
        included,
        omitted,
        fits,
    }
}
