//! Compilation of the summary block (sections, includes, excludes, text cuts) to [`CSummary`].

use crate::policy::ast::*;
use crate::policy::{
    CExclude, CInclude,
    CSummary, CTextCut, DegradeStep, Form, SummarySource, TurnLimit,
};
use crate::state::ITEM_KINDS;
use crate::suggest::did_you_mean;
use super::{Checker, Ctx, BUILTIN_SECTIONS, FORMS, MAX_COUNT};
use super::resolve::help;

pub(super) fn compile_summary(c: &mut Checker<'_>, s: &SummaryBlock) -> CSummary {
    let mut sections: Vec<(String, String)> = Vec::new();
    for d in &s.sections {
        if sections.iter().any(|(n, _)| *n == d.name.node) {
            c.err(
                d.name.span,
                format!("section `{}` is declared twice", d.name.node),
                None,
            );
            continue;
        }
        sections.push((d.name.node.clone(), d.title.clone()));
    }
    let (includes, excludes) = compile_rules(c, s, &sections);
    let text_max = s.text_max.as_ref().and_then(|t| {
        c.in_range(
            t,
            "text max",
            4,
            MAX_COUNT,
            Some("the limit counts characters, and 3 of them go to `...`"),
        )
        .and_then(|n| usize::try_from(n).ok())
    });
    let budget = s.budget.as_ref().and_then(|b| {
        c.in_range(&b.chars, "budget", 1, MAX_COUNT, None)
            .and_then(|n| usize::try_from(n).ok())
            .map(|n| (n, b.newest_first))
    });
    let source = compile_source(c, s.source.as_ref());
    let mut text_cuts = Vec::new();
    if let (Some(n), Some(t)) = (text_max, &s.text_max) {
        text_cuts.push(CTextCut {
            cut: crate::cut::Cut::Compact(n),
            kind: None,
            section: None,
            strict: false,
            span: t.span,
        });
    }
    for r in &s.text_cuts {
        if let Some(cut) = compile_text_cut(c, r, &sections) {
            text_cuts.push(cut);
        }
    }
    let document_max = compile_document_max(c, s.document_max.as_ref());
    let turn_max = match &s.turn_max {
        None => TurnLimit::Target,
        Some(Spanned { node: None, .. }) => TurnLimit::Unlimited,
        Some(Spanned { node: Some(n), span }) => {
            let d = Spanned { node: *n, span: *span };
            if d.node < 1 || d.node > MAX_COUNT {
                c.in_range(&d, "turn max", 1, MAX_COUNT, None);
                TurnLimit::Target
            } else {
                TurnLimit::Chars(usize::try_from(d.node).unwrap_or(usize::MAX))
            }
        }
    };
    if let Some(b) = &s.budget {
        let chars = usize::try_from(b.chars.node).unwrap_or(0);
        if (1..crate::policy::MUST_KEEP_FLOOR).contains(&chars) {
            c.warn(
                b.span,
                format!(
                    "a budget of {} characters cannot hold the must-keep items",
                    b.chars.node
                ),
                Some(format!(
                    "the latest user message, open questions and approvals and the last failing command are never cut; leave them at least {} characters",
                    crate::policy::MUST_KEEP_FLOOR
                )),
            );
        }
    }
    let degrade = compile_degrade(c, &s.degrade);
    CSummary {
        text_cuts,
        document_max,
        turn_max,
        degrade,
        sections,
        includes,
        excludes,
        budget,
        source,
        span: s.span,
    }
}

