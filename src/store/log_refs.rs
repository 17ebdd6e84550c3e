//! What the decision log's rows refer to by id or by hash, for a store that holds only some
//! of them (the PostgreSQL backend's staging store, `store::pg::stage`): a delta's base row
//! (`input.base`, `decision.~base`), a keyframe's chunks and a frozen `stored_items` chunk.
//! [`missing`] names what a partial log lacks so that it can be fetched; [`rebase`] rewrites a
//! row's references when the rows it refers to get other ids.

use super::packed;
use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// The key of a decision delta's base row (`store::trace_log`).
const DECISION_BASE: &str = "~base";
/// The key of an input delta's base row (`store::input_log`).
const INPUT_BASE: &str = "base";

/// Log rows and chunks the rows of `conn`'s decision log refer to and `conn` does not hold.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Missing {
    /// Decision-log row ids.
    pub(crate) rows: Vec<i64>,
    /// `decision_chunks` hashes.
    pub(crate) chunks: Vec<String>,
}

impl Missing {
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.chunks.is_empty()
    }
}

/// A column's JSON text, plain or packed; `None` for NULL or text that is not JSON.
fn json_of(v: SqlValue, input: bool) -> Option<Value> {
    let text = match v {
        SqlValue::Text(t) => t,
        SqlValue::Blob(b) if input => packed::unpack_input(&b).ok()?,
        SqlValue::Blob(b) => packed::unpack(&b).ok()?,
        _ => return None,
    };
    serde_json::from_str(&text).ok()
}

/// What the rows of the log in `conn` refer to that `conn` does not hold.
pub(crate) fn missing(conn: &Connection) -> rusqlite::Result<Missing> {
    let mut rows = BTreeSet::new();
    let mut chunks = BTreeSet::new();
    let mut st = conn.prepare("SELECT decision, input FROM decision_log")?;
    let found = st.query_map([], |r| {
        Ok((r.get::<_, SqlValue>(0)?, r.get::<_, SqlValue>(1)?))
    })?;
    for row in found {
        let (decision, input) = row?;
        if let Some(id) = json_of(decision, false)
            .as_ref()
            .and_then(|d| d.get(DECISION_BASE))
            .and_then(Value::as_i64)
        {
            rows.insert(id);
        }
        let Some(input) = json_of(input, true) else {
            continue;
        };
        if let Some(id) = input.get(INPUT_BASE).and_then(Value::as_i64) {
            rows.insert(id);
        } else if let Some(state) = input.get("state") {
            for name in super::input_log::CHUNKED {
                let shas = state
                    .get(name)
                    .and_then(|l| l.get("chunks"))
                    .and_then(Value::as_array);
                for sha in shas.into_iter().flatten().filter_map(Value::as_str) {
                    chunks.insert(sha.to_string());
                }
            }
        }
        if let Some(sha) = input
            .get("stored_items")
            .and_then(|s| s.get("chunk"))
            .and_then(Value::as_str)
        {
            chunks.insert(sha.to_string());
        }
    }
    let mut held_row = conn.prepare("SELECT 1 FROM decision_log WHERE id = ?1")?;
    let mut held_chunk = conn.prepare("SELECT 1 FROM decision_chunks WHERE sha = ?1")?;
    let mut out = Missing::default();
    for id in rows {
        if !held_row.exists([id])? {
            out.rows.push(id);
        }
    }
    for sha in chunks {
        if !held_chunk.exists([&sha])? {
            out.chunks.push(sha);
        }
    }
    Ok(out)
}

/// A log row's `decision` and `input` with the base rows they name renumbered by `ids`
/// (old id to new); what names no renumbered row is returned as it was.
pub(crate) fn rebase(
    decision: SqlValue,
    input: SqlValue,
    ids: &HashMap<i64, i64>,
) -> (SqlValue, SqlValue) {
    (
        renumber(decision, DECISION_BASE, false, ids),
        renumber(input, INPUT_BASE, true, ids),
    )
}

fn renumber(v: SqlValue, key: &str, input: bool, ids: &HashMap<i64, i64>) -> SqlValue {
    let packed_form = matches!(v, SqlValue::Blob(_));
    let Some(mut json) = json_of(v.clone(), input) else {
        return v;
    };
    let Some(new) = json
        .get(key)
        .and_then(Value::as_i64)
        .and_then(|old| ids.get(&old))
    else {
        return v;
    };
    if let Some(obj) = json.as_object_mut() {
        obj.insert(key.to_string(), Value::from(*new));
    }
    let text = json.to_string();
    match (packed_form, input) {
        (true, true) => packed::pack_input(&text),
        (true, false) => packed::pack(&text),
        (false, _) => SqlValue::Text(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_names_its_base_and_rebase_renumbers_it_in_either_form() {
        let ids = HashMap::from([(7, 70)]);
        let (d, i) = rebase(
            packed::pack("{\"~base\":7,\"~depth\":1}"),
            packed::pack_input("{\"base\":7,\"depth\":1}"),
            &ids,
        );
        assert_eq!(
            json_of(d, false).and_then(|v| v.get("~base").cloned()),
            Some(Value::from(70))
        );
        assert_eq!(
            json_of(i, true).and_then(|v| v.get("base").cloned()),
            Some(Value::from(70))
        );
        let plain = SqlValue::Text("{\"base\":8}".into());
        let (_, same) = rebase(SqlValue::Text("{}".into()), plain.clone(), &ids);
        assert_eq!(same, plain);
    }
}
