//! The decision log's compact trace. A logged decision keeps its trace as the values that
//! vary from one decision to the next (each entry's outcome and the values of the facts it
//! read); the text that only depends on the policy (rule name, location, `when` and `because`
//! text, the names of the facts read) is kept once, in `decision_rules`, under the sha256 of
//! that text. [`expand`] puts the full trace back, exactly as `explain --json` printed it.
//!
//! In the log, `trace` is `{"rules": SHA, "values": [[OUTCOME, [VALUE, ...]], ...]}`: entry
//! `i` is the `i`-th element of the `decision_rules` body named by `SHA`, with `outcome` and the
//! values of its `values` keys (in their order) filled in.
//!
//! A dispatch's decision is then kept as a delta on one of the thread's latest dispatch
//! decisions ([`encode`]): `{"~base": ID, "~depth": D, "~patch": PATCH}`, at most
//! [`MAX_DEPTH`] deep. [`decision`] follows the chain back and puts the trace back.

use super::row_error::RowError;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A decision's JSON with its trace split: the decision as it is logged, and the
/// policy-derived text of its trace (a JSON list) with its sha256, when the trace is a list.
pub(crate) struct Split {
    pub decision: Value,
    pub rules: Option<(String, String)>,
}

/// Split the trace of `decision` (a decision as JSON) into its text and its values.
pub(crate) fn split(mut decision: Value) -> Split {
    use sha2::{Digest, Sha256};
    let Some(Value::Array(entries)) = decision.get_mut("trace").map(Value::take) else {
        return Split {
            decision,
            rules: None,
        };
    };
    let mut texts = Vec::with_capacity(entries.len());
    let mut values = Vec::with_capacity(entries.len());
    for mut entry in entries {
        let outcome = entry
            .get_mut("outcome")
            .map(Value::take)
            .unwrap_or_default();
        let mut read = Vec::new();
        if let Some(Value::Object(vals)) = entry.get_mut("values") {
            for (_, v) in vals.iter_mut() {
                read.push(v.take());
            }
        }
        values.push(Value::Array(vec![outcome, Value::Array(read)]));
        texts.push(entry);
    }
    let body = Value::Array(texts).to_string();
    let sha: String = Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Some(obj) = decision.as_object_mut() {
        let mut trace = Map::new();
        trace.insert("rules".into(), Value::String(sha.clone()));
        trace.insert("values".into(), Value::Array(values));
        obj.insert("trace".into(), Value::Object(trace));
    }
    Split {
        decision,
        rules: Some((sha, body)),
    }
}

/// The sha256 naming the trace text of a logged decision, when its trace is compact.
pub(crate) fn rules_sha(logged: &Value) -> Option<&str> {
    logged.get("trace")?.get("rules")?.as_str()
}

/// Put the full trace back into a logged decision, from the trace text `rules` (the body of
/// its `decision_rules` row). A decision logged with a full trace is returned as it is.
pub(crate) fn expand(mut logged: Value, rules: Option<&str>) -> Result<Value, RowError> {
    let Some(Value::Object(trace)) = logged.get("trace") else {
        return Ok(logged);
    };
    let Some(Value::Array(values)) = trace.get("values") else {
        return Err("its trace has no values".into());
    };
    let rules = rules.ok_or("its trace text is missing")?;
    let texts: Vec<Value> = serde_json::from_str(rules).map_err(RowError::from)?;
    if texts.len() != values.len() {
        return Err(RowError::from(format!(
            "its trace has {} entries, its trace text {}",
            values.len(),
            texts.len()
        )));
    }
    let mut entries = Vec::with_capacity(texts.len());
    for (mut entry, v) in texts.into_iter().zip(values) {
        let (outcome, read) = match v.as_array().map(Vec::as_slice) {
            Some([o, Value::Array(read)]) => (o.clone(), read),
            _ => return Err("a trace entry is not [outcome, values]".into()),
        };
        if let Some(obj) = entry.as_object_mut() {
            obj.insert("outcome".into(), outcome);
        }
        if let Some(Value::Object(vals)) = entry.get_mut("values") {
            if vals.len() != read.len() {
                return Err("a trace entry's values do not match its facts".into());
            }
            for ((_, slot), v) in vals.iter_mut().zip(read) {
                *slot = v.clone();
            }
        }
        entries.push(entry);
    }
    if let Some(obj) = logged.as_object_mut() {
        obj.insert("trace".into(), Value::Array(entries));
    }
    Ok(logged)
}

/// The keys of a decision delta row: the row it patches, how many deltas deep it is, the
/// patch ([`super::patch`]).
const BASE: &str = "~base";
const DEPTH: &str = "~depth";
const PATCH: &str = "~patch";

/// The longest chain of decision deltas before a dispatch's decision is logged whole again.
pub(crate) const MAX_DEPTH: u64 = 16;

