//! How the decision log keeps each decision's input ([`super::DecisionInput`]) small.
//!
//! A row's `input` is one of two forms:
//!
//! - a **keyframe**: the input as JSON, with each long list of its state (`runs`,
//!   `provider_threads`, `handoffs`, `transfers`, `checkpoints`) replaced by
//!   `{"chunks": [sha256, ...]}`, chunks of [`CHUNK_LEN`] elements kept once each in
//!   `decision_chunks`, named by the sha256 of the elements as a JSON list and kept packed
//!   (each element whole or as a patch of one of the two before it; see [`packed`]) (every
//!   row logged before schema 6 is a keyframe);
//! - a **delta** on an earlier row of the same thread (its `base`): `{"base": ID, "depth": D,
//!   "fields": {...}, "removed": [...], "lists": {KEY: {"len": N, "set": [[I, ELEMENT], ...]}},
//!   "target": ..., "document_root": ..., "context": ...}`. `fields` are the state's other
//!   fields that differ from the base's, `removed` the state's keys the base had and this input
//!   has not, and each list gives its length and the elements that differ from the base's at
//!   the same index. An element set is `[I, ELEMENT]`, or `[I, PATCH, J]`: the base's element
//!   `J` (`I` itself, or one of the two before it) with a [`super::patch`] applied, whichever is
//!   shorter (a run that completed is `{"/status": "completed"}`). What is outside `state`
//!   (`target`, `document_root`, `context`, `stored_items`) is kept where it differs from the
//!   base's; `"drop": [...]` lists the keys the base had and this input has not. (A delta
//!   without `drop`, logged before, keeps everything outside `state` whole.)
//!
//! Either form is kept packed (`store::packed::pack_input`: deflated, behind a header that
//! keeps the text `"stored_items"` findable by SQL); a row logged before as plain TEXT reads
//! as it is.
//!
//! Consecutive decisions of a thread differ by a run or two, a handoff, a transfer and the
//! request, so a delta is a few hundred bytes where a keyframe names every chunk (about 10 KB
//! at 10,000 runs) and rewrites the chunks that changed (the last chunk of runs changes at
//! every turn). A chain is at most [`MAX_DEPTH`] deltas long: the next row is a keyframe again,
//! so putting an input back reads at most that many rows plus the keyframe's chunks. A base
//! that cannot be read (a missing chunk, an edited row) only means the next row is a keyframe.
//!
//! Finding what changed costs no more than the keyframe did: the current lists are cut into the
//! same chunks and hashed; a chunk whose hash is the base's (and on which no delta since the
//! keyframe wrote) is unchanged, and only the others are read and compared element by element.

use super::row_error::RowError;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// The lists of a logged state kept in shared chunks (see `decision_chunks`).
pub(crate) const CHUNKED: [&str; 5] = [
    "provider_threads",
    "runs",
    "handoffs",
    "transfers",
    "checkpoints",
];
/// How many elements a chunk holds.
pub(crate) const CHUNK_LEN: usize = 64;
/// The longest chain of deltas before the next row is a keyframe again.
pub(crate) const MAX_DEPTH: u64 = 32;

/// The JSON text of a chunk's elements, whose sha256 names the chunk (the same for the writer
/// and the comparison).
fn chunk_body(chunk: &[Value]) -> String {
    Value::Array(chunk.to_vec()).to_string()
}

