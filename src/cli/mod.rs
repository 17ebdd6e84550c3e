//! Command-line interface. Every command parses its arguments, calls one library function and
//! prints; no policy logic lives here.

// Doc comments here are clap help text (`<tmp>`, `<n>`), not rustdoc HTML.
#![allow(rustdoc::invalid_html_tags)]

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[macro_use]
mod out;
mod commands;
mod dbcheck;
mod delivery;
mod errors;
mod handoff_start;
mod import;
#[cfg(feature = "lsp")]
mod lsp;
mod ops;
mod quality;
mod quality_sessions;
mod reference;
mod replay;
mod report;
mod rollback_text;
mod scaffold;
mod serve;
mod store;
mod tooling;

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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    /// Run the JSON-RPC 2.0 sidecar service (see docs/service.md).
    #[command(
        after_help = "Examples:\n  baton serve --stdio                          # one client on stdin/stdout (LSP framing)\n  baton serve --socket /run/user/1000/baton.sock --policy policies/\n  baton serve --stdio --framing lines          # newline-delimited JSON for scripts\n\nThe policy and template directories are watched; a set that does not check is rejected\nand the last good set keeps serving (a `policy/rejected` notification says why)."
    )]
    Serve(ServeArgs),
    /// The SQLite store: create it, import state files, export threads.
    #[command(
        after_help = "Examples:\n  baton db init --db baton.db\n  baton db import --db baton.db examples/seed-switch.yaml\n  baton db export --db baton.db --thread th_1\n\n--db defaults to $BATON_DB, then ./baton.db."
    )]
    Db(store::DbArgs),
    /// Decide, render and record the next run of a stored thread.
    #[command(
        after_help = "Examples:\n  baton dispatch --db baton.db --thread th_1 --target claude --message \"Review the flow\"\n  baton dispatch --thread th_1 --target codex --json"
    )]
    Dispatch(store::DispatchArgs),
    /// Finish a running run: append its items and set its status.
    #[command(
        after_help = "Examples:\n  baton complete --thread th_1 --run 9 --items run9-items.yaml\n  baton complete --thread th_1 --run 9 --items items.json --status interrupted\n\nThe items file is a YAML/JSON list of items as in a state file's runs[].items. Completing\nthe run marks the transfer it took as consumed and extends its provider thread's coverage."
    )]
    Complete(store::CompleteArgs),
    /// Roll a stored thread back to run N.
    #[command(
        after_help = "Examples:\n  baton rollback --thread th_1 --to 5\n\nRuns after N become rolled_back, handoffs covering them are superseded, and provider\nthreads that saw them become rolled_back (provider can roll back) or divergent; the next\ndispatch sees the staleness signal."
    )]
    Rollback(store::RollbackArgs),
    /// Fork a stored thread at run N into a child thread.
    #[command(
        after_help = "Examples:\n  baton fork --thread th_1 --at 5 --child th_1-try\n  baton dispatch --thread th_1-try --target codex   # resolves the fork: native or portable\n\nNothing provider-specific is chosen at fork time; the child's first dispatch decides."
    )]
    Fork(store::ForkArgs),
    /// Hand a fork's runs since the fork point back to its parent.
    #[command(
        name = "merge-back",
        after_help = "Examples:\n  baton merge-back --thread th_1-try\n  baton dispatch --thread th_1 --target codex   # the parent's next run takes the merge-back\n\nThe fork's runs since the fork point become a fork_delta_summary handoff waiting in the\nparent, with a merge_back transfer."
    )]
    MergeBack(store::MergeBackArgs),
    /// Supersede the running run's handoff with a newly rendered one.
    #[command(
        after_help = "Examples:\n  baton regenerate --thread th_1 --handoff H2\n  baton regenerate --thread th_1 --handoff H2 --policy policies/   # after a policy fix\n\nThe old handoff row becomes superseded (its only change); the new one names it in supersedes."
    )]
    Regenerate(store::RegenerateArgs),
    /// Decide every logged decision again and report those that differ.
    #[command(
        after_help = "Examples:\n  baton replay --db baton.db\n  baton replay --db baton.db --thread th_1 --run 9 --json\n  baton replay --db baton.db --policy-dir policies/   # policies that are not shipped\n\nEach decision is decided again from the state, target and context it was logged with,\nwith the policy of its sha256 (the shipped profiles, or one found under --policy-dir).\nExit 1 when any differs or cannot be decided again, 0 otherwise."
    )]
    Replay(replay::ReplayArgs),
    /// The decision log: `baton log export` writes the store's decisions as JSON lines.
    Log(ops::LogArgs),
    /// Ask a running server (`baton serve --socket`) for its status.
    #[command(
        after_help = "Examples:\n  baton status --socket /run/user/1000/baton.sock\n  baton status --socket baton.sock --json\n\nVersion, uptime, the active and shadow policies with their sha256 and load times, the\nstore's figures, the last reload error and the decision log's health."
    )]
    Status(ops::StatusArgs),
    /// Run policy unit tests from YAML files; the last line is `N passed, N failed`.
    #[command(
        after_help = "Examples:\n  baton test                              # policies/tests/\n  baton test policies/tests/default.yaml --filter stale\n  baton test --coverage --min-coverage 100 policies/tests/\n  baton test --policy candidate.policy policies/tests/   # the suite against a candidate\n\nExit 1 when a case fails, a test file is invalid, or coverage is below --min-coverage."
    )]
    Test(TestArgs),
    /// Decide every state of a corpus with two policy versions and report what changes.
    #[command(
        after_help = "Examples:\n  baton diff --from default --to policies/team.policy --corpus examples/\n  baton diff --from old/ --to new/ --corpus states/ --fail-on-change --json\n  baton diff --from default --to policies/ --corpus states/ --target cursor\n\nEach state is decided for every provider it involves (--target all: every known\nprovider; --target NAME: one), as `baton explain` decides. Each changed field names the\nrule that decides it now. Exit 0 unless --fail-on-change is given and a decision changed\n(exit 1)."
    )]
    Diff(DiffArgs),
    /// Measure handoff quality over a corpus of states, for every target provider.
    #[command(
        after_help = "Examples:\n  baton quality --corpus tests/fixtures/quality\n  baton quality --corpus states/ --policy mcode --json\n\nExit 1 unless every recall figure is 100%, nothing leaks, every budget is kept and no\ncut splits a grapheme cluster (docs/cli.md#baton-quality)."
    )]
    Quality(quality::QualityArgs),
    /// Rewrite policy files in the canonical layout (comments kept).
    #[command(
        after_help = "Examples:\n  baton fmt policies/team.policy\n  baton fmt --check policies/     # exit 1 and show a diff when a file is not formatted"
    )]
    Fmt(FmtArgs),
    /// Remove expired off-band handoff documents (only directories baton created).
    #[command(
        after_help = "Examples:\n  baton gc --dry-run                 # say what would go\n  baton gc --max-age 2d --keep 3\n  baton gc --handoff-dir /tmp/baton-docs --json\n\nA handoff directory is removed when its document is older than --max-age, it is beyond\nthe newest --keep of its thread, or (with a database) its handoff was superseded or its\nthread is gone. Anything without baton's .baton-handoff marker is left alone."
    )]
    Gc(GcArgs),
    /// The scoped pre-grant: may the child's tool call proceed without a prompt?
    Pregrant(PregrantArgs),
    /// Turn Claude Code or Codex CLI session logs into thread states (see docs/import.md).
    #[command(
        after_help = "Examples:\n  baton import --from claude-code ~/.claude/projects/-home-me-app/3f1c2a9e-....jsonl\n  baton import --from codex ~/.codex/sessions/2026/11/30/rollout-*.jsonl --out states/\n\nMalformed lines are skipped with a warning naming the file and line; entries of unknown\ntypes are kept as protocol items and counted in a warning. The logs are only read."
    )]
    Import(import::ImportArgs),
    /// Find Claude Code and Codex CLI sessions on this machine.
    Sessions(import::SessionsArgs),
    /// Carry a Claude Code or Codex CLI session over to another provider, in one step.
    #[command(
        after_help = "Examples:\n  baton handoff --from 3f1c2a9e --to codex --message \"Finish the CSRF tests\"\n  baton handoff --from ~/.codex/sessions/2026/11/30/rollout-....jsonl --to claude --out /tmp/next --explain\n\nImports the session, decides and renders the handoff, writes the off-band document to the\nprivate handoff directory (a new H<n> for every handoff), prints the first-turn prompt (or\nwrites the handoff set to DIR with --out) and the command that opens the target tool in an\ninteractive session with it (--headless: one turn that exits). Without --message, the task\nis asked for on a terminal, else derived from the session's last request. Nothing is run."
    )]
    Handoff(import::HandoffArgs),
    /// List the shipped policies and templates, or print one's source.
    #[command(
        after_help = "Examples:\n  baton policy list\n  baton policy show default > my.policy   # the whole shipped policy, to edit"
    )]
    Policy(scaffold::PolicyArgs),
    /// Write a team policy (extending `default`), its tests, two example states and a CI script.
    #[command(
        after_help = "Examples:\n  baton init team-policy/\n  cd team-policy && baton test policies/tests/\n\nNothing is overwritten: baton init stops, writing nothing, when any of its files exists."
    )]
    Init(scaffold::InitArgs),
    /// Print the JSON Schema of a state file, a decision, a test file or a service request.
    #[command(
        after_help = "Examples:\n  baton schema state > state.schema.json\n  baton schema decision\n\nThe schemas are generated from the types baton reads and writes (docs/state.md)."
    )]
    Schema(reference::SchemaArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  baton completions bash > ~/.local/share/bash-completion/completions/baton\n  baton completions zsh > ~/.zfunc/_baton\n  baton completions fish > ~/.config/fish/completions/baton.fish"
    )]
    Completions(reference::CompletionsArgs),
    /// Print the man page (or write one per command with --out DIR).
    #[command(
        after_help = "Examples:\n  baton man | man -l -\n  baton man --out /usr/local/share/man/man1"
    )]
    Man(reference::ManArgs),
    /// Run the language server for editors on standard input and output (docs/editor.md).
    #[cfg(feature = "lsp")]
    #[command(
        after_help = "Examples:\n  baton lsp              # started by the editor (examples/vscode)\n  baton lsp --debounce-ms 300\n\nDiagnostics, hover, completion, go to definition, references, formatting and\n\"did you mean\" quick fixes for *.policy files and YAML policy test files."
    )]
    Lsp(lsp::LspArgs),
}

