//! The store's commands: `db init|import|export`, `dispatch`, `complete`, `rollback`, `fork`,
//! `merge-back`, `regenerate`, and loading `--db FILE --thread ID` for explain/render.

use super::commands::{FAIL, OK, USAGE};
use super::StateSource;
use crate::state::{Item, RunStatus, State};
use crate::store::{self, Dispatched, Store, StoreError};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

fn print(s: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{s}");
}

/// `--db`: the database file.
#[derive(Args, Debug, Clone)]
pub struct DbPath {
    /// The database (default: $BATON_DB, else ./baton.db).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

impl DbPath {
    fn resolve(&self) -> PathBuf {
        db_path(self.db.as_deref()).0
    }
}

/// How long a store command waits for a locked database: `$BATON_BUSY_TIMEOUT_MS`, else
/// [`crate::store::DEFAULT_BUSY_TIMEOUT`].
pub(crate) fn busy_timeout() -> std::time::Duration {
    std::env::var("BATON_BUSY_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_millis)
        .unwrap_or(crate::store::DEFAULT_BUSY_TIMEOUT)
}

/// The database every `--db` names: the flag, else `$BATON_DB` (when set and not empty), else
/// `./baton.db`; and whether it is that last default (so a missing file need not be an error
/// everywhere). One rule for every command and the service.
pub(crate) fn db_path(given: Option<&Path>) -> (PathBuf, bool) {
    match given {
        Some(p) => (p.to_path_buf(), false),
        None => match std::env::var_os("BATON_DB") {
            Some(v) if !v.is_empty() => (PathBuf::from(v), false),
            _ => (PathBuf::from("baton.db"), true),
        },
    }
}

#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Create the database (or migrate it to this baton's schema). `--db` takes a SQLite
    /// file or, built with feature `postgres`, a `postgres://` URL.
    Init(InitArgs),
    /// Migrate an existing database to this baton's schema (the same as `init`, for a
    /// database that exists).
    Migrate(InitArgs),
    /// Import state files, or with --from coding-tool session logs, one thread each.
    Import(ImportArgs),
    /// Print a stored thread as a state file (YAML, or JSON with --json).
    Export(ExportArgs),
    /// Copy every thread, decision and grant of one database into another, empty one, between
    /// SQLite and PostgreSQL (feature `postgres`).
    Copy(CopyArgs),
}

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The database to copy: a SQLite file (`sqlite:FILE` or a path) or a `postgres://` URL.
    #[arg(long, value_name = "DB")]
    pub from: String,
    /// The empty database to copy into (created or migrated first), on the other backend.
    #[arg(long, value_name = "DB")]
    pub to: String,
    /// Print `{"from", "to", "threads", "tables"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// Print `{"db", "schema_version"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// State files (YAML, or JSON by extension); with --from, session logs.
    #[arg(required = true, value_name = "STATE")]
    pub states: Vec<PathBuf>,
    /// The files are session logs of this tool (claude-code, codex), imported as threads
    /// (see docs/import.md).
    #[arg(long, value_enum, value_name = "TOOL")]
    pub from: Option<super::import::ToolArg>,
    /// Replace a stored thread of the same id instead of refusing.
    #[arg(long)]
    pub replace: bool,
    /// Print a JSON array with one `{"thread", "runs"}` per thread imported (the service's
    /// `thread/import` result).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The thread to export.
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// Print JSON instead of YAML.
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where handoffs are made: policy, document directory, templates.
#[derive(Args, Debug, Clone)]
pub struct HandoffArgs {
    /// Policy file, directory, or shipped profile (default, t3code, t3code-legacy, mcode).
    #[arg(long, default_value = "default", value_name = "PATH")]
    pub policy: String,
    /// Directory for off-band documents (default: $BATON_HANDOFF_DIR, else <tmp>/baton-<uid>).
    #[arg(long, value_name = "DIR")]
    pub handoff_dir: Option<PathBuf>,
    /// Directory of templates overriding the embedded ones by file name.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DispatchArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// The provider the run goes to.
    #[arg(long, value_name = "PROVIDER")]
    pub target: String,
    /// The user's message for the run.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The model requested (a change from the thread's model is a staleness signal).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The runtime mode requested.
    #[arg(long, value_name = "MODE")]
    pub runtime_mode: Option<String>,
    /// The user asked for a clean context.
    #[arg(long)]
    pub clean_context: bool,
    /// The directory the run starts in (`request.workspace.cwd`): its git state and what
    /// changed since the target's last run are read from the repository, read-only.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    #[command(flatten)]
    pub handoff: HandoffArgs,
    /// Print the decision (as `explain --json` does) plus `handoff` and `recorded` as JSON.
    #[command(flatten)]
    pub out: JsonArgs,
}

#[derive(Args, Debug)]
pub struct CompleteArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// The running run to complete.
    #[arg(long, value_name = "N")]
    pub run: u32,
    /// The run's items: a YAML or JSON list of items as in a state file.
    #[arg(long, value_name = "FILE")]
    pub items: PathBuf,
    /// How the run ended: completed, failed or interrupted.
    #[arg(long, default_value = "completed", value_name = "S")]
    pub status: String,
    /// The directory the run ended in: recorded with its git state (HEAD, branch, dirty
    /// files) as the run's workspace (`runs[].workspace`).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Print the result as JSON (the service's `completeRun` result).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// Keep runs 1..N; later runs are rolled back.
    #[arg(long, value_name = "N")]
    pub to: u32,
    /// The policy that decides the next run on each provider, to say what the app does with
    /// each provider thread (file, directory, or shipped profile).
    #[arg(long, default_value = "default", value_name = "PATH")]
    pub policy: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ForkArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// The run to fork at.
    #[arg(long, value_name = "N")]
    pub at: u32,
    /// The child thread's id (default: <thread>-fork<n>).
    #[arg(long, value_name = "ID")]
    pub child: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MergeBackArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The fork (child thread) to merge back into its parent.
    #[arg(long, value_name = "CHILD")]
    pub thread: String,
    /// A message for the parent's next run.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    #[command(flatten)]
    pub handoff: HandoffArgs,
    #[command(flatten)]
    pub out: JsonArgs,
}

