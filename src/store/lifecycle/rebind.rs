//! A waiting merge-back bound to the run that takes it.
//!
//! A merge-back is made for the parent's next run before that run exists: for the provider of
//! the parent's latest live run, into the provider thread that run would resume. The run that
//! takes it may go elsewhere (the app dispatches the parent to another provider, or the policy
//! starts a new provider thread). Then the merge-back is decided and rendered again, at that
//! dispatch, for the run's provider and recorded against the run's provider thread (a new
//! handoff superseding the waiting one), so that its document speaks to the provider that
//! reads it and a later rollback marks the provider thread that really took it.

use super::merge_back::{fork_view, merge_back_summary};
use super::{decide, next_id, DispatchRequest, HandoffRecord};
use crate::decision::{Decision, ThreadAction};
use crate::engine::Engine;
use crate::eval::{DecisionContext, RecordIn, Waiting};
use crate::pipeline::Outcome;
use crate::policy::Strategy;
use crate::state::*;
use crate::store::io::Cx;
use crate::store::{StoreError, StoreErrorKind};
use rusqlite::OptionalExtension;

/// A waiting merge-back decided and rendered again for the run that takes it, not yet
/// recorded.
pub(super) struct Rebound {
    /// The waiting handoff it supersedes.
    pub old: String,
    /// The fork.
    pub fork: String,
    /// The merge-back's decision and rendering for the run.
    pub outcome: Outcome,
    /// What it was decided from, for the decision log.
    pub input: serde_json::Value,
}

impl Rebound {
    /// The new handoff's id.
    pub fn hid(&self) -> Option<&str> {
        self.outcome.decision.handoff_id.as_deref()
    }

    /// The context the run's own decision is made in: this merge-back waits for it.
    pub fn waiting(&self) -> Option<Waiting> {
        Some(Waiting {
            handoff_id: self.hid()?.to_string(),
            delivery: self.outcome.decision.delivery.clone(),
            pregrant: self.outcome.decision.pregrant.clone(),
        })
    }
}

/// The provider thread a run of `decision` goes into: the one it resumes, or the id the
/// thread it creates will get (`new_id`). None when it starts none.
pub(super) fn run_provider_thread(
    decision: &Decision,
    new_id: impl FnOnce() -> String,
) -> Option<String> {
    match decision.provider_thread.action {
        ThreadAction::Resume => decision.provider_thread.id.clone(),
        ThreadAction::Create | ThreadAction::ForkNative => Some(new_id()),
        ThreadAction::None => None,
    }
}

/// The provider a logged merge-back decision was made for; none when it was not logged (an
/// imported state).
fn made_for(cx: &Cx<'_>, thread: &str, hid: &str) -> Result<Option<String>, StoreError> {
    cx.conn
        .query_row(
            "SELECT json_extract(decision, '$.target') FROM decision_log
             WHERE thread = ?1 AND operation = 'merge_back'
               AND json_extract(decision, '$.handoff_id') = ?2
             ORDER BY id DESC LIMIT 1",
            rusqlite::params![thread, hid],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()
        .map(Option::flatten)
        .map_err(|e| cx.err("reading the merge-back's decision", e))
}

/// The waiting merge-back `(tid, hid)` of `state`, decided and rendered again for the run
/// `decision` starts on `req.target` into provider thread `run_pt`, when it was made for
/// another provider or another provider thread; `None` when it fits the run as it is (or the
/// run starts nothing, or the fork is gone).
#[allow(clippy::too_many_arguments)]
pub(super) fn rebind(
    cx: &Cx<'_>,
    path: &str,
    engine: &Engine,
    req: &DispatchRequest,
    state: &State,
    decision: &Decision,
    run_pt: Option<&str>,
    (tid, hid): (&str, &str),
) -> Result<Option<Rebound>, StoreError> {
    if decision.strategy == Strategy::Unsupported {
        return Ok(None);
    }
    let thread = state.thread.id.as_str();
    let Some(waiting) = state.handoffs.iter().find(|h| h.id == hid) else {
        return Ok(None);
    };
    let target = made_for(cx, thread, hid)?;
    if target.as_deref() == Some(req.target.as_str())
        && waiting.to_provider_thread.as_deref() == run_pt
    {
        return Ok(None);
    }
    let Some(t) = state.transfers.iter().find(|t| t.id == tid) else {
        return Ok(None);
    };
    let Some(fork) = t.source_thread.clone() else {
        return Ok(None);
    };
    let mut fork_state = match cx.load(&fork) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), StoreErrorKind::ThreadNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    // The fork as it was merged back: its runs up to the merge-back's last one.
    if let Some(last) = t.source_run {
        fork_state.runs.retain(|r| r.ordinal <= last);
    }
    // The new handoff's id: after the thread's handoffs and the run's own.
    let own = decision.handoff_id.as_deref().filter(|h| *h != hid);
    let count = state
        .handoffs
        .len()
        .saturating_add(usize::from(own.is_some()));
    let new_hid = next_id("H", count, |id| {
        own == Some(id) || state.handoffs.iter().any(|h| h.id == id)
    });
    let context = DecisionContext {
        record_in: Some(RecordIn {
            thread: thread.to_string(),
            run: decision.run,
            handoff_id: new_hid,
            provider_thread: match decision.provider_thread.action {
                ThreadAction::Resume => run_pt.map(str::to_string),
                _ => None,
            },
            bound_by_run: true,
        }),
        waiting: None,
        history: None,
    };
    // No message: the run's own message ends the run's one first-turn prompt.
    let view = fork_view(&fork_state, &req.target, None);
    let (outcome, input) = decide(engine, &view, &req.target, path, &context)?;
    if !outcome.decision.needs_handoff() || outcome.rendered.is_none() {
        return Ok(None);
    }
    Ok(Some(Rebound {
        old: hid.to_string(),
        fork,
        outcome,
        input,
    }))
}

