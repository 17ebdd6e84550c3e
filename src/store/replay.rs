//! Replaying the decision log: every logged decision is decided again from what it was made
//! from (the state as evaluated, the target, the off-band root and the store's context, kept
//! in `decision_log.input`) with the policy of the same sha256, and compared.

use super::row_error::RowError;
use super::{Store, StoreError, StoreErrorKind};
use crate::eval::{DecisionContext, EvalOptions};
use crate::policy::Policy;
use crate::state::State;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A logged input put back together (see `store::input_log`).
fn unchunked(store: &Store, input: &str) -> Result<DecisionInput, RowError> {
    let v = super::input_log::materialize(store.connection(), input)?;
    serde_json::from_value(v).map_err(RowError::from)
}

/// A logged decision (the `decision` column) as it was returned (see `store::trace_log`).
fn expanded(store: &Store, logged: &str) -> Result<serde_json::Value, RowError> {
    super::trace_log::decision(store.connection(), logged)
}

impl Store {
    /// The decision of decision-log row `id`, as `explain --json` printed it when it was
    /// made: the log keeps a trace's text once per policy, and this puts it back.
    pub fn logged_decision(&self, id: i64) -> Result<serde_json::Value, StoreError> {
        let during = "reading the decision log";
        let logged: super::packed::Text = self
            .connection()
            .query_row(
                "SELECT decision FROM decision_log WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(during, e))?;
        let logged = logged.0;
        expanded(self, &logged).map_err(|why| {
            StoreError::new(
                self.name(),
                StoreErrorKind::Corrupt {
                    what: format!("decision-log row {id}"),
                    why: why.to_string(),
                },
            )
        })
    }
}

/// What a decision was made from, as the decision log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionInput {
    /// The state as evaluated (for a dispatch: with its request, and with the items of the
    /// runs the target has already seen left out when the policy does not read them).
    pub state: State,
    /// The target provider decided for (`"codex"`).
    pub target: String,
    /// The off-band root, canonical, as the decision used it.
    pub document_root: PathBuf,
    /// What else the decision depended on: the thread that records it, for a merge-back decided
    /// on the fork's view, and the handoff already waiting for the run (a merge-back) when the
    /// run takes one; empty (the default) for a plain dispatch.
    #[serde(default)]
    pub context: DecisionContext,
}

impl DecisionInput {
    pub(crate) fn new(
        state: &State,
        target: &str,
        handoff_dir: Option<&std::path::Path>,
        context: &DecisionContext,
    ) -> DecisionInput {
        let root = crate::deliver::OffbandStore::new(handoff_dir.map(std::path::Path::to_path_buf))
            .root()
            .to_path_buf();
        DecisionInput {
            state: state.clone(),
            target: target.to_string(),
            document_root: root,
            context: context.clone(),
        }
    }

    /// The evaluation options this input stands for.
    pub fn options(&self) -> EvalOptions {
        EvalOptions {
            target: Some(self.target.clone()),
            document_root: Some(self.document_root.clone()),
        }
    }
}

/// Which log rows to replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayFilter {
    /// Only this thread's rows; `None`: every thread.
    pub thread: Option<String>,
    /// Only rows for this run ordinal; `None`: every run.
    pub run: Option<u32>,
}

/// One logged decision that did not re-derive.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayDifference {
    /// The log row's id.
    pub id: i64,
    /// The thread the decision was recorded in.
    pub thread: String,
    /// The run the decision was for.
    pub run: u32,
    /// The operation that logged it: `dispatch`, `regenerate` or `merge_back`.
    pub operation: String,
    /// The logged policy's name.
    pub policy: String,
    /// The logged policy's sha256 (the policy replay looks for).
    pub policy_sha256: String,
    /// Why: the top-level fields that differ, or why it could not be decided again.
    pub reason: String,
    /// The fields as logged and as decided again (only those that differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged: Option<serde_json::Value>,
    /// The same fields as decided again; `None` (like `logged`) when it could not be decided again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<serde_json::Value>,
    /// No policy given has the logged sha256 (`reason` says which): a caller can offer a way
    /// to give it (the `baton` command names `--policy-dir`).
    #[serde(skip)]
    pub policy_missing: bool,
}

