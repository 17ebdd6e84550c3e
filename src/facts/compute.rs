//! Computing fact values for one state and one target provider.

use super::{Fact, Value};
use crate::state::{
    caps_for, Item, ProviderThread, ProviderThreadStatus, RequestKind, ResolvedCaps, Run,
    RunStatus, State,
};
use super::history::Window;
use std::cell::{Cell, OnceCell, RefCell};

/// Measures the summary of a set of runs, in characters. The selector implements it with the
/// policy's `summary` rules; it is called only when a rule reads `summary.*`.
pub trait SummarySizer {
    fn chars(&self, facts: &Facts<'_>, runs: &[u32]) -> i64;
}

/// How facts reach their sizer: borrowed, or shared with whoever built the facts (the main
/// path keeps its sizer, `select::ReusingSizer`, to reuse the selection it sized).
#[derive(Clone)]
pub enum Sizer<'a> {
    Borrowed(&'a dyn SummarySizer),
    Shared(std::rc::Rc<dyn SummarySizer + 'a>),
}

impl Sizer<'_> {
    fn get(&self) -> &dyn SummarySizer {
        match self {
            Sizer::Borrowed(s) => *s,
            Sizer::Shared(s) => s.as_ref(),
        }
    }
}

/// One run, for `eligible` rules.
pub struct RunCtx<'a> {
    pub run: &'a Run,
}

/// One item of the state (or a synthetic checkpoint, handoff, compaction summary or fork
/// anchor item), for `summary` rules. Facts about the item's own fields are read from `item`;
/// only what depends on the other items (`superseded`, `latest`, `recency`) is stored.
#[derive(Debug, Clone)]
pub struct ItemCtx<'s> {
    pub kind: &'static str,
    pub id: String,
    pub run: u32,
    pub superseded: bool,
    pub latest: bool,
    pub recency: i64,
    /// For a failing command or tool call: whether a later item in the set resolved it
    /// (docs/facts.md, "Open problems").
    pub rerun_ok: bool,
    /// The state's item; `None` for synthetic items.
    pub item: Option<&'s Item>,
    /// Characters of a synthetic item's text (real items count their own).
    synthetic_chars: i64,
}

impl ItemCtx<'_> {
    /// Whether the item is an open problem (`item.open`).
    pub fn is_open(&self) -> bool {
        match self.item {
            Some(Item::Approval { resolved, .. }) => !resolved,
            Some(Item::Question { answered, .. }) => !answered,
            Some(i @ (Item::Command { .. } | Item::ToolCall { .. })) => {
                super::problems::failed(i) && !self.rerun_ok && !self.superseded
            }
            _ => false,
        }
    }

    /// Characters the item carries (text, output, diff).
    pub fn chars(&self) -> i64 {
        self.item
            .map(|i| i.char_len() as i64)
            .unwrap_or(self.synthetic_chars)
    }

    /// The value of an item fact (`None` for facts that are not about the item's fields).
    fn field(&self, fact: Fact) -> Value {
        use Value::*;
        let opt = |s: Option<&str>| Value::opt_str(s);
        match (fact, self.item) {
            (Fact::ItemDiffLines, Some(Item::FileChange { diff_lines, .. })) => {
                diff_lines.map(Int).unwrap_or(Null)
            }
            (Fact::ItemResolved, Some(Item::Approval { resolved, .. })) => Bool(*resolved),
            (Fact::ItemResolved, Some(Item::Question { answered, .. })) => Bool(*answered),
            (Fact::ItemResolved, Some(i @ (Item::Command { .. } | Item::ToolCall { .. }))) => {
                if super::problems::failed(i) {
                    Bool(self.rerun_ok)
                } else {
                    Null
                }
            }
            (Fact::ItemOpen, _) => Bool(self.is_open()),
            (Fact::ItemIsTest, Some(Item::Command { command, .. })) => {
                Bool(super::problems::is_test_command(command))
            }
            (Fact::ItemIsTest, _) => Bool(false),
            (Fact::ItemAnswered, Some(Item::Question { answered, .. })) => Bool(*answered),
            (Fact::ItemExitCode, Some(Item::Command { exit_code, .. })) => {
                exit_code.map(Int).unwrap_or(Null)
            }
            (Fact::ItemFailed, Some(Item::Command { exit_code, .. })) => {
                Bool(exit_code.map(|c| c != 0).unwrap_or(false))
            }
            (Fact::ItemFailed, Some(Item::ToolCall { status, .. })) => {
                Bool(*status == Some(crate::state::ToolStatus::Failed))
            }
            (Fact::ItemFailed, _) => Bool(false),
            (
                Fact::ItemOutputChars,
                Some(Item::Command { output, .. } | Item::ToolCall { output, .. }),
            ) => Int(output
                .as_deref()
                .map(|o| i64::try_from(o.chars().count()).unwrap_or(i64::MAX))
                .unwrap_or(0)),
            (Fact::ItemTool, Some(Item::ToolCall { tool, .. })) => opt(Some(tool)),
            (Fact::ItemPath, Some(Item::FileChange { path, .. })) => opt(Some(path)),
            (Fact::ItemAgent, Some(Item::SubagentResult { agent, .. })) => opt(Some(agent)),
            _ => Null,
        }
    }
}

/// The coverage of one provider thread: its native runs and the ranges of its live handoffs.
#[cfg(any(feature = "unstable", feature = "store"))]
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    pub provider_thread: String,
    pub native_runs: Vec<u32>,
    pub handoffs: Vec<CoveredBy>,
    /// The highest run covered, natively or by a handoff (rolled-back runs never count);
    /// 0 when none.
    pub last_seen: u32,
}

