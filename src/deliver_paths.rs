//! Where off-band handoff documents live. Pure path arithmetic; the writer is in `deliver`.

use std::path::{Path, PathBuf};

/// `$BATON_HANDOFF_DIR`, else `<temp dir>/baton-<uid>`.
pub fn default_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("BATON_HANDOFF_DIR") {
        if !dir.is_empty() {
            return PathBuf::from(dir);
        }
    }
    std::env::temp_dir().join(format!("baton-{}", current_uid()))
}

#[cfg(unix)]
fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

#[cfg(not(unix))]
fn current_uid() -> u32 {
    0
}

/// The stable path of a handoff's document: `<root>/<thread>/<handoff>/handoff.md`.
pub fn document_path(root: &Path, thread: &str, handoff: &str) -> PathBuf {
    root.join(sanitize(thread)).join(sanitize(handoff)).join("handoff.md")
}

/// Ids become one path component: anything but `[A-Za-z0-9._-]` is percent-escaped, and a
/// leading dot too, so no id can climb out of the root.
pub fn sanitize(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let ok = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if ok {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}
