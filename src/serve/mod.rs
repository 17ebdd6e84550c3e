//! `baton serve`: a JSON-RPC 2.0 sidecar over stdio or a Unix socket, on tokio.
//!
//! Public entry point: [`serve`]. The pieces:
//! * `framing`: `Content-Length` (LSP) or newline framing with a size limit;
//! * `rpc`: the JSON-RPC message model and error codes;
//! * `policy_set`: the policy + templates set, checked as a whole, swapped atomically,
//!   reloaded on change;
//! * `session`: one connection: per-thread FIFO queues, cancellation, graceful shutdown;
//! * `slots`: the socket's connection slots: the message timeout, evicting the idlest
//!   connection partway through a message when every slot is taken;
//! * `methods`: the method router, a thin layer over the library (no policy logic);
//! * `json`: results written as JSON text with sorted members, without a `Value` tree;
//! * `sweep`: the periodic garbage collection of off-band documents;
//! * `decision_log`, `metrics`, `metrics_http`, `ops`: what operators see: the decision log,
//!   Prometheus metrics and their endpoint, and the hub that records each decision in both.

internal!(
    decision_log,
    framing,
    json,
    methods,
    metrics,
    metrics_http,
    ops,
    policy_set,
    rpc,
    session,
    shadow,
    slots,
    status,
    stored,
    sweep
);

pub use decision_log::{DecisionLogConfig, DecisionLogError, LogTarget};
pub use metrics_http::MetricsError;
pub(crate) use ops::exported_line;

pub use framing::Framing;
pub use policy_set::{PolicyHolder, PolicySet, Rejection, Reloaded};
pub use sweep::GcSweep;

/// The request parameter types, for the service's JSON Schema (`baton schema service`).
pub(crate) mod params {
    pub(crate) use super::methods::{DecideParams, Empty, ShadowParams};
    pub(crate) use super::stored::{
        CompleteParams, DispatchParams, ForkParams, ImportParams, MergeBackParams, PregrantParams,
        RegenerateParams, RollbackParams, ThreadParams,
    };

    /// The deprecated camelCase names the params still accept (serde aliases), each with its
    /// snake_case name (docs/service.md).
    pub(crate) const DEPRECATED_ALIASES: &[(&str, &str)] = &[
        ("stateText", "state_text"),
        ("runtimeMode", "runtime_mode"),
        ("cleanContext", "clean_context"),
    ];
}

use crate::policy::PolicyError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the service listens.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Transport {
    /// One client on stdin/stdout; the service exits when stdin closes or on `exit`.
    Stdio,
    /// Any number of clients on a Unix domain socket created with mode 0600.
    Socket(PathBuf),
}

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where the service listens.
    pub transport: Transport,
    /// How messages are framed (Content-Length headers or one per line).
    pub framing: Framing,
    /// Policy file, directory or shipped profile name.
    pub policy: String,
    /// Template directory overriding the embedded templates (watched like the policy).
    pub templates: Option<PathBuf>,
    /// The store database: a SQLite file, or a `postgres://` URL (feature `postgres`).
    pub db: PathBuf,
    /// With a PostgreSQL database: most connections open to it at once (`--db-pool`).
    pub db_pool: u32,
    /// With a PostgreSQL database: how long a request waits for a free connection before it
    /// is answered with an error (`--db-pool-timeout`).
    pub db_pool_timeout: Duration,
    /// Root of the off-band document directory (default: `<tmp>/baton-<uid>`; `baton serve`
    /// passes `$BATON_HANDOFF_DIR`).
    pub handoff_dir: Option<PathBuf>,
    /// Largest message body accepted, in bytes.
    pub max_message: usize,
    /// Most socket clients connected at once (`--max-connections`).
    pub max_connections: usize,
    /// How long the rest of a socket client's message may take after its first byte
    /// (`--message-timeout`); the connection is closed after it. Time between messages is not
    /// limited.
    pub message_timeout: Duration,
    /// Quiet period before a burst of file changes triggers a reload.
    pub debounce: Duration,
    /// Watch the policy and template directories.
    pub watch: bool,
    /// The periodic sweep of expired off-band documents (`None`: no sweep).
    pub gc: Option<GcSweep>,
    /// The decision log (`--decision-log`; `None`: none).
    pub decision_log: Option<DecisionLogConfig>,
    /// The metrics endpoint (`--metrics`; `None`: metrics only through the `metrics` method).
    pub metrics: Option<MetricsEndpoint>,
    /// The shadow policy (`--shadow`: a file, directory or shipped profile; `None`: none).
    pub shadow: Option<String>,
    /// How the service's messages name these settings to its user ([`SettingNames`]): the
    /// fields' own names by default; the `baton serve` command gives its flags.
    pub settings: SettingNames,
}