#[cfg(any(feature = "unstable", feature = "store"))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CoveredBy {
    pub handoff: String,
    pub from: u32,
    pub to: u32,
}

struct TargetView {
    last_seen: u32,
    runs_since_last_seen: i64,
    off_provider_runs: i64,
    native_runs: i64,
    chained_handoffs: i64,
}

/// The facts of one (state, target) pair.
pub struct Facts<'a> {
    pub state: &'a State,
    pub target: String,
    pub caps: ResolvedCaps,
    eligible: Vec<bool>,
    /// Ordinals of the eligible runs, oldest first (derived from `eligible` once).
    eligible_ordinals: Vec<u32>,
    target_thread: OnceCell<Option<&'a ProviderThread>>,
    view: OnceCell<TargetView>,
    sizer: Sizer<'a>,
    delta_chars: OnceCell<i64>,
    full_chars: OnceCell<i64>,
    outcome: RefCell<(Option<&'static str>, Option<&'static str>)>,
    /// For a windowed state: what the runs before the window were.
    window: Option<Window>,
    /// A fact was read that the window cannot answer exactly.
    short: Cell<bool>,
    /// The time and workspace facts (computed on first read).
    staleness: OnceCell<super::workspace::Staleness>,
}

impl<'a> Facts<'a> {
    /// `eligible[i]` says whether run `i+1` is eligible.
    pub fn new(
        state: &'a State,
        target: &str,
        eligible: Vec<bool>,
        sizer: Sizer<'a>,
    ) -> Facts<'a> {
        let mut eligible_ordinals = Vec::with_capacity(eligible.len());
        // A plain loop: the iterator chain (zip with an open range, filter, map) cost about
        // twice as many instructions per run at 10,000 runs (docs/performance.md).
        let mut ordinal = first_ordinal(state);
        for e in &eligible {
            if *e {
                eligible_ordinals.push(ordinal);
            }
            ordinal = ordinal.saturating_add(1);
        }
        Facts {
            state,
            target: target.to_string(),
            caps: caps_for(state, target),
            eligible,
            eligible_ordinals,
            target_thread: OnceCell::new(),
            view: OnceCell::new(),
            sizer,
            delta_chars: OnceCell::new(),
            full_chars: OnceCell::new(),
            outcome: RefCell::new((None, None)),
            window: None,
            short: Cell::new(false),
            staleness: OnceCell::new(),
        }
    }

    /// These facts on a windowed state (its runs start after `window.history.base`): facts
    /// about the whole thread are answered from the history. When the history cannot answer
    /// one exactly, [`Facts::window_short`] says so.
    pub fn with_window(mut self, window: Window) -> Facts<'a> {
        if !window.complete() {
            self.short.set(true);
        }
        self.window = Some(window);
        self
    }

    /// Whether these facts are on a windowed state and read something the window cannot
    /// answer exactly (then the decision must be made again on the whole thread).
    pub fn window_short(&self) -> bool {
        self.short.get()
    }

    fn fall_short(&self) {
        self.short.set(true);
    }

    /// The number of runs of the thread (the window's and those before it).
    pub fn run_count(&self) -> u32 {
        let len = u32::try_from(self.state.runs.len()).unwrap_or(u32::MAX);
        match &self.window {
            Some(w) => w.history.base.saturating_add(len),
            None => len,
        }
    }

    /// Run `ordinal` of the state (`None` before a window).
    pub fn run(&self, ordinal: u32) -> Option<&'a Run> {
        run_of(self.state, ordinal)
    }

    /// Whether run `ordinal` exists and was not rolled back.
    pub fn live(&self, ordinal: u32) -> bool {
        match &self.window {
            Some(w) if ordinal >= 1 && ordinal <= w.history.base => {
                w.prefix_status(ordinal) != RunStatus::RolledBack
            }
            _ => live_run(self.state, ordinal),
        }
    }

    /// Whether any run in `from..=to` was rolled back.
    pub fn any_rolled_back(&self, from: u32, to: u32) -> bool {
        // Only the runs in the range: ordinals run without gaps from the state's first.
        let first = first_ordinal(self.state);
        let start = from.saturating_sub(first) as usize;
        let end = to
            .checked_sub(first)
            .map_or(0, |t| (t as usize).saturating_add(1))
            .min(self.state.runs.len());
        let in_window = self
            .state
            .runs
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .any(|r| (from..=to).contains(&r.ordinal) && r.status == RunStatus::RolledBack);
        let before = self.window.as_ref().is_some_and(|w| {
            w.history
                .prefix
                .iter()
                .any(|p| (from..=to).contains(&p.ordinal) && p.status == RunStatus::RolledBack)
        });
        in_window || before
    }

    /// Whether the thread's compaction summary covers a rolled-back run.
    pub fn compact_summary_rolled_back(&self) -> bool {
        match &self.window {
            None => compact_summary_rolled_back(self.state),
            Some(_) => self.any_rolled_back(
                1,
                self.state.thread.compact_summary_through.unwrap_or(u32::MAX),
            ),
        }
    }

    /// Every eligible run, oldest first (on a windowed state, the window's: when runs before
    /// it are eligible too, the facts fall short).
    pub fn all_eligible_runs(&self) -> &[u32] {
        if let Some(w) = &self.window {
            let total = w.eligible_count();
            if total != self.eligible_ordinals.len() as u64 {
                self.fall_short();
            }
        }
        &self.eligible_ordinals
    }

    /// The eligible runs of the whole thread.
    fn eligible_count(&self) -> i64 {
        match &self.window {
            Some(w) => i64::try_from(w.eligible_count()).unwrap_or(i64::MAX),
            None => self.eligible_ordinals.len() as i64,
        }
    }

    /// These facts with `caps` as the target's capabilities instead of the state's (a
    /// policy's `providers` block resolved over them: `Policy::provider_caps`).
    pub fn with_caps(mut self, caps: ResolvedCaps) -> Facts<'a> {
        self.caps = caps;
        self
    }

    pub fn is_eligible(&self, ordinal: u32) -> bool {
        let first = first_ordinal(self.state);
        if ordinal < first {
            if let Some(w) = &self.window {
                let known = w
                    .history
                    .prefix
                    .iter()
                    .zip(&w.prefix_eligible)
                    .find(|(p, _)| p.ordinal == ordinal)
                    .and_then(|(_, e)| *e);
                if known.is_none() {
                    self.fall_short();
                }
                return known.unwrap_or(false);
            }
        }
        ordinal >= first
            && self
                .eligible
                .get((ordinal.saturating_sub(first)) as usize)
                .copied()
                .unwrap_or(false)
    }

    /// Ordinals of the eligible runs, oldest first (on a windowed state, the window's).
    pub fn eligible_runs(&self) -> &[u32] {
        &self.eligible_ordinals
    }

    /// The provider thread the target would resume (found on first use). A fork's first run
    /// resumes none: the provider threads it holds are the parent's, copied at fork time, and
    /// the child never resumes them (it forks one natively or creates its own).
    pub fn target_thread(&self) -> Option<&'a ProviderThread> {
        *self.target_thread.get_or_init(|| {
            if self.state.request.kind == RequestKind::Fork && self.state.thread.parent.is_some() {
                return None;
            }
            if let Some(w) = &self.window {
                return windowed_target_thread(self.state, w, &self.target);
            }
            find_target_thread(self.state, &self.target)
        })
    }

    /// The time and workspace facts for the target (docs/facts.md, "Time and workspace").
    /// On a windowed state whose window does not hold the target thread's last run, or the
    /// thread's first run for its age, the facts fall short.
    pub fn staleness(&self) -> &super::workspace::Staleness {
        self.staleness.get_or_init(|| {
            let before = self.window.as_ref().map(|w| {
                let h = &w.history;
                // A window that starts at run 1 has the first run in it.
                let first = if h.base == 0 {
                    self.state.runs.iter().find(|r| r.status != RunStatus::RolledBack)
                } else {
                    h.first_run.as_ref()
                };
                (first, h.target_last.as_ref())
            });
            super::workspace::staleness(self.state, before, self.target_thread())
        })
    }

    /// [`Facts::staleness`] for a fact a rule reads: on a windowed state that lacks a run
    /// they need, the facts fall short (the decision is made again on the whole thread).
    fn staleness_read(&self) -> &super::workspace::Staleness {
        let s = self.staleness();
        if let Some(w) = &self.window {
            // The target's last run is in the window or at its base (`target_last`); the
            // thread's first run is known unless it was rolled back (then the first live run
            // may lie before the window).
            let first_rolled_back = w
                .history
                .first_run
                .as_ref()
                .is_some_and(|r| r.status == RunStatus::RolledBack);
            if s.any && self.state.request.at.is_some() && first_rolled_back {
                self.fall_short();
            }
        }
        s
    }

    /// Record what the ladder and delivery decided, for `decision.*` and `delivery.*` facts.
    pub fn set_outcome(&self, strategy: Option<&'static str>, delivery: Option<&'static str>) {
        *self.outcome.borrow_mut() = (strategy, delivery);
    }

    fn view(&self) -> &TargetView {
        self.view.get_or_init(|| {
            if let Some(w) = &self.window {
                return self.windowed_view(w);
            }
            let cov = self
                .target_thread()
                .map(|pt| coverage_summary(self.state, &pt.id, |o| self.is_eligible(o)))
                .unwrap_or_default();
            let last_seen = cov.last_seen;
            let last_native = cov.last_native;
            let runs_since = self.eligible_after(last_seen).len() as i64;
            // The runs after the last native one: ordinals are contiguous in a state, so
            // they are the tail of `runs` (the filter still checks each ordinal).
            let after = usize::try_from(last_native.saturating_sub(first_ordinal(self.state)))
                .unwrap_or(usize::MAX);
            // A provider that never had a thread here has nothing to go stale: 0, as in the
            // windowed view.
            let off = match self.target_thread() {
                None => 0,
                Some(_) => self
                    .state
                    .runs
                    .get(after..)
                    .unwrap_or_default()
                    .iter()
                    .filter(|r| {
                        r.ordinal > last_native
                            && self.is_eligible(r.ordinal)
                            && r.provider != self.target
                    })
                    .count() as i64,
            };
            // A delta chain: every handoff into the thread since its last native run that took
            // none. A run that consumes a handoff is native too, so counting from the last
            // native run alone would never see a chain.
            let last_clean = cov.last_clean;
            let chained = match self.target_thread() {
                None => 0,
                Some(pt) => self
                    .state
                    .handoffs
                    .iter()
                    .filter(|h| {
                        h.status.is_live()
                            && same_id(h.to_provider_thread.as_deref(), &pt.id)
                            && h.target_run.unwrap_or(h.covered.to.saturating_add(1)) > last_clean
                    })
                    .count() as i64,
            };
            TargetView {
                last_seen,
                runs_since_last_seen: runs_since,
                off_provider_runs: off,
                native_runs: cov.native_runs as i64,
                chained_handoffs: chained,
            }
        })
    }

    /// The target's view from the history's tally and the window: its native runs from the
    /// tally, its handoffs and the runs after its last native run from the window. It falls
    /// short unless the target's last clean native run is at or after the base (then every
    /// handoff, run and count it reads is in the window).
    fn windowed_view(&self, w: &Window) -> TargetView {
        let base = w.history.base;
        let Some(pt) = self.target_thread() else {
            if base > 0 {
                self.fall_short();
            }
            return TargetView {
                last_seen: 0,
                runs_since_last_seen: self.eligible_count(),
                off_provider_runs: 0,
                native_runs: 0,
                chained_handoffs: 0,
            };
        };
        let native: Vec<&super::history::Tally> = w
            .eligible_rows()
            .filter(|t| {
                t.provider_thread.as_deref() == Some(pt.id.as_str())
                    && t.status != RunStatus::RolledBack
            })
            .collect();
        let native_runs: u64 = native.iter().map(|t| u64::from(t.runs)).sum();
        let last_native = native.iter().map(|t| t.last).max().unwrap_or(0);
        let last_clean = native
            .iter()
            .filter(|t| !t.has_handoff)
            .map(|t| t.last)
            .max()
            .unwrap_or(0);
        if last_clean < base {
            self.fall_short();
        }
        let mut last_seen = last_native;
        for h in &self.state.handoffs {
            if h.to_provider_thread.as_deref() == Some(pt.id.as_str())
                && h.status.is_live()
                && h.covers_own_runs(&self.state.thread.id)
                && h.covered.to > last_seen
            {
                let top = (h.covered.from.max(last_seen.saturating_add(1))..=h.covered.to)
                    .rev()
                    .find(|o| self.live(*o));
                last_seen = top.unwrap_or(last_seen);
            }
        }
        let runs_since = self.eligible_after(last_seen).len() as i64;
        let off = self
            .state
            .runs
            .iter()
            .filter(|r| {
                r.ordinal > last_native && self.is_eligible(r.ordinal) && r.provider != self.target
            })
            .count() as i64;
        let chained = self
            .state
            .handoffs
            .iter()
            .filter(|h| {
                h.status.is_live()
                    && h.to_provider_thread.as_deref() == Some(pt.id.as_str())
                    && h.target_run.unwrap_or(h.covered.to.saturating_add(1)) > last_clean
            })
            .count() as i64;
        TargetView {
            last_seen,
            runs_since_last_seen: runs_since,
            off_provider_runs: off,
            native_runs: i64::try_from(native_runs).unwrap_or(i64::MAX),
            chained_handoffs: chained,
        }
    }

    pub fn last_seen(&self) -> u32 {
        self.view().last_seen
    }

    /// Eligible runs after run `ordinal`.
    fn eligible_after(&self, ordinal: u32) -> &[u32] {
        let from = self.eligible_ordinals.partition_point(|o| *o <= ordinal);
        self.eligible_ordinals.get(from..).unwrap_or_default()
    }

    /// Eligible runs after the target's last seen run.
    pub fn delta_runs(&self) -> &[u32] {
        self.eligible_after(self.last_seen())
    }

    fn latest_checkpoint(&self) -> Option<&'a crate::state::Checkpoint> {
        self.state
            .checkpoints
            .iter()
            .filter(|c| self.live(c.run))
            .max_by_key(|c| c.run)
    }

    /// Run of the newest checkpoint of a live run (0 when none).
    pub fn latest_checkpoint_run(&self) -> u32 {
        self.latest_checkpoint().map(|c| c.run).unwrap_or(0)
    }

    fn fork_source(&self) -> Option<&'a Run> {
        let parent = self.state.thread.parent.as_ref()?;
        if parent.run < first_ordinal(self.state) && self.window.is_some() {
            self.fall_short();
        }
        self.run(parent.run)
    }

    /// The provider thread a native fork would fork from, when one is possible.
    pub fn fork_source_thread(&self) -> Option<&'a ProviderThread> {
        let run = self.fork_source()?;
        let pt_id = run.provider_thread.as_deref()?;
        self.state.provider_threads.iter().find(|p| p.id == pt_id)
    }

    fn fork_native_possible(&self) -> bool {
        let Some(run) = self.fork_source() else {
            return false;
        };
        run.provider == self.target
            && self.caps.native_fork
            && self
                .fork_source_thread()
                .map(|pt| pt.status == ProviderThreadStatus::Active && !pt.resume_failed)
                .unwrap_or(false)
    }

    /// The value of `fact` with the given run or item in scope.
    // Long by design: one arm per fact of the catalogue (`Fact`), each a line or two; the
    // match is exhaustive, so a new fact cannot be left without a value.
    #[allow(clippy::too_many_lines)]
    pub fn value(&self, fact: Fact, run: Option<&RunCtx<'_>>, item: Option<&ItemCtx>) -> Value {
        use Value::*;
        let s = self.state;
        let pt = self.target_thread();
        match fact {
            Fact::ThreadId => Str(s.thread.id.clone().into()),
            Fact::ThreadTitle => Value::opt_str(s.thread.title.as_deref()),
            Fact::ThreadRuns => Int(i64::from(self.run_count())),
            Fact::ThreadEligibleRuns => Int(self.eligible_count()),
            Fact::ThreadLastRun => Int(match &self.window {
                Some(w) => w.eligible_rows().map(|t| t.last).max().unwrap_or(0),
                None => self.eligible_ordinals.last().copied().unwrap_or(0),
            } as i64),
            Fact::ThreadProviders if self.window.is_some() => {
                let mut first: Vec<(u32, &str)> = Vec::new();
                for t in self.window.iter().flat_map(|w| w.eligible_rows()) {
                    match first.iter_mut().find(|(_, p)| *p == t.provider) {
                        Some(f) => f.0 = f.0.min(t.first),
                        None => first.push((t.first, t.provider.as_str())),
                    }
                }
                first.sort();
                List(first.into_iter().map(|(_, p)| Str(p.to_string().into())).collect())
            }
            Fact::ThreadProviders => {
                let mut seen: Vec<String> = Vec::new();
                for r in &s.runs {
                    if self.is_eligible(r.ordinal) && !seen.contains(&r.provider) {
                        seen.push(r.provider.clone());
                    }
                }
                List(seen.into_iter().map(|p| Str(p.into())).collect())
            }
            Fact::ThreadIsFork => Bool(s.thread.parent.is_some()),
            Fact::ThreadHasCompactSummary => Bool(
                s.thread
                    .compact_summary
                    .as_deref()
                    .map(|t| !t.trim().is_empty())
                    .unwrap_or(false)
                    && !self.compact_summary_rolled_back(),
            ),
            Fact::RequestProvider => Str(s.request.provider.clone().into()),
            Fact::RequestModel => Value::opt_str(s.request.model.as_deref()),
            Fact::RequestRuntimeMode => Value::opt_str(s.request.runtime_mode.as_deref()),
            Fact::RequestCleanContext => Bool(s.request.clean_context),
            Fact::RequestKind => Str(s.request.kind.as_str().into()),
            Fact::RequestMessageChars => Int(s
                .request
                .message
                .as_deref()
                .map(|m| m.chars().count())
                .unwrap_or(0) as i64),
            Fact::RequestRun => Int(i64::from(self.run_count()).saturating_add(1)),
            Fact::TargetProvider => Str(self.target.clone().into()),
            Fact::TargetHasThread => Bool(pt.is_some()),
            Fact::TargetThreadId => Value::opt_str(pt.map(|p| p.id.as_str())),
            Fact::TargetThreadModel => Value::opt_str(pt.and_then(|p| p.model.as_deref())),
            Fact::TargetThreadRuntimeMode => {
                Value::opt_str(pt.and_then(|p| p.runtime_mode.as_deref()))
            }
            Fact::TargetThreadStatus => Value::opt_str(pt.map(|p| p.status.as_str())),
            Fact::TargetThreadResumeFailed => match pt {
                Some(p) => Bool(p.resume_failed),
                None => Null,
            },
            Fact::TargetThreadFirstRun if self.window.is_some() => pt
                .and_then(|p| {
                    self.window
                        .iter()
                        .flat_map(|w| w.history.tally.iter())
                        .filter(|t| t.provider_thread.as_deref() == Some(p.id.as_str()))
                        .map(|t| t.first)
                        .min()
                })
                .map(|o| Int(i64::from(o)))
                .unwrap_or(Null),
            Fact::TargetThreadFirstRun => pt
                .and_then(|p| {
                    s.runs
                        .iter()
                        .find(|r| r.provider_thread.as_deref() == Some(p.id.as_str()))
                })
                .map(|r| Int(i64::from(r.ordinal)))
                .unwrap_or(Null),
            Fact::TargetIdleSeconds => self.staleness_read().idle_seconds.map(Int).unwrap_or(Null),
            Fact::ThreadAgeSeconds => self.staleness_read().age_seconds.map(Int).unwrap_or(Null),
            Fact::WorkspaceCwdChanged => self.staleness_read().cwd_changed.map(Bool).unwrap_or(Null),
            Fact::WorkspaceBranchChanged => {
                self.staleness_read().branch_changed.map(Bool).unwrap_or(Null)
            }
            Fact::WorkspaceHeadMoved => self.staleness_read().head_moved.map(Bool).unwrap_or(Null),
            Fact::WorkspaceCommitsSinceTarget => self
                .staleness()
                .commits
                .map(|c| Int(i64::try_from(c).unwrap_or(i64::MAX)))
                .unwrap_or(Null),
            Fact::WorkspaceFilesChangedOutside => match &self.staleness_read().files_outside {
                Some(files) => List(files.iter().map(|f| Str(f.clone().into())).collect()),
                None => Null,
            },
            Fact::WorkspaceFilesChangedOutsideCount => {
                self.staleness_read().files_outside_count.map(Int).unwrap_or(Null)
            }
            Fact::TargetLastSeen => Int(self.view().last_seen as i64),
            Fact::TargetRunsSinceLastSeen => Int(self.view().runs_since_last_seen),
            Fact::TargetOffProviderRuns => Int(self.view().off_provider_runs),
            Fact::TargetNativeRuns => Int(self.view().native_runs),
            Fact::TargetChainedHandoffs => Int(self.view().chained_handoffs),
            Fact::TargetCapsResume => Bool(self.caps.resume),
            Fact::TargetCapsNativeFork => Bool(self.caps.native_fork),
            Fact::TargetCapsRollback => Bool(self.caps.rollback),
            Fact::TargetCapsAcceptsHandoff => Bool(self.caps.accepts_handoff),
            Fact::TargetCapsHandoffChannel => Str(self.caps.handoff_channel.as_str().into()),
            Fact::TargetCapsFileRead => Bool(self.caps.file_read),
            Fact::TargetCapsSummarize => Bool(self.caps.summarize),
            Fact::TargetCapsMaxInputChars => {
                Int(i64::try_from(self.caps.max_input_chars_per_turn).unwrap_or(i64::MAX))
            }
            Fact::SummaryDeltaChars => Int(*self
                .delta_chars
                .get_or_init(|| self.sizer.get().chars(self, self.delta_runs()))),
            Fact::SummaryFullChars => Int(*self
                .full_chars
                .get_or_init(|| self.sizer.get().chars(self, self.all_eligible_runs()))),
            Fact::CheckpointLatest => {
                Int(self.latest_checkpoint().map(|c| c.run).unwrap_or(0) as i64)
            }
            Fact::CheckpointFilesChanged => Int(self
                .latest_checkpoint()
                .map(|c| c.files_changed)
                .unwrap_or(0) as i64),
            Fact::ForkAnchorRole => {
                Value::opt_str(s.request.fork_anchor.as_ref().map(|a| a.role.as_str()))
            }
            Fact::ForkSourceRun => Int(s.thread.parent.as_ref().map(|p| p.run).unwrap_or(0) as i64),
            Fact::ForkSourceProvider => {
                Value::opt_str(self.fork_source().map(|r| r.provider.as_str()))
            }
            Fact::ForkNativePossible => Bool(self.fork_native_possible()),
            Fact::RunOrdinal => run.map(|r| Int(r.run.ordinal as i64)).unwrap_or(Null),
            Fact::RunProvider => run
                .map(|r| Str(r.run.provider.clone().into()))
                .unwrap_or(Null),
            Fact::RunStatus => run
                .map(|r| Str(r.run.status.as_str().into()))
                .unwrap_or(Null),
            Fact::RunItems => run.map(|r| Int(r.run.items.len() as i64)).unwrap_or(Null),
            Fact::RunHasHandoff => run.map(|r| Bool(r.run.handoff.is_some())).unwrap_or(Null),
            Fact::ItemKind => item.map(|i| Str(i.kind.into())).unwrap_or(Null),
            Fact::ItemId => item.map(|i| Str(i.id.clone().into())).unwrap_or(Null),
            Fact::ItemRun => item.map(|i| Int(i.run as i64)).unwrap_or(Null),
            Fact::ItemSuperseded => item.map(|i| Bool(i.superseded)).unwrap_or(Null),
            Fact::ItemLatest => item.map(|i| Bool(i.latest)).unwrap_or(Null),
            Fact::ItemRecency => item.map(|i| Int(i.recency)).unwrap_or(Null),
            Fact::ItemChars => item.map(|i| Int(i.chars())).unwrap_or(Null),
            Fact::ItemDiffLines
            | Fact::ItemResolved
            | Fact::ItemOpen
            | Fact::ItemIsTest
            | Fact::ItemOutputChars
            | Fact::ItemAnswered
            | Fact::ItemExitCode
            | Fact::ItemFailed
            | Fact::ItemTool
            | Fact::ItemPath
            | Fact::ItemAgent => item.map(|i| i.field(fact)).unwrap_or(Null),
            Fact::DecisionStrategy => Value::opt_str(self.outcome.borrow().0),
            Fact::DeliveryOffBand => Bool(self.outcome.borrow().1 == Some("off_band")),
            Fact::DeliveryInline => Bool(self.outcome.borrow().1 == Some("inline")),
            Fact::DeliveryMode => Value::opt_str(self.outcome.borrow().1),
        }
    }
}

