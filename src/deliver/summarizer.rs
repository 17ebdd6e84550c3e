//! External summarizer commands.
//!
//! Protocol: baton writes the summarizer input as one JSON document to the command's
//! stdin and closes it; the command prints the summary as markdown on stdout and exits 0.
//! Anything else is a classified [`SummarizerFailure`], and the caller falls back to the
//! deterministic summary, recording [`SummarizerFailure::kind`] as the reason.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

pub use crate::summarize::{SummarizerFailure, SummarySource};
use crate::summarize::{Summarizer, SummaryRequest};

/// Stdout is read in full up to at least this many bytes; beyond the cap it is cut off.
const STDOUT_MIN_CAP: usize = 1 << 20;
/// How many bytes of stderr are kept for the failure message.
const STDERR_KEEP: usize = 4096;
/// How many characters of stderr are shown in the failure message.
const STDERR_EXCERPT_CHARS: usize = 200;

/// An external summarizer command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCommand {
    /// The program to run (looked up on `PATH` if not a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How long it may run before it is killed.
    pub timeout: Duration,
}

impl ExternalCommand {
    /// The command a policy names (`source command "CMD" timeout_ms N`): `CMD` is a shell
    /// command line, run as `/bin/sh -c CMD`, so quoting and arguments work as in a shell.
    pub fn shell(command: &str, timeout: Duration) -> Self {
        ExternalCommand {
            program: "/bin/sh".to_string(),
            args: vec!["-c".to_string(), command.to_string()],
            timeout,
        }
    }

    /// The command a policy's summary source names; `None` for `deterministic`.
    pub fn from_source(source: &SummarySource) -> Option<Self> {
        match source {
            SummarySource::Deterministic => None,
            SummarySource::Command {
                command,
                timeout_ms,
            } => Some(Self::shell(command, Duration::from_millis(*timeout_ms))),
        }
    }
}

/// Whether a handoff under `policy` is summarized by an external command (which may take
/// seconds), not by the deterministic sections.
#[cfg(any(feature = "unstable", feature = "store"))]
pub fn runs_command(policy: &crate::policy::Policy) -> bool {
    matches!(
        policy.summary.as_ref().map(|s| &s.source),
        Some(SummarySource::Command { .. })
    )
}

/// Read everything from `r`, keeping at most `keep` bytes; returns (kept, overflowed).
/// With `stop_on_overflow` it stops reading (and drops the pipe) once over `keep`.
async fn read_capped<R: AsyncRead + Unpin>(
    mut r: R,
    keep: usize,
    stop_on_overflow: bool,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut overflow = false;
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(buf.get(..n.min(room)).unwrap_or_default());
                if n > room {
                    overflow = true;
                    if stop_on_overflow {
                        break;
                    }
                }
            }
        }
    }
    (kept, overflow)
}

fn excerpt(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    let mut out: String = text.chars().take(STDERR_EXCERPT_CHARS).collect();
    if text.chars().count() > STDERR_EXCERPT_CHARS {
        out.push('…');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[allow(unsafe_code)]
fn kill_process_group(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // Positive, so its negation (the process group) cannot overflow.
    let Some(group) = pid.checked_neg().filter(|_| pid > 0) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory; a negative pid names the
    // process group the child leads (it was spawned with process_group(0)), so this can
    // only signal the summarizer and its descendants.
    unsafe {
        libc::kill(group, libc::SIGKILL);
    }
}

/// Run `cmd` with `input_json` on stdin and return its stdout (trailing whitespace
/// trimmed) if it succeeds within the timeout and the budget.
///
/// The child runs in its own process group; on timeout or overflow the whole group is
/// killed, and the child is also killed if this future is dropped.
pub async fn run_external(
    cmd: &ExternalCommand,
    input_json: &serde_json::Value,
    budget_chars: usize,
) -> Result<String, SummarizerFailure> {
    let input = serde_json::to_vec(input_json)
        .map_err(|e| SummarizerFailure::Spawn(format!("cannot encode input: {e}")))?;
    let mut child = Command::new(&cmd.program)
        .args(&cmd.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SummarizerFailure::Spawn(format!("{}: {e}", cmd.program)))?;
    let pid = child.id();

    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    // A UTF-8 char is at most 4 bytes, so more than `4 * budget` bytes is certainly over
    // budget; up to 1 MiB is read in full anyway so the reported count is exact.
    let stdout_cap = budget_chars
        .saturating_mul(4)
        .saturating_add(4)
        .max(STDOUT_MIN_CAP);

    let work = async {
        let write = async move {
            if let Some(mut s) = stdin {
                // The child may exit without reading stdin; a broken pipe is not a failure.
                let _ = s.write_all(&input).await;
                let _ = s.shutdown().await;
            }
        };
        let out = async move {
            match stdout {
                Some(s) => read_capped(s, stdout_cap, true).await,
                None => (Vec::new(), false),
            }
        };
        let err = async move {
            match stderr {
                Some(s) => read_capped(s, STDERR_KEEP, false).await.0,
                None => Vec::new(),
            }
        };
        let ((), (out, overflow), err) = tokio::join!(write, out, err);
        if overflow {
            if let Some(pid) = pid {
                kill_process_group(pid);
            }
            let _ = child.start_kill();
        }
        let status = child.wait().await;
        (status, out, overflow, err)
    };

    let (status, out, overflow, err) = match tokio::time::timeout(cmd.timeout, work).await {
        Ok(r) => r,
        Err(_) => {
            if let Some(pid) = pid {
                kill_process_group(pid);
            }
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(SummarizerFailure::Timeout(cmd.timeout));
        }
    };

    if overflow {
        return Err(SummarizerFailure::OverBudget {
            chars: String::from_utf8_lossy(&out).chars().count(),
            budget: budget_chars,
        });
    }
    let status = status.map_err(|e| SummarizerFailure::Spawn(format!("{}: {e}", cmd.program)))?;
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(SummarizerFailure::ExitStatus {
            code: status.code(),
            signal: status.signal(),
            stderr: excerpt(&err),
        });
    }
    let text = String::from_utf8(out).map_err(|_| SummarizerFailure::InvalidUtf8)?;
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Err(SummarizerFailure::EmptyOutput);
    }
    let chars = text.chars().count();
    if chars > budget_chars {
        return Err(SummarizerFailure::OverBudget {
            chars,
            budget: budget_chars,
        });
    }
    Ok(text.to_string())
}

