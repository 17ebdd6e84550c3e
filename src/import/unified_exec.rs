//! Codex "unified exec": an `exec_command` whose process outlives the call answers
//! `Process running with session ID N`; its later output and exit code arrive in the outputs of
//! `write_stdin` calls (polls) naming that session. This links each poll to its command, so the
//! command gets its whole output and final exit code, and the polls stay out of the items.
//!
//! An output's text starts with header lines (`Chunk ID: ...`, `Wall time: ... seconds`,
//! `Process exited with code N` or `Process running with session ID N`, `Original token count:
//! N`) and then `Output:` and the output itself.

use std::collections::HashMap;

/// A command whose process was still running when its call returned.
#[derive(Debug, Clone)]
struct Running {
    /// The `exec_command` call's id (the builder's waiting call).
    call_id: String,
    output: String,
}

/// What a poll's output did to its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PollResult {
    /// The process still runs; the output was added.
    StillRunning,
    /// The process exited: the command's call id, whole output and exit code.
    Exited {
        call_id: String,
        output: String,
        exit_code: i64,
    },
    /// The poll names a session no `exec_command` of the log started.
    UnknownSession { session: String },
    /// No `write_stdin` call of that id is waiting.
    NotAPoll,
}

/// The header of an exec output: its exit code, the session of a process still running, and
/// the output after the `Output:` line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Header {
    pub exit_code: Option<i64>,
    pub session: Option<String>,
    pub body: String,
}

/// Read the header lines of an exec output (only the lines before `Output:` are header).
pub(crate) fn header(text: &str) -> Header {
    let mut h = Header::default();
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        offset = offset.saturating_add(line.len());
        if l == "Output:" {
            h.body = text.get(offset..).unwrap_or("").to_string();
            return h;
        }
        if let Some(n) = l
            .strip_prefix("Exit code: ")
            .or_else(|| l.strip_prefix("Process exited with code "))
        {
            h.exit_code = n.trim().parse::<i64>().ok();
        } else if let Some(s) = l.strip_prefix("Process running with session ID ") {
            let s = s.trim();
            if !s.is_empty() {
                h.session = Some(s.to_string());
            }
        } else if offset > 2048 {
            break;
        }
    }
    // No `Output:` line: the whole text is the output.
    h.body = text.to_string();
    h
}

/// The running commands and the polls waiting for their outputs.
#[derive(Debug, Default)]
pub(crate) struct UnifiedExec {
    running: HashMap<String, Running>,
    /// `write_stdin` call id -> the session it polls.
    polls: HashMap<String, String>,
}

impl UnifiedExec {
    /// An `exec_command` (call `call_id`) answered that its process runs as `session`, with
    /// the output so far.
    pub(crate) fn started(&mut self, session: String, call_id: &str, output: &str) {
        self.running.insert(
            session,
            Running {
                call_id: call_id.to_string(),
                output: output.to_string(),
            },
        );
    }

    /// A `write_stdin` call: returns false when no running command has that session (the
    /// poll is then not linked; its output is reported by [`UnifiedExec::poll_output`]).
    pub(crate) fn poll(&mut self, call_id: &str, session: &str, chars: &str) -> bool {
        self.polls.insert(call_id.to_string(), session.to_string());
        match self.running.get_mut(session) {
            Some(r) => {
                if !chars.is_empty() {
                    r.output.push_str(&format!("[stdin: {}]\n", chars.escape_debug()));
                }
                true
            }
            None => false,
        }
    }

    /// The output of call `call_id`, if it is a poll.
    pub(crate) fn poll_output(&mut self, call_id: &str, text: &str) -> PollResult {
        let Some(session) = self.polls.remove(call_id) else {
            return PollResult::NotAPoll;
        };
        let h = header(text);
        let Some(r) = self.running.get_mut(&session) else {
            return PollResult::UnknownSession { session };
        };
        r.output.push_str(&h.body);
        match h.exit_code {
            Some(exit_code) => match self.running.remove(&session) {
                Some(r) => PollResult::Exited {
                    call_id: r.call_id,
                    output: r.output,
                    exit_code,
                },
                None => PollResult::StillRunning,
            },
            None => PollResult::StillRunning,
        }
    }

    /// An `exec_command_end` event for call `call_id`: when that command is still running
    /// here, it ends with `exit_code` (the output so far, else the event's `output`).
    pub(crate) fn ended(
        &mut self,
        call_id: &str,
        exit_code: i64,
        output: &str,
    ) -> Option<(String, i64)> {
        let session = self
            .running
            .iter()
            .find(|(_, r)| r.call_id == call_id)
            .map(|(s, _)| s.clone())?;
        let r = self.running.remove(&session)?;
        let out = if r.output.trim().is_empty() {
            output.to_string()
        } else {
            r.output
        };
        Some((out, exit_code))
    }

    /// The commands still running when the log ends: (call id, output so far), in no order.
    pub(crate) fn still_running(&mut self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .running
            .drain()
            .map(|(_, r)| (r.call_id, r.output))
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        let h = header("Chunk ID: a1\nWall time: 1.0 seconds\nProcess running with session ID 83395\nOriginal token count: 3\nOutput:\nCompiling\n");
        assert_eq!(h.session.as_deref(), Some("83395"));
        assert_eq!(h.exit_code, None);
        assert_eq!(h.body, "Compiling\n");
        let h = header("Chunk ID: b2\nWall time: 0.2 seconds\nProcess exited with code 101\nOutput:\nFAILED\n");
        assert_eq!(h.exit_code, Some(101));
        assert_eq!(h.body, "FAILED\n");
    }

    #[test]
    fn polls_complete_their_command() {
        let mut u = UnifiedExec::default();
        u.started("7".into(), "call_exec", "a\n");
        assert!(u.poll("call_p1", "7", ""));
        assert_eq!(
            u.poll_output("call_p1", "Process running with session ID 7\nOutput:\nb\n"),
            PollResult::StillRunning
        );
        assert!(u.poll("call_p2", "7", ""));
        assert_eq!(
            u.poll_output("call_p2", "Process exited with code 0\nOutput:\nc\n"),
            PollResult::Exited {
                call_id: "call_exec".into(),
                output: "a\nb\nc\n".into(),
                exit_code: 0
            }
        );
        assert!(!u.poll("call_p3", "9", ""));
        assert_eq!(
            u.poll_output("call_p3", "Process exited with code 0\nOutput:\n"),
            PollResult::UnknownSession {
                session: "9".into()
            }
        );
        assert_eq!(u.poll_output("other", ""), PollResult::NotAPoll);
    }
}
