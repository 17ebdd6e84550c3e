//! Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, one
//! `{"timestamp", "type", "payload"}` line each, `type` being `session_meta`, `turn_context`,
//! `response_item` (the model's input and output items: `message`, `reasoning`,
//! `function_call`, `function_call_output`, `custom_tool_call`, ...), `event_msg` (UI events,
//! several of which repeat a `response_item`) or `compacted`. The mapping is in
//! docs/import.md.

use super::mapping::{
    is_harness_markup, parse_patch, step_status, str_field, text_of, Builder, Outcome, Pending,
};
use super::codex_turns::{Form, PromptPlace, Turns, Twins};
use super::unified_exec::{self, PollResult, UnifiedExec};
use super::{Adapter, ImportOptions, ImportReport, Imported, Line, Tool, Warning};
use crate::state::PlanStep;
use serde_json::Value;

const TOP_TYPES: &[&str] = &[
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// `event_msg` types that repeat a `response_item` (the answer, the reasoning). The prompt's
/// `user_message` event is not one of them: recent builds write a prompt only as that event,
/// so it is read as a prompt and paired with its `response_item` twin (see `codex_turns`).
const ECHO_EVENTS: &[&str] = &[
    "agent_message",
    "agent_reasoning",
    "agent_reasoning_raw_content",
    "agent_reasoning_section_break",
];

/// `event_msg` types that are bookkeeping; kept as `protocol`.
const PROTOCOL_EVENTS: &[&str] = &[
    "token_count",
    "exec_command_begin",
    "exec_command_end",
    "exec_command_output_delta",
    "patch_apply_begin",
    "patch_apply_end",
    "mcp_tool_call_begin",
    "mcp_tool_call_end",
    "web_search_begin",
    "web_search_end",
    "view_image_tool_call",
    "context_compacted",
    "plan_update",
    "turn_diff",
    "background_event",
    "stream_error",
    "entered_review_mode",
    "exited_review_mode",
    "exec_approval_request",
    "apply_patch_approval_request",
    "session_configured",
    "shutdown_complete",
    "undo_started",
    "undo_completed",
    "warning",
    "thread_goal_updated",
    "thread_settings_applied",
    "thread_name_updated",
    "image_generation_end",
    "sub_agent_activity",
    "realtime_conversation_closed",
    "item_started",
    "deprecation_notice",
    "request_user_input",
    "elicitation_request",
];

/// Whether a JSON line looks like a Codex rollout line.
pub(crate) fn looks_like(v: &Value) -> bool {
    v.get("payload").is_some_and(Value::is_object)
        && str_field(v, "type").is_some_and(|t| TOP_TYPES.contains(&t))
}

/// Whether a JSON line looks like the rollout format Codex wrote before it wrapped lines in
/// `{"type", "payload"}`: a bare session header or a bare response item.
pub(crate) fn looks_like_legacy(v: &Value) -> bool {
    if v.get("payload").is_some() {
        return false;
    }
    let ty = str_field(v, "type").unwrap_or("");
    (v.get("id").is_some() && v.get("timestamp").is_some() && v.get("instructions").is_some())
        || (ty == "message" && v.get("role").is_some())
        || matches!(
            ty,
            "function_call" | "function_call_output" | "reasoning" | "local_shell_call"
        )
        || v.get("record_type").is_some()
}

pub(crate) struct CodexAdapter {
    b: Builder,
    synthetic: u64,
    twins: Twins,
    turns: Turns,
    exec: UnifiedExec,
    /// The file and line being read, for warnings.
    file: String,
    no: u64,
}

impl CodexAdapter {
    pub(crate) fn new() -> Self {
        CodexAdapter {
            b: Builder::new(Tool::Codex),
            synthetic: 0,
            twins: Twins::default(),
            turns: Turns::default(),
            exec: UnifiedExec::default(),
            file: String::new(),
            no: 0,
        }
    }

    fn warn(&self, report: &mut ImportReport, message: String) {
        report.warnings.push(Warning {
            file: self.file.clone(),
            line: self.no,
            message,
        });
    }

    /// A user prompt in either form: kept once, placed by the turn markers.
    fn prompt(&mut self, text: &str, form: Form, report: &mut ImportReport) {
        if text.trim().is_empty() {
            return;
        }
        if self.twins.is_echo(text, form) {
            report.echoes = report.echoes.saturating_add(1);
            return;
        }
        match self.turns.place_prompt() {
            PromptPlace::NewRun => self.b.user_prompt(text),
            PromptPlace::SameRun => self.b.user_message_mid_run(text),
        }
    }

    /// An `item_completed` event's turn item (paginated rollouts write messages this way).
    fn completed_item(&mut self, item: &Value, report: &mut ImportReport) {
        let ty = str_field(item, "type").unwrap_or("");
        let text = || {
            item.get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| match str_field(c, "type") {
                    Some("image" | "local_image") => Some("[image]".to_string()),
                    _ => str_field(c, "text").map(str::to_string),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        match ty {
            "UserMessage" => self.prompt(&text(), Form::Completed, report),
            "AgentMessage" => self.answer(&text(), Form::Completed, report),
            "Reasoning" => report.echoes = report.echoes.saturating_add(1),
            other => self
                .b
                .protocol(&format!("codex/event_msg: item_completed {other}")),
        }
    }

    /// An assistant answer in either form: kept once.
    fn answer(&mut self, text: &str, form: Form, report: &mut ImportReport) {
        if self.twins.is_echo(text, form) {
            report.echoes = report.echoes.saturating_add(1);
            return;
        }
        self.b.assistant_text(text);
    }

    /// A command's final result (a unified exec process that exited).
    fn command_result(&mut self, call_id: &str, output: String, exit_code: Option<i64>) {
        let outcome = if exit_code.is_some_and(|c| c != 0) {
            Outcome::Failed { output, exit_code }
        } else {
            Outcome::Ok { output, exit_code }
        };
        self.b.result(call_id, outcome);
    }

    /// A `write_stdin` call: a poll of a running command, never an item of its own.
    fn poll(&mut self, id: &str, args: &Value) {
        let session = args.get("session_id").map(text_of).unwrap_or_default();
        let chars = str_field(args, "chars").unwrap_or("");
        self.exec.poll(id, &session, chars);
    }

    /// The output of a call; true when it belonged to unified exec (a poll, or a command
    /// whose process still runs) and is handled.
    fn exec_output(&mut self, id: &str, out: &str, report: &mut ImportReport) -> bool {
        match self.exec.poll_output(id, out) {
            PollResult::NotAPoll => {}
            PollResult::StillRunning => return true,
            PollResult::Exited {
                call_id,
                output,
                exit_code,
            } => {
                self.command_result(&call_id, output, Some(exit_code));
                return true;
            }
            PollResult::UnknownSession { session } => {
                self.warn(
                    report,
                    format!(
                        "write_stdin call {id} polls process session {session}, which no exec_command of this log started (the command is missing); its output is kept as a protocol item only"
                    ),
                );
                self.b.protocol(&format!(
                    "codex/write_stdin for unknown session {session}: {out}"
                ));
                return true;
            }
        }
        let h = unified_exec::header(out);
        match h.session {
            Some(session) if h.exit_code.is_none() && self.b.is_waiting(id) => {
                self.exec.started(session, id, &h.body);
                true
            }
            _ => false,
        }
    }

    fn item(&mut self, p: &Value, report: &mut ImportReport) {
        let ty = str_field(p, "type").unwrap_or("");
        match ty {
            "message" => {
                let text = message_text(p);
                match str_field(p, "role").unwrap_or("") {
                    "user" if is_instructions(&text) => {
                        self.b.protocol(&format!("codex/context: {text}"))
                    }
                    "user" => self.prompt(&text, Form::Item, report),
                    "assistant" => self.answer(&text, Form::Item, report),
                    role => self.b.protocol(&format!("codex/{role} message: {text}")),
                }
            }
            "reasoning" => {
                let mut parts: Vec<String> = Vec::new();
                for key in ["summary", "content"] {
                    for part in p.get(key).and_then(Value::as_array).into_iter().flatten() {
                        if let Some(t) = str_field(part, "text") {
                            parts.push(t.to_string());
                        }
                    }
                }
                if parts.is_empty() && p.get("encrypted_content").is_some() {
                    parts.push("[encrypted reasoning]".to_string());
                }
                self.b.reasoning(&parts.join("\n"));
            }
            "function_call" => {
                let name = str_field(p, "name").unwrap_or("tool");
                let raw = str_field(p, "arguments").unwrap_or("");
                let args: Value =
                    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
                let id = call_id(p);
                if name == "write_stdin" {
                    self.poll(&id, &args);
                } else {
                    self.function_call(&id, name, &args);
                }
            }
            "custom_tool_call" => {
                let name = str_field(p, "name").unwrap_or("tool");
                let input = str_field(p, "input").unwrap_or("");
                let id = call_id(p);
                if name == "apply_patch" {
                    self.patch(&id, input);
                } else {
                    self.b.call(
                        &id,
                        Pending::Tool {
                            tool: name.to_string(),
                            input: input.to_string(),
                        },
                    );
                }
            }
            "local_shell_call" => {
                let cmd = p
                    .get("action")
                    .and_then(|a| a.get("command"))
                    .map(command_line)
                    .unwrap_or_default();
                let id = call_id(p);
                self.b.call(
                    &id,
                    Pending::Command {
                        tool: "local_shell".to_string(),
                        command: cmd,
                    },
                );
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let id = call_id(p);
                let out = p.get("output").map(output_text).unwrap_or_default();
                if self.exec_output(&id, &out, report) {
                    return;
                }
                let outcome = outcome_of(&out, p.get("output"));
                if !self.b.result(&id, outcome) {
                    self.b
                        .protocol(&format!("codex/{ty} for unknown call {id}"));
                }
            }
            "web_search_call" => {
                let query = p
                    .get("action")
                    .and_then(|a| str_field(a, "query"))
                    .unwrap_or("")
                    .to_string();
                self.synthetic = self.synthetic.saturating_add(1);
                let id = format!("baton-web-search-{}", self.synthetic);
                self.b.call(
                    &id,
                    Pending::Tool {
                        tool: "web_search".to_string(),
                        input: query,
                    },
                );
                let status = str_field(p, "status").unwrap_or("completed");
                let outcome = if status == "completed" {
                    Outcome::Ok {
                        output: String::new(),
                        exit_code: None,
                    }
                } else {
                    Outcome::Failed {
                        output: status.to_string(),
                        exit_code: None,
                    }
                };
                self.b.result(&id, outcome);
            }
            "ghost_snapshot"
            | "compaction"
            | "compaction_summary"
            | "compaction_trigger"
            | "context_compaction"
            | "tool_search_call"
            | "tool_search_output"
            | "additional_tools"
            | "image_generation_call" => {
                self.b.protocol(&format!("codex/response_item: {ty}"))
            }
            other => {
                let kind = format!("response_item/{other}");
                report.count_unknown(&kind);
                self.b.protocol(&format!("codex/unknown entry: {kind}"));
            }
        }
    }

    fn function_call(&mut self, id: &str, name: &str, args: &Value) {
        let pending = match name {
            "shell" | "container.exec" | "local_shell" => Pending::Command {
                tool: name.to_string(),
                command: args.get("command").map(command_line).unwrap_or_default(),
            },
            "shell_command" => Pending::Command {
                tool: name.to_string(),
                command: args.get("command").map(command_line).unwrap_or_default(),
            },
            "exec_command" => Pending::Command {
                tool: name.to_string(),
                command: str_field(args, "cmd")
                    .or_else(|| str_field(args, "command"))
                    .unwrap_or("")
                    .to_string(),
            },
            "apply_patch" => {
                let patch = str_field(args, "input")
                    .or_else(|| str_field(args, "patch"))
                    .unwrap_or_else(|| args.as_str().unwrap_or(""));
                self.patch(id, patch);
                return;
            }
            "update_plan" => {
                let steps = args
                    .get("plan")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|s| PlanStep {
                        text: str_field(s, "step").unwrap_or("").to_string(),
                        status: step_status(str_field(s, "status").unwrap_or("")),
                    })
                    .collect();
                self.b.plan(steps);
                Pending::Silent
            }
            _ => Pending::Tool {
                tool: name.to_string(),
                input: text_of(args),
            },
        };
        self.b.call(id, pending);
    }

    fn patch(&mut self, id: &str, patch: &str) {
        let changes = parse_patch(patch);
        let pending = if changes.is_empty() {
            Pending::Tool {
                tool: "apply_patch".to_string(),
                input: patch.to_string(),
            }
        } else {
            Pending::Edit {
                tool: "apply_patch".to_string(),
                changes,
            }
        };
        self.b.call(id, pending);
    }

    fn event(&mut self, p: &Value, report: &mut ImportReport) {
        let ty = str_field(p, "type").unwrap_or("");
        match ty {
            "user_message" => {
                let text = str_field(p, "message").unwrap_or("");
                let kind = str_field(p, "kind").unwrap_or("plain");
                if kind != "plain" || is_instructions(text) {
                    self.b.protocol(&format!("codex/context: {text}"));
                } else {
                    self.prompt(text, Form::Event, report);
                }
            }
            "agent_message" => {
                let text = str_field(p, "message").unwrap_or("");
                self.answer(text, Form::Event, report);
            }
            "thread_rolled_back" => {
                let n = p.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
                self.b.roll_back(usize::try_from(n).unwrap_or(usize::MAX));
                self.b
                    .protocol(&format!("codex/event_msg: thread_rolled_back {n} turns"));
            }
            "item_completed" => self.completed_item(p.get("item").unwrap_or(&Value::Null), report),
            t if ECHO_EVENTS.contains(&t) => report.echoes = report.echoes.saturating_add(1),
            "task_started" | "turn_started" => {
                self.turns.started();
                self.b.protocol(&format!("codex/event_msg: {ty}"));
            }
            "task_complete" | "turn_complete" => {
                self.turns.ended();
                self.b.protocol(&format!("codex/event_msg: {ty}"));
            }
            "turn_aborted" => {
                let reason = str_field(p, "reason").unwrap_or("");
                self.b
                    .protocol(&format!("codex/event_msg: turn_aborted {reason}"));
                self.b
                    .interrupted_by_user(&format!("Codex: turn aborted, {reason}"));
                self.turns.ended();
            }
            "exec_command_end" => {
                let id = str_field(p, "call_id").unwrap_or("");
                let code = p.get("exit_code").and_then(Value::as_i64);
                let out = str_field(p, "aggregated_output")
                    .or_else(|| str_field(p, "stdout"))
                    .unwrap_or("");
                if let Some((output, code)) = code.and_then(|c| self.exec.ended(id, c, out)) {
                    self.command_result(id, output, Some(code));
                }
                self.b.protocol("codex/event_msg: exec_command_end");
            }
            "error" => {
                let msg = str_field(p, "message").unwrap_or("error");
                self.b.error(msg);
            }
            t if PROTOCOL_EVENTS.contains(&t) => {
                self.b.protocol(&format!("codex/event_msg: {t}"));
            }
            other => {
                let kind = format!("event_msg/{other}");
                report.count_unknown(&kind);
                self.b.protocol(&format!("codex/unknown entry: {kind}"));
            }
        }
    }
}

impl Adapter for CodexAdapter {
    fn feed(&mut self, line: Line<'_>, report: &mut ImportReport, file: &str) {
        if self.file.is_empty() {
            self.file = file.to_string();
        }
        self.no = line.no;
        let v = line.value;
        let ty = str_field(v, "type").unwrap_or("");
        let null = Value::Null;
        let p = v.get("payload").unwrap_or(&null);
        match ty {
            "session_meta" => {
                // Newer versions nest the header under `meta`.
                let meta = p.get("meta").filter(|m| m.is_object()).unwrap_or(p);
                if self.b.session_id.is_none() {
                    self.b.session_id = str_field(meta, "id").map(str::to_string);
                }
                if self.b.cwd.is_none() {
                    self.b.cwd = str_field(meta, "cwd").map(str::to_string);
                }
                let version = str_field(meta, "cli_version").unwrap_or("?");
                self.b
                    .protocol(&format!("codex/session_meta: cli_version {version}"));
            }
            "turn_context" => {
                if let Some(m) = str_field(p, "model") {
                    self.b.model = Some(m.to_string());
                }
                if self.b.cwd.is_none() {
                    self.b.cwd = str_field(p, "cwd").map(str::to_string);
                }
                let approval = str_field(p, "approval_policy").unwrap_or("");
                self.b.protocol(&format!(
                    "codex/turn_context: model {} approval {approval}",
                    str_field(p, "model").unwrap_or("?")
                ));
            }
            "response_item" => self.item(p, report),
            "event_msg" => self.event(p, report),
            "compacted" => {
                let text = str_field(p, "message").unwrap_or("");
                self.b.compact_summary(text);
            }
            other => {
                let kind = if other.is_empty() { "(no type)" } else { other };
                report.count_unknown(kind);
                self.b.protocol(&format!("codex/unknown entry: {kind}"));
            }
        }
        self.b.observe(line_where(ty, v, p));
    }

    fn finish(mut self: Box<Self>, report: &mut ImportReport, opts: &ImportOptions) -> Imported {
        // A process still running when the log ends (a dev server left up): its output so
        // far, no exit code.
        for (id, output) in self.exec.still_running() {
            self.command_result(&id, output, None);
        }
        self.b.finish(report, opts)
    }
}

/// When and where a line was written: every line has a `timestamp`; `session_meta` gives the
/// session's `cwd` and its `git` (`commit_hash`, `branch`) when it started, `turn_context`
/// the turn's `cwd`. The git state is the session's start, so only the first run gets it.
fn line_where<'a>(ty: &str, v: &'a Value, p: &'a Value) -> super::when::Observed<'a> {
    let mut o = super::when::Observed {
        at: str_field(v, "timestamp"),
        ..super::when::Observed::default()
    };
    match ty {
        "session_meta" => {
            let meta = p.get("meta").filter(|m| m.is_object()).unwrap_or(p);
            o.cwd = str_field(meta, "cwd");
            let git = p.get("git").or_else(|| meta.get("git"));
            o.branch = git.and_then(|g| str_field(g, "branch"));
            o.head = git.and_then(|g| str_field(g, "commit_hash"));
        }
        "turn_context" => o.cwd = str_field(p, "cwd"),
        _ => {}
    }
    o
}

fn call_id(p: &Value) -> String {
    str_field(p, "call_id")
        .or_else(|| str_field(p, "id"))
        .unwrap_or("")
        .to_string()
}

/// The text of a `message` item's content blocks (`input_text`, `output_text`).
fn message_text(p: &Value) -> String {
    match p.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| match str_field(b, "type") {
                Some("input_image") => Some("[image]".to_string()),
                _ => str_field(b, "text").map(str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => text_of(other),
        None => String::new(),
    }
}

/// Context Codex puts in the conversation as user messages: the environment, AGENTS.md and
/// user instructions, a `!` shell command.
fn is_instructions(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("<user_instructions>")
        || t.starts_with("# AGENTS.md instructions")
        || t.starts_with("<user_shell_command>")
        || is_harness_markup(t)
}

/// A command line from a `command` argument: a string, or an argv array (`["bash", "-lc",
/// "cargo test"]` gives `cargo test`).
fn command_line(v: &Value) -> String {
    match v {
        Value::Array(argv) => {
            let parts: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            match parts.as_slice() {
                [sh, flag, script] if is_shell(sh) && flag.starts_with('-') => script.to_string(),
                _ => parts.iter().map(|p| quote(p)).collect::<Vec<_>>().join(" "),
            }
        }
        other => text_of(other),
    }
}

fn is_shell(s: &str) -> bool {
    matches!(
        s.rsplit('/').next().unwrap_or(s),
        "bash" | "sh" | "zsh" | "dash"
    )
}

fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A tool output's text: a string, or `content` of an object output.
fn output_text(v: &Value) -> String {
    match v {
        Value::Object(_) => v
            .get("content")
            .map(output_text)
            .unwrap_or_else(|| text_of(v)),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| str_field(p, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        other => text_of(other),
    }
}

/// How a call ended, from its output: a JSON `{"output", "metadata": {"exit_code"}}`, or a
/// text with `Exit code: N` / `Process exited with code N` and `Output:` lines.
fn outcome_of(text: &str, raw: Option<&Value>) -> Outcome {
    let lower_head: String = text.chars().take(200).collect::<String>().to_lowercase();
    if lower_head.contains("rejected by user")
        || lower_head.contains("declined by user")
        || lower_head.contains("user denied")
    {
        return Outcome::Declined {
            output: text.to_string(),
        };
    }
    let success = raw.and_then(|r| r.get("success")).and_then(Value::as_bool);
    let (output, exit_code) = match serde_json::from_str::<Value>(text) {
        Ok(v) if v.get("output").is_some() => {
            let code = v
                .get("metadata")
                .and_then(|m| m.get("exit_code"))
                .and_then(Value::as_i64);
            (text_of(v.get("output").unwrap_or(&Value::Null)), code)
        }
        _ => parse_text_output(text),
    };
    let failed = exit_code.is_some_and(|c| c != 0)
        || success == Some(false)
        || lower_head.starts_with("apply_patch verification failed")
        || lower_head.starts_with("error:");
    if failed {
        Outcome::Failed { output, exit_code }
    } else {
        Outcome::Ok { output, exit_code }
    }
}

fn parse_text_output(text: &str) -> (String, Option<i64>) {
    let mut code = None;
    let mut body_at = None;
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if let Some(n) = l
            .strip_prefix("Exit code: ")
            .or_else(|| l.strip_prefix("Process exited with code "))
        {
            code = n.trim().parse::<i64>().ok();
        }
        offset = offset.saturating_add(line.len());
        if l == "Output:" {
            body_at = Some(offset);
            break;
        }
        if offset > 2048 {
            break;
        }
    }
    match body_at {
        Some(at) => (text.get(at..).unwrap_or("").to_string(), code),
        None => (text.to_string(), code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_to_command_line() {
        let v: Value = serde_json::json!(["bash", "-lc", "cargo test -q"]);
        assert_eq!(command_line(&v), "cargo test -q");
        let v: Value = serde_json::json!(["rg", "fn main", "src"]);
        assert_eq!(command_line(&v), "rg 'fn main' src");
    }

    #[test]
    fn outputs() {
        let o = outcome_of(r#"{"output":"boom\n","metadata":{"exit_code":2}}"#, None);
        assert_eq!(
            o,
            Outcome::Failed {
                output: "boom\n".into(),
                exit_code: Some(2)
            }
        );
        let o = outcome_of("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nok\n", None);
        assert_eq!(
            o,
            Outcome::Ok {
                output: "ok\n".into(),
                exit_code: Some(0)
            }
        );
    }
}
