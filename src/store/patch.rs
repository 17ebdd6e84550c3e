//! A JSON value kept as what differs from another one (the decision log's deltas).
//!
//! A patch is a JSON object: each key is an RFC 6901 pointer (`/budget/after`,
//! `/trace/values/3`) into the value, set to the value the key names; the key `-`, when there
//! is one, lists the pointers of object keys to remove; `POINTER/-` on an array lists elements
//! appended to it; `POINTER/~s` on a string is `[PREFIX, MIDDLE, SUFFIX]`: the string's first
//! `PREFIX` and last `SUFFIX` bytes kept, `MIDDLE` between them (no pointer of a key ends in
//! `/~s`: a key's `~` is written `~0`). [`diff`] only records leaves: where both
//! sides are objects (or arrays of the same length) it descends, so no recorded pointer is a
//! prefix of another and the order in which they are applied does not matter.

use super::row_error::RowError;
use serde_json::{Map, Value};

/// The key of a patch listing the removed keys' pointers.
const REMOVED: &str = "-";

/// The patch that turns `base` into `cur` (empty when they are equal).
pub(crate) fn diff(base: &Value, cur: &Value) -> Map<String, Value> {
    let mut set = Map::new();
    let mut removed = Vec::new();
    walk(base, cur, &mut String::new(), &mut set, &mut removed);
    if !removed.is_empty() {
        set.insert(REMOVED.into(), Value::Array(removed));
    }
    set
}

