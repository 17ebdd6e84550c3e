//! Rendering: a decision and its selected summary -> the handoff document, the first-turn
//! inline prompt and the `handoff.json` provenance, through minijinja templates.
//!
//! Public entry point: [`render`]. Templates are embedded in the binary; a directory given in
//! [`RenderOptions::templates_dir`] overrides any of them by file name.

use crate::decision::{Decision, DeliveryMode};
use crate::policy::Policy;
use crate::select::{compact, Summary};
use crate::state::State;
use minijinja::{context, Environment};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

pub mod receipt;
mod templates;
pub use templates::TemplateSet;

/// Templates shipped in the binary.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "handoff.md.j2",
        include_str!("../../templates/handoff.md.j2"),
    ),
    ("inline.md.j2", include_str!("../../templates/inline.md.j2")),
    ("t3code.md.j2", include_str!("../../templates/t3code.md.j2")),
    (
        "t3code-legacy.md.j2",
        include_str!("../../templates/t3code-legacy.md.j2"),
    ),
    (
        "t3code.inline.md.j2",
        include_str!("../../templates/t3code.inline.md.j2"),
    ),
    (
        "t3code-legacy.inline.md.j2",
        include_str!("../../templates/t3code-legacy.inline.md.j2"),
    ),
];

/// The first-turn prompt's template for a document template: `NAME.inline.md.j2` when the
/// document template is `NAME.md.j2` and that file exists (in `--templates` or embedded), else
/// `inline.md.j2`.
pub(crate) fn inline_template_for(env: &Environment<'_>, doc_template: &str) -> String {
    doc_template
        .strip_suffix(".md.j2")
        .map(|stem| format!("{stem}.inline.md.j2"))
        .filter(|name| env.get_template(name).is_ok())
        .unwrap_or_else(|| "inline.md.j2".to_string())
}

#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// The compiled templates to render with (an [`crate::Engine`] passes its own). When
    /// `None`, the embedded templates overridden by `templates_dir` are compiled for this call.
    pub templates: Option<TemplateSet>,
    /// A directory whose templates override the embedded ones by name (used only when
    /// `templates` is `None`).
    pub templates_dir: Option<PathBuf>,
    /// Who wrote the summary (`deterministic` unless an external summarizer did).
    pub created_by: Option<String>,
    /// Why the summary fell back to the deterministic builder, if it did (the failure's
    /// kind: `timeout`, `exit_status`, `empty_output`, `over_budget`, `invalid_utf8`, `spawn`).
    pub fallback_reason: Option<String>,
    /// The failure's full message, when the summary fell back.
    pub fallback_detail: Option<String>,
    /// Markdown an external summarizer wrote; templates show it (as `summary_text`) in place
    /// of the deterministic sections.
    pub summary_text: Option<String>,
    /// Where off-band documents live (as `EvalOptions::document_root`), for a handoff that
    /// the budget moves off-band.
    pub document_root: Option<PathBuf>,
    /// The request's message is too long for one turn: the document carries it (as
    /// `request_message`) and the first-turn prompt points to it.
    pub message_in_document: bool,
}

/// A template that failed to load or render. `Display` is the message; the template and
/// line are fields (the shells print `template:line: error: message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RenderError {
    /// The template's name.
    pub template: String,
    /// The line of the template.
    pub line: usize,
    /// What went wrong.
    pub message: String,
}