/// A log row that could not be checked because it keeps no input (logged before schema 4).
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySkipped {
    /// The log row's id.
    pub id: i64,
    /// The thread the decision was recorded in.
    pub thread: String,
    /// The run the decision was for.
    pub run: u32,
    /// Why it was skipped.
    pub reason: String,
}

/// The outcome of [`replay`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    /// Rows decided again (the same or not).
    pub checked: usize,
    /// The rows that did not re-derive; empty when every checked row did.
    pub differences: Vec<ReplayDifference>,
    /// The rows that keep no input and could not be checked.
    pub skipped: Vec<ReplaySkipped>,
}

struct Row {
    id: i64,
    thread: String,
    run: u32,
    operation: String,
    policy: String,
    sha: String,
    decision: String,
    input: Option<String>,
}

/// Decide every logged decision matching `filter` again, with the policy of its sha256 among
/// `policies` and the shipped profiles, and report those that differ. The delivery stage's
/// record of what happened at delivery (an off-band write that fell back to inline, the
/// renderer's note on the inline prompt's length) is taken from the logged decision: it is
/// what happened, not what was decided.
pub fn replay(
    store: &Store,
    filter: &ReplayFilter,
    policies: &[Policy],
) -> Result<ReplayReport, StoreError> {
    let mut known: Vec<Policy> = policies.to_vec();
    for name in crate::policy::source::shipped_names() {
        if let Ok(p) = crate::policy::load(name) {
            known.push(p);
        }
    }
    let rows = rows(store, filter, true)?;
    let mut report = ReplayReport::default();
    for (row, _) in rows {
        let Some(input) = row.input.as_deref() else {
            report.skipped.push(ReplaySkipped {
                id: row.id,
                thread: row.thread,
                run: row.run,
                reason: "logged before the decision log kept its input".into(),
            });
            continue;
        };
        report.checked = report.checked.saturating_add(1);
        let differ = |reason: String, logged, replayed| ReplayDifference {
            id: row.id,
            thread: row.thread.clone(),
            run: row.run,
            operation: row.operation.clone(),
            policy: row.policy.clone(),
            policy_sha256: row.sha.clone(),
            reason,
            logged,
            replayed,
            policy_missing: false,
        };
        let Some(policy) = known.iter().find(|p| p.sha256 == row.sha) else {
            report.differences.push(ReplayDifference {
                policy_missing: true,
                ..differ(
                    format!(
                        "no policy with sha256 {} (policy \"{}\")",
                        row.sha, row.policy
                    ),
                    None,
                    None,
                )
            });
            continue;
        };
        let input: DecisionInput = match unchunked(store, input) {
            Ok(i) => i,
            Err(e) => {
                report.differences.push(differ(
                    format!("the logged input is unreadable: {e}"),
                    None,
                    None,
                ));
                continue;
            }
        };
        let logged = match expanded(store, &row.decision) {
            Ok(v) => v,
            Err(e) => {
                report.differences.push(differ(
                    format!("the logged decision is unreadable: {e}"),
                    None,
                    None,
                ));
                continue;
            }
        };
        let decided = decide_again(policy, &input);
        let decision = match decided {
            Ok(d) => d,
            Err(e) => {
                report.differences.push(differ(
                    format!("deciding again fails: {}", crate::error::located(&e)),
                    None,
                    None,
                ));
                continue;
            }
        };
        let mut replayed = serde_json::to_value(&decision).unwrap_or_default();
        as_delivered(&mut replayed, &logged);
        let fields = differing(&logged, &replayed);
        if !fields.is_empty() {
            let pick = |v: &serde_json::Value| {
                serde_json::Value::Object(
                    fields
                        .iter()
                        .map(|f| (f.clone(), v.get(f).cloned().unwrap_or_default()))
                        .collect(),
                )
            };
            report.differences.push(differ(
                format!("differs in {}", fields.join(", ")),
                Some(pick(&logged)),
                Some(pick(&replayed)),
            ));
        }
    }
    Ok(report)
}

