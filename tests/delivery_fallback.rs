//! An off-band delivery that fell back to inline records the fact: the library's message (which
//! names no command) as `delivery.fallback_reason` and its kind as `delivery.fallback_kind`; the
//! `baton` command adds the advice by kind ("run `baton gc`" for a full disk). A decision logged
//! before baton recorded the kind, its reason carrying the advice, still replays with no
//! difference (tests/fixtures/deliver/disk-full-logged-before-fallback-kind.json).

use crate::common;
use crate::privilege::{require, Mount};
use baton::decision::{Delivery, DeliveryMode, FallbackKind};
use baton::state;
use baton::store::{self, DispatchRequest, Store};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const STATE: &str = "examples/seed-switch.yaml";
const OLD: &str = "tests/fixtures/deliver/disk-full-logged-before-fallback-kind.json";

fn baton(args: &[&str], docs: Option<&Path>) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    c.args(args).env_remove("BATON_DB");
    match docs {
        Some(d) => c.env("BATON_HANDOFF_DIR", d),
        None => c.env_remove("BATON_HANDOFF_DIR"),
    };
    c.output().unwrap()
}

#[test]
fn a_delivery_logged_before_fallback_kind_still_parses() {
    let text = std::fs::read_to_string(root().join(OLD)).unwrap();
    let d: Delivery = serde_json::from_str(&text).unwrap();
    assert_eq!(d.mode, DeliveryMode::Inline);
    assert_eq!(d.fallback_kind, None);
    // Written back, it has no `fallback_kind` either: the JSON is what was logged.
    let again = serde_json::to_value(&d).unwrap();
    let old: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(again, old);
}

#[test]
fn a_disk_full_fallback_logged_before_fallback_kind_replays_with_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    // The handoff root below a regular file: the off-band write fails, delivery falls back.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let docs = file.join("docs");
    let db = dir.path().join("b.db");
    let mut s = Store::open(&db).unwrap();
    s.import(&state::load_file(&root().join(STATE)).unwrap())
        .unwrap();
    let p = common::policy("default").unwrap();
    let engine = common::engine_of(&p, Some(docs.clone()));
    let r = DispatchRequest {
        thread: "th_1".into(),
        target: "codex".into(),
        ..Default::default()
    };
    let d = store::dispatch(&mut s, &engine, &r).unwrap();
    let delivery = d.decision.delivery.clone().unwrap();
    assert_eq!(delivery.mode, DeliveryMode::Inline);
    assert_eq!(delivery.fallback_kind, Some(FallbackKind::Io));
    let f = db.to_str().unwrap();
    let o = baton(&["replay", "--db", f], None);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1 replayed, 0 differ, 0 skipped\n"
    );
    // The delivery as a baton before `fallback_kind` logged a full disk: the advice in the
    // reason, no kind.
    let old = std::fs::read_to_string(root().join(OLD)).unwrap();
    s.connection()
        .execute(
            "UPDATE decision_log SET decision = json_set(decision, '$.delivery', json(?1))",
            [&old],
        )
        .unwrap();
    let logged = s.logged_decision(1).unwrap();
    assert_eq!(logged["delivery"].get("fallback_kind"), None);
    assert!(logged["delivery"]["fallback_reason"]
        .as_str()
        .unwrap()
        .ends_with("; free some space or run `baton gc`"));
    let o = baton(&["replay", "--db", f], None);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1 replayed, 0 differ, 0 skipped\n"
    );
}

#[test]
fn dispatch_on_a_full_disk_records_the_fact_and_the_command_says_baton_gc() {
    let Some(m) = require(
        "dispatch_on_a_full_disk_records_the_fact_and_the_command_says_baton_gc",
        Mount::tmpfs("size=64k,mode=0700"),
    ) else {
        return;
    };
    // Fill the filesystem; the write that hits ENOSPC is expected to fail.
    let _ = std::fs::write(m.dir.join("filler"), vec![b'x'; 256 * 1024]);
    let docs = m.dir.join("docs");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let f = db.to_str().unwrap();
    let state = root().join(STATE);
    let o = baton(&["db", "import", "--db", f, state.to_str().unwrap()], None);
    assert!(o.status.success(), "{o:?}");
    let o = baton(
        &[
            "dispatch", "--db", f, "--thread", "th_1", "--target", "codex", "--json",
        ],
        Some(&docs),
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let reason = json["delivery"]["fallback_reason"].as_str().unwrap();
    // The recorded fact: the path and the error, no command.
    assert!(
        reason.starts_with(&format!("cannot write {}", docs.display()))
            && reason.ends_with(": disk full (No space left on device (os error 28))"),
        "{reason}"
    );
    assert_eq!(json["delivery"]["fallback_kind"], "disk_full");
    // What the user reads: the fact, then the command that helps.
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        format!(
            "warning: off-band delivery failed, so the handoff is delivered inline: {reason}; free some space or run `baton gc`"
        )
    );
    // The same fact replays with no difference.
    let o = baton(&["replay", "--db", f], None);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1 replayed, 0 differ, 0 skipped\n"
    );
}
