//! JSON Schemas of the documents baton reads and writes, generated from the serde types (so they
//! follow every rename, default and tag): the state file, the decision, a policy test file, and
//! the requests of the JSON-RPC service. `baton schema NAME` prints them.

use schemars::{generate::SchemaSettings, JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// The documents a schema exists for, by the name `baton schema` takes.
pub const NAMES: &[&str] = &["state", "decision", "test-file", "service"];

/// The JSON Schema (draft 2020-12) of the document `name` (one of [`NAMES`]), or `None` for a
/// name baton has no schema for.
pub fn schema(name: &str) -> Option<Value> {
    let (title, mut v) = match name {
        "state" => (
            "baton state file",
            root::<crate::state::State>(
                "One app thread: its providers, provider threads, runs, handoffs and the run about \
to start (docs/state.md).",
            ),
        ),
        "decision" => ("baton decision", {
            let mut d = root_serialized::<crate::decision::Decision>(
                "What `baton explain --json` prints and the service's `explain` returns as \
`decision` (docs/cli.md).",
            );
            trace_optional(&mut d);
            d
        }),
        "test-file" => (
            "baton policy test file",
            root::<crate::testing::file::TestFile>(
                "A policy unit-test file run by `baton test` (docs/testing-policies.md).",
            ),
        ),
        "service" => ("baton service request", service()),
        _ => return None,
    };
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), json!(title));
    }
    Some(v)
}

/// The schema of a document baton reads (a key with a default is not required).
fn root<T: JsonSchema>(description: &str) -> Value {
    described(
        SchemaGenerator::default().into_root_schema_for::<T>(),
        description,
    )
}

/// The schema of a document baton writes (a key it always writes is required, even when null).
fn root_serialized<T: JsonSchema>(description: &str) -> Value {
    let gen = SchemaGenerator::new(SchemaSettings::draft2020_12().for_serialize());
    described(gen.into_root_schema_for::<T>(), description)
}

fn described(schema: schemars::Schema, description: &str) -> Value {
    let mut v = schema.to_value();
    if let Some(o) = v.as_object_mut() {
        o.insert("description".into(), json!(description));
    }
    v
}

/// A JSON-RPC 2.0 request to `baton serve`: one alternative per method, each with the schema of
/// its `params` (docs/service.md).
fn service() -> Value {
    use crate::serve::params::{
        CompleteParams, DecideParams, DispatchParams, Empty, ForkParams, ImportParams,
        MergeBackParams, PregrantParams, RegenerateParams, RollbackParams, ShadowParams,
        ThreadParams,
    };
    let mut gen = SchemaGenerator::default();
    let methods: Vec<(&str, schemars::Schema)> = vec![
        ("explain", gen.subschema_for::<DecideParams>()),
        ("render", gen.subschema_for::<DecideParams>()),
        ("dispatch", gen.subschema_for::<DispatchParams>()),
        ("mergeBack", gen.subschema_for::<MergeBackParams>()),
        ("regenerate", gen.subschema_for::<RegenerateParams>()),
        ("completeRun", gen.subschema_for::<CompleteParams>()),
        ("rollback", gen.subschema_for::<RollbackParams>()),
        ("fork", gen.subschema_for::<ForkParams>()),
        ("pregrant/check", gen.subschema_for::<PregrantParams>()),
        ("thread/import", gen.subschema_for::<ImportParams>()),
        ("thread/export", gen.subschema_for::<ThreadParams>()),
        ("policy/reload", gen.subschema_for::<Empty>()),
        ("policy/status", gen.subschema_for::<Empty>()),
        ("policy/shadow", gen.subschema_for::<ShadowParams>()),
        ("metrics", gen.subschema_for::<Empty>()),
        ("status", gen.subschema_for::<Empty>()),
        ("health", gen.subschema_for::<Empty>()),
        // Handled by the session (LSP lifecycle); their params are not read.
        ("shutdown", schemars::Schema::from(true)),
        ("exit", schemars::Schema::from(true)),
    ];
    let one_of: Vec<Value> = methods
        .into_iter()
        .map(|(name, params)| {
            json!({
                "type": "object",
                "required": ["jsonrpc", "method"],
                "properties": {
                    "jsonrpc": {"const": "2.0"},
                    "id": {"type": ["integer", "string", "null"]},
                    "method": {"const": name},
                    "params": params.to_value(),
                },
                "additionalProperties": false,
            })
        })
        .collect();
    let mut defs: Map<String, Value> = gen.take_definitions(true);
    deprecated_aliases(&mut defs);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "A JSON-RPC 2.0 request to `baton serve`, one alternative per method with \
    the schema of its params (docs/service.md). `results` gives the schema of each method's \
    result, which is also what the matching `baton ... --json` command prints.",
        "oneOf": one_of,
        "$defs": defs,
        "results": results(),
    })
}

