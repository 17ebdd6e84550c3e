//! Selection: which items of the covered runs go into the handoff, in which section and form,
//! under the text rule and the budget.
//!
//! Public entry point: [`select`]. Exclusion always wins over inclusion; hidden reasoning is
//! never included, whatever the policy says (the checker also rejects `include reasoning`).

mod files;
pub mod ladder;

pub use crate::cut::{fenced, one_line, prose, thousands, Cut};
// Baton's own benches and tests reach them here (`unstable`); the entry formats use `cut`'s.
#[cfg(feature = "unstable")]
pub use crate::cut::{code_span, escape_controls};
#[cfg(any(test, feature = "unstable"))]
pub use crate::cut::{head, head_tail, tail};
#[cfg(any(feature = "unstable", feature = "cli", feature = "lsp"))]
pub use files::display_path;
pub use crate::entry::{compact, cut_at_whitespace, keep_tail};

use crate::decision::Decision;
use crate::entry::{ceiling_input_bound, entry_text, role_label, Texts};
use crate::eval::item_holds;
use crate::facts::{
    item_contexts, synthetic_item, Fact, Facts, ItemCtx, SummarySizer,
};
use crate::policy::check::BUILTIN_SECTIONS;
use crate::policy::{CExclude, CInclude, CSummary, CTextCut, Form, Policy};
use crate::state::{Item, RequestKind, State};
use serde::Serialize;
use std::sync::{Arc, OnceLock};

/// One line (or block) of a section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The item's id.
    pub id: String,
    /// The item's kind.
    pub kind: &'static str,
    /// The run it is from.
    pub run: u32,
    /// Its text, as the section shows it.
    pub text: String,
    /// The budget cut this entry short.
    pub truncated: bool,
    /// A degradation step shortened this entry (its whole text is in the transcript of an
    /// off-band handoff).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    /// What the next provider must act on (never cut by a text rule, never dropped to fit a
    /// budget): the latest user message, an open question or approval, the last failing
    /// command.
    pub must_keep: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
/// A section of the handoff: its entries in order.
pub struct Section {
    /// The section's name (`goals`, ...).
    pub name: String,
    /// Its title.
    pub title: String,
    /// Its entries.
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
/// An item left out of the handoff.
pub struct Omitted {
    /// The item's id.
    pub id: String,
    /// The item's kind.
    pub kind: &'static str,
    /// Why it was left out.
    pub reason: String,
}

/// What the selector chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Non-empty sections in document order.
    pub sections: Vec<Section>,
    /// Shared with the provenance of the rendered handoff (never copied).
    pub included: Arc<Vec<String>>,
    /// Every item left out, with the reason; shared like `included`.
    pub omitted: Arc<Vec<Omitted>>,
    /// Characters of every entry's text.
    pub chars: usize,
    /// The summary block's character budget, if any.
    pub budget: Option<usize>,
    /// Changed files the budget counts per directory instead of naming (`degrade count
    /// file_change`), and how many files were grouped by directory: (counted, grouped).
    /// (0, 0) when no file is counted. Never serialised.
    #[serde(skip)]
    pub files_counted: (usize, usize),
    /// What redaction did to the selection (docs/redaction.md); never serialised (the
    /// summarizer's input carries the redacted texts, not this).
    #[serde(skip)]
    pub redaction: Redaction,
}

/// What the redaction pass did to a selection (docs/redaction.md): the texts outside the
/// entries that the handoff shows (title, fork anchor), redacted in the same context, what was
/// redacted in the items the handoff carries, and why redaction could not run if it could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// The handoff's redaction context (the numbers given so far): anything else built from
    /// this selection (a transcript of omitted items) redacts through a clone of it
    /// (`redact::redact`), so the same secret keeps its number.
    pub context: crate::redact::Context,
    /// The thread's title, redacted.
    pub title: Option<String>,
    /// The fork anchor's text, redacted.
    pub anchor: Option<String>,
    /// Per rule, in rule order: distinct secrets replaced, and the ids of the items (of those
    /// the handoff carries; `thread.title` for the title) that held them.
    pub report: Vec<crate::redact::RedactionReport>,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction {
            context: crate::redact::Context::with(None),
            title: None,
            anchor: None,
            report: Vec::new(),
        }
    }
}

impl Redaction {
    /// Start the redaction of one handoff under `policy`: the title first, then the fork
    /// anchor, so their secrets get the first numbers.
    fn start(policy: &Policy, state: &State) -> Redaction {
        let mut context = crate::redact::Context::with(policy.redact.redactor.clone());
        let title = state
            .thread
            .title
            .as_deref()
            .map(|t| context.text(TITLE_ID, t).into_owned());
        let anchor = match (state.request.kind, &state.request.fork_anchor) {
            (RequestKind::Fork, Some(a)) => Some(context.text("fork_anchor", &a.text).into_owned()),
            _ => None,
        };
        Redaction {
            context,
            title,
            anchor,
            report: Vec::new(),
        }
    }

    /// Why redaction could not run for this selection, if it could not: the handoff must not
    /// be written or delivered.
    pub fn failure(&self) -> Option<&crate::redact::RedactError> {
        self.context.failure()
    }

    /// Fill `report` for the items the handoff carries (and the title).
    fn finish(&mut self, included: &[String]) {
        let ids: std::collections::HashSet<&str> = included.iter().map(String::as_str).collect();
        self.report = self
            .context
            .report(|id| id == TITLE_ID || ids.contains(id));
    }
}

/// The item id redaction reports for the thread's title.
pub const TITLE_ID: &str = "thread.title";

impl Summary {
    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }
}

struct Candidate<'s> {
    ctx: ItemCtx<'s>,
    /// Index into the document's section order.
    section: usize,
    form: Form,
    text: String,
    /// Items merged into this entry (the other changes of an aggregated file).
    merged: Vec<String>,
    must_keep: bool,
    /// Characters of the role label `text` starts with (`User: `, `User:\n`), kept when a
    /// newest-first budget cuts the entry to its newest words; 0 when it has none.
    label: usize,
    /// Characters the entry costs the budget beyond its text: 2 for a transcript block (the
    /// blank line that joins it to the next), else 0.
    sep: usize,
    /// A degradation step changed its text.
    degraded: bool,
}

