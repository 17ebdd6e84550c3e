//! `baton schema NAME` prints JSON Schemas generated from the types; they hold against every
//! example and fixture baton accepts, reject what baton rejects for its shape, and agree with the
//! TypeScript client's types (examples/node-client/src/baton.ts).

use crate::common;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The schema as `baton schema NAME` prints it.
fn schema(name: &str) -> Value {
    let out = common::baton(&["schema", name]);
    assert!(out.status.success(), "baton schema {name} failed: {out:?}");
    serde_json::from_slice(&out.stdout).expect("baton schema prints JSON")
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::validator_for(&schema(name))
        .unwrap_or_else(|e| panic!("the {name} schema is not a valid JSON Schema: {e}"))
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// YAML or JSON file as a JSON value.
fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let y: serde_yaml::Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    serde_json::to_value(y).unwrap()
}

/// Every *.yaml, *.yml and *.json file under `dir`, recursively, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if !p.ends_with("node_modules") {
                    todo.push(p);
                }
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn corpus() -> Vec<PathBuf> {
    let mut v = files(&root().join("examples"));
    v.extend(files(&root().join("tests/fixtures")));
    v.extend(files(&root().join("policies/tests")));
    v.extend(files(&root().join("docs/examples")));
    v
}

/// Files too large to be worth a schema pass (the bad-input fixtures of many megabytes).
fn small(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.len() < 1_000_000)
        .unwrap_or(false)
}

#[test]
fn every_state_baton_accepts_matches_the_state_schema() {
    let v = validator("state");
    let mut checked = 0;
    let mut failures = Vec::new();
    for p in corpus().into_iter().filter(|p| small(p)) {
        let Ok(state) = baton::state::load_file(&p) else {
            continue;
        };
        checked += 1;
        let doc = read(&p);
        let errs = errors(&v, &doc);
        if !errs.is_empty() {
            failures.push(format!("{}: {}", p.display(), errs.join("; ")));
        }
        // What baton writes back (`db export`) matches too.
        let back = serde_json::to_value(&state).unwrap();
        let errs = errors(&v, &back);
        if !errs.is_empty() {
            failures.push(format!(
                "{} (as exported): {}",
                p.display(),
                errs.join("; ")
            ));
        }
    }
    assert!(checked >= 40, "only {checked} state files found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_test_file_baton_accepts_matches_the_test_file_schema() {
    let v = validator("test-file");
    let mut checked = 0;
    let mut failures = Vec::new();
    for p in corpus().into_iter().filter(|p| small(p)) {
        if baton::testing::file::load(&p).is_err() {
            continue;
        }
        checked += 1;
        let errs = errors(&v, &read(&p));
        if !errs.is_empty() {
            failures.push(format!("{}: {}", p.display(), errs.join("; ")));
        }
    }
    assert!(checked >= 5, "only {checked} test files found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shape_errors_baton_rejects_the_schema_rejects_too() {
    let v = validator("state");
    let good = read(&root().join("examples/seed-switch.yaml"));
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut typo = good.clone();
    typo["request"]["provder"] = json!("codex");
    cases.push(("a misspelt key", typo));
    let mut kind = good.clone();
    kind["runs"][0]["items"][0] = json!({"kind": "user_msg", "text": "hi"});
    cases.push(("an unknown item kind", kind));
    let mut missing = good.clone();
    missing["runs"][0]["items"][0] = json!({"kind": "user_message"});
    cases.push(("an item without its text", missing));
    let mut status = good.clone();
    status["runs"][0]["status"] = json!("done");
    cases.push(("an unknown run status", status));
    let mut no_request = good.clone();
    no_request.as_object_mut().unwrap().remove("request");
    cases.push(("no request", no_request));
    for (what, doc) in cases {
        assert!(!v.is_valid(&doc), "the state schema accepts {what}");
        let yaml = serde_yaml::to_string(&doc).unwrap();
        assert!(
            baton::state::parse_str(&yaml, baton::state::Format::Yaml, "x.yaml").is_err(),
            "baton accepts {what}"
        );
    }
    assert!(v.is_valid(&good));
}

#[test]
fn every_decision_explain_prints_matches_the_decision_schema() {
    let v = validator("decision");
    let mut failures = Vec::new();
    let mut checked = 0;
    for p in files(&root().join("examples")) {
        if baton::state::load_file(&p).is_err() {
            continue;
        }
        for target in ["codex", "claude", "cursor", "copilot"] {
            let out = common::baton(&[
                "explain",
                "--state",
                p.to_str().unwrap(),
                "--target",
                target,
                "--json",
            ]);
            if !out.status.success() {
                continue;
            }
            checked += 1;
            let d: Value = serde_json::from_slice(&out.stdout).unwrap();
            let errs = errors(&v, &d);
            if !errs.is_empty() {
                failures.push(format!(
                    "{} --target {target}: {}",
                    p.display(),
                    errs.join("; ")
                ));
            }
        }
    }
    assert!(checked >= 40, "only {checked} decisions checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn service_schema_covers_every_method_and_checks_params() {
    let v = validator("service");
    let ok = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"thread": "th_1", "target": "claude"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "dispatch", "params": {"thread": "th_1", "target": "codex", "message": "go"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "completeRun", "params": {"thread": "th_1", "run": 9, "items": [{"kind": "user_message", "text": "x"}]}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "health"}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "thread/import", "params": {"state": read(&root().join("examples/seed-switch.yaml"))}}),
    ];
    for r in &ok {
        assert!(v.is_valid(r), "{r}: {:?}", errors(&v, r));
    }
    let bad = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"thred": "th_1"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "rollback", "params": {"thread": "th_1"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "frobnicate"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "completeRun", "params": {"thread": "t", "run": 1, "items": [{"kind": "nope"}]}}),
    ];
    for r in &bad {
        assert!(!v.is_valid(r), "the service schema accepts {r}");
    }
    // Every method the service answers has an alternative (`health` lists them).
    let methods = baton::schema::service_methods();
    let dir = tempfile::tempdir().unwrap();
    let mut server = crate::serve_support::stdio(dir.path(), &["--no-watch"]);
    let health = server.client.result("health", json!({}));
    assert_eq!(server.stop(), 0);
    let answered: Vec<String> = serde_json::from_value(health["methods"].clone()).unwrap();
    let missing: Vec<_> = answered
        .iter()
        .filter(|m| !methods.iter().any(|n| n == *m))
        .collect();
    assert!(missing.is_empty(), "no schema for methods {missing:?}");
}

