//! A garbage-collection pass that runs while a dispatch is between writing its off-band
//! document and committing its handoff row must keep that document: the next provider is
//! about to read it. The pass reads liveness under the store's write lock
//! (`Store::collect_documents`), so it waits for the dispatch or, past its busy timeout,
//! keeps what it cannot judge. Before, the pass asked the store without the lock, saw no
//! handoff row, and removed the document as belonging to an unknown handoff.
//!
//! The store's fault hook stops the dispatch at `dispatch:after_handoff` (document written,
//! transaction open) and runs the pass there, on a second connection. The hook is global to
//! this test binary, so the binary holds this one test.

use baton::state;
use baton::store::{self, DispatchRequest, Store};
use baton::store::{GcReport, OffbandStore, Retention};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};
mod common;

/// The database and the document root the hook's pass uses.
static PLACES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
/// The report of the pass run inside the dispatch.
static DURING: Mutex<Option<GcReport>> = Mutex::new(None);

fn pass(db: &Path, root: &Path, busy: Duration) -> GcReport {
    let mut other = Store::open_with_busy_timeout(db, busy).unwrap();
    other
        .collect_documents(
            &OffbandStore::new(Some(root.to_path_buf())),
            &Retention::default(),
            SystemTime::now(),
            false,
        )
        .unwrap()
}

fn hook(step: &str) {
    if step == "dispatch:after_handoff" {
        if let Some((db, root)) = PLACES.get() {
            let report = pass(db, root, Duration::from_millis(100));
            *DURING.lock().unwrap() = Some(report);
        }
    }
}

#[test]
fn a_pass_during_a_dispatch_keeps_the_document_being_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let root = dir.path().join("docs");
    let seed = state::load_file(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"),
    )
    .unwrap();
    let mut store = Store::open(&db).unwrap();
    store.import(&seed).unwrap();
    // An orphan the pass may remove: its thread is not in the store.
    let orphan = OffbandStore::new(Some(root.clone()))
        .write("ghost", "H1", &[("handoff.md", b"# an old handoff\n")])
        .unwrap();
    PLACES.set((db.clone(), root.clone())).unwrap();
    store::set_fault_hook(hook);

    let p = common::policy("default").unwrap();
    let req = DispatchRequest {
        thread: seed.thread.id.clone(),
        target: "codex".into(),
        ..Default::default()
    };
    let d = store::dispatch(&mut store, &engine(&p, &root), &req).unwrap();
    let doc = d
        .handoff
        .expect("a handoff")
        .document_path
        .expect("off-band");

    let during = DURING.lock().unwrap().take().expect("the hook ran a pass");
    assert!(
        during.removed.is_empty(),
        "nothing is removed while a delivery is in progress: {during:?}"
    );
    assert!(
        during
            .warnings
            .iter()
            .any(|w| w.contains("busy") || w.contains("locked")),
        "the pass says why it kept what it could not judge: {:?}",
        during.warnings
    );
    assert!(doc.is_file(), "the dispatch's document survived the pass");

    // Once the dispatch has committed, a pass removes the orphan and keeps the live document.
    let after = pass(&db, &root, Duration::from_secs(5));
    assert!(after.warnings.is_empty(), "{:?}", after.warnings);
    assert_eq!(after.removed, vec![orphan.parent().unwrap().to_path_buf()]);
    assert!(doc.is_file());
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