/// Everything a handoff consists of.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Rendered {
    /// The handoff document (markdown), rendered from `handoff.md.j2` or the policy's template.
    pub document: String,
    /// The first-turn prompt (`inline.md.j2`): for off-band delivery a short prompt naming the
    /// document, for inline delivery the document itself, with the user's message.
    pub inline: String,
    /// Where the handoff came from, as written to `handoff.json`: the policy, thread and target,
    /// the strategies, covered runs, delivery, who wrote the summary, the items included and
    /// omitted, character counts and template names.
    #[schemars(with = "std::collections::BTreeMap<String, serde_json::Value>")]
    pub provenance: Provenance,
    /// The off-band document's path (none when delivered inline).
    pub document_path: Option<String>,
    /// Set when the inline prompt could not fit `inline_limit` (it is never cut silently).
    pub inline_note: Option<String>,
    /// For an off-band handoff: the first-turn prompt as inline delivery would send it (the
    /// whole document plus the message), used when the off-band write fails so nothing is
    /// lost. `None` when the handoff is already inline. Never serialised (it repeats the
    /// document).
    #[serde(skip)]
    pub inline_fallback: Option<String>,
    /// For an off-band handoff whose budget left items out or cut them: the transcript
    /// carrying each of them whole (written beside the document as `transcript.md`; its
    /// path is `provenance.transcript`). Never serialised here.
    #[serde(skip)]
    pub transcript: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
/// The provenance record (`handoff.json`): who made the handoff, from what, and how.
pub struct Provenance {
    /// The policy (name, sha256).
    pub policy: crate::decision::PolicyRef,
    /// The handoff id.
    pub handoff: String,
    /// The thread id.
    pub thread: String,
    /// The target provider.
    pub target: String,
    /// The decision's strategy.
    pub strategy: String,
    /// The handoff strategy.
    pub handoff_strategy: String,
    /// The runs the handoff covers.
    pub covered_runs: crate::state::RunRange,
    /// How it is delivered (`inline`, `off_band`).
    pub delivery: String,
    /// Who wrote the summary (`deterministic`, `command:...`).
    pub created_by: String,
    /// Why an external summarizer's output was not used.
    pub fallback_reason: Option<String>,
    /// The summarizer failure's message when `fallback_reason` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_detail: Option<String>,
    /// Why the handoff was delivered inline although the policy chose off-band (the
    /// off-band write or the pre-grant failed); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_fallback_reason: Option<String>,
    /// Its kind (`disk_full`, ...), as the decision's `delivery.fallback_kind`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_fallback_kind: Option<crate::decision::FallbackKind>,
    /// Ids of the items in the handoff.
    pub included: Arc<Vec<String>>,
    /// Items left out, with why.
    pub omitted: Arc<Vec<crate::select::Omitted>>,
    /// Character counts.
    pub chars: Chars,
    /// The templates it was rendered with.
    pub templates: Templates,
    /// The budget the handoff was fitted to, and every degradation step (docs/rendering.md#budgets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::decision::BudgetReport>,
    /// What secret redaction replaced, per rule (counts and item ids; docs/redaction.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<crate::redact::RedactionReport>,
    /// The transcript written beside the document (docs/rendering.md#what-the-budget-leaves-out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
/// Character counts of a rendered handoff.
pub struct Chars {
    /// The document.
    pub document: usize,
    /// The first-turn prompt.
    pub inline: usize,
    /// The summary text.
    pub summary: usize,
    /// The policy's inline limit.
    pub inline_limit: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
/// The templates a handoff was rendered with.
pub struct Templates {
    /// The document's template.
    pub document: String,
    /// The first-turn prompt's template.
    pub inline: String,
}

pub(crate) fn template_error(name: &str, e: &minijinja::Error) -> RenderError {
    let mut message = e
        .detail()
        .map(|d| d.to_string())
        .unwrap_or_else(|| e.kind().to_string());
    if e.kind() == minijinja::ErrorKind::UndefinedError {
        if let (Some(src), Some(range)) = (e.template_source(), e.range()) {
            if let Some(expr) = src.get(range) {
                message = format!("undefined variable `{}`", expr.trim());
            }
        }
    }
    RenderError {
        template: e.name().unwrap_or(name).to_string(),
        line: e.line().unwrap_or(0),
        message,
    }
}

fn render_one(
    env: &Environment<'_>,
    name: &str,
    ctx: &minijinja::Value,
) -> Result<String, RenderError> {
    let tmpl = env.get_template(name).map_err(|e| {
        if e.kind() == minijinja::ErrorKind::TemplateNotFound {
            RenderError {
                template: name.to_string(),
                line: 0,
                message: "no such template (neither in the template directory nor embedded)".into(),
            }
        } else {
            template_error(name, &e)
        }
    })?;
    tmpl.render(ctx).map_err(|e| template_error(name, &e))
}

/// What a template's source names, so that the render context carries only what it reads:
/// a template that includes, extends or imports others may name anything. Worked out once per
/// template when the [`TemplateSet`] is compiled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reads {
    decision: bool,
    body: bool,
    lines: bool,
    entries: bool,
}

impl Reads {
    /// Everything (a template whose source is unknown).
    pub(crate) const ALL: Reads = Reads {
        decision: true,
        body: true,
        lines: true,
        entries: true,
    };

