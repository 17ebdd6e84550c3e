//! Syntax errors a person can act on. When the grammar refuses a file, the parser's "expected
//! ..., found ..." is the last resort: this module first looks for what usually went wrong
//! and says how to fix it:
//! - an opener (`{`, `[`, `(`) never closed, reported where it opened, with the place the
//!   parser gave up as a second label; a closer that closes nothing; a string never closed;
//! - operators from other languages (`=`, `&&`, `||`, `!`) and single-quoted strings;
//! - a misspelt keyword where the grammar expects one (`offband` -> `off_band`);
//! - a number with a unit (`2KB`, `30s`): numbers are plain counts.
//!
//! Each fix is phrased "did you mean `x`?" over exactly the text to replace, so editors offer
//! it as a quick fix (src/lsp).

use super::diag::{Diagnostic, Severity, Source};
use super::parser::span_at;
use crate::suggest::did_you_mean;

/// Where the grammar refused the text, what it expected there as words, and its generic
/// message ("expected ..., found ...").
pub(super) struct Failure {
    pub(super) pos: usize,
    pub(super) end: usize,
    pub(super) expected_words: Vec<&'static str>,
    /// Whether an operator could come here (a comparison, `and`, `or`): only then is a lone
    /// `=` a comparison gone wrong.
    pub(super) expects_operator: bool,
    pub(super) message: String,
}

/// Keywords a misspelt word is compared with when the failure follows a string
/// (`becuase "..."` parses `becuase` as a name and fails at the string).
const CLAUSE_WORDS: &[&str] = &["because", "when", "otherwise", "handoff", "into"];

/// The diagnostics of a syntax error in source `index`, in source order.
pub(super) fn diagnose(
    sources: &[Source],
    index: usize,
    text: &str,
    failure: Failure,
) -> Vec<Diagnostic> {
    let new = |start: usize, end: usize, msg: String, help: Option<String>| {
        Diagnostic::new(
            sources,
            Severity::Error,
            span_at(text, index, start, end),
            msg,
        )
        .with_help(help)
    };
    let typo = typo_at(text, &failure).map(|t| new(t.start, t.end, t.message, Some(t.help)));
    let mut out = Vec::new();
    match balance(text) {
        Some(b) => {
            let mut d = new(b.at, b.end, b.message, Some(b.help));
            if typo.is_none() {
                if failure.pos > b.at {
                    // The parser's complaint is a consequence: show where it gave up.
                    let stop = span_at(text, index, failure.pos, failure.end);
                    d = d.with_label(
                        sources,
                        stop,
                        format!("the parser stopped here: {}", failure.message),
                    );
                } else if failure.pos < b.at {
                    out.push(new(failure.pos, failure.end, failure.message.clone(), None));
                }
            }
            out.push(d);
        }
        None => {
            if typo.is_none() {
                out.push(new(failure.pos, failure.end, failure.message.clone(), None));
            }
        }
    }
    out.extend(typo);
    out.sort_by_key(|d| (d.line, d.col));
    out
}

