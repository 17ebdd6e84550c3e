//! `baton fmt`: one canonical layout for policy files.
//!
//! Public entry point: [`format_source`]. The formatter only changes whitespace, so it cannot
//! change what a policy means, and every comment survives:
//! - one statement per line as written; tokens separated by one space, none inside `[...]`
//!   and `(...)` or before `,`;
//! - two spaces of indentation per `{` block; a line that continues a rule (it starts with
//!   `and`, `or`, `when`, ..., or the line before ends in the middle of an expression) gets
//!   four more, and a line that starts with `because` or `handoff` two more;
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
        text: text.to_string(),
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

fn format_tokens(lines: &[Vec<Tok>]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut depth: usize = 0;
    let mut parens: usize = 0;
    let mut open = false;
    let mut blank_pending = false;
    for toks in lines {
        if toks.is_empty() {
            blank_pending = true;
            continue;
        }
        let first = &toks[0];
        let is_comment_line = matches!(first, Tok::Comment(_));
        let closes = word(first) == "}";
        let base = depth.saturating_sub(usize::from(closes));
        let cont = !is_comment_line
            && !closes
            && (open || parens > 0 || CONT_START.contains(&word(first)));
        // `because` and `handoff` close a rule: two spaces in; other continuations four.
        let extra = if cont && matches!(word(first), "because" | "handoff") && !open {
            2
        } else if cont || (is_comment_line && (open || parens > 0)) {
            4
        } else {
            0
        };
        let indent = base * 2 + extra;
        let prev_opens = out.last().is_some_and(|l| l.ends_with('{'));
        if blank_pending && !out.is_empty() && !prev_opens && !closes {
            out.push(String::new());
        }
        blank_pending = false;
        let mut line = " ".repeat(indent);
        let mut prev: Option<&Tok> = None;
        for t in toks {
            if let Some(p) = prev {
                let tight = matches!(word(p), "[" | "(") || matches!(word(t), "]" | ")" | ",");
                if !tight {
                    line.push(' ');
                }
            }
            match t {
                Tok::Word(w) | Tok::Punct(w) | Tok::Str(w) => line.push_str(w),
                Tok::Comment(c) => line.push_str(c.trim_end()),
            }
            match word(t) {
                "{" => depth += 1,
                "}" => depth = depth.saturating_sub(1),
                "[" | "(" => parens += 1,
                "]" | ")" => parens = parens.saturating_sub(1),
                _ => {}
            }
            prev = Some(t);
        }
        if !is_comment_line {
            let last = toks.iter().rev().find(|t| !matches!(t, Tok::Comment(_)));
            open = last.is_some_and(|t| OPEN_END.contains(&word(t)));
        }
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacing_and_indentation() {
        let src = "strategy{\n\n  full_new   when not target.has_thread\n because \"x\"\n\n\n  delta_existing otherwise # keep\n}\nlet  xs = [ -1 ,2 ]\n";
        let out = format_source("t.policy", src).unwrap();
        assert_eq!(
            out,
            "strategy {\n  full_new when not target.has_thread\n    because \"x\"\n\n  delta_existing otherwise # keep\n}\nlet xs = [-1, 2]\n"
        );
        assert_eq!(format_source("t.policy", &out).unwrap(), out);
    }
}