/// Decide `input` with `policy` the way the store decides (its context included): what a
/// shadow policy would have decided for a logged dispatch (`baton serve --shadow`).
pub fn decide_input(
    policy: &crate::policy::Policy,
    input: &DecisionInput,
) -> Result<crate::decision::Decision, crate::pipeline::PipelineError> {
    decide_again(policy, input)
}

/// Decide `input` again the way the store decided it: evaluate, then select and fit the
/// handoff to its budget (the budget and its trace entry are part of the decision). The
/// deterministic summary is rendered; a logged decision whose handoff an external summarizer
/// wrote is fitted on the deterministic text (docs/store.md#decision-log-and-replay).
fn decide_again(
    policy: &crate::policy::Policy,
    input: &DecisionInput,
) -> Result<crate::decision::Decision, crate::pipeline::PipelineError> {
    let setup = crate::pipeline::Setup::of(&input.options(), &Default::default())
        .in_context(input.context.clone());
    let plan = crate::pipeline::plan(policy, &input.state, &setup)?;
    crate::pipeline::finish(plan, &crate::summarize::Deterministic).map(|o| o.decision)
}

/// Apply to a decision made again what the delivery stage recorded in the logged one: a
/// fallback to inline (mode, no document, no pre-grant, the reason and its kind) and the renderer's
/// inline note.
fn as_delivered(replayed: &mut serde_json::Value, logged: &serde_json::Value) {
    let logged_delivery = logged.get("delivery").filter(|d| d.is_object());
    let fallback = logged_delivery
        .and_then(|d| d.get("fallback_reason"))
        .cloned();
    // Recorded since baton has recorded it; a decision logged before has none to copy.
    let kind = logged_delivery
        .and_then(|d| d.get("fallback_kind"))
        .cloned();
    let note = logged_delivery.and_then(|d| d.get("inline_note")).cloned();
    if let Some(d) = replayed.get_mut("delivery").and_then(|d| d.as_object_mut()) {
        if let Some(reason) = &fallback {
            d.insert("mode".into(), "inline".into());
            d.insert("document".into(), serde_json::Value::Null);
            d.insert("fallback_reason".into(), reason.clone());
            if let Some(k) = &kind {
                d.insert("fallback_kind".into(), k.clone());
            }
        }
        if let Some(n) = &note {
            d.insert("inline_note".into(), n.clone());
        }
    }
    if fallback.is_some() {
        if let Some(obj) = replayed.as_object_mut() {
            obj.insert("pregrant".into(), serde_json::Value::Null);
        }
    }
}

/// The top-level fields in which two decisions differ, in the logged decision's order.
fn differing(logged: &serde_json::Value, replayed: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (logged.as_object(), replayed.as_object()) else {
        return vec!["(the whole decision)".into()];
    };
    let mut out: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    out.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
    out
}

/// The decision-log rows matching `filter`, oldest first, with when each was logged; their
/// inputs (packed) only `with_input`, since they are the large column.
fn rows(
    store: &Store,
    filter: &ReplayFilter,
    with_input: bool,
) -> Result<Vec<(Row, String)>, StoreError> {
    let during = "reading the decision log";
    let mut st = store
        .connection()
        .prepare(
            "SELECT id, thread, run, operation, policy_name, policy_sha256, decision,
                    CASE WHEN ?3 THEN input END, created_at
             FROM decision_log
             WHERE (?1 IS NULL OR thread = ?1) AND (?2 IS NULL OR run = ?2)
             ORDER BY id",
        )
        .map_err(|e| store.err(during, e))?;
    let rows = st
        .query_map(
            rusqlite::params![filter.thread, filter.run, with_input],
            |r| {
                Ok((
                    Row {
                        id: r.get(0)?,
                        thread: r.get(1)?,
                        run: r.get(2)?,
                        operation: r.get(3)?,
                        policy: r.get(4)?,
                        sha: r.get(5)?,
                        decision: r.get::<_, super::packed::Text>(6)?.0,
                        input: r.get::<_, Option<super::packed::Input>>(7)?.map(|t| t.0),
                    },
                    r.get::<_, String>(8)?,
                ))
            },
        )
        .map_err(|e| store.err(during, e))?;
    rows.collect::<Result<Vec<_>, _>>()
        .map_err(|e| store.err(during, e))
}

