//! Value types every layer shares: id validation, the off-band document layout, the one
//! grantable tool. They sit at the bottom of the layer order (docs/architecture.md) so that
//! the state validator, the checker and the evaluator can use them without importing the
//! delivery layer that writes the documents.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The only tool a pre-grant can be issued for.
pub const GRANTABLE_TOOL: &str = "Read";

/// The file name of the full handoff document inside a handoff directory.
pub const DOCUMENT_FILE: &str = "handoff.md";

/// The longest id accepted as a path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 200;

/// Why an id cannot be used as a path component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidId {
    /// What was being validated (`thread id`, `handoff id`, `file name`).
    pub kind: &'static str,
    /// The offending value.
    pub id: String,
    /// Why it was rejected.
    pub why: &'static str,
}

/// Check that `id` can be used as a single path component: non-empty, not `.`, and free of
/// `/`, `\`, `..` and NUL; at most 200 bytes.
pub fn validate_id(kind: &'static str, id: &str) -> Result<(), InvalidId> {
    let why = if id.is_empty() {
        Some("must not be empty")
    } else if id == "." {
        Some("must not be `.`")
    } else if id.contains("..") {
        Some("must not contain `..`")
    } else if id.contains('/') || id.contains('\\') {
        Some("must not contain a path separator")
    } else if id.contains('\0') {
        Some("must not contain NUL")
    } else if id.len() > MAX_COMPONENT_BYTES {
        Some("is longer than 200 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(InvalidId {
            kind,
            id: id.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// The effective uid of this process; directories and files baton uses must be owned by it.
#[allow(unsafe_code)]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory we own, and cannot fail.
    unsafe { libc::geteuid() }
}

/// The off-band root when none is configured: `<temp dir>/baton-<euid>`. The library reads
/// no environment; the `baton` command and `baton serve` pass `$BATON_HANDOFF_DIR` in.
pub fn default_root() -> PathBuf {
    std::env::temp_dir().join(format!("baton-{}", effective_uid()))
}

/// Why an existing directory is not private to this user.
#[derive(Debug)]
pub enum NotPrivate {
    /// It could not be inspected.
    Io(std::io::Error),
    /// It is a symlink.
    Symlink,
    /// It exists and is not a directory.
    NotADirectory,
    /// Another user owns it.
    Owner {
        /// Its owner.
        uid: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Group or others may write it.
    Writable {
        /// Its permission bits.
        mode: u32,
    },
}

/// Check that `dir` is a real directory (not a symlink) owned by us and not writable by
/// group or others.
pub fn private_dir(dir: &Path) -> Result<(), NotPrivate> {
    let meta = fs::symlink_metadata(dir).map_err(NotPrivate::Io)?;
    if meta.file_type().is_symlink() {
        return Err(NotPrivate::Symlink);
    }
    if !meta.is_dir() {
        return Err(NotPrivate::NotADirectory);
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(NotPrivate::Owner {
            uid: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(NotPrivate::Writable { mode });
    }
    Ok(())
}

/// The canonical form of an off-band root, resolved once when a store is set up.
///
/// * An existing root must first pass the safety checks of [`private_dir`]; only then is it
///   canonicalised (it is not a symlink itself, so this only resolves symlinked directories
///   above it). An unsafe root is kept as written: writing refuses it.
/// * A missing root is the canonical form of its deepest existing ancestor followed by the
///   components still to be created (as long as those are plain names). A relative root
///   becomes absolute (the pre-grant only ever allows an absolute path).
/// * Anything that cannot be resolved is kept as written.
pub fn canonical_root(root: PathBuf) -> PathBuf {
    if fs::symlink_metadata(&root).is_ok() {
        return match private_dir(&root) {
            Ok(()) => fs::canonicalize(&root).unwrap_or(root),
            Err(_) => root,
        };
    }
    let mut missing = Vec::new();
    let mut ancestor = root.as_path();
    // A relative root resolves against the working directory (`.`), so it becomes absolute.
    // The root itself is known to be missing (one `lstat` fewer per off-band decision).
    let mut known_missing = true;
    while !ancestor.as_os_str().is_empty()
        && (known_missing || fs::symlink_metadata(ancestor).is_err())
    {
        known_missing = false;
        let (Some(name), Some(parent)) = (ancestor.file_name(), ancestor.parent()) else {
            return root;
        };
        if !matches!(
            Path::new(name).components().next(),
            Some(Component::Normal(_))
        ) {
            return root;
        }
        missing.push(name.to_owned());
        ancestor = parent;
    }
    let base = if ancestor.as_os_str().is_empty() {
        Path::new(".")
    } else {
        ancestor
    };
    match fs::canonicalize(base) {
        Ok(mut resolved) => {
            resolved.extend(missing.iter().rev());
            resolved
        }
        Err(_) => root,
    }
}

/// An off-band root resolved once ([`canonical_root`] of the root, or of [`default_root`]
/// when none is given), when an engine is built (the store's operations take the engine, and
/// use its root): every decision
/// made with it joins paths without touching the file system or the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRoot(PathBuf);

impl DocumentRoot {
    /// Resolve `root` (`None`: [`default_root`]): `lstat`, `canonicalize` and `$TMPDIR`
    /// happen here, once.
    pub fn resolve(root: Option<PathBuf>) -> Self {
        DocumentRoot(canonical_root(root.unwrap_or_else(default_root)))
    }

    /// A root resolved before (a [`DocumentRoot::path`] carried as a plain path).
    pub fn resolved(root: PathBuf) -> Self {
        DocumentRoot(root)
    }

    /// The resolved root.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `<root>/<thread>/<handoff>/handoff.md`, with no I/O; no validation (see
    /// [`validate_id`]).
    pub fn document_path(&self, thread_id: &str, handoff_id: &str) -> PathBuf {
        let mut path = self.0.clone();
        path.push(thread_id);
        path.push(handoff_id);
        path.push(DOCUMENT_FILE);
        path
    }
}

/// `<canonical root>/<thread>/<handoff>/handoff.md`, the off-band document's path; no
/// validation (see [`validate_id`]). `root` defaults to [`default_root`].
pub fn document_path(root: Option<PathBuf>, thread_id: &str, handoff_id: &str) -> PathBuf {
    let mut path = canonical_root(root.unwrap_or_else(default_root));
    // `push` is what `join` does, on one buffer.
    path.push(thread_id);
    path.push(handoff_id);
    path.push(DOCUMENT_FILE);
    path
}
