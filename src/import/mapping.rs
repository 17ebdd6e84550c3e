//! What the adapters share: a builder that turns a stream of tool events into runs and items
//! (a user prompt starts a run; the last assistant text of a run is its `assistant_message`,
//! earlier ones `narration`; tool calls are matched with their results by id), and helpers
//! for patches, line counts and size limits.

use super::{ImportOptions, ImportReport, Imported, Tool, MAX_MESSAGE_CHARS, MAX_OUTPUT_CHARS};
use crate::state::{
    FileChangeKind, Item, PlanStep, ProviderThread, ProviderThreadStatus, Request, RequestKind,
    Run, RunStatus, State, Thread, ToolStatus,
};
use std::collections::HashMap;

/// A tool call waiting for its result.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// A shell command (`tool` names the tool for a declined call).
    Command { tool: String, command: String },
    /// File edits (one per file); `tool` names the tool for a failed or declined call.
    Edit {
        tool: String,
        changes: Vec<FileEdit>,
    },
    /// A question to the user.
    Question { text: String },
    /// A plan the user must approve (Claude Code's ExitPlanMode).
    PlanApproval { text: String },
    /// A subagent (Claude Code's Task).
    Subagent {
        tool: String,
        agent: String,
        input: String,
    },
    /// A call whose result adds nothing (a plan update: the plan item is already there).
    Silent,
    /// Any other tool.
    Tool { tool: String, input: String },
}

/// One file an edit touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEdit {
    pub path: String,
    pub change: FileChangeKind,
    pub diff_lines: i64,
    pub diff: Option<String>,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok {
        output: String,
        exit_code: Option<i64>,
    },
    Failed {
        output: String,
        exit_code: Option<i64>,
    },
    /// The user declined the call.
    Declined { output: String },
}

struct RunAcc {
    items: Vec<Item>,
    /// When and where it ran (`runs[].started_at`, `ended_at`, `workspace`).
    at: super::when::RunWhere,
    status: RunStatus,
    /// Index of the newest assistant text (a `narration` until the run closes).
    last_text: Option<usize>,
}

impl RunAcc {
    fn new() -> Self {
        RunAcc {
            items: Vec::new(),
            at: super::when::RunWhere::default(),
            status: RunStatus::Completed,
            last_text: None,
        }
    }
}

/// Builds a thread out of the events an adapter reads.
pub(crate) struct Builder {
    pub tool: Tool,
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    compact_summary: Option<(String, u32)>,
    runs: Vec<RunAcc>,
    /// Items before the first prompt; they open the first run.
    preamble: Vec<Item>,
    pending: HashMap<String, (usize, usize, Pending)>,
    /// Elided texts so far.
    pub elided: u64,
    /// When and where, as entries before the first run said it.
    before: super::when::RunWhere,
}

impl Builder {
    pub fn new(tool: Tool) -> Self {
        Builder {
            tool,
            session_id: None,
            model: None,
            cwd: None,
            title: None,
            compact_summary: None,
            runs: Vec::new(),
            preamble: Vec::new(),
            pending: HashMap::new(),
            elided: 0,
            before: super::when::RunWhere::default(),
        }
    }

    /// Fold one entry's time and workspace into the current run (before the first run: into
    /// what the first run inherits).
    pub fn observe(&mut self, o: super::when::Observed<'_>) {
        match self.runs.last_mut() {
            Some(r) => r.at.observe(o),
            None => self.before.observe(o),
        }
    }

    fn push(&mut self, item: Item) -> (usize, usize) {
        let n = self.runs.len();
        match self.runs.last_mut() {
            Some(r) => {
                r.items.push(item);
                (n.saturating_sub(1), r.items.len().saturating_sub(1))
            }
            None => {
                // Before the first prompt: held, and not addressable (no tool calls land here
                // before a run exists, see `call`).
                self.preamble.push(item);
                (usize::MAX, usize::MAX)
            }
        }
    }

    fn ensure_run(&mut self) {
        if self.runs.is_empty() {
            let mut r = RunAcc::new();
            r.items.append(&mut self.preamble);
            self.runs.push(r);
        }
    }

