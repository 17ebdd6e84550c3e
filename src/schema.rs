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
        "decision" => (
            "baton decision",
            root_serialized::<crate::decision::Decision>(
                "What `baton explain --json` prints and the service's `explain` returns as \
`decision` (docs/cli.md).",
            ),
        ),
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
        MergeBackParams, PregrantParams, RegenerateParams, RollbackParams, ThreadParams,
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
    let defs: Map<String, Value> = gen.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "A JSON-RPC 2.0 request to `baton serve`, one alternative per method with \
    the schema of its params (docs/service.md).",
        "oneOf": one_of,
        "$defs": defs,
    })
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