#[derive(Args, Debug)]
pub struct RegenerateArgs {
    #[command(flatten)]
    pub db: DbPath,
    /// The stored thread.
    #[arg(long, value_name = "ID")]
    pub thread: String,
    /// The handoff to supersede (it must be the handoff of the running run).
    #[arg(long, value_name = "ID")]
    pub handoff: String,
    /// Replace the user's message.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    #[command(flatten)]
    pub handoff_args: HandoffArgs,
    #[command(flatten)]
    pub out: JsonArgs,
}

fn open(db: &Path) -> Result<Store, u8> {
    refuse_postgres(db)?;
    Store::open_with_busy_timeout(db, busy_timeout()).map_err(|e| {
        eprintln!("{}", super::errors::store_error(&e));
        FAIL
    })
}

/// The database of a lifecycle command (`dispatch`, `complete`, `rollback`, `fork`,
/// `merge-back`, `regenerate`): a SQLite file (created and migrated as [`open`] does) or a
/// PostgreSQL database (migrated), as `db` names it.
fn open_db(db: &Path) -> Result<store::Db, u8> {
    let url = store::DbUrl::parse(&db.to_string_lossy());
    #[cfg(not(feature = "postgres"))]
    if let store::DbUrl::Postgres(u) = &url {
        return Err(init_postgres(u, false));
    }
    store::Db::open(&url, busy_timeout()).map_err(fail_db)
}

