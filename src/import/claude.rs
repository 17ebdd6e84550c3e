//! Claude Code sessions: `~/.claude/projects/<slug>/<session>.jsonl`, one JSON entry a line
//! (`type`: `user`, `assistant`, `system`, `summary`, `progress`, `file-history-snapshot`,
//! `queue-operation`, `attachment`, ...; each `user`/`assistant` entry carries `sessionId`,
//! `cwd`, `uuid`/`parentUuid` and the API `message`). The mapping is in docs/import.md.

use super::mapping::{
    count_lines, edit_diff, is_harness_markup, one_line, step_status, str_field, text_of, Builder,
    FileEdit, Outcome, Pending,
};
use super::{Adapter, ImportOptions, ImportReport, Imported, Line, Tool};
use crate::state::{FileChangeKind, PlanStep};
use serde_json::Value;

/// Entry types Claude Code writes that carry nothing to hand over; kept as `protocol`.
const PROTOCOL_TYPES: &[&str] = &[
    "system",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
    "custom-title",
    "tag",
];

/// Whether a JSON line looks like a Claude Code session entry.
pub(crate) fn looks_like(v: &Value) -> bool {
    if v.get("payload").is_some() {
        return false;
    }
    let ty = str_field(v, "type").unwrap_or("");
    v.get("sessionId").is_some_and(Value::is_string)
        || (ty == "summary" && v.get("leafUuid").is_some())
        || (ty == "file-history-snapshot" && v.get("snapshot").is_some())
        || ((ty == "user" || ty == "assistant") && v.get("message").is_some_and(Value::is_object))
}

pub(crate) struct ClaudeAdapter {
    b: Builder,
}

impl ClaudeAdapter {
    pub(crate) fn new() -> Self {
        ClaudeAdapter {
            b: Builder::new(Tool::ClaudeCode),
        }
    }