/// What a dispatch's decision (`logged`: split by [`split`]) is logged as: a delta on one of
/// the thread's latest dispatch decisions, `{"~base": ID, "~depth": D, "~patch": PATCH}`, the
/// one that makes it smallest, when it is smaller than the decision; else the decision whole.
/// Two decisions of the same shape (the same target and strategy) differ in the run, the
/// handoff, the covered runs and a few traced values; the rest (the policy, the rule that
/// decided, the delivery's shape, most of the trace) is the same. Other operations' decisions
/// are logged whole (a merge-back's is read by the run that takes it).
pub(crate) fn encode(conn: &Connection, thread: &str, operation: &str, logged: &Value) -> Logged {
    let whole = logged.to_string();
    if operation != "dispatch" {
        return Logged::Whole(whole);
    }
    let mut best: Option<String> = None;
    let mut memo = HashMap::new();
    for (id, row) in candidates(conn, thread) {
        let depth = row.get(DEPTH).and_then(Value::as_u64).unwrap_or(0);
        if depth >= MAX_DEPTH {
            continue;
        }
        let Ok(base) = compact(conn, id, row, &mut memo) else {
            continue;
        };
        let mut delta = Map::new();
        delta.insert(BASE.into(), Value::from(id));
        delta.insert(DEPTH.into(), Value::from(depth.saturating_add(1)));
        delta.insert(
            PATCH.into(),
            Value::Object(super::patch::diff(&base, logged)),
        );
        let text = Value::Object(delta).to_string();
        if text.len() < best.as_ref().map_or(whole.len(), String::len) {
            best = Some(text);
        }
    }
    best.map_or(Logged::Whole(whole), Logged::Delta)
}

/// A decision row as [`encode`] makes it.
pub(crate) enum Logged {
    /// The decision whole, JSON text (SQL reads such rows: `waiting()` reads a merge-back's).
    Whole(String),
    /// A delta on an earlier dispatch decision, JSON text that only this module reads: the
    /// log keeps it packed (`store::packed`).
    Delta(String),
}

/// How many of the thread's latest dispatch decisions [`encode`] tries as a base.
const CANDIDATES: i64 = 6;

/// The thread's latest dispatch decisions, as logged, with their row ids.
fn candidates(conn: &Connection, thread: &str) -> Vec<(i64, Value)> {
    let Ok(mut st) = conn.prepare_cached(
        "SELECT id, decision FROM decision_log
         WHERE thread = ?1 AND operation = 'dispatch'
         ORDER BY run DESC, id DESC LIMIT ?2",
    ) else {
        return Vec::new();
    };
    let Ok(rows) = st.query_map(params![thread, CANDIDATES], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, super::packed::Text>(1)?))
    }) else {
        return Vec::new();
    };
    rows.filter_map(Result::ok)
        .filter_map(|(id, text)| Some((id, serde_json::from_str(&text.0).ok()?)))
        .collect()
}

/// A logged decision row (`id`) put back to its split form: a delta applied to its base
/// (following the chain), a whole row as it is. `memo` keeps the rows put back so far.
fn compact(
    conn: &Connection,
    id: i64,
    row: Value,
    memo: &mut HashMap<i64, Value>,
) -> Result<Value, RowError> {
    let mut chain = vec![(id, row)];
    let mut value = loop {
        let next = match chain.last() {
            Some((_, r)) => r.get(BASE).cloned(),
            None => return Err("empty chain".into()),
        };
        let Some(base) = next else {
            let (cid, v) = chain.pop().ok_or("empty chain")?;
            memo.insert(cid, v.clone());
            break v;
        };
        let base = base.as_i64().ok_or("its base is not a row id")?;
        if let Some(v) = memo.get(&base) {
            break v.clone();
        }
        if u64::try_from(chain.len()).unwrap_or(u64::MAX) > MAX_DEPTH {
            return Err("its chain of deltas is longer than a chain can be".into());
        }
        let text: Option<super::packed::Text> = conn
            .query_row(
                "SELECT decision FROM decision_log WHERE id = ?1",
                [base],
                |r| r.get(0),
            )
            .optional()
            .map_err(RowError::from)?;
        let text = text
            .ok_or_else(|| format!("its base, log row {base}, is missing"))?
            .0;
        chain.push((base, serde_json::from_str(&text).map_err(RowError::from)?));
    };
    while let Some((cid, delta)) = chain.pop() {
        let Value::Object(mut delta) = delta else {
            return Err("a delta is not a JSON object".into());
        };
        let Some(Value::Object(patch)) = delta.remove(PATCH) else {
            return Err("a delta has no patch".into());
        };
        super::patch::apply(&mut value, &patch)?;
        // Any other key is the decision's own, whole (an edited row is read as edited).
        let obj = value
            .as_object_mut()
            .ok_or("its base is not a JSON object")?;
        for (k, v) in delta {
            if k != BASE && k != DEPTH {
                obj.insert(k, v);
            }
        }
        memo.insert(cid, value.clone());
    }
    Ok(value)
}

/// A logged decision (the `decision` column) as it was returned: a delta applied to its base,
/// the full trace put back from its text in `decision_rules`.
pub(crate) fn decision(conn: &Connection, logged: &str) -> Result<Value, RowError> {
    let v: Value = serde_json::from_str(logged).map_err(RowError::from)?;
    let v = compact(conn, i64::MIN, v, &mut HashMap::new())?;
    let rules: Option<String> = match rules_sha(&v) {
        Some(sha) => conn
            .query_row(
                "SELECT body FROM decision_rules WHERE sha = ?1",
                [sha],
                |r| r.get(0),
            )
            .optional()
            .map_err(RowError::from)?,
        None => None,
    };
    expand(v, rules.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_expand_gives_the_decision_back() {
        let d = serde_json::json!({
            "run": 3,
            "trace": [
                {"rule": "eligible", "at": "p:1:1", "outcome": "matched",
                 "values": {"b": [1, 2], "a": "x"}, "when": "eligible when ..."},
                {"rule": "ladder", "at": "p:2:1", "outcome": "not_matched", "values": {}}
            ]
        });
        let s = split(d.clone());
        let (sha, body) = s.rules.clone().unwrap();
        assert_eq!(rules_sha(&s.decision), Some(sha.as_str()));
        assert!(!s.decision.to_string().contains("eligible when"));
        let back = expand(s.decision, Some(&body)).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.to_string(), d.to_string());
    }
}