    pub(crate) fn of(source: &str) -> Reads {
        let composed = source.split("{%").skip(1).any(|tag| {
            let word = tag.trim_start_matches(['-', '+']).trim_start();
            ["include", "extends", "import", "from"]
                .iter()
                .any(|k| word.starts_with(k))
        });
        // Whether the template may read `field` (it names it, or it may through another).
        let names = |field: &str| composed || source.is_empty() || source.contains(field);
        Reads {
            decision: names("decision"),
            body: names("body"),
            lines: names("lines"),
            entries: names("entries"),
        }
    }
}

/// Sections for templates. Each carries `body` (markdown bullets, multi-line entries
/// indented), `lines` (one entry per line) and `count`, built in Rust so that large documents
/// render at the speed of string concatenation; `entries` (every entry with id, kind, run, text,
/// truncated) is added only when the template reads it.
fn sections_value(reads: &Reads, summary: &Summary) -> minijinja::Value {
    use minijinja::Value;
    let (want_body, want_lines, want_entries) = (reads.body, reads.lines, reads.entries);
    let list: Vec<Value> = summary
        .sections
        .iter()
        .map(|s| {
            let text_len = |extra: usize| {
                s.entries.iter().fold(0usize, |n, e| {
                    n.saturating_add(e.text.len()).saturating_add(extra)
                })
            };
            let mut body = String::with_capacity(if want_body { text_len(8) } else { 0 });
            let mut lines = String::with_capacity(if want_lines { text_len(1) } else { 0 });
            for e in &s.entries {
                if want_body {
                    body.push_str("- ");
                    for (n, line) in e.text.split('\n').enumerate() {
                        if n > 0 {
                            body.push_str("\n  ");
                        }
                        body.push_str(line);
                    }
                    if e.truncated {
                        body.push_str(" [cut to fit the budget]");
                    }
                    body.push('\n');
                }
                if want_lines {
                    lines.push_str(&e.text);
                    lines.push('\n');
                }
            }
            let entries = if want_entries {
                Value::from_serialize(&s.entries)
            } else {
                Value::UNDEFINED
            };
            Value::from_object(SectionCtx([
                Value::from(s.name.as_str()),
                Value::from(s.title.as_str()),
                Value::from(s.entries.len()),
                Value::from(body),
                Value::from(lines),
                entries,
            ]))
        })
        .collect();
    minijinja::Value::from(list)
}

/// The keys of a section in templates, in the order they enumerate.
const SECTION_KEYS: [&str; 6] = ["name", "title", "count", "body", "lines", "entries"];

/// One section as templates see it: a map of [`SECTION_KEYS`] (what `context!` builds, without
/// converting each value through serde).
#[derive(Debug)]
struct SectionCtx([minijinja::Value; 6]);

impl minijinja::value::Object for SectionCtx {
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.get_value_by_str(key.as_str()?)
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<minijinja::Value> {
        let i = SECTION_KEYS.iter().position(|k| *k == key)?;
        self.0.get(i).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Str(&SECTION_KEYS)
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(SECTION_KEYS.len())
    }
}

/// Two or three sentences for the inline prompt, drawn from the document's sections.
fn gist(summary: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let first = |name: &str| summary.section(name).and_then(|s| s.entries.first());
    let last = |name: &str| summary.section(name).and_then(|s| s.entries.last());
    if let Some(e) = first("goals")
        .or_else(|| first("anchor"))
        .or_else(|| first("compact"))
    {
        out.push(format!("Goal: {}", sentence(&e.text)));
    }
    if let Some(e) = last("decisions")
        .or_else(|| last("messages"))
        .or_else(|| last("narration"))
    {
        out.push(format!("Latest: {}", sentence(&e.text)));
    }
    if let Some(e) = last("checkpoint").or_else(|| last("files")) {
        out.push(format!("Workspace: {}", sentence(&e.text)));
    }
    out
}

/// One sentence of the gist: at most 140 characters, cut between words (`...` when cut).
fn sentence(t: &str) -> String {
    let flat = crate::cut::collapse(t);
    let s = if flat.chars().count() <= 140 {
        flat
    } else {
        let cut = crate::select::cut_at_whitespace(&flat, 140);
        if cut.is_empty() {
            compact(t, 140)
        } else {
            cut
        }
    };
    if s.ends_with('.') || s.ends_with('?') || s.ends_with('!') || s.ends_with("...") {
        s
    } else {
        format!("{s}.")
    }
}

/// The handoff a decision makes (its strategy, covered runs and id); an error when it needs
/// none, or when the selection's redaction could not run.
fn handoff_of(
    decision: &Decision,
    summary: &Summary,
) -> Result<(crate::state::HandoffStrategy, crate::state::RunRange, String), RenderError> {
    let (Some(hs), Some(covered), Some(hid)) = (
        decision.handoff_strategy,
        decision.covered_runs.clone(),
        decision.handoff_id.clone(),
    ) else {
        return Err(RenderError {
            template: "-".into(),
            line: 0,
            message: format!(
                "strategy `{}` needs no handoff document",
                decision.strategy.as_str()
            ),
        });
    };
    // Fail closed: a selection whose redaction could not run is never rendered (`fit` turns
    // the decision `unsupported` before it gets here).
    if let Some(e) = summary.redaction.failure() {
        return Err(RenderError {
            template: "-".into(),
            line: 0,
            message: e.to_string(),
        });
    }
    Ok((hs, covered, hid))
}

/// A fork's anchor for the templates: its role and its text (redacted by the selection),
/// quoted.
fn anchor_value(state: &State, summary: &Summary) -> Option<minijinja::Value> {
    if state.request.kind == crate::state::RequestKind::Fork {
        let text = summary.redaction.anchor.as_deref();
        state.request.fork_anchor.as_ref().zip(text).map(|(a, text)| {
            let text = crate::select::prose(text.trim(), false).replace('\n', "\n> ");
            context! { role => a.role.as_str(), text => text }
        })
    } else {
        None
    }
}

/// The ids of the must-keep entries the budget cut.
fn must_keep_cut(summary: &Summary) -> Vec<&str> {
    (summary.sections.iter())
        .flat_map(|s| &s.entries)
        .filter(|e| e.must_keep && (e.truncated || e.degraded))
        .map(|e| e.id.as_str())
        .collect()
}

/// The handoff document: the template rendered, ending in a newline, with the request's
/// message (`request_message`, when it goes in the document) appended when the template
/// does not show it.
fn render_document(
    env: &Environment<'_>,
    doc_template: &str,
    ctx: &minijinja::Value,
    request_message: Option<&str>,
) -> Result<String, RenderError> {
    let mut document = render_one(env, doc_template, ctx)?;
    if !document.ends_with('\n') {
        document.push('\n');
    }
    // A template that does not show the request's message gets it appended.
    if let Some(m) = request_message.filter(|m| !document.contains(*m))
    {
        document.push_str("\n## The user's message for this turn\n\n");
        document.push_str(m);
        document.push('\n');
    }
    Ok(document)
}

/// [`render`]'s inline prompt in a delivery mode, for a document path and gist sentences.
type InlinePrompt<'a> =
    dyn Fn(DeliveryMode, Option<&str>, &[String]) -> Result<String, RenderError> + 'a;

/// The inline prompt (`inline_prompt` of the gist's sentences): off-band, its gist shortened
/// sentence by sentence until it fits `limit` (the pointer prompt limit), with a note when
/// even none fits; inline, nothing limits it.
fn shrink_to_limit(
    inline_prompt: &InlinePrompt<'_>,
    mode: DeliveryMode,
    document_path: Option<&str>,
    full_gist: &[String],
    limit: usize,
    message_chars: usize,
) -> Result<(String, Option<String>), RenderError> {
    let mut sentences = full_gist;
    let mut inline_note = None;
    let inline = loop {
        let text = inline_prompt(mode, document_path, sentences)?;
        let n = text.chars().count();
        if mode == DeliveryMode::Inline || n <= limit {
            break text;
        }
        let Some((_, shorter)) = sentences.split_last() else {
            inline_note = Some(format!(
                "the off-band pointer prompt needs {n} characters but inline_limit is {limit}; the user's message ({message_chars} characters) is sent whole, not cut"
            ));
            break text;
        };
        sentences = shorter;
    };
    Ok((inline, inline_note))
}

/// The request's message as the inline prompt carries it: as written, or, when it went into
/// the document (`in_document`), a line saying where to read it.
fn turn_message(message: String, in_document: bool) -> String {
    if in_document {
        format!(
            "The user's message for this turn ({} characters, too long for one turn) is in that document, under \"The user's message for this turn\": act on it.",
            crate::select::thousands(message.chars().count())
        )
    } else {
        message
    }
}

/// Render a handoff for `decision`. Fails when the decision needs no handoff.
pub fn render(
    policy: &Policy,
    state: &State,
    decision: &Decision,
    summary: &Summary,
    opts: &RenderOptions,
) -> Result<Rendered, RenderError> {
    let (hs, covered, hid) = handoff_of(decision, summary)?;
    let loaded;
    let set = match &opts.templates {
        Some(set) => set,
        None => {
            loaded = TemplateSet::load(opts.templates_dir.as_deref())?;
            &loaded
        }
    };
    let env = set.env();
    let doc_template = policy
        .template
        .clone()
        .unwrap_or_else(|| "handoff.md.j2".into());
    let created_by = opts
        .created_by
        .clone()
        .unwrap_or_else(|| "deterministic".into());
    let delivery = decision.delivery.as_ref();
    let document_path = delivery.and_then(|d| d.document.clone());
    // Thread text is made safe: a title stays on its line, an anchor stays in its quote.
    // Both come redacted from the selection (docs/redaction.md); the request's message, what
    // the user typed for the target, is sent as written.
    let anchor = anchor_value(state, summary);
    let title = summary
        .redaction
        .title
        .as_deref()
        .map(crate::select::one_line);
    let message = state.request.message.clone().unwrap_or_default();
    let request_message = opts
        .message_in_document
        .then(|| crate::select::fenced(&message));
    // The provider the covered runs end on (seed 004's "from driver").
    let from_provider = crate::facts::run_of(state, covered.to).map(|r| r.provider.clone());
    let parent = state.thread.parent.as_ref().map(|p| p.thread.clone());
    // Build only what the template names: the decision with its trace is serialised for a
    // template that reads `decision`, never for the shipped ones.
    let reads = set.reads(&doc_template);
    let decision_value = if reads.decision {
        minijinja::Value::from_serialize(decision)
    } else {
        minijinja::Value::UNDEFINED
    };
    // The budget's receipt: per kind, what was left out or cut, and where to read it.
    let receipt = receipt::receipt(summary);
    let transcript_path = document_path.as_deref().map(receipt::transcript_path);
    let receipt_where = receipt::where_to_read(transcript_path.as_deref());
    let (left_out, cut) = receipt::counts(&receipt);
    let must_keep_cut = must_keep_cut(summary);
    let ctx = context! {
        budget_receipt => (!receipt.is_empty()).then(|| receipt::receipt_markdown(&receipt)),
        budget_summary => receipt::summary_sentence(left_out, cut),
        budget_where => receipt_where,
        must_keep_whole => must_keep_cut.is_empty(),
        must_keep_cut => must_keep_cut.join(", "),
        policy => context! { name => policy.name.clone(), sha256 => policy.sha256.clone() },
        thread => context! { id => crate::select::one_line(&state.thread.id), title => title, parent => parent },
        from_provider => from_provider,
        request_message => request_message.clone(),
        target => decision.target.clone(),
        strategy => decision.strategy.as_str(),
        handoff => context! { id => hid.clone(), strategy => hs.as_str(), created_by => created_by.clone() },
        covered => context! { from => covered.from, to => covered.to },
        sections => sections_value(&reads, summary),
        summary_text => opts.summary_text.clone(),
        anchor => anchor,
        included_count => summary.included.len(),
        budget_dropped => summary
            .omitted
            .iter()
            .filter(|o| o.reason.starts_with("dropped to fit the budget"))
            .count(),
        omitted_count => summary.omitted.len(),
        decision => decision_value,
    };
    let document = render_document(env, &doc_template, &ctx, request_message.as_deref())?;

    // The inline prompt: pointer + gist + message; off-band, shrunk to fit `inline_limit` (the
    // pointer prompt limit). Inline, nothing limits it: the handoff is the prompt.
    let mode = delivery.map(|d| d.mode).unwrap_or(DeliveryMode::Inline);
    let limit = delivery
        .map(|d| d.inline_limit)
        .unwrap_or(policy.delivery.inline_limit);
    // minijinja strings are shared: the document is copied once, not once per attempt.
    let document_value = minijinja::Value::from(document.as_str());
    let message = turn_message(message, opts.message_in_document);
    let inline_template = set.inline_for(&doc_template);
    let inline_prompt = |mode: DeliveryMode, document_path: Option<&str>, gist: &[String]| {
        let ctx = context! {
            mode => mode.as_str(),
            document_path => document_path,
            gist => gist.join(" "),
            message => message.as_str(),
            document => document_value.clone(),
            handoff => context! { id => hid.clone(), strategy => hs.as_str() },
        };
        render_one(env, &inline_template, &ctx)
    };
    let full_gist = gist(summary);
    let (inline, inline_note) = shrink_to_limit(
        &inline_prompt,
        mode,
        document_path.as_deref(),
        &full_gist,
        limit,
        message.chars().count(),
    )?;

    // Off-band delivery can still fail at write time; keep the inline form ready.
    let inline_fallback = if mode == DeliveryMode::OffBand {
        Some(inline_prompt(DeliveryMode::Inline, None, &full_gist)?)
    } else {
        None
    };

    let provenance = Provenance {
        policy: decision.policy.clone(),
        handoff: hid,
        thread: state.thread.id.clone(),
        target: decision.target.clone(),
        strategy: decision.strategy.as_str().into(),
        handoff_strategy: hs.as_str().into(),
        covered_runs: covered,
        delivery: mode.as_str().into(),
        created_by,
        fallback_reason: opts.fallback_reason.clone(),
        fallback_detail: opts.fallback_detail.clone(),
        delivery_fallback_reason: None,
        delivery_fallback_kind: None,
        included: Arc::clone(&summary.included),
        omitted: Arc::clone(&summary.omitted),
        chars: Chars {
            document: document.chars().count(),
            inline: inline.chars().count(),
            summary: summary.chars,
            inline_limit: limit,
        },
        templates: Templates {
            document: doc_template,
            inline: inline_template,
        },
        budget: None,
        redactions: summary.redaction.report.clone(),
        transcript: None,
    };
    Ok(Rendered {
        document,
        inline,
        provenance,
        document_path,
        inline_note,
        inline_fallback,
        transcript: None,
    })
}
