//! `baton fmt`: one canonical layout for policy files.
//!
//! Public entry point: [`format_source`]. The formatter only changes whitespace, so it cannot
//! change what a policy means, and every comment survives:
//! - one statement per line as written; tokens separated by one space, none inside `[...]`
//!   and `(...)` or before `,`; ladder rungs pad their strategy name, and summary `include`
//!   (separately `exclude`) rules their item kind, to the longest of their block;
//! - two spaces of indentation per `{` block; a line that continues a rule (it starts with
//!   `and`, `or`, `when`, ..., or the line before ends in the middle of an expression) gets
//!   four more, and a line that starts with `because` or `handoff` two more; in a ladder,
//!   continuation lines line up under `when`, the rest of a condition under its operand;
//! - comments keep their text (trailing whitespace removed) and sit one space after code;
//! - at most one blank line in a row, none after `{` or before `}` or at either end of the
//!   file, which ends with one newline.
//!
//! Formatting is idempotent: the layout depends only on the tokens, never on the whitespace
//! it was given. A file that does not parse is refused with the parser's diagnostic.

mod lex;

use crate::policy::{PolicyError, Source};
use lex::{lex, Tok};

/// Format a policy source; `name` names it in the parse error.
pub fn format_source(name: &str, text: &str) -> Result<String, PolicyError> {
    let sources = vec![Source {
        name: name.to_string(),
        text: text.into(),
    }];
    crate::policy::parser::parse(&sources, 0)?;
    Ok(format_tokens(&lex(text)))
}

/// A unified diff between a file and its formatted text (empty when they are equal).
pub fn diff(name: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(name, &format!("{name} (formatted)"))
        .to_string()
}

/// Words after which the rule goes on on the next line.
/// (Only words that cannot end a statement: a rule may end in a name such as `stale`.)
const OPEN_END: &[&str] = &[
    "and", "or", "not", "in", "when", "because", "handoff", "into", "as", "=", "==", "!=", "<",
    "<=", ">", ">=", "+", "-", ",", "[", "(",
];

/// Words that continue the rule of the line before.
const CONT_START: &[&str] = &[
    "and",
    "or",
    "in",
    "when",
    "because",
    "handoff",
    "into",
    "as",
    "otherwise",
    "uses",
    "timeout_ms",
    "newest_first",
    "oldest_first",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    ",",
    "]",
    ")",
];

fn word(t: &Tok) -> &str {
    match t {
        Tok::Word(w) | Tok::Punct(w) => w,
        _ => "",
    }
}

/// What the printer knows about one non-blank line before it lays it out.
struct Planned<'t> {
    toks: &'t [Tok],
    blank_before: bool,
    /// Block depth at the start of the line (one less for a line starting with `}`).
    base: usize,
    /// Continues the rule of the line before.
    cont: bool,
    /// A comment-only line in the middle of a rule.
    comment_in_rule: bool,
    /// The innermost block: what opened it (`strategy`, `summary`, ...) and its number.
    block: Option<(String, usize)>,
}

/// Which column of a line is padded, and in which group of lines of the block: ladder rungs
/// pad their strategy name, summary includes and excludes their item kind.
fn pad_group(p: &Planned) -> Option<(&'static str, usize)> {
    let (kind, _) = p.block.as_ref()?;
    let first = word(p.toks.first()?);
    if p.cont || first.is_empty() || first == "}" || p.toks.len() < 2 {
        return None;
    }
    match (kind.as_str(), first) {
        ("strategy", _) => Some(("ladder", 0)),
        ("summary", "include") => Some(("include", 1)),
        ("summary", "exclude") => Some(("exclude", 1)),
        _ => None,
    }
}

