//! Off-band handoff documents: a per-user private directory holding one directory per
//! handoff, written atomically.
//!
//! Layout: `<root>/<thread id>/<handoff id>/{.baton-handoff, handoff.md, inline.md, handoff.json}`.
//!
//! Ids are used verbatim as path components; they are *validated*, never escaped. Every
//! function that touches the filesystem rejects an invalid id with
//! [`DeliveryError::InvalidId`]; [`OffbandStore::document_path`] is pure and does not
//! validate, so call [`validate_id`] first if the ids come from outside.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::DeliveryError;

pub use crate::ids::DOCUMENT_FILE;
/// The marker file baton writes into every handoff directory it creates; GC only ever
/// removes directories containing it.
pub const MARKER_FILE: &str = ".baton-handoff";

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The off-band document store rooted at a private directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffbandStore {
    root: PathBuf,
}

pub use crate::ids::{canonical_root, default_root};

/// Check that `id` can be used as a single path component ([`crate::ids::validate_id`]).
pub fn validate_id(kind: &'static str, id: &str) -> Result<(), DeliveryError> {
    crate::ids::validate_id(kind, id).map_err(DeliveryError::from)
}

impl OffbandStore {
    /// A store rooted at `root`, or at `ids::default_root` when `None`.
    ///
    /// The root is held in canonical form (see `ids::canonical_root`), so every path the store
    /// hands out (the decision's `delivery.document`, the first-turn prompt, the pre-grant)
    /// is the one `pregrant check` allows, even when the root sits below a symlinked
    /// directory such as macOS's `/tmp -> /private/tmp`.
    pub fn new(root: Option<PathBuf>) -> Self {
        OffbandStore {
            root: canonical_root(root.unwrap_or_else(default_root)),
        }
    }

