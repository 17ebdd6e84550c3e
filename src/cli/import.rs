//! `baton import`, `baton sessions list` and `baton handoff`: thin shells over
//! [`crate::import`], the pipeline and the delivery stage.

use super::commands::{FAIL, OK, USAGE};
use super::handoff_start::{
    derived_task, fresh_handoff_id, headless_command, interactive_command, sh,
};
use crate::deliver::{self, MemoryGrantStore, OffbandStore};
use crate::import::{self, ImportOptions, Imported, SessionDirs, Tool};
use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

/// A coding tool whose session logs baton reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
// A command-line argument type: `From<ToolArg> for Tool` makes it reachable with `unstable`,
// but `cli` is not a library interface.
#[allow(unnameable_types)]
pub enum ToolArg {
    /// Claude Code (~/.claude/projects/<slug>/<session>.jsonl).
    ClaudeCode,
    /// Codex CLI (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl).
    Codex,
}

impl From<ToolArg> for Tool {
    fn from(t: ToolArg) -> Tool {
        match t {
            ToolArg::ClaudeCode => Tool::ClaudeCode,
            ToolArg::Codex => Tool::Codex,
        }
    }
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The tool that wrote the logs.
    #[arg(long, value_enum, value_name = "TOOL")]
    pub from: ToolArg,
    /// Session logs; each becomes one thread.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write the state here (a file; a directory when several logs are given) instead of
    /// printing it.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Print JSON instead of YAML.
    #[arg(long)]
    pub json: bool,
}

/// Where the tools keep their sessions.
#[derive(Args, Debug, Clone)]
pub struct SessionDirArgs {
    /// Claude Code's projects directory (default: $HOME/.claude/projects).
    #[arg(long, value_name = "DIR")]
    pub claude_dir: Option<PathBuf>,
    /// Codex CLI's sessions directory (default: $CODEX_HOME/sessions, else
    /// $HOME/.codex/sessions).
    #[arg(long, value_name = "DIR")]
    pub codex_dir: Option<PathBuf>,
}

impl SessionDirArgs {
    fn dirs(&self) -> SessionDirs {
        let mut d = SessionDirs::defaults(None);
        if let Some(c) = &self.claude_dir {
            d.claude = Some(c.clone());
        }
        if let Some(c) = &self.codex_dir {
            d.codex = Some(c.clone());
        }
        d
    }
}

#[derive(Args, Debug)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// List the sessions found, newest first.
    #[command(
        after_help = "Examples:\n  baton sessions list\n  baton sessions list --tool codex --cwd .\n  baton sessions list --claude-dir /backup/.claude/projects --json"
    )]
    List(SessionsListArgs),
}