/// The database of a reading command: a SQLite file opened read-only ([`open_read_only`]), or a
/// PostgreSQL database at the current schema (never migrated).
pub(crate) fn open_db_existing(db: &Path) -> Result<store::Db, u8> {
    let url = store::DbUrl::parse(&db.to_string_lossy());
    #[cfg(not(feature = "postgres"))]
    if let store::DbUrl::Postgres(u) = &url {
        return Err(init_postgres(u, false));
    }
    store::Db::open_existing(&url).map_err(fail_db)
}

/// A [`store::DbError`] as `baton` prints it (a store error with the command that helps).
pub(crate) fn fail_db(e: store::DbError) -> u8 {
    eprintln!("{}", super::errors::db_error(&e));
    FAIL
}

/// Reading commands (`db export`, `explain`/`render --thread`) open the database read-only:
/// they work on a read-only file and never migrate or create one.
fn open_read_only(db: &Path) -> Result<Store, u8> {
    refuse_postgres(db)?;
    Store::open_read_only(db).map_err(|e| {
        eprintln!("{}", super::errors::store_error(&e));
        FAIL
    })
}

/// A `postgres://` URL given to a command the PostgreSQL backend does not run yet: said so,
/// instead of SQLite failing to create a file of that name.
pub(crate) fn refuse_postgres(db: &Path) -> Result<(), u8> {
    match store::DbUrl::parse(&db.to_string_lossy()) {
        #[cfg(not(feature = "postgres"))]
        store::DbUrl::Postgres(url) => Err(init_postgres(&url, false)),
        #[cfg(feature = "postgres")]
        url @ store::DbUrl::Postgres(_) => {
            eprintln!(
                "{url}: error: this step reads a SQLite file only; give a SQLite file with --db"
            );
            Err(FAIL)
        }
        store::DbUrl::Sqlite(_) => Ok(()),
    }
}

/// `db init` and `db migrate` on a `postgres://` URL.
#[cfg(feature = "postgres")]
fn init_postgres(url: &str, json: bool) -> u8 {
    match store::pg::PgStore::open(url).and_then(|s| Ok((s.schema_version()?, s))) {
        Ok((v, s)) if json => {
            json_out(&serde_json::json!({"db": s.url(), "schema_version": v}));
            OK
        }
        Ok((v, s)) => {
            print(&format!("{}: schema version {v}", s.url()));
            OK
        }
        Err(e) => {
            eprintln!("{}", super::errors::pg_error(&e));
            FAIL
        }
    }
}

/// Where `db import` puts each state: a SQLite store or a PostgreSQL one.
type Importer = Box<dyn FnMut(&State, bool) -> Result<(), String>>;

#[cfg(feature = "postgres")]
fn postgres_importer(url: &str) -> Result<Importer, u8> {
    let mut db = store::Db::open(&store::DbUrl::Postgres(url.to_string()), busy_timeout())
        .map_err(fail_db)?;
    Ok(Box::new(move |s, replace| {
        db.import_with(s, replace)
            .map_err(|e| super::errors::db_error(&e))
    }))
}

#[cfg(feature = "postgres")]
fn export_postgres(url: &str, thread: &str, json: bool) -> u8 {
    let state = store::pg::PgStore::open_existing(url)
        .map_err(store::pg::CopyError::from)
        .and_then(|pg| pg.export(thread));
    match state {
        Ok(s) if json => {
            json_out(&s);
            OK
        }
        Ok(s) => {
            use std::io::Write as _;
            let _ = write!(std::io::stdout().lock(), "{}", crate::state::to_yaml(&s));
            OK
        }
        // A thread that is not stored gets the advice SQLite's gives (import it first).
        Err(store::pg::CopyError::Sqlite(e)) => {
            eprintln!("{}", super::errors::store_error(&e));
            FAIL
        }
        Err(e) => {
            eprintln!("{}", super::errors::copy_error(&e));
            FAIL
        }
    }
}