#[derive(Args, Debug)]
pub struct FmtArgs {
    /// Change nothing: show a diff and exit 1 when a file is not in the canonical layout.
    #[arg(long)]
    pub check: bool,
    /// Policy files or directories (each *.policy in them).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The current policy (file, directory or shipped profile).
    #[arg(long, value_name = "POLICY")]
    pub from: String,
    /// The changed policy (file, directory or shipped profile).
    #[arg(long, value_name = "POLICY")]
    pub to: String,
    /// Directory of state files (*.yaml, *.yml, *.json).
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "from_log",
        conflicts_with = "from_log"
    )]
    pub corpus: Option<PathBuf>,
    /// A decision log (`baton serve --decision-log`, `baton log export`) instead of a corpus:
    /// every logged decision that carries its input (`log { keep input }`) is decided again.
    #[arg(long, value_name = "LOG")]
    pub from_log: Option<PathBuf>,
    /// Decide for this provider, or `all` (the four known ones and those a state declares).
    /// Default: every provider each state involves.
    #[arg(long, value_name = "PROVIDER")]
    pub target: Option<String>,
    /// Exit 1 when any decision changes.
    #[arg(long)]
    pub fail_on_change: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Test files or directories (every *.yaml in them). Default: policies/tests (with
    /// --policy FILE: the test files in tests/ beside it, else beside it, else policies/tests).
    pub paths: Vec<PathBuf>,
    /// Run every case against this policy (file, directory or shipped profile) instead of
    /// the one its test file names.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// Run only the cases whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Report which rules, stale signals and summary rules were evaluated true, false, never.
    #[arg(long)]
    pub coverage: bool,
    /// Fail (exit 1) when any policy file's rule coverage is below PCT percent.
    #[arg(long, value_name = "PCT")]
    pub min_coverage: Option<f64>,
    /// Print the results (and the coverage, when asked for) as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also write the coverage JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub coverage_json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Serve one client on standard input and output.
    #[arg(long, conflicts_with = "socket")]
    pub stdio: bool,
    /// Listen on this Unix domain socket (created with mode 0600).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Store database: a SQLite file or, built with feature `postgres`, a `postgres://` URL
    /// (default: $BATON_DB, else ./baton.db).
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<PathBuf>,
    /// With a PostgreSQL --db: most connections this server opens to it at once. A request
    /// that finds them all busy waits up to --db-pool-timeout for one.
    #[arg(long, value_name = "N", default_value_t = crate::serve::DEFAULT_DB_POOL)]
    pub db_pool: u32,
    /// With a PostgreSQL --db: how long a request waits for a free connection (e.g. 30s,
    /// 500ms) before it is answered with an error saying the pool is exhausted.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = delivery::parse_age)]
    pub db_pool_timeout: std::time::Duration,
    /// Policy file, directory, or shipped profile (default, t3code, t3code-legacy, mcode).
    #[arg(long, default_value = "default", value_name = "PATH")]
    pub policy: String,
    /// Directory of templates overriding the embedded ones (watched for changes).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// Directory for off-band documents (default: $BATON_HANDOFF_DIR, else <tmp>/baton-<uid>).
    #[arg(long, value_name = "DIR")]
    pub handoff_dir: Option<PathBuf>,
    /// Message framing: `content-length` (LSP, vscode-jsonrpc) or `lines` (one JSON per line).
    #[arg(long, default_value = "content-length", value_name = "FRAMING")]
    pub framing: String,
    /// Largest message accepted, in bytes.
    #[arg(long, default_value_t = crate::serve::DEFAULT_MAX_MESSAGE, value_name = "BYTES")]
    pub max_message: usize,
    /// Most socket clients connected at once; one more is told so and closed.
    #[arg(long, default_value_t = crate::serve::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,
    /// How long the rest of a socket client's message may take after its first byte (e.g. 30s,
    /// 500ms); a client that does not finish it in time is told so and closed. When every
    /// connection is taken, a new client takes the place of the one partway through a message
    /// that has sent nothing for the longest.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = delivery::parse_age)]
    pub message_timeout: std::time::Duration,
    /// Quiet time before a burst of policy/template file changes is reloaded.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub debounce_ms: u64,
    /// Do not watch the policy and template directories (reload only on `policy/reload`).
    #[arg(long)]
    pub no_watch: bool,
    /// How often the service removes expired off-band documents (as `baton gc`), e.g. 1h or 10m.
    #[arg(long, value_name = "AGE", default_value = "1h", value_parser = delivery::parse_age)]
    pub gc_every: std::time::Duration,
    /// The sweep removes documents older than this.
    #[arg(long, value_name = "AGE", default_value = "7d", value_parser = delivery::parse_age)]
    pub gc_max_age: std::time::Duration,
    /// The sweep keeps at most this many documents per thread (the newest).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub gc_keep: usize,
    /// Do not sweep expired documents while serving.
    #[arg(long)]
    pub no_gc: bool,
    /// Write one JSON line per decision to PATH (`-`: standard output, not with --stdio);
    /// see docs/service.md#decision-log.
    #[arg(long, value_name = "PATH|-")]
    pub decision_log: Option<String>,
    /// Rotate the decision log before it grows past this many bytes (0: never).
    #[arg(long, value_name = "BYTES", default_value_t = 100 * 1024 * 1024)]
    pub decision_log_max_bytes: u64,
    /// Rotated decision logs kept (PATH.1 .. PATH.N).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub decision_log_keep: usize,
    /// Write every decision's trace to the decision log.
    #[arg(long)]
    pub decision_log_trace: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (loopback only, e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Allow --metrics on an address that is not loopback.
    #[arg(long)]
    pub metrics_allow_remote: bool,
    /// A candidate policy (file, directory or shipped profile) that decides every decision
    /// beside the active one, changing nothing; its divergences go to the decision log and
    /// the metrics (docs/operations.md).
    #[arg(long, value_name = "POLICY")]
    pub shadow: Option<String>,
}

#[derive(Args, Debug)]
pub struct PregrantArgs {
    #[command(subcommand)]
    pub command: PregrantCommand,
}

#[derive(Subcommand, Debug)]
pub enum PregrantCommand {
    /// Answer allow (exit 0; the grant is used) or deny (exit 1), with the reason.
    #[command(
        after_help = "Examples:\n  baton pregrant check --db baton.db --thread th_1 --turn 9 --tool Read --path /tmp/baton-0/th_1/H2/handoff.md\n  baton pregrant check --thread th_1 --run 9 --tool Read --args '{\"file_path\": \"/tmp/baton-0/th_1/H2/handoff.md\"}' --json\n\n--db defaults to $BATON_DB, then ./baton.db; it must exist."
    )]
    Check(PregrantCheckArgs),
}