    /// A real user prompt: it starts a run.
    pub fn user_prompt(&mut self, text: &str) {
        self.close_run();
        let mut r = RunAcc::new();
        r.items.append(&mut self.preamble);
        self.runs.push(r);
        let text = self.cap(text, MAX_MESSAGE_CHARS);
        self.push(Item::UserMessage { id: None, text });
    }

    /// A message the user typed while the agent was working (queued into the running turn):
    /// a `user_message` of the current run, which it does not end.
    pub fn user_message_mid_run(&mut self, text: &str) {
        self.ensure_run();
        let text = self.cap(text, MAX_MESSAGE_CHARS);
        self.push(Item::UserMessage { id: None, text });
    }

    /// Assistant text: a `narration` now, the run's `assistant_message` if it stays the last.
    pub fn assistant_text(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.ensure_run();
        let text = self.cap(text, MAX_MESSAGE_CHARS);
        let (_, i) = self.push(Item::Narration { id: None, text });
        if let Some(r) = self.runs.last_mut() {
            r.last_text = Some(i);
        }
    }

    pub fn reasoning(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        let text = self.cap(text, MAX_MESSAGE_CHARS);
        self.push(Item::Reasoning { id: None, text });
    }

    pub fn protocol(&mut self, text: &str) {
        let text = one_line(text, 240);
        self.push(Item::Protocol { id: None, text });
    }

    pub fn error(&mut self, text: &str) {
        self.ensure_run();
        let text = self.cap(text, MAX_OUTPUT_CHARS);
        self.push(Item::Error { id: None, text });
    }

    pub fn plan(&mut self, steps: Vec<PlanStep>) {
        self.ensure_run();
        self.push(Item::Plan { id: None, steps });
    }

    /// The current run was interrupted by the user.
    pub fn interrupted(&mut self) {
        if let Some(r) = self.runs.last_mut() {
            r.status = RunStatus::Interrupted;
        }
    }

    /// The user rolled back the last `n` runs (Codex's `thread_rolled_back`): they are
    /// `rolled_back`, never handed over.
    pub fn roll_back(&mut self, n: usize) {
        let keep = self.runs.len().saturating_sub(n);
        for r in self.runs.iter_mut().skip(keep) {
            r.status = RunStatus::RolledBack;
        }
    }

    /// The user interrupted the current run (`how`: the log's own words): the run is
    /// `interrupted`, and an `error` item says so, with what the run had finished since its
    /// last answer (the results of its completed tool calls and commands), so that work done
    /// before the interruption (web research, a passing check) reaches the next agent.
    pub fn interrupted_by_user(&mut self, how: &str) {
        if self.runs.is_empty() {
            return;
        }
        self.interrupted();
        let finished = self.finished_since_answer();
        let mut text = format!("The user interrupted run {} before it finished ({how}).", self.runs.len());
        if !finished.is_empty() {
            text.push_str(" What it had finished by then:\n");
            text.push_str(&finished);
        }
        self.error(&text);
    }

    /// The completed tool calls and commands of the current run after its last assistant
    /// text, each with the head of its output.
    fn finished_since_answer(&self) -> String {
        const EACH: usize = 3000;
        const TOTAL: usize = 12_000;
        let Some(run) = self.runs.last() else {
            return String::new();
        };
        let from = run.last_text.map_or(0, |i| i.saturating_add(1));
        let mut out = String::new();
        for item in run.items.iter().skip(from) {
            let (head, output) = match item {
                Item::ToolCall {
                    tool,
                    input,
                    status: Some(ToolStatus::Completed),
                    output,
                    ..
                } => (
                    format!("{tool} {}", one_line(input.as_deref().unwrap_or(""), 200)),
                    output.as_deref().unwrap_or(""),
                ),
                Item::Command {
                    command,
                    exit_code: Some(code),
                    output,
                    ..
                } => (
                    format!("ran {} (exit {code})", one_line(command, 200)),
                    output.as_deref().unwrap_or(""),
                ),
                _ => continue,
            };
            if out.chars().count() > TOTAL {
                out.push_str("- (more results not shown)\n");
                break;
            }
            out.push_str(&format!("- {}", head.trim()));
            let output = output.trim();
            if !output.is_empty() {
                let kept: String = output.chars().take(EACH).collect();
                out.push_str(":\n");
                for l in kept.lines() {
                    out.push_str("  ");
                    out.push_str(l);
                    out.push('\n');
                }
                if kept.len() < output.len() {
                    out.push_str("  [...]\n");
                }
            } else {
                out.push('\n');
            }
        }
        out
    }

