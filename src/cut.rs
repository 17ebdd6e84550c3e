//! Cutting text that keeps meaning, and text that is safe to put in a markdown document.
//!
//! Forms (`text FORM [N] [for KIND] [in SECTION]` in a policy's summary block):
//! - `whole`: never cut;
//! - `head N`: the first N characters, then `[... 1,234 characters cut]`;
//! - `tail N`: `[1,234 characters cut ...]`, then the last N characters;
//! - `head_tail N`: about N/2 characters of each end around `[... 1,234 characters cut ...]`;
//! - `compact N`: seed 004's rule (collapse whitespace, keep the first N-3, append `...`).
//!
//! Every cut falls on a grapheme-cluster boundary (a family emoji, a flag or `e` + a combining
//! accent is never split), prefers a line break, then a word boundary, in the last quarter of
//! the room, and says that it cut. Characters are counted, never bytes; the marker comes on
//! top of the N characters kept.

use serde::Serialize;
use unicode_segmentation::UnicodeSegmentation;

/// How one text is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "form", content = "chars")]
pub enum Cut {
    Whole,
    Compact(usize),
    Head(usize),
    Tail(usize),
    HeadTail(usize),
}

impl Cut {
    /// The limit in characters (none for `whole`).
    pub fn chars(self) -> Option<usize> {
        match self {
            Cut::Whole => None,
            Cut::Compact(n) | Cut::Head(n) | Cut::Tail(n) | Cut::HeadTail(n) => Some(n),
        }
    }

    /// The tighter of two cuts of the same text: a degradation step never lengthens a text.
    pub fn tighter(self, other: Cut) -> Cut {
        match (self.chars(), other.chars()) {
            (None, _) => other,
            (_, None) => self,
            (Some(a), Some(b)) if b < a => other,
            _ => self,
        }
    }

    /// Apply to a text (trimmed first; lines are kept, except by `compact`).
    pub fn apply(self, text: &str) -> String {
        let text = text.trim();
        match self {
            Cut::Whole => text.to_string(),
            Cut::Compact(n) => compact(text, n),
            Cut::Head(n) => head(text, n),
            Cut::Tail(n) => tail(text, n),
            Cut::HeadTail(n) => head_tail(text, n),
        }
    }

    /// Apply to a text that must stay on one line (the `line` form): whitespace runs are
    /// collapsed first.
    pub fn apply_one_line(self, text: &str) -> String {
        match self {
            Cut::Compact(n) => compact(text, n),
            other => other.apply(&collapse(text)),
        }
    }
}

/// `1234` -> `1,234`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len().saturating_add(digits.len() / 3));
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && digits.len().saturating_sub(i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whitespace runs to one space, trimmed.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Seed 004's compact rule: collapse every whitespace run to one space and trim; over `max`
/// characters, keep the first `max - 3` (backed off to a grapheme boundary) and append `...`.
/// Reads no further into the text than it needs (a megabyte output costs what 240 characters
/// and a little look-ahead cost).
pub fn compact(text: &str, max: usize) -> String {
    // Enough look-ahead that a grapheme boundary at `max - 3` is decided as on the whole text.
    let (s, more) = collapse_prefix(text, max.saturating_add(64));
    if !more && s.chars().count() <= max {
        return s;
    }
    let keep = max.saturating_sub(3);
    let end = grapheme_end_within(&s, keep);
    let mut out = s.get(..end).unwrap_or("").to_string();
    out.push_str("...");
    out
}

/// The collapsed text (whitespace runs to one space, trimmed) up to `limit` characters, and
/// whether the collapsed text goes on beyond them.
fn collapse_prefix(text: &str, limit: usize) -> (String, bool) {
    let mut out = String::new();
    let mut count = 0usize;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = count > 0;
            continue;
        }
        let need = if pending_space { 2 } else { 1 };
        if count.saturating_add(need) > limit {
            return (out, true);
        }
        if pending_space {
            out.push(' ');
            count = count.saturating_add(1);
            pending_space = false;
        }
        out.push(c);
        count = count.saturating_add(1);
    }
    (out, false)
}

/// Byte offset of the last grapheme boundary of `s` at or before `chars` characters.
pub(crate) fn grapheme_end_within(s: &str, chars: usize) -> usize {
    let mut count = 0usize;
    let mut end = 0usize;
    for (i, g) in s.grapheme_indices(true) {
        let n = g.chars().count();
        if count.saturating_add(n) > chars {
            return end;
        }
        count = count.saturating_add(n);
        end = i.saturating_add(g.len());
    }
    end
}

