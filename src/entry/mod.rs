//! How an entry reads in a handoff: the entry formats of docs/rendering.md, one per item kind
//! and form (`User: ...`, `` `cargo test` (exit 1) ``, a failing command with the last lines
//! of its output, a plan's steps), and the text rules that cut them.
//!
//! These are render's formats. They sit below `select` in the layers because selection
//! measures and budgets the very text the document shows: `select` takes each entry's text
//! from here once, `render` lays the entries out in the templates, and neither formats an
//! entry itself.

mod failure;
mod text;

pub use text::{compact, cut_at_whitespace, keep_tail};

use crate::cut::{code_span, escape_controls, fenced, prose, thousands, Cut};
use crate::facts::ItemCtx;
use crate::policy::Form;
use crate::state::{Item, State};

/// How the texts of one entry are cut and made safe.
pub(crate) struct Texts {
    /// The text rule; `None` when the policy has none (texts trimmed, outputs through the
    /// 240-character compact rule as before text rules existed).
    pub(crate) cut: Option<Cut>,
    /// A must-keep item: its own text is never cut.
    pub(crate) whole: bool,
    /// Cut to its first line (`degrade first_line KIND`).
    pub(crate) first_line: bool,
    /// A successful command's or tool call's output is left out (`degrade drop_output KIND`).
    pub(crate) no_output: bool,
}

impl Texts {
    /// The text rule for the item's own text: none for a must-keep item.
    fn main_cut(&self) -> Cut {
        match (self.whole, self.cut) {
            (true, _) | (false, None) => Cut::Whole,
            (false, Some(c)) => c,
        }
    }

    /// The text, to its first line when a step says so.
    fn own<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if self.first_line {
            std::borrow::Cow::Owned(text::first_line(text))
        } else {
            std::borrow::Cow::Borrowed(text)
        }
    }

    /// The item's own text at the start of an entry (made safe as markdown prose).
    fn lead(&self, text: &str) -> String {
        prose(&self.main_cut().apply(&self.own(text)), true)
    }

    /// The item's own text after a label or other text.
    fn inner(&self, text: &str) -> String {
        prose(&self.main_cut().apply(&self.own(text)), false)
    }

    /// The item's own text on one line, after a label (`User: ...`).
    fn line(&self, text: &str) -> String {
        escape_controls(&self.main_cut().apply_one_line(&self.own(text)))
    }

    /// An output or input: on the same line after `: ` when cut by the compact rule,
    /// otherwise in a code fence on the following lines.
    fn output(&self, text: &str) -> String {
        match self.cut.unwrap_or(Cut::Compact(240)) {
            Cut::Compact(n) => format!(": {}", escape_controls(&compact(text, n))),
            c => {
                let out = c.apply(text);
                // A short one-line output stays on the line; anything else is fenced.
                if !out.contains('\n') && !out.contains('`') && out.chars().count() <= 200 {
                    format!(": {}", escape_controls(&out))
                } else {
                    format!(":\n{}", fenced(&out))
                }
            }
        }
    }

    /// A tool's input, on the same line.
    fn input(&self, text: &str) -> String {
        let c = self.cut.unwrap_or(Cut::Compact(240));
        escape_controls(&c.apply_one_line(text))
    }
}

/// What stands for a successful output a step left out.
fn output_left_out(output: &str) -> String {
    let n = output.trim().lines().count();
    let lines = if n == 1 { "line" } else { "lines" };
    format!(" [output of {} {lines} left out]", thousands(n))
}

/// Characters of the label a form puts in front of an item's text (see [`entry_text`]).
pub(crate) fn role_label(ctx: &ItemCtx, form: Form) -> usize {
    let label = match (ctx.kind, form) {
        ("user_message", Form::Line | Form::Transcript) => "User: ",
        ("assistant_message", Form::Line | Form::Transcript) => "Assistant: ",
        ("command", Form::Line) => "Command: ",
        ("handoff", Form::Line | Form::Text) => "Handoff: ",
        _ => "",
    };
    label.chars().count()
}

