//! The service's decision log (`baton serve --decision-log PATH|-`): one JSON line per
//! decision, appended to a file (rotated by size) or written to standard output.
//!
//! Every line is written whole with one `write_all` under one mutex, so lines from concurrent
//! requests never interleave or split, and a rotation happens between two lines, never inside
//! one. A write that fails (a full disk, a file removed under the server) is reported (see
//! [`Written::Failed`]) and the decision is answered all the same; the next line is tried
//! again.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where the lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard output (`-`); refused with `--stdio`, whose standard output carries the
    /// JSON-RPC messages.
    Stdout,
    /// A file, created (mode 0600) or appended to.
    File(PathBuf),
}

impl LogTarget {
    /// `-` is standard output; anything else a path.
    pub fn parse(s: &str) -> LogTarget {
        if s == "-" {
            LogTarget::Stdout
        } else {
            LogTarget::File(PathBuf::from(s))
        }
    }
}

/// How the decision log is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionLogConfig {
    /// Where the lines go.
    pub target: LogTarget,
    /// Rotate the file before a line would take it past this many bytes (0: never). The
    /// current file is renamed `PATH.1` (an older `PATH.1` becomes `PATH.2`, ...).
    pub max_bytes: u64,
    /// Rotated files kept (`PATH.1` .. `PATH.N`); the oldest beyond them is removed.
    pub keep: usize,
    /// Write every decision's trace (as the policy's `log { keep trace }` does).
    pub trace: bool,
}

impl DecisionLogConfig {
    /// A log to `target`: rotation at 100 MiB, 5 rotated files kept, no trace.
    pub fn new(target: LogTarget) -> DecisionLogConfig {
        DecisionLogConfig {
            target,
            max_bytes: 100 * 1024 * 1024,
            keep: 5,
            trace: false,
        }
    }
}

/// Why the decision log cannot be opened at start. `Display` is the message; the path is its
/// location ([`crate::Located`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot write the decision log: {reason}")]
#[non_exhaustive]
pub struct DecisionLogError {
    /// The log's path.
    pub path: String,
    /// Why it cannot be written.
    pub reason: String,
}

impl crate::Located for DecisionLogError {
    fn location(&self) -> Option<String> {
        Some(self.path.clone())
    }
}

/// What writing a line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// The line is written.
    Ok,
    /// The line is lost: why. The caller reports it (once per run of failures).
    Failed(String),
}

/// The open decision log.
#[derive(Debug)]
pub struct DecisionLog {
    cfg: DecisionLogConfig,
    sink: Mutex<Sink>,
}

#[derive(Debug)]
struct Sink {
    /// The open file (`None` for standard output, or after a rotation failed to reopen).
    file: Option<File>,
    /// Bytes in the current file.
    size: u64,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl DecisionLog {
    /// Open the log: the file is created or appended to. An unwritable path is an error.
    pub fn open(cfg: DecisionLogConfig) -> Result<DecisionLog, DecisionLogError> {
        let sink = match &cfg.target {
            LogTarget::Stdout => Sink {
                file: None,
                size: 0,
            },
            LogTarget::File(path) => {
                let err = |e: std::io::Error| DecisionLogError {
                    path: path.display().to_string(),
                    reason: crate::state::io_reason(&e),
                };
                if path.is_dir() {
                    return Err(DecisionLogError {
                        path: path.display().to_string(),
                        reason: "it is a directory; give a file path".into(),
                    });
                }
                let file = open_append(path).map_err(err)?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                Sink {
                    file: Some(file),
                    size,
                }
            }
        };
        Ok(DecisionLog {
            cfg,
            sink: Mutex::new(sink),
        })
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &DecisionLogConfig {
        &self.cfg
    }

    /// Append one line (`line` holds no newline; one is added). Blocking, briefly.
    pub fn write_line(&self, line: &[u8]) -> Written {
        let mut buf = Vec::with_capacity(line.len().saturating_add(1));
        buf.extend_from_slice(line);
        buf.push(b'\n');
        let mut sink = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        let path = match &self.cfg.target {
            LogTarget::Stdout => {
                let mut out = std::io::stdout().lock();
                return match out.write_all(&buf).and_then(|()| out.flush()) {
                    Ok(()) => Written::Ok,
                    Err(e) => Written::Failed(format!("standard output: {e}")),
                };
            }
            LogTarget::File(p) => p,
        };
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        let over = self.cfg.max_bytes > 0
            && sink.size > 0
            && sink.size.saturating_add(len) > self.cfg.max_bytes;
        if over || sink.file.is_none() {
            if over {
                if let Err(e) = self.rotate(path) {
                    // Keep writing to the current file: a line is never lost to rotation.
                    return self.append(&mut sink, path, &buf, Some(e));
                }
            }
            match open_append(path) {
                Ok(f) => {
                    sink.size = f.metadata().map(|m| m.len()).unwrap_or(0);
                    sink.file = Some(f);
                }
                Err(e) => {
                    sink.file = None;
                    return Written::Failed(format!(
                        "{}: cannot reopen: {}",
                        path.display(),
                        crate::state::io_reason(&e)
                    ));
                }
            }
        }
        self.append(&mut sink, path, &buf, None)
    }

    fn append(
        &self,
        sink: &mut Sink,
        path: &Path,
        buf: &[u8],
        rotate_failed: Option<std::io::Error>,
    ) -> Written {
        let Some(file) = sink.file.as_mut() else {
            return Written::Failed(format!("{}: not open", path.display()));
        };
        match file.write_all(buf) {
            Ok(()) => {
                sink.size = sink
                    .size
                    .saturating_add(u64::try_from(buf.len()).unwrap_or(u64::MAX));
                match rotate_failed {
                    None => Written::Ok,
                    Some(e) => Written::Failed(format!(
                        "{}: cannot rotate (the line was appended to the current file): {}",
                        path.display(),
                        crate::state::io_reason(&e)
                    )),
                }
            }
            Err(e) => Written::Failed(format!(
                "{}: {}",
                path.display(),
                crate::state::io_reason(&e)
            )),
        }
    }

    /// `PATH.(k-1)` -> `PATH.k` for k = keep .. 2, then `PATH` -> `PATH.1`.
    fn rotate(&self, path: &Path) -> std::io::Result<()> {
        let nth = |k: usize| {
            let mut s = path.as_os_str().to_os_string();
            s.push(format!(".{k}"));
            PathBuf::from(s)
        };
        let keep = self.cfg.keep;
        if keep == 0 {
            return std::fs::remove_file(path);
        }
        for k in (1..keep).rev() {
            let from = nth(k);
            if from.exists() {
                std::fs::rename(&from, nth(k.saturating_add(1)))?;
            }
        }
        std::fs::rename(path, nth(1))
    }
}