/// The provider thread baton would resume for `provider`: the newest non-closed one, judged by
/// the last run that used it, else by declaration order.
pub fn find_target_thread<'a>(state: &'a State, provider: &str) -> Option<&'a ProviderThread> {
    let open =
        |p: &&ProviderThread| p.provider == provider && p.status != ProviderThreadStatus::Closed;
    let closed: std::collections::HashSet<&str> = state
        .provider_threads
        .iter()
        .filter(|p| p.provider == provider && p.status == ProviderThreadStatus::Closed)
        .map(|p| p.id.as_str())
        .collect();
    // The newest run on an open thread of the provider names the thread; one reverse scan that
    // usually stops within a few runs.
    let newest = state.runs.iter().rev().find_map(|r| {
        let id = r.provider_thread.as_deref()?;
        (r.provider == provider && (closed.is_empty() || !closed.contains(id))).then_some(id)
    });
    match newest {
        Some(id) => state
            .provider_threads
            .iter()
            .filter(open)
            .find(|p| p.id == id),
        None => state.provider_threads.iter().rfind(open),
    }
}

/// [`find_target_thread`] on a windowed state: the newest run of the provider on one of its
/// open threads, from the history's tally.
fn windowed_target_thread<'a>(
    state: &'a State,
    w: &Window,
    provider: &str,
) -> Option<&'a ProviderThread> {
    let open =
        |p: &&ProviderThread| p.provider == provider && p.status != ProviderThreadStatus::Closed;
    let closed = |id: &str| {
        state
            .provider_threads
            .iter()
            .any(|p| p.id == id && p.provider == provider && p.status == ProviderThreadStatus::Closed)
    };
    let newest = w
        .history
        .tally
        .iter()
        .filter(|t| t.provider == provider)
        .filter_map(|t| Some((t.last, t.provider_thread.as_deref()?)))
        .filter(|(_, id)| !closed(id))
        .max_by_key(|(last, _)| *last)
        .map(|(_, id)| id);
    match newest {
        Some(id) => state
            .provider_threads
            .iter()
            .filter(open)
            .find(|p| p.id == id),
        None => state.provider_threads.iter().rfind(open),
    }
}