/// `baton db copy`: SQLite to PostgreSQL or back.
#[cfg(feature = "postgres")]
fn copy(a: &CopyArgs) -> u8 {
    use store::pg::{CopyError, PgStore};
    use store::DbUrl;
    let from = DbUrl::parse(&a.from);
    let to = DbUrl::parse(&a.to);
    let report = match (&from, &to) {
        (DbUrl::Sqlite(src), DbUrl::Postgres(dst)) => {
            if let Err(c) = super::dbcheck::require_existing(src, "baton db copy") {
                return c;
            }
            let src = match open_read_only(src) {
                Ok(s) => s,
                Err(c) => return c,
            };
            PgStore::open(dst)
                .map_err(CopyError::from)
                .and_then(|pg| pg.copy_from_sqlite(&src))
        }
        (DbUrl::Postgres(src), DbUrl::Sqlite(dst)) => {
            let mut dst = match open(dst) {
                Ok(s) => s,
                Err(c) => return c,
            };
            PgStore::open_existing(src)
                .map_err(CopyError::from)
                .and_then(|pg| pg.copy_to_sqlite(&mut dst))
        }
        _ => {
            eprintln!("error: `baton db copy` copies between SQLite and PostgreSQL: give one `sqlite:FILE` (or a path) and one `postgres://` URL (got {from} and {to})");
            return USAGE;
        }
    };
    match report {
        Ok(r) if a.json => {
            json_out(&serde_json::json!({
                "from": from.redacted(),
                "to": to.redacted(),
                "threads": r.threads,
                "tables": r.tables.iter().map(|(t, n)| serde_json::json!({"table": t, "rows": n})).collect::<Vec<_>>(),
            }));
            OK
        }
        Ok(r) => {
            print(&format!("copied {} threads from {from} to {to}", r.threads));
            OK
        }
        Err(e) => {
            eprintln!("{}", super::errors::copy_error(&e));
            FAIL
        }
    }
}

#[cfg(not(feature = "postgres"))]
fn postgres_importer(url: &str) -> Result<Importer, u8> {
    Err(init_postgres(url, false))
}

#[cfg(not(feature = "postgres"))]
fn export_postgres(url: &str, _thread: &str, _json: bool) -> u8 {
    init_postgres(url, false)
}

#[cfg(not(feature = "postgres"))]
fn copy(a: &CopyArgs) -> u8 {
    let pg = [&a.from, &a.to]
        .into_iter()
        .find(|u| matches!(store::DbUrl::parse(u), store::DbUrl::Postgres(_)));
    match pg {
        Some(url) => init_postgres(url, false),
        None => {
            eprintln!("error: `baton db copy` copies between SQLite and PostgreSQL: give one `sqlite:FILE` (or a path) and one `postgres://` URL");
            USAGE
        }
    }
}

#[cfg(not(feature = "postgres"))]
fn init_postgres(url: &str, _json: bool) -> u8 {
    eprintln!(
        "{}: error: this baton was built without PostgreSQL support; build it with `--features postgres` (docs/store.md#postgresql), or give a SQLite file with --db",
        store::DbUrl::parse(url)
    );
    FAIL
}

fn fail(e: StoreError) -> u8 {
    eprintln!("{}", super::errors::store_error(&e));
    FAIL
}

fn json_out<T: serde::Serialize>(v: &T) {
    print(&serde_json::to_string_pretty(v).unwrap_or_default());
}

/// `explain`/`render` with `--thread ID [--db FILE]`.
pub(crate) fn load_state(src: &StateSource, command: &str) -> Result<State, u8> {
    let Some(thread) = &src.thread else {
        eprintln!(
            "error: give a state with --state FILE, or a stored thread with --db FILE --thread ID"
        );
        return Err(USAGE);
    };
    let db = db_path(src.db.as_deref()).0;
    super::dbcheck::require_existing(&db, command)?;
    let store = open_db_existing(&db)?;
    store.load(thread).map_err(fail_db)
}

