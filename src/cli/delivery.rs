//! Delivery commands: `baton render --deliver`, `baton gc`. Thin shells over
//! [`crate::deliver`].

use super::commands::{FAIL, OK};
use super::GcArgs;
use crate::deliver::{self, GcReport, HandoffLiveness, MemoryGrantStore, OffbandStore, Retention};
use crate::pipeline::Outcome;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Print to stdout; a closed pipe is not an error worth a panic.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// Parse an age such as `90s`, `30m`, `12h`, `7d` or `2w`.
pub(crate) fn parse_age(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!("invalid age {s:?}: expected a whole number with a unit s, m, h, d or w (e.g. 7d)")
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
}

/// `baton render --deliver`: write the off-band handoff (or fall back to inline), print the
/// first-turn prompt on stdout and what happened on stderr.
pub(crate) fn render_deliver(
    mut outcome: Outcome,
    handoff_dir: Option<PathBuf>,
    thread: &str,
) -> u8 {
    let store = OffbandStore::new(handoff_dir);
    // `render` keeps no database: the grant is issued (so an unusable document is caught)
    // but not recorded; `baton dispatch` records it in the store.
    let mut grants = MemoryGrantStore::new();
    let delivered = deliver::deliver(&mut outcome, &store, thread, &mut grants);
    if let Some(reason) = &delivered.fallback_reason {
        eprintln!(
            "warning: off-band delivery failed, so the handoff is delivered inline: {reason}"
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

/// `baton gc`: remove expired off-band handoff directories.
pub(crate) fn gc(a: GcArgs) -> u8 {
    let store = OffbandStore::new(a.handoff_dir.clone());
    let retention = Retention {
        max_age: Some(a.max_age),
        max_per_thread: Some(a.keep),
    };
    let live = |_: &str, _: &str| HandoffLiveness::Live;
    match deliver::gc(&store, &retention, &live, SystemTime::now(), a.dry_run) {
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