#[derive(Args, Debug)]
pub struct PregrantCheckArgs {
    /// The database holding the grants (default: $BATON_DB, else ./baton.db).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// The thread the tool call happens in.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// The turn (run number) the tool call happens on.
    #[arg(long, visible_alias = "turn", value_name = "N")]
    pub run: u32,
    /// The tool, exactly as the provider names it (only `Read` is ever granted).
    #[arg(long, value_name = "TOOL")]
    pub tool: String,
    /// The requested path.
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "args",
        conflicts_with = "args"
    )]
    pub path: Option<PathBuf>,
    /// The tool's arguments as JSON; the path is read from `file_path` or `path`.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Print `{"allow": bool, "reason": "..."}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// The store that says which handoffs are superseded or deleted (default: $BATON_DB, else
    /// ./baton.db; without one, only --max-age and --keep apply).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
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
    /// Print the policy, the decision and the rendered handoff as JSON (the service's `render`
    /// result) instead of the document.
    #[arg(long, conflicts_with_all = ["out", "deliver"])]
    pub json: bool,
    /// With --json: leave the decision's trace (every rule evaluated, about 8 KB) out.
    #[arg(long, requires = "json")]
    pub no_trace: bool,
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
    #[arg(long, value_name = "FILE", conflicts_with_all = ["db", "thread"])]
    pub state: Option<PathBuf>,
    /// Read a stored thread from this database (with --thread; default $BATON_DB, else
    /// ./baton.db).
    #[arg(long, value_name = "FILE", requires = "thread")]
    pub db: Option<PathBuf>,
    /// The stored thread to read (instead of --state).
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
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
    /// Print the decision as JSON (its fields are stable; `baton schema decision` describes them).
    #[arg(long)]
    pub json: bool,
    /// With --json: leave the decision's trace (every rule evaluated, about 8 KB) out.
    #[arg(long, requires = "json")]
    pub no_trace: bool,
    /// Append every rule evaluated, with the values it read.
    #[arg(long)]
    pub verbose: bool,
}

