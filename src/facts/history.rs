//! A windowed state: the store loads only the runs after a base ordinal (and the handoffs
//! those runs and the target's coverage need) and summarizes the rest in a [`History`], so
//! that a dispatch's cost does not grow with the thread's history. The facts layer answers
//! every fact from the window plus the history exactly as it would from the whole thread, or
//! says it cannot ([`crate::facts::Facts::window_short`]); then the caller loads the whole
//! thread and decides again.

use crate::state::RunStatus;
use serde::{Deserialize, Serialize};

/// What a windowed state leaves out: its runs `1..=base`, summarized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    /// The state's `runs` start at `base + 1` (and run to the thread's last run).
    pub base: u32,
    /// Every run of the thread (the window's too), counted by provider thread, provider,
    /// status and whether it took a handoff: what eligibility, the target's thread and its
    /// coverage read.
    pub tally: Vec<Tally>,
    /// The runs at or before `base` whose status is not `completed`, oldest first (the
    /// eligible rule's trace lists excluded runs, and rolled-back runs never count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<PrefixRun>,
    /// The id the next handoff gets (the state holds only the handoffs the window needs).
    pub next_handoff_id: String,
    /// The thread's first run, without its items, when the time facts need it (it has a
    /// `started_at`, or was rolled back); `None` otherwise and for a window that starts at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<crate::state::Run>,
    /// The run at `base` (the target's last clean native run), without its items, when it has
    /// a time or a workspace for the time and workspace facts; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_last: Option<crate::state::Run>,
}

/// The runs of one (provider thread, provider, status, took a handoff) combination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tally {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The provider thread of the run.
    pub provider_thread: Option<String>,
    /// The provider of the run.
    pub provider: String,
    /// Its status.
    pub status: RunStatus,
    /// It consumed a handoff.
    pub has_handoff: bool,
    /// How many runs.
    pub runs: u32,
    /// The oldest and the newest of them.
    pub first: u32,
    /// The last run ordinal of the tally.
    pub last: u32,
}

/// A run before the window that is not `completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixRun {
    /// The run's ordinal.
    pub ordinal: u32,
    /// The provider of the run.
    pub provider: String,
    /// Its status.
    pub status: RunStatus,
    /// It consumed a handoff.
    pub has_handoff: bool,
}

/// A [`History`] with the eligibility of each of its combinations, as the policy's
/// `eligible` rule decides it (see `eval`). `None` where the rule cannot be decided per
/// combination (it reads the run's ordinal or items).
pub struct Window {
    pub history: History,
    pub tally_eligible: Vec<Option<bool>>,
    pub prefix_eligible: Vec<Option<bool>>,
}

impl Window {
    /// The eligible rows of the tally.
    pub(crate) fn eligible_rows(&self) -> impl Iterator<Item = &Tally> {
        self.history
            .tally
            .iter()
            .zip(&self.tally_eligible)
            .filter(|(_, e)| **e == Some(true))
            .map(|(t, _)| t)
    }

    /// Whether the history answers exactly: every combination's eligibility is known, and
    /// every excluded run before the window is listed (a `completed` combination that the rule
    /// excludes and that has runs before the window does not list them).
    pub(crate) fn complete(&self) -> bool {
        let base = self.history.base;
        self.tally_eligible.iter().all(Option::is_some)
            && self.prefix_eligible.iter().all(Option::is_some)
            && self
                .history
                .tally
                .iter()
                .zip(&self.tally_eligible)
                .all(|(t, e)| {
                    !(t.status == RunStatus::Completed && *e == Some(false) && t.first <= base)
                })
    }

    /// The eligible runs of the whole thread.
    pub(crate) fn eligible_count(&self) -> u64 {
        self.eligible_rows().map(|t| u64::from(t.runs)).sum()
    }

    /// The status of run `ordinal` at or before the base.
    pub(crate) fn prefix_status(&self, ordinal: u32) -> RunStatus {
        self.history
            .prefix
            .iter()
            .find(|p| p.ordinal == ordinal)
            .map(|p| p.status)
            .unwrap_or(RunStatus::Completed)
    }

    /// Ordinals of the runs at or before the base that the rule excludes, oldest first
    /// (complete only when [`Window::complete`] holds).
    pub(crate) fn prefix_excluded(&self) -> Vec<u32> {
        self.history
            .prefix
            .iter()
            .zip(&self.prefix_eligible)
            .filter(|(_, e)| **e != Some(true))
            .map(|(p, _)| p.ordinal)
            .collect()
    }
}