/// Byte offset of the first grapheme boundary of `s` such that at most `chars` characters
/// follow it.
fn grapheme_start_within(s: &str, chars: usize) -> usize {
    let mut count = 0usize;
    let mut start = s.len();
    for (i, g) in s.grapheme_indices(true).rev() {
        let n = g.chars().count();
        if count.saturating_add(n) > chars {
            return start;
        }
        count = count.saturating_add(n);
        start = i;
    }
    start
}

/// How far back (or forward) a cut may move to reach a line or word boundary: the last
/// quarter of the room, or up to half of a short room (at most 10 characters).
fn window(room: usize) -> usize {
    (room / 4).max(room.min(20) / 2)
}

/// Whether a boundary is a line break (true) or a word boundary (false).
type Boundary = (usize, bool);

/// The best place to end a head cut in `s[..end]`: the last line break, else the last
/// whitespace, in the last quarter of the room; else `end` itself.
fn head_boundary(s: &str, end: usize, room: usize) -> Boundary {
    let prefix = s.get(..end).unwrap_or("");
    let window_chars = window(room);
    // Byte offset where the window starts (`window_chars` characters before `end`).
    let window_start = prefix
        .char_indices()
        .rev()
        .nth(window_chars.saturating_sub(1))
        .map(|(i, _)| i)
        .unwrap_or(0);
    let window = prefix.get(window_start..).unwrap_or("");
    let next = s.get(end..).and_then(|r| r.chars().next());
    if next == Some('\n') {
        return (end, true);
    }
    if window_chars > 0 {
        if let Some(i) = window.rfind('\n') {
            return (window_start.saturating_add(i), true);
        }
        if next.is_some_and(char::is_whitespace) {
            return (end, false);
        }
        if let Some((i, _)) = window.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
            if window_start.saturating_add(i) > 0 {
                return (window_start.saturating_add(i), false);
            }
        }
    }
    (end, false)
}

/// The best place to start a tail cut in `s[start..]`: the first line break, else the first
/// whitespace, in the first quarter of the room; else `start` itself.
fn tail_boundary(s: &str, start: usize, room: usize) -> Boundary {
    let suffix = s.get(start..).unwrap_or("");
    let window_chars = window(room);
    let window_end = suffix
        .char_indices()
        .nth(window_chars)
        .map(|(i, _)| i)
        .unwrap_or(suffix.len());
    let window = suffix.get(..window_end).unwrap_or("");
    let before = s.get(..start).and_then(|r| r.chars().next_back());
    if before == Some('\n') {
        return (start, true);
    }
    if window_chars > 0 {
        if let Some(i) = window.find('\n') {
            return (start.saturating_add(i).saturating_add(1), true);
        }
        if before.is_some_and(char::is_whitespace) {
            return (start, false);
        }
        if let Some((i, c)) = window.char_indices().find(|(_, c)| c.is_whitespace()) {
            return (start.saturating_add(i).saturating_add(c.len_utf8()), false);
        }
    }
    (start, false)
}

fn cut_count(total: usize, kept: &[&str]) -> usize {
    total.saturating_sub(kept.iter().map(|k| k.chars().count()).sum::<usize>())
}

/// The first `n` characters (at a boundary) and a marker saying how many were cut.
pub fn head(text: &str, n: usize) -> String {
    let total = text.chars().count();
    if total <= n {
        return text.to_string();
    }
    let end = grapheme_end_within(text, n);
    let (b, line) = head_boundary(text, end, n);
    let kept = text.get(..b).unwrap_or("").trim_end();
    let cut = thousands(cut_count(total, &[kept]));
    let sep = if line || kept.is_empty() { "\n" } else { " " };
    let sep = if kept.is_empty() { "" } else { sep };
    format!("{kept}{sep}[... {cut} characters cut]")
}

/// A marker saying how many characters were cut, then the last `n` (at a boundary).
pub fn tail(text: &str, n: usize) -> String {
    let total = text.chars().count();
    if total <= n {
        return text.to_string();
    }
    let start = grapheme_start_within(text, n);
    let (b, line) = tail_boundary(text, start, n);
    let kept = text.get(b..).unwrap_or("").trim_start();
    let cut = thousands(cut_count(total, &[kept]));
    let sep = if kept.is_empty() {
        ""
    } else if line {
        "\n"
    } else {
        " "
    };
    format!("[{cut} characters cut ...]{sep}{kept}")
}