/// The summary's `include` and `exclude` rules: kinds, sections and forms checked (hidden
/// reasoning never included), conditions compiled.
fn compile_rules(
    c: &mut Checker<'_>,
    s: &SummaryBlock,
    sections: &[(String, String)],
) -> (Vec<CInclude>, Vec<CExclude>) {
    let ctx = Ctx::Summary;
    let known_section = |name: &str, sections: &[(String, String)]| {
        BUILTIN_SECTIONS.iter().any(|(n, _)| *n == name) || sections.iter().any(|(n, _)| n == name)
    };
    let kind_ok = |c: &mut Checker<'_>, k: &Spanned<String>| -> bool {
        if ITEM_KINDS.contains(&k.node.as_str()) {
            return true;
        }
        let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
        c.err(k.span, format!("unknown item kind `{}`", k.node), help);
        false
    };
    let mut includes = Vec::new();
    for r in &s.includes {
        if !kind_ok(c, &r.kind) {
            continue;
        }
        if r.kind.node == "reasoning" {
            c.err(r.kind.span, "hidden reasoning can never be included in a handoff", Some("reasoning is the provider's private chain of thought; seed 000 forbids passing it on, so baton excludes it under every policy".into()));
            continue;
        }
        if !known_section(&r.section.node, sections) {
            let names = BUILTIN_SECTIONS
                .iter()
                .map(|(n, _)| *n)
                .chain(sections.iter().map(|(n, _)| n.as_str()));
            let help = did_you_mean(&r.section.node, names)
                .map(|s| format!("did you mean `{s}`?"))
                .or_else(|| {
                    Some(format!(
                        "declare it with `section {} \"Title\"`",
                        r.section.node
                    ))
                });
            c.err(
                r.section.span,
                format!("unknown section `{}`", r.section.node),
                help,
            );
            continue;
        }
        let form = match &r.form {
            None => Form::Full,
            Some(f) => match Form::parse(&f.node) {
                Some(x) => x,
                None => {
                    let help = help(&f.node, FORMS, "forms", '`');
                    c.err(f.span, format!("unknown form `{}`", f.node), help);
                    continue;
                }
            },
        };
        let Ok(when) = c.optional_condition(r.when.as_ref(), ctx) else {
            continue;
        };
        includes.push(CInclude {
            kind: r.kind.node.clone(),
            section: r.section.node.clone(),
            form,
            when,
            span: r.span,
        });
    }
    let mut excludes = Vec::new();
    for r in &s.excludes {
        if !kind_ok(c, &r.kind) {
            continue;
        }
        let Ok(when) = c.optional_condition(r.when.as_ref(), ctx) else {
            continue;
        };
        let reason = r
            .because
            .clone()
            .unwrap_or_else(|| format!("excluded by the rule at {}", crate::policy::at(c.sources, r.span)));
        excludes.push(CExclude {
            kind: r.kind.node.clone(),
            when,
            reason,
            span: r.span,
        });
    }
    (includes, excludes)
}

/// The summary's `source`: deterministic, or a command with its timeout (30 s unless set);
/// an error when the command is empty.
fn compile_source(c: &mut Checker<'_>, source: Option<&SourceDecl>) -> SummarySource {
    match source {
        None | Some(SourceDecl::Deterministic) => SummarySource::Deterministic,
        Some(SourceDecl::Command {
            span,
            command,
            timeout_ms,
        }) => {
            let t = match timeout_ms {
                Some(t) => c.in_range(t, "timeout_ms", 1, MAX_COUNT, None).unwrap_or(1),
                None => 30_000,
            };
            if command.trim().is_empty() {
                c.err(*span, "the summarizer command is empty", None);
            }
            SummarySource::Command {
                command: command.clone(),
                timeout_ms: u64::try_from(t).unwrap_or(1),
            }
        }
    }
}

/// `document max N`: at least 1, at most `MAX_COUNT`; a warning when it cannot hold the
/// must-keep items.
fn compile_document_max(c: &mut Checker<'_>, document_max: Option<&Spanned<i64>>) -> Option<usize> {
    match document_max {
        Some(d) if d.node < 1 => {
            c.err(d.span, "`document max` must be at least 1 character", None);
            None
        }
        Some(d) if d.node > MAX_COUNT => {
            c.in_range(d, "document max", 1, MAX_COUNT, None);
            None
        }
        Some(d) => {
            let n = usize::try_from(d.node).unwrap_or(usize::MAX);
            if n < crate::policy::MUST_KEEP_FLOOR {
                c.warn(
                    d.span,
                    format!(
                        "a document budget of {n} characters cannot hold the must-keep items"
                    ),
                    Some(format!(
                        "the latest user message, open questions and approvals and the last failing command are never cut; leave them at least {} characters",
                        crate::policy::MUST_KEEP_FLOOR
                    )),
                );
            }
            Some(n)
        }
        None => None,
    }
}

