//! Delivery of a rendered handoff to the child session (DESIGN §7).
//!
//! * [`offband`] writes the full handoff document (and its siblings) into a per-user
//!   private directory, atomically, at a stable path keyed by thread and handoff id.
//! * [`pregrant`] issues and checks the scoped pre-grant that lets the child `Read`
//!   exactly that one document, on exactly one turn, exactly once.
//! * [`gc`](mod@gc) removes expired off-band handoff directories (only ones baton created), and
//!   what an interrupted write left behind ([`leftovers`]).
//! * [`stage`] is the pipeline's delivery stage: write the off-band document and issue its
//!   pre-grant, or fall back to inline delivery and say why ([`deliver`]).
//! * [`summarizer`] runs an external summarizer command with a timeout and classifies
//!   its failures so the caller can fall back to the deterministic summary.
//!
//! Every fallible operation returns [`DeliveryError`] (or
//! [`summarizer::SummarizerFailure`]); the `Display` text of an error is meant to be
//! recorded verbatim as the fallback reason, so it always names the path involved.

#[cfg(any(feature = "unstable", feature = "store"))]
pub mod gc;
#[cfg(any(feature = "unstable", feature = "store"))]
pub mod leftovers;
#[cfg(any(feature = "unstable", feature = "store"))]
pub mod offband;
#[cfg(any(feature = "unstable", feature = "store"))]
pub mod pregrant;
#[cfg(any(feature = "unstable", feature = "store"))]
pub mod stage;
pub mod summarizer;
#[cfg(feature = "postgres")]
pub(crate) mod kept;

use std::io;
use std::path::PathBuf;

pub use summarizer::CommandRunner;
// Staging, garbage collection and pre-grants: for the store, the service and the CLI.
#[cfg(any(feature = "unstable", feature = "store"))]
pub use {
    gc::{gc_checked, GcReport, HandoffLiveness, Retention},
    offband::{OffbandStore, DOCUMENT_FILE, MARKER_FILE},
    pregrant::{
        check, parse_tool_args, CheckRequest, Grant, GrantStore, MemoryGrantStore, PathArg,
        Verdict,
    },
    stage::deliver,
    summarizer::runs_command,
};
// What only baton's tests and benchmarks reach (`unstable`).
#[cfg(any(test, feature = "unstable"))]
#[cfg_attr(test, allow(unused_imports))]
pub use {
    gc::gc,
    leftovers::STALE_GRACE,
    pregrant::{issue, ToolArgsError, GRANTABLE_TOOL},
    stage::Delivered,
    summarizer::{
        run_external, run_external_blocking, summarize_blocking, ExternalCommand,
        SummarizerFailure, SummaryOutcome, SummarySource,
    },
    crate::summarize::created_by,
};

/// Errors from off-band delivery, pre-grants and garbage collection.
///
/// The messages are human-readable, name the path they refer to and, where the user can
/// do something about it, say what.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// A thread id, handoff id or file name cannot be used as a path component.
    #[error("invalid {kind} {id:?}: {why}")]
    InvalidId {
        /// What was being validated (`thread id`, `handoff id`, `file name`).
        kind: &'static str,
        /// The offending value.
        id: String,
        /// Why it was rejected.
        why: &'static str,
    },
    /// The filesystem refused the write: permission denied or read-only filesystem.
    #[error(
        "cannot write {path}: {source} (permission denied or read-only filesystem); \
         make the directory writable or point BATON_HANDOFF_DIR at a writable private directory"
    )]
    NotWritable {
        /// The path the operation failed on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The filesystem is full (ENOSPC / EDQUOT).
    #[error("cannot write {path}: disk full ({source})")]
    DiskFull {
        /// The path the operation failed on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A directory (or file) that baton would use is not safe: a symlink, owned by another
    /// user, writable by group/others, or not a directory at all.
    #[error("refusing to use {path}: {problem}; {remedy}")]
    UnsafePath {
        /// The path that failed the check.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// What the user can do about it.
        remedy: String,
    },
    /// Any other I/O error.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path the operation failed on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A pre-grant could not be issued.
    #[error("cannot issue pre-grant for {path}: {why}")]
    InvalidGrant {
        /// The document path the grant was for.
        path: PathBuf,
        /// Why it was refused.
        why: String,
    },
    /// A grant store backend failed (used by non-memory stores).
    #[error("grant store error: {0}")]
    Store(String),
}

impl From<crate::ids::InvalidId> for DeliveryError {
    fn from(e: crate::ids::InvalidId) -> Self {
        DeliveryError::InvalidId {
            kind: e.kind,
            id: e.id,
            why: e.why,
        }
    }
}

impl DeliveryError {
    /// Classify an I/O error on `path` into the matching variant.
    pub fn from_io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => {
                DeliveryError::NotWritable { path, source }
            }
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => DeliveryError::DiskFull { path, source },
            _ if source.kind() == io::ErrorKind::PermissionDenied => {
                DeliveryError::NotWritable { path, source }
            }
            _ => DeliveryError::Io { path, source },
        }
    }

    /// The kind as recorded in a decision that fell back to inline (`delivery.fallback_kind`).
    pub fn fallback_kind(&self) -> crate::decision::FallbackKind {
        use crate::decision::FallbackKind;
        match self {
            DeliveryError::InvalidId { .. } => FallbackKind::InvalidId,
            DeliveryError::NotWritable { .. } => FallbackKind::NotWritable,
            DeliveryError::DiskFull { .. } => FallbackKind::DiskFull,
            DeliveryError::UnsafePath { .. } => FallbackKind::UnsafePath,
            DeliveryError::Io { .. } => FallbackKind::Io,
            DeliveryError::InvalidGrant { .. } => FallbackKind::InvalidGrant,
            DeliveryError::Store(_) => FallbackKind::Store,
        }
    }

    /// A short stable snake_case classification, for provenance and metrics.
    pub fn kind(&self) -> &'static str {
        self.fallback_kind().as_str()
    }

    #[cfg(any(feature = "unstable", feature = "store"))]
    pub(crate) fn unsafe_path(path: &std::path::Path, problem: impl Into<String>, remedy: &str) -> Self {
        DeliveryError::UnsafePath {
            path: path.to_path_buf(),
            problem: problem.into(),
            remedy: remedy.to_string(),
        }
    }
}

#[cfg(any(test, feature = "unstable"))]
pub use crate::ids::effective_uid;

// Tests of delivery's internals (formerly integration tests of tests/, which needed the
// `unstable` feature).
// The integration tests' guard for tests that need root (tests/privilege), shared by these.
#[cfg(test)]
#[path = "../../tests/privilege/mod.rs"]
mod privilege;
#[cfg(test)]
mod gc_tests;
#[cfg(test)]
mod offband_tests;
#[cfg(test)]
mod pregrant_tests;
#[cfg(test)]
mod stage_tests;
#[cfg(test)]
mod summarizer_tests;