/// A chunk as `decision_chunks` keeps it: each element whole, or `[BACK, PATCH]`, the element
/// `BACK` places before it in the chunk with a [`super::patch`] applied, whichever is shorter
/// (the elements of a list are much alike: a run differs from the one two before it in its
/// ordinal and handoff). Every element of these lists is a JSON object, so a pair is never an
/// element.
fn packed(chunk: &[Value]) -> String {
    // The patch setting fewest keys is the one tried (a keyframe of a long imported thread
    // packs thousands of elements at once: one diff each, not one serialization per try).
    let mut out = Vec::with_capacity(chunk.len());
    for (k, e) in chunk.iter().enumerate() {
        let Some(keys) = e.as_object().map(Map::len) else {
            out.push(e.clone());
            continue;
        };
        let mut best: Option<(usize, Map<String, Value>)> = None;
        for back in [1usize, 2] {
            let Some(r) = k.checked_sub(back).and_then(|j| chunk.get(j)) else {
                continue;
            };
            let p = super::patch::diff(r, e);
            if best.as_ref().is_none_or(|(_, b)| p.len() < b.len()) {
                best = Some((back, p));
            }
        }
        let candidate = best
            .filter(|(_, p)| p.len() < keys)
            .map(|(back, p)| serde_json::json!([back, Value::Object(p)]))
            .filter(|c| c.to_string().len() < e.to_string().len());
        out.push(candidate.unwrap_or_else(|| e.clone()));
    }
    Value::Array(out).to_string()
}

/// A chunk's elements from its stored form ([`packed`], or a plain list, as chunks were kept
/// before).
fn unpacked(entries: Vec<Value>) -> Result<Vec<Value>, RowError> {
    let mut out: Vec<Value> = Vec::with_capacity(entries.len());
    for e in entries {
        let patched = match &e {
            Value::Array(pair) => match pair.as_slice() {
                [Value::Number(back), Value::Object(p)] => {
                    let mut v = back
                        .as_u64()
                        .and_then(|b| usize::try_from(b).ok())
                        .and_then(|b| out.len().checked_sub(b))
                        .and_then(|j| out.get(j))
                        .cloned()
                        .ok_or("a chunk's element patches one it does not have")?;
                    super::patch::apply(&mut v, p)?;
                    Some(v)
                }
                _ => None,
            },
            _ => None,
        };
        out.push(patched.unwrap_or(e));
    }
    Ok(out)
}

fn sha_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One list of a logged input, as its keyframe's chunks plus the elements deltas set since.
#[derive(Default)]
struct List {
    chunks: Vec<String>,
    len: usize,
    overrides: BTreeMap<usize, Value>,
    /// Chunk bodies read so far, by chunk index.
    loaded: HashMap<usize, Vec<Value>>,
}

impl List {
    fn load(&mut self, conn: &Connection, key: &str, c: usize) -> Result<(), RowError> {
        if self.loaded.contains_key(&c) {
            return Ok(());
        }
        let Some(sha) = self.chunks.get(c) else {
            return Err(RowError::from(format!("`{key}` has no chunk {c}")));
        };
        let body: Option<String> = conn
            .query_row(
                "SELECT body FROM decision_chunks WHERE sha = ?1",
                [sha],
                |r| r.get::<_, super::packed::Text>(0),
            )
            .optional()
            .map_err(RowError::from)?
            .map(|t| t.0);
        let body = body.ok_or_else(|| format!("its chunk {sha} of `{key}` is missing"))?;
        let part: Vec<Value> = serde_json::from_str(&body).map_err(RowError::from)?;
        self.loaded.insert(c, unpacked(part)?);
        Ok(())
    }

    /// Element `i`, reading its chunk when needed.
    fn get(&mut self, conn: &Connection, key: &str, i: usize) -> Result<Value, RowError> {
        if i >= self.len {
            return Err(RowError::from(format!("`{key}` has no element {i}")));
        }
        if let Some(v) = self.overrides.get(&i) {
            return Ok(v.clone());
        }
        let c = i / CHUNK_LEN;
        self.load(conn, key, c)?;
        self.loaded
            .get(&c)
            .and_then(|part| part.get(i % CHUNK_LEN))
            .cloned()
            .ok_or_else(|| RowError::from(format!("`{key}`'s chunk {c} is shorter than the list")))
    }

    /// Whether chunk `c` of `current` (the elements `start..end`) is the keyframe's chunk `c`
    /// untouched, by its hash alone.
    fn same_chunk(&self, c: usize, start: usize, end: usize, sha: &str) -> bool {
        end <= self.len
            && self.chunks.get(c).is_some_and(|s| s == sha)
            && self.overrides.range(start..end).next().is_none()
    }
}