    /// The compaction summary the tool carried over from an earlier context.
    pub fn compact_summary(&mut self, text: &str) {
        let through = u32::try_from(self.runs.len()).unwrap_or(u32::MAX);
        let text = self.cap(text, MAX_MESSAGE_CHARS);
        self.compact_summary = Some((text, through));
    }

    /// A tool call: a placeholder item (a running `tool_call`) until its result arrives.
    pub fn call(&mut self, id: &str, pending: Pending) {
        self.ensure_run();
        let item = match &pending {
            Pending::Question { text } => Item::Question {
                id: None,
                text: text.clone(),
                answered: false,
            },
            Pending::PlanApproval { text } => Item::Approval {
                id: None,
                text: text.clone(),
                resolved: false,
            },
            Pending::Silent => {
                if !id.is_empty() {
                    self.pending
                        .insert(id.to_string(), (usize::MAX, usize::MAX, Pending::Silent));
                }
                return;
            }
            other => Item::ToolCall {
                id: None,
                tool: pending_tool(other),
                input: Some(self.cap(&pending_input(other), MAX_OUTPUT_CHARS)),
                status: Some(ToolStatus::Running),
                output: None,
            },
        };
        let (r, i) = self.push(item);
        if !id.is_empty() {
            self.pending.insert(id.to_string(), (r, i, pending));
        }
    }

    /// Whether call `id` waits for its result.
    pub fn is_waiting(&self, id: &str) -> bool {
        self.pending.contains_key(id)
    }

    /// The tool says whether the waiting edit `id` created or changed its file.
    pub fn set_edit_change(&mut self, id: &str, change: FileChangeKind) {
        if let Some((_, _, Pending::Edit { changes, .. })) = self.pending.get_mut(id) {
            for c in changes {
                c.change = change;
            }
        }
    }