    fn user(&mut self, v: &Value) {
        let content = v.get("message").and_then(|m| m.get("content"));
        if v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
            let text = content.map(content_text).unwrap_or_default();
            self.b.compact_summary(strip_continuation(&text));
            return;
        }
        if v.get("isMeta").and_then(Value::as_bool) == Some(true) {
            let text = content.map(content_text).unwrap_or_default();
            self.b.protocol(&format!("claude-code/meta: {text}"));
            return;
        }
        match content {
            Some(Value::Array(blocks)) => {
                let mut texts: Vec<String> = Vec::new();
                for block in blocks {
                    match str_field(block, "type") {
                        Some("tool_result") => self.tool_result(v, block),
                        Some("text") => {
                            texts.push(str_field(block, "text").unwrap_or("").to_string())
                        }
                        Some("image") => texts.push("[image]".to_string()),
                        Some(other) => texts.push(format!("[{other}]")),
                        None => {}
                    }
                }
                let text = texts.join("\n");
                if !text.trim().is_empty() {
                    self.user_text(&text);
                }
            }
            Some(Value::String(s)) => self.user_text(s),
            _ => self.b.protocol("claude-code/user: (no content)"),
        }
    }

    /// A user entry's text: a real prompt, a slash command, or something the harness wrote.
    fn user_text(&mut self, text: &str) {
        let t = text.trim_start();
        if t.starts_with("<command-name>") || t.starts_with("<command-message>") {
            let name = between(t, "<command-name>", "</command-name>").unwrap_or("");
            let args = between(t, "<command-args>", "</command-args>").unwrap_or("");
            if args.trim().is_empty() {
                self.b
                    .protocol(&format!("claude-code/slash command: {}", name.trim()));
            } else {
                self.b
                    .user_prompt(&format!("{} {}", name.trim(), args.trim()));
            }
            return;
        }
        if t.starts_with("[Request interrupted by user") {
            self.b.protocol(&format!("claude-code/interrupt: {t}"));
            self.b.interrupted_by_user(t.trim());
            return;
        }
        if t.starts_with(CONTINUATION) {
            self.b.compact_summary(strip_continuation(t));
            return;
        }
        if t.starts_with("Caveat: ") || is_harness_markup(t) {
            self.b.protocol(&format!("claude-code/harness: {t}"));
            return;
        }
        self.b.user_prompt(text);
    }

    fn tool_result(&mut self, entry: &Value, block: &Value) {
        let id = str_field(block, "tool_use_id").unwrap_or("");
        let text = block.get("content").map(content_text).unwrap_or_default();
        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let structured = entry.get("toolUseResult");
        let rejected = structured.and_then(Value::as_str) == Some("User rejected tool use")
            || entry.get("toolDenialKind").is_some()
            || text.starts_with("The user doesn't want to proceed with this tool use");
        let outcome = if rejected {
            Outcome::Declined { output: text }
        } else if is_error {
            let exit_code = exit_code_prefix(&text);
            Outcome::Failed {
                output: match exit_code {
                    // `Exit code N` heads the text; the exit code is kept on its own.
                    Some(_) => text.split_once('\n').map_or("", |(_, rest)| rest).to_string(),
                    None => text,
                },
                exit_code,
            }
        } else {
            let obj = structured.filter(|s| s.is_object());
            if let Some(kind) = obj.and_then(|s| str_field(s, "type")) {
                let change = match kind {
                    "create" => Some(FileChangeKind::Created),
                    "update" => Some(FileChangeKind::Modified),
                    _ => None,
                };
                if let Some(c) = change {
                    self.b.set_edit_change(id, c);
                }
            }
            let interrupted = obj
                .and_then(|s| s.get("interrupted"))
                .and_then(Value::as_bool)
                == Some(true);
            Outcome::Ok {
                output: result_output(obj, &text),
                exit_code: (!interrupted).then_some(0),
            }
        };
        if !self.b.result(id, outcome) {
            self.b
                .protocol(&format!("claude-code/tool_result for unknown call {id}"));
        }
    }

    fn assistant(&mut self, v: &Value) {
        let msg = v.get("message");
        if let Some(m) = msg.and_then(|m| str_field(m, "model")) {
            if !m.starts_with('<') {
                self.b.model = Some(m.to_string());
            }
        }
        let content = msg.and_then(|m| m.get("content"));
        if v.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
            let text = content.map(content_text).unwrap_or_default();
            self.b.error(&text);
            return;
        }
        match content {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match str_field(block, "type") {
                        Some("text") => self
                            .b
                            .assistant_text(str_field(block, "text").unwrap_or("")),
                        Some("thinking") => {
                            self.b.reasoning(str_field(block, "thinking").unwrap_or(""))
                        }
                        Some("redacted_thinking") => self.b.reasoning("[redacted thinking]"),
                        Some("tool_use") | Some("server_tool_use") => self.tool_use(block),
                        Some(other) => self
                            .b
                            .protocol(&format!("claude-code/assistant block: {other}")),
                        None => {}
                    }
                }
            }
            Some(Value::String(s)) => self.b.assistant_text(s),
            _ => {}
        }
    }

    fn tool_use(&mut self, block: &Value) {
        let id = str_field(block, "id").unwrap_or("");
        let name = str_field(block, "name").unwrap_or("tool");
        let null = Value::Null;
        let input = block.get("input").unwrap_or(&null);
        let s = |k: &str| str_field(input, k).unwrap_or("").to_string();
        let pending = match name {
            "Bash" => Pending::Command {
                tool: name.to_string(),
                command: s("command"),
            },
            "Edit" => {
                let (old, new) = (s("old_string"), s("new_string"));
                Pending::Edit {
                    tool: name.to_string(),
                    changes: vec![FileEdit {
                        path: s("file_path"),
                        change: FileChangeKind::Modified,
                        diff_lines: count_lines(&old).saturating_add(count_lines(&new)),
                        diff: Some(edit_diff(&old, &new)),
                    }],
                }
            }
            "MultiEdit" => {
                let mut lines = 0i64;
                let mut diff = String::new();
                for e in input
                    .get("edits")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let old = str_field(e, "old_string").unwrap_or("");
                    let new = str_field(e, "new_string").unwrap_or("");
                    lines = lines.saturating_add(count_lines(old).saturating_add(count_lines(new)));
                    diff.push_str(&edit_diff(old, new));
                }
                Pending::Edit {
                    tool: name.to_string(),
                    changes: vec![FileEdit {
                        path: s("file_path"),
                        change: FileChangeKind::Modified,
                        diff_lines: lines,
                        diff: Some(diff),
                    }],
                }
            }
            "Write" => {
                let content = s("content");
                Pending::Edit {
                    tool: name.to_string(),
                    changes: vec![FileEdit {
                        path: s("file_path"),
                        change: FileChangeKind::Created,
                        diff_lines: count_lines(&content),
                        diff: Some(edit_diff("", &content)),
                    }],
                }
            }
            "NotebookEdit" => {
                let src = s("new_source");
                Pending::Edit {
                    tool: name.to_string(),
                    changes: vec![FileEdit {
                        path: s("notebook_path"),
                        change: FileChangeKind::Modified,
                        diff_lines: count_lines(&src),
                        diff: Some(edit_diff("", &src)),
                    }],
                }
            }
            "TodoWrite" => {
                let steps = input
                    .get("todos")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|t| PlanStep {
                        text: str_field(t, "content").unwrap_or("").to_string(),
                        status: step_status(str_field(t, "status").unwrap_or("")),
                    })
                    .collect();
                self.b.plan(steps);
                Pending::Silent
            }
            "AskUserQuestion" => {
                let qs: Vec<String> = input
                    .get("questions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|q| str_field(q, "question").map(str::to_string))
                    .collect();
                let text = if qs.is_empty() {
                    s("question")
                } else {
                    qs.join("\n")
                };
                Pending::Question { text }
            }
            "ExitPlanMode" => Pending::PlanApproval {
                text: format!("Approve the plan:\n{}", s("plan")),
            },
            "Task" | "Agent" => {
                let agent = str_field(input, "subagent_type").unwrap_or("general-purpose");
                Pending::Subagent {
                    tool: name.to_string(),
                    agent: agent.to_string(),
                    input: format!("{}: {}", s("description"), s("prompt")),
                }
            }
            _ => Pending::Tool {
                tool: name.to_string(),
                input: tool_input(input),
            },
        };
        self.b.call(id, pending);
    }
}