/// The ordinal of the state's first run (runs are contiguous: a windowed state's start after
/// its base, a whole state's at 1).
fn first_ordinal(state: &State) -> u32 {
    state.runs.first().map(|r| r.ordinal).unwrap_or(1)
}

/// Run `ordinal` of the state, whole or windowed (`None` when it is not in the state).
pub fn run_of(state: &State, ordinal: u32) -> Option<&Run> {
    let first = first_ordinal(state);
    let i = ordinal.checked_sub(first)?;
    state.runs.get(i as usize).filter(|r| r.ordinal == ordinal)
}

/// Whether the thread's compaction summary covers a rolled-back run (one without
/// `compact_summary_through` covers every run).
pub fn compact_summary_rolled_back(state: &State) -> bool {
    let through = state.thread.compact_summary_through.unwrap_or(u32::MAX);
    state
        .runs
        .iter()
        .any(|r| r.ordinal <= through && r.status == RunStatus::RolledBack)
}

/// Whether run `ordinal` exists and was not rolled back.
fn live_run(state: &State, ordinal: u32) -> bool {
    run_of(state, ordinal)
        .map(|r| r.status != RunStatus::RolledBack)
        .unwrap_or(false)
}

/// Coverage of provider thread `pt`: native runs that are `eligible` and not rolled back, plus
/// the ranges of its ready handoffs (superseded ones never count).
#[cfg(any(feature = "unstable", feature = "store"))]
pub fn coverage(state: &State, pt: &str, eligible: impl Fn(u32) -> bool) -> Coverage {
    let mut cov = Coverage {
        provider_thread: pt.to_string(),
        ..Default::default()
    };
    for r in &state.runs {
        if r.provider_thread.as_deref() == Some(pt)
            && eligible(r.ordinal)
            && live_run(state, r.ordinal)
        {
            cov.native_runs.push(r.ordinal);
        }
    }
    cov.last_seen = cov.native_runs.last().copied().unwrap_or(0);
    for h in &state.handoffs {
        // A merge-back's coverage is the fork's runs, not this thread's.
        if h.to_provider_thread.as_deref() == Some(pt)
            && h.status.is_live()
            && h.covers_own_runs(&state.thread.id)
        {
            cov.handoffs.push(CoveredBy {
                handoff: h.id.clone(),
                from: h.covered.from,
                to: h.covered.to,
            });
            // The highest live run of the range (rolled-back runs never count).
            if h.covered.to > cov.last_seen {
                let top = (h.covered.from.max(cov.last_seen.saturating_add(1))..=h.covered.to)
                    .rev()
                    .find(|o| live_run(state, *o));
                cov.last_seen = top.unwrap_or(cov.last_seen);
            }
        }
    }
    cov
}