fn escaped(path: &mut String, key: &str) {
    path.push('/');
    for ch in key.chars() {
        match ch {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

fn walk(
    base: &Value,
    cur: &Value,
    path: &mut String,
    set: &mut Map<String, Value>,
    removed: &mut Vec<Value>,
) {
    if base == cur {
        return;
    }
    match (base, cur) {
        (Value::Object(b), Value::Object(c)) => {
            for (k, v) in c {
                let len = path.len();
                escaped(path, k);
                match b.get(k) {
                    Some(bv) => walk(bv, v, path, set, removed),
                    None => {
                        set.insert(path.clone(), v.clone());
                    }
                }
                path.truncate(len);
            }
            for k in b.keys().filter(|k| !c.contains_key(*k)) {
                let len = path.len();
                escaped(path, k);
                removed.push(Value::String(path.clone()));
                path.truncate(len);
            }
        }
        (Value::Array(b), Value::Array(c)) if c.len() > b.len() && c.starts_with(b) => {
            // Appended to: `POINTER/-` lists what was appended.
            set.insert(
                format!("{path}/-"),
                Value::Array(c.iter().skip(b.len()).cloned().collect()),
            );
        }
        (Value::Array(b), Value::Array(c)) if b.len() != c.len() => {
            // Grown or shrunk elsewhere than at its end (a handoff's provider threads, a list
            // that takes one more): `POINTER/~a` is `[PREFIX, MIDDLE, SUFFIX]`, the first
            // `PREFIX` and last `SUFFIX` elements kept, `MIDDLE` (a list) between them.
            let pre = b.iter().zip(c).take_while(|(x, y)| x == y).count();
            let room = b.len().min(c.len()).saturating_sub(pre);
            let suf = b
                .iter()
                .rev()
                .zip(c.iter().rev())
                .take(room)
                .take_while(|(x, y)| x == y)
                .count();
            if pre.saturating_add(suf) == 0 {
                set.insert(path.clone(), cur.clone());
            } else {
                let middle = c
                    .iter()
                    .skip(pre)
                    .take(c.len().saturating_sub(pre).saturating_sub(suf))
                    .cloned()
                    .collect();
                set.insert(
                    format!("{path}/~a"),
                    Value::Array(vec![
                        Value::from(pre),
                        Value::Array(middle),
                        Value::from(suf),
                    ]),
                );
            }
        }
        (Value::Array(b), Value::Array(c)) => {
            for (i, (bv, v)) in b.iter().zip(c).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(bv, v, path, set, removed);
                path.truncate(len);
            }
        }
        (Value::String(b), Value::String(c)) => match common(b, c) {
            // A long string that changed in the middle (a document path naming another
            // handoff): `POINTER/~s` is `[PREFIX, MIDDLE, SUFFIX]`, the lengths in bytes kept.
            Some((pre, suf, middle)) => {
                set.insert(
                    format!("{path}/~s"),
                    Value::Array(vec![
                        Value::from(pre),
                        Value::from(middle),
                        Value::from(suf),
                    ]),
                );
            }
            None => {
                set.insert(path.clone(), cur.clone());
            }
        },
        _ => {
            set.insert(path.clone(), cur.clone());
        }
    }
}

/// The bytes `b` and `c` share at their start and at their end (at character boundaries, not
/// overlapping) and the middle of `c`, when they share enough to be worth it.
fn common<'a>(b: &str, c: &'a str) -> Option<(usize, usize, &'a str)> {
    let pre = b
        .char_indices()
        .zip(c.chars())
        .find(|((_, x), y)| x != y)
        .map_or(b.len().min(c.len()), |((i, _), _)| i);
    let room = b.len().min(c.len()).saturating_sub(pre);
    let suf = b
        .chars()
        .rev()
        .zip(c.chars().rev())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .scan(0usize, |n, l| {
            *n = n.saturating_add(l);
            Some(*n)
        })
        .take_while(|n| *n <= room)
        .last()
        .unwrap_or(0);
    let middle = c.get(pre..c.len().saturating_sub(suf))?;
    (pre.saturating_add(suf) >= 16).then_some((pre, suf, middle))
}

/// The parent pointer and the last key of `pointer` (unescaped).
fn split(pointer: &str) -> Result<(&str, String), RowError> {
    let at = pointer
        .rfind('/')
        .ok_or_else(|| format!("`{pointer}` is not a JSON pointer"))?;
    let (parent, last) = pointer.split_at(at);
    let last = last.get(1..).unwrap_or_default();
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

/// Apply `patch` (as [`diff`] makes it) to `value`.
pub(crate) fn apply(value: &mut Value, patch: &Map<String, Value>) -> Result<(), RowError> {
    for (pointer, v) in patch {
        if pointer == REMOVED {
            continue;
        }
        if pointer.is_empty() {
            *value = v.clone();
            continue;
        }
        let (parent, key) = split(pointer)?;
        let missing = || format!("the patch names `{pointer}`, which its base does not have");
        match value.pointer_mut(parent).ok_or_else(missing)? {
            Value::Object(m) => {
                m.insert(key, v.clone());
            }
            Value::String(st) if key == "~s" => {
                let bad = || format!("`{pointer}` does not fit its string");
                let (pre, middle, suf) = match v.as_array().map(Vec::as_slice) {
                    Some([Value::Number(p), Value::String(m), Value::Number(s)]) => (
                        p.as_u64().and_then(|n| usize::try_from(n).ok()),
                        m,
                        s.as_u64().and_then(|n| usize::try_from(n).ok()),
                    ),
                    _ => return Err(RowError::from(bad())),
                };
                let (pre, suf) = pre.zip(suf).ok_or_else(bad)?;
                let head = st.get(..pre).ok_or_else(bad)?;
                let tail = st
                    .len()
                    .checked_sub(suf)
                    .filter(|at| *at >= pre)
                    .and_then(|at| st.get(at..))
                    .ok_or_else(bad)?;
                *st = format!("{head}{middle}{tail}");
            }
            Value::Array(a) if key == "~a" => {
                let bad = || format!("`{pointer}` does not fit its list");
                let (pre, middle, suf) = match v.as_array().map(Vec::as_slice) {
                    Some([Value::Number(p), Value::Array(m), Value::Number(s)]) => (
                        p.as_u64().and_then(|n| usize::try_from(n).ok()),
                        m,
                        s.as_u64().and_then(|n| usize::try_from(n).ok()),
                    ),
                    _ => return Err(RowError::from(bad())),
                };
                let (pre, suf) = pre.zip(suf).ok_or_else(bad)?;
                let at = a
                    .len()
                    .checked_sub(suf)
                    .filter(|at| *at >= pre)
                    .ok_or_else(bad)?;
                let tail = a.split_off(at);
                a.truncate(pre);
                a.extend(middle.iter().cloned());
                a.extend(tail);
            }
            Value::Array(a) if key == "-" => {
                let more = v.as_array().ok_or_else(missing)?;
                a.extend(more.iter().cloned());
            }
            Value::Array(a) => {
                let slot = key
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get_mut(i))
                    .ok_or_else(missing)?;
                *slot = v.clone();
            }
            _ => return Err(RowError::from(missing())),
        }
    }
    if let Some(removed) = patch.get(REMOVED) {
        let removed = removed
            .as_array()
            .ok_or("its removed keys are not a list")?;
        for pointer in removed.iter().filter_map(Value::as_str) {
            let (parent, key) = split(pointer)?;
            if let Some(Value::Object(m)) = value.pointer_mut(parent) {
                m.remove(&key);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_turns_its_base_into_the_value() {
        let base = json!({"a": 1, "b": {"c": [1, 2, 3], "d/~": "x", "gone": true},
                          "l": [1, 2], "same": {"k": "v"}});
        let cur = json!({"a": 2, "b": {"c": [1, 5, 3], "d/~": "y"}, "l": [1, 2, 3],
                         "same": {"k": "v"}, "new": null});
        let p = diff(&base, &cur);
        assert_eq!(
            Value::Object(p.clone()),
            json!({"/a": 2, "/b/c/1": 5, "/b/d~1~0": "y", "/l/-": [3], "/new": null,
                   "-": ["/b/gone"]})
        );
        let mut back = base.clone();
        apply(&mut back, &p).unwrap();
        assert_eq!(back, cur);
        assert!(diff(&cur, &cur).is_empty());
        let mut whole = json!([1]);
        apply(&mut whole, &diff(&json!([1]), &json!("s"))).unwrap();
        assert_eq!(whole, json!("s"));
    }

    #[test]
    fn a_string_changed_in_the_middle_keeps_its_ends() {
        let base = json!({"d": "/tmp/docs/th_1/H158/handoff.md", "é": "éé/x/H1/ééé/y"});
        let cur = json!({"d": "/tmp/docs/th_1/H160/handoff.md", "é": "éé/x/H22/ééé/y"});
        let p = diff(&base, &cur);
        assert_eq!(p.get("/d/~s"), Some(&json!([17, "60", 11])));
        let mut back = base.clone();
        apply(&mut back, &p).unwrap();
        assert_eq!(back, cur);
        for (b, c) in [
            ("abcabcabcabcabcabcabc", "abcabcabcabcabcabc"),
            ("x", "xyz"),
            ("", ""),
        ] {
            let mut v = json!(b);
            apply(&mut v, &diff(&json!(b), &json!(c))).unwrap();
            assert_eq!(v, json!(c));
        }
    }

    #[test]
    fn a_list_changed_in_the_middle_keeps_its_ends() {
        let base = json!({"l": ["C1", "L1", "L2", "C2", "L3"], "k": [1, 2]});
        let cur = json!({"l": ["C1", "L1", "L2", "C2", "C3", "L3"], "k": [3]});
        let p = diff(&base, &cur);
        assert_eq!(p.get("/l/~a"), Some(&json!([4, ["C3"], 1])));
        assert_eq!(p.get("/k"), Some(&json!([3])));
        let mut back = base.clone();
        apply(&mut back, &p).unwrap();
        assert_eq!(back, cur);
        for (b, c) in [
            (json!([1, 2, 3, 1, 2, 3]), json!([1, 2, 3])),
            (json!([1, 2, 3]), json!([1, 2, 2, 3])),
            (json!([1, 1]), json!([1])),
            (json!([]), json!([1])),
            (json!([1, 2]), json!([])),
        ] {
            let mut v = b.clone();
            apply(&mut v, &diff(&b, &c)).unwrap();
            assert_eq!(v, c, "{b} -> {c}");
        }
        let mut short = json!([1]);
        assert_eq!(
            apply(&mut short, &p_of("/~a", json!([2, [], 1])))
                .unwrap_err()
                .to_string(),
            "`/~a` does not fit its list"
        );
    }

    fn p_of(k: &str, v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(k.into(), v);
        m
    }

    #[test]
    fn a_patch_that_does_not_fit_its_base_is_an_error() {
        let mut v = json!({"a": 1});
        let p = diff(&json!({"b": {"c": 1}}), &json!({"b": {"c": 2}}));
        assert_eq!(
            apply(&mut v, &p).unwrap_err().to_string(),
            "the patch names `/b/c`, which its base does not have"
        );
    }
}
