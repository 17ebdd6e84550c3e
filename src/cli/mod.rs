//! Command-line interface. Every command parses its arguments, calls one library function and
//! prints; no policy logic lives here.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod commands;
mod delivery;

/// baton decides how an AI coding app hands a conversation from one agent provider to another,
/// renders the handoff, and explains every decision.
#[derive(Parser, Debug)]
#[command(
    name = "baton",
    version,
    about,
    long_about = "baton decides how an AI coding app hands a conversation from one agent provider \
(Codex, Claude, Cursor, Copilot) to another: resume or start fresh, which runs the handoff \
covers, what goes in it, how it is delivered, and which narrow permission lets the agent read \
it. Rules live in policy files; `baton explain` shows why a decision was made.",
    after_help = "Examples:\n  baton explain --state examples/seed-switch.yaml\n  baton explain --state examples/seed-switch.yaml --target claude --json\n  baton check policies/\n\nExit codes: 0 success, 1 a policy/state/test failure to fix, 2 bad usage."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse, type-check and lint policy files (exit 1 on any error).
    #[command(
        after_help = "Examples:\n  baton check                 # the shipped profiles\n  baton check policies/       # every *.policy file, each on its own\n  baton check my.policy --deny-warnings"
    )]
    Check(CheckArgs),
    /// Decide how the requested run starts, and say why.
    #[command(
        after_help = "Examples:\n  baton explain --state examples/seed-switch.yaml\n  baton explain --state examples/seed-switch.yaml --target claude\n  baton explain --state thread.json --policy policies/team.policy --json\n\nThe first lines give the answer and the rule that decided it, the staleness signals that\nheld with the values that made them hold, and the rules passed over. --verbose adds every\nrule evaluated."
    )]
    Explain(ExplainArgs),
    /// Render the handoff document, inline prompt and provenance for the requested run.
    #[command(
        after_help = "Examples:\n  baton render --state examples/seed-switch.yaml              # print the document\n  baton render --state examples/seed-switch.yaml --out out/    # write handoff.md, inline.md, handoff.json\n  baton render --state s.yaml --policy t3code --templates my-templates/\n\nNo document is written when the decision is no_handoff or unsupported; baton says why."
    )]
    Render(RenderArgs),
    /// Remove expired off-band handoff documents (only directories baton created).
    #[command(
        after_help = "Examples:\n  baton gc --dry-run                 # say what would go\n  baton gc --max-age 2d --keep 3\n  baton gc --handoff-dir /tmp/baton-docs --json\n\nA handoff directory is removed when its document is older than --max-age or it is beyond\nthe newest --keep of its thread. Anything without baton's .baton-handoff marker is left alone."
    )]
    Gc(GcArgs),
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// Report what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove handoffs whose document is older than this (`90s`, `30m`, `12h`, `7d`, `2w`).
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = delivery::parse_age)]
    pub max_age: std::time::Duration,
    /// Keep at most this many (the newest) handoffs per thread.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub keep: usize,
    /// Directory of off-band documents (default: $BATON_HANDOFF_DIR, else <tmp>/baton-<uid>).
    #[arg(long, value_name = "DIR")]
    pub handoff_dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Directory of templates overriding the embedded ones by file name.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// Write handoff.md, inline.md and handoff.json here instead of printing the document.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Deliver as the decision says: write an off-band document under --handoff-dir (falling
    /// back to inline, with a warning, if that fails) and print the first-turn prompt.
    #[arg(long, conflicts_with = "out")]
    pub deliver: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Policy files, directories (each *.policy in them), or shipped profile names.
    /// Without paths, checks the shipped profiles.
    pub paths: Vec<String>,
    /// Treat warnings (unreachable rules, unused lets, ...) as errors.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Print diagnostics as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct StateSource {
    /// State file (YAML, or JSON by extension; `-` reads YAML from stdin).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// What every deciding command reads: a state, a policy, the target, the document root.
#[derive(Args, Debug)]
pub struct DecideArgs {
    #[command(flatten)]
    pub source: StateSource,
    /// Policy file, directory, or shipped profile (default, t3code, t3code-legacy, mcode).
    #[arg(long, default_value = "default", value_name = "PATH")]
    pub policy: String,
    /// Decide for this provider instead of the state's `request.provider`.
    #[arg(long, value_name = "PROVIDER")]
    pub target: Option<String>,
    /// Directory for off-band documents (default: $BATON_HANDOFF_DIR, else <tmp>/baton-<uid>).
    #[arg(long, value_name = "DIR")]
    pub handoff_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Print the decision as JSON (the contract of DESIGN §4).
    #[arg(long)]
    pub json: bool,
    /// Append every rule evaluated, with the values it read.
    #[arg(long)]
    pub verbose: bool,
}

/// Run the CLI.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            };
        }
    };
    let code = match cli.command {
        Command::Check(a) => commands::check(a),
        Command::Explain(a) => commands::explain(a),
        Command::Render(a) => commands::render(a),
        Command::Gc(a) => delivery::gc(a),
    };
    ExitCode::from(code)
}
