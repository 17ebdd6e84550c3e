//! Garbage collection of off-band handoff directories.
//!
//! Only directories that contain baton's marker file are candidates; symlinks are never
//! followed and anything without the marker is left alone. A candidate is removed when
//! its handoff is superseded or unknown (thread or handoff deleted), when its
//! `handoff.md` is older than `max_age`, or when it is beyond the newest
//! `max_per_thread` of the handoffs of its thread that survive the other rules.
//!
//! It also removes what an interrupted write left behind ([`super::leftovers`]): stale temp
//! files in handoff directories, marker-less handoff directories that hold nothing but stale
//! temp files (or are empty and older than the grace period), and empty thread directories
//! older than the grace period.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::leftovers::{self, Unmarked};
use super::offband::{check_private_dir, OffbandStore, DOCUMENT_FILE, MARKER_FILE};
use super::DeliveryError;

/// Retention limits; `None` means no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Remove handoffs whose document is older than this.
    pub max_age: Option<Duration>,
    /// Keep at most this many (the newest) handoffs per thread.
    pub max_per_thread: Option<usize>,
}

/// What the store says about a handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffLiveness {
    /// The newest handoff of a live thread (or otherwise still wanted).
    Live,
    /// A newer handoff replaced it.
    Superseded,
    /// The thread or the handoff is no longer known.
    Unknown,
}

/// The outcome of a GC pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Whether this was a dry run (nothing deleted).
    pub dry_run: bool,
    /// Handoff directories removed (or, on a dry run, that would be removed), and the
    /// leftovers of interrupted writes: stale temp files, marker-less and empty directories.
    pub removed: Vec<PathBuf>,
    /// Number of baton handoff directories kept.
    pub kept: usize,
    /// Why each removed directory was removed.
    pub reasons: Vec<(PathBuf, String)>,
    /// Entries under the root that were left alone because baton did not create them.
    pub skipped: Vec<(PathBuf, String)>,
    /// Problems that made the pass keep something it might have removed (a store that could
    /// not be asked whether a handoff is still live). Never deletes on doubt.
    pub warnings: Vec<String>,
}

struct Candidate {
    thread: String,
    path: PathBuf,
    mtime: SystemTime,
    reason: Option<String>,
}

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p)
        .map(|m| m.file_type().is_dir())
        .unwrap_or(false)
}

fn is_real_file(p: &Path) -> bool {
    fs::symlink_metadata(p)
        .map(|m| m.file_type().is_file())
        .unwrap_or(false)
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<(String, PathBuf)>, DeliveryError> {
    let rd = fs::read_dir(dir).map_err(|e| DeliveryError::from_io(dir, e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| DeliveryError::from_io(dir, e))?;
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    out.sort();
    Ok(out)
}

/// Remove a handoff directory, its marker last: a pass killed part-way leaves a directory
/// that still carries the marker, so the next pass finds it and finishes the job (removing the
/// marker first would leave files GC must treat as foreign). `remove_dir_all` on an entry
/// does not follow symlinks.
fn remove_handoff_dir(dir: &Path) -> Result<(), DeliveryError> {
    for (name, path) in read_dir_sorted(dir)? {
        if name == MARKER_FILE {
            continue;
        }
        let is_dir = fs::symlink_metadata(&path)
            .map(|m| m.file_type().is_dir())
            .unwrap_or(false);
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DeliveryError::from_io(&path, e)),
        }
    }
    match fs::remove_file(dir.join(MARKER_FILE)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(DeliveryError::from_io(dir, e)),
    }
    fs::remove_dir(dir).map_err(|e| DeliveryError::from_io(dir, e))
}

/// Remember the thread directory of a removed handoff directory, to remove it if now empty.
fn note_touched(touched: &mut Vec<PathBuf>, removed: &Path) {
    if let Some(parent) = removed.parent() {
        if !touched.iter().any(|t| t == parent) {
            touched.push(parent.to_path_buf());
        }
    }
}