#[test]
fn an_unknown_schema_name_is_bad_usage() {
    let out = common::baton(&["schema", "states"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("possible values: state, decision, test-file, service"),
        "{err}"
    );
}

// ---- the TypeScript client's types against the schemas ----

/// One field of a TypeScript object type: optional (`?`), and its type text.
#[derive(Debug)]
struct TsField {
    optional: bool,
    ty: String,
}

/// The fields of the object type whose body is `body` (the text between its braces).
fn ts_fields(body: &str) -> BTreeMap<String, TsField> {
    let mut out = BTreeMap::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut parts = Vec::new();
    for c in body.chars() {
        match c {
            '{' | '(' | '[' | '<' => depth += 1,
            '}' | ')' | ']' | '>' => depth -= 1,
            _ => {}
        }
        if (c == ';' || c == ',') && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    for part in parts {
        let part: String = part
            .lines()
            .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with("/*"))
            .collect::<Vec<_>>()
            .join("\n");
        let part = part.trim();
        let Some((name, ty)) = part.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let (name, optional) = match name.strip_suffix('?') {
            Some(n) => (n, true),
            None => (name, false),
        };
        out.insert(
            name.to_string(),
            TsField {
                optional,
                ty: ty.trim().to_string(),
            },
        );
    }
    out
}

/// The body of `export interface NAME { ... }` in the TypeScript source.
fn ts_interface<'a>(src: &'a str, name: &str) -> &'a str {
    let head = format!("export interface {name} {{");
    let start = src
        .find(&head)
        .unwrap_or_else(|| panic!("no interface {name}"))
        + head.len();
    let end = src[start..].find("\n}").expect("a closing brace") + start;
    &src[start..end]
}