/// The one current-thread runtime every synchronous summarizer call runs on, built on the
/// first call (a current-thread runtime may be driven by several threads' `block_on` at once:
/// each waits its turn for the I/O and timer drivers).
fn runtime() -> Result<&'static tokio::runtime::Runtime, SummarizerFailure> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SummarizerFailure::Spawn(format!("cannot start a tokio runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// [`run_external`] for synchronous callers, on the process's one summarizer runtime (built
/// once, never per call). Called from inside a tokio runtime (the service), it drives that
/// runtime from a scoped helper thread, so it never blocks a runtime worker's own event loop
/// or panics.
pub fn run_external_blocking(
    cmd: &ExternalCommand,
    input_json: &serde_json::Value,
    budget_chars: usize,
) -> Result<String, SummarizerFailure> {
    let run = || runtime()?.block_on(run_external(cmd, input_json, budget_chars));
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    std::thread::scope(|scope| {
        scope.spawn(run).join().unwrap_or_else(|_| {
            Err(SummarizerFailure::Spawn(
                "the summarizer helper thread failed".to_string(),
            ))
        })
    })
}

/// The [`Summarizer`] that runs the policy's external command (`source command "CMD"`) with
/// its timeout; the main path's summarizer wherever a handoff is made for delivery (the
/// store, the service, `baton render`, [`crate::Engine::run`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandRunner;

impl Summarizer for CommandRunner {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Option<Result<String, SummarizerFailure>> {
        let cmd = ExternalCommand::from_source(request.source)?;
        // On PostgreSQL, an operation's summarizer runs once, before its locks are taken
        // (`store::summarized`, `deliver::kept`).
        #[cfg(feature = "postgres")]
        if let Some(kept) = crate::deliver::kept::recalled(&cmd, request) {
            return Some(kept);
        }
        let out = run_external_blocking(&cmd, request.input, request.budget);
        #[cfg(feature = "postgres")]
        crate::deliver::kept::remember(&cmd, request, &out);
        Some(out)
    }
}

/// The summary a handoff uses, who made it, and why the external one was not used.
// Only baton's tests call `summarize_blocking` (`unstable`); the engine summarizes through
// `Summarizer` and `pipeline`.
#[cfg(any(test, feature = "unstable"))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SummaryOutcome {
    /// The summary text (markdown).
    pub text: String,
    /// `deterministic` or `command:<command line>` (see [`created_by`](crate::summarize::created_by)).
    pub created_by: String,
    /// The failure kind (`timeout`, `exit_status`, ...) when the command failed.
    pub fallback_reason: Option<String>,
    /// The full failure message when the command failed.
    pub fallback_detail: Option<String>,
}

/// Summarize with `source`, falling back to `deterministic` when an external command
/// fails. Synchronous; see [`run_external_blocking`].
#[cfg(any(test, feature = "unstable"))]
pub fn summarize_blocking(
    source: &SummarySource,
    input_json: &serde_json::Value,
    budget_chars: usize,
    deterministic: &dyn Fn(&serde_json::Value, usize) -> String,
) -> SummaryOutcome {
    let fallback = |failure: Option<SummarizerFailure>| SummaryOutcome {
        text: deterministic(input_json, budget_chars),
        created_by: "deterministic".to_string(),
        fallback_reason: failure.as_ref().map(|f| f.kind().to_string()),
        fallback_detail: failure.as_ref().map(ToString::to_string),
    };
    match ExternalCommand::from_source(source) {
        None => fallback(None),
        Some(cmd) => match run_external_blocking(&cmd, input_json, budget_chars) {
            Ok(text) => SummaryOutcome {
                text,
                created_by: crate::summarize::created_by(source),
                fallback_reason: None,
                fallback_detail: None,
            },
            Err(f) => fallback(Some(f)),
        },
    }
}