/// The names the service's messages give its settings when they tell a client or the operator
/// which one to change ("(max_connections)", "a larger db_pool"). The library names no command
/// line: [`SettingNames::default`] is the [`ServeConfig`] fields' names, and the `baton serve`
/// command fills in its flags (`serve --max-connections`, `--db-pool`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SettingNames {
    /// [`ServeConfig::db`].
    pub db: String,
    /// [`ServeConfig::db_pool`].
    pub db_pool: String,
    /// [`ServeConfig::db_pool_timeout`].
    pub db_pool_timeout: String,
    /// A [`ServeConfig::decision_log`] to standard output ([`LogTarget::Stdout`]).
    pub decision_log_stdout: String,
    /// [`ServeConfig::max_connections`].
    pub max_connections: String,
    /// [`ServeConfig::max_message`].
    pub max_message: String,
    /// [`ServeConfig::message_timeout`].
    pub message_timeout: String,
    /// [`MetricsEndpoint::allow_remote`].
    pub metrics_allow_remote: String,
    /// [`Transport::Stdio`].
    pub stdio: String,
}

impl Default for SettingNames {
    fn default() -> Self {
        SettingNames {
            db: "db".into(),
            db_pool: "db_pool".into(),
            db_pool_timeout: "db_pool_timeout".into(),
            decision_log_stdout: "decision_log".into(),
            max_connections: "max_connections".into(),
            max_message: "max_message".into(),
            message_timeout: "message_timeout".into(),
            metrics_allow_remote: "metrics.allow_remote".into(),
            stdio: "the stdio transport".into(),
        }
    }
}

/// Where the metrics endpoint listens (`--metrics ADDR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsEndpoint {
    /// `HOST:PORT`; loopback only unless `allow_remote`.
    pub addr: String,
    /// `--metrics-allow-remote`: serve on an address that is not loopback.
    pub allow_remote: bool,
}

impl ServeConfig {
    /// Defaults: Content-Length framing, 8 MiB messages, 256 connections, a 30 s message
    /// timeout, 200 ms debounce, watching on, 16 PostgreSQL connections waited for up to 30 s,
    /// the hourly document sweep of [`GcSweep::default`].
    pub fn new(transport: Transport, policy: impl Into<String>, db: impl Into<PathBuf>) -> Self {
        ServeConfig {
            transport,
            framing: Framing::ContentLength,
            policy: policy.into(),
            templates: None,
            db: db.into(),
            db_pool: DEFAULT_DB_POOL,
            db_pool_timeout: DEFAULT_DB_POOL_TIMEOUT,
            handoff_dir: None,
            max_message: DEFAULT_MAX_MESSAGE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            message_timeout: slots::DEFAULT_MESSAGE_TIMEOUT,
            debounce: Duration::from_millis(200),
            watch: true,
            gc: Some(GcSweep::default()),
            decision_log: None,
            metrics: None,
            shadow: None,
            settings: SettingNames::default(),
        }
    }
}

/// Default limit of PostgreSQL connections a server opens (`--db-pool`).
pub const DEFAULT_DB_POOL: u32 = 16;

/// Default wait for a free PostgreSQL connection (`--db-pool-timeout`).
pub const DEFAULT_DB_POOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Default message size limit: 8 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// Stack of the service's threads (tokio's default is 2 MiB). Every recursive walk is bounded
/// (policy nesting 64, state nesting by the parsers' limits), and a policy at the nesting
/// limit needs between 1 and 2 MiB in an unoptimised build: 8 MiB leaves a wide margin.
pub const THREAD_STACK: usize = 8 * 1024 * 1024;

