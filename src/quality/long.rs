//! Long threads: generated states of N runs of real-looking work, and the figures that say how
//! well a handoff of one carries it (docs/rendering.md#long-threads).
//!
//! Public entry points: [`generate`] (a state of N runs) and [`measure`] (the figures of one
//! handoff of such a state). Each run is a request (sometimes several lines long), a look at the
//! history of the file it is about, a test run, a file change and a reply; every 25th run
//! records a decision; every 50th run has a failing test run that the next run fixes; every
//! tenth run's reply and the last run's are long (over `default`'s text rule). Run `i` is the
//! same in every generated state that has it but its last run (which adds an open question and
//! a long reply), so a longer thread is a shorter one with runs added.

use crate::facts::item_contexts;
use crate::pipeline;
use crate::policy::Policy;
use crate::render::RenderOptions;
use crate::select::display_path;
use crate::state::{FileChangeKind, Item, Run, RunStatus, State, StateError};
use crate::eval::EvalOptions;
use serde::Serialize;
use std::path::PathBuf;

/// The workspace root of a generated thread (file changes are shown relative to it).
pub const WORKSPACE: &str = "/work/app";

/// How the generated thread is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Handover {
    /// Every run ran on codex; the request goes to claude, which has no thread yet.
    Fresh,
    /// The first three quarters ran on codex, the rest on claude; the request goes back to
    /// codex, which resumes its thread with a delta (or gets a full handoff when it is stale).
    Back,
}

impl Handover {
    pub fn target(self) -> &'static str {
        match self {
            Handover::Fresh => "claude",
            Handover::Back => "codex",
        }
    }
}

/// A few steps of splitmix64: the same `i` always gives the same value.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn pick<'a>(list: &[&'a str], i: u64) -> &'a str {
    let n = u64::try_from(list.len()).unwrap_or(1).max(1);
    usize::try_from(i.checked_rem(n).unwrap_or(0))
        .ok()
        .and_then(|k| list.get(k))
        .copied()
        .unwrap_or("")
}

const DIRS: &[&str] = &[
    "src/api",
    "src/auth",
    "src/db",
    "src/http/routes",
    "src/jobs",
    "src/billing",
    "src/search",
    "src/notify",
    "crates/core/src",
    "crates/cli/src",
    "tests/integration",
    "web/components",
    "web/pages",
    "docs",
];
const STEMS: &[&str] = &[
    "session", "handler", "schema", "queue", "invoice", "index", "mailer", "config", "router",
    "cache", "token", "worker", "report", "limits",
];
const VERBS: &[&str] = &[
    "Fix", "Refactor", "Add tests for", "Speed up", "Document", "Add logging to", "Review",
    "Simplify", "Harden",
];
const GOALS: &[&str] = &[
    "the retry path stops losing jobs when the database restarts",
    "requests over 1 MB are refused with a clear 413",
    "the nightly report no longer times out on large accounts",
    "expired sessions are cleaned up without a full table scan",
    "errors carry the request id so support can find them",
    "the flaky ordering test passes on every run",
];

/// The path (relative to [`WORKSPACE`]) of the file run `i` changes. Files repeat: the set
/// grows by about one file for every four runs.
pub fn file_of(i: u32) -> String {
    let h = mix(u64::from(i));
    let pool = 20u64.saturating_add(u64::from(i) / 4);
    let f = if i <= 100 { u64::from(i) } else { h.checked_rem(pool).unwrap_or(0) };
    let dir = pick(DIRS, f.wrapping_mul(7));
    let stem = pick(STEMS, f / 3);
    let ext = if dir.starts_with("web") {
        "tsx"
    } else if dir == "docs" {
        "md"
    } else {
        "rs"
    };
    format!("{dir}/{stem}_{f}.{ext}")
}

/// The request of run `i` (its first line names the run: `Request 12: ...`).
pub fn request_of(i: u32) -> String {
    let h = mix(u64::from(i).wrapping_add(1_000_003));
    let path = file_of(i);
    let mut s = format!(
        "Request {i}: {} `{path}` so that {}.",
        pick(VERBS, h),
        pick(GOALS, h >> 8)
    );
    if h.is_multiple_of(3) {
        s.push_str(&format!(
            "\nKeep the public API as it is; callers in {} depend on it.",
            pick(DIRS, h >> 16)
        ));
    }
    if h.is_multiple_of(7) {
        s.push_str("\nRun the whole test suite before you reply, and tell me what you changed.");
    }
    s
}

