//! A tolerant token scan of policy text with byte ranges, for the editor features that must
//! work on half-typed text the parser refuses: hover, completion, definitions, references.
//! It never fails: an unterminated string runs to the end of its line, any other character
//! is punctuation.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A name, keyword, dotted path or number.
    Word,
    /// A string literal, quotes included.
    Str,
    Punct,
    Comment,
}

/// One token: its kind and byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'a>(&self, text: &'a str) -> &'a str {
        text.get(self.start..self.end).unwrap_or("")
    }

    /// A string token's content, without its quotes (escapes left as written).
    pub fn unquoted<'a>(&self, text: &'a str) -> &'a str {
        let t = self.text(text);
        let t = t.strip_prefix('"').unwrap_or(t);
        t.strip_suffix('"').unwrap_or(t)
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Every token of `text`, in order.
pub fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let kind = if c.is_whitespace() {
            continue;
        } else if c == '#' {
            while it.peek().is_some_and(|(_, c)| *c != '\n') {
                it.next();
            }
            Kind::Comment
        } else if c == '"' {
            // To the closing quote, or to the end of the line when there is none.
            while let Some((_, c)) = it.next_if(|(_, c)| *c != '\n') {
                match c {
                    '\\' => {
                        it.next_if(|(_, c)| *c != '\n');
                    }
                    '"' => break,
                    _ => {}
                }
            }
            Kind::Str
        } else if is_word(c) {
            while it.peek().is_some_and(|(_, c)| is_word(*c)) {
                it.next();
            }
            Kind::Word
        } else {
            // Two-character operators.
            if matches!(c, '=' | '!' | '<' | '>') && it.peek().is_some_and(|(_, c)| *c == '=') {
                it.next();
            }
            Kind::Punct
        };
        let end = it.peek().map(|(j, _)| *j).unwrap_or(text.len());
        out.push(Token {
            kind,
            start: i,
            end,
        });
    }
    out
}

/// The index of the token that contains `offset` (or ends at it), if any.
pub fn at(tokens: &[Token], offset: usize) -> Option<usize> {
    tokens
        .iter()
        .position(|t| t.start <= offset && offset < t.end)
        .or_else(|| {
            tokens
                .iter()
                .position(|t| t.end == offset && t.kind == Kind::Word)
        })
}

/// The tokens that are not comments.
pub fn code(tokens: &[Token]) -> Vec<Token> {
    tokens
        .iter()
        .filter(|t| t.kind != Kind::Comment)
        .copied()
        .collect()
}

/// Each token with the one after it.
pub fn pairs(code: &[Token]) -> impl Iterator<Item = (Token, Token)> + '_ {
    code.iter().copied().zip(code.iter().skip(1).copied())
}

/// Each token with the two after it.
pub fn triples(code: &[Token]) -> impl Iterator<Item = (Token, Token, Token)> + '_ {
    pairs(code)
        .zip(code.iter().skip(2).copied())
        .map(|((a, b), c)| (a, b, c))
}

/// The name of the innermost `{ ... }` block open at token index `upto` (the word before
/// its `{`: `strategy`, `summary`, `policy`, ...).
pub fn block_at<'a>(text: &'a str, code: &[Token], upto: usize) -> Option<&'a str> {
    blocks_at(text, code, upto).last().copied()
}

/// The names of the `{ ... }` blocks open at token index `upto`, outermost first: inside
/// `providers { cursor { ... } }`, `["providers", "cursor"]`. A block a string opens is the
/// header (`policy "name" {`) at the top level, else named by the string's content (a quoted
/// provider name).
pub fn blocks_at<'a>(text: &'a str, code: &[Token], upto: usize) -> Vec<&'a str> {
    let mut stack: Vec<&str> = Vec::new();
    for (i, t) in code.iter().enumerate().take(upto) {
        match t.text(text) {
            "{" => {
                let prev = i.checked_sub(1).and_then(|j| code.get(j));
                let opener = match prev {
                    Some(p) if p.kind == Kind::Str && stack.is_empty() => "policy",
                    Some(p) if p.kind == Kind::Str => p.unquoted(text),
                    Some(p) => p.text(text),
                    None => "",
                };
                stack.push(opener);
            }
            "}" => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack
}

/// The provider names a `providers` block of the text declares (`cursor {`, `"gemini-cli" {`
/// directly inside `providers { ... }`), in order.
pub fn provider_names<'a>(text: &'a str, code: &[Token]) -> Vec<&'a str> {
    let mut stack: Vec<&str> = Vec::new();
    let mut out: Vec<&str> = Vec::new();
    let mut prev: Option<&Token> = None;
    for t in code {
        match t.text(text) {
            "{" => {
                let opener = match prev {
                    Some(p) if p.kind == Kind::Str => p.unquoted(text),
                    Some(p) => p.text(text),
                    None => "",
                };
                if stack.as_slice() == ["providers"] && !out.contains(&opener) {
                    out.push(opener);
                }
                stack.push(opener);
            }
            "}" => {
                stack.pop();
            }
            _ => {}
        }
        prev = Some(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_half_typed_text() {
        let t = "let x = \"open\nstrategy { full_new when target. # c\n";
        let toks = tokens(t);
        let words: Vec<&str> = toks.iter().map(|k| k.text(t)).collect();
        assert_eq!(
            words,
            ["let", "x", "=", "\"open", "strategy", "{", "full_new", "when", "target.", "# c"]
        );
        let code = code(&toks);
        assert_eq!(block_at(t, &code, code.len()), Some("strategy"));
    }

    #[test]
    fn names_nested_provider_blocks() {
        let t = "policy \"p\" {}\nproviders {\n  \"gemini-cli\" { resume ";
        let code = code(&tokens(t));
        assert_eq!(blocks_at(t, &code, code.len()), ["providers", "gemini-cli"]);
        assert_eq!(blocks_at(t, &code, 3), ["policy"]);
        let t = "providers {\n  aider { resume true }\n  \"gemini-cli\" {}\n}\nsummary { x {} }";
        assert_eq!(provider_names(t, &code_of(t)), ["aider", "gemini-cli"]);
    }

    fn code_of(t: &str) -> Vec<Token> {
        code(&tokens(t))
    }
}
