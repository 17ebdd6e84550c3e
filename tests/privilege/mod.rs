//! Tests that need privileges (root, `mount`, `chown`) never pass silently where they cannot
//! run: they fail, naming what is missing. CI runs as root, so there they always run.
//!
//! Outside CI a developer can skip them *knowingly* with `BATON_ALLOW_SKIP=1`; the test then
//! prints `SKIPPED` and passes. With `CI` set, that escape hatch is ignored.
#![allow(dead_code)]

/// Whether a test that cannot run here may be skipped (never in CI).
fn skip_allowed() -> bool {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    !ci && std::env::var("BATON_ALLOW_SKIP").is_ok_and(|v| v == "1")
}

/// `Some(value)` when the precondition holds. Otherwise the test fails, naming `why`, unless
/// skipping was knowingly allowed (then `None`, and the caller returns).
pub fn require<T>(test: &str, precondition: Result<T, String>) -> Option<T> {
    match precondition {
        Ok(v) => Some(v),
        Err(why) if skip_allowed() => {
            eprintln!("SKIPPED {test}: {why} (BATON_ALLOW_SKIP=1)");
            None
        }
        Err(why) => panic!(
            "{test} cannot run here: {why}. It needs root (CI runs as root) and a sandbox \
             that allows mount; outside CI, set BATON_ALLOW_SKIP=1 to skip it knowingly"
        ),
    }
}

/// Whether this process runs as root.
#[allow(unsafe_code)]
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments, touches no memory we own, and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A tmpfs mounted on a fresh directory for the life of the guard. Tests run as root, and root
/// ignores directory modes, so a real read-only or full filesystem is the honest way to fail
/// a write.
pub struct Mount {
    pub dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Mount {
    /// Mount a tmpfs with `options`, or say why it cannot be done here.
    pub fn tmpfs(options: &str) -> Result<Mount, String> {
        let tmp = tempfile::TempDir::new().map_err(|e| e.to_string())?;
        let dir = tmp.path().join("mnt");
        std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a tmpfs here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount { dir, _tmp: tmp })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}