/// The deprecated camelCase params (serde aliases) as properties of the params that take
/// them, marked `deprecated`, so that a request of an older client still validates.
fn deprecated_aliases(defs: &mut Map<String, Value>) {
    use crate::serve::params::DEPRECATED_ALIASES;
    for def in defs.values_mut() {
        let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (alias, name) in DEPRECATED_ALIASES {
            if let Some(mut p) = props.get(*name).cloned() {
                if let Some(o) = p.as_object_mut() {
                    o.insert("deprecated".into(), json!(true));
                    o.insert(
                        "description".into(),
                        json!(format!("Deprecated alias of `{name}`.")),
                    );
                }
                props.insert((*alias).to_string(), p);
            }
        }
    }
}

/// The result of every method that has one, keyed by method name, with their own `$defs`
/// (under `results`, so they cannot clash with the params' definitions: a result's schema says
/// what baton writes, the params' what it reads).
fn results() -> Value {
    use crate::deliver::Verdict;
    use crate::store::report::{DispatchReport, ExplainReport, ImportReport, RenderReport};
    use crate::store::{Completed, ForkReport, RollbackReport};
    let mut settings = SchemaSettings::draft2020_12().for_serialize();
    settings.definitions_path = "/results/$defs".into();
    let mut gen = SchemaGenerator::new(settings);
    let mut methods = Map::new();
    let mut add = |name: &str, s: schemars::Schema| {
        methods.insert(name.to_string(), s.to_value());
    };
    add("explain", gen.subschema_for::<ExplainReport>());
    add("render", gen.subschema_for::<RenderReport>());
    add("dispatch", gen.subschema_for::<DispatchReport>());
    add("mergeBack", gen.subschema_for::<DispatchReport>());
    add("regenerate", gen.subschema_for::<DispatchReport>());
    add("completeRun", gen.subschema_for::<Completed>());
    add("rollback", gen.subschema_for::<RollbackReport>());
    add("fork", gen.subschema_for::<ForkReport>());
    add("pregrant/check", gen.subschema_for::<Verdict>());
    add("thread/import", gen.subschema_for::<ImportReport>());
    let mut defs: Map<String, Value> = gen.take_definitions(true);
    for def in defs.values_mut() {
        trace_optional(def);
    }
    json!({ "methods": methods, "$defs": defs })
}

/// A decision's `trace` is left out on request (`trace: false`, `--no-trace`): not required.
fn trace_optional(schema: &mut Value) {
    let is_decision = schema
        .pointer("/properties/decided_by")
        .is_some_and(|_| schema.pointer("/properties/trace").is_some());
    if !is_decision {
        return;
    }
    if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
        req.retain(|k| k != "trace");
    }
    if let Some(t) = schema.pointer_mut("/properties/trace") {
        if let Some(o) = t.as_object_mut() {
            o.insert(
                "description".into(),
                json!("Every rule evaluated, in order; left out when the request asked for no trace (`trace: false`, `--no-trace`)."),
            );
        }
    }
}

/// The method names the service schema covers, in its order.
pub fn service_methods() -> Vec<String> {
    schema("service")
        .and_then(|s| {
            s.get("oneOf").and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(|m| m.pointer("/properties/method/const"))
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
        })
        .unwrap_or_default()
}