    /// The result of call `id`. Returns false when no call of that id is waiting.
    pub fn result(&mut self, id: &str, outcome: Outcome) -> bool {
        let Some((r, i, pending)) = self.pending.remove(id) else {
            return false;
        };
        let mut extra: Vec<Item> = Vec::new();
        let replaced: Vec<Item> = match (pending, outcome) {
            (Pending::Silent, _) => return true,
            (Pending::Command { command, .. }, Outcome::Ok { output, exit_code })
            | (Pending::Command { command, .. }, Outcome::Failed { output, exit_code }) => {
                // A passing `rm` deletes files: each is a `file_change` `deleted`, so that a
                // file created and removed again is not handed over as changed.
                let deleted = if exit_code == Some(0) {
                    removed_paths(&command)
                } else {
                    Vec::new()
                };
                let mut v = vec![Item::Command {
                    id: None,
                    command,
                    exit_code,
                    output: Some(self.cap(&output, MAX_OUTPUT_CHARS)),
                }];
                v.extend(deleted.into_iter().map(|p| Item::FileChange {
                    id: None,
                    path: self.absolute(&p),
                    change: Some(FileChangeKind::Deleted),
                    diff_lines: Some(0),
                    diff: None,
                }));
                v
            }
            (Pending::Edit { changes, .. }, Outcome::Ok { .. }) => changes
                .into_iter()
                .map(|c| Item::FileChange {
                    id: None,
                    path: c.path,
                    change: Some(c.change),
                    diff_lines: Some(c.diff_lines),
                    diff: c.diff.map(|d| self.cap(&d, MAX_OUTPUT_CHARS)),
                })
                .collect(),
            (Pending::Question { text }, Outcome::Ok { output, .. }) => {
                let text = if output.trim().is_empty() {
                    text
                } else {
                    format!("{text}\nAnswer: {}", one_line(&output, 2000))
                };
                vec![Item::Question {
                    id: None,
                    text,
                    answered: true,
                }]
            }
            (Pending::PlanApproval { text }, Outcome::Ok { .. }) => vec![Item::Approval {
                id: None,
                text: format!("{text}\n(approved)"),
                resolved: true,
            }],
            (Pending::PlanApproval { text }, Outcome::Declined { .. })
            | (Pending::PlanApproval { text }, Outcome::Failed { .. }) => vec![Item::Approval {
                id: None,
                text: format!("{text}\n(not approved)"),
                resolved: true,
            }],
            (Pending::Question { text }, _) => vec![Item::Question {
                id: None,
                text: format!("{text}\n(declined to answer)"),
                answered: false,
            }],
            (Pending::Subagent { tool, agent, input }, Outcome::Ok { output, .. }) => {
                extra.push(Item::SubagentResult {
                    id: None,
                    agent,
                    text: self.cap(&output, MAX_OUTPUT_CHARS),
                });
                vec![Item::ToolCall {
                    id: None,
                    tool,
                    input: Some(self.cap(&input, MAX_OUTPUT_CHARS)),
                    status: Some(ToolStatus::Completed),
                    output: None,
                }]
            }
            (p, Outcome::Declined { output }) => {
                let tool = pending_tool(&p);
                let input = pending_input(&p);
                extra.push(Item::Approval {
                    id: None,
                    text: format!("Allow {tool}: {}? (declined)", one_line(&input, 200)),
                    resolved: true,
                });
                vec![Item::ToolCall {
                    id: None,
                    tool,
                    input: Some(self.cap(&input, MAX_OUTPUT_CHARS)),
                    status: Some(ToolStatus::Declined),
                    output: Some(self.cap(&output, MAX_OUTPUT_CHARS)),
                }]
            }
            (p, Outcome::Failed { output, .. }) => vec![Item::ToolCall {
                id: None,
                tool: pending_tool(&p),
                input: Some(self.cap(&pending_input(&p), MAX_OUTPUT_CHARS)),
                status: Some(ToolStatus::Failed),
                output: Some(self.cap(&output, MAX_OUTPUT_CHARS)),
            }],
            (p, Outcome::Ok { output, .. }) => vec![Item::ToolCall {
                id: None,
                tool: pending_tool(&p),
                input: Some(self.cap(&pending_input(&p), MAX_OUTPUT_CHARS)),
                status: Some(ToolStatus::Completed),
                output: (!output.is_empty()).then(|| self.cap(&output, MAX_OUTPUT_CHARS)),
            }],
        };
        self.replace(r, i, replaced);
        for item in extra {
            self.push(item);
        }
        true
    }

    /// Put `items` where the placeholder at (`r`, `i`) is. Several items (an edit touching
    /// several files) go into the placeholder's place plus new slots right after it; the
    /// waiting calls of that run are re-pointed.
    fn replace(&mut self, r: usize, i: usize, items: Vec<Item>) {
        let Some(run) = self.runs.get_mut(r) else {
            return;
        };
        let mut it = items.into_iter();
        match (run.items.get_mut(i), it.next()) {
            (Some(slot), Some(first)) => *slot = first,
            _ => return,
        }
        let rest: Vec<Item> = it.collect();
        if rest.is_empty() {
            return;
        }
        let n = rest.len();
        let at = i.saturating_add(1);
        run.items.splice(at..at, rest);
        if let Some(t) = run.last_text.as_mut() {
            if *t >= at {
                *t = t.saturating_add(n);
            }
        }
        for (pr, pi, _) in self.pending.values_mut() {
            if *pr == r && *pi >= at {
                *pi = pi.saturating_add(n);
            }
        }
    }

    /// A path a command names, as the tool names the files it edits: Claude Code's edits carry
    /// absolute paths, so a relative path is joined to the working directory; Codex's patches
    /// name paths relative to it, so they stay relative.
    fn absolute(&self, path: &str) -> String {
        match (&self.cwd, self.tool) {
            (Some(cwd), Tool::ClaudeCode) if !path.starts_with('/') => {
                let rel = path.strip_prefix("./").unwrap_or(path);
                format!("{}/{rel}", cwd.trim_end_matches('/'))
            }
            _ => path.to_string(),
        }
    }

    /// Shorten `text` to `max` characters, keeping its head and tail.
    pub fn cap(&mut self, text: &str, max: usize) -> String {
        match elide(text, max) {
            Some(s) => {
                self.elided = self.elided.saturating_add(1);
                s
            }
            None => text.to_string(),
        }
    }

