//! What an interrupted write leaves in the off-band root, and when GC may remove it.
//!
//! A write killed (`kill -9`, power loss) part-way can leave:
//!
//! * a temp file `.<name>.tmp.<pid>.<counter>.<nanos>` in a handoff directory (killed between
//!   creating the temp file and renaming it);
//! * a handoff directory without the `.baton-handoff` marker (killed before the marker's
//!   rename), empty or holding only the marker's temp file;
//! * an empty thread directory (killed between creating it and creating the handoff
//!   directory).
//!
//! GC removes these, and only these. A temp file is *stale* when it has baton's exact temp
//! naming, is a regular file, and either the process named in it is gone or it is older than
//! [`STALE_GRACE`]. A directory without the marker is collected only when everything in it
//! is such a stale temp file, or when it is empty and older than [`STALE_GRACE`]. A directory
//! holding anything else (a foreign file, a subdirectory, a symlink, a file whose name is not
//! baton's temp naming) is never touched.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::offband::parse_temp_name;
use super::DeliveryError;

/// How long a write may take before its temp file (or the empty directory it created) counts
/// as left over even though the process that made it may still run. A write takes
/// milliseconds; the margin covers a stopped process or a slow disk.
pub const STALE_GRACE: Duration = Duration::from_secs(600);

/// Why `path` (a file in a handoff directory) is a stale temp file of baton's, or `None` when
/// it is not one (not baton's naming, not a regular file, or a write that may still be
/// running).
pub(crate) fn stale_temp(path: &Path, now: SystemTime) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let pid = parse_temp_name(name)?;
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let age = meta
        .modified()
        .ok()
        .and_then(|m| now.duration_since(m).ok())
        .unwrap_or(Duration::ZERO);
    if !process_exists(pid) {
        Some(format!(
            "temp file of an interrupted write (process {pid} is gone)"
        ))
    } else if age > STALE_GRACE {
        Some(format!(
            "temp file of an interrupted write (older than {}s)",
            STALE_GRACE.as_secs()
        ))
    } else {
        None
    }
}

/// The stale temp files directly in `dir`, with the reason for each.
pub(crate) fn stale_temps(
    dir: &Path,
    now: SystemTime,
) -> Result<Vec<(PathBuf, String)>, DeliveryError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DeliveryError::from_io(dir, e))? {
        let entry = entry.map_err(|e| DeliveryError::from_io(dir, e))?;
        let path = entry.path();
        if let Some(reason) = stale_temp(&path, now) {
            out.push((path, reason));
        }
    }
    out.sort();
    Ok(out)
}

/// What to do with a directory that has no marker.
pub(crate) enum Unmarked {
    /// Not left by baton (or possibly still being written): leave it alone.
    Foreign(String),
    /// Left by an interrupted write: remove these temp files, then the directory.
    Interrupted { reason: String, temps: Vec<PathBuf> },
}

/// Classify a real directory without the marker (see the module docs for the rule).
pub(crate) fn unmarked_dir(dir: &Path, now: SystemTime) -> Result<Unmarked, DeliveryError> {
    let mut temps = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DeliveryError::from_io(dir, e))? {
        let entry = entry.map_err(|e| DeliveryError::from_io(dir, e))?;
        let path = entry.path();
        if stale_temp(&path, now).is_none() {
            let what = if parse_temp_name(&entry.file_name().to_string_lossy()).is_some() {
                "a write in it may still be running"
            } else {
                "not created by baton"
            };
            return Ok(Unmarked::Foreign(format!(
                "no {} marker; {what}",
                super::MARKER_FILE
            )));
        }
        temps.push(path);
    }
    if temps.is_empty() {
        let age = fs::symlink_metadata(dir)
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or(Duration::ZERO);
        if age <= STALE_GRACE {
            return Ok(Unmarked::Foreign(format!(
                "no {} marker; empty, and newer than {}s (a write may be starting)",
                super::MARKER_FILE,
                STALE_GRACE.as_secs()
            )));
        }
        return Ok(Unmarked::Interrupted {
            reason: format!(
                "empty directory left by an interrupted write (older than {}s)",
                STALE_GRACE.as_secs()
            ),
            temps,
        });
    }
    temps.sort();
    Ok(Unmarked::Interrupted {
        reason: "left by a write interrupted before its marker (only stale temp files)".into(),
        temps,
    })
}

/// Remove the temp files, then the (now empty) directory. `remove_dir` fails rather than
/// delete anything that appeared in the meantime.
pub(crate) fn remove_unmarked(dir: &Path, temps: &[PathBuf]) -> Result<(), DeliveryError> {
    for t in temps {
        match fs::remove_file(t) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DeliveryError::from_io(t, e)),
        }
    }
    fs::remove_dir(dir).map_err(|e| DeliveryError::from_io(dir, e))
}

/// Whether a process with this id exists (on this host's pid namespace). A process owned by
/// someone else exists too (`EPERM`).
#[allow(unsafe_code)]
fn process_exists(pid: u32) -> bool {
    // Out of range: not a pid this host can have; count it as existing (keep the file until
    // the grace period passes) rather than guess.
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists; it sends nothing.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