/// A logged input, put back lazily: the state's other fields whole, its lists as [`List`]s,
/// the rest of the input whole.
struct Lazy {
    top: Map<String, Value>,
    fields: Map<String, Value>,
    lists: HashMap<String, List>,
    depth: u64,
}

fn parse(text: &str) -> Result<Map<String, Value>, RowError> {
    match serde_json::from_str(text).map_err(RowError::from)? {
        Value::Object(m) => Ok(m),
        _ => Err("it is not a JSON object".into()),
    }
}

fn read_row(conn: &Connection, id: i64) -> Result<Map<String, Value>, RowError> {
    let text: Option<Option<super::packed::Input>> = conn
        .query_row("SELECT input FROM decision_log WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .map_err(RowError::from)?;
    match text.flatten() {
        Some(t) => parse(&t.0),
        None => Err(RowError::from(format!(
            "its base, log row {id}, is missing or has no input"
        ))),
    }
}

/// Put a logged input back lazily: follow the chain of deltas to its keyframe, then apply the
/// deltas forward.
fn lazy(conn: &Connection, row: Map<String, Value>) -> Result<Lazy, RowError> {
    let mut chain = vec![row];
    loop {
        let Some(last) = chain.last() else {
            return Err("empty chain".into());
        };
        let Some(base) = last.get("base") else { break };
        let id = base.as_i64().ok_or("its `base` is not a row id")?;
        if u64::try_from(chain.len()).unwrap_or(u64::MAX) > MAX_DEPTH.saturating_add(1) {
            return Err("its chain of deltas is longer than a chain can be".into());
        }
        chain.push(read_row(conn, id)?);
    }
    let Some(mut key) = chain.pop() else {
        return Err("empty chain".into());
    };
    // The keyframe.
    let mut fields = match key.remove("state") {
        Some(Value::Object(m)) => m,
        _ => return Err("its keyframe has no state".into()),
    };
    let mut lists = HashMap::new();
    for name in CHUNKED {
        if let Some(Value::Object(c)) = fields.get(name) {
            let Some(Value::Array(shas)) = c.get("chunks") else {
                continue;
            };
            let chunks: Vec<String> = shas
                .iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("`{name}` names a chunk that is not a sha256"))?;
            // The length is known once the last chunk is read; chunks before it are full.
            let mut list = List {
                chunks,
                ..List::default()
            };
            let n = list.chunks.len();
            if n > 0 {
                list.load(conn, name, n.saturating_sub(1))?;
                let tail = list.loaded.get(&n.saturating_sub(1)).map_or(0, Vec::len);
                list.len = CHUNK_LEN
                    .saturating_mul(n.saturating_sub(1))
                    .saturating_add(tail);
            }
            fields.remove(name);
            lists.insert(name.to_string(), list);
        }
    }
    let mut top = key;
    let mut depth = 0;
    // The deltas, oldest first.
    while let Some(mut delta) = chain.pop() {
        depth = delta.get("depth").and_then(Value::as_u64).unwrap_or(0);
        if let Some(Value::Object(set)) = delta.remove("fields") {
            fields.extend(set);
        }
        if let Some(Value::Array(removed)) = delta.remove("removed") {
            for k in removed.iter().filter_map(Value::as_str) {
                fields.remove(k);
                lists.remove(k);
            }
        }
        if let Some(Value::Object(ls)) = delta.remove("lists") {
            for (name, l) in ls {
                let len = l
                    .get("len")
                    .and_then(Value::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| format!("`{name}` has no length"))?;
                let list = lists.entry(name.clone()).or_default();
                // Every element set is worked out on the base's list before any is set.
                let mut now = Vec::new();
                if let Some(Value::Array(set)) = l.get("set") {
                    for pair in set {
                        let index = |k: usize| {
                            pair.get(k)
                                .and_then(Value::as_u64)
                                .and_then(|n| usize::try_from(n).ok())
                        };
                        let (Some(i), Some(v)) = (index(0), pair.get(1)) else {
                            return Err(RowError::from(format!(
                                "`{name}` sets an element without an index"
                            )));
                        };
                        let v = match index(2) {
                            Some(j) => {
                                let Value::Object(p) = v else {
                                    return Err(RowError::from(format!(
                                        "`{name}` patches an element with no patch"
                                    )));
                                };
                                let mut e = list.get(conn, &name, j)?;
                                super::patch::apply(&mut e, p)?;
                                e
                            }
                            None => v.clone(),
                        };
                        now.push((i, v));
                    }
                }
                list.len = len;
                list.overrides.retain(|i, _| *i < len);
                list.overrides.extend(now);
            }
        }
        let drop = delta.remove("drop");
        for k in ["base", "depth"] {
            delta.remove(k);
        }
        match drop {
            // Since the decision log kept deltas small: what is outside the state is kept
            // only where it differs from the base's.
            Some(Value::Array(drop)) => {
                for k in drop.iter().filter_map(Value::as_str) {
                    top.remove(k);
                }
                top.extend(delta);
            }
            _ => top = delta,
        }
    }
    Ok(Lazy {
        top,
        fields,
        lists,
        depth,
    })
}