impl Adapter for ClaudeAdapter {
    fn feed(&mut self, line: Line<'_>, report: &mut ImportReport, _file: &str) {
        let v = line.value;
        if self.b.session_id.is_none() {
            if let Some(s) = str_field(v, "sessionId") {
                self.b.session_id = Some(s.to_string());
            }
        }
        if self.b.cwd.is_none() {
            if let Some(c) = str_field(v, "cwd") {
                self.b.cwd = Some(c.to_string());
            }
        }
        let ty = str_field(v, "type").unwrap_or("");
        if v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            // A subagent's own conversation, written inline by older versions; its result
            // reaches the main conversation as the Task call's result.
            self.b.protocol(&format!("claude-code/sidechain {ty}"));
            return;
        }
        match ty {
            "user" => self.user(v),
            "assistant" => self.assistant(v),
            "attachment" if is_queued_prompt(v) => {
                let prompt = v
                    .get("attachment")
                    .and_then(|a| str_field(a, "prompt"))
                    .unwrap_or("");
                self.b.user_message_mid_run(prompt);
            }
            "summary" => {
                if let Some(s) = str_field(v, "summary") {
                    self.b.title = Some(one_line(s, 200));
                }
            }
            t if PROTOCOL_TYPES.contains(&t) => {
                let detail = str_field(v, "subtype")
                    .or_else(|| str_field(v, "content"))
                    .unwrap_or("");
                if detail.is_empty() {
                    self.b.protocol(&format!("claude-code/{t}"));
                } else {
                    self.b.protocol(&format!("claude-code/{t}: {detail}"));
                }
            }
            other => {
                let kind = if other.is_empty() { "(no type)" } else { other };
                report.count_unknown(kind);
                self.b
                    .protocol(&format!("claude-code/unknown entry: {kind}"));
            }
        }
        self.b.observe(entry_where(v));
    }

    fn finish(self: Box<Self>, report: &mut ImportReport, opts: &ImportOptions) -> Imported {
        self.b.finish(report, opts)
    }
}

/// When and where an entry was written: Claude Code puts `timestamp`, `cwd` and `gitBranch`
/// on every entry (no commit id).
fn entry_where(v: &Value) -> super::when::Observed<'_> {
    super::when::Observed {
        at: str_field(v, "timestamp"),
        cwd: str_field(v, "cwd"),
        branch: str_field(v, "gitBranch"),
        head: None,
    }
}

