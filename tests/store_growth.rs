//! How much a database file grows per turn (issue 14: "database growth per dispatch + complete
//! turn <= 2 KB + content"). A thread alternates between two providers for 200 turns, each a
//! `dispatch` and a `complete_run` with four items of known size, on a file database; the bytes
//! SQLite uses (its pages in use, per table and index from the `dbstat` virtual table) are
//! read at turn 50 and at turn 200, and the growth per turn is compared with the content the
//! turns carried.
//!
//! **Content** is the text a turn carries that the store must keep: the bytes of the run's
//! items' `text`, `output` and `diff` fields, of the request's `message`, and of the handoff
//! document the dispatch delivered (`handoffs.document`, the rendered copy of the covered runs'
//! items, kept because it is what was delivered), counted as text, before the store packs the
//! document. Everything else (the run, the items' JSON around their text, the handoff's other
//! columns, the transfer, the grant, the decision log, the indexes, the slack in SQLite's
//! pages) is **overhead**: the growth less the items' content, the message and the document as
//! kept (packed). The test asserts issue 14's goal as stated (growth <= content + 2 KB), which
//! holds because the document is kept packed, and guards the overhead alone, which is above
//! 2 KB; docs/store.md ("How much a turn adds") gives both.
//!
//! `cargo test --test store store_growth -- --nocapture` prints the breakdown.
//!
//! The bytes are SQLite's pages, so the measure is SQLite's only; what the compact log gives
//! back (every decision as it was made, every one replaying) is checked on both backends.

use crate::common;
use crate::common::backend::{Backend, TestDb};
use baton::state::{self, FileChangeKind, Item, RunStatus};
use baton::store::{self, DispatchRequest, Store};
use std::collections::BTreeMap;
use std::io::Read;

const TURNS: u32 = 200;
const FROM: u32 = 50;
/// Issue 14's goal: a turn grows the database by at most its content plus 2 KB. Content is
/// counted as the text it is (the handoff document's bytes before the store packs it).
const GOAL: i64 = 2048;
/// The overhead a turn may add beyond its content as the store keeps it (the packed document):
/// what holds today (2,714 B, see docs/store.md#how-much-a-turn-adds) is guarded here so that
/// it does not grow; 2 KB, the goal's figure, does not hold for the overhead alone.
const BUDGET: i64 = 2816;
/// What the decision log (its rows, chunks, trace texts and index) may add per turn.
const LOG_BUDGET: i64 = 1024;

/// A string of `n` bytes that does not compress to nothing (prose-like, varied by `seed`).
fn text(seed: u32, n: usize) -> String {
    let words = [
        "the", "handler", "callback", "route", "test", "session", "token", "refresh", "store",
        "config", "parse", "error", "retry", "cache", "query", "index",
    ];
    let mut out = String::with_capacity(n + 12);
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push_str(words[(x % 16) as usize]);
        out.push(' ');
    }
    out.truncate(n);
    out
}

/// A turn's items: a user message, an assistant message, a command with output, a file change
/// with its diff. Returns them with their content's size.
fn items(run: u32) -> (Vec<Item>, usize) {
    let user = text(run, 200);
    let assistant = text(run + 7_000, 500);
    let output = text(run + 13_000, 300);
    let diff = text(run + 21_000, 400);
    let size = user.len() + assistant.len() + output.len() + diff.len();
    let items = vec![
        Item::UserMessage {
            id: None,
            text: user,
        },
        Item::AssistantMessage {
            id: None,
            text: assistant,
        },
        Item::Command {
            id: None,
            command: "cargo test".into(),
            exit_code: Some(0),
            output: Some(output),
        },
        Item::FileChange {
            id: None,
            path: format!("src/mod_{}.rs", run % 17),
            change: Some(FileChangeKind::Modified),
            diff_lines: Some(12),
            diff: Some(diff),
        },
    ];
    (items, size)
}

