//! What the service tells the app after a rollback (per provider thread) and at a native
//! fork's first dispatch (the fork point), in the same snake_case fields as the CLI's `--json`; on both backends.

use crate::serve_support;

use crate::common::backend::{Backend, TestDb};
use serde_json::{json, Value};
use serve_support::*;

#[rstest_reuse::apply(crate::common::backend::backends)]
fn rollback_advice_and_fork_point_over_the_service(#[case] backend: Backend) {
    let db = TestDb::new(backend);
    let mut s = stdio_on(&db, &[]);
    let state = example_state("seed-switch.yaml");
    s.client.result("thread/import", json!({"state": state}));
    // The fork first, while C1 is active: its first run forks C1 natively after turn 5.
    s.client
        .result("fork", json!({"thread": "th_1", "at": 5, "child": "kid"}));
    let d = s
        .client
        .result("dispatch", json!({"thread": "kid", "target": "codex"}));
    assert_eq!(d["strategy"], "native_fork");
    assert_eq!(
        d["fork_point"],
        json!({"parent_thread": "th_1", "provider_thread": "C1", "run": 5, "turn": 5})
    );
    let d = s
        .client
        .result("dispatch", json!({"thread": "th_1", "target": "codex"}));
    assert_eq!(d["fork_point"], Value::Null);
    s.client.result(
        "completeRun",
        json!({"thread": "th_1", "run": 9, "items": [{"kind": "assistant_message", "text": "Done."}]}),
    );
    let r = s
        .client
        .result("rollback", json!({"thread": "th_1", "to": 7}));
    assert_eq!(
        r["provider_threads"],
        json!([
            {"id": "C1", "provider": "codex", "status": "divergent", "runs_undone": [9],
             "turns_kept": 5, "app_action": "discard",
             "next_run": {"run": 10, "strategy": "full_new",
                          "provider_thread": {"action": "create", "id": null},
                          "stale": ["diverged"], "because": "the old thread is stale"}},
            {"id": "L1", "provider": "claude", "status": "rolled_back", "runs_undone": [8],
             "turns_kept": 2, "app_action": "discard",
             "next_run": {"run": 10, "strategy": "full_new",
                          "provider_thread": {"action": "create", "id": null},
                          "stale": ["diverged"], "because": "the old thread is stale"}}
        ])
    );
    assert_eq!(s.stop(), 0);
}