/// `explain --thread ID [--db FILE]`: the stored thread's decision ([`Store::decide`], which
/// reads only a window of a long thread when that decides the same).
pub(crate) fn decide_stored(
    src: &StateSource,
    engine: &crate::Engine,
    target: Option<&str>,
    command: &str,
) -> Result<Result<crate::Decision, crate::Error>, u8> {
    let Some(thread) = &src.thread else {
        eprintln!(
            "error: give a state with --state FILE, or a stored thread with --db FILE --thread ID"
        );
        return Err(USAGE);
    };
    let db = db_path(src.db.as_deref()).0;
    super::dbcheck::require_existing(&db, command)?;
    let store = open_db_existing(&db)?;
    store.decide(engine, thread, target).map_err(fail_db)
}

pub(crate) fn db(a: DbArgs) -> u8 {
    match a.command {
        DbCommand::Copy(a) => copy(&a),
        DbCommand::Init(a) | DbCommand::Migrate(a) => {
            let path = a.db.resolve();
            if let store::DbUrl::Postgres(url) = store::DbUrl::parse(&path.to_string_lossy()) {
                return init_postgres(&url, a.json);
            }
            let store = match open(&path) {
                Ok(s) => s,
                Err(c) => return c,
            };
            match store.schema_version() {
                Ok(v) if a.json => {
                    json_out(&serde_json::json!({"db": path, "schema_version": v}));
                    OK
                }
                Ok(v) => {
                    print(&format!("{}: schema version {v}", path.display()));
                    OK
                }
                Err(e) => fail(e),
            }
        }
        DbCommand::Import(a) => {
            let db = a.db.resolve();
            let mut sink: Importer = match store::DbUrl::parse(&db.to_string_lossy()) {
                store::DbUrl::Postgres(url) => match postgres_importer(&url) {
                    Ok(f) => f,
                    Err(c) => return c,
                },
                store::DbUrl::Sqlite(_) => {
                    let mut store = match open(&db) {
                        Ok(s) => s,
                        Err(c) => return c,
                    };
                    Box::new(move |s, replace| {
                        store
                            .import_with(s, replace)
                            .map_err(|e| super::errors::store_error(&e))
                    })
                }
            };
            let mut code = OK;
            let mut imported = Vec::new();
            for file in &a.states {
                let loaded = match a.from {
                    Some(tool) => super::import::import_state(tool.into(), file),
                    None => crate::state::load_file(file).map_err(|e| {
                        eprintln!("{e}");
                        FAIL
                    }),
                };
                let state = match loaded {
                    Ok(s) => s,
                    Err(c) => {
                        code = c;
                        continue;
                    }
                };
                match sink(&state, a.replace) {
                    Ok(()) if a.json => imported.push(store::ImportReport {
                        thread: state.thread.id.clone(),
                        runs: state.runs.len(),
                    }),
                    Ok(()) => print(&format!(
                        "imported {} from {} ({} runs)",
                        state.thread.id,
                        file.display(),
                        state.runs.len()
                    )),
                    Err(e) => {
                        eprintln!("{e}");
                        code = FAIL;
                    }
                }
            }
            if a.json {
                json_out(&imported);
            }
            code
        }
        DbCommand::Export(a) => {
            let db = a.db.resolve();
            if let store::DbUrl::Postgres(url) = store::DbUrl::parse(&db.to_string_lossy()) {
                return export_postgres(&url, &a.thread, a.json);
            }
            if let Err(c) = super::dbcheck::require_existing(&db, "baton db export") {
                return c;
            }
            let store = match open_read_only(&db) {
                Ok(s) => s,
                Err(c) => return c,
            };
            match store.export(&a.thread) {
                Ok(s) if a.json => {
                    json_out(&s);
                    OK
                }
                Ok(s) => {
                    use std::io::Write as _;
                    let _ = write!(std::io::stdout().lock(), "{}", crate::state::to_yaml(&s));
                    OK
                }
                Err(e) => fail(e),
            }
        }
    }
}

