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
    let mut cfg = ServeConfig::new(
        transport,
        a.policy,
        super::store::db_path(a.db.as_deref()).0,
    );
    cfg.framing = framing;
    cfg.templates = a.templates;
    cfg.handoff_dir = super::handoff_root(a.handoff_dir);
    cfg.max_message = a.max_message;
    if a.max_connections == 0 {
        eprintln!("error: --max-connections must be at least 1");
        return super::commands::USAGE;
    }
    cfg.max_connections = a.max_connections;
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
    bound_malloc_arenas();
    match serve::serve(cfg) {
        Ok(()) => super::commands::OK,
        Err(e) => {
            eprintln!("{e}");
            super::commands::FAIL
        }
    }
}

/// Cap glibc's malloc arenas at one per core (at least 2), unless the environment sets
/// `MALLOC_ARENA_MAX` itself. glibc lets threads open up to 8 arenas per core, and each arena
/// keeps the memory of the largest requests it served; with library work spread over tokio's
/// blocking-pool threads, the server's resident memory then climbs in steps for a long time
/// (docs/performance.md has the measurements). One arena per core keeps it flat: no more
/// threads than cores run at once anyway. No-op on other platforms and C libraries. The
/// command does this, not the library: an embedding app owns its process's allocator.
fn bound_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = i32::try_from(cores.max(2)).unwrap_or(i32::MAX);
        #[allow(unsafe_code)]
        // SAFETY: mallopt(3) only changes an allocator tuning parameter; it takes no pointers.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