    fn close_run(&mut self) {
        if let Some(r) = self.runs.last_mut() {
            if let Some(i) = r.last_text.take() {
                if let Some(item) = r.items.get_mut(i) {
                    if let Item::Narration { text, .. } = item {
                        let text = std::mem::take(text);
                        *item = Item::AssistantMessage { id: None, text };
                    }
                }
            }
        }
    }

    /// The thread state, with the calls still waiting for a result left as they are (a
    /// command without an exit code, a running tool call) and their run marked interrupted.
    pub fn finish(mut self, report: &mut ImportReport, opts: &ImportOptions) -> Imported {
        self.close_run();
        for (r, i, p) in std::mem::take(&mut self.pending).into_values() {
            if let Pending::Command { command, .. } = p {
                if let Some(slot) = self.runs.get_mut(r).and_then(|run| run.items.get_mut(i)) {
                    *slot = Item::Command {
                        id: None,
                        command,
                        exit_code: None,
                        output: None,
                    };
                }
            }
            if let Some(run) = self.runs.get_mut(r) {
                if run.status == RunStatus::Completed {
                    run.status = RunStatus::Interrupted;
                }
            }
        }
        if self.runs.is_empty() && !self.preamble.is_empty() {
            self.ensure_run();
        }
        report.elided = report.elided.saturating_add(self.elided);
        let provider = self.tool.provider().to_string();
        let session_id = self
            .session_id
            .clone()
            .filter(|s| crate::ids::validate_id("thread id", s).is_ok())
            .unwrap_or_else(|| format!("{}-session", self.tool.as_str()));
        let before = self.before;
        let runs: Vec<Run> = self
            .runs
            .into_iter()
            .enumerate()
            .map(|(n, mut r)| {
                if n == 0 {
                    r.at.inherit(&before);
                }
                let (started_at, ended_at, workspace) = r.at.into_fields();
                Run {
                    ordinal: u32::try_from(n.saturating_add(1)).unwrap_or(u32::MAX),
                    provider: provider.clone(),
                    provider_thread: Some(session_id.clone()),
                    status: r.status,
                    handoff: None,
                    items: r.items,
                    started_at,
                    ended_at,
                    workspace,
                }
            })
            .collect();
        // Without a title in the log, the first prompt names the thread (as the tools' own
        // session pickers do).
        let title = self.title.clone().or_else(|| {
            runs.iter()
                .flat_map(|r| r.items.iter())
                .find_map(|i| match i {
                    Item::UserMessage { text, .. } => Some(one_line(text, 80)),
                    _ => None,
                })
        });
        let (compact_summary, compact_summary_through) = match self.compact_summary {
            Some((s, t)) => (Some(s), (t > 0).then_some(t)),
            None => (None, None),
        };
        let state = State {
            version: 1,
            thread: Thread {
                id: session_id.clone(),
                title,
                compact_summary,
                compact_summary_through,
                parent: None,
                // The session's working directory is the workspace its file changes are
                // listed under (by relative path).
                workspace: self.cwd.clone(),
            },
            providers: Default::default(),
            provider_threads: vec![ProviderThread {
                id: session_id.clone(),
                provider: provider.clone(),
                model: self.model.clone(),
                runtime_mode: None,
                status: ProviderThreadStatus::Active,
                resume_failed: false,
            }],
            runs,
            handoffs: Vec::new(),
            transfers: Vec::new(),
            checkpoints: Vec::new(),
            request: Request {
                provider: opts.request_provider.clone().unwrap_or(provider),
                model: None,
                runtime_mode: None,
                clean_context: false,
                message: opts.request_message.clone(),
                kind: RequestKind::Dispatch,
                fork_anchor: None,
                at: None,
                workspace: None,
            },
        };
        Imported {
            state,
            report: std::mem::take(report),
            session_id,
            cwd: self.cwd,
        }
    }
}

fn pending_tool(p: &Pending) -> String {
    match p {
        Pending::Command { tool, .. }
        | Pending::Edit { tool, .. }
        | Pending::Subagent { tool, .. }
        | Pending::Tool { tool, .. } => tool.clone(),
        Pending::Question { .. } => "question".to_string(),
        Pending::PlanApproval { .. } => "plan approval".to_string(),
        Pending::Silent => String::new(),
    }
}

