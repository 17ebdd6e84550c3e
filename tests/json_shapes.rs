//! One JSON shape: every operation run on the command line (`baton ... --json`) and on the
//! service (`baton serve`) gives objects with the same keys, recursively, in snake_case; and
//! `--no-trace` / `"trace": false` leave the decision's trace out on both.
//!
//! Two databases go through the same history, one by the CLI and one by the service: import,
//! explain, render, dispatch, pre-grant check, regenerate, complete, fork, the fork's native
//! first run, merge-back, the parent's run that takes it, rollback, export.

use crate::serve_support;

use serde_json::{json, Value};
use serve_support::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Every key path of `v`: `a.b`, `a[].c` (the keys of every element of an array).
fn key_paths(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let p = format!("{at}.{k}");
                    out.insert(p.clone());
                    walk(x, &p, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, &format!("{at}[]"), out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

/// Assert the two objects have the same keys, recursively, and that every key is snake_case
/// (the keys of a trace entry's `values` are fact names, also snake_case with dots).
fn same_shape(what: &str, cli: &Value, service: &Value) {
    assert!(cli.is_object(), "{what}: the CLI printed {cli}");
    let (a, b) = (key_paths(cli), key_paths(service));
    let only_cli: Vec<_> = a.difference(&b).collect();
    let only_service: Vec<_> = b.difference(&a).collect();
    assert!(
        only_cli.is_empty() && only_service.is_empty(),
        "{what}: keys only on the CLI {only_cli:?}, only on the service {only_service:?}"
    );
    for p in &a {
        let last = p.rsplit('.').next().unwrap_or_default();
        assert!(
            !last.chars().any(|c| c.is_ascii_uppercase()),
            "{what}: key `{p}` is not snake_case"
        );
    }
}

struct Cli<'a> {
    db: String,
    docs: &'a Path,
}

impl Cli<'_> {
    fn run(&self, args: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_baton"))
            .current_dir(ROOT)
            .env("BATON_HANDOFF_DIR", self.docs)
            .env_remove("BATON_DB")
            .args(args)
            .args(["--db", &self.db])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baton {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "baton {args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

#[test]
fn every_operation_has_one_json_shape_on_the_cli_and_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let cli_dir = dir.path().join("cli");
    let srv_dir = dir.path().join("srv");
    std::fs::create_dir_all(&cli_dir).unwrap();
    std::fs::create_dir_all(&srv_dir).unwrap();
    let docs = cli_dir.join("handoffs");
    let cli = Cli {
        db: cli_dir.join("baton.db").to_str().unwrap().to_string(),
        docs: &docs,
    };
    let mut s = stdio(&srv_dir, &[]);
    let c = &mut s.client;
    let seed = format!("{ROOT}/examples/seed-switch.yaml");
    let items_file = format!("{ROOT}/tests/fixtures/db/items.yaml");
    let items: Value = serde_json::to_value(
        serde_yaml::from_str::<serde_yaml::Value>(&std::fs::read_to_string(&items_file).unwrap())
            .unwrap(),
    )
    .unwrap();

    // Import: one element of `db import --json` per thread.
    let a = cli.run(&["db", "import", "--json", &seed]);
    let b = c.result(
        "thread/import",
        json!({"state_text": std::fs::read_to_string(&seed).unwrap()}),
    );
    same_shape("thread/import", &a[0], &b);
    assert_eq!(a[0], b);

    // Explain and render a stored thread.
    let a = cli.run(&["explain", "--thread", "th_1", "--target", "codex", "--json"]);
    let b = c.result("explain", json!({"thread": "th_1", "target": "codex"}));
    same_shape("explain", &a, &b["decision"]);
    let a = cli.run(&["render", "--thread", "th_1", "--target", "codex", "--json"]);
    let b = c.result("render", json!({"thread": "th_1", "target": "codex"}));
    same_shape("render", &a, &b);
    assert!(a["handoff"]["document_path"].is_string(), "{a}");
    let a = cli.run(&[
        "explain",
        "--thread",
        "th_1",
        "--target",
        "codex",
        "--json",
        "--no-trace",
    ]);
    let b = c.result(
        "explain",
        json!({"thread": "th_1", "target": "codex", "trace": false}),
    );
    same_shape("explain without the trace", &a, &b["decision"]);
    assert!(a.get("trace").is_none() && b["decision"].get("trace").is_none());

    // Dispatch run 9, check its pre-grant, regenerate its handoff, complete it.
    let msg = "Now add tests for the CSRF check.";
    let a = cli.run(&[
        "dispatch",
        "--thread",
        "th_1",
        "--target",
        "codex",
        "--message",
        msg,
        "--json",
    ]);
    let b = c.result(
        "dispatch",
        json!({"thread": "th_1", "target": "codex", "message": msg}),
    );
    same_shape("dispatch", &a, &b);
    assert_eq!(a["recorded"], b["recorded"]);
    assert_eq!(a["recorded"]["run"], 9);
    assert!(a["trace"].is_array());
    let a = cli.run(&[
        "pregrant",
        "check",
        "--thread",
        "th_1",
        "--run",
        "9",
        "--tool",
        "Read",
        "--path",
        a["pregrant"]["path"].as_str().unwrap(),
        "--json",
    ]);
    let b = c.result(
        "pregrant/check",
        json!({"thread": "th_1", "run": 9, "tool": "Read", "path": b["pregrant"]["path"]}),
    );
    same_shape("pregrant/check", &a, &b);
    assert_eq!(a["allow"], true, "{a}");
    let a = cli.run(&[
        "regenerate",
        "--thread",
        "th_1",
        "--handoff",
        "H2",
        "--json",
        "--no-trace",
    ]);
    let b = c.result(
        "regenerate",
        json!({"thread": "th_1", "handoff": "H2", "trace": false}),
    );
    same_shape("regenerate", &a, &b);
    assert_eq!(a["handoff"]["supersedes"], "H2");
    assert!(a.get("trace").is_none() && b.get("trace").is_none());
    let a = cli.run(&[
        "complete",
        "--thread",
        "th_1",
        "--run",
        "9",
        "--items",
        &items_file,
        "--json",
    ]);
    let b = c.result(
        "completeRun",
        json!({"thread": "th_1", "run": 9, "items": items}),
    );
    same_shape("completeRun", &a, &b);
    assert_eq!(a, b);

    // Fork, the fork's first run, merge-back, the parent's run that takes it.
    let a = cli.run(&[
        "fork", "--thread", "th_1", "--at", "9", "--child", "th_1-try", "--json",
    ]);
    let b = c.result(
        "fork",
        json!({"thread": "th_1", "at": 9, "child": "th_1-try"}),
    );
    same_shape("fork", &a, &b);
    assert_eq!(a, b);
    let a = cli.run(&[
        "dispatch", "--thread", "th_1-try", "--target", "codex", "--json",
    ]);
    let b = c.result("dispatch", json!({"thread": "th_1-try", "target": "codex"}));
    same_shape("dispatch (a fork's first run)", &a, &b);
    assert_eq!(a["strategy"], "native_fork");
    let a = cli.run(&[
        "complete",
        "--thread",
        "th_1-try",
        "--run",
        "10",
        "--items",
        &items_file,
        "--json",
    ]);
    let b = c.result(
        "completeRun",
        json!({"thread": "th_1-try", "run": 10, "items": items}),
    );
    same_shape("completeRun (fork)", &a, &b);
    let a = cli.run(&["merge-back", "--thread", "th_1-try", "--json"]);
    let b = c.result("mergeBack", json!({"thread": "th_1-try"}));
    same_shape("mergeBack", &a, &b);
    assert_eq!(a["handoff"]["covered_thread"], "th_1-try");
    assert_eq!(a["recorded"]["started"], false);
    let a = cli.run(&[
        "dispatch", "--thread", "th_1", "--target", "claude", "--json",
    ]);
    let b = c.result("dispatch", json!({"thread": "th_1", "target": "claude"}));
    same_shape("dispatch (takes the merge-back)", &a, &b);
    assert!(
        a.get("merge_back").is_some() || a["handoff"]["covered_thread"] == "th_1-try",
        "{a}"
    );

    // Roll back, export.
    let a = cli.run(&["rollback", "--thread", "th_1", "--to", "8", "--json"]);
    let b = c.result("rollback", json!({"thread": "th_1", "to": 8}));
    same_shape("rollback", &a, &b);
    assert_eq!(a, b);
    let a = cli.run(&["db", "export", "--thread", "th_1", "--json"]);
    let b = c.result("thread/export", json!({"thread": "th_1"}));
    same_shape("thread/export", &a, &b["state"]);

    c.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

/// `db init --json` says which database and schema version; no service method creates one.
#[test]
fn db_init_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["db", "init", "--json", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["db"], db.to_str().unwrap());
    assert_eq!(v["schema_version"], baton::store::SCHEMA_VERSION);
}

/// `--no-trace` needs `--json`: it says what the JSON leaves out.
#[test]
fn no_trace_without_json_is_bad_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .current_dir(ROOT)
        .args([
            "explain",
            "--state",
            "examples/seed-switch.yaml",
            "--no-trace",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--json"), "{err}");
}

/// The deprecated camelCase params still work, and give the same result as the snake_case
/// ones.
#[test]
fn the_deprecated_camel_case_params_are_still_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stdio(dir.path(), &[]);
    let text = std::fs::read_to_string(format!("{ROOT}/examples/seed-switch.yaml")).unwrap();
    let old = s.client.result("explain", json!({"stateText": text}));
    let new = s.client.result("explain", json!({"state_text": text}));
    assert_eq!(old, new);
    let both = s
        .client
        .call("explain", json!({"stateText": text, "state_text": text}));
    assert_eq!(both["error"]["code"], -32602, "{both}");
    s.client.notify("exit", json!({}));
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}