/// The `degrade STEP` entries, in source order: each step's kind and size checked.
fn compile_degrade(c: &mut Checker<'_>, decls: &[Spanned<DegradeDecl>]) -> Vec<DegradeStep> {
    let mut degrade = Vec::new();
    for d in decls {
        let kind = |c: &mut Checker<'_>, k: &Spanned<String>| -> bool {
            if ITEM_KINDS.contains(&k.node.as_str()) {
                return true;
            }
            let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
            c.err(k.span, format!("unknown item kind `{}`", k.node), help);
            false
        };
        let step = match &d.node {
            DegradeDecl::DropOldestRuns => Some(DegradeStep::DropOldestRuns),
            DegradeDecl::TextRules => Some(DegradeStep::TextRules),
            DegradeDecl::Drop(k) => kind(c, k).then(|| DegradeStep::Drop(k.node.clone())),
            DegradeDecl::Paths(k) if k.node != "file_change" => {
                c.err(
                    k.span,
                    "only `file_change` items can be listed as paths",
                    Some("write `degrade paths file_change`".into()),
                );
                None
            }
            DegradeDecl::Paths(k) => Some(DegradeStep::Paths(k.node.clone())),
            DegradeDecl::Tail(_, n) | DegradeDecl::Shorten(n) if *n < 1 => {
                c.err(
                    d.span,
                    "a degradation step keeps at least 1 character",
                    None,
                );
                None
            }
            DegradeDecl::Tail(_, n) | DegradeDecl::Shorten(n) if *n > MAX_COUNT => {
                c.err(
                    d.span,
                    format!(
                        "a degradation step of {n} characters is out of range: it must be between 1 and {MAX_COUNT}"
                    ),
                    None,
                );
                None
            }
            DegradeDecl::Tail(k, n) => kind(c, k)
                .then(|| DegradeStep::Tail(k.node.clone(), usize::try_from(*n).unwrap_or(0))),
            DegradeDecl::Shorten(n) => Some(DegradeStep::Shorten(
                usize::try_from(*n).unwrap_or(usize::MAX),
            )),
            DegradeDecl::Kinded(verb, k) if verb == "group" && k.node != "file_change" => {
                c.err(
                    k.span,
                    "only `file_change` items can be grouped by directory",
                    Some("write `degrade group file_change`".into()),
                );
                None
            }
            DegradeDecl::Kinded(verb, k)
                if verb == "drop_output" && !matches!(k.node.as_str(), "command" | "tool_call") =>
            {
                c.err(
                    k.span,
                    format!("`{}` items have no output to leave out", k.node),
                    Some("write `degrade drop_output command` or `degrade drop_output tool_call`".into()),
                );
                None
            }
            DegradeDecl::Kinded(verb, k) => kind(c, k).then(|| {
                let k = k.node.clone();
                match verb.as_str() {
                    "drop_output" => DegradeStep::DropOutput(k),
                    "first_line" => DegradeStep::FirstLine(k),
                    "group" => DegradeStep::Group(k),
                    _ => DegradeStep::Count(k),
                }
            }),
        };
        degrade.extend(step);
    }
    degrade
}

/// Compile one `text FORM [N] [for KIND] [in SECTION] [strict]` rule.
pub(super) fn compile_text_cut(
    c: &mut Checker<'_>,
    r: &TextCutDecl,
    sections: &[(String, String)],
) -> Option<CTextCut> {
    use crate::cut::Cut;
    let n = match (&r.chars, r.form.as_str()) {
        (Some(n), "whole") => {
            c.err(
                n.span,
                "`text whole` takes no number",
                Some("`whole` never cuts; write `text head N` to cut".into()),
            );
            return None;
        }
        (None, "whole") => 0,
        (None, form) => {
            c.err(
                r.span,
                format!("`text {form}` needs a number of characters"),
                Some(format!("for example `text {form} 2000`")),
            );
            return None;
        }
        (Some(n), "compact") if n.node < 4 => {
            c.err(
                n.span,
                "`text compact` must be at least 4 (3 characters go to `...`)",
                None,
            );
            return None;
        }
        (Some(n), _) if n.node < 1 => {
            c.err(n.span, "a text rule keeps at least 1 character", None);
            return None;
        }
        (Some(n), form) => {
            let what = format!("text {form}");
            let n = c.in_range(n, &what, 1, MAX_COUNT, None)?;
            usize::try_from(n).unwrap_or(usize::MAX)
        }
    };
    let cut = match r.form.as_str() {
        "whole" => Cut::Whole,
        "head" => Cut::Head(n),
        "tail" => Cut::Tail(n),
        "head_tail" => Cut::HeadTail(n),
        _ => Cut::Compact(n),
    };
    if let Some(k) = &r.kind {
        if !ITEM_KINDS.contains(&k.node.as_str()) {
            let help = help(&k.node, ITEM_KINDS, "item kinds", '`');
            c.err(k.span, format!("unknown item kind `{}`", k.node), help);
            return None;
        }
    }
    if let Some(sec) = &r.section {
        let known = BUILTIN_SECTIONS.iter().any(|(n, _)| *n == sec.node)
            || sections.iter().any(|(n, _)| *n == sec.node);
        if !known {
            let names = BUILTIN_SECTIONS
                .iter()
                .map(|(n, _)| *n)
                .chain(sections.iter().map(|(n, _)| n.as_str()));
            let help = did_you_mean(&sec.node, names).map(|s| format!("did you mean `{s}`?"));
            c.err(sec.span, format!("unknown section `{}`", sec.node), help);
            return None;
        }
    }
    Some(CTextCut {
        cut,
        kind: r.kind.as_ref().map(|k| k.node.clone()),
        section: r.section.as_ref().map(|s| s.node.clone()),
        strict: r.strict,
        span: r.span,
    })
}
