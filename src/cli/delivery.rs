//! Delivery commands: `baton render --deliver`, `baton gc`, `baton pregrant check`. Thin
//! shells over [`crate::deliver`] and the store.

use super::commands::{FAIL, OK, USAGE};
use super::store::db_path;
use super::{GcArgs, PregrantCheckArgs};
use crate::deliver::{
    self, CheckRequest, GcReport, HandoffLiveness, MemoryGrantStore, OffbandStore, PathArg,
    Retention,
};
use crate::pipeline::Outcome;
use crate::store::Store;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Parse an age such as `90s`, `30m`, `12h`, `7d`, `2w` or `1day 12h` (humantime's syntax).
pub(crate) fn parse_age(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("invalid age {s:?}: {e}"))
}

/// `baton render --deliver`: write the off-band handoff (or fall back to inline), print the
/// first-turn prompt on stdout and what happened on stderr.
pub(crate) fn render_deliver(
    mut outcome: Outcome,
    handoff_dir: Option<PathBuf>,
    thread: &str,
) -> u8 {
    let store = OffbandStore::new(super::handoff_root(handoff_dir));
    // `render` keeps no database: the grant is issued (so an unusable document is caught)
    // but not recorded; `baton dispatch` records it in the store.
    let mut grants = MemoryGrantStore::new();
    let delivered = deliver::deliver(&mut outcome, &store, thread, &mut grants);
    if let Some(reason) = &delivered.fallback_reason {
        eprintln!(
            "{}",
            super::errors::delivery_fallback(reason, delivered.fallback_kind)
        );
    }
    match (&delivered.document_path, &delivered.grant) {
        (Some(path), Some(g)) => eprintln!(
            "delivered off-band: {}\npre-grant: {} of {} on turn {} of thread {} (not recorded: render keeps no database)",
            path.display(),
            g.tool,
            g.path.display(),
            g.run,
            g.thread
        ),
        (Some(path), None) => eprintln!("delivered off-band: {}", path.display()),
        (None, _) if delivered.fallback_reason.is_none() => eprintln!("delivered inline"),
        (None, _) => {}
    }
    if let Some(r) = &outcome.rendered {
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), "{}", r.inline);
        if !r.inline.ends_with('\n') {
            outln!();
        }
    }
    OK
}

fn print_gc(report: &GcReport, json: bool) {
    if json {
        let pairs = |v: &[(PathBuf, String)]| -> Vec<serde_json::Value> {
            v.iter()
                .map(|(p, r)| serde_json::json!({ "path": p, "reason": r }))
                .collect()
        };
        let out = serde_json::json!({
            "dry_run": report.dry_run,
            "removed": pairs(&report.reasons),
            "kept": report.kept,
            "skipped": pairs(&report.skipped),
            "warnings": report.warnings,
        });
        outln!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for (path, reason) in &report.reasons {
        outln!("{verb} {} ({reason})", path.display());
    }
    for (path, reason) in &report.skipped {
        outln!("left alone {} ({reason})", path.display());
    }
    outln!(
        "{verb} {} handoff(s), kept {}, left {} other entr{} alone",
        report.removed.len(),
        report.kept,
        report.skipped.len(),
        if report.skipped.len() == 1 {
            "y"
        } else {
            "ies"
        }
    );
}

/// `baton gc`: remove expired off-band handoff directories; with a store, also those whose
/// handoff was superseded or whose thread was deleted.
pub(crate) fn gc(a: GcArgs) -> u8 {
    let offband = OffbandStore::new(super::handoff_root(a.handoff_dir.clone()));
    let retention = Retention {
        max_age: Some(a.max_age),
        max_per_thread: Some(a.keep),
    };
    let (db, defaulted) = db_path(a.db.as_deref());
    let store = if defaulted && !db.exists() {
        eprintln!(
            "note: no database at {}; superseded and deleted handoffs are not detected (give --db)",
            db.display()
        );
        None
    } else {
        let opened = match crate::store::DbUrl::parse(&db.to_string_lossy()) {
            crate::store::DbUrl::Postgres(_) => super::store::open_db_existing(&db),
            crate::store::DbUrl::Sqlite(_) => {
                open_existing(&db, "baton gc").map(crate::store::Db::Sqlite)
            }
        };
        match opened {
            Ok(s) => Some(s),
            Err(code) => return code,
        }
    };
    // A store error keeps the handoff (never delete on doubt) and is reported after the pass.
    // With a store, liveness is read under its write lock (`Store::collect_documents`), so a
    // dispatch in progress in another process cannot lose its document.
    let result = match store {
        Some(mut s) => s.collect_documents(&offband, &retention, SystemTime::now(), a.dry_run),
        None => {
            let lookup =
                |_: &str, _: &str| Ok::<_, std::convert::Infallible>(HandoffLiveness::Live);
            deliver::gc_checked(&offband, &retention, &lookup, SystemTime::now(), a.dry_run)
        }
    };
    if let Ok(report) = &result {
        for w in &report.warnings {
            eprintln!("warning: {w}");
        }
    }
    match result {
        Ok(report) => {
            print_gc(&report, a.json);
            OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            FAIL
        }
    }
}

/// Open an existing database; never create one (a fresh, empty database would deny every
/// grant and make every handoff look deleted).
fn open_existing(db: &Path, command: &str) -> Result<Store, u8> {
    super::dbcheck::require_existing(db, command)?;
    Store::open_with_busy_timeout(db, super::store::busy_timeout()).map_err(|e| {
        eprintln!("{}", super::errors::store_error(&e));
        FAIL
    })
}

/// The grants of `--db`: a SQLite file, or (feature `postgres`) a PostgreSQL database, where a
/// one-shot grant is used by one conditional update that servers sharing it cannot both win.
fn grant_store(db: &Path) -> Result<Box<dyn deliver::GrantStore>, u8> {
    match crate::store::DbUrl::parse(&db.to_string_lossy()) {
        #[cfg(feature = "postgres")]
        crate::store::DbUrl::Postgres(url) => crate::store::pg::PgStore::open_existing(&url)
            .map(|s| Box::new(s) as Box<dyn deliver::GrantStore>)
            .map_err(|e| {
                eprintln!("{e}");
                FAIL
            }),
        _ => open_existing(db, "baton pregrant check")
            .map(|s| Box::new(s) as Box<dyn deliver::GrantStore>),
    }
}

/// `baton pregrant check`: allow (exit 0, the grant is used) or deny (exit 1), with the reason.
pub(crate) fn pregrant_check(a: PregrantCheckArgs) -> u8 {
    let args = match (&a.path, &a.args) {
        (Some(p), None) => PathArg::Path(p.clone()),
        (None, Some(json)) => match deliver::parse_tool_args(json) {
            Ok(v) => PathArg::Args(v),
            Err(e) => {
                eprintln!("--args: error: {e}");
                return USAGE;
            }
        },
        _ => {
            eprintln!("error: give the requested path with --path P or the tool's arguments with --args JSON");
            return USAGE;
        }
    };
    let (db, _) = db_path(a.db.as_deref());
    let mut store = match grant_store(&db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let req = CheckRequest {
        thread: a.thread.clone(),
        run: a.run,
        tool: a.tool.clone(),
        args,
    };
    match deliver::check(store.as_mut(), &req) {
        Ok(v) => {
            if a.json {
                outln!("{}", serde_json::to_string(&v).unwrap_or_default());
            } else {
                outln!("{}: {}", if v.allow { "allow" } else { "deny" }, v.reason);
            }
            if v.allow {
                OK
            } else {
                FAIL
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            FAIL
        }
    }
}