/// What a decision needs of a provider thread's [`coverage`], computed without collecting
/// its runs and handoffs.
#[derive(Default)]
struct CoverageSummary {
    /// [`Coverage::last_seen`].
    last_seen: u32,
    /// The last of [`Coverage::native_runs`] (0 when none).
    last_native: u32,
    /// How many native runs.
    native_runs: usize,
    /// The last native run that took no handoff (0 when none).
    last_clean: u32,
}

/// Whether `id` is `Some(want)`, compared in place: the ids compared per run and per handoff
/// are a few bytes, and `==` on them called `memcmp` for every run of the thread (about a
/// fifth of a decision's instructions at 10,000 runs, docs/performance.md).
#[inline]
fn same_id(id: Option<&str>, want: &str) -> bool {
    id.is_some_and(|id| {
        id.len() == want.len() && id.bytes().zip(want.bytes()).all(|(a, b)| a == b)
    })
}

/// [`coverage`], summarised: the same runs and handoffs, the same order, nothing collected.
fn coverage_summary(state: &State, pt: &str, eligible: impl Fn(u32) -> bool) -> CoverageSummary {
    let mut cov = CoverageSummary::default();
    for r in &state.runs {
        if same_id(r.provider_thread.as_deref(), pt)
            && eligible(r.ordinal)
            && live_run(state, r.ordinal)
        {
            cov.last_native = r.ordinal;
            cov.native_runs = cov.native_runs.saturating_add(1);
            if r.handoff.is_none() {
                cov.last_clean = r.ordinal;
            }
        }
    }
    cov.last_seen = cov.last_native;
    for h in &state.handoffs {
        if same_id(h.to_provider_thread.as_deref(), pt)
            && h.status.is_live()
            && h.covers_own_runs(&state.thread.id)
            && h.covered.to > cov.last_seen
        {
            let top = (h.covered.from.max(cov.last_seen.saturating_add(1))..=h.covered.to)
                .rev()
                .find(|o| live_run(state, *o));
            cov.last_seen = top.unwrap_or(cov.last_seen);
        }
    }
    cov
}

