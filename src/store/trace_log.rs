//! The decision log's compact trace. A logged decision keeps its trace as the values that
//! vary from one decision to the next (each entry's outcome and the values of the facts it
//! read); the text that only depends on the policy (rule name, location, `when` and `because`
//! text, the names of the facts read) is kept once, in `decision_rules`, under the sha256 of
//! that text. [`expand`] puts the full trace back, exactly as `explain --json` printed it.
//!
//! In the log, `trace` is `{"rules": SHA, "values": [[OUTCOME, [VALUE, ...]], ...]}`: entry
//! `i` is the `i`-th element of the `decision_rules` body named by `SHA`, with `outcome` and the
//! values of its `values` keys (in their order) filled in.

use serde_json::{Map, Value};

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
pub(crate) fn expand(mut logged: Value, rules: Option<&str>) -> Result<Value, String> {
    let Some(Value::Object(trace)) = logged.get("trace") else {
        return Ok(logged);
    };
    let Some(Value::Array(values)) = trace.get("values") else {
        return Err("its trace has no values".into());
    };
    let rules = rules.ok_or("its trace text is missing")?;
    let texts: Vec<Value> = serde_json::from_str(rules).map_err(|e| e.to_string())?;
    if texts.len() != values.len() {
        return Err(format!(
            "its trace has {} entries, its trace text {}",
            values.len(),
            texts.len()
        ));
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
