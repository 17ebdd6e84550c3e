//! A dispatch, a regeneration and a merge-back run the policy's external summarizer before they
//! take the store's write lock: other threads go on while it runs (through the library and
//! through the CLI, a separate process on the same database), and a change to the summarized
//! thread (for a merge-back, the fork or its parent) meanwhile is detected before anything is
//! recorded. The summarizer here waits for marker files the test creates,
//! so every step is ordered by events, not by timing.

use baton::state::{self, HandoffStatus, RunStatus, TransferType};
use baton::store::{
    self, DispatchRequest, Dispatched, HandoffOptions, Store, StoreError, StoreErrorKind,
};
use baton::Policy;
use std::path::PathBuf;
use std::time::Duration;

use crate::common;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A database holding the seed example twice, as threads `A` and `B`, and a policy extending
/// `default` whose summarizer, on its n-th call, creates `started.n` in the directory and
/// waits for `go.n` (or gives up when the directory is gone: a failed test leaves no process).
struct Fixture {
    dir: tempfile::TempDir,
    db: PathBuf,
    gated: std::sync::Arc<Policy>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("baton.db");
        let mut store = Store::open(&db).unwrap();
        let seed = state::load_file(&root().join("examples/seed-switch.yaml")).unwrap();
        for id in ["A", "B"] {
            let mut s = seed.clone();
            s.thread.id = id.to_string();
            store.import(&s).unwrap();
        }
        let script = crate::common::gated_summarizer(dir.path());
        let policy = dir.path().join("gated.policy");
        std::fs::write(
            &policy,
            format!(
                "policy \"gated\" {{\n  extends \"default\"\n}}\n\nsummary {{\n  include user_message into goals\n  source command \"{}\" timeout_ms 600000\n}}\n",
                script.display()
            ),
        )
        .unwrap();
        let gated = common::policy(policy.to_str().unwrap()).expect("policy checks");
        Fixture { dir, db, gated }
    }

    fn docs(&self) -> PathBuf {
        self.dir.path().join("docs")
    }

    fn request(&self, thread: &str) -> DispatchRequest {
        DispatchRequest {
            thread: thread.into(),
            target: "codex".into(),
            ..Default::default()
        }
    }

    /// Dispatch thread `A` under the gated policy on a thread of its own.
    fn dispatch_a_in_background(&self) -> std::thread::JoinHandle<Result<Dispatched, StoreError>> {
        let req = self.request("A");
        self.in_background(move |store, engine| store::dispatch(store, engine, &req))
    }

    /// Regenerate handoff `handoff` of thread `A` under the gated policy on a thread of its own.
    fn regenerate_a_in_background(
        &self,
        handoff: &str,
    ) -> std::thread::JoinHandle<Result<Dispatched, StoreError>> {
        let (handoff, opts) = (handoff.to_string(), self.handoff_options());
        self.in_background(move |store, engine| {
            store::regenerate(store, engine, "A", &handoff, &opts)
        })
    }

    /// Merge fork `F` back into `A` under the gated policy on a thread of its own.
    fn merge_back_in_background(&self) -> std::thread::JoinHandle<Result<Dispatched, StoreError>> {
        let opts = self.handoff_options();
        self.in_background(move |store, engine| store::merge_back(store, engine, "F", &opts))
    }

    /// Run `op` with the gated policy and a connection of its own, on a thread of its own.
    fn in_background(
        &self,
        op: impl FnOnce(&mut Store, &baton::Engine) -> Result<Dispatched, StoreError> + Send + 'static,
    ) -> std::thread::JoinHandle<Result<Dispatched, StoreError>> {
        let db = self.db.clone();
        let engine = self.engine(&self.gated);
        std::thread::spawn(move || {
            let mut store = Store::open(&db).unwrap();
            op(&mut store, &engine)
        })
    }

    fn handoff_options(&self) -> HandoffOptions {
        HandoffOptions::default()
    }

    /// The engine the store's operations take: `policy`, the embedded templates, documents
    /// under `docs`.
    fn engine(&self, policy: &Policy) -> baton::Engine {
        baton::Engine::from_parts(
            std::sync::Arc::new(policy.clone()),
            baton::TemplateSet::embedded(),
            Some(self.docs()),
        )
        .unwrap()
    }

    /// Dispatch `A` to codex under `default` (no summarizer): run 9 runs, with a handoff to
    /// regenerate, whose id is returned.
    fn running_a(&self, store: &mut Store) -> String {
        let default = common::policy("default").unwrap();
        let d = store::dispatch(store, &self.engine(&default), &self.request("A")).unwrap();
        assert_eq!(d.run, 9);
        d.handoff.expect("a handoff to codex").id
    }

    /// Fork `A` at run 8 as `F` and play a turn on `F` (under `default`): a fork with a run of
    /// its own to merge back.
    fn fork_with_a_run(&self, store: &mut Store) {
        store::fork(store, "A", 8, Some("F")).unwrap();
        assert_eq!(self.turn(store, "F"), 9);
    }

    /// Merge `F` back into `A` under `default` (no summarizer): a change to `A`.
    fn merge_back_at_once(&self, store: &mut Store) -> Dispatched {
        let default = common::policy("default").unwrap();
        store::merge_back(store, &self.engine(&default), "F", &self.handoff_options()).unwrap()
    }

    /// Thread `B` plays a turn through the library (dispatch and completion, run 9) and a
    /// dispatch and completion through the CLI (run 10), while a summarizer on another thread
    /// waits.
    fn b_plays_two_turns(&self, store: &mut Store) {
        store.set_busy_timeout(Duration::from_millis(100)).unwrap();
        assert_eq!(self.turn(store, "B"), 9);
        // Thread B, through the CLI (another process on the same database).
        let out = self.baton(&["dispatch", "--thread", "B", "--target", "codex", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["recorded"]["run"], 10);
        let items = self.dir.path().join("items.json");
        std::fs::write(&items, "[]").unwrap();
        let items = items.to_str().unwrap();
        let out = self.baton(&["complete", "--thread", "B", "--run", "10", "--items", items]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The document of `d`'s handoff.
    fn document(d: &Dispatched) -> String {
        let h = d.handoff.as_ref().expect("a handoff");
        std::fs::read_to_string(h.document_path.as_ref().expect("an off-band document")).unwrap()
    }

    /// Wait until the summarizer's n-th call has started (an event: the file it creates).
    fn started(&self, n: u32) {
        let f = self.dir.path().join(format!("started.{n}"));
        // A hang guard only (ten minutes, not a budget): a broken summarizer fails the test
        // instead of hanging it; a loaded machine only makes the file come later.
        let polling = std::time::Instant::now();
        while polling.elapsed() < Duration::from_secs(600) {
            if f.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the summarizer's call {n} never started");
    }

    /// Let the summarizer's n-th call finish.
    fn go(&self, n: u32) {
        std::fs::write(self.dir.path().join(format!("go.{n}")), "").unwrap();
    }

    /// Dispatch `thread` to claude under `default` (no summarizer) and complete its run: a
    /// codex dispatch after it still makes a handoff (with the summarizer).
    fn turn(&self, store: &mut Store, thread: &str) -> u32 {
        let default = common::policy("default").unwrap();
        let req = DispatchRequest {
            target: "claude".into(),
            ..self.request(thread)
        };
        let d = store::dispatch(store, &self.engine(&default), &req).unwrap();
        assert!(d.started);
        store::complete_run(store, thread, d.run, Vec::new(), RunStatus::Completed).unwrap();
        d.run
    }

    fn baton(&self, args: &[&str]) -> std::process::Output {
        common::baton_cmd()
            .env("BATON_HANDOFF_DIR", self.docs())
            .env("BATON_DB", &self.db)
            .env("BATON_BUSY_TIMEOUT_MS", "100")
            .env_remove("BATON_FAULT")
            .args(args)
            .output()
            .unwrap()
    }
}

#[test]
fn other_threads_dispatch_and_complete_while_a_summarizer_runs() {
    let fx = Fixture::new();
    let a = fx.dispatch_a_in_background();
    fx.started(1);
    // Thread B, through the library and the CLI: dispatches and completions while A's
    // summarizer runs.
    let mut store = Store::open(&fx.db).unwrap();
    fx.b_plays_two_turns(&mut store);
    // A's summarizer still runs: nothing of A is recorded yet.
    assert_eq!(store.load("A").unwrap().runs.len(), 8);
    fx.go(1);
    let d = a.join().unwrap().expect("A's dispatch records");
    assert_eq!(d.run, 9);
    let h = d.handoff.expect("a handoff");
    let doc = std::fs::read_to_string(h.document_path.unwrap()).unwrap();
    assert!(
        doc.contains("Written by the gated summarizer, call 1."),
        "{doc}"
    );
    let a = store.load("A").unwrap();
    assert_eq!(a.runs.len(), 9);
    assert_eq!(a.runs[8].status, RunStatus::Running);
    assert!(!fx.dir.path().join("started.2").exists());
}

#[test]
fn a_thread_that_moved_once_under_its_summarizer_is_decided_again() {
    let fx = Fixture::new();
    let a = fx.dispatch_a_in_background();
    fx.started(1);
    // Another writer plays a turn on A while A's summarizer runs.
    let mut store = Store::open(&fx.db).unwrap();
    assert_eq!(fx.turn(&mut store, "A"), 9);
    fx.go(1);
    // The dispatch sees the change, decides again and runs the summarizer once more.
    fx.started(2);
    fx.go(2);
    let d = a.join().unwrap().expect("the second try records");
    assert_eq!(d.run, 10);
    let h = d.handoff.expect("a handoff");
    let doc = std::fs::read_to_string(h.document_path.unwrap()).unwrap();
    assert!(doc.contains("call 2."), "{doc}");
    let a = store.load("A").unwrap();
    assert_eq!(a.runs.len(), 10);
    assert_eq!(a.runs[9].status, RunStatus::Running);
}

#[test]
fn a_thread_that_moved_twice_under_its_summarizer_is_refused_with_what_changed() {
    let fx = Fixture::new();
    let a = fx.dispatch_a_in_background();
    let mut store = Store::open(&fx.db).unwrap();
    fx.started(1);
    fx.turn(&mut store, "A");
    fx.go(1);
    fx.started(2);
    fx.turn(&mut store, "A");
    fx.go(2);
    let e = a.join().unwrap().expect_err("moved twice");
    assert!(
        matches!(e.kind(), StoreErrorKind::ThreadMoved { .. }),
        "{e:?}"
    );
    assert_eq!(
        baton::located(&e),
        format!(
            "{}: error: thread \"A\" changed while its summarizer ran (its runs: 9 runs (last: run 9 completed), now 10 runs (last: run 10 completed)), and again after a second try; nothing was recorded: dispatch again when the thread's other writers have finished",
            fx.db.display()
        )
    );
    // Nothing of the refused dispatch was recorded.
    let a = store.load("A").unwrap();
    assert_eq!(a.runs.len(), 10);
    assert_eq!(a.runs[9].status, RunStatus::Completed);
    assert!(!fx.dir.path().join("started.3").exists());
}

#[test]
fn other_threads_dispatch_and_complete_while_a_regeneration_summarizes() {
    let fx = Fixture::new();
    let mut store = Store::open(&fx.db).unwrap();
    let old = fx.running_a(&mut store);
    let a = fx.regenerate_a_in_background(&old);
    fx.started(1);
    fx.b_plays_two_turns(&mut store);
    // A's summarizer still runs: its handoff is not superseded yet.
    let handoff = |s: &state::State, id: &str| s.handoffs.iter().find(|h| h.id == id).cloned();
    let before = store.load("A").unwrap();
    assert_eq!(handoff(&before, &old).unwrap().status, HandoffStatus::Ready);
    fx.go(1);
    let d = a.join().unwrap().expect("A's regeneration records");
    assert!(
        Fixture::document(&d).contains("Written by the gated summarizer, call 1."),
        "{}",
        Fixture::document(&d)
    );
    let h = d.handoff.expect("a handoff");
    assert_eq!(h.supersedes.as_deref(), Some(old.as_str()));
    let after = store.load("A").unwrap();
    assert_eq!(
        handoff(&after, &old).unwrap().status,
        HandoffStatus::Superseded
    );
    assert_eq!(after.runs[8].handoff.as_deref(), Some(h.id.as_str()));
    assert!(!fx.dir.path().join("started.2").exists());
}

#[test]
fn other_threads_dispatch_and_complete_while_a_merge_back_summarizes() {
    let fx = Fixture::new();
    let mut store = Store::open(&fx.db).unwrap();
    fx.fork_with_a_run(&mut store);
    let m = fx.merge_back_in_background();
    fx.started(1);
    fx.b_plays_two_turns(&mut store);
    // F's summarizer still runs: nothing is merged into A yet.
    let merge_backs = |s: &state::State| {
        s.transfers
            .iter()
            .filter(|t| t.kind == TransferType::MergeBack)
            .count()
    };
    assert_eq!(merge_backs(&store.load("A").unwrap()), 0);
    fx.go(1);
    let d = m.join().unwrap().expect("F's merge-back records");
    assert_eq!(d.run, 9);
    assert!(
        Fixture::document(&d).contains("Written by the gated summarizer, call 1."),
        "{}",
        Fixture::document(&d)
    );
    assert_eq!(d.handoff.unwrap().covered_thread.as_deref(), Some("F"));
    assert_eq!(merge_backs(&store.load("A").unwrap()), 1);
    assert!(!fx.dir.path().join("started.2").exists());
}

#[test]
fn a_parent_that_moved_once_under_a_merge_back_summarizer_is_decided_again() {
    let fx = Fixture::new();
    let mut store = Store::open(&fx.db).unwrap();
    fx.fork_with_a_run(&mut store);
    let m = fx.merge_back_in_background();
    fx.started(1);
    // The parent plays a turn while the fork's summarizer runs.
    assert_eq!(fx.turn(&mut store, "A"), 9);
    fx.go(1);
    // The merge-back sees the change, decides again and runs the summarizer once more.
    fx.started(2);
    fx.go(2);
    let d = m.join().unwrap().expect("the second try records");
    assert_eq!(d.run, 10, "for the parent's next run, as it is now");
    assert!(Fixture::document(&d).contains("call 2."));
    let a = store.load("A").unwrap();
    let h = a.handoffs.last().unwrap();
    assert_eq!(h.covered_thread.as_deref(), Some("F"));
    assert_eq!(h.target_run, Some(10));
}

#[test]
fn a_parent_that_moved_twice_under_a_merge_back_summarizer_is_refused_with_what_changed() {
    let fx = Fixture::new();
    let mut store = Store::open(&fx.db).unwrap();
    fx.fork_with_a_run(&mut store);
    let m = fx.merge_back_in_background();
    fx.started(1);
    fx.turn(&mut store, "A");
    fx.go(1);
    fx.started(2);
    fx.turn(&mut store, "A");
    fx.go(2);
    let e = m.join().unwrap().expect_err("moved twice");
    assert!(
        matches!(e.kind(), StoreErrorKind::ThreadMoved { .. }),
        "{e:?}"
    );
    assert_eq!(
        baton::located(&e),
        format!(
            "{}: error: thread \"A\" changed while its summarizer ran (its runs: 9 runs (last: run 9 completed), now 10 runs (last: run 10 completed)), and again after a second try; nothing was recorded: merge back again when the thread's other writers have finished",
            fx.db.display()
        )
    );
    // Nothing of the refused merge-back was recorded.
    let a = store.load("A").unwrap();
    assert_eq!(a.runs.len(), 10);
    assert!(a.handoffs.iter().all(|h| h.covered_thread.is_none()));
    assert!(a
        .transfers
        .iter()
        .all(|t| t.kind != TransferType::MergeBack));
    assert!(!fx.dir.path().join("started.3").exists());
}

#[test]
fn a_regeneration_whose_thread_moved_once_is_decided_again_and_twice_is_refused() {
    let fx = Fixture::new();
    let mut store = Store::open(&fx.db).unwrap();
    fx.fork_with_a_run(&mut store);
    let old = fx.running_a(&mut store);
    // Moved once (a merge-back arrives in A): decided again, recorded.
    let a = fx.regenerate_a_in_background(&old);
    fx.started(1);
    let first = fx.merge_back_at_once(&mut store);
    fx.go(1);
    fx.started(2);
    fx.go(2);
    let d = a.join().unwrap().expect("the second try records");
    assert!(Fixture::document(&d).contains("call 2."));
    let new = d.handoff.expect("a handoff").id;
    assert_ne!(Some(&new), first.handoff.as_ref().map(|h| &h.id));
    // Moved twice (the fork merged back again, then once more): refused.
    let a = fx.regenerate_a_in_background(&new);
    fx.started(3);
    fx.merge_back_at_once(&mut store);
    fx.go(3);
    fx.started(4);
    fx.merge_back_at_once(&mut store);
    let handoffs = store.load("A").unwrap().handoffs.len();
    fx.go(4);
    let e = a.join().unwrap().expect_err("moved twice");
    assert_eq!(
        baton::located(&e),
        format!(
            "{}: error: thread \"A\" changed while its summarizer ran (its handoffs: {}, now {handoffs}), and again after a second try; nothing was recorded: regenerate again when the thread's other writers have finished",
            fx.db.display(),
            handoffs - 1,
        )
    );
    // Nothing of the refused regeneration was recorded: the run keeps its handoff.
    let a = store.load("A").unwrap();
    assert_eq!(a.handoffs.len(), handoffs);
    assert_eq!(a.runs[8].handoff.as_deref(), Some(new.as_str()));
    let h = a.handoffs.iter().find(|h| h.id == new).unwrap();
    assert_eq!(h.status, HandoffStatus::Ready);
    assert!(!fx.dir.path().join("started.5").exists());
}