/// Item facts for a synthetic item (compaction summary, fork anchor, checkpoint, handoff).
pub fn synthetic_item(kind: &'static str, id: String, run: u32, chars: i64) -> ItemCtx<'static> {
    ItemCtx {
        kind,
        id,
        run,
        superseded: false,
        latest: false,
        recency: 0,
        rerun_ok: false,
        item: None,
        synthetic_chars: chars,
    }
}

fn text_chars(t: Option<&str>) -> i64 {
    t.map(|t| t.chars().count()).unwrap_or(0) as i64
}

/// Item facts for every item of the given runs (plus synthetic checkpoint and handoff items),
/// in source order. `superseded` and `latest` are judged within this set.
pub fn item_contexts<'s>(state: &'s State, runs: &[u32]) -> Vec<ItemCtx<'s>> {
    let handoffs = CoveredHandoffs::of(state, runs);
    let mut out: Vec<ItemCtx<'s>> = Vec::new();
    for &o in runs {
        let Some(run) = run_of(state, o) else {
            continue;
        };
        // A handoff carries what it says in its `summary`; one without (every handoff a
        // dispatch makes) adds nothing its runs do not, and is no entry.
        if let Some(hd) = run
            .handoff
            .as_deref()
            .and_then(|h| handoffs.taken(h))
            .filter(|h| h.summary.as_deref().is_some_and(|t| !t.trim().is_empty()))
        {
            let chars = text_chars(hd.summary.as_deref());
            out.push(synthetic_item("handoff", hd.id.clone(), o, chars));
        }
        // A fork's merge-back the run took beside a handoff of its own.
        for hd in handoffs.beside(o).filter(|h| {
            h.status.is_live()
                && !h.covers_own_runs(&state.thread.id)
                && run.handoff.as_deref() != Some(h.id.as_str())
        }) {
            let chars = text_chars(hd.summary.as_deref());
            out.push(synthetic_item("handoff", hd.id.clone(), o, chars));
        }
        for (i, item) in run.items.iter().enumerate() {
            out.push(ItemCtx {
                kind: item.kind(),
                id: crate::state::item_id(item, o, i),
                run: o,
                superseded: false,
                latest: false,
                recency: 0,
                rerun_ok: false,
                item: Some(item),
                synthetic_chars: 0,
            });
        }
        for c in state.checkpoints.iter().filter(|c| c.run == o) {
            let chars = text_chars(c.diff_summary.as_deref());
            out.push(synthetic_item(
                "checkpoint",
                format!("checkpoint.{o}"),
                o,
                chars,
            ));
        }
    }
    mark_superseded_and_latest(&mut out);
    super::problems::mark_resolved(&mut out);
    out
}