/// The key of a logged input naming the stored items of its runs:
/// `{"thread": T, "runs": [[FROM, TO, ITEMS], ...]}` (the runs `FROM..=TO` of `T` had
/// `ITEMS` items in all, as the `items` table holds them), or, once the thread was replaced,
/// the same with `"chunk": SHA`, a `decision_chunks` body `[[ORDINAL, [ITEM, ...]], ...]`
/// holding those items.
const STORED_ITEMS: &str = "stored_items";

/// Take the items out of the finished runs of `state` (a dispatch's, loaded from `thread`'s
/// rows), and name them instead. The items of a finished run never change in the store
/// (`complete_run` appends to a running run only); a thread replaced by an import has its
/// references frozen first ([`freeze`]).
fn strip_items(state: &mut Map<String, Value>, thread: &str) -> Option<Value> {
    let Some(Value::Array(runs)) = state.get_mut("runs") else {
        return None;
    };
    let mut ranges: Vec<[u64; 3]> = Vec::new();
    for run in runs.iter_mut() {
        let finished = run.get("status").and_then(Value::as_str) != Some("running");
        let Some(ordinal) = run.get("ordinal").and_then(Value::as_u64) else {
            continue;
        };
        let n = match run.get("items") {
            Some(Value::Array(items)) if finished && !items.is_empty() => items.len(),
            _ => continue,
        };
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        // As a run with no items serializes: without the key.
        if let Some(obj) = run.as_object_mut() {
            obj.remove("items");
        }
        match ranges.last_mut() {
            Some(r) if r[1].saturating_add(1) == ordinal => {
                r[1] = ordinal;
                r[2] = r[2].saturating_add(n);
            }
            _ => ranges.push([ordinal, ordinal, n]),
        }
    }
    (!ranges.is_empty()).then(|| serde_json::json!({ "thread": thread, "runs": ranges }))
}

