//! `baton serve`: run the JSON-RPC sidecar (see docs/service.md).

use super::ServeArgs;
use crate::serve::{self, Framing, ServeConfig, Transport};

pub(crate) fn serve(a: ServeArgs) -> u8 {
    let transport = match (a.stdio, a.socket) {
        (true, None) => Transport::Stdio,
        (false, Some(p)) => Transport::Socket(p),
        _ => {
            eprintln!("error: give exactly one of --stdio or --socket PATH");
            return super::commands::USAGE;
        }
    };
    let Some(framing) = Framing::parse(&a.framing) else {
        eprintln!(
            "error: --framing must be `content-length` or `lines`, not `{}`",
            a.framing
        );
        return super::commands::USAGE;
    };
    if a.max_message == 0 {
        eprintln!("error: --max-message must be at least 1 byte");
        return super::commands::USAGE;
    }
    let db = super::store::db_path(a.db.as_deref()).0;
    // Built with feature `postgres`, the service runs on a `postgres://` URL too; without it,
    // the URL is refused saying how to build baton with it.
    #[cfg(not(feature = "postgres"))]
    if let Err(c) = super::store::refuse_postgres(&db) {
        return c;
    }
    let mut cfg = ServeConfig::new(transport, a.policy, db);
    cfg.framing = framing;
    cfg.templates = a.templates;
    cfg.handoff_dir = super::handoff_root(a.handoff_dir);
    cfg.max_message = a.max_message;
    if a.max_connections == 0 {
        eprintln!("error: --max-connections must be at least 1");
        return super::commands::USAGE;
    }
    cfg.max_connections = a.max_connections;
    if a.db_pool == 0 {
        eprintln!("error: --db-pool must be at least 1");
        return super::commands::USAGE;
    }
    if a.db_pool_timeout.is_zero() {
        eprintln!("error: --db-pool-timeout must be longer than zero");
        return super::commands::USAGE;
    }
    cfg.db_pool = a.db_pool;
    cfg.db_pool_timeout = a.db_pool_timeout;
    if a.message_timeout.is_zero() {
        eprintln!("error: --message-timeout must be longer than zero");
        return super::commands::USAGE;
    }
    cfg.message_timeout = a.message_timeout;
    cfg.debounce = std::time::Duration::from_millis(a.debounce_ms);
    cfg.watch = !a.no_watch;
    if a.gc_every.is_zero() {
        eprintln!("error: --gc-every must be longer than zero (use --no-gc to turn the sweep off)");
        return super::commands::USAGE;
    }
    cfg.gc = (!a.no_gc).then_some(crate::serve::GcSweep {
        every: a.gc_every,
        retention: crate::deliver::Retention {
            max_age: Some(a.gc_max_age),
            max_per_thread: Some(a.gc_keep),
        },
    });
    cfg.decision_log = a
        .decision_log
        .as_deref()
        .map(|p| crate::serve::DecisionLogConfig {
            target: crate::serve::LogTarget::parse(p),
            max_bytes: a.decision_log_max_bytes,
            keep: a.decision_log_keep,
            trace: a.decision_log_trace,
        });
    if a.metrics_allow_remote && a.metrics.is_none() {
        eprintln!("error: --metrics-allow-remote needs --metrics ADDR");
        return super::commands::USAGE;
    }
    cfg.metrics = a.metrics.map(|addr| crate::serve::MetricsEndpoint {
        addr,
        allow_remote: a.metrics_allow_remote,
    });
    cfg.shadow = a.shadow;
    cfg.settings = flags();
    tune_malloc();
    match serve::serve(cfg) {
        Ok(()) => super::commands::OK,
        Err(e) => {
            eprintln!("{}", super::errors::serve_error(&e));
            super::commands::FAIL
        }
    }
}

/// The service's settings as this command names them: its flags.
fn flags() -> crate::serve::SettingNames {
    crate::serve::SettingNames {
        db: "--db".into(),
        db_pool: "--db-pool".into(),
        db_pool_timeout: "--db-pool-timeout".into(),
        decision_log_stdout: "--decision-log -".into(),
        max_connections: "serve --max-connections".into(),
        max_message: "serve --max-message".into(),
        message_timeout: "serve --message-timeout".into(),
        metrics_allow_remote: "--metrics-allow-remote".into(),
        stdio: "--stdio".into(),
    }
}

/// Tune glibc's malloc for a long-running server, each setting unless the environment sets
/// it itself (glibc's `MALLOC_*_` variables win). No-op on other platforms and C libraries.
/// The command does this, not the library: an embedding app owns its process's allocator.
///
/// * **Arenas: one per core** (at least 2), not glibc's 8 per core. Each arena keeps the memory
///   of the largest requests it served; with library work spread over tokio's threads, the
///   server's resident memory then climbs in steps for a long time (docs/performance.md has
///   the measurements). No more threads than cores run at once anyway.
/// * **Trim threshold 4 MiB, mmap threshold 1 MiB** (glibc's defaults start at 128 KiB and
///   move with the largest block freed). A request builds and frees a few hundred KiB; at the
///   default threshold a thread's arena gave that back to the kernel after nearly every
///   request (`madvise`) and faulted it in again on the next one, about 5% of the server's
///   CPU per inline `explain` (benches/serve_cpu.rs). An arena now keeps up to 4 MiB free
///   at its top; a block of 1 MiB or more is mapped on its own and unmapped when freed.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = i32::try_from(cores.max(2)).unwrap_or(i32::MAX);
        let settings = [
            ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, arenas),
            ("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, 4 << 20),
            ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 1 << 20),
        ];
        for (env, param, value) in settings {
            if std::env::var_os(env).is_none() {
                #[allow(unsafe_code)]
                // SAFETY: mallopt(3) only changes an allocator tuning parameter; it takes no
                // pointers.
                unsafe {
                    libc::mallopt(param, value);
                }
            }
        }
    }
}