const CONTINUATION: &str = "This session is being continued from a previous conversation";

/// The summary without Claude Code's lead-in ("This session is being continued from a previous
/// conversation that ran out of context. The conversation is summarized below:" in older
/// builds, "... The summary below covers the earlier portion of the conversation." in newer
/// ones: its first paragraph) and without its closing instruction to the model ("Please
/// continue the conversation from where we left it off ..."), which would only confuse the
/// reader of a handoff.
fn strip_continuation(text: &str) -> &str {
    let t = text.trim_start();
    if !t.starts_with(CONTINUATION) {
        return text;
    }
    let body = match t.find("summarized below:") {
        Some(i) => t.get(i.saturating_add("summarized below:".len())..),
        None => t.find('\n').and_then(|i| t.get(i..)),
    }
    .unwrap_or(t)
    .trim();
    match body.rfind(CONTINUE_INSTRUCTION) {
        Some(i) => body.get(..i).unwrap_or(body).trim_end(),
        None => body,
    }
}

/// The instruction Claude Code ends a compaction summary with.
const CONTINUE_INSTRUCTION: &str = "Please continue the conversation from where we left";

/// An `attachment` carrying a prompt the user queued while the agent worked.
fn is_queued_prompt(v: &Value) -> bool {
    let Some(a) = v.get("attachment") else {
        return false;
    };
    str_field(a, "type") == Some("queued_command")
        && matches!(str_field(a, "commandMode"), None | Some("prompt"))
        && str_field(a, "prompt").is_some_and(|p| !p.trim().is_empty() && !is_harness_markup(p))
}

/// The text of a message `content`: a string, or the text of its blocks.
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match str_field(b, "type") {
                Some("text") => str_field(b, "text").unwrap_or("").to_string(),
                Some("image") => "[image]".to_string(),
                _ => text_of(b.get("text").unwrap_or(&Value::Null)),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        other => text_of(other),
    }
}

/// A tool result's output: the structured result's fields where Claude Code keeps them,
/// else the text the model saw.
fn result_output(structured: Option<&Value>, text: &str) -> String {
    let Some(s) = structured else {
        return text.to_string();
    };
    if let Some(out) = str_field(s, "stdout") {
        let err = str_field(s, "stderr").unwrap_or("");
        return if err.is_empty() {
            out.to_string()
        } else if out.is_empty() {
            err.to_string()
        } else {
            format!("{out}\n{err}")
        };
    }
    if let Some(answers) = s.get("answers").and_then(Value::as_object) {
        return answers.values().map(text_of).collect::<Vec<_>>().join("; ");
    }
    if let Some(c) = s.get("content").filter(|c| c.is_array()) {
        let t = content_text(c);
        if !t.is_empty() {
            return t;
        }
    }
    text.to_string()
}

/// `Exit code N` at the start of a failed Bash result.
fn exit_code_prefix(text: &str) -> Option<i64> {
    let rest = text.trim_start().strip_prefix("Exit code ")?;
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// A short input for a generic tool call: its main argument, else the arguments as JSON.
fn tool_input(input: &Value) -> String {
    for key in [
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "command",
        "prompt",
    ] {
        if let Some(s) = str_field(input, key) {
            return s.to_string();
        }
    }
    text_of(input)
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)?.saturating_add(open.len());
    let rest = s.get(start..)?;
    let end = rest.find(close)?;
    rest.get(..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code_prefix("Exit code 2\nboom"), Some(2));
        assert_eq!(exit_code_prefix("boom"), None);
    }

    #[test]
    fn lead_in_and_instruction_removed() {
        let old = "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\nAnalysis: x";
        assert_eq!(strip_continuation(old), "Analysis: x");
        let new = "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary:\n1. Fix it.\n\nPlease continue the conversation from where we left it off without asking the user any further questions.";
        assert_eq!(strip_continuation(new), "Summary:\n1. Fix it.");
    }

    #[test]
    fn markup() {
        assert!(is_harness_markup(
            "<local-command-stdout>x</local-command-stdout>"
        ));
        assert!(!is_harness_markup("<div> is a tag, explain it"));
    }
}
