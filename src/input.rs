//! Reading input files: only regular files, and never more than a limit, enforced while
//! reading (not by the size the file claims beforehand).
//!
//! Every file baton reads on a user's behalf (state files, policies, templates, policy test
//! files, session logs, item files) is opened here. A path that names something other than a
//! regular file (a FIFO, a character or block device such as `/dev/zero`, a socket, a
//! directory) is refused with [`InputError::NotAFile`] before anything is read: opening a FIFO
//! for reading would block until a writer comes, and a device can be endless. The path is
//! checked first, then opened with `O_NONBLOCK` (opening a FIFO that appeared in between
//! returns at once) and the opened file checked again, so a file swapped under the path
//! between the check and the open is refused too. Reads stop one byte past the limit, so a
//! file that grows while it is read is refused at the limit.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The path names something other than a regular file.
    #[error("it is {kind}, not a regular file (baton reads only regular files)")]
    NotAFile {
        /// What it is, e.g. `a FIFO (named pipe)`.
        kind: &'static str,
    },
    /// The file is longer than the limit.
    #[error("it is over the limit of {limit} bytes{what}")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
        /// What the limit is, e.g. ` (256 MiB, the state size limit)`.
        what: &'static str,
    },
    /// The file is not UTF-8 text (from [`read_to_string`]).
    #[error("not a text file: invalid UTF-8 at byte {at}")]
    NotText {
        /// The offset of the first byte that is not UTF-8.
        at: usize,
    },
    /// The operating system refused (missing file, permissions, ...).
    #[error("{}", io_reason(.0))]
    Io(#[from] std::io::Error),
}

/// An I/O error as the user reads it: `no such file`, `permission denied`, else the system's
/// message.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// What a file that is not a regular file is, for [`InputError::NotAFile`].
fn kind_of(t: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// Open `path` for reading if it names a regular file (see the module docs); never blocks.
pub fn open(path: &Path) -> Result<File, InputError> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(kind) = kind_of(std::fs::metadata(path)?.file_type()) {
        return Err(InputError::NotAFile { kind });
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if let Some(kind) = kind_of(file.metadata()?.file_type()) {
        return Err(InputError::NotAFile { kind });
    }
    Ok(file)
}

/// The whole of a regular file of at most `limit` bytes; `what` says what the limit is in the
/// error (e.g. ` (256 MiB, the state size limit)`).
pub fn read(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, InputError> {
    let file = open(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(InputError::Io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(InputError::TooLarge { limit, what });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64, what: &'static str) -> Result<String, InputError> {
    String::from_utf8(read(path, limit, what)?).map_err(|e| InputError::NotText {
        at: e.utf8_error().valid_up_to(),
    })
}

/// The limit of the text files baton reads whole that have no limit of their own (policies,
/// templates, policy test files, item files): 64 MiB.
pub const MAX_TEXT_BYTES: u64 = 64 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("dir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
            (fifo.as_path(), "a FIFO (named pipe)"),
        ] {
            let e = read(path, 10, "").expect_err("refused");
            assert_eq!(
                e.to_string(),
                format!("it is {kind}, not a regular file (baton reads only regular files)")
            );
        }
    }

    #[test]
    fn the_limit_holds_while_reading() {
        let dir = tempfile::tempdir().expect("dir");
        let f = dir.path().join("f");
        std::fs::write(&f, "0123456789").expect("writes");
        assert_eq!(read(&f, 10, "").expect("reads").len(), 10);
        assert_eq!(
            read(&f, 9, " (the test limit)")
                .expect_err("over")
                .to_string(),
            "it is over the limit of 9 bytes (the test limit)"
        );
    }
}