/// One decision-log row as `baton log export` writes it: the decision as it was returned
/// (trace put back) and, when asked, what it was made from.
#[derive(Debug, Clone)]
pub struct LoggedDecision {
    /// The log row's id.
    pub id: i64,
    /// The thread that recorded it.
    pub thread: String,
    /// The run it was for.
    pub run: u32,
    /// `dispatch`, `regenerate` or `merge_back`.
    pub operation: String,
    /// The policy's name.
    pub policy: String,
    /// The policy's sha256.
    pub policy_sha256: String,
    /// When it was logged (RFC 3339, UTC, milliseconds).
    pub created_at: String,
    /// The decision as `explain --json` printed it.
    pub decision: serde_json::Value,
    /// What it was made from (`state`, `target`, `document_root`, `context`); `None` when not
    /// asked for or logged before the log kept inputs.
    pub input: Option<serde_json::Value>,
}

impl Store {
    /// Every decision-log row logged at or after `since` (all when `None`), oldest first; with
    /// `inputs`, each row's input put back together.
    pub fn logged_decisions(
        &self,
        since: Option<jiff::Timestamp>,
        inputs: bool,
    ) -> Result<Vec<LoggedDecision>, StoreError> {
        let rows = rows(self, &ReplayFilter::default(), inputs)?;
        let mut out = Vec::new();
        for (row, created_at) in rows {
            if let Some(since) = since {
                match created_at.parse::<jiff::Timestamp>() {
                    Ok(t) if t < since => continue,
                    _ => {}
                }
            }
            let corrupt = |why: RowError| {
                StoreError::new(
                    self.name(),
                    StoreErrorKind::Corrupt {
                        what: format!("decision-log row {}", row.id),
                        why: why.to_string(),
                    },
                )
            };
            let decision = expanded(self, &row.decision).map_err(corrupt)?;
            let input = match &row.input {
                Some(text) => {
                    Some(super::input_log::materialize(self.connection(), text).map_err(corrupt)?)
                }
                None => None,
            };
            out.push(LoggedDecision {
                id: row.id,
                thread: row.thread,
                run: row.run,
                operation: row.operation,
                policy: row.policy,
                policy_sha256: row.sha,
                created_at,
                decision,
                input,
            });
        }
        Ok(out)
    }
}

impl Store {
    /// What the latest logged decision of `thread` was made from (`None`: no row, or a row
    /// logged before the log kept inputs).
    pub fn latest_input(&self, thread: &str) -> Result<Option<DecisionInput>, StoreError> {
        use rusqlite::OptionalExtension;
        let during = "reading the decision log";
        let row: Option<(i64, Option<super::packed::Input>)> = self
            .connection()
            .query_row(
                "SELECT id, input FROM decision_log WHERE thread = ?1 ORDER BY id DESC LIMIT 1",
                [thread],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(during, e))?;
        match row {
            Some((id, Some(input))) => unchunked(self, &input.0).map(Some).map_err(|why| {
                StoreError::new(
                    self.name(),
                    StoreErrorKind::Corrupt {
                        what: format!("decision-log row {id}"),
                        why: why.to_string(),
                    },
                )
            }),
            _ => Ok(None),
        }
    }
}