/// What a compaction summary covers and that the runs after it are newer: a summary's "the
/// blocker is X" must not read as current when a later run solved X.
fn compact_note(state: &State, through: u32) -> String {
    let last = state
        .runs
        .iter()
        .filter(|r| r.status != crate::state::RunStatus::RolledBack)
        .map(|r| r.ordinal)
        .max()
        .unwrap_or(0);
    let runs = |from: u32, to: u32| match to.cmp(&from) {
        std::cmp::Ordering::Less => String::new(),
        std::cmp::Ordering::Equal => format!("run {from}"),
        std::cmp::Ordering::Greater => format!("runs {from}-{to}"),
    };
    if through == 0 {
        return format!(
            "(Written when the context was compacted, before run 1; {} came after it and {} newer.)",
            runs(1, last),
            if last > 1 { "are" } else { "is" }
        );
    }
    if through >= last {
        return format!(
            "(Written when the context was compacted in run {last}, the last run: what the run did after that point is listed below and is newer.)"
        );
    }
    let later = runs(through.saturating_add(1), last);
    format!(
        "(Written when the context was compacted; it covers the conversation through run {through}. {} came after it and {} listed below: where they differ, trust the later work.)",
        capitalise(&later),
        if later.starts_with("runs") { "are" } else { "is" }
    )
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// At least as many characters as the longest text [`entry_text`] passes to a cut for this
/// item, before redaction: the item's own texts ([`Item::char_len`], their sum), or the
/// synthetic item's source text as `entry_text` finds it.
pub(crate) fn ceiling_input_bound(state: &State, ctx: &ItemCtx, note: Option<&str>) -> usize {
    let count = |t: Option<&str>| t.map_or(0, |t| t.chars().count());
    if let Some(item) = ctx.item {
        return item.char_len();
    }
    match ctx.kind {
        "fork_anchor" => count(state.request.fork_anchor.as_ref().map(|a| a.text.as_str())),
        "compact_summary" => count(state.thread.compact_summary.as_deref()),
        "workspace" => count(note),
        "checkpoint" => count(
            (state.checkpoints.iter().find(|c| c.run == ctx.run))
                .and_then(|c| c.diff_summary.as_deref()),
        ),
        "handoff" => count(
            (state.handoffs.iter().find(|h| h.id == ctx.id))
                .map(|h| h.summary.as_deref().unwrap_or(h.strategy.as_str())),
        ),
        // Any other synthetic item has no text (`entry_text` gives it none).
        _ => 0,
    }
}

/// The text of one entry in one form. Every text of the thread it shows goes through the
/// handoff's redaction context `red` first, before any cut (docs/redaction.md).
// Long by design: one arm per item kind and form (the entry formats of docs/rendering.md),
// each a few lines; the match over `(item, form)` keeps every format in one place.
#[allow(clippy::too_many_lines)]
pub(crate) fn entry_text(
    state: &State,
    ctx: &ItemCtx,
    form: Form,
    t: &Texts,
    note: Option<&str>,
    red: &mut crate::redact::Context,
) -> String {
    let id = ctx.id.as_str();
    match ctx.kind {
        "fork_anchor" => {
            let a = state.request.fork_anchor.as_ref();
            return t.lead(&red.text(id, a.map(|a| a.text.as_str()).unwrap_or("")));
        }
        "compact_summary" => {
            let cs = state.thread.compact_summary.as_deref().unwrap_or("");
            let text = t.lead(&red.text(id, cs));
            // The summary first, as the profiles' own systems show it (mcode's tests compare
            // its first line), then when it was written and what came after.
            return format!("{text}\n{}", compact_note(state, ctx.run));
        }
        "workspace" => {
            return t.lead(&red.text(id, note.unwrap_or("")));
        }
        "checkpoint" => {
            let c = state.checkpoints.iter().find(|c| c.run == ctx.run);
            let n = c.map(|c| c.files_changed).unwrap_or(0);
            let files = format!("{n} file{} changed", if n == 1 { "" } else { "s" });
            return match (form, c.and_then(|c| c.diff_summary.as_deref())) {
                (Form::Count, _) => files,
                // Seed 004's wording, plural even for one file.
                (Form::Line, _) => format!("Checkpoint: {n} files"),
                (_, Some(d)) => format!("run {}: {files}: {}", ctx.run, t.inner(&red.text(id, d))),
                (_, None) => format!("run {}: {files}", ctx.run),
            };
        }
        "handoff" => {
            let h = state.handoffs.iter().find(|h| h.id == ctx.id);
            // A handoff without a recorded summary is named by its strategy (as seed 004 does).
            let summary = h
                .map(|h| h.summary.as_deref().unwrap_or(h.strategy.as_str()))
                .unwrap_or("");
            let summary = red.text(id, summary);
            return match (form, h) {
                (Form::Line, _) | (Form::Text, _) => format!("Handoff: {}", t.line(&summary)),
                (_, Some(h)) => format!(
                    "{} (runs {}-{}, {}): {}",
                    h.id,
                    h.covered.from,
                    h.covered.to,
                    h.strategy.as_str(),
                    t.inner(&summary)
                ),
                (_, None) => t.lead(&summary),
            };
        }
        _ => {}
    }
    let Some(item) = ctx.item else {
        return String::new();
    };
    // Seed 003's activity line: a command as the Bash tool call that ran it; a question or an
    // approval as the tool call that asks it (Mcode's agents ask and request permission
    // through tool calls, listed with their status); any other kind as its `line`.
    if form == Form::Activity {
        match item {
            Item::Command {
                command, exit_code, ..
            } => {
                let status = match exit_code {
                    Some(0) | None => String::new(),
                    Some(c) => format!(" (failed, exit {c})"),
                };
                return format!("Bash{status}: {}", t.line(&red.text(id, command)));
            }
            Item::Approval { text, resolved, .. } => {
                let status = if *resolved { "resolved" } else { "awaiting approval" };
                return format!("Approval ({status}): {}", t.line(&red.text(id, text)));
            }
            Item::Question { text, answered, .. } => {
                let status = if *answered { "answered" } else { "unanswered" };
                return format!("Question ({status}): {}", t.line(&red.text(id, text)));
            }
            _ => {}
        }
    }
    let form = if form == Form::Activity { Form::Line } else { form };
    if form == Form::Full {
        if let Some(text) = failure::open_failure_text(ctx, red) {
            return text;
        }
    }
    match (item, form) {
        (Item::UserMessage { text, .. }, Form::Transcript) => {
            format!("User:\n{}", prose(&red.text(id, text), true))
        }
        (Item::AssistantMessage { text, .. }, Form::Transcript) => {
            format!("Assistant:\n{}", prose(&red.text(id, text), true))
        }
        (Item::UserMessage { text, .. }, Form::Line) => {
            format!("User: {}", t.line(&red.text(id, text)))
        }
        (Item::AssistantMessage { text, .. }, Form::Line) => {
            format!("Assistant: {}", t.line(&red.text(id, text)))
        }
        (Item::Command { command, .. }, Form::Line) => {
            format!("Command: {}", t.line(&red.text(id, command)))
        }
        (Item::FileChange { path, .. }, Form::Line) => {
            format!("File change: {}", t.line(&red.text(id, file_name(path))))
        }
        // Seed 003's tool activity line: the status unless the call completed, then its input.
        (
            Item::ToolCall {
                tool,
                input,
                status,
                ..
            },
            Form::Line,
        ) => {
            let mut s = t.line(&red.text(id, tool));
            if let Some(st) = status.filter(|s| *s != crate::state::ToolStatus::Completed) {
                s.push_str(&format!(" ({})", st.as_str()));
            }
            if let Some(i) = input.as_deref().filter(|i| !i.trim().is_empty()) {
                s.push_str(&format!(": {}", t.line(&red.text(id, i))));
            }
            s
        }
        (Item::FileChange { path, .. }, Form::PathOnly) => t.lead(&red.text(id, path)),
        (
            Item::FileChange {
                path,
                change,
                diff_lines,
                ..
            },
            _,
        ) => {
            let mut s = t.lead(&red.text(id, path));
            let mut bits = Vec::new();
            if let Some(c) = change {
                bits.push(c.as_str().to_string());
            }
            if let Some(d) = diff_lines {
                bits.push(format!("{d} diff lines"));
            }
            if !bits.is_empty() {
                s.push_str(&format!(" ({})", bits.join(", ")));
            }
            s
        }
        (
            Item::Command {
                command,
                exit_code,
                output,
                ..
            },
            Form::Full,
        ) => {
            let command = red.text(id, command);
            let line = if t.whole {
                command.trim().to_string()
            } else {
                t.main_cut().apply(&command)
            };
            let mut s = code_span(&line);
            if let Some(c) = exit_code {
                s.push_str(&format!(" (exit {c})"));
            }
            if let Some(o) = output.as_deref().filter(|o| !o.trim().is_empty()) {
                if t.no_output {
                    s.push_str(&output_left_out(o));
                } else {
                    s.push_str(&t.output(&red.text(id, o)));
                }
            }
            s
        }
        (
            Item::ToolCall {
                tool,
                input,
                status,
                output,
                ..
            },
            Form::Full,
        ) => {
            let mut s = escape_controls(&red.text(id, tool));
            if let Some(i) = input.as_deref().filter(|i| !i.trim().is_empty()) {
                s.push_str(&format!(" {}", t.input(&red.text(id, i))));
            }
            if let Some(st) = status {
                s.push_str(&format!(" ({})", st.as_str()));
            }
            if let Some(o) = output.as_deref().filter(|o| !o.trim().is_empty()) {
                if t.no_output {
                    s.push_str(&output_left_out(o));
                } else {
                    s.push_str(&t.output(&red.text(id, o)));
                }
            }
            s
        }
        (Item::Plan { steps, .. }, _) => steps
            .iter()
            .map(|st| {
                let mark = match st.status {
                    crate::state::StepStatus::Done => "[x]",
                    crate::state::StepStatus::InProgress => "[~]",
                    crate::state::StepStatus::Pending => "[ ]",
                };
                format!("{mark} {}", t.line(&red.text(id, &st.text)))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        (Item::SubagentResult { agent, text, .. }, _) => {
            format!(
                "{}: {}",
                escape_controls(&red.text(id, agent)),
                t.inner(&red.text(id, text))
            )
        }
        (Item::Approval { text, resolved, .. }, Form::Full) => {
            format!(
                "{} ({})",
                t.lead(&red.text(id, text)),
                if *resolved {
                    "resolved"
                } else {
                    "awaiting approval"
                }
            )
        }
        (Item::Question { text, answered, .. }, Form::Full) => {
            format!(
                "{} ({})",
                t.lead(&red.text(id, text)),
                if *answered { "answered" } else { "unanswered" }
            )
        }
        (other, _) => t.lead(&red.text(id, other.primary_text())),
    }
}