/// The decision run `i` records, if it records one (every 25th run).
pub fn decision_of(i: u32) -> Option<String> {
    i.is_multiple_of(25).then(|| {
        let h = mix(u64::from(i).wrapping_add(77));
        format!(
            "Decision {i}: keep {} behind the {} module boundary; nothing outside it touches the table directly.\nReason: the migration in run {i} showed two writers racing.",
            pick(STEMS, h),
            pick(DIRS, h >> 8)
        )
    })
}

fn hash_line(i: u32, k: u64) -> String {
    let h = mix(u64::from(i).wrapping_mul(31).wrapping_add(k));
    format!(
        "{:07x} {} {}",
        h & 0x0fff_ffff,
        pick(VERBS, h >> 5).to_lowercase(),
        pick(STEMS, h >> 13)
    )
}

fn run_of(i: u32, last: u32, handover: Handover) -> Run {
    let path = file_of(i);
    let abs = format!("{WORKSPACE}/{path}");
    let crate_name = path.split('/').nth(1).unwrap_or("app").to_string();
    let mut items = vec![Item::UserMessage {
        id: None,
        text: request_of(i),
    }];
    let log: Vec<String> = (0..5).map(|k| hash_line(i, k)).collect();
    items.push(Item::Command {
        id: None,
        command: format!("git log --oneline -n 5 -- {path}"),
        exit_code: Some(0),
        output: Some(log.join("\n")),
    });
    // Every 50th run's test run fails; the next run runs the same command again and passes.
    let fails = i % 50 == 49;
    let retry = |n: u32| format!("cargo test --workspace retry_{n} -q");
    if i.is_multiple_of(50) && i > 0 {
        items.push(Item::Command {
            id: None,
            command: retry(i.saturating_sub(1)),
            exit_code: Some(0),
            output: Some("test result: ok. 19 passed; 0 failed".into()),
        });
    }
    let test_cmd = if fails {
        retry(i)
    } else {
        format!("cargo test -p {crate_name} {}_{i} -q", file_stem(&path))
    };
    let mut out: Vec<String> = (0..18)
        .map(|k| format!("test {}::case_{k} ... ok", file_stem(&path)))
        .collect();
    if fails {
        out.push(format!(
            "test {}::case_18 ... FAILED\n\nfailures:\n    assertion failed: left == right (run {i})",
            file_stem(&path)
        ));
        out.push("test result: FAILED. 18 passed; 1 failed".into());
    } else {
        out.push("test result: ok. 18 passed; 0 failed; finished in 0.42s".into());
    }
    items.push(Item::Command {
        id: None,
        command: test_cmd,
        exit_code: Some(if fails { 101 } else { 0 }),
        output: Some(out.join("\n")),
    });
    items.push(Item::FileChange {
        id: None,
        path: abs,
        change: Some(if i <= 100 {
            FileChangeKind::Created
        } else {
            FileChangeKind::Modified
        }),
        diff_lines: Some(i64::from(i % 60).saturating_add(4)),
        diff: None,
    });
    if let Some(d) = decision_of(i) {
        items.push(Item::Decision { id: None, text: d });
    }
    let mut reply = format!(
        "Done with request {i}. I changed `{path}`: the {} path now checks its input before it touches the {} table, and the tests in {crate_name} pass. I left the callers alone; two of them still build their own retry loop, which we may want to fold in later.",
        file_stem(&path),
        pick(STEMS, mix(u64::from(i)) >> 3)
    );
    // Every tenth run's reply, and the last run's, is a long one (about 3,300 characters, in
    // paragraphs), as real agents write after a larger change: over `default`'s
    // 2,000-character text rule, whole while the document is under its limit.
    if i % 10 == 7 || i == last {
        reply.push_str(&long_reply(i, &path));
    }
    items.push(Item::AssistantMessage {
        id: None,
        text: reply,
    });
    if i == last {
        items.push(Item::Question {
            id: None,
            text: "Should the retry budget be per tenant or global? I need your answer before I change the queue.".into(),
            answered: false,
        });
    }
    let (provider, thread) = match handover {
        Handover::Back if i > last.saturating_mul(3) / 4 => ("claude", "L1"),
        _ => ("codex", "C1"),
    };
    Run {
        ordinal: i,
        provider: provider.into(),
        provider_thread: Some(thread.into()),
        status: RunStatus::Completed,
        handoff: None,
        items,
        started_at: None,
        ended_at: None,
        workspace: None,
    }
}