/// Both ends, about `n / 2` characters each, around a marker saying how many were cut.
pub fn head_tail(text: &str, n: usize) -> String {
    let total = text.chars().count();
    if total <= n {
        return text.to_string();
    }
    let head_room = n / 2;
    let tail_room = n.saturating_sub(head_room);
    let end = grapheme_end_within(text, head_room);
    let (hb, hline) = head_boundary(text, end, head_room);
    let start = grapheme_start_within(text, tail_room).max(hb);
    let (tb, tline) = tail_boundary(text, start, tail_room);
    let first = text.get(..hb).unwrap_or("").trim_end();
    let last = text.get(tb.max(hb)..).unwrap_or("").trim_start();
    let cut = thousands(cut_count(total, &[first, last]));
    let before = match (first.is_empty(), hline) {
        (true, _) => "",
        (false, true) => "\n",
        (false, false) => " ",
    };
    let after = match (last.is_empty(), tline) {
        (true, _) => "",
        (false, true) => "\n",
        (false, false) => " ",
    };
    format!("{first}{before}[... {cut} characters cut ...]{after}{last}")
}

/// Control characters other than newline and tab, escaped as `\u{1b}` (a CRLF line end
/// becomes a newline first). Everything else is kept.
pub fn escape_controls(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_string();
    }
    let text = text.replace("\r\n", "\n");
    let mut out = String::with_capacity(text.len().saturating_add(8));
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a line, placed at the start of a markdown line, could open a heading, a code
/// fence, a thematic break or setext underline, or a front-matter block.
fn structural(line: &str) -> bool {
    let t = line.trim_start_matches([' ', '\t']);
    if t.starts_with('#') || t.starts_with("```") || t.starts_with("~~~") {
        return true;
    }
    // The line's marks (its characters but whitespace), read once without collecting them:
    // most lines of prose stop at their first character.
    let mut marks = t.chars().filter(|c| !c.is_whitespace());
    let Some(first) = marks.next() else {
        return false;
    };
    if !matches!(first, '-' | '=' | '*' | '_' | '+') {
        return false;
    }
    let mut count = 1usize;
    for c in marks {
        if c != first {
            return false;
        }
        count = count.saturating_add(1);
    }
    count >= 3 || first == '='
}

/// Thread text made safe as markdown prose: controls escaped, and a text with a line that
/// could create a heading, open or close a code fence, or start a thematic break, setext
/// underline or front-matter block is quoted whole in a `markdown` code fence longer than any
/// backtick run inside it, so its own markdown (a fenced snippet, a heading) reads as written
/// and cannot change the document's structure. `first_at_line_start`: whether the first line
/// starts a markdown line (false when a label such as `User: ` precedes it; the fence then
/// starts on the next line).
pub fn prose(text: &str, first_at_line_start: bool) -> String {
    let text = escape_controls(text);
    if !text.contains('\n') && !first_at_line_start {
        return text;
    }
    let risky = text
        .split('\n')
        .enumerate()
        .any(|(i, line)| (i > 0 || first_at_line_start) && structural(line));
    if !risky {
        return text;
    }
    let fence = "`".repeat((longest_backtick_run(&text).saturating_add(1)).max(3));
    let block = format!("{fence}markdown\n{}\n{fence}", text.trim_end_matches('\n'));
    if first_at_line_start {
        block
    } else {
        format!("\n{block}")
    }
}

/// Text from the thread on one line (a title): controls escaped, whitespace collapsed.
pub fn one_line(text: &str) -> String {
    collapse(&escape_controls(text))
}

/// The longest run of backticks in `text`.
pub fn longest_backtick_run(text: &str) -> usize {
    let mut longest = 0usize;
    let mut run = 0usize;
    for c in text.chars() {
        run = if c == '`' { run.saturating_add(1) } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Verbatim text in a code fence longer than any backtick run inside it (at least three).
pub fn fenced(text: &str) -> String {
    let text = escape_controls(text);
    let fence = "`".repeat((longest_backtick_run(&text).saturating_add(1)).max(3));
    format!("{fence}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// A command line as inline code (a code span longer than any backtick run in it); a
/// multi-line command as safe prose.
pub fn code_span(text: &str) -> String {
    if text.contains('\n') {
        return prose(text, false);
    }
    let text = escape_controls(text);
    match longest_backtick_run(&text) {
        0 => format!("`{text}`"),
        n => {
            let fence = "`".repeat(n.saturating_add(1));
            format!("{fence} {text} {fence}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn structural_lines() {
        assert!(structural("# x"));
        assert!(structural("  ```rust"));
        assert!(structural("---"));
        assert!(structural("==="));
        assert!(structural("* * *"));
        assert!(!structural("- item"));
        assert!(!structural("plain"));
        assert!(structural("="));
        assert!(structural("- - -"));
        assert!(structural("+++"));
        assert!(!structural("--"));
        assert!(!structural("_ _"));
        assert!(!structural("-- -x"));
        assert!(!structural(""));
        assert!(!structural("   "));
    }
}
