//! A whitespace-preserving view of policy text for the formatter: per line, the tokens
//! (words, strings, punctuation, a trailing comment). Only ever run on text the parser
//! accepted.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// An identifier, keyword, dotted path or integer.
    Word(String),
    /// A string literal, quotes and escapes as written.
    Str(String),
    Punct(String),
    /// `# ...` to the end of the line.
    Comment(String),
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Words after which the grammar expects a number or an expression, never an operator:
/// the expression keywords and the words that take an integer (`text max N`,
/// `inline_limit N`, `budget N`, `turns N uses N`, `timeout_ms N`).
const BEFORE_OPERAND: &[&str] = &[
    "when",
    "and",
    "or",
    "not",
    "in",
    "max",
    "head",
    "tail",
    "head_tail",
    "compact",
    "shorten",
    "inline_limit",
    "budget",
    "turns",
    "uses",
    "timeout_ms",
];

/// Whether a `-` directly followed by a digit starts a negative integer rather than being
/// the minus operator: it does unless the token before ends an operand.
///
/// Where a word could be either (`max` is also a valid name in an expression), the sign
/// reading is the safe one: written without a space, `max -1` is still a subtraction to
/// the parser, so the formatted text means the same either way.
fn minus_is_sign(prev: Option<&Tok>) -> bool {
    match prev {
        None | Some(Tok::Comment(_)) => true,
        Some(Tok::Word(w)) => BEFORE_OPERAND.contains(&w.as_str()),
        Some(Tok::Str(_)) => false,
        Some(Tok::Punct(p)) => !matches!(p.as_str(), "]" | ")"),
    }
}

/// Split text into lines of tokens.
pub(super) fn lex(text: &str) -> Vec<Vec<Tok>> {
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        let chars: Vec<char> = raw.chars().collect();
        let mut toks: Vec<Tok> = Vec::new();
        let mut i = 0usize;
        // Characters `start..end` of the line (clamped to the line).
        let span = |start: usize, end: usize| -> String {
            chars
                .get(start..end.min(chars.len()))
                .unwrap_or_default()
                .iter()
                .collect()
        };
        while let Some(&c) = chars.get(i) {
            if c.is_whitespace() {
                i = i.saturating_add(1);
            } else if c == '#' {
                toks.push(Tok::Comment(span(i, chars.len())));
                break;
            } else if c == '"' {
                let start = i;
                i = i.saturating_add(1);
                while let Some(&d) = chars.get(i).filter(|&&d| d != '"') {
                    if d == '\\' {
                        i = i.saturating_add(1);
                    }
                    i = i.saturating_add(1);
                }
                i = i.saturating_add(1).min(chars.len());
                toks.push(Tok::Str(span(start, i)));
            } else if is_word(c)
                && matches!(toks.last(), Some(Tok::Word(w)) if w == "disable" || w == "redact")
            {
                // A redaction rule id (`disable github-token`, `redact employee-id`) is one
                // word, hyphens and all.
                let start = i;
                while chars.get(i).is_some_and(|&d| is_word(d) || d == '-') {
                    i = i.saturating_add(1);
                }
                toks.push(Tok::Word(span(start, i)));
            } else if is_word(c)
                || (c == '-'
                    && chars
                        .get(i.saturating_add(1))
                        .is_some_and(|d| d.is_ascii_digit())
                    && minus_is_sign(toks.last()))
            {
                let start = i;
                i = i.saturating_add(1);
                while chars.get(i).is_some_and(|&d| is_word(d)) {
                    i = i.saturating_add(1);
                }
                toks.push(Tok::Word(span(start, i)));
            } else {
                let two: String = span(i, i.saturating_add(2));
                let p = if matches!(two.as_str(), "==" | "!=" | "<=" | ">=") {
                    two
                } else {
                    c.to_string()
                };
                i = i.saturating_add(p.chars().count());
                toks.push(Tok::Punct(p));
            }
        }
        lines.push(toks);
    }
    // A final newline leaves one empty line behind; the printer adds its own.
    while lines.last().is_some_and(|l: &Vec<Tok>| l.is_empty()) {
        lines.pop();
    }
    lines
}