/// The paragraphs a long reply of run `i` adds (about 3,000 characters).
fn long_reply(i: u32, path: &str) -> String {
    let mut s = String::new();
    for k in 0..9u64 {
        let h = mix(u64::from(i).wrapping_mul(13).wrapping_add(k));
        s.push_str(&format!(
            "\n\nStep {}: I read `{path}` again and followed the {} call into {}. The {} there assumed the caller holds the lock, which is not true on the retry path, so I moved the check up and added a test that runs two writers at once ({}). It fails without the change and passes with it; the rest of the suite is unchanged.",
            k.saturating_add(1),
            pick(STEMS, h),
            pick(DIRS, h >> 7),
            pick(STEMS, h >> 13),
            hash_line(i, k.saturating_add(40))
        ));
    }
    s
}

fn file_stem(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split('.').next().unwrap_or(name)
}

/// A state of `runs` runs of real-looking work, handed over as `handover` says.
pub fn generate(runs: u32, handover: Handover) -> Result<State, StateError> {
    let threads = match handover {
        Handover::Fresh => serde_json::json!([
            {"id": "C1", "provider": "codex", "status": "active"}
        ]),
        Handover::Back => serde_json::json!([
            {"id": "C1", "provider": "codex", "status": "active"},
            {"id": "L1", "provider": "claude", "status": "active"}
        ]),
    };
    let head = serde_json::json!({
        "version": 1,
        "thread": {"id": format!("th_long_{runs}"), "title": format!("Long thread of {runs} runs"),
                   "workspace": WORKSPACE},
        "provider_threads": threads,
        "request": {"provider": handover.target(), "message": "Carry on from where we stopped: finish the last request and run the tests."}
    });
    let file = format!("long-{runs}.json");
    let mut state = crate::state::parse_str(&head.to_string(), crate::state::Format::Json, &file)?;
    state.runs = (1..=runs).map(|i| run_of(i, runs, handover)).collect();
    crate::state::validate(&state, &file)?;
    Ok(state)
}

/// What one handoff of a generated thread carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LongFigures {
    pub runs: u32,
    pub policy: String,
    pub target: String,
    pub strategy: String,
    pub delivery: String,
    /// Characters of what the target reads: the document off-band, the first-turn prompt inline.
    pub document_chars: usize,
    pub limit: usize,
    /// Files changed in the covered runs, named (by path, or by name under a directory group).
    pub files: (usize, usize),
    /// User requests of the covered runs whose first line is shown.
    pub requests: (usize, usize),
    /// The newest 10 user requests of the covered runs, shown whole.
    pub newest_requests: (usize, usize),
    /// Decisions of the covered runs among the newest 100 runs, shown (their first line).
    pub decisions: (usize, usize),
    /// Open problems of the covered runs shown whole.
    pub open: (usize, usize),
    /// The budget was kept (no budget report: nothing to keep).
    pub kept: bool,
    /// Within each kind, what the handoff sheds is the oldest: a request, decision, reply or
    /// command of a run is shown only if those of every newer run are (so adding runs never
    /// makes the newest runs' content disappear while older content stays).
    pub oldest_first: bool,
    /// The kinds (and runs) where `oldest_first` fails.
    pub out_of_order: Vec<String>,
    /// The document says it carries every must-keep item.
    pub says_all_here: bool,
    /// Off-band: every item the budget left out or shortened is in the transcript, under its
    /// id, its text whole. `None` inline (there is no transcript) or when nothing was.
    pub transcript_complete: Option<bool>,
    /// The ids the transcript misses.
    pub transcript_missing: Vec<String>,
    /// No degradation step ran, yet a text of the document says it was cut (text rules cut
    /// only when the budget binds).
    pub cut_under_limit: bool,
}

/// Measure every size, both handovers, under `policy`.
pub fn measure_sizes(policy: &Policy, sizes: &[u32]) -> Result<Vec<LongFigures>, LongError> {
    let mut out = Vec::new();
    for &n in sizes {
        for h in [Handover::Fresh, Handover::Back] {
            let state = generate(n, h)?;
            out.push(measure(policy, &state, h.target())?);
        }
    }
    Ok(out)
}