/// `--json` and `--no-trace` of the commands that print a result.
#[derive(Args, Debug, Clone, Copy)]
pub struct JsonArgs {
    /// Print the result as JSON (the same object the service returns, docs/service.md).
    #[arg(long)]
    pub json: bool,
    /// With --json: leave the decision's trace (every rule evaluated, about 8 KB) out.
    #[arg(long, requires = "json")]
    pub no_trace: bool,
}

fn print_dispatched(d: &Dispatched, out: JsonArgs, what: &str) {
    let delivery = d.decision.delivery.as_ref();
    if let Some(x) = delivery {
        if let Some(reason) = &x.fallback_reason {
            eprintln!(
                "{}",
                super::errors::delivery_fallback(reason, x.fallback_kind)
            );
        }
    }
    if out.json {
        let report = store::DispatchReport::from(d.clone());
        if out.no_trace {
            json_out(&store::report::to_value(&report, false));
        } else {
            json_out(&report);
        }
        return;
    }
    let dec = &d.decision;
    // A merge-back is decided on the fork as the parent's provider sees it: its strategy and
    // provider-thread action describe that view, not the parent's next run.
    let merge_back = !d.started
        && d.handoff
            .as_ref()
            .is_some_and(|h| h.covered_thread.is_some());
    if merge_back {
        print(&format!("{what} run {} on {}", d.run, dec.target));
        match &d.provider_thread {
            Some(pt) => print(&format!(
                "  into provider thread: {pt} (the parent's next run resumes it; a run elsewhere gets the merge-back made again for it)"
            )),
            None => print("  into provider thread: none yet (the parent's next run creates one; a run elsewhere gets the merge-back made again for it)"),
        }
    } else {
        print(&format!(
            "{what} run {} on {}: {} ({})",
            d.run,
            dec.target,
            dec.strategy.as_str(),
            dec.decided_by
                .because
                .as_deref()
                .unwrap_or(dec.decided_by.rule.as_str())
        ));
        if !dec.stale.is_empty() {
            print(&format!("  stale: {}", dec.stale.join(", ")));
        }
        match &d.provider_thread {
            Some(pt) => print(&format!(
                "  provider thread: {} {pt}",
                dec.provider_thread.action.as_str()
            )),
            None => print("  provider thread: none"),
        }
        if let Some(f) = &d.fork_point {
            print(&format!(
                "  fork point: fork {} thread {} after its turn {} (run {} of {}); the new thread is {}",
                dec.target,
                f.provider_thread,
                f.turn,
                f.run,
                f.parent_thread,
                d.provider_thread.as_deref().unwrap_or("-")
            ));
        }
    }
    match &d.handoff {
        Some(h) => print_handoff("handoff", h),
        None => print("  handoff: none"),
    }
    if let Some(h) = &d.merge_back {
        print_handoff("merge-back", h);
    }
}

fn print_handoff(label: &str, h: &store::HandoffRecord) {
    let of = h
        .covered_thread
        .as_deref()
        .map(|t| format!(" of fork {t}"))
        .unwrap_or_default();
    print(&format!(
        "  {label} {} ({}) covers runs {}-{}{of}, {}",
        h.id,
        h.strategy.as_str(),
        h.covered.from,
        h.covered.to,
        h.status.as_str()
    ));
    if let Some(p) = &h.document_path {
        print(&format!("  document: {}", p.display()));
    }
    if let Some(s) = &h.supersedes {
        print(&format!("  supersedes: {s}"));
    }
}

/// The engine of a handoff-making command: its `--policy`, `--templates` and `--handoff-dir`.
fn engine_of(h: &HandoffArgs) -> Result<crate::engine::Engine, u8> {
    super::commands::load_engine(&h.policy, h.templates.as_deref(), h.handoff_dir.clone())
}

