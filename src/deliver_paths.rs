//! Where off-band handoff documents live: the path arithmetic the evaluator needs for the
//! pre-grant, shared with the writer in [`crate::deliver`].

use std::path::{Path, PathBuf};

/// `$BATON_HANDOFF_DIR`, else `<temp dir>/baton-<uid>`.
pub fn default_root() -> PathBuf {
    crate::deliver::offband::default_root()
}

/// The stable path of a handoff's document: `<root>/<thread>/<handoff>/handoff.md`.
pub fn document_path(root: &Path, thread: &str, handoff: &str) -> PathBuf {
    crate::deliver::OffbandStore::new(Some(root.to_path_buf())).document_path(thread, handoff)
}