/// Changes a budget's degradation steps make to selection (docs/rendering.md#budgets). The
/// default changes nothing. Must-keep items are never dropped or cut by any of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Degrade {
    /// Kinds left out (`degrade drop KIND`).
    pub drop_kinds: Vec<String>,
    /// Kinds whose texts are cut to their tail (`degrade tail KIND N`).
    pub tail: Vec<(String, usize)>,
    /// Kinds shown as paths (`degrade paths file_change`).
    pub paths: Vec<String>,
    /// Runs before this ordinal are left out (`degrade drop_oldest_runs`).
    pub drop_runs_before: Option<u32>,
    /// Every text cut to `head_tail N` (`degrade shorten N`).
    pub shorten: Option<usize>,
    /// Only must-keep items stay (the last resort).
    pub must_keep_only: bool,
    /// Steps that reach only the oldest runs: a step's label (`tail command 400`) and the
    /// first run it leaves alone. A step not listed reaches every run.
    pub reach: Vec<(String, u32)>,
    /// Kinds whose successful outputs are left out (`degrade drop_output KIND`).
    pub drop_output: Vec<String>,
    /// Kinds whose texts are cut to their first line (`degrade first_line KIND`).
    pub first_line: Vec<String>,
    /// Kinds counted instead of shown (`degrade count KIND`).
    pub count: Vec<String>,
    /// Kinds grouped by directory (`degrade group file_change`).
    pub group: Vec<String>,
    /// Ids no step leaves out (they may still be cut): what the delta a full handoff replaces
    /// would have carried (docs/rendering.md#budgets).
    pub keep: std::collections::BTreeSet<String>,
    /// Where the items the budget leaves out or cuts can be read whole (the transcript's
    /// path), named by count lines; `None`: they are not sent.
    pub transcript: Option<String>,
    /// The policy's `head`, `tail` and `head_tail` text rules apply (`text_rules`, the first
    /// step over the limit; within its reach, see [`Degrade::reach`]). Without it every text
    /// those rules govern is whole: text rules are ceilings that cut only when the budget
    /// binds (docs/rendering.md#cutting-text).
    pub ceilings: bool,
}

/// The label of the step that applies the text rules' ceilings (in [`Degrade::reach`] and
/// the budget's trace).
pub use crate::policy::TEXT_RULES;

impl Degrade {
    /// Whether the step labelled `label` reaches `run`.
    pub fn reaches(&self, label: &str, run: u32) -> bool {
        (self.reach.iter().rev())
            .find(|(l, _)| l == label)
            .is_none_or(|(_, before)| run < *before)
    }

    /// Whether the text rules' ceilings apply to the texts of `run`.
    pub fn ceiling_applies(&self, run: u32) -> bool {
        self.ceilings && self.reaches(TEXT_RULES, run)
    }

    /// No change but the text rules' ceilings, applied to every run: the selection sized by
    /// `summary.*` facts (what the text rules bring the texts down to before the budget
    /// leaves any item out).
    pub fn with_ceilings() -> Degrade {
        Degrade {
            ceilings: true,
            ..Degrade::default()
        }
    }

    /// Whether the step `VERB KIND` of `list` applies to an item of `kind` in `run`.
    fn applies(&self, list: &[String], verb: &str, kind: &str, run: u32) -> bool {
        list.iter().any(|k| k == kind) && self.reaches(&format!("{verb} {kind}"), run)
    }

    /// Why an item that is not must-keep is left out under these changes, if it is.
    fn drops(&self, kind: &str, run: u32) -> Option<String> {
        if self.must_keep_only {
            return Some("dropped to fit the budget: must-keep items only".into());
        }
        if self.applies(&self.drop_kinds, "drop", kind, run) {
            return Some(format!("dropped to fit the budget: drop {kind}"));
        }
        // Files are counted per directory where they are grouped (`ladder::group_files`).
        if kind != "file_change" && self.applies(&self.count, "count", kind, run) {
            return Some(format!("dropped to fit the budget: count {kind}"));
        }
        // Dropping old runs keeps what the user asked for in them, the files they changed
        // (listed as paths by then), the compaction summary and the fork anchor: the thread's
        // goal, its story and its file list survive.
        let spared = matches!(
            kind,
            "user_message" | "file_change" | "compact_summary" | "fork_anchor"
        );
        match self.drop_runs_before {
            Some(b) if run < b && !spared => {
                Some("dropped to fit the budget: drop_oldest_runs".into())
            }
            _ => None,
        }
    }