pub(crate) fn dispatch(a: DispatchArgs) -> u8 {
    let engine = match engine_of(&a.handoff) {
        Ok(e) => e,
        Err(c) => return c,
    };
    let mut store = match open_db(&a.db.resolve()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let req = store::DispatchRequest {
        thread: a.thread.clone(),
        target: a.target.clone(),
        message: a.message.clone(),
        model: a.model.clone(),
        runtime_mode: a.runtime_mode.clone(),
        clean_context: a.clean_context,
        // The command builds the request: it is now.
        at: Some(jiff::Timestamp::now().to_string()),
        workspace: a.cwd.as_ref().map(|c| crate::state::Workspace {
            cwd: Some(c.clone()),
            ..Default::default()
        }),
    };
    match store.dispatch(&engine, &req) {
        Ok(d) if d.started => {
            print_dispatched(&d, a.out, "started");
            OK
        }
        Ok(d) => {
            // `unsupported`: nothing started. One message (and with --json the result, whose
            // `started` is false); no "started run" line.
            if a.out.json {
                let report = store::DispatchReport::from(d.clone());
                json_out(&store::report::to_value(&report, !a.out.no_trace));
            }
            eprintln!("{}", not_started(&d, &store.name(), &a.thread));
            FAIL
        }
        Err(e) => fail_db(e),
    }
}

/// The one message of a dispatch the policy decided `unsupported`: nothing was started, why,
/// and the command that dispatches to another provider.
fn not_started(d: &Dispatched, db: &str, thread: &str) -> String {
    use crate::store::hint::sh;
    let dec = &d.decision;
    format!(
        "error: no run started: the policy decided `{}` for run {} on {} ({}, {}); nothing was recorded but the decision log. Dispatch to another provider: `baton dispatch --db {} --thread {} --target PROVIDER`",
        dec.strategy.as_str(),
        d.run,
        dec.target,
        dec.decided_by
            .because
            .as_deref()
            .unwrap_or(dec.decided_by.rule.as_str()),
        dec.decided_by.at,
        sh(db),
        sh(thread)
    )
}

fn read_items(path: &Path) -> Result<Vec<Item>, u8> {
    let name = path.display();
    // An items file is a state's worth of items at most.
    let limit = crate::state::MAX_STATE_BYTES;
    let text = crate::input::read_to_string(path, limit, " (256 MiB)").map_err(|e| {
        eprintln!("{name}: error: cannot read items file: {e}");
        FAIL
    })?;
    let de = serde_yaml::Deserializer::from_str(&text);
    serde_path_to_error::deserialize::<_, Vec<Item>>(de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let loc = inner
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        let at = if at == "." { String::new() } else { format!("{at}: ") };
        // serde_yaml adds its own location and path; we print ours.
        let msg = inner.to_string();
        let msg = msg.split(" at line ").next().unwrap_or_default();
        let msg = match msg.split_once(": ") {
            Some((head, rest)) if !head.contains(char::is_whitespace) => rest,
            _ => msg,
        };
        eprintln!("{name}{loc}: error: {at}{msg} (expected a list of items as in a state file's `runs[].items`)");
        FAIL
    })
}

