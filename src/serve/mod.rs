//! `baton serve`: a JSON-RPC 2.0 sidecar over stdio or a Unix socket, on tokio.
//!
//! Public entry point: [`serve`]. The pieces:
//! * `framing`: `Content-Length` (LSP) or newline framing with a size limit;
//! * `rpc`: the JSON-RPC message model and error codes;
//! * `policy_set`: the policy + templates set, checked as a whole, swapped atomically,
//!   reloaded on change;
//! * `session`: one connection: per-thread FIFO queues, cancellation, graceful shutdown;
//! * `methods`: the method router, a thin layer over the library (no policy logic);
//! * `sweep`: the periodic garbage collection of off-band documents.

internal!(framing, methods, policy_set, rpc, session, stored, sweep);

pub use framing::Framing;
pub use policy_set::{PolicyHolder, PolicySet};
pub use sweep::GcSweep;

use crate::policy::PolicyError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the service listens.
#[derive(Debug, Clone)]
pub enum Transport {
    /// One client on stdin/stdout; the service exits when stdin closes or on `exit`.
    Stdio,
    /// Any number of clients on a Unix domain socket created with mode 0600.
    Socket(PathBuf),
}

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub transport: Transport,
    pub framing: Framing,
    /// Policy file, directory or shipped profile name.
    pub policy: String,
    /// Template directory overriding the embedded templates (watched like the policy).
    pub templates: Option<PathBuf>,
    /// The store database.
    pub db: PathBuf,
    /// Root of the off-band document directory (default: `<tmp>/baton-<uid>`; `baton serve`
    /// passes `$BATON_HANDOFF_DIR`).
    pub handoff_dir: Option<PathBuf>,
    /// Largest message body accepted, in bytes.
    pub max_message: usize,
    /// Quiet period before a burst of file changes triggers a reload.
    pub debounce: Duration,
    /// Watch the policy and template directories.
    pub watch: bool,
    /// The periodic sweep of expired off-band documents (`None`: no sweep).
    pub gc: Option<GcSweep>,
}

impl ServeConfig {
    /// Defaults: Content-Length framing, 8 MiB messages, 200 ms debounce, watching on,
    /// the hourly document sweep of [`GcSweep::default`].
    pub fn new(transport: Transport, policy: impl Into<String>, db: impl Into<PathBuf>) -> Self {
        ServeConfig {
            transport,
            framing: Framing::ContentLength,
            policy: policy.into(),
            templates: None,
            db: db.into(),
            handoff_dir: None,
            max_message: DEFAULT_MAX_MESSAGE,
            debounce: Duration::from_millis(200),
            watch: true,
            gc: Some(GcSweep::default()),
        }
    }
}

/// Default message size limit: 8 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Policy(#[from] PolicyError),
    #[error("{path}: error: {what}: {reason}")]
    Socket {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
    #[error("{path}: error: cannot watch for policy changes: {reason}")]
    Watch { path: PathBuf, reason: String },
    #[error("error: cannot start the async runtime: {0}")]
    Runtime(String),
    #[error("error: I/O on {what}: {reason}")]
    Io { what: &'static str, reason: String },
}

/// Run the service until `exit`, end of input (stdio) or a termination signal. Blocks.
///
/// This builds its own multi-threaded runtime; process settings (the allocator's arenas,
/// signals' defaults, the umask) are left alone: the `baton serve` command tunes the
/// allocator itself before it calls this.
pub fn serve(cfg: ServeConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ServeError::Runtime(e.to_string()))?;
    rt.block_on(run(cfg))
}

/// The async body of [`serve`], for embedding in an existing runtime.
pub async fn run(cfg: ServeConfig) -> Result<(), ServeError> {
    let policies = Arc::new(PolicyHolder::load(
        &cfg.policy,
        cfg.templates.clone(),
        cfg.handoff_dir.clone(),
    )?);
    let shared = session::Shared::new(cfg.clone(), policies.clone());
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

async fn serve_socket(shared: Arc<session::Shared>, path: &Path) -> Result<(), ServeError> {
    let listener = bind(path)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| ServeError::Io {
            what: "signal handler",
            reason: e.to_string(),
        })?;
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, _)) => {
                        let (r, w) = stream.into_split();
                        let s = shared.clone();
                        // Reap finished connections so a long-lived server holds none of them.
                        while conns.try_join_next().is_some() {}
                        conns.spawn(async move {
                            session::run_connection(s, tokio::io::BufReader::new(r), w).await;
                        });
                    }
                    Err(e) => eprintln!("{}: warning: accept failed: {e}", path.display()),
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