#[derive(Args, Debug)]
pub struct SessionsListArgs {
    /// Only this tool's sessions.
    #[arg(long, value_enum, value_name = "TOOL")]
    pub tool: Option<ToolArg>,
    /// Only sessions that ran in this directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    #[command(flatten)]
    pub dirs: SessionDirArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct HandoffArgs {
    /// The session: a log file, or a session id (or a unique prefix) found by `sessions list`.
    #[arg(long, value_name = "SESSION")]
    pub from: String,
    /// The provider to continue on (codex, claude, cursor, copilot).
    #[arg(long, value_name = "PROVIDER")]
    pub to: String,
    /// Policy file, directory, or shipped profile (default, t3code, t3code-legacy, mcode).
    #[arg(long, default_value = "default", value_name = "P")]
    pub policy: String,
    /// What to ask the target to do first (default: asked for on a terminal, else derived
    /// from the session's last request).
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Write the handoff set to DIR (prompt.md, the document handoff.md when off-band,
    /// handoff.json, start.sh) instead of printing the prompt.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the command for one headless turn (`codex exec`, `claude -p`) instead of an
    /// interactive session that opens with the prompt.
    #[arg(long)]
    pub headless: bool,
    /// Show the decision and why it was made.
    #[arg(long)]
    pub explain: bool,
    /// Directory for off-band documents (default: $BATON_HANDOFF_DIR, else <tmp>/baton-<uid>).
    #[arg(long, value_name = "DIR")]
    pub handoff_dir: Option<PathBuf>,
    #[command(flatten)]
    pub dirs: SessionDirArgs,
}

fn print_warnings(imported: &Imported, file: &str) {
    for w in imported.report.all_warnings(file) {
        eprintln!("{w}");
    }
}

fn import_one(tool: Tool, path: &Path, opts: &ImportOptions) -> Result<Imported, u8> {
    let file = path.display().to_string();
    let imported = import::import_file(tool, path, opts).map_err(|e| {
        eprintln!("{}", super::errors::import_error(&e));
        FAIL
    })?;
    print_warnings(&imported, &file);
    if let Err(e) = crate::state::validate(&imported.state, &file) {
        eprintln!("{e}");
        return Err(FAIL);
    }
    Ok(imported)
}

/// A session log as a validated state, warnings printed (for `baton db import --from`).
pub(crate) fn import_state(tool: Tool, path: &Path) -> Result<crate::state::State, u8> {
    import_one(tool, path, &ImportOptions::default()).map(|i| i.state)
}

fn encode(imported: &Imported, json: bool) -> String {
    if json {
        serde_json::to_string_pretty(&imported.state).unwrap_or_default() + "\n"
    } else {
        crate::state::to_yaml(&imported.state)
    }
}

/// `baton import --from TOOL FILE... [--out PATH]`.
pub(crate) fn import(a: ImportArgs) -> u8 {
    let tool: Tool = a.from.into();
    let several = a.files.len() > 1;
    if several && a.out.as_ref().is_some_and(|o| o.is_file()) {
        eprintln!(
            "--out: error: {} is a file, but {} logs were given; give a directory (one <session>.yaml each)",
            a.out.as_ref().map(|o| o.display().to_string()).unwrap_or_default(),
            a.files.len()
        );
        return USAGE;
    }
    let mut code = OK;
    for file in &a.files {
        let imported = match import_one(tool, file, &ImportOptions::default()) {
            Ok(i) => i,
            Err(c) => {
                code = c;
                continue;
            }
        };
        let text = encode(&imported, a.json);
        let Some(out) = &a.out else {
            if several {
                super::out::print_doc_separator();
            }
            out!("{text}");
            continue;
        };
        let target = if several || out.is_dir() {
            if let Err(e) = std::fs::create_dir_all(out) {
                eprintln!(
                    "{}: error: cannot create directory: {}",
                    out.display(),
                    crate::state::io_reason(&e)
                );
                return FAIL;
            }
            let ext = if a.json { "json" } else { "yaml" };
            out.join(format!("{}.{ext}", imported.state.thread.id))
        } else {
            out.clone()
        };
        if let Err(e) = std::fs::write(&target, text) {
            eprintln!(
                "{}: error: cannot write: {}",
                target.display(),
                crate::state::io_reason(&e)
            );
            return FAIL;
        }
        outln!(
            "imported {} from {} ({} runs) into {}",
            imported.state.thread.id,
            file.display(),
            imported.state.runs.len(),
            target.display()
        );
    }
    code
}

/// `baton sessions list`.
pub(crate) fn sessions(a: SessionsArgs) -> u8 {
    let SessionsCommand::List(a) = a.command;
    let dirs = a.dirs.dirs();
    let (found, warnings) = import::list_sessions(&dirs, a.tool.map(Tool::from), a.cwd.as_deref());
    for w in &warnings {
        eprintln!("{w}");
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&found).unwrap_or_default()
        );
        return OK;
    }
    if found.is_empty() {
        outln!("no sessions found");
        return OK;
    }
    for s in &found {
        let when = humantime::format_rfc3339_seconds(s.modified);
        outln!(
            "{:<11}  {}  {}  {:>9}  {}  {}",
            s.tool.as_str(),
            s.id,
            when,
            human_size(s.size),
            s.cwd.as_deref().unwrap_or("-"),
            s.first_prompt.as_deref().unwrap_or("-")
        );
    }
    OK
}

fn human_size(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut v = n;
    let mut tenths = 0u64;
    let mut unit = 0usize;
    while v >= 1024 && unit.saturating_add(1) < UNITS.len() {
        tenths = (v % 1024).saturating_mul(10) / 1024;
        v /= 1024;
        unit = unit.saturating_add(1);
    }
    let u = UNITS.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{v} {u}")
    } else {
        format!("{v}.{tenths} {u}")
    }
}

/// The command that resumes `session` natively in `tool`.
fn resume_command(tool: Tool, session: &str, cwd: Option<&str>, message: Option<&str>) -> String {
    let cd = cwd.map(|c| format!("cd {} && ", sh(c))).unwrap_or_default();
    let msg = message.map(|m| format!(" {}", sh(m))).unwrap_or_default();
    match tool {
        Tool::ClaudeCode => format!("{cd}claude --resume {}{msg}", sh(session)),
        Tool::Codex => format!("{cd}codex resume {}{msg}", sh(session)),
    }
}