pub(crate) fn complete(a: CompleteArgs) -> u8 {
    let status = match a.status.as_str() {
        "completed" => RunStatus::Completed,
        "failed" => RunStatus::Failed,
        "interrupted" => RunStatus::Interrupted,
        other => {
            eprintln!("error: --status: invalid value \"{other}\"; expected completed, failed or interrupted");
            return USAGE;
        }
    };
    let items = match read_items(&a.items) {
        Ok(i) => i,
        Err(c) => return c,
    };
    let mut store = match open_db(&a.db.resolve()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let end = store::RunEnd {
        ended_at: Some(jiff::Timestamp::now().to_string()),
        workspace: a.cwd.as_deref().map(|c| crate::workspace::live(c).0),
    };
    match store.complete_run_with(&a.thread, a.run, items, status, &end) {
        Ok(c) if a.json => {
            json_out(&c);
            OK
        }
        Ok(c) => {
            print(&format!(
                "run {} of {}: {} ({} item{}){}",
                c.run,
                c.thread,
                c.status.as_str(),
                c.items,
                if c.items == 1 { "" } else { "s" },
                c.handoff_consumed
                    .map(|h| format!("; handoff {h} consumed"))
                    .unwrap_or_default()
            ));
            OK
        }
        Err(e) => fail_db(e),
    }
}

pub(crate) fn rollback(a: RollbackArgs) -> u8 {
    let engine = match super::commands::load_engine(&a.policy, None, super::handoff_root(None)) {
        Ok(e) => e,
        Err(c) => return c,
    };
    let mut store = match open_db(&a.db.resolve()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let rolled = store.rollback(&a.thread, a.to).map(|mut r| {
        // The rollback is committed; advice that cannot be given is a warning, not a failure.
        if let Err(e) = store.advise_rollback(&engine, &mut r) {
            let why = match e.as_store() {
                Some(s) => super::errors::store_error(s),
                None => e.to_string(),
            };
            eprintln!("warning: cannot decide the next runs after the rollback: {why}");
        }
        r
    });
    match rolled {
        Ok(r) if a.json => {
            json_out(&r);
            OK
        }
        Ok(r) => {
            let list = |v: Vec<String>| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            print(&format!("rolled {} back to run {}", r.thread, r.to));
            print(&format!(
                "  runs rolled back: {}",
                list(r.runs_rolled_back.iter().map(|o| o.to_string()).collect())
            ));
            print(&format!(
                "  handoffs superseded: {}",
                list(r.handoffs_superseded)
            ));
            print(&format!(
                "  provider threads: {}",
                list(
                    r.provider_threads
                        .iter()
                        .map(|p| format!("{} ({}) {}", p.id, p.provider, p.status.as_str()))
                        .collect()
                )
            ));
            if r.compact_summary_dropped {
                print("  compaction summary: dropped (it covered a rolled-back run)");
            }
            for p in &r.provider_threads {
                print(&format!("  {}", super::rollback_text::advice(p)));
            }
            OK
        }
        Err(e) => fail_db(e),
    }
}

pub(crate) fn fork(a: ForkArgs) -> u8 {
    let mut store = match open_db(&a.db.resolve()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match store.fork(&a.thread, a.at, a.child.as_deref()) {
        Ok(r) if a.json => {
            json_out(&r);
            OK
        }
        Ok(r) => {
            print(&format!(
                "forked {} at run {} as {} (transfer {} pending until its first dispatch)",
                r.parent, r.at, r.child, r.transfer
            ));
            OK
        }
        Err(e) => fail_db(e),
    }
}

/// The shell of the commands that make a handoff without starting a run (`merge-back`,
/// `regenerate`): load the policy, open the database, run `op`, print what it recorded.
fn handoff_command(
    h: &HandoffArgs,
    db: &DbPath,
    message: Option<String>,
    out: JsonArgs,
    what: &str,
    op: impl FnOnce(
        &mut store::Db,
        &crate::engine::Engine,
        &store::HandoffOptions,
    ) -> Result<Dispatched, store::DbError>,
) -> u8 {
    let engine = match engine_of(h) {
        Ok(e) => e,
        Err(c) => return c,
    };
    let mut store = match open_db(&db.resolve()) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let opts = store::HandoffOptions { message };
    match op(&mut store, &engine, &opts) {
        Ok(d) => {
            print_dispatched(&d, out, what);
            OK
        }
        Err(e) => fail_db(e),
    }
}

pub(crate) fn merge_back(a: MergeBackArgs) -> u8 {
    handoff_command(
        &a.handoff,
        &a.db,
        a.message.clone(),
        a.out,
        "merge-back for parent",
        |store, engine, opts| store.merge_back(engine, &a.thread, opts),
    )
}

pub(crate) fn regenerate(a: RegenerateArgs) -> u8 {
    handoff_command(
        &a.handoff_args,
        &a.db,
        a.message.clone(),
        a.out,
        "regenerated for",
        |store, engine, opts| store.regenerate(engine, &a.thread, &a.handoff, opts),
    )
}