/// The handoffs the items of some runs name: the one each of those runs took, and those
/// whose `target_run` is one of them (a fork's merge-back taken beside a handoff of its own).
/// Found in one pass over the thread's handoffs that keeps only these, so that the few runs
/// of a delta in a long thread index a few handoffs, not every one.
struct CoveredHandoffs<'s> {
    /// The ids the runs took, sorted, each with the handoff of that id (the last one).
    taken: Vec<(&'s str, Option<&'s crate::state::Handoff>)>,
    /// (target run, handoff) for each handoff whose target run is one of the runs, by
    /// target run, in the thread's order within a run.
    beside: Vec<(u32, &'s crate::state::Handoff)>,
}

impl<'s> CoveredHandoffs<'s> {
    fn of(state: &'s State, runs: &[u32]) -> CoveredHandoffs<'s> {
        let mut taken: Vec<(&str, Option<&crate::state::Handoff>)> = runs
            .iter()
            .filter_map(|&o| run_of(state, o)?.handoff.as_deref())
            .map(|h| (h, None))
            .collect();
        taken.sort_unstable_by_key(|(h, _)| *h);
        taken.dedup_by_key(|(h, _)| *h);
        // Which ordinals are among `runs` (a handoff outside their range is one comparison).
        let mut sorted = runs.to_vec();
        sorted.sort_unstable();
        let range = sorted.first().copied().unwrap_or(1)..=sorted.last().copied().unwrap_or(0);
        let is_covered = |o: u32| range.contains(&o) && sorted.binary_search(&o).is_ok();
        let mut beside = Vec::new();
        for h in &state.handoffs {
            if !taken.is_empty() {
                if let Ok(i) = taken.binary_search_by_key(&h.id.as_str(), |(id, _)| *id) {
                    if let Some((_, slot)) = taken.get_mut(i) {
                        *slot = Some(h);
                    }
                }
            }
            if let Some(o) = h.target_run.filter(|o| is_covered(*o)) {
                beside.push((o, h));
            }
        }
        // Stable: the thread's order within a run.
        beside.sort_by_key(|(o, _)| *o);
        CoveredHandoffs { taken, beside }
    }

    /// The handoff of id `id`, when one of the runs took it.
    fn taken(&self, id: &str) -> Option<&'s crate::state::Handoff> {
        let i = self.taken.binary_search_by_key(&id, |(h, _)| *h).ok()?;
        self.taken.get(i).and_then(|(_, h)| *h)
    }