/// The session log `--from` names: a path (its tool detected from the log) or a session id
/// found in the session directories. Err: the exit code, the error printed.
fn session_log(a: &HandoffArgs) -> Result<(Tool, PathBuf), u8> {
    let p = PathBuf::from(&a.from);
    // Anything at the path is the log (a FIFO or a device is refused as such).
    if p.is_file() || (a.from.contains('/') && std::fs::metadata(&p).is_ok()) {
        match import::detect_tool(&p) {
            Ok(t) => Ok((t, p)),
            Err(e) => {
                eprintln!("{}", super::errors::import_error(&e));
                Err(FAIL)
            }
        }
    } else {
        match import::sessions::find_session(&a.dirs.dirs(), &a.from) {
            Ok(s) => Ok((s.tool, s.path)),
            Err(e @ import::sessions::FindSessionError::NotFound { .. }) => {
                eprintln!("--from: error: {e}; `baton sessions list` shows the sessions found, or give the log's path");
                Err(FAIL)
            }
            Err(e) => {
                eprintln!("--from: error: {e}");
                Err(FAIL)
            }
        }
    }
}

/// A decision that makes no handoff: refused (`unsupported`), or the session resumes natively;
/// printed, with the command that resumes it.
fn no_handoff(
    d: &crate::decision::Decision,
    tool: Tool,
    imported: &Imported,
    message: Option<&str>,
) -> u8 {
    let cwd = imported.cwd.as_deref();
    if d.strategy == crate::policy::Strategy::Unsupported {
        eprintln!(
            "error: the policy cannot hand this session to {}: {}",
            d.target,
            d.decided_by.because.as_deref().unwrap_or("unsupported")
        );
        return FAIL;
    }
    outln!(
        "no handoff needed: {} ({}); resume the session natively:",
        d.strategy.as_str(),
        d.decided_by
            .because
            .as_deref()
            .unwrap_or("decided by the policy")
    );
    outln!(
        "  {}",
        resume_command(tool, &imported.session_id, cwd, message)
    );
    if let Some(note) = d.workspace.as_ref().and_then(|w| w.note.as_deref()) {
        outln!("and send this workspace note with the first message:");
        for line in note.lines() {
            outln!("  {line}");
        }
    }
    OK
}

/// `--out DIR`: the prompt, the provenance, the start script and (off-band) the document
/// written to `dir`, and the command that starts the target printed.
fn write_out(
    dir: &Path,
    rendered: &crate::render::Rendered,
    delivered: &deliver::stage::Delivered,
    to: &str,
    command: &dyn Fn(&Path) -> String,
) -> u8 {
    let prompt = dir.join("prompt.md");
    let start = command(&prompt);
    let provenance = serde_json::to_string_pretty(&rendered.provenance).unwrap_or_default();
    let mut files: Vec<(&str, String)> = vec![
        ("prompt.md", rendered.inline.clone()),
        ("handoff.json", provenance + "\n"),
        ("start.sh", format!("#!/bin/sh\n{start}\n")),
    ];
    if delivered.document_path.is_some() {
        files.push(("handoff.md", rendered.document.clone()));
    }
    for (name, text) in &files {
        let file = dir.join(name);
        let written = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&file, text));
        if let Err(e) = written {
            eprintln!(
                "{}: error: cannot write: {}",
                file.display(),
                crate::state::io_reason(&e)
            );
            return FAIL;
        }
    }
    let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
    outln!(
        "wrote the handoff to {} ({})",
        dir.display(),
        names.join(", ")
    );
    outln!();
    outln!("start {} with:", to);
    outln!("  {start}");
    OK
}