    /// Same rule as the free function `ids::default_root`.
    pub fn default_root() -> PathBuf {
        default_root()
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<thread>/<handoff>`; pure, no IO, no validation.
    pub fn handoff_dir(&self, thread_id: &str, handoff_id: &str) -> PathBuf {
        self.root.join(thread_id).join(handoff_id)
    }

    /// `<root>/<thread>/<handoff>/handoff.md`; pure, no IO, no validation (see module docs).
    pub fn document_path(&self, thread_id: &str, handoff_id: &str) -> PathBuf {
        self.handoff_dir(thread_id, handoff_id).join(DOCUMENT_FILE)
    }

    /// Write `files` (name, contents) into the handoff directory and return the path of
    /// `handoff.md`.
    ///
    /// Creates the root, thread and handoff directories with mode 0700 if missing and
    /// refuses any of them that is a symlink, not a directory, owned by another user, or
    /// writable by group/others. Writes the marker file first, then each file atomically
    /// (temp file created exclusively with mode 0600, fsync, rename); the directory is
    /// fsynced after the marker and once more after the last file.
    pub fn write(
        &self,
        thread_id: &str,
        handoff_id: &str,
        files: &[(&str, &[u8])],
    ) -> Result<PathBuf, DeliveryError> {
        validate_id("thread id", thread_id)?;
        validate_id("handoff id", handoff_id)?;
        for (name, _) in files {
            validate_id("file name", name)?;
            if *name == MARKER_FILE {
                return Err(DeliveryError::InvalidId {
                    kind: "file name",
                    id: name.to_string(),
                    why: "is reserved for the baton marker file",
                });
            }
            if name.starts_with('.') {
                return Err(DeliveryError::InvalidId {
                    kind: "file name",
                    id: name.to_string(),
                    why: "must not start with `.`",
                });
            }
        }

        self.ensure_root()?;
        let thread_dir = self.root.join(thread_id);
        ensure_private_dir(&thread_dir)?;
        let handoff_dir = thread_dir.join(handoff_id);
        ensure_private_dir(&handoff_dir)?;

        let marker = format!("thread: {thread_id}\nhandoff: {handoff_id}\n");
        // The marker's rename is made durable first, so a directory holding baton's files
        // always carries the marker GC looks for; the files' renames share one directory
        // fsync at the end.
        atomic_write(&handoff_dir, MARKER_FILE, marker.as_bytes())?;
        sync_dir(&handoff_dir)?;
        for (name, contents) in files {
            atomic_write(&handoff_dir, name, contents)?;
        }
        sync_dir(&handoff_dir)?;
        Ok(handoff_dir.join(DOCUMENT_FILE))
    }

    /// Create the root (and missing parents) with mode 0700 and check it is safe.
    pub fn ensure_root(&self) -> Result<(), DeliveryError> {
        match fs::symlink_metadata(&self.root) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                DirBuilder::new()
                    .recursive(true)
                    .mode(DIR_MODE)
                    .create(&self.root)
                    .map_err(|e| DeliveryError::from_io(&self.root, e))?;
                fs::set_permissions(&self.root, fs::Permissions::from_mode(DIR_MODE))
                    .map_err(|e| DeliveryError::from_io(&self.root, e))?;
            }
            Err(e) => return Err(DeliveryError::from_io(&self.root, e)),
        }
        check_private_dir(&self.root)
    }

    /// Check that the existing root is safe, without creating it. `Ok(false)` if absent.
    pub fn check_root(&self) -> Result<bool, DeliveryError> {
        match fs::symlink_metadata(&self.root) {
            Ok(_) => check_private_dir(&self.root).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(DeliveryError::from_io(&self.root, e)),
        }
    }
}

/// Refuse `dir` unless it is a real directory (not a symlink) owned by us and not
/// writable by group or others.
pub(crate) fn check_private_dir(dir: &Path) -> Result<(), DeliveryError> {
    use crate::ids::NotPrivate;
    match crate::ids::private_dir(dir) {
        Ok(()) => Ok(()),
        Err(NotPrivate::Io(e)) => Err(DeliveryError::from_io(dir, e)),
        Err(NotPrivate::Symlink) => Err(DeliveryError::unsafe_path(
            dir,
            "it is a symlink (possibly planted by another user)",
            "remove the symlink or set BATON_HANDOFF_DIR to a private directory",
        )),
        Err(NotPrivate::NotADirectory) => Err(DeliveryError::unsafe_path(
            dir,
            "it exists and is not a directory",
            "remove it or set BATON_HANDOFF_DIR to a private directory",
        )),
        Err(NotPrivate::Owner { uid, me }) => Err(DeliveryError::unsafe_path(
            dir,
            format!("it is owned by uid {uid}, not by this user (uid {me})"),
            "remove it or set BATON_HANDOFF_DIR to a directory you own",
        )),
        Err(NotPrivate::Writable { mode }) => Err(DeliveryError::unsafe_path(
            dir,
            format!("it is writable by group or others (mode {mode:04o})"),
            "run `chmod 700` on it or set BATON_HANDOFF_DIR to a private directory",
        )),
    }
}

/// Create `dir` (one level) with mode 0700 if missing, then check it.
fn ensure_private_dir(dir: &Path) -> Result<(), DeliveryError> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        // A restrictive umask could have cleared bits we need; set the mode exactly.
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
            .map_err(|e| DeliveryError::from_io(dir, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(DeliveryError::from_io(dir, e)),
    }
    check_private_dir(dir)
}

fn temp_name(name: &str) -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(".{name}.tmp.{}.{n}.{nanos}", std::process::id())
}

/// The process id in a temp file name made by [`temp_name`]
/// (`.<name>.tmp.<pid>.<counter>.<nanos>`), or `None` if `file_name` is not such a name.
pub(crate) fn parse_temp_name(file_name: &str) -> Option<u32> {
    let rest = file_name.strip_prefix('.')?;
    let mut parts = rest.rsplitn(4, '.');
    let nanos = parts.next()?;
    let counter = parts.next()?;
    let pid = parts.next()?;
    let name = parts.next()?.strip_suffix(".tmp")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if name.is_empty() || !digits(nanos) || !digits(counter) || !digits(pid) {
        return None;
    }
    nanos.parse::<u32>().ok().filter(|n| *n < 1_000_000_000)?;
    counter.parse::<u64>().ok()?;
    pid.parse::<u32>().ok().filter(|p| *p > 0)
}

/// Atomically replace `dir/name` with `contents` (mode 0600). The caller fsyncs `dir`
/// afterwards to make the rename durable.
fn atomic_write(dir: &Path, name: &str, contents: &[u8]) -> Result<(), DeliveryError> {
    let target = dir.join(name);
    if let Ok(meta) = fs::symlink_metadata(&target) {
        if meta.is_dir() {
            return Err(DeliveryError::unsafe_path(
                &target,
                "it is a directory where a file was expected",
                "remove it",
            ));
        }
        // A symlink or file at the target is replaced by rename(2), never followed.
    }
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let tmp = dir.join(temp_name(name));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                attempt = attempt.saturating_add(1);
            }
            Err(e) => return Err(DeliveryError::from_io(&tmp, e)),
        }
    };
    let result = (|| {
        // The umask can only clear bits; make sure the mode is exactly 0600.
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        file.write_all(contents)?;
        file.sync_all()
    })();
    drop(file);
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(DeliveryError::from_io(&target, e));
    }
    if let Err(e) = fs::rename(&tmp, &target) {
        let _ = fs::remove_file(&tmp);
        return Err(DeliveryError::from_io(&target, e));
    }
    Ok(())
}

/// fsync a directory, making the renames in it durable.
fn sync_dir(dir: &Path) -> Result<(), DeliveryError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| DeliveryError::from_io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::{parse_temp_name, temp_name};

    #[test]
    fn every_temp_name_parses_back_to_this_process() {
        for name in ["handoff.md", ".baton-handoff", "a.b.c", "x"] {
            let t = temp_name(name);
            assert_eq!(parse_temp_name(&t), Some(std::process::id()), "{t}");
        }
    }

    #[test]
    fn other_names_are_not_temp_names() {
        for name in [
            "handoff.md",
            ".handoff.md",
            ".handoff.md.tmp",
            ".handoff.md.tmp.1.2",
            ".tmp.1.2.3",
            "handoff.md.tmp.1.2.3",
            ".handoff.md.tmp.0.2.3",
            ".handoff.md.tmp.1.2.1000000000",
            ".handoff.md.tmp.+1.2.3",
            ".handoff.md.TMP.1.2.3",
        ] {
            assert_eq!(parse_temp_name(name), None, "{name}");
        }
    }
}