/// The string members of `export type NAME = "a" | "b" ...;`.
fn ts_union(src: &str, name: &str) -> BTreeSet<String> {
    let head = format!("export type {name} =");
    let start = src.find(&head).unwrap_or_else(|| panic!("no type {name}")) + head.len();
    let end = src[start..].find(';').unwrap() + start;
    src[start..end]
        .split('|')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Follow `$ref`s and drop the `null` alternative of an optional value.
fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return resolve(&defs[name], defs);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let non_null: Vec<&Value> = alts
                .iter()
                .filter(|a| a.get("type") != Some(&json!("null")))
                .collect();
            if let [only] = non_null.as_slice() {
                return resolve(only, defs);
            }
        }
    }
    schema
}

fn nullable(schema: &Value) -> bool {
    let t = schema.get("type");
    t == Some(&json!("null"))
        || t.and_then(Value::as_array)
            .is_some_and(|a| a.contains(&json!("null")))
        || ["anyOf", "oneOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(nullable))
        })
}

fn enum_values(schema: &Value, defs: &Value) -> BTreeSet<String> {
    let s = resolve(schema, defs);
    let mut out = BTreeSet::new();
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        out.extend(e.iter().filter_map(Value::as_str).map(str::to_string));
    }
    if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        for a in alts {
            if let Some(c) = a.get("const").and_then(Value::as_str) {
                out.insert(c.to_string());
            }
            if let Some(e) = a.get("enum").and_then(Value::as_array) {
                out.extend(e.iter().filter_map(Value::as_str).map(str::to_string));
            }
        }
    }
    out
}

