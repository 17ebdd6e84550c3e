//! Text rules: the compact rule of seed 004 and the budget cuts.

/// Collapse every whitespace run to one space and trim; over `max` characters, keep the first
/// `max - 3` and append `...`. Counts characters, never splits a grapheme cluster (see
/// [`crate::cut::compact`]).
pub fn compact(text: &str, max: usize) -> String {
    crate::cut::compact(text, max)
}

/// The longest prefix of `text` of at most `room` characters that ends at a whitespace
/// boundary, followed by `...`; when no boundary fits, a plain character cut. Empty when
/// `room` is too small to hold anything useful.
pub fn cut_at_whitespace(text: &str, room: usize) -> String {
    if room <= 3 {
        return String::new();
    }
    let limit = room.saturating_sub(3);
    let mut last_boundary = None;
    let mut byte_at_limit = text.len();
    for (n, (i, c)) in text.char_indices().enumerate() {
        if n == limit {
            byte_at_limit = i;
            if c.is_whitespace() {
                last_boundary = Some(i);
            }
            break;
        }
        if c.is_whitespace() {
            last_boundary = Some(i);
        }
    }
    let end = match last_boundary {
        Some(b) if b > 0 => b,
        // No whitespace: a plain cut, on a grapheme-cluster boundary.
        _ => crate::cut::grapheme_end_within(text, limit).min(byte_at_limit),
    };
    let prefix = text[..end].trim_end();
    if prefix.is_empty() {
        return String::new();
    }
    format!("{prefix}...")
}

/// The newest words of `body` in at most `room` characters, as seed 004's legacy continuation
/// keeps them: start `room` characters from the end; when that start falls inside a word, move
/// it forward to the next whitespace (a body with no whitespace there is cut inside the word);
/// drop leading whitespace. Counts characters, never splits a UTF-8 code point. Empty when
/// nothing is left.
pub fn keep_tail(body: &str, room: usize) -> String {
    let total = body.chars().count();
    let start_char = total.saturating_sub(room);
    let mut start = body
        .char_indices()
        .nth(start_char)
        .map(|(i, _)| i)
        .unwrap_or(body.len());
    if start > 0 {
        let before = body[..start].chars().next_back();
        let at = body[start..].chars().next();
        let inside_word =
            matches!((before, at), (Some(b), Some(a)) if !b.is_whitespace() && !a.is_whitespace());
        if inside_word {
            if let Some(ws) = body[start..].find(char::is_whitespace) {
                start = start.saturating_add(ws);
            }
        }
    }
    body.get(start..).unwrap_or("").trim_start().to_string()
}

/// A text's first non-empty line, then how much was cut (`[... 1,234 characters cut]`, the
/// marker of the `head` cut). A one-line text is returned whole.
pub fn first_line(text: &str) -> String {
    let text = text.trim();
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let total = text.chars().count();
    let kept = line.chars().count();
    if kept >= total {
        return text.to_string();
    }
    format!(
        "{line} [... {} characters cut]",
        crate::cut::thousands(total.saturating_sub(kept))
    )
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_rule() {
        assert_eq!(compact("  a \n\t b  ", 240), "a b");
        let s240 = "x".repeat(240);
        assert_eq!(compact(&s240, 240), s240);
        let s241 = "x".repeat(241);
        assert_eq!(compact(&s241, 240), format!("{}...", "x".repeat(237)));
        let multi = "é".repeat(241);
        assert_eq!(compact(&multi, 240), format!("{}...", "é".repeat(237)));
    }

    #[test]
    fn cut() {
        assert_eq!(cut_at_whitespace("hello world again", 14), "hello world...");
        assert_eq!(cut_at_whitespace("abcdefghij", 6), "abc...");
        assert_eq!(cut_at_whitespace("abc", 2), "");
    }

    #[test]
    fn tail() {
        assert_eq!(keep_tail("alpha beta gamma", 8), "gamma");
        assert_eq!(keep_tail("alpha beta gamma", 6), "gamma");
        assert_eq!(keep_tail("alpha beta gamma", 100), "alpha beta gamma");
        assert_eq!(keep_tail("abcdefgh", 3), "fgh");
        assert_eq!(keep_tail("🧪🧪🧪X", 2), "🧪X");
        assert_eq!(keep_tail("tail   ", 2), "");
    }
}