/// The items a `stored_items` reference names, by ordinal.
fn stored_items(conn: &Connection, refs: &Value) -> Result<Vec<(u64, Vec<Value>)>, RowError> {
    let ranges: Vec<[u64; 3]> = refs
        .get("runs")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(RowError::from)?
        .unwrap_or_default();
    if let Some(sha) = refs.get("chunk").and_then(Value::as_str) {
        let body: Option<String> = conn
            .query_row(
                "SELECT body FROM decision_chunks WHERE sha = ?1",
                [sha],
                |r| r.get::<_, super::packed::Text>(0),
            )
            .optional()
            .map_err(RowError::from)?
            .map(|t| t.0);
        let body = body.ok_or_else(|| format!("its chunk {sha} of `{STORED_ITEMS}` is missing"))?;
        return serde_json::from_str(&body).map_err(RowError::from);
    }
    let thread = refs
        .get("thread")
        .and_then(Value::as_str)
        .ok_or("its stored items name no thread")?;
    let mut st = conn
        .prepare_cached(
            "SELECT run, kind, body FROM items WHERE thread = ?1 AND run BETWEEN ?2 AND ?3
             ORDER BY run, idx",
        )
        .map_err(RowError::from)?;
    let mut out: Vec<(u64, Vec<Value>)> = Vec::new();
    for [from, to, n] in ranges {
        let rows = st
            .query_map(params![thread, from, to], |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(RowError::from)?;
        let mut count = 0u64;
        for row in rows {
            let (run, kind, body) = row.map_err(RowError::from)?;
            let item: crate::state::Item =
                serde_json::from_str(&super::io::item_json(&kind, &body))
                    .map_err(RowError::from)?;
            let item = serde_json::to_value(item).map_err(RowError::from)?;
            count = count.saturating_add(1);
            match out.last_mut() {
                Some((r, items)) if *r == run => items.push(item),
                _ => out.push((run, vec![item])),
            }
        }
        if count != n {
            return Err(RowError::from(format!(
                "runs {from}-{to} of thread \"{thread}\" had {n} items when it was decided and have {count} now"
            )));
        }
    }
    Ok(out)
}

/// The chunks to store (sha256, body) and the log rows to rewrite (id, input) of [`freeze`].
pub(crate) type Frozen = (Vec<(String, String)>, Vec<(i64, String)>);

/// Before `thread`'s rows are replaced (an import with `replace`): every logged input naming
/// its stored items keeps a copy of them instead, in `decision_chunks`. Returns the chunks to
/// store and the rows to rewrite (id, new input).
pub(crate) fn freeze(conn: &Connection, thread: &str) -> Result<Frozen, RowError> {
    let mut st = conn
        .prepare(
            "SELECT id, input FROM decision_log
             WHERE thread = ?1 AND input IS NOT NULL AND instr(input, '\"stored_items\"') > 0",
        )
        .map_err(RowError::from)?;
    let rows: Vec<(i64, String)> = st
        .query_map([thread], |r| {
            Ok((r.get(0)?, r.get::<_, super::packed::Input>(1)?.0))
        })
        .map_err(RowError::from)?
        .collect::<Result<_, _>>()
        .map_err(RowError::from)?;
    let mut chunks = Vec::new();
    let mut rewritten = Vec::new();
    for (id, text) in rows {
        let Ok(mut row) = parse(&text) else { continue };
        let Some(Value::Object(refs)) = row.get_mut(STORED_ITEMS) else {
            continue;
        };
        if refs.contains_key("chunk") {
            continue;
        }
        let items = stored_items(conn, &Value::Object(refs.clone()))?;
        let body = serde_json::to_string(&items).map_err(RowError::from)?;
        let sha = sha_hex(&body);
        refs.insert("chunk".into(), Value::String(sha.clone()));
        chunks.push((sha, body));
        rewritten.push((id, Value::Object(row).to_string()));
    }
    Ok((chunks, rewritten))
}

/// A logged input (the `input` column) as the whole input: a keyframe's chunks read back, a
/// delta applied to its base, the stored items it names put back in their runs.
pub(crate) fn materialize(conn: &Connection, input: &str) -> Result<Value, RowError> {
    let mut l = lazy(conn, parse(input)?)?;
    let mut state = std::mem::take(&mut l.fields);
    for name in CHUNKED {
        let Some(mut list) = l.lists.remove(name) else {
            continue;
        };
        let mut out = Vec::with_capacity(list.len);
        for i in 0..list.len {
            out.push(list.get(conn, name, i)?);
        }
        state.insert(name.to_string(), Value::Array(out));
    }
    let mut top = l.top;
    if let Some(refs) = top.remove(STORED_ITEMS) {
        let items = stored_items(conn, &refs)?;
        let Some(Value::Array(runs)) = state.get_mut("runs") else {
            return Err("it names stored items but has no runs".into());
        };
        // Runs are contiguous: from run 1, or from a window's first run.
        let first = runs
            .first()
            .and_then(|r| r.get("ordinal"))
            .and_then(Value::as_u64)
            .unwrap_or(1);
        for (ordinal, its) in items {
            let run = ordinal
                .checked_sub(first)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| runs.get_mut(i))
                .filter(|r| r.get("ordinal").and_then(Value::as_u64) == Some(ordinal))
                .ok_or_else(|| {
                    format!("it names the items of run {ordinal}, which it does not hold")
                })?;
            if let Some(obj) = run.as_object_mut() {
                obj.insert("items".into(), Value::Array(its));
            }
        }
    }
    top.insert("state".into(), Value::Object(state));
    Ok(Value::Object(top))
}