/// A generated thread that could not be built or handed over. `Display` is the message; a
/// decision or template error's place is its location ([`crate::Located`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LongError {
    /// The generated state does not load.
    #[error(transparent)]
    State(#[from] StateError),
    /// Deciding or rendering it fails.
    #[error(transparent)]
    Pipeline(#[from] crate::pipeline::PipelineError),
}

impl crate::Located for LongError {
    fn location(&self) -> Option<String> {
        match self {
            LongError::State(_) => None,
            LongError::Pipeline(e) => crate::Located::location(e),
        }
    }

    fn help(&self) -> Option<&str> {
        match self {
            LongError::State(_) => None,
            LongError::Pipeline(e) => crate::Located::help(e),
        }
    }

    fn message(&self) -> String {
        match self {
            LongError::State(e) => e.to_string(),
            LongError::Pipeline(e) => crate::Located::message(e),
        }
    }
}

/// Why these figures fail the long-thread gate (docs/cli.md#baton-quality): every changed file
/// named, the newest 10 requests whole, every decision of the newest 100 runs, every open
/// problem, the budget kept, shedding oldest first, no cut text in a document under its limit,
/// the transcript complete. Empty when they pass.
pub fn failures(f: &LongFigures) -> Vec<String> {
    let mut out = Vec::new();
    if f.strategy == "no_handoff" {
        return out;
    }
    let mut ratio = |what: &str, (a, b): (usize, usize)| {
        if a != b {
            out.push(format!("{what} {a}/{b}"));
        }
    };
    ratio("files", f.files);
    ratio("newest requests", f.newest_requests);
    ratio("decisions", f.decisions);
    ratio("open problems", f.open);
    if !f.kept {
        out.push("budget not kept".into());
    }
    if !f.oldest_first {
        out.push(format!("newer content shed first: {}", f.out_of_order.join(", ")));
    }
    if f.cut_under_limit {
        out.push("a text cut in a document under its limit".into());
    }
    if f.transcript_complete == Some(false) {
        out.push(format!("transcript misses {}", f.transcript_missing.join(", ")));
    }
    out
}

/// The ids the budget's receipt sends to the transcript `t` that it does not hold whole: no
/// heading of theirs, or (for a request, decision or command) their text not in it.
fn transcript_missing(
    t: &str,
    summary: &crate::select::Summary,
    items: &[crate::facts::ItemCtx<'_>],
) -> Vec<String> {
    let mut missing = Vec::new();
    let ids: Vec<String> = crate::render::receipt::receipt(summary)
        .into_iter()
        .flat_map(|k| k.left_out.into_iter().chain(k.cut))
        .collect();
    let texts: std::collections::HashMap<&str, &Item> = items
        .iter()
        .filter_map(|c| c.item.map(|i| (c.id.as_str(), i)))
        .collect();
    // Headings once; the transcript's text once, whitespace collapsed.
    let headings: std::collections::HashSet<&str> = t
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let collapsed = super::collapse(t);
    let wanted: Vec<Option<String>> = ids
        .iter()
        .map(|id| match texts.get(id.as_str()) {
            Some(Item::UserMessage { text, .. } | Item::Decision { text, .. }) => {
                Some(super::collapse(text))
            }
            Some(Item::Command { command, .. }) => Some(super::collapse(command)),
            _ => None,
        })
        .collect();
    let patterns: Vec<&String> = wanted.iter().flatten().collect();
    let mut found = contained(&collapsed, &patterns).into_iter();
    for (id, w) in ids.into_iter().zip(&wanted) {
        let whole = match w {
            Some(_) => found.next().unwrap_or(false),
            None => true,
        };
        if !(headings.contains(id.as_str()) && whole) {
            missing.push(id);
        }
    }
    missing
}

/// The generated items whose markers (`Request N:`, `Decision N:`, `Done with request N.`,
/// a command) `read` shows out of order: per kind, the shown runs must be a suffix, with no
/// hidden run after a shown one.
fn out_of_order(items: &[crate::facts::ItemCtx<'_>], read: &str) -> Vec<String> {
    let mut out_of_order = Vec::new();
    // Markers that name the run of each generated item, oldest first, per kind.
    let mut markers: Vec<(&str, Vec<(u32, bool)>)> = vec![
        ("request", Vec::new()),
        ("decision", Vec::new()),
        ("reply", Vec::new()),
        ("command", Vec::new()),
    ];
    let mut asked: Vec<(usize, u32, String)> = Vec::new();
    for c in items {
        let (slot, marker) = match c.item {
            Some(Item::UserMessage { .. }) => (0, format!("Request {}:", c.run)),
            Some(Item::Decision { .. }) => (1, format!("Decision {}:", c.run)),
            Some(Item::AssistantMessage { .. }) => (2, format!("Done with request {}.", c.run)),
            Some(Item::Command { command, .. }) if !c.superseded => (3, command.clone()),
            _ => continue,
        };
        asked.push((slot, c.run, marker));
    }
    let texts: Vec<&String> = asked.iter().map(|(_, _, m)| m).collect();
    for ((slot, run, _), shown) in asked.iter().zip(contained(read, &texts)) {
        if let Some((_, v)) = markers.get_mut(*slot) {
            v.push((*run, shown));
        }
    }
    for (kind, v) in &markers {
        // Shown runs must be a suffix: no hidden run after a shown one.
        let first_shown = v.iter().position(|(_, s)| *s);
        if let Some(at) = first_shown {
            if let Some((run, _)) = v.iter().skip(at).find(|(_, s)| !*s) {
                out_of_order.push(format!("{kind} of run {run}"));
            }
        }
    }
    out_of_order
}

/// Render one handoff of `state` for `target` under `policy` and measure it.
pub fn measure(
    policy: &Policy,
    state: &State,
    target: &str,
) -> Result<LongFigures, crate::pipeline::PipelineError> {
    let eval = EvalOptions {
        target: Some(target.to_string()),
        document_root: Some(PathBuf::from("/baton-quality")),
    };
    let outcome = pipeline::run(policy, state, &eval, &RenderOptions::default())?;
    let runs = u32::try_from(state.runs.len()).unwrap_or(u32::MAX);
    let mut f = LongFigures {
        runs,
        policy: policy.name.clone(),
        target: target.to_string(),
        strategy: outcome.decision.strategy.as_str().to_string(),
        delivery: String::new(),
        document_chars: 0,
        limit: outcome.decision.budget.as_ref().map_or(0, |b| b.limit),
        files: (0, 0),
        requests: (0, 0),
        newest_requests: (0, 0),
        decisions: (0, 0),
        open: (0, 0),
        kept: outcome.decision.budget.as_ref().is_none_or(|b| b.kept),
        oldest_first: true,
        out_of_order: Vec::new(),
        says_all_here: false,
        transcript_complete: None,
        transcript_missing: Vec::new(),
        cut_under_limit: false,
    };
    let (Some(r), Some(range)) = (&outcome.rendered, &outcome.decision.covered_runs) else {
        return Ok(f);
    };
    f.delivery = r.provenance.delivery.clone();
    let read = if r.document_path.is_some() {
        r.document.as_str()
    } else {
        r.inline.as_str()
    };
    f.document_chars = read.chars().count();
    f.says_all_here = read.contains("What you must act on is all here");
    let covered: Vec<u32> = (range.from..=range.to).collect();
    let items = item_contexts(state, &covered);
    let mut files: Vec<String> = Vec::new();
    let mut requests: Vec<&str> = Vec::new();
    let mut decisions = Vec::new();
    let newest_runs_from = range.to.saturating_sub(99);
    for c in &items {
        match c.item {
            Some(Item::FileChange { path, .. }) => {
                let p = display_path(path, state.thread.workspace.as_deref());
                if !files.contains(&p) {
                    files.push(p);
                }
            }
            Some(Item::UserMessage { text, .. }) => requests.push(text),
            Some(Item::Decision { text, .. }) if c.run >= newest_runs_from => {
                decisions.push(text.as_str())
            }
            _ => {}
        }
    }
    // Every look-up below is one pass over the text (`Contained`), however many items the
    // thread has: a thread of 3,200 runs asks about some 16,000 strings.
    let named = FileNames::new(read);
    let path_found = contained(read, &files);
    f.files = (
        files
            .iter()
            .zip(&path_found)
            .filter(|(p, found)| **found || named.has(p))
            .count(),
        files.len(),
    );
    let first_line = |t: &str| t.lines().next().unwrap_or("").trim().to_string();
    let request_lines: Vec<String> = requests.iter().map(|t| first_line(t)).collect();
    f.requests = (
        contained(read, &request_lines).iter().filter(|b| **b).count(),
        requests.len(),
    );
    let newest: Vec<&&str> = requests.iter().rev().take(10).collect();
    f.newest_requests = (
        newest.iter().filter(|t| whole(read, t)).count(),
        newest.len(),
    );
    let decision_lines: Vec<String> = decisions.iter().map(|t| first_line(t)).collect();
    f.decisions = (
        contained(read, &decision_lines).iter().filter(|b| **b).count(),
        decisions.len(),
    );
    let degraded = outcome
        .decision
        .budget
        .as_ref()
        .is_some_and(|b| !b.steps.is_empty());
    // Under the limit every text is whole: a request, decision or reply the document shows
    // (its first line is there) must be there whole.
    let collapsed_read = super::collapse(read);
    let cut_shown = !degraded && items.iter().any(|c| match c.item {
        Some(
            Item::UserMessage { text, .. }
            | Item::AssistantMessage { text, .. }
            | Item::Decision { text, .. },
        ) => {
            let line = first_line(text);
            read.contains(&line) && !collapsed_read.contains(&super::collapse(text))
        }
        _ => false,
    });
    f.cut_under_limit = !degraded && (read.contains("characters cut") || cut_shown);
    if let (Some(t), Some(summary)) = (&r.transcript, &outcome.summary) {
        f.transcript_missing = transcript_missing(t, summary, &items);
        f.transcript_complete = Some(f.transcript_missing.is_empty());
    }
    let collapsed = super::collapse(read);
    let open = super::open_problems(&items, &collapsed);
    f.open = (open.present, open.expected);
    f.out_of_order = out_of_order(&items, read);
    f.oldest_first = f.out_of_order.is_empty();
    Ok(f)
}

/// For each of `patterns`, whether `text` contains it: one pass over `text` (Aho-Corasick,
/// every overlapping match), where a `contains` per pattern scans it once per pattern.
fn contained<S: AsRef<str>>(text: &str, patterns: &[S]) -> Vec<bool> {
    let mut found = vec![false; patterns.len()];
    // An empty pattern is contained in every text.
    for (slot, p) in found.iter_mut().zip(patterns) {
        *slot = p.as_ref().is_empty();
    }
    let Ok(ac) = aho_corasick::AhoCorasick::new(patterns.iter().map(|p| p.as_ref())) else {
        // Too many patterns for the automaton: one scan per pattern.
        for (slot, p) in found.iter_mut().zip(patterns) {
            *slot = text.contains(p.as_ref());
        }
        return found;
    };
    for m in ac.find_overlapping_iter(text) {
        if let Some(slot) = found.get_mut(m.pattern().as_usize()) {
            *slot = true;
        }
    }
    found
}

/// [`file_named`]'s directory groups, indexed once: the lines (after the list marker) by
/// each of their prefixes that ends with a `/`.
struct FileNames<'a> {
    lines: Vec<&'a str>,
    by_prefix: std::collections::HashMap<&'a str, Vec<usize>>,
}

impl<'a> FileNames<'a> {
    fn new(read: &'a str) -> Self {
        let lines: Vec<&str> = read
            .lines()
            .map(|l| l.trim_start_matches(['-', ' ']))
            .collect();
        let mut by_prefix: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for (i, l) in lines.iter().enumerate() {
            for (at, _) in l.match_indices('/') {
                if let Some(dir) = l.get(..=at) {
                    by_prefix.entry(dir).or_default().push(i);
                }
            }
        }
        FileNames { lines, by_prefix }
    }

    /// [`file_named`] for a path the text does not contain whole.
    fn has(&self, path: &str) -> bool {
        let Some((d, name)) = path.rsplit_once('/') else {
            return false;
        };
        let dir = format!("{d}/");
        self.by_prefix.get(dir.as_str()).is_some_and(|at| {
            at.iter().filter_map(|i| self.lines.get(*i)).any(|l| {
                l.split([' ', ',', ':']).any(|w| w == name)
            })
        })
    }
}

/// Whether `read` names `path`: the path itself, or its file name on a line that names its
/// directory as a group (`- src/api/: a.rs, b.rs`). Only baton's tests use it.
#[cfg(any(test, feature = "unstable"))]
pub fn file_named(read: &str, path: &str) -> bool {
    if read.contains(path) {
        return true;
    }
    let (dir, name) = match path.rsplit_once('/') {
        Some((d, n)) => (format!("{d}/"), n),
        None => return false,
    };
    read.lines().any(|l| {
        l.trim_start_matches(['-', ' ']).starts_with(&dir)
            && l.split([' ', ',', ':']).any(|w| w == name)
    })
}

/// Whether `read` shows `text` whole (every line, in order, up to whitespace).
fn whole(read: &str, text: &str) -> bool {
    let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    collapse(read).contains(&collapse(text))
}