/// Default limit of socket clients connected at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The first pause after `accept()` fails (descriptors exhausted, ...); it doubles on each
/// failure in a row up to [`ACCEPT_BACKOFF_MAX`], so a server out of file descriptors waits
/// for clients to leave instead of spinning.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// The longest pause after `accept()` fails (see [`ACCEPT_BACKOFF_MIN`]).
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The accept-failure warning is printed at most once per this interval (with a count of the
/// failures since the last one).
pub const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// Why the service could not start or stopped abnormally. `Display` is the message; the
/// socket, watched directory, decision log, metrics address or database it is about is the
/// location ([`crate::Located`]; [`crate::located`] prints `LOCATION: error: MESSAGE`). The
/// `baton serve` command prints it so, adding `error: ` where there is no location.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The policy set (policy and templates) does not load or check at start.
    #[error("{0}")]
    Policy(#[from] PolicyError),
    /// The Unix socket cannot be set up (listen, mode 0600, removing a stale socket).
    #[error("{what}: {reason}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// What failed, e.g. `cannot listen`.
        what: &'static str,
        /// The underlying error.
        reason: String,
    },
    /// The policy or template directory cannot be watched for changes.
    #[error("cannot watch for policy changes: {reason}")]
    Watch {
        /// The (first) watched path.
        path: PathBuf,
        /// The underlying error.
        reason: String,
    },
    /// The decision log cannot be opened.
    #[error(transparent)]
    DecisionLog(#[from] decision_log::DecisionLogError),
    /// The metrics endpoint cannot listen (a port in use, an address that is not loopback).
    #[error(transparent)]
    Metrics(#[from] metrics_http::MetricsError),
    /// The shadow policy does not load or check at start.
    #[error("the shadow policy `{spec}` is refused (the active policy is unaffected):\n{source}")]
    Shadow {
        /// The shadow policy as given (a file, directory or shipped profile).
        spec: String,
        /// Why it does not check.
        source: PolicyError,
    },
    /// The database cannot be reached or brought to this baton's schema at start (a
    /// PostgreSQL server; a SQLite file is created by the first method that writes).
    #[error(transparent)]
    Store(#[from] crate::store::DbError),
    /// The decision log is to go to standard output, which the stdio transport uses for its
    /// messages. The fields are the settings' names ([`ServeConfig::settings`]).
    #[error("{log} writes to standard output, which {stdio} uses for its messages; give the log a file path")]
    LogOnStdout {
        /// The decision log's setting, as named to the user.
        log: String,
        /// The stdio transport's setting, as named to the user.
        stdio: String,
    },
    /// The tokio runtime cannot be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(String),
    /// A start-up task could not be run to its end (it panicked or was cancelled).
    #[error("{what} failed: {reason}")]
    Task {
        /// What it was, e.g. `opening the database`.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// An operating-system resource the service needs cannot be set up (the termination
    /// signal handler).
    #[error("I/O on {what}: {reason}")]
    Io {
        /// What it is, e.g. `signal handler`.
        what: &'static str,
        /// The underlying error.
        reason: String,
    },
}

impl crate::Located for ServeError {
    fn location(&self) -> Option<String> {
        match self {
            ServeError::Socket { path, .. } | ServeError::Watch { path, .. } => {
                Some(path.display().to_string())
            }
            ServeError::DecisionLog(e) => crate::Located::location(e),
            ServeError::Metrics(e) => crate::Located::location(e),
            ServeError::Store(e) => crate::Located::location(e),
            _ => None,
        }
    }

    fn help(&self) -> Option<&str> {
        match self {
            ServeError::Store(e) => crate::Located::help(e),
            _ => None,
        }
    }

    fn message(&self) -> String {
        match self {
            ServeError::Store(e) => crate::Located::message(e),
            _ => self.to_string(),
        }
    }
}

/// Run the service until `exit`, end of input (stdio) or a termination signal. Blocks.
///
/// This builds its own multi-threaded runtime; process settings (the allocator's arenas,
/// signals' defaults, the umask) are left alone: the `baton serve` command tunes the
/// allocator itself before it calls this.
pub fn serve(cfg: ServeConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(THREAD_STACK)
        .build()
        .map_err(|e| ServeError::Runtime(e.to_string()))?;
    rt.block_on(run(cfg))
}

/// The async body of [`serve`], for embedding in an existing runtime.
pub async fn run(cfg: ServeConfig) -> Result<(), ServeError> {
    if let (Transport::Stdio, Some(LogTarget::Stdout)) =
        (&cfg.transport, cfg.decision_log.as_ref().map(|l| &l.target))
    {
        return Err(ServeError::LogOnStdout {
            log: cfg.settings.decision_log_stdout.clone(),
            stdio: cfg.settings.stdio.clone(),
        });
    }
    let policies = Arc::new(PolicyHolder::load(
        &cfg.policy,
        cfg.templates.clone(),
        cfg.handoff_dir.clone(),
    )?);
    let log = cfg
        .decision_log
        .clone()
        .map(decision_log::DecisionLog::open)
        .transpose()?;
    let metrics_listener = match &cfg.metrics {
        None => None,
        Some(m) => {
            let addr =
                metrics_http::resolve(&m.addr, m.allow_remote, &cfg.settings.metrics_allow_remote)?;
            let listener = metrics_http::bind(addr, &m.addr).await?;
            if let Ok(bound) = listener.local_addr() {
                // The bound port (for `--metrics 127.0.0.1:0`), on stderr, never in the way of
                // a stdio client.
                eprintln!("metrics: serving http://{bound}/metrics");
            }
            Some(listener)
        }
    };
    let candidate = match &cfg.shadow {
        None => None,
        Some(spec) => Some(
            shadow::Shadow::load(spec, cfg.templates.clone(), cfg.handoff_dir.clone()).map_err(
                |source| ServeError::Shadow {
                    spec: spec.clone(),
                    source,
                },
            )?,
        ),
    };
    let shared = session::Shared::new(cfg.clone(), policies.clone(), ops::Ops::new(log));
    // Off the runtime's threads: the PostgreSQL client blocks on a runtime of its own.
    let s = shared.clone();
    tokio::task::spawn_blocking(move || s.stores.prepare())
        .await
        .map_err(|e| ServeError::Task {
            what: "opening the database",
            reason: e.to_string(),
        })??;
    shared.shadow.set(candidate);
    let scraper = metrics_listener.map(|l| tokio::spawn(metrics_http::run(l, shared.clone())));
    let _watcher = if cfg.watch {
        Some(start_watcher(&shared)?)
    } else {
        None
    };
    let sweeper = cfg.gc.map(|g| tokio::spawn(sweep::run(shared.clone(), g)));
    let served = serve_transport(&cfg, shared).await;
    if let Some(s) = sweeper {
        s.abort();
    }
    if let Some(s) = scraper {
        s.abort();
    }
    served
}

async fn serve_transport(
    cfg: &ServeConfig,
    shared: Arc<session::Shared>,
) -> Result<(), ServeError> {
    match &cfg.transport {
        Transport::Stdio => {
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            let stdout = tokio::io::stdout();
            session::run_connection(shared.clone(), stdin, stdout).await;
            shared.drain().await;
            Ok(())
        }
        Transport::Socket(path) => serve_socket(shared, path).await,
    }
}

fn start_watcher(shared: &Arc<session::Shared>) -> Result<policy_set::Watcher, ServeError> {
    let dirs = shared.policies.watch_dirs();
    let handle = tokio::runtime::Handle::current();
    let s = shared.clone();
    policy_set::watch(&dirs, shared.cfg.debounce, move || {
        let s = s.clone();
        handle.spawn(async move { s.reload_and_notify().await });
    })
    .map_err(|e| ServeError::Watch {
        path: dirs.first().cloned().unwrap_or_default(),
        reason: e.to_string(),
    })
}

/// Bind the socket (0600), replacing a stale socket file but never any other file.
fn bind(path: &Path) -> Result<tokio::net::UnixListener, ServeError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let err = |what: &'static str, e: std::io::Error| ServeError::Socket {
        path: path.to_path_buf(),
        what,
        reason: crate::state::io_reason(&e),
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(ServeError::Socket {
                path: path.to_path_buf(),
                what: "cannot listen",
                reason:
                    "a file that is not a socket is in the way; remove it or choose another path"
                        .into(),
            });
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ServeError::Socket {
                path: path.to_path_buf(),
                what: "cannot listen",
                reason: "another server is listening on this socket".into(),
            });
        }
        std::fs::remove_file(path).map_err(|e| err("cannot remove the stale socket", e))?;
    }
    // Create the socket inside a fresh private directory (mode 0700) next to its final path,
    // set it to 0600 there, and only then rename it into place: no other user can connect
    // to it before its mode is final, and the process's umask is never touched.
    let parent = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = tempfile::Builder::new()
        .prefix(".baton-sock-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| err("cannot listen", e))?;
    let staged = private.path().join("s");
    let listener = tokio::net::UnixListener::bind(&staged).map_err(|e| err("cannot listen", e))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| err("cannot set mode 0600", e))?;
    std::fs::rename(&staged, path).map_err(|e| err("cannot listen", e))?;
    Ok(listener)
}