struct Found {
    start: usize,
    end: usize,
    message: String,
    help: String,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn typo_at(text: &str, f: &Failure) -> Option<Found> {
    let rest = text.get(f.pos..)?;
    let at = f.pos;
    let op = |len: usize, wrong: &str, right: &str| Found {
        start: at,
        end: at.saturating_add(len),
        message: format!("`{wrong}` is not an operator in a policy: write `{right}`"),
        help: format!("did you mean `{right}`?"),
    };
    if rest.starts_with("&&") {
        return Some(op(2, "&&", "and"));
    }
    if rest.starts_with("||") {
        return Some(op(2, "||", "or"));
    }
    if rest.starts_with('!') && !rest.starts_with("!=") {
        // `!x` -> `not x`: the fix takes the operand along so it reads as written.
        let operand: String = rest
            .chars()
            .skip(1)
            .take_while(|c| is_word(*c) || *c == '.' || *c == '(')
            .collect();
        let fix = if operand.is_empty() {
            "not".to_string()
        } else {
            format!("not {operand}")
        };
        return Some(Found {
            start: at,
            end: at.saturating_add(1).saturating_add(operand.len()),
            message: "`!` is not an operator in a policy: write `not`".into(),
            help: format!("did you mean `{fix}`?"),
        });
    }
    if f.expects_operator && rest.starts_with('=') && !rest.starts_with("==") {
        let before = text.get(..at).and_then(|b| b.chars().last());
        if !matches!(before, Some('=' | '!' | '<' | '>')) {
            return Some(Found {
                start: at,
                end: at.saturating_add(1),
                message: "`=` only defines a `let`: compare with `==`".into(),
                help: "did you mean `==`?".into(),
            });
        }
    }
    if rest.starts_with('\'') {
        let line = rest.lines().next().unwrap_or("");
        if let Some(close) = line.get(1..).and_then(|l| l.find('\'')) {
            let inner = line.get(1..close.saturating_add(1)).unwrap_or("");
            return Some(Found {
                start: at,
                end: at.saturating_add(close).saturating_add(2),
                message: "strings use double quotes".into(),
                help: format!("did you mean `\"{inner}\"`?"),
            });
        }
    }
    if let Some(found) = number_with_unit(text, at) {
        return Some(found);
    }
    let word: String = rest.chars().take_while(|c| is_word(*c)).collect();
    if !word.is_empty() && word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        if let Some(k) = did_you_mean(&word, f.expected_words.iter().copied()) {
            return Some(Found {
                start: at,
                end: at.saturating_add(word.len()),
                message: format!("unknown keyword `{word}`"),
                help: format!("did you mean `{k}`?"),
            });
        }
    }
    if rest.starts_with('"') {
        // `becuase "..."`: the misspelt word parsed as a name; the string is refused.
        let before = text.get(..at).unwrap_or("").trim_end();
        let prev: String = before
            .chars()
            .rev()
            .take_while(|c| is_word(*c))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !prev.is_empty() && !CLAUSE_WORDS.contains(&prev.as_str()) {
            if let Some(k) = did_you_mean(&prev, CLAUSE_WORDS.iter().copied()) {
                let start = before.len().saturating_sub(prev.len());
                return Some(Found {
                    start,
                    end: before.len(),
                    message: format!("unknown keyword `{prev}`"),
                    help: format!("did you mean `{k}`?"),
                });
            }
        }
    }
    None
}

/// A number glued to a unit (`2KB`, `32k`, `30s`) on the failing line or the line before
/// (the unit may parse as a name and the parser fail a little later).
fn number_with_unit(text: &str, at: usize) -> Option<Found> {
    let line_start = |i: usize| {
        text.get(..i)
            .and_then(|b| b.rfind('\n'))
            .map(|n| n.saturating_add(1))
            .unwrap_or(0)
    };
    let this = line_start(at);
    let from = line_start(this.saturating_sub(1));
    let to = text
        .get(at..)
        .and_then(|r| r.find('\n'))
        .map(|n| at.saturating_add(n))
        .unwrap_or(text.len());
    let region = text.get(from..to)?;
    let mut in_str = false;
    let mut prev = ' ';
    let chars: Vec<(usize, char)> = region.char_indices().collect();
    let mut i = 0usize;
    while let Some(&(off, c)) = chars.get(i) {
        if c == '#' && !in_str {
            // A comment runs to the end of its line.
            while chars.get(i).is_some_and(|(_, c)| *c != '\n') {
                i = i.saturating_add(1);
            }
            prev = ' ';
            continue;
        }
        if c == '"' {
            in_str = !in_str;
        }
        if !in_str && c.is_ascii_digit() && !is_word(prev) && prev != '.' {
            let digits: String = chars
                .iter()
                .skip(i)
                .map(|(_, c)| *c)
                .take_while(|c| c.is_ascii_digit() || *c == '_')
                .collect();
            let unit: String = chars
                .iter()
                .skip(i.saturating_add(digits.len()))
                .map(|(_, c)| *c)
                .take_while(|c| is_word(*c))
                .collect();
            if !unit.is_empty() && unit.starts_with(|c: char| c.is_ascii_alphabetic()) {
                let start = from.saturating_add(off);
                let end = start.saturating_add(digits.len()).saturating_add(unit.len());
                let n: Option<i64> = digits.replace('_', "").parse().ok();
                let factor: Option<i64> = match unit.to_ascii_lowercase().as_str() {
                    "k" | "kb" | "kc" => Some(1_000),
                    "kib" => Some(1_024),
                    "m" | "mb" => Some(1_000_000),
                    "mib" => Some(1_048_576),
                    "c" | "ch" | "chars" | "characters" | "ms" => Some(1),
                    "s" | "sec" | "secs" => Some(1_000),
                    _ => None,
                };
                let fixed = n.zip(factor).and_then(|(n, f)| n.checked_mul(f));
                let help = match fixed {
                    Some(v) => format!(
                        "did you mean `{}`? sizes count characters and timeouts milliseconds, written as plain numbers",
                        grouped(v)
                    ),
                    None => "write a plain number: sizes count characters and timeouts milliseconds (`32_000`, `20_000`)".into(),
                };
                return Some(Found {
                    start,
                    end,
                    message: format!("`{digits}{unit}`: numbers take no unit"),
                    help,
                });
            }
            i = i.saturating_add(digits.len().max(1));
            prev = '0';
            continue;
        }
        prev = c;
        i = i.saturating_add(1);
    }
    None
}

