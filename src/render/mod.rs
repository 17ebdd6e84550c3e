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
];

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
}

/// A template that failed to load or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{template}:{line}: error: {message}")]
pub struct RenderError {
    pub template: String,
    pub line: usize,
    pub message: String,
}

/// Everything a handoff consists of.
#[derive(Debug, Clone, Serialize)]
pub struct Rendered {
    pub document: String,
    pub inline: String,
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
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Provenance {
    pub policy: crate::decision::PolicyRef,
    pub handoff: String,
    pub thread: String,
    pub target: String,
    pub strategy: String,
    pub handoff_strategy: String,
    pub covered_runs: crate::state::RunRange,
    pub delivery: String,
    pub created_by: String,
    pub fallback_reason: Option<String>,
    /// The summarizer failure's message when `fallback_reason` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_detail: Option<String>,
    /// Why the handoff was delivered inline although the policy chose off-band (the
    /// off-band write or the pre-grant failed); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_fallback_reason: Option<String>,
    pub included: Arc<Vec<String>>,
    pub omitted: Arc<Vec<crate::select::Omitted>>,
    pub chars: Chars,
    pub templates: Templates,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Chars {
    pub document: usize,
    pub inline: usize,
    pub summary: usize,
    pub inline_limit: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Templates {
    pub document: String,
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
                message: "no such template (neither in --templates nor embedded)".into(),
            }
        } else {
            template_error(name, &e)
        }
    })?;
    tmpl.render(ctx).map_err(|e| template_error(name, &e))
}

/// Sections for templates. Each carries `body` (markdown bullets, multi-line entries
/// indented), `lines` (one entry per line) and `count`, built in Rust so that large documents
/// render at the speed of string concatenation; `entries` (every entry with id, kind, run, text,
/// truncated) is added only when the template reads it.
fn sections_value(env: &Environment<'_>, template: &str, summary: &Summary) -> minijinja::Value {
    // Build only what the template names (a template that includes others may name anything).
    let source = env
        .get_template(template)
        .map(|t| t.source().to_string())
        .unwrap_or_default();
    let composed = source.split("{%").skip(1).any(|tag| {
        let word = tag.trim_start_matches(['-', '+']).trim_start();
        ["include", "extends", "import", "from"]
            .iter()
            .any(|k| word.starts_with(k))
    });
    let wants = |field: &str| composed || source.is_empty() || source.contains(field);
    let (want_body, want_lines, want_entries) = (wants("body"), wants("lines"), wants("entries"));
    let list: Vec<minijinja::Value> = summary
        .sections
        .iter()
        .map(|s| {
            let mut body = String::new();
            let mut lines = String::new();
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
                minijinja::Value::from_serialize(&s.entries)
            } else {
                minijinja::Value::UNDEFINED
            };
            context! {
                name => s.name.clone(),
                title => s.title.clone(),
                count => s.entries.len(),
                body => body,
                lines => lines,
                entries => entries,
            }
        })
        .collect();
    minijinja::Value::from(list)
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

fn sentence(t: &str) -> String {
    let s = compact(t, 140);
    if s.ends_with('.') || s.ends_with('?') || s.ends_with('!') || s.ends_with("...") {
        s
    } else {
        format!("{s}.")
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
    let anchor = if state.request.kind == crate::state::RequestKind::Fork {
        state
            .request
            .fork_anchor
            .as_ref()
            .map(|a| context! { role => a.role.as_str(), text => a.text.clone() })
    } else {
        None
    };
    let ctx = context! {
        policy => context! { name => policy.name.clone(), sha256 => policy.sha256.clone() },
        thread => context! { id => state.thread.id.clone(), title => state.thread.title.clone() },
        target => decision.target.clone(),
        strategy => decision.strategy.as_str(),
        handoff => context! { id => hid.clone(), strategy => hs.as_str(), created_by => created_by.clone() },
        covered => context! { from => covered.from, to => covered.to },
        sections => sections_value(env, &doc_template, summary),
        summary_text => opts.summary_text.clone(),
        anchor => anchor,
        included_count => summary.included.len(),
        omitted_count => summary.omitted.len(),
        decision => minijinja::Value::from_serialize(decision),
    };
    let mut document = render_one(env, &doc_template, &ctx)?;
    if !document.ends_with('\n') {
        document.push('\n');
    }

    // The inline prompt: pointer + gist + message, shrunk to fit the limit.
    let mode = delivery.map(|d| d.mode).unwrap_or(DeliveryMode::Inline);
    let limit = delivery
        .map(|d| d.inline_limit)
        .unwrap_or(policy.delivery.inline_limit);
    // minijinja strings are shared: the document is copied once, not once per attempt.
    let document_value = minijinja::Value::from(document.as_str());
    let message = state.request.message.clone().unwrap_or_default();
    let inline_prompt = |mode: DeliveryMode, document_path: Option<&str>, gist: &[String]| {
        let ctx = context! {
            mode => mode.as_str(),
            document_path => document_path,
            gist => gist.join(" "),
            message => message.as_str(),
            document => document_value.clone(),
        };
        render_one(env, "inline.md.j2", &ctx)
    };
    let full_gist = gist(summary);
    let mut sentences = full_gist.as_slice();
    let mut inline_note = None;
    let inline = loop {
        let text = inline_prompt(mode, document_path.as_deref(), sentences)?;
        let n = text.chars().count();
        if mode == DeliveryMode::Inline || n <= limit {
            break text;
        }
        let Some((_, shorter)) = sentences.split_last() else {
            inline_note = Some(format!(
                "the inline prompt needs {n} characters but inline_limit is {limit}; the user's message ({} characters) is sent whole, not cut",
                message.chars().count()
            ));
            break text;
        };
        sentences = shorter;
    };

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
            inline: "inline.md.j2".into(),
        },
    };
    Ok(Rendered {
        document,
        inline,
        provenance,
        document_path,
        inline_note,
        inline_fallback,
    })
}