/// `baton handoff --from SESSION --to PROVIDER`.
pub(crate) fn handoff(a: HandoffArgs) -> u8 {
    if !crate::state::KNOWN_PROVIDERS.contains(&a.to.as_str()) {
        let hint =
            crate::suggest::did_you_mean(&a.to, crate::state::KNOWN_PROVIDERS.iter().copied())
                .map(|s| format!("did you mean \"{s}\"? "))
                .unwrap_or_default();
        eprintln!(
            "--to: error: unknown provider \"{}\"; {hint}known providers are {}",
            a.to,
            crate::state::KNOWN_PROVIDERS.join(", ")
        );
        return USAGE;
    }
    let (tool, path) = match session_log(&a) {
        Ok(found) => found,
        Err(c) => return c,
    };
    let opts = ImportOptions {
        request_provider: Some(a.to.clone()),
        request_message: a.message.clone(),
    };
    let mut imported = match import_one(tool, &path, &opts) {
        Ok(i) => i,
        Err(c) => return c,
    };
    if a.message.is_none() {
        imported.state.request.message = ask_task(&a.to).or_else(|| {
            let task = derived_task(&imported.state);
            if task.is_some() {
                eprintln!(
                    "note: no --message given; the first message asks {} to continue the session's last request (give --message to say what to do)",
                    a.to
                );
            }
            task
        });
    }
    let root = super::handoff_root(a.handoff_dir.clone());
    let engine = match super::commands::load_engine(&a.policy, None, root.clone()) {
        Ok(e) => e,
        Err(c) => return c,
    };
    // baton builds this request itself: it is now, in the session's directory as it is now.
    let mut live = imported.state.clone();
    stamp_request(&mut live, imported.cwd.as_deref());
    let state = &live;
    let offband = OffbandStore::new(root);
    let decided = engine.decide(state, None).and_then(|mut d| {
        if d.needs_handoff() {
            fresh_handoff_id(&mut d, &offband, &state.thread.id);
        }
        engine.render(state, &d)
    });
    let mut outcome = match decided {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{}", crate::error::located(&e));
            return FAIL;
        }
    };
    if a.explain {
        out!(
            "{}",
            crate::explain::render_pointing_to(&outcome.decision, "--verbose")
        );
        outln!();
    }
    let cwd = imported.cwd.as_deref();
    if !outcome.decision.needs_handoff() {
        return no_handoff(&outcome.decision, tool, &imported, a.message.as_deref());
    }
    let mut grants = MemoryGrantStore::new();
    let delivered = deliver::deliver(&mut outcome, &offband, &state.thread.id, &mut grants);
    if let Some(reason) = &delivered.fallback_reason {
        eprintln!(
            "{}",
            super::errors::delivery_fallback(reason, delivered.fallback_kind)
        );
    }
    let Some(rendered) = outcome.rendered.as_ref() else {
        eprintln!("error: the decision needs a handoff but none was rendered");
        return FAIL;
    };
    if let Some(doc) = &delivered.document_path {
        eprintln!("handoff document (private): {}", doc.display());
    }
    let grant = delivered.grant.as_ref().map(|g| g.path.as_path());
    let command = |prompt: &Path| {
        if a.headless {
            headless_command(&a.to, cwd, prompt, grant)
        } else {
            interactive_command(&a.to, cwd, prompt, grant)
        }
    };
    if let Some(dir) = &a.out {
        return write_out(dir, rendered, &delivered, &a.to, &command);
    }
    out!("{}", rendered.inline);
    if !rendered.inline.ends_with('\n') {
        outln!();
    }
    let saved = delivered
        .document_path
        .as_ref()
        .and_then(|d| d.parent())
        .map(|d| d.join(deliver::stage::INLINE_FILE));
    outln!();
    match saved {
        Some(file) => {
            outln!("start {} with:", a.to);
            outln!("  {}", command(&file));
        }
        None => {
            outln!(
                "start {} with the prompt above (save it as prompt.md, or give --out DIR):",
                a.to
            );
            outln!("  {}", command(Path::new("prompt.md")));
        }
    }
    OK
}

/// On a terminal, ask what the target should do first; `None` when stdin is not a terminal
/// or the answer is empty (then the task is derived).
fn ask_task(to: &str) -> Option<String> {
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return None;
    }
    eprint!("What should {to} do first? (Enter: continue the session's last request) ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    stdin.lock().read_line(&mut line).ok()?;
    let line = line.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// Fill the request baton builds itself: `request.at` is now, and `request.workspace` is the
/// live workspace of `cwd` (its git state and the history since the target's last run,
/// [`crate::workspace::enrich`]). What cannot be read is left out (`explain` notes it).
pub(crate) fn stamp_request(state: &mut crate::state::State, cwd: Option<&str>) {
    if state.request.at.is_none() {
        state.request.at = Some(jiff::Timestamp::now().to_string());
    }
    if let (None, Some(cwd)) = (&state.request.workspace, cwd) {
        state.request.workspace = Some(crate::state::Workspace {
            cwd: Some(cwd.to_string()),
            ..crate::state::Workspace::default()
        });
    }
    let target = state.request.provider.clone();
    crate::workspace::enrich(state, &target);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(23_265), "22.7 KB");
    }
}