/// `32000` as `32_000`.
fn grouped(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    let n = digits.len();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && n.saturating_sub(i) % 3 == 0 {
            out.push('_');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

struct Unbalanced {
    at: usize,
    end: usize,
    message: String,
    help: String,
}

fn closer(open: char) -> char {
    match open {
        '{' => '}',
        '[' => ']',
        _ => ')',
    }
}

/// The first bracket or string that does not balance, outside strings and comments.
fn balance(text: &str) -> Option<Unbalanced> {
    let lc = |i: usize| {
        let s = span_at(text, 0, i, i);
        format!("{}:{}", s.line, s.col)
    };
    let never_closed = |open: char, at: usize| Unbalanced {
        at,
        end: at.saturating_add(1),
        message: format!("this `{open}` opened at {} is never closed", lc(at)),
        help: match (open, next_block_line(text, at)) {
            ('{', Some(line)) => format!(
                "add the `}}` that ends this block before line {line}, where the next block starts"
            ),
            _ => format!("add the `{}` that closes it", closer(open)),
        },
    };
    let mut stack: Vec<(char, usize)> = Vec::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '#' => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        closed = true;
                        break;
                    } else if c == '\n' {
                        break;
                    }
                }
                if !closed {
                    return Some(Unbalanced {
                        at: i,
                        end: i.saturating_add(1),
                        message: format!("this string opened at {} is never closed", lc(i)),
                        help: "end it with `\"` on the same line: strings cannot span lines"
                            .into(),
                    });
                }
            }
            '{' | '[' | '(' => stack.push((c, i)),
            '}' | ']' | ')' => match stack.last() {
                Some(&(open, _)) if closer(open) == c => {
                    stack.pop();
                }
                Some(&(open, at)) => return Some(never_closed(open, at)),
                None => {
                    return Some(Unbalanced {
                        at: i,
                        end: i.saturating_add(1),
                        message: format!("this `{c}` closes nothing"),
                        help: "remove it, or add the opener it was meant to close".into(),
                    })
                }
            },
            _ => {}
        }
    }
    stack.last().map(|&(open, at)| never_closed(open, at))
}

/// The line of the first top-level declaration that starts a line after `at` (where an
/// unclosed block must have ended).
fn next_block_line(text: &str, at: usize) -> Option<usize> {
    const STARTS: &[&str] = &[
        "policy", "let", "eligible", "stale", "strategy", "summary", "delivery", "pregrant",
        "providers", "redact", "log",
    ];
    let opener_line = span_at(text, 0, at, at).line;
    text.lines()
        .enumerate()
        .skip(opener_line)
        .find(|(_, line)| {
            let word: String = line.chars().take_while(|c| is_word(*c)).collect();
            STARTS.contains(&word.as_str())
        })
        .map(|(i, _)| i.saturating_add(1))
}