    /// The handoffs whose target run is `run`, in the thread's order.
    fn beside(&self, run: u32) -> impl Iterator<Item = &'s crate::state::Handoff> + '_ {
        let start = self.beside.partition_point(|(o, _)| *o < run);
        self.beside
            .get(start..)
            .unwrap_or_default()
            .iter()
            .take_while(move |(o, _)| *o == run)
            .map(|(_, h)| *h)
    }
}

fn mark_superseded_and_latest(items: &mut [ItemCtx<'_>]) {
    use std::borrow::Cow;
    use std::collections::HashSet;
    let mut seen_cmd: HashSet<Cow<str>> = HashSet::new();
    let mut seen_tool: HashSet<(&str, &str)> = HashSet::new();
    // A handful of kinds: a list beats hashing every item's kind.
    let mut per_kind: Vec<(&'static str, i64)> = Vec::with_capacity(16);
    for ctx in items.iter_mut().rev() {
        let n = match per_kind.iter_mut().find(|(k, _)| *k == ctx.kind) {
            Some((_, n)) => n,
            None => {
                per_kind.push((ctx.kind, 0));
                match per_kind.last_mut() {
                    Some((_, n)) => n,
                    None => continue,
                }
            }
        };
        ctx.recency = *n;
        ctx.latest = *n == 0;
        *n = n.saturating_add(1);
        ctx.superseded = match ctx.item {
            Some(Item::Command { command, .. }) => {
                // The same command line, whatever its spacing.
                let key = single_spaced(command);
                !seen_cmd.insert(key)
            }
            Some(Item::ToolCall { tool, input, .. }) => {
                !seen_tool.insert((tool.as_str(), input.as_deref().unwrap_or("")))
            }
            _ => false,
        };
    }
}

/// `text` with every whitespace run as one space and no space at either end; borrowed when it
/// already is.
fn single_spaced(text: &str) -> std::borrow::Cow<'_, str> {
    let clean = text.trim() == text
        && !text.contains("  ")
        && !text.contains(|c: char| c.is_whitespace() && c != ' ');
    if clean {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}