/// The bytes of pages in use, per table or index (`dbstat`), and in all
/// (`(page_count - freelist_count) * page_size`).
fn used(store: &Store) -> (i64, BTreeMap<String, i64>) {
    let c = store.connection();
    let pragma = |p: &str| -> i64 {
        c.query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
            .unwrap()
    };
    let total = (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
    let mut st = c
        .prepare("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        .unwrap();
    let per = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
        .collect::<Result<BTreeMap<_, _>, _>>()
        .unwrap();
    (total, per)
}

/// A column's text, kept plain (TEXT) or packed (a deflated BLOB).
fn unpacked(v: rusqlite::types::Value) -> String {
    match v {
        rusqlite::types::Value::Text(t) => t,
        rusqlite::types::Value::Blob(b) => {
            let mut out = String::new();
            flate2::read::DeflateDecoder::new(&b[..])
                .read_to_string(&mut out)
                .unwrap();
            out
        }
        other => panic!("{other:?}"),
    }
}

/// The handoff documents of `thread`: the bytes of their text, and the bytes the store keeps
/// of them (packed).
fn documents(store: &Store, thread: &str) -> (i64, i64) {
    let c = store.connection();
    let mut st = c
        .prepare("SELECT document FROM handoffs WHERE thread = ?1 AND document IS NOT NULL")
        .unwrap();
    let rows = st
        .query_map([thread], |r| r.get::<_, rusqlite::types::Value>(0))
        .unwrap();
    let mut text = 0i64;
    let mut kept = 0i64;
    for v in rows {
        let v = v.unwrap();
        kept += match &v {
            rusqlite::types::Value::Text(t) => t.len() as i64,
            rusqlite::types::Value::Blob(b) => b.len() as i64,
            _ => 0,
        };
        text += unpacked(v).len() as i64;
    }
    (text, kept)
}

/// A thread of one run on codex, asking for claude.
const GROWTH_THREAD: &str = "version: 1\nthread: {id: th_growth, title: Growth}\nprovider_threads:\n  - {id: C1, provider: codex, status: active}\nruns:\n  - ordinal: 1\n    provider: codex\n    provider_thread: C1\n    items:\n      - {kind: user_message, text: \"Start.\"}\nrequest: {provider: claude}\n";

/// The compact decision log (a delta on the thread's previous decision, chunks shared between
/// inputs) gives every decision back as the dispatch returned it, on either backend, and
/// every one replays.
#[rstest_reuse::apply(crate::common::backend::backends)]
fn the_compact_log_gives_every_decision_back(#[case] backend: Backend) {
    const N: u32 = 40;
    let t = TestDb::new(backend);
    let mut db = t.open();
    db.import(&state::parse_str(GROWTH_THREAD, state::Format::Yaml, "growth.yaml").unwrap())
        .unwrap();
    let e = baton::Engine::builder("default")
        .document_root(Some(t.docs()))
        .build()
        .unwrap();
    let mut made = Vec::new();
    for turn in 1..=N {
        let req = DispatchRequest {
            thread: "th_growth".into(),
            target: (if turn % 2 == 1 { "claude" } else { "codex" }).into(),
            message: Some(text(turn + 40_000, 100)),
            ..Default::default()
        };
        let d = db.dispatch(&e, &req).unwrap();
        let (its, _) = items(d.run);
        db.complete_run("th_growth", d.run, its, RunStatus::Completed)
            .unwrap();
        made.push(serde_json::to_value(&d.decision).unwrap());
    }
    let logged: Vec<serde_json::Value> = db
        .logged_decisions(None, false)
        .unwrap()
        .into_iter()
        .map(|l| l.decision)
        .collect();
    assert_eq!(logged.len(), made.len());
    for (i, (l, m)) in logged.iter().zip(&made).enumerate() {
        assert_eq!(l, m, "decision {}", i + 1);
    }
    let report = db.replay(&store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (N as usize, 0),
        "{:?}",
        report.differences.first()
    );
}

// SQLite only: the measure is SQLite's pages in use (`dbstat`).
#[test]
fn a_turn_adds_little_beyond_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let mut store = Store::open(&dir.path().join("growth.db")).unwrap();
    store
        .import(&state::parse_str(GROWTH_THREAD, state::Format::Yaml, "growth.yaml").unwrap())
        .unwrap();
    let p = common::policy("default").unwrap();
    let mut content = 0i64;
    let mut at_from = None;
    let mut last = None;
    for turn in 1..=TURNS {
        let target = if turn % 2 == 1 { "claude" } else { "codex" };
        let message = text(turn + 40_000, 100);
        let req = DispatchRequest {
            thread: "th_growth".into(),
            target: target.into(),
            message: Some(message.clone()),
            ..Default::default()
        };
        let d = store::dispatch(&mut store, &engine(&p, &docs), &req).unwrap();
        assert!(d.started && d.handoff.is_some(), "turn {turn}: {d:?}");
        let (its, size) = items(d.run);
        store::complete_run(&mut store, "th_growth", d.run, its, RunStatus::Completed).unwrap();
        if turn > FROM {
            content += i64::try_from(size + message.len()).unwrap();
        }
        last = Some(d.decision);
        if turn == FROM {
            at_from = Some((used(&store), documents(&store, "th_growth")));
        }
    }
    if let Some(keep) = std::env::var_os("BATON_GROWTH_DB") {
        store
            .connection()
            .execute("VACUUM INTO ?1", [keep.to_string_lossy()])
            .unwrap();
    }
    let ((total0, per0), (docs0, kept0)) = at_from.unwrap();
    let (total1, per1) = used(&store);
    let turns = i64::from(TURNS - FROM);
    let (docs1, kept1) = documents(&store, "th_growth");
    let document = (docs1 - docs0) / turns;
    let kept = (kept1 - kept0) / turns;
    let growth = (total1 - total0) / turns;
    let content = content / turns;
    // The overhead: what the store adds beyond the content it keeps (the documents as kept,
    // packed), i.e. every other row, column, index and page's slack.
    let overhead = growth - content - kept;
    eprintln!(
        "per turn, turns {FROM}-{TURNS}: growth {growth} B; content {} B (items + message {content} B, handoff document {document} B, kept packed in {kept} B); overhead beyond the content as kept {overhead} B",
        content + document
    );
    eprintln!(
        "  goal: growth {growth} B <= content + 2 KB = {} B: {}; overhead alone {overhead} B <= 2048 B: {}",
        content + document + GOAL,
        growth <= content + document + GOAL,
        overhead <= GOAL
    );
    for (name, bytes) in &per1 {
        let d = bytes - per0.get(name).copied().unwrap_or(0);
        if d != 0 {
            eprintln!("  {name:<28} {:>6} B/turn", d / turns);
        }
    }
    let log: i64 = per1
        .iter()
        .filter(|(name, _)| name.starts_with("decision_"))
        .map(|(name, bytes)| bytes - per0.get(name).copied().unwrap_or(0))
        .sum::<i64>()
        / turns;
    eprintln!("  the decision log in all        {log:>6} B/turn");
    assert!(log <= LOG_BUDGET, "the decision log adds {log} B a turn");
    assert!(
        growth <= content + document + GOAL,
        "a turn grows the database by {growth} B, more than its content ({} B) + 2 KB",
        content + document
    );
    assert!(
        overhead <= BUDGET,
        "a turn adds {overhead} B beyond its content (growth {growth} B per turn)"
    );
    // The compact log gives every decision back as it was made.
    let id: i64 = store
        .connection()
        .query_row("SELECT MAX(id) FROM decision_log", [], |r| r.get(0))
        .unwrap();
    let deltas = {
        let c = store.connection();
        let mut st = c.prepare("SELECT decision FROM decision_log").unwrap();
        let rows = st
            .query_map([], |r| r.get::<_, rusqlite::types::Value>(0))
            .unwrap();
        rows.filter(|v| unpacked(v.as_ref().unwrap().clone()).contains("\"~base\""))
            .count()
    };
    assert!(deltas > 150, "{deltas} of {TURNS} decisions are deltas");
    assert_eq!(
        store.logged_decision(id).unwrap(),
        serde_json::to_value(last.unwrap()).unwrap()
    );
    let report = store::replay(&store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (TURNS as usize, 0),
        "{:?}",
        report.differences.first()
    );
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
