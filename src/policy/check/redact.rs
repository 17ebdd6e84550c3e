//! The `redact` block (docs/redaction.md): built-in rules turned off by id, the policy's own
//! rules and its exceptions, checked and compiled into the policy's [`Redactor`]. Blocks add
//! up along `extends` (a base's rules stay; a later rule of the same name replaces it).

use super::compose::{override_by_name, Merged};
use super::Checker;
use crate::policy::ast::{RedactPattern, RedactRule, Span};
use crate::policy::CRedact;
use crate::redact::{rules, Redactor, Spec};
use crate::suggest::did_you_mean;
use std::sync::Arc;

/// Ordinary texts a pattern that matches each of them whole would redact whole: it matches
/// "everything".
const ORDINARY: &[&str] = &[
    "cargo test -p core",
    "The build passed after the fix.",
    "src/lib.rs:12:4",
    "fn main() { println!(\"hi\"); }",
];

pub(super) fn compile_redact(c: &mut Checker<'_>, merged: &Merged<'_>) -> CRedact {
    let mut own: Vec<&RedactRule> = Vec::new();
    let mut disabled = Vec::new();
    let mut allows: Vec<&RedactPattern> = Vec::new();
    let mut span = None;
    for b in &merged.redact {
        span = Some(b.span);
        // A second rule of one name within a file is an error; across files it overrides.
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for r in &b.rules {
            if !seen.insert(r.name.node.as_str()) {
                c.err(
                    r.name.span,
                    format!("redaction rule `{}` is defined twice in this block", r.name.node),
                    Some("give each rule its own name".into()),
                );
            }
        }
        override_by_name(&mut own, &b.rules, |r| &r.name);
        for d in &b.disabled {
            if rules::builtin(&d.node).is_none() {
                let help = did_you_mean(&d.node, rules::ids())
                    .map(|s| format!("did you mean `{s}`?"))
                    .or_else(|| {
                        Some(format!(
                            "the built-in rules are {}",
                            rules::ids().collect::<Vec<_>>().join(", ")
                        ))
                    });
                c.err(
                    d.span,
                    format!("`disable {}`: no built-in redaction rule `{}`", d.node, d.node),
                    help,
                );
                continue;
            }
            if !disabled.contains(&d.node) {
                disabled.push(d.node.clone());
            }
        }
        allows.extend(b.allows.iter());
    }
    let mut spec = Spec {
        disabled,
        ..Spec::default()
    };
    let mut own_spans = Vec::new();
    for r in own {
        if rules::builtin(&r.name.node).is_some() {
            c.err(
                r.name.span,
                format!(
                    "`{}` is a built-in redaction rule: name your own rule differently",
                    r.name.node
                ),
                Some(format!(
                    "to replace the built-in, `disable {}` and add a rule of another name",
                    r.name.node
                )),
            );
            continue;
        }
        if pattern(c, &r.pattern, false) {
            spec.rules.push((r.name.node.clone(), r.pattern.text.clone()));
            own_spans.push((r.name.node.clone(), r.span));
        }
    }
    for a in allows {
        if pattern(c, a, true) {
            spec.allows.push(a.text.clone());
        }
    }
    let redactor = match Redactor::new(&spec) {
        Ok(r) => Some(Arc::new(r)),
        Err(e) => {
            c.err(span.unwrap_or_default(), e.to_string(), None);
            None
        }
    };
    if redactor.as_ref().is_some_and(|r| r.is_empty()) {
        if let Some(s) = span {
            c.warn(
                s,
                "every redaction rule is disabled: secrets in the thread reach the next provider",
                Some("keep the built-in rules on (docs/redaction.md)".into()),
            );
        }
    }
    CRedact {
        redactor,
        span,
        rules: own_spans,
    }
}

/// Check one pattern: an error (with a caret at the place the regex parser names) when it
/// does not compile, a warning when it matches the empty string or any text. `allow`: an
/// exception, whose warning says what it lets through.
fn pattern(c: &mut Checker<'_>, p: &RedactPattern, allow: bool) -> bool {
    let re = match regex::Regex::new(&p.text) {
        Ok(re) => re,
        Err(e) => {
            let (message, offset) = regex_error(&e);
            let at = shifted(p.span, offset);
            c.err(
                at,
                format!("invalid redaction pattern: {message}"),
                Some("patterns use the regex crate's syntax (no look-around or backreferences); write `\\\\` for a backslash only where the regex needs one".into()),
            );
            return false;
        }
    };
    let everything = ORDINARY
        .iter()
        .all(|t| re.find(t).is_some_and(|m| m.start() == 0 && m.end() == t.len()));
    if everything {
        let msg = if allow {
            "this exception matches any text: nothing would be redacted"
        } else {
            "this pattern matches any text: every text would be redacted whole"
        };
        c.warn(p.span, msg, Some("anchor the pattern on what the secret looks like (a prefix, a length)".into()));
    } else if re.is_match("") {
        let msg = if allow {
            "this exception matches the empty string: it lets every secret through"
        } else {
            "this pattern matches the empty string (empty matches are never redacted)"
        };
        c.warn(p.span, msg, Some("use `+` rather than `*` so a match holds at least one character".into()));
    }
    true
}

/// The message of a regex error and, for a syntax error, the byte offset in the pattern its
/// caret points at.
fn regex_error(e: &regex::Error) -> (String, Option<usize>) {
    let text = e.to_string();
    let message = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| text.lines().last().unwrap_or(""))
        .to_string();
    // "regex parse error:\n    PATTERN\n    ^^^\nerror: ..." (one-line patterns).
    let lines: Vec<&str> = text.lines().collect();
    let offset = match (lines.get(1), lines.get(2)) {
        (Some(_), Some(caret)) if caret.trim_start().starts_with('^') => caret
            .find('^')
            .map(|i| i.saturating_sub(4)),
        _ => None,
    };
    (message, offset)
}

/// `span` (a string literal) moved to byte `offset` of its text.
fn shifted(span: Span, offset: Option<usize>) -> Span {
    match offset {
        Some(o) => {
            let by = o.saturating_add(1);
            Span {
                start: span.start.saturating_add(by).min(span.end),
                col: span.col.saturating_add(by),
                ..span
            }
        }
        None => span,
    }
}
