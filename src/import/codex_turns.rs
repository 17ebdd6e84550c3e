//! Codex turns and the two forms of a message.
//!
//! A Codex rollout writes a user prompt (and an answer) as a `response_item` `message` and as
//! an `event_msg` (`user_message`, `agent_message`); recent builds (Codex Desktop, the IDE
//! extension, `cli_version` 0.128) write the prompt only as the event, and paginated rollouts
//! as an `item_completed` event. [`Twins`] keeps a message whichever form carries it and drops
//! the other forms when several do. [`Turns`] follows
//! the log's own turn markers (`task_started` / `turn_started` opens a turn, `task_complete` /
//! `turn_complete` / `turn_aborted` closes it): the first prompt of a turn starts a run, a
//! later one (the user steering the running turn) is a message of that run. A log without
//! markers (older builds) starts a run at every prompt.

/// Which form of a message an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// A `response_item` `message`.
    Item = 1,
    /// An `event_msg` (`user_message`, `agent_message`).
    Event = 2,
    /// An `event_msg` `item_completed` (`UserMessage`, `AgentMessage`: paginated rollouts).
    Completed = 4,
}

impl Form {
    fn bit(self) -> u8 {
        self as u8
    }
}

/// Messages kept, with the forms each was seen in, to recognise its other forms.
#[derive(Debug, Default)]
pub(crate) struct Twins {
    seen: Vec<(String, u8)>,
}

impl Twins {
    /// Whether `text` in `form` repeats a message already kept in the other form (then it is
    /// dropped); otherwise it is remembered and must be kept.
    pub(crate) fn is_echo(&mut self, text: &str, form: Form) -> bool {
        let key = normalise(text);
        // The same text; else one form holding the other and more (an `[image]` line, bytes
        // one form replaced), when the shorter is long enough to be no coincidence.
        let bit = form.bit();
        // The forms of one message are written close together: only the newest messages are
        // compared (bounded time and memory on long sessions).
        if self.seen.len() >= WINDOW {
            self.seen.drain(..WINDOW / 2);
        }
        let exact = self
            .seen
            .iter()
            .position(|(t, f)| f & bit == 0 && *t == key);
        let near = || {
            self.seen.iter().position(|(t, f)| {
                let (short, long) = if t.len() < key.len() {
                    (t.as_str(), key.as_str())
                } else {
                    (key.as_str(), t.as_str())
                };
                f & bit == 0 && short.chars().count() >= MIN_NEAR_CHARS && long.starts_with(short)
            })
        };
        if let Some(at) = exact.or_else(near) {
            if let Some((_, f)) = self.seen.get_mut(at) {
                *f |= bit;
            }
            return true;
        }
        self.seen.push((key, bit));
        false
    }
}

/// How many recent messages the forms of a message are looked for among.
const WINDOW: usize = 64;

/// The shortest text paired with a longer one that starts with it.
const MIN_NEAR_CHARS: usize = 20;

/// Whitespace runs as one space, trimmed: the two forms differ in trailing newlines.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where the next prompt goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PromptPlace {
    /// It starts a run.
    NewRun,
    /// It is a message of the running turn's run (the user steering it).
    SameRun,
}

/// The log's turn markers.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    /// Whether the log has turn markers at all.
    marked: bool,
    /// Whether the current turn already has its prompt.
    prompted: bool,
}

impl Turns {
    /// `task_started` / `turn_started`.
    pub(crate) fn started(&mut self) {
        self.marked = true;
        self.prompted = false;
    }

    /// `task_complete` / `turn_complete` / `turn_aborted`.
    pub(crate) fn ended(&mut self) {
        self.prompted = false;
    }

    /// Where a prompt read now goes.
    pub(crate) fn place_prompt(&mut self) -> PromptPlace {
        if self.marked && self.prompted {
            PromptPlace::SameRun
        } else {
            self.prompted = true;
            PromptPlace::NewRun
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_in_both_forms_is_kept_once_in_either_order() {
        let mut t = Twins::default();
        assert!(!t.is_echo("fix it\n", Form::Item));
        assert!(t.is_echo("fix it", Form::Event));
        assert!(!t.is_echo("again", Form::Event));
        assert!(t.is_echo("again", Form::Item));
        // The same words twice in one form are two messages.
        assert!(!t.is_echo("continue", Form::Event));
        assert!(!t.is_echo("continue", Form::Event));
        // One form with more in it (an image, replaced bytes).
        assert!(!t.is_echo("Review the OAuth flow for CSRF issues. caf\u{fffd}", Form::Item));
        assert!(t.is_echo("Review the OAuth flow for CSRF issues.", Form::Event));
        // Three forms of one answer are one answer.
        assert!(!t.is_echo("done", Form::Completed));
        assert!(t.is_echo("done", Form::Event));
        assert!(t.is_echo("done", Form::Item));
    }

    #[test]
    fn markers_decide_runs() {
        let mut t = Turns::default();
        assert_eq!(t.place_prompt(), PromptPlace::NewRun);
        assert_eq!(t.place_prompt(), PromptPlace::NewRun);
        t.started();
        assert_eq!(t.place_prompt(), PromptPlace::NewRun);
        assert_eq!(t.place_prompt(), PromptPlace::SameRun);
        t.ended();
        assert_eq!(t.place_prompt(), PromptPlace::NewRun);
    }
}