fn pending_input(p: &Pending) -> String {
    match p {
        Pending::Command { command, .. } => command.clone(),
        Pending::Edit { changes, .. } => changes
            .iter()
            .map(|c| c.path.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        Pending::Subagent { input, .. } | Pending::Tool { input, .. } => input.clone(),
        Pending::Question { text } | Pending::PlanApproval { text } => text.clone(),
        Pending::Silent => String::new(),
    }
}

/// `text` shortened to `max` characters (head and tail kept, the middle replaced by a note),
/// or `None` when it fits.
pub(crate) fn elide(text: &str, max: usize) -> Option<String> {
    // Cheap test first: a string of at most `max` bytes has at most `max` characters.
    if text.len() <= max {
        return None;
    }
    let total = text.chars().count();
    if total <= max {
        return None;
    }
    let half = max / 2;
    let head_end = text.char_indices().nth(half).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total.saturating_sub(half))
        .map_or(text.len(), |(i, _)| i);
    let head = text.get(..head_end).unwrap_or("");
    let tail = text.get(tail_start..).unwrap_or("");
    Some(format!(
        "{head}\n[... {} characters elided by baton import ...]\n{tail}",
        total.saturating_sub(half.saturating_mul(2))
    ))
}

/// The first line of `text`, at most `max` characters, cut at a word boundary (` ...` says
/// that something follows).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    let mut out = cut_words(line, max);
    if out.len() < line.len() || text.trim().lines().nth(1).is_some() {
        out.push_str(" ...");
    }
    out
}

/// `text` on one line (whitespace runs as one space), at most `max` characters, cut at a
/// word boundary with `...` when longer.
pub(crate) fn gist(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let out = cut_words(&flat, max);
    if out.len() < flat.len() {
        format!("{out} ...")
    } else {
        out
    }
}

/// The longest head of `line` of at most `max` characters that ends at a word boundary (in
/// the last half of the room; else at `max` characters).
fn cut_words(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_string();
    }
    let end = line.char_indices().nth(max).map_or(line.len(), |(i, _)| i);
    let head = line.get(..end).unwrap_or(line);
    let at_space = line.get(end..).is_some_and(|r| r.starts_with(' '));
    if at_space {
        return head.trim_end().to_string();
    }
    match head.rfind(' ') {
        Some(i) if head.get(..i).is_some_and(|h| h.chars().count() >= max / 2) => {
            head.get(..i).unwrap_or(head).trim_end().to_string()
        }
        _ => head.to_string(),
    }
}