/// Tell a client over the connection limit why, and close its connection.
async fn refuse_connection(
    mut stream: tokio::net::UnixStream,
    framing: Framing,
    max: usize,
    setting: String,
) {
    let err = rpc::RpcError::new(
        rpc::code::INVALID_REQUEST,
        format!("too many connections: this server serves at most {max} clients at once ({setting}); close another connection or retry later"),
    );
    let body = serde_json::to_vec(&rpc::error_response(None, &err)).unwrap_or_default();
    let _ = framing::write_frame(&mut stream, framing, &body).await;
    // Close the writing side, and read (a little, briefly) what the client sent before it saw
    // the refusal: closing with unread input would reset the connection, and the client could
    // lose the refusal.
    use tokio::io::AsyncReadExt;
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    let drain = async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

async fn serve_socket(shared: Arc<session::Shared>, path: &Path) -> Result<(), ServeError> {
    let listener = bind(path)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| ServeError::Io {
            what: "signal handler",
            reason: e.to_string(),
        })?;
    let mut conns = tokio::task::JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut warned: Option<std::time::Instant> = None;
    let mut failures_since_warning = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, _)) => {
                        backoff = ACCEPT_BACKOFF_MIN;
                        // Reap finished connections so a long-lived server holds none of them.
                        while conns.try_join_next().is_some() {}
                        let slot = match shared.slots.admit(shared.cfg.max_connections) {
                            slots::Admit::Free(slot) | slots::Admit::Evicting(slot) => slot,
                            slots::Admit::Full => {
                                tokio::spawn(refuse_connection(
                                    stream,
                                    shared.cfg.framing,
                                    shared.cfg.max_connections,
                                    shared.cfg.settings.max_connections.clone(),
                                ));
                                continue;
                            }
                        };
                        let (r, w) = stream.into_split();
                        let s = shared.clone();
                        conns.spawn(async move {
                            let r = tokio::io::BufReader::new(slots::Tracked::new(r, slot.clone()));
                            session::run_connection_in(s, r, w, Some(slot)).await;
                        });
                    }
                    Err(e) => {
                        failures_since_warning = failures_since_warning.saturating_add(1);
                        let due = warned.is_none_or(|t| t.elapsed() >= ACCEPT_WARN_EVERY);
                        if due {
                            let more = match failures_since_warning {
                                1 => String::new(),
                                n => format!(" ({n} failures since the last warning)"),
                            };
                            eprintln!(
                                "{}: warning: accept failed: {e}{more}; retrying with back-off up to {} ms (this warning repeats at most every {} s)",
                                path.display(),
                                ACCEPT_BACKOFF_MAX.as_millis(),
                                ACCEPT_WARN_EVERY.as_secs()
                            );
                            warned = Some(std::time::Instant::now());
                            failures_since_warning = 0;
                        }
                        let pause = backoff;
                        backoff = backoff.saturating_mul(2).min(ACCEPT_BACKOFF_MAX);
                        tokio::select! {
                            _ = tokio::time::sleep(pause) => {}
                            _ = shared.exit_requested() => break,
                            _ = term.recv() => {
                                shared.begin_shutdown();
                                break;
                            }
                        }
                    }
                }
            }
            _ = shared.exit_requested() => break,
            _ = term.recv() => {
                shared.begin_shutdown();
                break;
            }
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(path);
    shared.drain().await;
    // Every request has finished and queued its response; now stop reading and let each
    // connection's writer flush what is queued before the process ends.
    shared.request_exit();
    while conns.join_next().await.is_some() {}
    Ok(())
}

// The fuzz targets' properties under proptest (`fuzz/src/props.rs`): the formatter, the parser
// and the service's framing.
#[cfg(test)]
mod fuzz_props_tests;