/// The summary of a rebound merge-back (as `merge_back` writes it).
pub(super) fn summary(rebound: &Rebound) -> String {
    merge_back_summary(&rebound.fork, &rebound.outcome)
}

/// The run's one first-turn prompt: the merge-back's prompt (without a trailing label for a
/// message it does not carry) then the run's own handoff's prompt, which ends with the run's
/// message; the one handoff's prompt when there is one; the run's message when it takes none.
pub(super) fn one_prompt(
    own: Option<&HandoffRecord>,
    merge_back: Option<&HandoffRecord>,
    message: Option<&str>,
) -> Option<String> {
    match (own, merge_back) {
        (Some(h), None) | (None, Some(h)) => Some(h.inline.clone()),
        (Some(own), Some(m)) => {
            let head = m.inline.trim_end();
            // A template that labels the message (`User message:`) left the label with
            // nothing after it: the message comes once, at the end.
            let head = match head.rsplit_once('\n') {
                Some((before, last)) if last.trim_end().ends_with(':') => before.trim_end(),
                None if head.ends_with(':') => "",
                _ => head,
            };
            Some(if head.is_empty() {
                own.inline.clone()
            } else {
                format!("{head}\n\n{}", own.inline)
            })
        }
        (None, None) => message.filter(|m| !m.trim().is_empty()).map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(inline: &str) -> HandoffRecord {
        HandoffRecord {
            id: "H1".into(),
            document_path: None,
            inline: inline.into(),
            status: HandoffStatus::Ready,
            covered: RunRange { from: 1, to: 1 },
            covered_thread: None,
            strategy: HandoffStrategy::ForkDeltaSummary,
            transfer: None,
            supersedes: None,
        }
    }

    #[test]
    fn one_prompt_puts_the_merge_back_first_and_the_message_once_at_the_end() {
        let own = record("Read A.\n\nGo on.");
        let m = record("Read B.\n");
        assert_eq!(
            one_prompt(Some(&own), Some(&m), Some("Go on")).as_deref(),
            Some("Read B.\n\nRead A.\n\nGo on.")
        );
        let own = record("Context handoff (x):\nA\n\nUser message:\nGo on.");
        let m = record("Context handoff (merge_back / fork_delta_summary):\nB\n\nUser message:\n");
        assert_eq!(
            one_prompt(Some(&own), Some(&m), Some("Go on.")).as_deref(),
            Some("Context handoff (merge_back / fork_delta_summary):\nB\n\nContext handoff (x):\nA\n\nUser message:\nGo on.")
        );
        assert_eq!(one_prompt(None, None, Some("Hi")).as_deref(), Some("Hi"));
        assert_eq!(one_prompt(None, None, Some(" ")), None);
    }
}