/// Compare an object schema with a TypeScript object type, field by field and one level into
/// nested object types; returns the differences.
fn compare(
    path: &str,
    schema: &Value,
    defs: &Value,
    ts: &BTreeMap<String, TsField>,
) -> Vec<String> {
    let schema = resolve(schema, defs);
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut diffs = Vec::new();
    for (name, p) in &props {
        let Some(f) = ts.get(name) else {
            diffs.push(format!(
                "{path}.{name}: in the schema, missing from the TypeScript type"
            ));
            continue;
        };
        let req = required.contains(name.as_str());
        if req == f.optional {
            diffs.push(format!(
                "{path}.{name}: the schema says {}, the TypeScript type says {}",
                if req {
                    "always present"
                } else {
                    "may be absent"
                },
                if f.optional {
                    "optional (`?`)"
                } else {
                    "always present"
                }
            ));
        }
        // `| null` of the field itself, not of a field of a nested object type.
        let mut depth = 0;
        let outer: String =
            f.ty.chars()
                .filter(|c| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .collect();
        let ts_null = outer.contains("| null") || outer.contains("null |");
        // A key baton may leave out is never null when present; only an always-present key's
        // nullability must agree.
        if req && nullable(p) != ts_null && !f.ty.starts_with("unknown") {
            diffs.push(format!(
                "{path}.{name}: the schema says {}nullable, the TypeScript type `{}` {}",
                if nullable(p) { "" } else { "not " },
                f.ty,
                if ts_null {
                    "allows null"
                } else {
                    "does not allow null"
                }
            ));
        }
        let inner = resolve(p, defs);
        if inner.get("properties").is_some() {
            if let (Some(a), Some(b)) = (f.ty.find('{'), f.ty.rfind('}')) {
                diffs.extend(compare(
                    &format!("{path}.{name}"),
                    inner,
                    defs,
                    &ts_fields(&f.ty[a + 1..b]),
                ));
            }
        }
    }
    for name in ts.keys() {
        if !props.contains_key(name) {
            diffs.push(format!(
                "{path}.{name}: in the TypeScript type, not in the schema"
            ));
        }
    }
    diffs
}

#[test]
fn the_typescript_decision_type_matches_the_decision_schema() {
    let src = std::fs::read_to_string(root().join("examples/node-client/src/baton.ts")).unwrap();
    let s = schema("decision");
    let defs = s["$defs"].clone();
    let mut diffs = compare(
        "Decision",
        &s,
        &defs,
        &ts_fields(ts_interface(&src, "Decision")),
    );
    diffs.extend(compare(
        "PolicyRef",
        &s["properties"]["policy"],
        &defs,
        &ts_fields(ts_interface(&src, "PolicyRef")),
    ));
    diffs.extend(compare(
        "RunRange",
        &defs["RunRange"],
        &defs,
        &ts_fields(ts_interface(&src, "RunRange")),
    ));
    for (ts, prop) in [
        ("Strategy", "strategy"),
        ("HandoffStrategy", "handoff_strategy"),
    ] {
        let want = enum_values(&s["properties"][prop], &defs);
        let got = ts_union(&src, ts);
        assert!(!want.is_empty(), "no enum values for {prop} in the schema");
        if want != got {
            diffs.push(format!(
                "type {ts}: the schema has {want:?}, TypeScript {got:?}"
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "examples/node-client/src/baton.ts disagrees with `baton schema decision`:\n{}",
        diffs.join("\n")
    );
}

/// The YAML examples of docs/state.md are valid: the whole state loads, and each fragment
/// (`thread:`, `runs:`, ...) matches the state schema when put into a valid state.
#[test]
fn the_state_reference_examples_match_the_schema() {
    let v = validator("state");
    let text = std::fs::read_to_string(root().join("docs/state.md")).unwrap();
    let base = read(&root().join("examples/seed-switch.yaml"));
    let mut blocks = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, l) in text.lines().enumerate() {
        match (&mut cur, l.trim_start().starts_with("```")) {
            (None, true) if l.trim() == "```yaml" => cur = Some((i + 1, String::new())),
            (Some(_), true) => blocks.extend(cur.take()),
            (Some((_, b)), false) => {
                b.push_str(l);
                b.push('\n');
            }
            _ => {}
        }
    }
    assert!(blocks.len() >= 8, "only {} yaml examples", blocks.len());
    let mut failures = Vec::new();
    for (line, block) in blocks {
        let frag: serde_yaml::Value = serde_yaml::from_str(&block).unwrap();
        let frag = serde_json::to_value(frag).unwrap();
        let doc = if frag.get("version").is_some() {
            if let Err(e) = baton::state::parse_str(&block, baton::state::Format::Yaml, "x") {
                failures.push(format!("docs/state.md:{line}: {e}"));
            }
            frag
        } else {
            let mut d = base.clone();
            for (k, val) in frag.as_object().unwrap() {
                d[k] = val.clone();
            }
            d
        };
        let errs = errors(&v, &doc);
        if !errs.is_empty() {
            failures.push(format!("docs/state.md:{line}: {}", errs.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// docs/state.md names every key the state schema has, and every item kind and enum value.
#[test]
fn the_state_reference_names_every_key_and_kind() {
    let text = std::fs::read_to_string(root().join("docs/state.md")).unwrap();
    let s = schema("state");
    let mut names = BTreeSet::new();
    fn walk(v: &Value, names: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::Object(p)) = o.get("properties") {
                    names.extend(p.keys().cloned());
                }
                for key in ["enum"] {
                    if let Some(Value::Array(a)) = o.get(key) {
                        names.extend(a.iter().filter_map(Value::as_str).map(str::to_string));
                    }
                }
                if let Some(Value::String(c)) = o.get("const") {
                    names.insert(c.clone());
                }
                o.values().for_each(|x| walk(x, names));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, names)),
            _ => {}
        }
    }
    walk(&s, &mut names);
    assert!(names.len() > 80, "{names:?}");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !text.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/state.md does not name {missing:?}"
    );
}

/// Every request docs/service.md shows matches the service schema, unless the doc shows the
/// service refusing it as an invalid request, an unknown method or invalid params.
#[test]
fn the_service_guide_requests_match_the_service_schema() {
    let v = validator("service");
    let text = std::fs::read_to_string(root().join("docs/service.md")).unwrap();
    let mut values: Vec<(usize, Value)> = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, l) in text.lines().enumerate() {
        match (&mut cur, l.trim_start().starts_with("```")) {
            (None, true) if l.trim().starts_with("```json") => cur = Some((i + 1, String::new())),
            (Some(_), true) => {
                if let Some((line, body)) = cur.take() {
                    match serde_json::from_str::<Value>(&body) {
                        Ok(x) => values.push((line, x)),
                        Err(_) => values.extend(
                            body.lines()
                                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                                .map(|x| (line, x)),
                        ),
                    }
                }
            }
            (Some((_, b)), false) => {
                b.push_str(l);
                b.push('\n');
            }
            _ => {}
        }
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for (k, (line, req)) in values.iter().enumerate() {
        if req.get("method").is_none() || req.get("jsonrpc").is_none() {
            continue;
        }
        checked += 1;
        // The response the doc shows next for this id.
        let refused = values[k + 1..]
            .iter()
            .find(|(_, r)| r.get("method").is_none() && r.get("id") == req.get("id"))
            .and_then(|(_, r)| r.pointer("/error/code").and_then(Value::as_i64))
            .is_some_and(|c| (-32602..=-32600).contains(&c));
        let errs = errors(&v, req);
        match (errs.is_empty(), refused) {
            (true, false) | (false, true) => {}
            (true, true) => failures.push(format!(
                "docs/service.md:{line}: the doc shows {req} refused, the schema accepts it"
            )),
            (false, false) => failures.push(format!(
                "docs/service.md:{line}: {req} does not match the schema: {}",
                errs.join("; ")
            )),
        }
    }
    assert!(checked >= 10, "only {checked} requests in docs/service.md");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The state fixtures baton rejects: a shape error (an unknown field or kind, a missing key:
/// the state cannot be built) is rejected by the schema too; a rule the validator checks
/// across the document (duplicate ids, ordinals, references, ranges) is what the schema cannot
/// see, as docs/state.md says.
#[test]
fn the_schema_rejects_the_shape_errors_baton_rejects() {
    let v = validator("state");
    let mut shape = 0;
    let mut semantic = 0;
    let mut failures = Vec::new();
    for p in files(&root().join("tests/fixtures/state")) {
        let Err(e) = baton::state::load_file(&p) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let Ok(y) = serde_yaml::from_str::<serde_yaml::Value>(&text) else {
            continue;
        };
        let doc = serde_json::to_value(y).unwrap();
        let msg = e.to_string();
        // A shape error is one serde raises while building the state; the validator's
        // problems (now located too) come from a state that was built.
        let shape_error = serde_yaml::from_str::<baton::state::State>(&text).is_err();
        if shape_error {
            shape += 1;
            if v.is_valid(&doc) {
                failures.push(format!(
                    "{}: baton says `{msg}`, the schema accepts it",
                    p.display()
                ));
            }
        } else if !doc.is_null() {
            semantic += 1;
            let errs = errors(&v, &doc);
            if !errs.is_empty() {
                failures.push(format!(
                    "{}: a validator error (`{msg}`) but the schema also rejects it: {}",
                    p.display(),
                    errs.join("; ")
                ));
            }
        }
    }
    assert!(
        shape >= 2 && semantic >= 5,
        "{shape} shape, {semantic} semantic fixtures"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The TypeScript client calls only methods the service schema has, with params it allows: each
/// wrapper's `p: { ... }` fields are properties of that method's params.
#[test]
fn the_typescript_client_calls_methods_and_params_of_the_service_schema() {
    let src = std::fs::read_to_string(root().join("examples/node-client/src/baton.ts")).unwrap();
    let s = schema("service");
    let defs = s["$defs"].clone();
    let params_of = |method: &str| -> Option<Value> {
        s["oneOf"]
            .as_array()?
            .iter()
            .find(|m| m.pointer("/properties/method/const") == Some(&json!(method)))
            .map(|m| resolve(&m["properties"]["params"], &defs).clone())
    };
    let mut calls = 0;
    let mut diffs = Vec::new();
    // Each wrapper: its signature line, then `return this.req("METHOD", ...)` on a later line.
    let lines: Vec<&str> = src.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let Some(at) = l.find("this.req(\"") else {
            continue;
        };
        let rest = &l[at + "this.req(\"".len()..];
        let method = &rest[..rest.find('"').unwrap()];
        calls += 1;
        let Some(params) = params_of(method) else {
            diffs.push(format!(
                "baton.ts:{}: calls `{method}`, which the schema does not have",
                i + 1
            ));
            continue;
        };
        // The signature: the nearest line above with `(p:` (the wrapper's own), if any.
        let sig = lines[..i]
            .iter()
            .rev()
            .take(3)
            .map(|l| l.trim())
            .find(|l| l.contains("(p: {") || l.starts_with("p: {"));
        let Some(sig) = sig else { continue };
        let open = sig.find('{').unwrap();
        let mut depth = 0;
        let mut close = open;
        for (k, c) in sig[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let props = params["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for name in ts_fields(&sig[open + 1..close]).keys() {
            if !props.contains_key(name) {
                diffs.push(format!(
                    "baton.ts:{}: `{method}` is sent `{name}`, which its params schema does not allow",
                    i + 1
                ));
            }
        }
    }
    assert!(calls >= 8, "only {calls} calls found");
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The fields of `export interface NAME [extends BASE] { ... }`, with the base's fields first.
fn ts_interface_fields(src: &str, name: &str) -> BTreeMap<String, TsField> {
    let head = format!("export interface {name} ");
    let start = src
        .find(&head)
        .unwrap_or_else(|| panic!("no interface {name}"))
        + head.len();
    let brace = src[start..].find('{').unwrap() + start;
    let mut fields = BTreeMap::new();
    if let Some(base) = src[start..brace].trim().strip_prefix("extends ") {
        fields.extend(ts_interface_fields(src, base.trim()));
    }
    let end = src[brace..].find("\n}").expect("a closing brace") + brace;
    fields.extend(ts_fields(&src[brace + 1..end]));
    fields
}

/// Each result type of the TypeScript client agrees with the schema of that method's result
/// (`baton schema service`, `results`), which is also what the matching `baton ... --json`
/// command prints.
#[test]
fn the_typescript_result_types_match_the_service_results_schema() {
    let src = std::fs::read_to_string(root().join("examples/node-client/src/baton.ts")).unwrap();
    let s = schema("service");
    let results = &s["results"];
    let defs = results["$defs"].clone();
    // `$ref`s in the results point into `#/results/$defs/`; `resolve` reads the last segment.
    let mut diffs = Vec::new();
    for (ts, method) in [
        ("Explained", "explain"),
        ("Rendered", "render"),
        ("Dispatched", "dispatch"),
        ("Dispatched", "mergeBack"),
        ("Dispatched", "regenerate"),
        ("Completed", "completeRun"),
        ("RollbackReport", "rollback"),
        ("ForkReport", "fork"),
        ("Verdict", "pregrant/check"),
        ("Imported", "thread/import"),
    ] {
        let schema = &results["methods"][method];
        assert!(schema.is_object(), "no result schema for {method}");
        diffs.extend(compare(
            &format!("{ts} ({method})"),
            schema,
            &defs,
            &ts_interface_fields(&src, ts),
        ));
    }
    diffs.extend(compare(
        "HandoffRecord",
        &defs["HandoffRecord"],
        &defs,
        &ts_fields(ts_interface(&src, "HandoffRecord")),
    ));
    assert!(
        diffs.is_empty(),
        "examples/node-client/src/baton.ts disagrees with the results of `baton schema service`:\n{}",
        diffs.join("\n")
    );
}

/// The params are snake_case; the old camelCase names are accepted (and marked deprecated in
/// the schema); `trace` is a param of every method that returns a decision.
#[test]
fn the_service_schema_takes_snake_case_params_and_the_deprecated_camel_case_aliases() {
    let v = validator("service");
    let text = "version: 1\nthread: {id: t}\nrequest: {provider: codex}\n";
    for r in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"state_text": text, "trace": false}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "explain", "params": {"stateText": text}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "dispatch", "params": {"thread": "t", "target": "codex", "runtime_mode": "x", "clean_context": true, "trace": false}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "dispatch", "params": {"thread": "t", "target": "codex", "runtimeMode": "x", "cleanContext": true}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "mergeBack", "params": {"thread": "t", "trace": false}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "regenerate", "params": {"thread": "t", "handoff": "H1", "trace": false}}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "render", "params": {"state_text": text, "trace": false}}),
    ] {
        assert!(v.is_valid(&r), "{r}: {:?}", errors(&v, &r));
    }
    let s = schema("service");
    let decide = &s["$defs"]["DecideParams"]["properties"];
    assert_eq!(decide["stateText"]["deprecated"], json!(true), "{decide}");
    assert!(decide["state_text"].get("deprecated").is_none());
    // The decision schema: the trace may be left out.
    let d = schema("decision");
    assert!(!d["required"].as_array().unwrap().contains(&json!("trace")));
}
