//! What `baton handoff` prints to start the next tool: an interactive session that opens
//! with the handoff prompt (the default), or a headless single turn (`--headless`); the task
//! the prompt asks for when no `--message` is given; and a handoff id of its own for every
//! handoff of the same session.

use crate::decision::Decision;
use crate::deliver::OffbandStore;
use crate::state::{Item, State};
use std::path::Path;

/// Quote a word for a POSIX shell.
pub(crate) fn sh(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Claude Code's `--allowedTools` rule for reading `grant` (an absolute path is spelt `//`).
fn claude_allow(read_grant: Option<&Path>) -> String {
    read_grant
        .map(|g| {
            let abs = g.display().to_string();
            format!(" --allowedTools {}", sh(&format!("Read(/{abs})")))
        })
        .unwrap_or_default()
}

/// The command that opens an interactive session of `provider` in `cwd` whose first message
/// is the prompt in `prompt` (a file). `read_grant` is the document the agent may read without
/// asking.
pub(crate) fn interactive_command(
    provider: &str,
    cwd: Option<&str>,
    prompt: &Path,
    read_grant: Option<&Path>,
) -> String {
    let p = format!("\"$(cat {})\"", sh(&prompt.display().to_string()));
    let cd = cwd.map(|c| format!("cd {} && ", sh(c))).unwrap_or_default();
    match provider {
        "codex" => match cwd {
            Some(c) => format!("codex --cd {} {p}", sh(c)),
            None => format!("codex {p}"),
        },
        "claude" => format!("{cd}claude{} {p}", claude_allow(read_grant)),
        "cursor" => format!("{cd}cursor-agent {p}"),
        "copilot" => format!("{cd}copilot -i {p}"),
        other => format!("{cd}{other} {p}"),
    }
}

/// The command that runs `provider` for one headless turn on the prompt in `prompt` (it
/// answers and exits).
pub(crate) fn headless_command(
    provider: &str,
    cwd: Option<&str>,
    prompt: &Path,
    read_grant: Option<&Path>,
) -> String {
    let p = sh(&prompt.display().to_string());
    let cd = cwd.map(|c| format!("cd {} && ", sh(c))).unwrap_or_default();
    match provider {
        "codex" => match cwd {
            Some(c) => format!("codex exec --cd {} - < {p}", sh(c)),
            None => format!("codex exec - < {p}"),
        },
        "claude" => format!("{cd}claude -p{} < {p}", claude_allow(read_grant)),
        "cursor" => format!("{cd}cursor-agent -p \"$(cat {p})\""),
        "copilot" => format!("{cd}copilot -p \"$(cat {p})\""),
        other => format!("{cd}{other} \"$(cat {p})\""),
    }
}

/// Characters of the last request quoted in a derived task.
const TASK_GIST_CHARS: usize = 300;

/// The first message when none was given: continue the session's last request (quoted, cut
/// at a word boundary), after checking what is still open. `None` when the session has no
/// user message.
pub(crate) fn derived_task(state: &State) -> Option<String> {
    let last = state
        .runs
        .iter()
        .rev()
        .flat_map(|r| r.items.iter().rev())
        .find_map(|i| match i {
            Item::UserMessage { text, .. } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })?;
    let gist = crate::import::mapping::gist(last, TASK_GIST_CHARS);
    Some(format!(
        "Continue this session's work. The user's last request in it was: \"{gist}\" First \
         check whether that is done and whether the open problems the handoff lists are still \
         open (run the failing commands again), then finish what is left, or say that nothing \
         is left."
    ))
}

/// Give `decision` a handoff id whose directory under the off-band root does not exist yet
/// (`H1`, else `H2`, ...), so that a second handoff of the same session never overwrites the
/// first one's document. The document path and the pre-grant follow the new id.
pub(crate) fn fresh_handoff_id(decision: &mut Decision, offband: &OffbandStore, thread: &str) {
    let Some(old) = decision.handoff_id.clone() else {
        return;
    };
    if !offband.handoff_dir(thread, &old).exists() {
        return;
    }
    let Some(new) = (2u32..10_000)
        .map(|n| format!("H{n}"))
        .find(|id| !offband.handoff_dir(thread, id).exists())
    else {
        return;
    };
    let old_dir = offband.handoff_dir(thread, &old).display().to_string();
    let new_dir = offband.handoff_dir(thread, &new).display().to_string();
    let repoint = |p: &mut String| {
        if let Some(rest) = p.strip_prefix(&old_dir) {
            *p = format!("{new_dir}{rest}");
        }
    };
    if let Some(doc) = decision.delivery.as_mut().and_then(|d| d.document.as_mut()) {
        repoint(doc);
    }
    if let Some(g) = decision.pregrant.as_mut() {
        repoint(&mut g.path);
    }
    decision.handoff_id = Some(new);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interactive_and_headless_forms() {
        let grant = Path::new("/tmp/b/h.md");
        assert_eq!(
            interactive_command("claude", Some("/home/me/my app"), Path::new("/tmp/p.md"), Some(grant)),
            "cd '/home/me/my app' && claude --allowedTools 'Read(//tmp/b/h.md)' \"$(cat /tmp/p.md)\""
        );
        assert_eq!(
            interactive_command("codex", Some("/r"), Path::new("/tmp/p.md"), None),
            "codex --cd /r \"$(cat /tmp/p.md)\""
        );
        assert_eq!(
            headless_command("codex", Some("/r"), Path::new("/tmp/p.md"), None),
            "codex exec --cd /r - < /tmp/p.md"
        );
        assert_eq!(
            headless_command("claude", None, Path::new("p.md"), Some(grant)),
            "claude -p --allowedTools 'Read(//tmp/b/h.md)' < p.md"
        );
    }
}