/// What to write for `input` (a [`super::DecisionInput`] as JSON) logged on `thread`: a delta
/// on the thread's latest logged input when there is one to build on, else a keyframe. Returns
/// the row's text and the chunks (sha256, body) a keyframe needs stored.
pub(crate) fn encode(
    conn: &Connection,
    thread: &str,
    operation: &str,
    input: Value,
) -> Result<(String, Vec<(String, String)>), RowError> {
    let Value::Object(mut top) = input else {
        return Err("the decision input is not a JSON object".into());
    };
    let Some(Value::Object(mut state)) = top.remove("state") else {
        return Err("the decision input has no state".into());
    };
    // A dispatch decides on the thread's own rows: the items of its finished runs are named,
    // not copied (see `stored_items`).
    let own = state
        .get("thread")
        .and_then(|t| t.get("id"))
        .and_then(Value::as_str)
        == Some(thread);
    if operation == "dispatch" && own {
        if let Some(refs) = strip_items(&mut state, thread) {
            top.insert(STORED_ITEMS.into(), refs);
        }
    }
    // Each list cut into chunks and hashed, as a keyframe would store it.
    let mut hashed: Vec<(&str, Vec<(String, String)>)> = Vec::new();
    for name in CHUNKED {
        if let Some(Value::Array(items)) = state.get(name) {
            let chunks = items
                .chunks(CHUNK_LEN)
                .map(|c| {
                    let body = chunk_body(c);
                    (sha_hex(&body), body)
                })
                .collect();
            hashed.push((name, chunks));
        }
    }
    if let Some(delta) = base_of(conn, thread)
        .and_then(|(id, base)| delta(conn, id, base, &state, &hashed, &top).ok())
    {
        return Ok((Value::Object(delta).to_string(), Vec::new()));
    }
    // A keyframe: the chunks not stored yet are stored packed.
    let mut new_chunks = Vec::new();
    for (name, chunks) in hashed {
        let elements = match state.remove(name) {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        for ((sha, _), part) in chunks.iter().zip(elements.chunks(CHUNK_LEN)) {
            let stored = conn
                .query_row(
                    "SELECT 1 FROM decision_chunks WHERE sha = ?1",
                    [sha],
                    |_| Ok(()),
                )
                .optional()
                .map_err(RowError::from)?
                .is_some();
            if !stored {
                new_chunks.push((sha.clone(), packed(part)));
            }
        }
        let shas: Vec<Value> = chunks
            .iter()
            .map(|(s, _)| Value::String(s.clone()))
            .collect();
        state.insert(name.to_string(), serde_json::json!({ "chunks": shas }));
    }
    top.insert("state".into(), Value::Object(state));
    Ok((Value::Object(top).to_string(), new_chunks))
}

/// The thread's latest logged input to build a delta on, when it is not at the end of its chain.
fn base_of(conn: &Connection, thread: &str) -> Option<(i64, Lazy)> {
    let (id, text): (i64, String) = conn
        .query_row(
            "SELECT id, input FROM decision_log
             WHERE thread = ?1 AND input IS NOT NULL
             ORDER BY run DESC, id DESC LIMIT 1",
            params![thread],
            |r| Ok((r.get(0)?, r.get::<_, super::packed::Input>(1)?.0)),
        )
        .optional()
        .ok()
        .flatten()?;
    let row = parse(&text).ok()?;
    let depth = row.get("depth").and_then(Value::as_u64).unwrap_or(0);
    if depth >= MAX_DEPTH {
        return None;
    }
    lazy(conn, row).ok().map(|l| (id, l))
}

/// The delta of `state` (with its lists `hashed`) on `base` (row `id`).
fn delta(
    conn: &Connection,
    id: i64,
    mut base: Lazy,
    state: &Map<String, Value>,
    hashed: &[(&str, Vec<(String, String)>)],
    top: &Map<String, Value>,
) -> Result<Map<String, Value>, RowError> {
    let mut fields = Map::new();
    let mut removed = Vec::new();
    for (k, v) in state {
        if CHUNKED.contains(&k.as_str()) && v.is_array() {
            continue;
        }
        if base.fields.get(k) != Some(v) {
            fields.insert(k.clone(), v.clone());
        }
    }
    for k in base.fields.keys().chain(base.lists.keys()) {
        let listed = CHUNKED.contains(&k.as_str()) && state.get(k).is_some_and(Value::is_array);
        if !state.contains_key(k) || (base.lists.contains_key(k) && !listed) {
            removed.push(Value::String(k.clone()));
        }
    }
    let mut lists = Map::new();
    for (name, chunks) in hashed {
        let Some(Value::Array(items)) = state.get(*name) else {
            continue;
        };
        let had = base.lists.contains_key(*name);
        let list = base.lists.entry(name.to_string()).or_default();
        let mut set = Vec::new();
        for (c, (sha, _)) in chunks.iter().enumerate() {
            let start = c.saturating_mul(CHUNK_LEN);
            let end = start.saturating_add(CHUNK_LEN).min(items.len());
            if list.same_chunk(c, start, end, sha) {
                continue;
            }
            for i in start..end {
                let Some(cur) = items.get(i) else { break };
                let old = if i < list.len {
                    Some(list.get(conn, name, i)?)
                } else {
                    None
                };
                if old.as_ref() != Some(cur) {
                    set.push(element(conn, list, name, i, cur, old)?);
                }
            }
        }
        // A list as long as the base's with no element set is left out: unchanged.
        if !had || items.len() != list.len || !set.is_empty() {
            lists.insert(
                name.to_string(),
                serde_json::json!({ "len": items.len(), "set": set }),
            );
        }
    }
    let mut out = Map::new();
    out.insert("base".into(), Value::from(id));
    out.insert("depth".into(), Value::from(base.depth.saturating_add(1)));
    out.insert("fields".into(), Value::Object(fields));
    if !removed.is_empty() {
        out.insert("removed".into(), Value::Array(removed));
    }
    out.insert("lists".into(), Value::Object(lists));
    let drop: Vec<Value> = base
        .top
        .keys()
        .filter(|k| !top.contains_key(*k))
        .map(|k| Value::String(k.clone()))
        .collect();
    out.insert("drop".into(), Value::Array(drop));
    for (k, v) in top {
        if base.top.get(k) != Some(v) {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// How many elements before a new one [`element`] tries as its base.
const LOOK_BACK: usize = 6;

/// How a delta sets element `i` of list `name` to `cur` (`old`: the base's element `i`):
/// `[i, ELEMENT]`, or `[i, PATCH, j]`, the base's element `j` patched ([`super::patch`]),
/// whichever is shorter. `j` is `i` (an element that changed: a run completed, a handoff
/// superseded) or one of the [`LOOK_BACK`] before it (a new element is much like the one
/// before it, or the one before that on a thread alternating between two providers, or the
/// latest one made the same way: a handoff of the same strategy, whose provider-thread list is
/// that one's with one more).
fn element(
    conn: &Connection,
    list: &mut List,
    name: &str,
    i: usize,
    cur: &Value,
    old: Option<Value>,
) -> Result<Value, RowError> {
    let mut best = serde_json::json!([i, cur]);
    let mut best_len = best.to_string().len();
    let mut refs: Vec<(usize, Value)> = old.map(|o| (i, o)).into_iter().collect();
    for back in 1..=LOOK_BACK {
        if let Some(j) = i.checked_sub(back).filter(|j| *j < list.len) {
            refs.push((j, list.get(conn, name, j)?));
        }
    }
    for (j, r) in refs {
        let p = super::patch::diff(&r, cur);
        let candidate = serde_json::json!([i, Value::Object(p), j]);
        let len = candidate.to_string().len();
        if len < best_len {
            best = candidate;
            best_len = len;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE decision_log (id INTEGER PRIMARY KEY, thread TEXT, run INTEGER, input TEXT);
             CREATE TABLE decision_chunks (sha TEXT PRIMARY KEY, body TEXT NOT NULL);",
        )
        .unwrap();
        c
    }

    fn run(o: u64, status: &str) -> Value {
        json!({"ordinal": o, "provider": "codex", "provider_thread": "C1", "status": status})
    }

    /// Rows logged before deltas patched their elements (a plain chunk, a delta that keeps
    /// everything outside the state whole and sets whole elements) still read.
    #[test]
    fn an_earlier_keyframe_and_delta_still_read() {
        let c = db();
        let runs = vec![run(1, "completed"), run(2, "running")];
        let body = chunk_body(&runs);
        let sha = sha_hex(&body);
        c.execute(
            "INSERT INTO decision_chunks (sha, body) VALUES (?1, ?2)",
            params![sha, body],
        )
        .unwrap();
        let key = json!({"state": {"version": 1, "runs": {"chunks": [sha]}},
                         "target": "codex", "document_root": "/d", "context": {}});
        c.execute(
            "INSERT INTO decision_log (id, thread, run, input) VALUES (1, 't', 3, ?1)",
            [key.to_string()],
        )
        .unwrap();
        let delta = json!({"base": 1, "depth": 1, "fields": {}, "removed": [],
            "lists": {"runs": {"len": 3, "set": [[1, run(2, "completed")], [2, run(3, "running")]]}},
            "target": "claude", "document_root": "/d", "context": {}});
        let got = materialize(&c, &delta.to_string()).unwrap();
        assert_eq!(
            got,
            json!({"state": {"version": 1, "runs": [run(1, "completed"), run(2, "completed"), run(3, "running")]},
                   "target": "claude", "document_root": "/d", "context": {}})
        );
    }

    /// A packed chunk gives its elements back, and a new delta patches elements and keeps
    /// only what differs outside the state.
    #[test]
    fn packed_chunks_and_patched_elements_give_the_input_back() {
        let c = db();
        let runs: Vec<Value> = (1..=5).map(|o| run(o, "completed")).collect();
        let packed_body = packed(&runs);
        assert!(packed_body.len() < chunk_body(&runs).len(), "{packed_body}");
        assert_eq!(
            unpacked(serde_json::from_str(&packed_body).unwrap()).unwrap(),
            runs
        );
        let input = |runs: &[Value], target: &str| {
            json!({"state": {"version": 1, "thread": {"id": "t"}, "runs": runs},
                   "target": target, "document_root": "/d", "context": {}})
        };
        let mut all = runs.clone();
        all.push(run(6, "running"));
        let first = input(&all, "codex");
        let (text, chunks) = encode(&c, "t", "regenerate", first.clone()).unwrap();
        for (sha, body) in chunks {
            c.execute(
                "INSERT INTO decision_chunks (sha, body) VALUES (?1, ?2)",
                params![sha, body],
            )
            .unwrap();
        }
        c.execute(
            "INSERT INTO decision_log (id, thread, run, input) VALUES (1, 't', 7, ?1)",
            [&text],
        )
        .unwrap();
        assert_eq!(materialize(&c, &text).unwrap(), first);
        all[5] = run(6, "completed");
        all.push(run(7, "running"));
        let second = input(&all, "codex");
        let (text, chunks) = encode(&c, "t", "regenerate", second.clone()).unwrap();
        assert!(chunks.is_empty());
        let row: Value = serde_json::from_str(&text).unwrap();
        // Run 6 completed is run 5 with another ordinal: the shortest patch.
        assert_eq!(
            row["lists"]["runs"]["set"][0],
            json!([5, {"/ordinal": 6}, 4])
        );
        assert!(row.get("target").is_none(), "{row}");
        assert_eq!(materialize(&c, &text).unwrap(), second);
    }
}
