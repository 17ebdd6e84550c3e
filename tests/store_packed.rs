//! The store keeps what it only reads back whole packed (deflated BLOBs: the handoff's document,
//! prompt and long provider-thread list, the decision log's chunks and delta rows). A database
//! whose rows are plain TEXT, as earlier versions wrote them, reads the same: the same export,
//! the same logged decisions, the same replay.
//!
//! SQLite only: the packed columns and the plain TEXT rows of earlier versions are SQLite's
//! own (PostgreSQL keeps its columns as BYTEA from its first schema).

use crate::common;
use baton::state::{self, Item, RunStatus};
use baton::store::{self, DispatchRequest, Store};
use rusqlite::types::Value;
use std::io::Read;

fn turns(store: &mut Store, docs: &std::path::Path, n: u32) {
    let p = common::policy("default").unwrap();
    for turn in 1..=n {
        let target = if turn % 2 == 1 { "claude" } else { "codex" };
        let req = DispatchRequest {
            thread: "th_p".into(),
            target: target.into(),
            message: Some(format!("turn {turn}: fix the parser")),
            ..Default::default()
        };
        let d = store::dispatch(store, &engine(&p, docs), &req).unwrap();
        let items = vec![Item::AssistantMessage {
            id: None,
            text: format!("done with turn {turn}"),
        }];
        store::complete_run(store, "th_p", d.run, items, RunStatus::Completed).unwrap();
    }
}

/// Every packed value of `table.column` rewritten as the TEXT it holds; how many there were.
fn unpack_all(store: &Store, table: &str, key: &str, column: &str) -> usize {
    let c = store.connection();
    let rows: Vec<(Value, Vec<u8>)> = c
        .prepare(&format!(
            "SELECT {key}, {column} FROM {table} WHERE typeof({column}) = 'blob'"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (k, blob) in &rows {
        let mut text = String::new();
        flate2::read::DeflateDecoder::new(&blob[..])
            .read_to_string(&mut text)
            .unwrap();
        c.execute(
            &format!("UPDATE {table} SET {column} = ?2 WHERE {key} = ?1"),
            rusqlite::params![k, text],
        )
        .unwrap();
    }
    rows.len()
}

#[test]
fn rows_kept_plain_by_an_earlier_version_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut store = Store::open(&dir.path().join("p.db")).unwrap();
    let yaml = "version: 1\nthread: {id: th_p, title: Packed}\nprovider_threads:\n  - {id: C1, provider: codex, status: active}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {kind: user_message, text: \"Start.\"}\nrequest: {provider: claude}\n";
    store
        .import(&state::parse_str(yaml, state::Format::Yaml, "p.yaml").unwrap())
        .unwrap();
    turns(&mut store, &docs, 24);
    let ids: Vec<i64> = store
        .connection()
        .prepare("SELECT id FROM decision_log ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let decisions: Vec<_> = ids
        .iter()
        .map(|id| store.logged_decision(*id).unwrap())
        .collect();
    let exported = store.export("th_p").unwrap();

    // As an earlier version wrote them: every packed value plain.
    store
        .connection()
        .execute_batch("DROP TRIGGER handoffs_change_only_status")
        .unwrap();
    let plain = [
        ("handoffs", "rowid", "document"),
        ("handoffs", "rowid", "inline_prompt"),
        ("handoffs", "rowid", "from_provider_threads"),
        ("decision_log", "id", "decision"),
        ("decision_chunks", "sha", "body"),
    ]
    .map(|(t, k, c)| unpack_all(&store, t, k, c));
    // (Short provider-thread lists are kept as text anyway; tests/store_growth.rs reads long,
    // packed ones back on every dispatch.)
    assert!(
        [plain[0], plain[1], plain[3], plain[4]]
            .iter()
            .all(|n| *n > 0),
        "packed values: {plain:?}"
    );

    assert_eq!(store.export("th_p").unwrap(), exported);
    let again: Vec<_> = ids
        .iter()
        .map(|id| store.logged_decision(*id).unwrap())
        .collect();
    assert_eq!(again, decisions);
    let report = store::replay(&store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!((report.checked, report.differences.len()), (24, 0));
    // And the thread goes on, on top of the plain rows.
    turns(&mut store, &docs, 2);
    let report = store::replay(&store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!((report.checked, report.differences.len()), (26, 0));
}

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &baton::Policy, docs: &std::path::Path) -> baton::Engine {
    baton::Engine::from_parts(
        std::sync::Arc::new(p.clone()),
        baton::TemplateSet::embedded(),
        Some(docs.to_path_buf()),
    )
    .unwrap()
}