/// The files a plain `rm` (or `git rm`) command line removes: `rm [-flags] PATH...`, each part
/// of a `&&` / `;` chain read alone. Nothing when the line has quotes, globs, variables,
/// substitutions, redirections or pipes, or changes directory: the paths could not be read
/// for certain.
pub(crate) fn removed_paths(command: &str) -> Vec<String> {
    if command.contains(|c: char| "'\"*?$`{}<>|()\\".contains(c)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for part in command.split("&&").flat_map(|p| p.split(';')) {
        let words: Vec<&str> = part.split_whitespace().collect();
        let args = match words.as_slice() {
            ["cd", ..] | ["pushd", ..] => return Vec::new(),
            ["rm", rest @ ..] | ["git", "rm", rest @ ..] => rest,
            _ => continue,
        };
        out.extend(
            args.iter()
                .filter(|a| !a.starts_with('-'))
                .map(|a| a.to_string()),
        );
    }
    out
}

/// Lines of a text, as a diff counts them (a trailing newline ends the last line).
pub(crate) fn count_lines(text: &str) -> i64 {
    if text.is_empty() {
        return 0;
    }
    i64::try_from(text.lines().count()).unwrap_or(i64::MAX)
}

/// A small diff of an edit: the old lines as `-`, the new ones as `+`.
pub(crate) fn edit_diff(old: &str, new: &str) -> String {
    let mut out = String::with_capacity(old.len().saturating_add(new.len()).saturating_add(16));
    for l in old.lines() {
        out.push('-');
        out.push_str(l);
        out.push('\n');
    }
    for l in new.lines() {
        out.push('+');
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The files of a Codex `apply_patch` patch (`*** Add File: p`, `*** Update File: p`,
/// `*** Delete File: p`, `*** Move to: q`), each with its `+`/`-` line count and diff.
pub(crate) fn parse_patch(patch: &str) -> Vec<FileEdit> {
    let mut out: Vec<FileEdit> = Vec::new();
    for line in patch.lines() {
        let header = [
            ("*** Add File: ", FileChangeKind::Created),
            ("*** Update File: ", FileChangeKind::Modified),
            ("*** Delete File: ", FileChangeKind::Deleted),
        ]
        .iter()
        .find_map(|(p, k)| line.strip_prefix(p).map(|rest| (rest.trim(), *k)));
        if let Some((path, change)) = header {
            out.push(FileEdit {
                path: path.to_string(),
                change,
                diff_lines: 0,
                diff: Some(String::new()),
            });
            continue;
        }
        let Some(cur) = out.last_mut() else {
            continue;
        };
        if let Some(to) = line.strip_prefix("*** Move to: ") {
            cur.path = format!("{} -> {}", cur.path, to.trim());
            cur.change = FileChangeKind::Renamed;
            continue;
        }
        if line.starts_with("*** End Patch") {
            continue;
        }
        if (line.starts_with('+') || line.starts_with('-')) && !line.starts_with("***") {
            cur.diff_lines = cur.diff_lines.saturating_add(1);
        }
        if let Some(d) = cur.diff.as_mut() {
            d.push_str(line);
            d.push('\n');
        }
    }
    out
}

/// A plan step status from a tool's word for it.
pub(crate) fn step_status(s: &str) -> crate::state::StepStatus {
    match s {
        "completed" | "done" => crate::state::StepStatus::Done,
        "in_progress" | "in-progress" | "active" => crate::state::StepStatus::InProgress,
        _ => crate::state::StepStatus::Pending,
    }
}

/// The text of a JSON value: a string as is, anything else as compact JSON.
pub(crate) fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A string field of an object.
pub(crate) fn str_field<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|x| x.as_str())
}

/// Text that is wholly one harness tag (`<system-reminder>...</system-reminder>`,
/// `<local-command-stdout>...`, `<bash-input>...`): written by Claude Code, not typed.
pub(crate) fn is_harness_markup(t: &str) -> bool {
    let Some(rest) = t.strip_prefix('<') else {
        return false;
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    !name.is_empty()
        && rest.get(name.len()..).is_some_and(|r| r.starts_with('>'))
        && t.trim_end().ends_with('>')
        && t.contains(&format!("</{name}>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_files_and_counts() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Update File: src/b.rs\n@@\n-old\n+new\n ctx\n*** Delete File: c.txt\n*** End Patch\n";
        let f = parse_patch(p);
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].path.as_str(), f[0].diff_lines), ("a.txt", 2));
        assert_eq!((f[1].path.as_str(), f[1].diff_lines), ("src/b.rs", 2));
        assert_eq!(f[2].change, FileChangeKind::Deleted);
    }

    #[test]
    fn removed_files() {
        assert_eq!(removed_paths("rm scratch/repro.ts"), ["scratch/repro.ts"]);
        assert_eq!(removed_paths("rm -f a.txt b.txt && ls"), ["a.txt", "b.txt"]);
        assert_eq!(removed_paths("git rm -q old.rs"), ["old.rs"]);
        assert!(removed_paths("rm *.tmp").is_empty());
        assert!(removed_paths("cd x && rm a").is_empty());
        assert!(removed_paths("echo rm a").is_empty());
    }

    #[test]
    fn cuts_fall_between_words() {
        assert_eq!(one_line("fix the login redirect loop", 12), "fix the ...");
        assert_eq!(one_line("fix the", 12), "fix the");
        assert_eq!(gist("a  bb\ncdefgh ijk", 8), "a bb ...");
        assert_eq!(one_line("abcdefghijkl", 5), "abcde ...");
    }

    #[test]
    fn elide_keeps_head_and_tail() {
        let s = "a".repeat(100) + &"b".repeat(100);
        let e = elide(&s, 50).unwrap();
        assert!(e.starts_with(&"a".repeat(25)));
        assert!(e.ends_with(&"b".repeat(25)));
        assert!(e.contains("150 characters elided"));
        assert!(elide("short", 50).is_none());
    }
}
