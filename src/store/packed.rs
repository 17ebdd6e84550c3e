//! Text the store keeps and only ever reads back whole, kept deflated (`flate2`, raw deflate):
//! the handoff's document and first-turn prompt, its provider-thread list when long, the
//! decision log's chunks, its delta rows and its logged inputs ([`pack_input`]).
//! A packed value is a BLOB; a TEXT value (a row written before, or one kept plain because
//! SQL reads it with JSON functions) reads as it is, so both kinds live side by side without
//! a schema change.

use super::row_error::RowError;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, Value, ValueRef};
use std::io::{Read, Write};

/// `text` deflated, as a BLOB column value (should deflating fail, which writing into memory
/// does not, the text as it is: a TEXT value reads back the same).
pub(crate) fn pack(text: &str) -> Value {
    let mut enc = DeflateEncoder::new(Vec::new(), Compression::best());
    match enc.write_all(text.as_bytes()).and_then(|()| enc.finish()) {
        Ok(bytes) => Value::Blob(bytes),
        Err(_) => Value::Text(text.to_string()),
    }
}

/// The text of a packed BLOB.
pub(crate) fn unpack(bytes: &[u8]) -> Result<String, RowError> {
    let mut out = String::new();
    DeflateDecoder::new(bytes)
        .read_to_string(&mut out)
        .map_err(|e| format!("a packed value does not inflate: {e}"))?;
    Ok(out)
}

/// `text` packed when it is long enough to gain from it (a short list of ids stays as it is).
pub(crate) fn pack_long(text: String) -> Value {
    if text.len() >= LONG {
        pack(&text)
    } else {
        text.into()
    }
}

/// From how many bytes [`pack_long`] packs.
const LONG: usize = 64;

/// The text of a column value, plain (TEXT) or packed (BLOB).
pub(crate) fn text_of(value: Value) -> Result<String, RowError> {
    match value {
        Value::Text(t) => Ok(t),
        Value::Blob(b) => unpack(&b),
        _ => Err("it is neither text nor a packed value".into()),
    }
}

/// A column's text, whether kept plain (TEXT) or packed (BLOB).
pub(crate) struct Text(pub String);

impl FromSql for Text {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        column_text(value, unpack).map(Text)
    }
}

/// A column's text: a TEXT value as it is, a BLOB through `unpack_blob`.
fn column_text(
    value: ValueRef<'_>,
    unpack_blob: fn(&[u8]) -> Result<String, RowError>,
) -> FromSqlResult<String> {
    match value {
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(str::to_string)
            .map_err(|e| FromSqlError::Other(Box::new(e))),
        ValueRef::Blob(b) => unpack_blob(b).map_err(|e| FromSqlError::Other(e.into())),
        _ => Err(FromSqlError::InvalidType),
    }
}

/// What a packed logged input starts with when its text names stored items
/// (`input_log`'s `stored_items` key), so that SQL finds it with
/// `instr(input, '"stored_items"')` as it finds such a plain input (`input_log::freeze`).
const NAMES_ITEMS: &[u8] = b"\"stored_items\"";
/// The byte that ends a packed input's header (a header is [`NAMES_ITEMS`] or nothing).
const HEADER_END: u8 = 0;

/// A logged input (`decision_log.input`, JSON text) as the log keeps it: a BLOB of a header
/// (the text `"stored_items"` when the input names stored items, else nothing, then a zero
/// byte) and the text deflated. Should deflating fail, the text as it is.
pub(crate) fn pack_input(text: &str) -> Value {
    let Value::Blob(packed) = pack(text) else {
        return Value::Text(text.to_string());
    };
    let header: &[u8] = if text.contains("\"stored_items\"") {
        NAMES_ITEMS
    } else {
        b""
    };
    let mut out = Vec::with_capacity(header.len().saturating_add(packed.len()).saturating_add(1));
    out.extend_from_slice(header);
    out.push(HEADER_END);
    out.extend_from_slice(&packed);
    Value::Blob(out)
}

/// The text of a packed logged input ([`pack_input`]).
pub(crate) fn unpack_input(bytes: &[u8]) -> Result<String, RowError> {
    let rest = bytes.strip_prefix(NAMES_ITEMS).unwrap_or(bytes);
    match rest.split_first() {
        Some((&HEADER_END, packed)) => unpack(packed),
        _ => Err("a packed input has no header".into()),
    }
}

/// A logged input's text, kept plain (TEXT, as rows were logged before) or packed
/// ([`pack_input`]).
pub(crate) struct Input(pub String);

impl FromSql for Input {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        column_text(value, unpack_input).map(Input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_text_reads_back_and_plain_text_reads_as_it_is() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let text = "{\"a\":\"the handler the handler the handler\"}";
        let (packed, plain): (Text, Text) = conn
            .query_row("SELECT ?1, ?2", rusqlite::params![pack(text), text], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((packed.0.as_str(), plain.0.as_str()), (text, text));
        let bad: rusqlite::Result<Text> = conn.query_row("SELECT x'ff00ff'", [], |r| r.get(0));
        assert!(bad.is_err());
    }

    #[test]
    fn a_packed_input_reads_back_and_sql_still_finds_the_stored_items_it_names() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (text, names) in [
            ("{\"base\":1,\"stored_items\":{\"runs\":[[1,2,3]]}}", 1),
            ("{\"base\":1,\"target\":\"codex\"}", 0),
        ] {
            let (back, found): (Input, i64) = conn
                .query_row(
                    "SELECT ?1, instr(?1, '\"stored_items\"') > 0",
                    [pack_input(text)],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!((back.0.as_str(), found), (text, names));
        }
        let plain: Input = conn.query_row("SELECT 'x'", [], |r| r.get(0)).unwrap();
        assert_eq!(plain.0, "x");
        let bad: rusqlite::Result<Input> = conn.query_row("SELECT x'ff00ff'", [], |r| r.get(0));
        assert!(bad.is_err());
    }
}
