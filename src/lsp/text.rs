//! Open documents: their text, version, and the conversion between LSP positions (line and
//! UTF-16 column) and byte offsets. Every conversion clamps: a position past the end of a line
//! or of the document, or inside a surrogate pair, lands on the nearest character boundary,
//! so no edit an editor sends can make an offset invalid.

use lsp_types::{Position, Range, TextDocumentContentChangeEvent};

/// One open document.
#[derive(Debug, Clone)]
pub struct Document {
    pub text: String,
    pub version: i32,
    pub language: String,
}

impl Document {
    pub fn new(text: String, version: i32, language: String) -> Document {
        Document {
            text,
            version,
            language,
        }
    }

    /// Apply the changes of one `didChange`, in order (a change without a range replaces the
    /// whole text).
    pub fn apply(&mut self, version: i32, changes: Vec<TextDocumentContentChangeEvent>) {
        for change in changes {
            match change.range {
                Some(range) => {
                    let start = offset_of(&self.text, range.start);
                    let end = offset_of(&self.text, range.end).max(start);
                    self.text.replace_range(start..end, &change.text);
                }
                None => self.text = change.text,
            }
        }
        self.version = version;
    }
}

/// The byte offset of a position, clamped to the text.
pub fn offset_of(text: &str, pos: Position) -> usize {
    let mut line_start = 0usize;
    for _ in 0..pos.line {
        match text.get(line_start..).and_then(|rest| rest.find('\n')) {
            Some(i) => line_start = line_start.saturating_add(i).saturating_add(1),
            None => return text.len(),
        }
    }
    let line_end = text
        .get(line_start..)
        .and_then(|rest| rest.find('\n'))
        .map(|i| line_start.saturating_add(i))
        .unwrap_or(text.len());
    let mut units = 0u32;
    for (i, c) in text.get(line_start..line_end).unwrap_or("").char_indices() {
        if units >= pos.character {
            return line_start.saturating_add(i);
        }
        units = units.saturating_add(u32::try_from(c.len_utf16()).unwrap_or(2));
        if units > pos.character {
            // Inside a surrogate pair: the character's start.
            return line_start.saturating_add(i);
        }
    }
    line_end
}

/// The position of a byte offset (clamped to the text and to a character boundary).
pub fn position_of(text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset = offset.saturating_sub(1);
    }
    let before = text.get(..offset).unwrap_or("");
    let line_start = before.rfind('\n').map(|i| i.saturating_add(1)).unwrap_or(0);
    let line = before.matches('\n').count();
    let character: usize = before
        .get(line_start..)
        .unwrap_or("")
        .chars()
        .map(char::len_utf16)
        .sum();
    Position::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(character).unwrap_or(u32::MAX),
    )
}

/// The range of a byte range.
pub fn range_of(text: &str, start: usize, end: usize) -> Range {
    Range::new(position_of(text, start), position_of(text, end.max(start)))
}

/// The range of the whole text.
pub fn whole(text: &str) -> Range {
    Range::new(Position::new(0, 0), position_of(text, text.len()))
}

/// The range of line `line` (1-based) from column `col` (1-based, in characters) to its end.
pub fn line_range(text: &str, line: usize, col: usize) -> Range {
    let l = u32::try_from(line.saturating_sub(1)).unwrap_or(u32::MAX);
    let start_off = offset_of(text, Position::new(l, 0));
    let line_text = text
        .get(start_off..)
        .unwrap_or("")
        .split('\n')
        .next()
        .unwrap_or("");
    let skip: usize = line_text
        .chars()
        .take(col.saturating_sub(1))
        .map(char::len_utf8)
        .sum();
    let end = start_off.saturating_add(line_text.trim_end_matches('\r').len());
    let start = (start_off.saturating_add(skip)).min(end);
    // An empty range at the end of a line is hard to see: take the whole line then.
    if start == end {
        return range_of(text, start_off, end);
    }
    range_of(text, start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_with_utf16() {
        let t = "a\n\u{1F600}b\nc";
        let p = Position::new(1, 2);
        assert_eq!(offset_of(t, p), 6);
        assert_eq!(position_of(t, 6), p);
        // Inside the surrogate pair: the character's start.
        assert_eq!(offset_of(t, Position::new(1, 1)), 2);
        // Past the end of a line or of the text: clamped.
        assert_eq!(offset_of(t, Position::new(0, 9)), 1);
        assert_eq!(offset_of(t, Position::new(9, 0)), t.len());
        assert_eq!(position_of(t, 99), Position::new(2, 1));
    }
}