fn plan(lines: &[Vec<Tok>]) -> Vec<Planned<'_>> {
    let mut out: Vec<Planned> = Vec::new();
    let mut depth: usize = 0;
    let mut parens: usize = 0;
    let mut open = false;
    let mut blank_pending = false;
    let mut blocks: Vec<(String, usize)> = Vec::new();
    let mut next_block = 0;
    for toks in lines {
        if toks.is_empty() {
            blank_pending = true;
            continue;
        }
        let Some(first) = toks.first() else {
            continue;
        };
        let is_comment_line = matches!(first, Tok::Comment(_));
        let closes = word(first) == "}";
        let cont = !is_comment_line
            && !closes
            && (open || parens > 0 || CONT_START.contains(&word(first)));
        let prev_opens = out
            .last()
            .and_then(|p| p.toks.iter().rev().find(|t| !matches!(t, Tok::Comment(_))))
            .is_some_and(|t| word(t) == "{");
        out.push(Planned {
            toks,
            blank_before: blank_pending && !out.is_empty() && !prev_opens && !closes,
            base: depth.saturating_sub(usize::from(closes)),
            cont,
            comment_in_rule: is_comment_line && (open || parens > 0),
            block: blocks.last().cloned(),
        });
        blank_pending = false;
        for t in toks {
            match word(t) {
                "{" => {
                    depth = depth.saturating_add(1);
                    blocks.push((word(first).to_string(), next_block));
                    next_block = next_block.saturating_add(1);
                }
                "}" => {
                    depth = depth.saturating_sub(1);
                    blocks.pop();
                }
                "[" | "(" => parens = parens.saturating_add(1),
                "]" | ")" => parens = parens.saturating_sub(1),
                _ => {}
            }
        }
        if !is_comment_line {
            let last = toks.iter().rev().find(|t| !matches!(t, Tok::Comment(_)));
            open = last.is_some_and(|t| OPEN_END.contains(&word(t)));
        }
    }
    out
}

fn format_tokens(lines: &[Vec<Tok>]) -> String {
    let planned = plan(lines);
    // Column widths per (block, group).
    let mut widths: std::collections::BTreeMap<(usize, &str), usize> = Default::default();
    for p in &planned {
        if let (Some((group, idx)), Some((_, id))) = (pad_group(p), &p.block) {
            let w = p
                .toks
                .get(idx)
                .map(|t| word(t).chars().count())
                .unwrap_or(0);
            let e = widths.entry((*id, group)).or_insert(0);
            *e = (*e).max(w);
        }
    }
    let ladder_width = |p: &Planned| match &p.block {
        Some((kind, id)) if kind == "strategy" => widths.get(&(*id, "ladder")).copied(),
        _ => None,
    };
    let mut out: Vec<String> = Vec::new();
    for p in &planned {
        let first = p.toks.first().map(word).unwrap_or("");
        let closing = matches!(first, "because" | "handoff");
        let base = p.base.saturating_mul(2);
        let indent = match ladder_width(p) {
            // In a ladder, continuation lines line up under `when`/`otherwise`, and the rest
            // of a condition under its first operand.
            Some(w) if p.cont && (closing || matches!(first, "when" | "otherwise")) => {
                base.saturating_add(w).saturating_add(1)
            }
            Some(w) if p.cont || p.comment_in_rule => base.saturating_add(w).saturating_add(6),
            _ if p.cont && closing => base.saturating_add(2),
            _ if p.cont || p.comment_in_rule => base.saturating_add(4),
            _ => base,
        };
        if p.blank_before {
            out.push(String::new());
        }
        let pad = pad_group(p).and_then(|(group, idx)| {
            let (_, id) = p.block.as_ref()?;
            widths.get(&(*id, group)).map(|w| (idx, *w))
        });
        let mut line = " ".repeat(indent);
        let mut prev: Option<&Tok> = None;
        for (i, t) in p.toks.iter().enumerate() {
            if let Some(pt) = prev {
                let tight = matches!(word(pt), "[" | "(") || matches!(word(t), "]" | ")" | ",");
                if !tight {
                    line.push(' ');
                }
            }
            match t {
                Tok::Word(w) | Tok::Punct(w) | Tok::Str(w) => line.push_str(w),
                Tok::Comment(c) => line.push_str(c.trim_end()),
            }
            if let Some((idx, w)) = pad {
                if i == idx && i.saturating_add(1) < p.toks.len() {
                    let len = word(t).chars().count();
                    line.push_str(&" ".repeat(w.saturating_sub(len)));
                }
            }
            prev = Some(t);
        }
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod props_tests;
#[cfg(test)]
mod repository_tests;