/// The off-band root a command uses: the flag, else `$BATON_HANDOFF_DIR` when set and not
/// empty, else `None` (the library's default, `<tmp>/baton-<uid>`). The library reads no
/// environment; the command line does it here, for every command and the service.
pub(crate) fn handoff_root(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| match std::env::var_os("BATON_HANDOFF_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => None,
    })
}

/// Debug builds only: abort the process at the store step `$BATON_FAULT` names (the crash
/// tests of tests/store_cli.rs). Release builds install no hook.
#[cfg(debug_assertions)]
fn fault_from_env(step: &str) {
    if std::env::var("BATON_FAULT").is_ok_and(|v| v == step) {
        std::process::abort();
    }
}

/// Run the CLI.
pub fn main() -> ExitCode {
    #[cfg(debug_assertions)]
    crate::store::set_fault_hook(fault_from_env);
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let e = reference::nearest_suggestion(e);
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
        Command::Serve(a) => serve::serve(a),
        Command::Db(a) => store::db(a),
        Command::Dispatch(a) => store::dispatch(a),
        Command::Complete(a) => store::complete(a),
        Command::Rollback(a) => store::rollback(a),
        Command::Fork(a) => store::fork(a),
        Command::MergeBack(a) => store::merge_back(a),
        Command::Regenerate(a) => store::regenerate(a),
        Command::Replay(a) => replay::replay(a),
        Command::Log(a) => ops::log(a),
        Command::Status(a) => ops::status(a),
        Command::Test(a) => tooling::test(a),
        Command::Diff(a) => tooling::diff(a),
        Command::Fmt(a) => tooling::fmt(a),
        Command::Quality(a) => quality::quality(a),
        Command::Gc(a) => delivery::gc(a),
        #[cfg(feature = "lsp")]
        Command::Lsp(a) => lsp::lsp(a),
        Command::Pregrant(PregrantArgs {
            command: PregrantCommand::Check(a),
        }) => delivery::pregrant_check(a),
        Command::Import(a) => import::import(a),
        Command::Sessions(a) => import::sessions(a),
        Command::Handoff(a) => import::handoff(a),
        Command::Policy(a) => scaffold::policy(a),
        Command::Init(a) => scaffold::init(a),
        Command::Schema(a) => reference::schema(a),
        Command::Completions(a) => reference::completions(a),
        Command::Man(a) => reference::man(a),
    };
    ExitCode::from(code)
}