fn describe(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// [`gc`] with liveness from a lookup that can fail (the SQLite store): a handoff whose
/// liveness cannot be read is kept, and the first such error is reported in
/// [`GcReport::warnings`]. The CLI's `baton gc` and the service's periodic sweep use this.
pub fn gc_checked<E: std::fmt::Display>(
    store: &OffbandStore,
    retention: &Retention,
    lookup: &dyn Fn(&str, &str) -> Result<HandoffLiveness, E>,
    now: SystemTime,
    dry_run: bool,
) -> Result<GcReport, DeliveryError> {
    let first_error: std::cell::RefCell<Option<E>> = std::cell::RefCell::new(None);
    let live = |thread: &str, handoff: &str| {
        lookup(thread, handoff).unwrap_or_else(|e| {
            first_error.borrow_mut().get_or_insert(e);
            HandoffLiveness::Live
        })
    };
    let mut report = gc(store, retention, &live, now, dry_run)?;
    if let Some(e) = first_error.into_inner() {
        report.warnings.push(format!(
            "kept handoffs the store could not be asked about: {e}"
        ));
    }
    Ok(report)
}

/// Remove expired handoff directories under `store`'s root (see module docs).
pub fn gc(
    store: &OffbandStore,
    retention: &Retention,
    live: &dyn Fn(&str, &str) -> HandoffLiveness,
    now: SystemTime,
    dry_run: bool,
) -> Result<GcReport, DeliveryError> {
    let mut report = GcReport {
        dry_run,
        ..GcReport::default()
    };
    if !store.check_root()? {
        return Ok(report);
    }

    let mut candidates: Vec<Candidate> = Vec::new();
    let mut touched_threads: Vec<PathBuf> = Vec::new();
    for (thread, thread_dir) in read_dir_sorted(store.root())? {
        if !is_real_dir(&thread_dir) {
            report
                .skipped
                .push((thread_dir, "not a directory (or a symlink)".to_string()));
            continue;
        }
        if let Err(e) = check_private_dir(&thread_dir) {
            report.skipped.push((thread_dir, e.to_string()));
            continue;
        }
        let entries = read_dir_sorted(&thread_dir)?;
        if entries.is_empty() {
            if let Unmarked::Interrupted { reason, .. } = leftovers::unmarked_dir(&thread_dir, now)?
            {
                if !dry_run {
                    fs::remove_dir(&thread_dir)
                        .map_err(|e| DeliveryError::from_io(&thread_dir, e))?;
                }
                report.removed.push(thread_dir.clone());
                report.reasons.push((thread_dir, reason));
            }
            continue;
        }
        for (handoff, dir) in entries {
            if !is_real_dir(&dir) {
                report
                    .skipped
                    .push((dir, "not a directory (or a symlink)".to_string()));
                continue;
            }
            if !is_real_file(&dir.join(MARKER_FILE)) {
                match leftovers::unmarked_dir(&dir, now)? {
                    Unmarked::Foreign(why) => report.skipped.push((dir, why)),
                    Unmarked::Interrupted { reason, temps } => {
                        if !dry_run {
                            leftovers::remove_unmarked(&dir, &temps)?;
                            note_touched(&mut touched_threads, &dir);
                        }
                        report.removed.push(dir.clone());
                        report.reasons.push((dir, reason));
                    }
                }
                continue;
            }
            // Temp files of interrupted writes in a live directory (the directory itself may
            // still be removed below, which takes them too).
            for (temp, reason) in leftovers::stale_temps(&dir, now)? {
                if !dry_run {
                    match fs::remove_file(&temp) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(DeliveryError::from_io(&temp, e)),
                    }
                }
                report.removed.push(temp.clone());
                report.reasons.push((temp, reason));
            }
            let mtime = [dir.join(DOCUMENT_FILE), dir.join(MARKER_FILE)]
                .iter()
                .find_map(|p| {
                    fs::symlink_metadata(p)
                        .ok()
                        .filter(|m| m.file_type().is_file())
                        .and_then(|m| m.modified().ok())
                })
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let reason = match live(&thread, &handoff) {
                HandoffLiveness::Superseded => Some("superseded by a newer handoff".to_string()),
                HandoffLiveness::Unknown => Some("thread or handoff no longer exists".to_string()),
                HandoffLiveness::Live => match retention.max_age {
                    Some(max) => {
                        let age = now.duration_since(mtime).unwrap_or(Duration::ZERO);
                        (age > max).then(|| {
                            format!("older than {} (age {})", describe(max), describe(age))
                        })
                    }
                    None => None,
                },
            };
            candidates.push(Candidate {
                thread: thread.clone(),
                path: dir,
                mtime,
                reason,
            });
        }
    }

    if let Some(max) = retention.max_per_thread {
        // Newest first; ties broken by path for determinism.
        let mut order: Vec<&mut _> = candidates.iter_mut().collect();
        order.sort_by(|ca, cb| {
            ca.thread
                .cmp(&cb.thread)
                .then(cb.mtime.cmp(&ca.mtime))
                .then(ca.path.cmp(&cb.path))
        });
        let mut seen: Option<(String, usize)> = None;
        for c in order {
            if c.reason.is_some() {
                continue;
            }
            let count = match &mut seen {
                Some((t, n)) if *t == c.thread => {
                    *n = n.saturating_add(1);
                    *n
                }
                _ => {
                    seen = Some((c.thread.clone(), 1));
                    1
                }
            };
            if count > max {
                c.reason = Some(format!(
                    "beyond the newest {max} handoff(s) of thread {}",
                    c.thread
                ));
            }
        }
    }

    for c in candidates {
        match c.reason {
            None => report.kept = report.kept.saturating_add(1),
            Some(reason) => {
                if !dry_run {
                    remove_handoff_dir(&c.path)?;
                    note_touched(&mut touched_threads, &c.path);
                }
                report.removed.push(c.path.clone());
                report.reasons.push((c.path, reason));
            }
        }
    }
    // Remove thread directories that are now empty (remove_dir fails if not empty).
    for t in touched_threads {
        let _ = fs::remove_dir(&t);
    }
    Ok(report)
}