    /// The cut these changes impose on a kind's texts in `run`, if any.
    fn cut(&self, kind: &str, run: u32) -> Option<Cut> {
        let tail = (self.tail.iter().rev())
            .find(|(k, n)| k == kind && self.reaches(&format!("tail {k} {n}"), run))
            .map(|(_, n)| Cut::Tail(*n));
        let short = self
            .shorten
            .filter(|n| self.reaches(&format!("shorten {n}"), run))
            .map(Cut::HeadTail);
        match (tail, short) {
            (Some(a), Some(b)) => Some(a.tighter(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Ids of the must-keep items among `items` (docs/rendering.md#must-keep-items): the latest
/// user message, every unanswered question and unresolved approval, the last failing command.
fn must_keep_ids(items: &[ItemCtx<'_>]) -> Vec<String> {
    let mut ids = Vec::new();
    let last = |pred: &dyn Fn(&Item) -> bool| {
        items
            .iter()
            .rev()
            .find(|c| c.item.is_some_and(pred))
            .map(|c| c.id.clone())
    };
    ids.extend(last(&|i| matches!(i, Item::UserMessage { .. })));
    ids.extend(last(
        &|i| matches!(i, Item::Command { exit_code: Some(c), .. } if *c != 0),
    ));
    for c in items {
        match c.item {
            Some(Item::Question {
                answered: false, ..
            })
            | Some(Item::Approval {
                resolved: false, ..
            }) => ids.push(c.id.clone()),
            _ => {}
        }
    }
    ids
}

/// Ids of the items no degradation step but the last resort reaches: the newest
/// [`ladder::NEWEST_REQUESTS`] user messages and the decisions of the newest
/// [`ladder::NEWEST_DECISION_RUNS`] runs (through `newest`).
fn protected_ids(items: &[ItemCtx<'_>], newest: Option<u32>) -> std::collections::HashSet<String> {
    let mut ids: std::collections::HashSet<String> = items
        .iter()
        .rev()
        .filter(|c| matches!(c.item, Some(Item::UserMessage { .. })))
        .take(ladder::NEWEST_REQUESTS)
        .map(|c| c.id.clone())
        .collect();
    if let Some(newest) = newest {
        let from = newest.saturating_sub(ladder::NEWEST_DECISION_RUNS.saturating_sub(1));
        ids.extend(
            items
                .iter()
                .filter(|c| c.run >= from && matches!(c.item, Some(Item::Decision { .. })))
                .map(|c| c.id.clone()),
        );
    }
    ids
}

/// The summary block of a policy, or seed 000's when it has none (checked once per process).
fn rules_of(policy: &Policy) -> Option<&CSummary> {
    static DEFAULT: OnceLock<Option<CSummary>> = OnceLock::new();
    policy.summary.as_ref().or_else(|| {
        DEFAULT
            .get_or_init(|| crate::policy::load("default").ok().and_then(|p| p.summary))
            .as_ref()
    })
}

/// Sections in document order: built-ins in seed 000's order (retitled when the policy
/// declares them), then the policy's own.
fn section_order(rules: &CSummary) -> Vec<(&str, &str)> {
    let title = |name: &str, default: &'static str| -> &str {
        rules
            .sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
            .unwrap_or(default)
    };
    let mut order: Vec<(&str, &str)> = BUILTIN_SECTIONS
        .iter()
        .map(|(n, t)| (*n, title(n, t)))
        .collect();
    for (n, t) in &rules.sections {
        if !BUILTIN_SECTIONS.iter().any(|(b, _)| b == n) {
            order.push((n.as_str(), t.as_str()));
        }
    }
    order
}

/// Select the items of `runs` (ordinals, oldest first) under the policy's summary rules.
pub fn select_runs(policy: &Policy, facts: &Facts<'_>, runs: &[u32]) -> Summary {
    select_inner(policy, facts, runs, None, &Degrade::default())
}

/// [`select`] under a budget's degradation changes.
pub fn select_degraded(
    policy: &Policy,
    facts: &Facts<'_>,
    decision: &Decision,
    degrade: &Degrade,
) -> Summary {
    select_inner(
        policy,
        facts,
        &decision_runs(facts, decision),
        None,
        degrade,
    )
}

/// Which kind of summary rule a [`RuleHit`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryRuleKind {
    /// An `include` rule.
    Include,
    /// An `exclude` rule.
    Exclude,
}

/// One evaluation of one summary rule of the policy's own `summary` block against one item:
/// the rule's kind and index in that block, and whether it held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    /// Which rule kind.
    pub kind: SummaryRuleKind,
    /// Its index among the summary rules.
    pub index: usize,
    /// Whether it matched.
    pub matched: bool,
}

/// [`select`], also recording every summary rule evaluation (for rule coverage). Rules are
/// evaluated exactly as selection evaluates them: per item, the exclude rules of its kind in
/// order until one holds, then the include rules of its kind in order until one holds. For a
/// reasoning item (always left out) the exclude rules are still evaluated and recorded. Nothing
/// is recorded when the policy has no summary block of its own.
pub fn select_observed(
    policy: &Policy,
    facts: &Facts<'_>,
    decision: &Decision,
) -> (Summary, Vec<RuleHit>) {
    let runs = decision_runs(facts, decision);
    let mut hits = Vec::new();
    let record = policy.summary.is_some().then_some(&mut hits);
    let summary = select_inner(policy, facts, &runs, record, &Degrade::default());
    (summary, hits)
}

fn select_inner(
    policy: &Policy,
    facts: &Facts<'_>,
    runs: &[u32],
    hits: Option<&mut Vec<RuleHit>>,
    degrade: &Degrade,
) -> Summary {
    match prepare_runs(policy, facts, runs, hits) {
        Some(p) => p.into_summary(degrade),
        None => Summary {
            sections: Vec::new(),
            included: Arc::default(),
            omitted: Arc::default(),
            chars: 0,
            budget: None,
            files_counted: (0, 0),
            redaction: Redaction::start(policy, facts.state),
        },
    }
}

/// Selection up to the budget's degradation steps, done once: every item's rule, must-keep
/// status, section and text (docs/rendering.md#budgets). [`Prepared::summary`] applies a
/// [`Degrade`] to it (dropping entries, cutting texts, the policy's own budget) without
/// evaluating the rules over the thread again; `select_degraded` with the same changes gives
/// the same summary.
#[derive(Clone)]
pub struct Prepared<'p, 's> {
    state: &'s State,
    rules: &'p CSummary,
    order: Vec<(&'p str, &'p str)>,
    /// Items left out before any rule (they cover a rolled-back run).
    omitted: Vec<Omitted>,
    /// Every other item, in source order.
    picks: Vec<Pick<'p, 's>>,
    /// The workspace note, the text of the `workspace` item.
    note: Option<String>,
    /// The redaction of the texts taken so far.
    redaction: Redaction,
}

/// What the rules made of one item.
#[derive(Clone)]
enum Pick<'p, 's> {
    /// Left out whatever the budget does: hidden reasoning, an exclude rule, no include rule.
    Omit(ItemCtx<'s>, String),
    Take(Take<'p, 's>),
}

/// An item an include rule takes, with its text when no degradation step changes it.
#[derive(Clone)]
struct Take<'p, 's> {
    ctx: ItemCtx<'s>,
    inc: &'p CInclude,
    must_keep: bool,
    /// Out of every degradation step's reach but the last resort's (`ladder`): one of the
    /// newest user messages, a decision of the newest runs.
    protected: bool,
    section: usize,
    /// The text rule's cut and whether it is strict.
    cut: Option<Cut>,
    strict: bool,
    /// The text rule is a ceiling (`head`, `tail`, `head_tail`): it cuts only where the
    /// budget's `text_rules` step reaches; elsewhere the text is whole.
    ceiling: bool,
    /// The entry's text in the include rule's form, whole where the text rule is a ceiling.
    text: String,
}

/// [`Prepared`] for the covered, eligible runs of `decision`; `None` when there are no
/// summary rules (the summary is empty).
pub fn prepare<'p, 's>(
    policy: &'p Policy,
    facts: &Facts<'s>,
    decision: &Decision,
) -> Option<Prepared<'p, 's>> {
    prepare_runs(policy, facts, &decision_runs(facts, decision), None)
}

fn prepare_runs<'p, 's>(
    policy: &'p Policy,
    facts: &Facts<'s>,
    runs: &[u32],
    hits: Option<&mut Vec<RuleHit>>,
) -> Option<Prepared<'p, 's>> {
    prepare_in(policy, facts.state, facts, runs, hits)
}

/// [`prepare_runs`] with the state named apart (`facts.state`, borrowed for `'s`), so that a
/// sizer that holds the state keeps what it prepared.
fn prepare_in<'p, 's>(
    policy: &'p Policy,
    state: &'s State,
    facts: &Facts<'_>,
    runs: &[u32],
    mut hits: Option<&mut Vec<RuleHit>>,
) -> Option<Prepared<'p, 's>> {
    let rules = rules_of(policy)?;
    let order = section_order(rules);
    let mut items: Vec<ItemCtx> = Vec::new();
    // Synthetic items first: the fork anchor, then the compaction summary.
    let mut synthetic = |kind: &'static str, run: u32, text: &str| {
        let chars = text.chars().count() as i64;
        items.push(synthetic_item(kind, kind.to_string(), run, chars));
    };
    if let (RequestKind::Fork, Some(a)) = (state.request.kind, &state.request.fork_anchor) {
        let run = state.thread.parent.as_ref().map(|p| p.run).unwrap_or(0);
        synthetic("fork_anchor", run, &a.text);
    }
    if let Some(cs) = state.thread.compact_summary.as_deref() {
        let through = state.thread.compact_summary_through;
        let covered = runs.first().map(|f| *f <= through.unwrap_or(u32::MAX));
        if !cs.trim().is_empty() && covered == Some(true) {
            synthetic("compact_summary", through.unwrap_or(0), cs);
        }
    }
    // The workspace note: what changed in the workspace under the target thread.
    let note = facts.staleness().note();
    if let Some(note) = &note {
        let run = runs.last().copied().unwrap_or(0);
        synthetic("workspace", run, note);
    }
    items.extend(item_contexts(state, runs));
    let must_keep = must_keep_ids(&items);
    let protected = protected_ids(&items, runs.last().copied());

    let mut omitted = Vec::new();
    // Nothing derived from a rolled-back run is handed over: a compaction summary or a prior
    // handoff whose range reaches one would describe undone work.
    items.retain(|ctx| {
        let undone = match ctx.kind {
            "compact_summary" => facts.compact_summary_rolled_back(),
            "handoff" => handoff_covers_rolled_back(facts, &ctx.id),
            _ => false,
        };
        if undone {
            omitted.push(Omitted {
                id: ctx.id.clone(),
                kind: ctx.kind,
                reason: "it covers a rolled-back run".into(),
            });
        }
        !undone
    });
    let holds = |when: &Option<crate::policy::CExpr>, ctx: &ItemCtx| {
        when.as_ref()
            .map(|w| item_holds(w, facts, ctx))
            .unwrap_or(true)
    };
    let mut redaction = Redaction::start(policy, state);
    let mut picks = Vec::with_capacity(items.len());
    for ctx in items {
        let taken = taking_rule(rules, &ctx, &holds, hits.as_deref_mut());
        if ctx.kind == "reasoning" {
            let reason = "hidden reasoning never leaves the thread".to_string();
            picks.push(Pick::Omit(ctx, reason));
            continue;
        }
        match taken {
            Some(Taken::Exclude(ex)) => picks.push(Pick::Omit(ctx, ex.reason.clone())),
            Some(Taken::Include(inc)) => {
                let keep = must_keep.contains(&ctx.id);
                let protected = protected.contains(&ctx.id);
                let (cut, strict) = text_cut(rules, ctx.kind, &inc.section);
                let ceiling = is_ceiling(cut);
                let red = &mut redaction.context;
                let text = take_text(
                    state,
                    &ctx,
                    inc.form,
                    (if ceiling { Some(Cut::Whole) } else { cut }, keep && !strict),
                    note.as_deref(),
                    red,
                );
                let section = order
                    .iter()
                    .position(|(n, _)| *n == inc.section)
                    .unwrap_or(order.len());
                picks.push(Pick::Take(Take {
                    ctx,
                    inc,
                    must_keep: keep,
                    protected,
                    section,
                    cut,
                    strict,
                    ceiling,
                    text,
                }));
            }
            None => picks.push(Pick::Omit(ctx, "no include rule matched".into())),
        }
    }
    Some(Prepared {
        state,
        rules,
        order,
        omitted,
        picks,
        note,
        redaction,
    })
}

/// The text of an entry taken in `form` under `cut` (`whole`: a must-keep item's own text is
/// not cut). A file change's entry is its file's aggregate (`files::aggregate`), which replaces
/// this text: it is not built.
fn take_text(
    state: &State,
    ctx: &ItemCtx,
    form: Form,
    (cut, whole): (Option<Cut>, bool),
    note: Option<&str>,
    red: &mut crate::redact::Context,
) -> String {
    let t = Texts {
        cut,
        whole,
        first_line: false,
        no_output: false,
    };
    take_text_with(state, ctx, form, &t, note, red)
}

fn take_text_with(
    state: &State,
    ctx: &ItemCtx,
    form: Form,
    t: &Texts,
    note: Option<&str>,
    red: &mut crate::redact::Context,
) -> String {
    let aggregated = matches!(ctx.item, Some(Item::FileChange { .. })) && form != Form::Line;
    if aggregated {
        String::new()
    } else {
        entry_text(state, ctx, form, t, note, red)
    }
}

/// The whole texts of the items of `runs` (and the compaction summary, fork anchor and
/// workspace note) whose ids are in `wanted`, in run order: `(id, kind, run, text)`. One text
/// path with the document (`whole_text`, through `entry_text`), so the same safety rules
/// apply: every text is redacted in `red`, which must be a clone of the context of the
/// `Summary` the document was built from (`Summary::redaction`), so that a secret keeps the
/// number the document gave it. Check [`crate::redact::Context::failure`] after: a text that
/// could not be redacted is replaced by a notice.
pub fn whole_texts(
    state: &State,
    runs: &[u32],
    wanted: &std::collections::HashSet<&str>,
    note: Option<&str>,
    red: &mut crate::redact::Context,
) -> Vec<(String, &'static str, u32, String)> {
    let mut items: Vec<ItemCtx> = Vec::new();
    if wanted.contains("fork_anchor") {
        if let Some(a) = &state.request.fork_anchor {
            let run = state.thread.parent.as_ref().map_or(0, |p| p.run);
            items.push(synthetic_item("fork_anchor", "fork_anchor".into(), run, count_i64(&a.text)));
        }
    }
    if wanted.contains("compact_summary") {
        if let Some(cs) = state.thread.compact_summary.as_deref() {
            let run = state.thread.compact_summary_through.unwrap_or(0);
            items.push(synthetic_item("compact_summary", "compact_summary".into(), run, count_i64(cs)));
        }
    }
    if wanted.contains("workspace") {
        if let Some(n) = note {
            let run = runs.last().copied().unwrap_or(0);
            items.push(synthetic_item("workspace", "workspace".into(), run, count_i64(n)));
        }
    }
    items.extend(item_contexts(state, runs).into_iter().filter(|c| wanted.contains(c.id.as_str())));
    items
        .into_iter()
        .map(|c| {
            let text = whole_text(state, &c, Form::Full, note, red);
            (c.id.clone(), c.kind, c.run, text)
        })
        .collect()
}

/// The whole text of an item as the document would show it in `form` with no text rule and
/// no degradation, redacted in `red`: what the transcript carries for an item the budget left
/// out or cut.
pub(crate) fn whole_text(
    state: &State,
    ctx: &ItemCtx,
    form: Form,
    note: Option<&str>,
    red: &mut crate::redact::Context,
) -> String {
    let form = if matches!(ctx.item, Some(Item::FileChange { .. })) {
        Form::PathOnly
    } else {
        form
    };
    let t = Texts {
        cut: Some(Cut::Whole),
        whole: true,
        first_line: false,
        no_output: false,
    };
    entry_text(state, ctx, form, &t, note, red)
}

impl Prepared<'_, '_> {
    /// The summary under a budget's degradation changes (the prepared selection is kept for
    /// the next step).
    pub fn summary(&self, degrade: &Degrade) -> Summary {
        self.clone().into_summary(degrade)
    }

    /// Whether a degradation step about `kind` (`drop`, `tail`, `paths`) can change the
    /// summary: some item of the kind is taken by an include rule and is not must-keep.
    pub fn touches(&self, kind: &str) -> bool {
        self.picks
            .iter()
            .any(|p| matches!(p, Pick::Take(t) if !t.must_keep && !t.protected && t.ctx.kind == kind))
    }

    /// Whether the text rules' ceilings (`head`, `tail`, `head_tail`: what
    /// [`Degrade::with_ceilings`] applies) leave every text as it is, so that the summary
    /// with ceilings is the summary without them. A ceiling of `n` changes no text of at
    /// most `n` characters, and every text [`entry_text`] cuts for an item is one of the
    /// texts [`ceiling_input_bound`] counts, redacted: unchanged when nothing of the item
    /// was redacted. Conservative: `false` whenever that cannot be told from the lengths.
    fn ceilings_cut_nothing(&self) -> bool {
        let red = &self.redaction.context;
        if red.failure().is_some() {
            return false;
        }
        self.picks.iter().all(|p| {
            let Pick::Take(t) = p else {
                return true;
            };
            if !t.ceiling {
                return true;
            }
            let limit = match t.cut {
                Some(Cut::Head(n) | Cut::Tail(n) | Cut::HeadTail(n)) => n,
                _ => return false,
            };
            ceiling_input_bound(self.state, &t.ctx, self.note.as_deref()) <= limit
                && !red.replaced_in(&t.ctx.id)
        })
    }

    /// [`Prepared::summary`], consuming the prepared selection.
    pub fn into_summary(self, degrade: &Degrade) -> Summary {
        let Prepared {
            state,
            rules,
            order,
            mut omitted,
            picks,
            note,
            mut redaction,
        } = self;
        let (mut chosen, counted) = take_picks(
            state,
            picks,
            degrade,
            note.as_deref(),
            &mut redaction.context,
            &mut omitted,
        );
    files::aggregate(&mut chosen, state.thread.workspace.as_deref(), &mut redaction.context);
    let mut files_counted = (0usize, 0usize);
    if degrade.group.iter().any(|k| k == "file_change") && !degrade.must_keep_only {
        let counting = degrade.count.iter().any(|k| k == "file_change");
        let before = counting.then(|| {
            (degrade.reach.iter().rev())
                .find(|(l, _)| l == "count file_change")
                .map_or(u32::MAX, |(_, b)| *b)
        });
        let counted = ladder::group_files(
            &mut chosen,
            state.thread.workspace.as_deref(),
            before,
            &degrade.keep,
            &mut redaction.context,
        );
        if counted.files > 0 {
            files_counted = (counted.files, counted.grouped);
        }
        for id in counted.ids {
            omitted.push(Omitted {
                id,
                kind: "file_change",
                reason: "dropped to fit the budget: count file_change".into(),
            });
        }
    }

    // The fork anchor's body appears once: a message that only repeats it is left out when the
    // anchor itself is included.
    let anchor_text = chosen
        .iter()
        .any(|c| c.ctx.kind == "fork_anchor")
        .then(|| state.request.fork_anchor.as_ref().map(|a| a.text.trim()))
        .flatten()
        .filter(|t| !t.is_empty());
    if let Some(anchor) = anchor_text {
        let (dupes, kept): (Vec<_>, Vec<_>) = chosen.into_iter().partition(|c| {
            matches!(
                c.ctx.item,
                Some(Item::UserMessage { text, .. } | Item::AssistantMessage { text, .. })
                    if text.trim() == anchor
            )
        });
        chosen = kept;
        for c in dupes {
            omit(
                &mut omitted,
                c.ctx,
                "the fork anchor already carries this message".into(),
            );
        }
    }

    // The rule's own budget: newest first or oldest first (`fit_rule_budget`).
    let mut truncated = vec![false; chosen.len()];
    if let Some((budget, newest_first)) = rules.budget {
        (chosen, truncated) = fit_rule_budget(chosen, budget, newest_first, &mut omitted);
    }

    // Sections in document order; entries keep source order within a section.
    let included: Vec<String> = chosen
        .iter()
        .flat_map(|c| std::iter::once(c.ctx.id.clone()).chain(c.merged.iter().cloned()))
        .filter(|id| !id.starts_with("count:"))
        .collect();
    let mut buckets: Vec<Vec<Entry>> = vec![Vec::new(); order.len().saturating_add(1)];
    let mut chars = 0usize;
    for (c, truncated) in chosen.into_iter().zip(truncated) {
        chars = chars.saturating_add(c.text.chars().count());
        if let Some(bucket) = buckets.get_mut(c.section) {
            bucket.push(Entry {
                id: c.ctx.id,
                kind: c.ctx.kind,
                run: c.ctx.run,
                text: c.text,
                truncated,
                degraded: c.degraded,
                must_keep: c.must_keep,
            });
        }
    }
    // Open problems read newest first.
    if let Some(open) = order
        .iter()
        .position(|(n, _)| *n == "open")
        .and_then(|i| buckets.get_mut(i))
    {
        open.reverse();
    }
    // Items a `count KIND` step left out: one line per kind at the head of its section.
    count_lines(&mut buckets, &counted, degrade.transcript.as_deref());
    let sections = order
        .iter()
        .zip(buckets)
        .filter(|(_, entries)| !entries.is_empty())
        .map(|((name, title), entries)| Section {
            name: name.to_string(),
            title: title.to_string(),
            entries,
        })
        .collect();
    omitted.sort_by(|a, b| a.id.cmp(&b.id));
    redaction.finish(&included);
    Summary {
        sections,
        included: Arc::new(included),
        omitted: Arc::new(omitted),
        chars,
        budget: rules.budget.map(|(b, _)| b),
        files_counted,
        redaction,
    }
}
}

/// Leave `ctx`'s item out of the summary, saying why.
fn omit(omitted: &mut Vec<Omitted>, ctx: ItemCtx, reason: String) {
    omitted.push(Omitted {
        id: ctx.id,
        kind: ctx.kind,
        reason,
    })
}

/// [`Prepared::into_summary`]'s first step: every item the rules took, under the budget's
/// degradation changes (dropped, counted, cut, path only, first line, without output), its
/// text taken again where a change reaches it. Returns the candidates and the (kind,
/// section, run) of every item a `count KIND` step left out.
#[allow(clippy::type_complexity)]
fn take_picks<'p, 's>(
    state: &'s State,
    picks: Vec<Pick<'p, 's>>,
    degrade: &Degrade,
    note: Option<&str>,
    red: &mut crate::redact::Context,
    omitted: &mut Vec<Omitted>,
) -> (Vec<Candidate<'s>>, Vec<(&'static str, usize, u32)>) {
    let mut chosen: Vec<Candidate> = Vec::with_capacity(picks.len());
    // (kind, section, run) of every item a `count KIND` step left out.
    let mut counted: Vec<(&'static str, usize, u32)> = Vec::new();
    for pick in picks {
        let t = match pick {
            Pick::Omit(ctx, reason) => {
                omit(omitted, ctx, reason);
                continue;
            }
            Pick::Take(t) => t,
        };
        let keep = t.must_keep;
        // Must-keep items are out of every step's reach; protected ones out of every
        // step's but the last resort's.
        let reachable = !keep && (!t.protected || degrade.must_keep_only);
        if reachable && !degrade.keep.contains(&t.ctx.id) {
            if let Some(reason) = degrade.drops(t.ctx.kind, t.ctx.run) {
                if reason.ends_with(&format!("count {}", t.ctx.kind)) {
                    counted.push((t.ctx.kind, t.section, t.ctx.run));
                }
                omit(omitted, t.ctx, reason);
                continue;
            }
        }
        let (kind, run) = (t.ctx.kind, t.ctx.run);
        // A ceiling cuts only within the `text_rules` step's reach (must-keep items stay
        // whole unless the rule is strict, as `Texts::whole` says).
        let ceiling_on = t.ceiling && degrade.ceiling_applies(run);
        let mut cut = if t.ceiling && !ceiling_on {
            Some(Cut::Whole)
        } else {
            t.cut
        };
        let mut changed = ceiling_on;
        if reachable {
            if let Some(d) = degrade.cut(kind, run) {
                cut = cut.map_or(Some(d), |c| Some(c.tighter(d)));
                changed = true;
            }
        }
        let form = if reachable && degrade.applies(&degrade.paths, "paths", kind, run) {
            changed = true;
            Form::PathOnly
        } else {
            t.inc.form
        };
        let first_line =
            reachable && degrade.applies(&degrade.first_line, "first_line", kind, run);
        let no_output = reachable
            && degrade.applies(&degrade.drop_output, "drop_output", kind, run)
            && succeeded(t.ctx.item);
        changed |= first_line || no_output;
        let (text, changed) = if changed {
            let texts = Texts {
                cut,
                whole: keep && !t.strict,
                first_line,
                no_output,
            };
            let text = take_text_with(
                state,
                &t.ctx,
                form,
                &texts,
                note,
                red,
            );
            // A file change's text is its aggregate, built below: a new form changes it.
            let changed = text != t.text || form != t.inc.form;
            (text, changed)
        } else {
            (t.text, false)
        };
        let label = role_label(&t.ctx, form);
        let sep = if form == Form::Transcript { 2 } else { 0 };
        chosen.push(Candidate {
            ctx: t.ctx,
            section: t.section,
            form,
            text,
            merged: Vec::new(),
            must_keep: keep,
            label,
            sep,
            degraded: changed,
        });
    }
    (chosen, counted)
}

/// The summary rule's own budget (`budget N`). Newest first (seed 004's legacy
/// continuation): walk back from the newest entry, keep whole entries while they fit; an entry
/// that does not fit keeps its role label and its newest words (`User:\n... last words`), and
/// the walk goes on while room is left. Oldest first: walk forwards, cut the first entry that
/// does not fit at a whitespace boundary, omit the rest. Returns the entries kept and which
/// of them were cut.
fn fit_rule_budget<'s>(
    mut chosen: Vec<Candidate<'s>>,
    budget: usize,
    newest_first: bool,
    omitted: &mut Vec<Omitted>,
) -> (Vec<Candidate<'s>>, Vec<bool>) {
    let mut truncated = vec![false; chosen.len()];
    let mut keep = vec![false; chosen.len()];
    if newest_first {
        let mut remaining = i64::try_from(budget).unwrap_or(i64::MAX);
        for (i, c) in chosen.iter_mut().enumerate().rev() {
            if remaining <= 0 {
                break;
            }
            let len = count_i64(&c.text);
            if len <= remaining {
                mark(&mut keep, i);
                remaining = remaining.saturating_sub(len.saturating_add(count_i64_n(c.sep)));
                continue;
            }
            let split = c
                .text
                .char_indices()
                .nth(c.label)
                .map(|(b, _)| b)
                .unwrap_or(c.text.len());
            let (label, body) = c.text.split_at(split);
            let prefix = format!("{label}... ");
            let room = remaining.saturating_sub(count_i64(&prefix));
            if room <= 0 {
                continue;
            }
            let tail = keep_tail(body, usize::try_from(room).unwrap_or(0));
            if tail.is_empty() {
                continue;
            }
            c.text = format!("{prefix}{tail}");
            mark(&mut keep, i);
            mark(&mut truncated, i);
            remaining = remaining
                .saturating_sub(count_i64(&c.text).saturating_add(count_i64_n(c.sep)));
        }
    } else {
        let mut used = 0usize;
        for (i, c) in chosen.iter_mut().enumerate() {
            let len = c.text.chars().count();
            if used.saturating_add(len) <= budget {
                used = used.saturating_add(len);
                mark(&mut keep, i);
                continue;
            }
            let cut = cut_at_whitespace(&c.text, budget.saturating_sub(used));
            if !cut.is_empty() {
                c.text = cut;
                mark(&mut keep, i);
                mark(&mut truncated, i);
            }
            break;
        }
    }
    let mut kept = Vec::with_capacity(chosen.len());
    let mut kept_truncated = Vec::with_capacity(chosen.len());
    for ((c, k), t) in chosen.into_iter().zip(keep).zip(truncated) {
        if k {
            kept.push(c);
            kept_truncated.push(t);
        } else {
            let reason = format!("over the {budget}-character budget");
            for id in &c.merged {
                omitted.push(Omitted {
                    id: id.clone(),
                    kind: c.ctx.kind,
                    reason: reason.clone(),
                });
            }
            omit(omitted, c.ctx, reason);
        }
    }
    (kept, kept_truncated)
}

/// Items a `count KIND` step left out (`counted`: kind, section, run): one line per kind at
/// the head of its section.
fn count_lines(buckets: &mut [Vec<Entry>], counted: &[(&'static str, usize, u32)], transcript: Option<&str>) {
    let mut kinds: Vec<(&'static str, usize)> = Vec::new();
    for (kind, section, _) in counted {
        if !kinds.contains(&(*kind, *section)) {
            kinds.push((*kind, *section));
        }
    }
    for (kind, section) in kinds {
        let runs: Vec<u32> = (counted.iter())
            .filter(|(k, s, _)| *k == kind && *s == section)
            .map(|(_, _, r)| *r)
            .collect();
        let (Some(from), Some(to)) = (runs.iter().min(), runs.iter().max()) else {
            continue;
        };
        if let Some(bucket) = buckets.get_mut(section) {
            let line = ladder::count_entry(kind, runs.len(), *from, *to, transcript);
            bucket.insert(0, line);
        }
    }
}

/// Whether handoff `id` covers runs of this thread of which one was rolled back.
fn handoff_covers_rolled_back(facts: &Facts<'_>, id: &str) -> bool {
    let state = facts.state;
    state.handoffs.iter().any(|h| {
        h.id == id
            && h.covers_own_runs(&state.thread.id)
            && facts.any_rolled_back(h.covered.from, h.covered.to)
    })
}

/// The summary rule that takes an item.
enum Taken<'r> {
    Exclude(&'r CExclude),
    Include(&'r CInclude),
}

/// The rule that takes an item: the first exclude rule of its kind whose condition holds (exclusion
/// wins over inclusion), else the first such include rule. Each rule evaluated is recorded in
/// `hits` when given (see [`select_observed`]); later rules are not evaluated. A reasoning item is
/// never included: its include rules are not tried, and its exclude rules only when recording.
fn taking_rule<'r>(
    rules: &'r CSummary,
    ctx: &ItemCtx,
    holds: &dyn Fn(&Option<crate::policy::CExpr>, &ItemCtx) -> bool,
    mut hits: Option<&mut Vec<RuleHit>>,
) -> Option<Taken<'r>> {
    let reasoning = ctx.kind == "reasoning";
    if reasoning && hits.is_none() {
        return None;
    }
    let excludes = (rules.excludes.iter().enumerate()).map(|(index, e)| {
        (
            SummaryRuleKind::Exclude,
            index,
            &e.kind,
            &e.when,
            Taken::Exclude(e),
        )
    });
    let includes = (rules.includes.iter().enumerate())
        .filter(|_| !reasoning)
        .map(|(index, i)| {
            (
                SummaryRuleKind::Include,
                index,
                &i.kind,
                &i.when,
                Taken::Include(i),
            )
        });
    for (kind, index, item_kind, when, taken) in excludes.chain(includes) {
        if *item_kind != ctx.kind {
            continue;
        }
        let matched = holds(when, ctx);
        if let Some(hits) = hits.as_deref_mut() {
            hits.push(RuleHit {
                kind,
                index,
                matched,
            });
        }
        if matched {
            return Some(taken);
        }
    }
    None
}

/// Select for a decision: the covered runs that are eligible. The one path selects through
/// the sizer that kept its selection (`ReusingSizer`); this is for baton's own tests.
#[cfg(any(test, feature = "unstable"))]
pub fn select(policy: &Policy, facts: &Facts<'_>, decision: &Decision) -> Summary {
    select_runs(policy, facts, &decision_runs(facts, decision))
}

/// The covered runs of a decision that are eligible, oldest first.
pub(crate) fn decision_runs(facts: &Facts<'_>, decision: &Decision) -> Vec<u32> {
    match &decision.covered_runs {
        Some(r) => {
            // The eligible runs are in ascending order: the covered ones are a slice of them.
            let all = facts.eligible_runs();
            let start = all.partition_point(|o| *o < r.from);
            let end = all.partition_point(|o| *o <= r.to).max(start);
            all.get(start..end).unwrap_or_default().to_vec()
        }
        None => Vec::new(),
    }
}

/// Sizes summaries with the policy's own selection rules (for `summary.*` facts). The
/// checker keeps `summary.*` out of the summary rules, so sizing never recurses.
pub struct PolicySizer<'p> {
    pub policy: &'p Policy,
}

impl SummarySizer for PolicySizer<'_> {
    fn chars(&self, facts: &Facts<'_>, runs: &[u32]) -> i64 {
        // Sized with the text rules applied: what the delta comes to before the budget
        // leaves any item out.
        let summary = select_inner(self.policy, facts, runs, None, &Degrade::with_ceilings());
        i64::try_from(summary.chars).unwrap_or(i64::MAX)
    }
}

/// The main path's sizer ([`crate::pipeline::plan`]): sizes as [`PolicySizer`] and keeps the
/// selection it made, so that `finish` reuses it for the handoff instead of selecting the
/// same runs again (issue 23 point 7, docs/performance.md). A selection up to the budget
/// ([`Prepared`]) does not depend on the degradation (sizing applies the text rules as
/// ceilings, the handoff does not; both come from the same [`Prepared`]), only on the rules,
/// the state, the runs and the facts the rules read. The one fact that changes between
/// sizing and finishing is the decision's outcome (`decision.strategy`, `delivery.*`, not
/// set yet when the size is taken), so nothing is kept when a summary rule reads it.
pub struct ReusingSizer<'a> {
    policy: &'a Policy,
    state: &'a State,
    /// Each selection sized (the delta's, the whole thread's), with its runs.
    kept: std::cell::RefCell<Vec<(Vec<u32>, Kept<'a>)>>,
}

/// What [`ReusingSizer`] keeps of a selection it sized.
enum Kept<'a> {
    /// The selection up to the budget: some text rule's ceiling cut a text while sizing, so
    /// the handoff's summary (texts whole) is built from it when asked for.
    Prepared(Prepared<'a, 'a>),
    /// No ceiling cut anything: the summary sized is the handoff's summary, built once.
    Summary(Summary),
}

impl<'a> ReusingSizer<'a> {
    /// A sizer for facts about `state` under `policy`.
    pub fn new(policy: &'a Policy, state: &'a State) -> Self {
        ReusingSizer {
            policy,
            state,
            kept: std::cell::RefCell::default(),
        }
    }

    /// The handoff's summary for `runs` (what [`select_runs`] gives) from the selection kept
    /// when those same runs were sized, else selected now.
    pub fn select(&self, facts: &Facts<'_>, runs: &[u32]) -> Summary {
        let kept = {
            let mut kept = self.kept.borrow_mut();
            let at = kept.iter().position(|(r, _)| r.as_slice() == runs);
            at.map(|i| kept.swap_remove(i).1)
        };
        match kept {
            Some(Kept::Prepared(p)) if std::ptr::eq(facts.state, self.state) => {
                p.into_summary(&Degrade::default())
            }
            Some(Kept::Summary(s)) if std::ptr::eq(facts.state, self.state) => s,
            _ => select_runs(self.policy, facts, runs),
        }
    }
}

impl SummarySizer for ReusingSizer<'_> {
    fn chars(&self, facts: &Facts<'_>, runs: &[u32]) -> i64 {
        let reusable = std::ptr::eq(facts.state, self.state)
            && rules_of(self.policy).is_some_and(|r| !reads_outcome(r));
        if !reusable {
            return PolicySizer {
                policy: self.policy,
            }
            .chars(facts, runs);
        }
        // As `select_inner`: no rules, an empty summary.
        let Some(prepared) = prepare_in(self.policy, self.state, facts, runs, None) else {
            return 0;
        };
        // Sizing applies the text rules as ceilings, the handoff does not. When no ceiling
        // can cut a text, both are the same summary: it is built once, not cloned, cut and
        // built again (issue 23 point 7).
        if prepared.ceilings_cut_nothing() {
            #[cfg(debug_assertions)]
            let sized = prepared.summary(&Degrade::with_ceilings());
            let summary = prepared.into_summary(&Degrade::default());
            #[cfg(debug_assertions)]
            debug_assert_eq!(sized, summary, "no ceiling cuts: the same summary");
            let chars = summary.chars;
            self.kept.borrow_mut().push((runs.to_vec(), Kept::Summary(summary)));
            return i64::try_from(chars).unwrap_or(i64::MAX);
        }
        let summary = prepared.summary(&Degrade::with_ceilings());
        self.kept
            .borrow_mut()
            .push((runs.to_vec(), Kept::Prepared(prepared)));
        i64::try_from(summary.chars).unwrap_or(i64::MAX)
    }
}

/// Whether a summary rule reads the decision's outcome (`decision.strategy`, `delivery.*`),
/// which is set only after the ladder (decided from the compiled rules, not per item).
fn reads_outcome(rules: &CSummary) -> bool {
    fn reads(e: &crate::policy::CExpr) -> bool {
        use crate::policy::CExpr;
        match e {
            CExpr::Fact(f) => matches!(
                f,
                Fact::DecisionStrategy
                    | Fact::DeliveryOffBand
                    | Fact::DeliveryInline
                    | Fact::DeliveryMode
            ),
            CExpr::Const(_) | CExpr::Let(..) | CExpr::Signal(..) | CExpr::AnyStale => false,
            CExpr::List(es) | CExpr::And(es) | CExpr::Or(es) => es.iter().any(reads),
            CExpr::Not(e) => reads(e),
            CExpr::Cmp(a, _, b) => reads(a) || reads(b),
            CExpr::Sum(es) => es.iter().any(|(_, e)| reads(e)),
        }
    }
    let includes = rules.includes.iter().filter_map(|r| r.when.as_ref());
    let excludes = rules.excludes.iter().filter_map(|r| r.when.as_ref());
    includes.chain(excludes).any(reads)
}

/// A policy sizes its own summaries (as [`PolicySizer`]), so that facts borrowing the policy
/// need no sizer object of their own.
impl SummarySizer for Policy {
    fn chars(&self, facts: &Facts<'_>, runs: &[u32]) -> i64 {
        PolicySizer { policy: self }.chars(facts, runs)
    }
}

/// The text rule for an item of `kind` placed in `section`: the most specific rule (kind and
/// section, then kind, then section, then every text; a later rule wins over an earlier one
/// of the same scope), and whether it is `strict`.
fn text_cut(rules: &CSummary, kind: &str, section: &str) -> (Option<Cut>, bool) {
    let rank = |r: &CTextCut| match (&r.kind, &r.section) {
        (Some(k), Some(s)) if k == kind && s == section => Some(3),
        (Some(k), None) if k == kind => Some(2),
        (None, Some(s)) if s == section => Some(1),
        (None, None) => Some(0),
        _ => None,
    };
    let mut best: Option<(u8, &CTextCut)> = None;
    for r in &rules.text_cuts {
        if let Some(n) = rank(r) {
            if best.is_none_or(|(b, _)| n >= b) {
                best = Some((n, r));
            }
        }
    }
    match best {
        Some((_, r)) => (Some(r.cut), r.strict),
        None => (None, false),
    }
}

/// Whether a text rule is a ceiling, applied only when the budget binds (`head`, `tail`,
/// `head_tail`), rather than a format that always applies (`compact`, seed 004's one-line
/// rule; `whole`).
fn is_ceiling(cut: Option<Cut>) -> bool {
    matches!(cut, Some(Cut::Head(_) | Cut::Tail(_) | Cut::HeadTail(_)))
}

/// A command that exited 0 or a tool call that completed.
fn succeeded(item: Option<&Item>) -> bool {
    matches!(
        item,
        Some(Item::Command {
            exit_code: Some(0),
            ..
        }) | Some(Item::ToolCall {
            status: Some(crate::state::ToolStatus::Completed),
            ..
        })
    )
}

fn count_i64(text: &str) -> i64 {
    i64::try_from(text.chars().count()).unwrap_or(i64::MAX)
}

fn count_i64_n(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn mark(flags: &mut [bool], i: usize) {
    if let Some(f) = flags.get_mut(i) {
        *f = true;
    }
}




#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{evaluate_with, DecisionContext};
    use crate::facts::Sizer;
    use crate::policy::CExpr;
    use std::rc::Rc;

    /// Decide `state` on codex with a [`ReusingSizer`]; then the handoff's summary from the
    /// sizer and from a fresh selection, and how many selections it kept before.
    fn kept_and_fresh(policy: &Policy, state: &State) -> (Summary, Summary, usize) {
        let sizer = Rc::new(ReusingSizer::new(policy, state));
        let root = crate::ids::DocumentRoot::resolved(std::env::temp_dir());
        let cx = DecisionContext::default();
        let shared = Sizer::Shared(sizer.clone());
        let (decision, facts) =
            evaluate_with(policy, state, Some("codex"), &root, &cx, shared).unwrap();
        let runs = decision_runs(&facts, &decision);
        let kept = sizer.kept.borrow().len();
        let fresh = select_runs(policy, &facts, &runs);
        (sizer.select(&facts, &runs), fresh, kept)
    }

    /// The default policy sizes the delta (`over_budget` reads `summary.delta_chars`): the
    /// handoff's summary made from the kept selection is the one a fresh selection makes.
    #[test]
    fn the_kept_selection_makes_the_fresh_summary() {
        let policy = crate::policy::load("default").unwrap();
        let state = State::load("examples/ladder-delta-existing.yaml").unwrap();
        let (kept, fresh, count) = kept_and_fresh(&policy, &state);
        assert_eq!(count, 1);
        assert!(!fresh.included.is_empty());
        assert_eq!(kept, fresh);
    }

    /// The delta of `examples/ladder-delta-existing.yaml` with run 2's decision reading `text`.
    fn with_decision_text(text: &str) -> State {
        let yaml = std::fs::read_to_string("examples/ladder-delta-existing.yaml").unwrap();
        let yaml = yaml.replace("Use an atomic counter per window.", text);
        crate::state::parse_str(&yaml, crate::state::Format::Yaml, "delta.yaml").unwrap()
    }

    /// Whether the sizer kept the summary itself (no ceiling cut a text while sizing).
    fn kept_summary(policy: &Policy, state: &State) -> bool {
        let sizer = Rc::new(ReusingSizer::new(policy, state));
        let root = crate::ids::DocumentRoot::resolved(std::env::temp_dir());
        let cx = DecisionContext::default();
        let shared = Sizer::Shared(sizer.clone());
        evaluate_with(policy, state, Some("codex"), &root, &cx, shared).unwrap();
        let kept = sizer.kept.borrow();
        assert_eq!(kept.len(), 1);
        kept.iter().all(|(_, k)| matches!(k, Kept::Summary(_)))
    }

    /// When no text rule's ceiling cuts a text, the summary sized is the handoff's, built
    /// once; a text over its ceiling, or one with a secret redacted (its length is no longer
    /// the item's), keeps the selection instead. Either way the handoff's summary is the one
    /// a fresh selection makes.
    #[test]
    fn the_sized_summary_is_kept_only_when_no_ceiling_cuts() {
        let policy = crate::policy::load("default").unwrap();
        let long = "word ".repeat(500);
        let secret = format!("token ghp_{}", "a1".repeat(18));
        for (text, whole) in [("Use a counter.", true), (&long, false), (&secret, false)] {
            let state = with_decision_text(text);
            assert_eq!(kept_summary(&policy, &state), whole, "{text:.20}");
            let (kept, fresh, _) = kept_and_fresh(&policy, &state);
            assert_eq!(kept, fresh, "{text:.20}");
        }
        let (kept, _, _) = kept_and_fresh(&policy, &with_decision_text(&long));
        let decision = kept.section("decisions").unwrap();
        assert!(!decision.entries[0].text.contains("characters cut"), "texts whole");
    }

    /// A summary rule that read the decision's outcome (the checker refuses one today) would
    /// see it unset while sizing: nothing is kept, the handoff is selected again.
    #[test]
    fn nothing_is_kept_when_a_summary_rule_reads_the_outcome() {
        let mut policy = crate::policy::load("default").unwrap();
        let rules = policy.summary.as_mut().unwrap();
        assert!(!reads_outcome(rules));
        let inner = CExpr::Fact(Fact::DeliveryInline);
        rules.includes[0].when = Some(CExpr::Not(Box::new(CExpr::Not(Box::new(inner)))));
        assert!(reads_outcome(rules));
        let state = State::load("examples/ladder-delta-existing.yaml").unwrap();
        let (kept, fresh, count) = kept_and_fresh(&policy, &state);
        assert_eq!(count, 0);
        assert_eq!(kept, fresh);
    }
}

#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod compact_tests;
