//! `baton replay`: decide every logged decision again and report those that differ. A thin
//! shell over [`crate::store::replay`].

use super::commands::{FAIL, OK};
use super::store::db_path;
use crate::policy::Policy;
use crate::store::{ReplayFilter, Store};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The database (default: $BATON_DB, else ./baton.db); it must exist.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Replay only this thread's decisions.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Replay only the decisions for run N.
    #[arg(long, value_name = "N")]
    pub run: Option<u32>,
    /// Where the policies of the logged sha256s are, besides the shipped profiles: the
    /// directory as a set, each subdirectory as a set, and each `*.policy` file on its own.
    #[arg(long, value_name = "DIR")]
    pub policy_dir: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Every policy set found under `dir` that checks (the ones that do not cannot have made a
/// logged decision, and are passed over with a note on stderr).
fn policies_in(dir: &Path) -> Result<Vec<Policy>, String> {
    let mut specs = vec![dir.to_path_buf()];
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: error: {e}", dir.display()))?;
    let mut more: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir() || (p.is_file() && p.extension().and_then(|e| e.to_str()) == Some("policy"))
        })
        .collect();
    more.sort();
    specs.extend(more);
    let mut out = Vec::new();
    for spec in specs {
        match crate::policy::load(&spec.display().to_string()) {
            Ok(p) => out.push(p),
            Err(_) if spec != dir => {
                eprintln!(
                    "note: {} does not check; its decisions cannot be replayed with it",
                    spec.display()
                )
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

pub(crate) fn replay(a: ReplayArgs) -> u8 {
    let db = db_path(a.db.as_deref()).0;
    if let Err(c) = super::dbcheck::require_existing(&db, "baton replay") {
        return c;
    }
    let store = match crate::store::DbUrl::parse(&db.to_string_lossy()) {
        crate::store::DbUrl::Sqlite(_) => match Store::open(&db) {
            Ok(s) => crate::store::Db::Sqlite(s),
            Err(e) => {
                eprintln!("{}", super::errors::store_error(&e));
                return FAIL;
            }
        },
        crate::store::DbUrl::Postgres(_) => match super::store::open_db_existing(&db) {
            Ok(s) => s,
            Err(c) => return c,
        },
    };
    let mut policies = Vec::new();
    for dir in &a.policy_dir {
        match policies_in(dir) {
            Ok(p) => policies.extend(p),
            Err(e) => {
                eprintln!("{e}");
                return FAIL;
            }
        }
    }
    let filter = ReplayFilter {
        thread: a.thread.clone(),
        run: a.run,
    };
    let report = match store.replay(&filter, &policies) {
        Ok(r) => r,
        Err(e) => return super::store::fail_db(e),
    };
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        for d in &report.differences {
            let short: String = d.policy_sha256.chars().take(12).collect();
            outln!(
                "differs: thread {} run {} ({}, policy {} sha256 {short}, log row {}): {}",
                d.thread,
                d.run,
                d.operation,
                d.policy,
                d.id,
                d.reason
            );
            if let (Some(l), Some(r)) = (&d.logged, &d.replayed) {
                outln!("  logged:   {l}");
                outln!("  replayed: {r}");
            }
        }
        for s in &report.skipped {
            outln!(
                "skipped: thread {} run {} (log row {}): {}",
                s.thread,
                s.run,
                s.id,
                s.reason
            );
        }
        outln!(
            "{} replayed, {} differ, {} skipped",
            report.checked,
            report.differences.len(),
            report.skipped.len()
        );
    }
    if report.differences.is_empty() {
        OK
    } else {
        FAIL
    }
}
