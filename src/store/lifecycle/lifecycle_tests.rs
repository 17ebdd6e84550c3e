//! Regression tests for the lifecycle bugs of issue 12 (and issue 15 item 8): forks, merge-backs,
//! rollbacks and grant lifetime through the store's library API. Each test failed on the code
//! before its fix. `BATON_LIFECYCLE_DB=FILE` keeps the database of the replay test, which CI
//! hands to `baton replay`.

use baton::deliver::GrantStore;
use baton::policy::{self, Policy};
use baton::state::{self, Caps, Item, RunStatus, State};
use baton::store::{self, DispatchRequest, HandoffOptions, Store};
use rstest::rstest;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn seed() -> State {
    state::load_file(&root().join("examples/seed-switch.yaml")).unwrap()
}

/// The engine a store operation takes: `p`, the embedded templates, documents under `docs`.
fn engine(p: &Policy, docs: &Path) -> baton::Engine {
    baton::Engine::from_parts(
        std::sync::Arc::new(p.clone()),
        baton::TemplateSet::embedded(),
        Some(docs.to_path_buf()),
    )
    .unwrap()
}

struct Db {
    _dir: tempfile::TempDir,
    docs: PathBuf,
    store: Store,
}

impl Db {
    fn new() -> Db {
        Db::with(seed())
    }

    fn with(state: State) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        let mut store = Store::open(&dir.path().join("b.db")).unwrap();
        store.import(&state).unwrap();
        Db {
            _dir: dir,
            docs,
            store,
        }
    }

    fn req(&self, thread: &str, target: &str, message: Option<&str>) -> DispatchRequest {
        DispatchRequest {
            thread: thread.into(),
            target: target.into(),
            message: message.map(str::to_string),
            ..Default::default()
        }
    }

    fn dispatch(&mut self, p: &Policy, thread: &str, target: &str) -> store::Dispatched {
        let r = self.req(thread, target, None);
        store::dispatch(&mut self.store, &engine(p, &self.docs), &r).unwrap()
    }

    fn complete(&mut self, thread: &str, run: u32, text: &str, status: RunStatus) {
        let items = vec![
            Item::UserMessage {
                id: None,
                text: format!("Run {run}, please."),
            },
            Item::Decision {
                id: None,
                text: text.into(),
            },
        ];
        store::complete_run(&mut self.store, thread, run, items, status).unwrap();
    }

    fn opts(&self) -> HandoffOptions {
        HandoffOptions::default()
    }

    /// Whether the pre-grant of (thread, run) allows reading `doc` now (a use is consumed).
    fn allows(&mut self, thread: &str, run: u32, doc: &Path) -> bool {
        let req = baton::deliver::CheckRequest {
            thread: thread.into(),
            run,
            tool: "Read".into(),
            args: baton::deliver::PathArg::Path(doc.to_path_buf()),
        };
        baton::deliver::check(&mut self.store, &req).unwrap().allow
    }
}

fn no_native_fork(mut s: State, provider: &str) -> State {
    s.providers.insert(
        provider.into(),
        Caps {
            native_fork: Some(false),
            ..Default::default()
        },
    );
    s
}

/// Bug 1: a fork's first run on the source run's own provider, when that provider cannot fork
/// natively (or the policy never forks natively, as t3code), must not resume the parent's
/// provider thread: it creates its own and gets a full summary of the parent through the fork
/// point.
#[rstest]
#[case::default_without_native_fork("default", true)]
#[case::t3code_without_native_fork("t3code", true)]
fn a_forks_first_run_on_the_same_provider_never_resumes_the_parents_thread(
    #[case] profile: &str,
    #[case] forbid_native: bool,
) {
    let s = if forbid_native {
        no_native_fork(seed(), "codex")
    } else {
        seed()
    };
    let mut db = Db::with(s);
    let p = policy::load(profile).unwrap();
    store::fork(&mut db.store, "th_1", 5, Some("f")).unwrap();
    let d = db.dispatch(&p, "f", "codex");
    assert_eq!(
        d.decision.provider_thread.action,
        baton::decision::ThreadAction::Create,
        "{:?}",
        d.decision.decided_by
    );
    assert_ne!(d.provider_thread.as_deref(), Some("C1"));
    assert_eq!(
        d.decision.covered_runs,
        Some(state::RunRange { from: 1, to: 5 })
    );
    let h = d.handoff.expect("the child gets the parent's context");
    let child = db.store.load("f").unwrap();
    let t = child.transfers.iter().find(|t| t.id == "T1").unwrap();
    assert_eq!(t.status, state::TransferStatus::ResolvedPortable);
    assert_eq!(t.handoff.as_deref(), Some(h.id.as_str()));
    let c1 = child
        .provider_threads
        .iter()
        .find(|p| p.id == "C1")
        .unwrap();
    assert_eq!(c1.status, state::ProviderThreadStatus::Closed);
    // The same request decided from the exported state (as `explain` would) agrees.
    let mut view = child.clone();
    view.runs.pop();
    assert_eq!(view.thread.parent.as_ref().map(|p| p.run), Some(5));
}

/// Bug 1, from a state file: a pending fork's request decides the same with or without the
/// copied threads closed (the dispatch order no longer matters).
#[test]
fn a_pending_fork_decides_the_same_whether_or_not_the_copied_threads_are_closed() {
    let mut db = Db::with(no_native_fork(seed(), "codex"));
    store::fork(&mut db.store, "th_1", 5, Some("f")).unwrap();
    let child = db.store.load("f").unwrap();
    let mut closed = child.clone();
    for pt in &mut closed.provider_threads {
        pt.status = state::ProviderThreadStatus::Closed;
    }
    let p = policy::load("default").unwrap();
    let opts = baton::EvalOptions {
        target: Some("codex".into()),
        document_root: Some(db.docs.clone()),
    };
    let open = baton::pipeline::decide(&p, &child, &opts).unwrap();
    let shut = baton::pipeline::decide(&p, &closed, &opts).unwrap();
    assert_eq!(open.strategy, shut.strategy);
    assert_eq!(open.covered_runs, shut.covered_runs);
    assert_eq!(open.provider_thread, shut.provider_thread);
}

/// Fork th_1 at 5 as `f`, run it natively on codex and complete run 6.
fn fork_with_a_run(db: &mut Db, p: &Policy) {
    store::fork(&mut db.store, "th_1", 5, Some("f")).unwrap();
    db.dispatch(p, "f", "codex");
    db.complete("f", 6, "Keep Postgres after all.", RunStatus::Completed);
}

/// Bug 2: the run that takes a waiting merge-back keeps its own user message, and its
/// decision says how the merge-back is delivered and granted; the merge-back's own decision
/// names the provider thread the parent's next run resumes.
#[test]
fn a_run_taking_a_merge_back_keeps_its_message_and_its_decision_is_truthful() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    fork_with_a_run(&mut db, &p);
    let opts = db.opts();
    let m = store::merge_back(&mut db.store, &engine(&p, &db.docs), "f", &opts).unwrap();
    assert_eq!(m.run, 9);
    assert_eq!(m.provider_thread.as_deref(), Some("L1"));
    assert_eq!(
        m.decision.provider_thread,
        baton::decision::ProviderThreadAction::new(baton::decision::ThreadAction::None, None),
        "a merge-back starts no run: the run that takes it names the provider thread"
    );
    let why = m.decision.decided_by.because.clone().unwrap();
    assert!(
        why.ends_with("(decided on f as claude sees it; recorded in thread th_1 for its run 9)"),
        "{why}"
    );
    let mb = m.handoff.clone().unwrap();
    let doc = mb.document_path.clone().unwrap();

    let r = db.req("th_1", "claude", Some("Now wire up the logout button."));
    let d = store::dispatch(&mut db.store, &engine(&p, &db.docs), &r).unwrap();
    assert_eq!(d.decision.strategy.as_str(), "no_handoff");
    let h = d.handoff.clone().unwrap();
    assert_eq!(h.id, mb.id);
    assert!(
        h.inline.contains("Now wire up the logout button."),
        "the run's own message is in its first-turn prompt:\n{}",
        h.inline
    );
    assert!(
        h.inline.contains(&doc.display().to_string()),
        "{}",
        h.inline
    );
    let delivery = d
        .decision
        .delivery
        .clone()
        .expect("the merge-back's delivery");
    assert_eq!(delivery.mode.as_str(), "off_band");
    assert_eq!(
        delivery.document.as_deref(),
        Some(doc.display().to_string().as_str())
    );
    let grant = d.decision.pregrant.clone().expect("the merge-back's grant");
    assert_eq!(grant.path, doc.display().to_string());
    assert_eq!(d.decision.handoff_id.as_deref(), Some(mb.id.as_str()));
    assert!(db.allows("th_1", 9, &doc));
}

/// Issue 27 point 4: a merge-back binds to the run that takes it. Made while the parent's
/// last run was on codex (for codex, into C1), it is taken by a run on claude: it is made
/// again for claude, recorded into that run's provider thread (superseding the waiting one),
/// and the run gets one first-turn prompt for both handoffs; a rollback of that run leaves C1
/// alone, and every logged decision replays.
#[test]
fn a_merge_back_taken_on_another_provider_is_made_for_the_run_that_takes_it() {
    use baton::decision::{ProviderThreadAction, ThreadAction};
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    fork_with_a_run(&mut db, &p);
    db.dispatch(&p, "th_1", "codex");
    db.complete("th_1", 9, "Codex did run 9.", RunStatus::Completed);
    let opts = db.opts();
    let m = store::merge_back(&mut db.store, &engine(&p, &db.docs), "f", &opts).unwrap();
    assert_eq!(m.decision.target, "codex");
    assert_eq!(m.provider_thread.as_deref(), Some("C1"));
    assert_eq!(
        m.decision.provider_thread,
        ProviderThreadAction::new(ThreadAction::None, None),
        "no `resume` beside the ladder's strategy: the merge-back starts no run"
    );
    let waiting = m.handoff.unwrap();

    let message = "Now wire up the logout button.";
    let r = db.req("th_1", "claude", Some(message));
    let d = store::dispatch(&mut db.store, &engine(&p, &db.docs), &r).unwrap();
    let pt = d
        .provider_thread
        .clone()
        .expect("the run's provider thread");
    assert_ne!(pt, "C1");
    let own = d.handoff.clone().expect("claude gets a handoff of its own");
    let mb = d.merge_back.clone().expect("and the merge-back beside it");
    assert_ne!(mb.id, waiting.id);
    assert_eq!(mb.supersedes.as_deref(), Some(waiting.id.as_str()));
    assert_eq!(mb.covered_thread.as_deref(), Some("f"));
    // Recorded against the provider thread of the run that takes it, not C1.
    let parent = db.store.load("th_1").unwrap();
    let row = parent.handoffs.iter().find(|h| h.id == mb.id).unwrap();
    assert_eq!(row.to_provider_thread.as_deref(), Some(pt.as_str()));
    assert_eq!(row.target_run, Some(10));
    let old = parent.handoffs.iter().find(|h| h.id == waiting.id).unwrap();
    assert_eq!(old.status, baton::state::HandoffStatus::Superseded);
    let t = parent
        .transfers
        .iter()
        .find(|t| t.kind == baton::state::TransferType::MergeBack)
        .unwrap();
    assert_eq!(t.handoff.as_deref(), Some(mb.id.as_str()));
    // The document speaks to claude, and claude may read it.
    let doc_path = mb.document_path.clone().expect("off-band");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    assert!(doc.contains(" on claude."), "{doc}");
    assert!(!doc.contains(" on codex."), "{doc}");
    // One first-turn prompt: both documents, the run's message once, at the end.
    let prompt = d.prompt.clone().expect("one prompt");
    for path in [&doc_path, own.document_path.as_ref().unwrap()] {
        assert!(prompt.contains(&path.display().to_string()), "{prompt}");
    }
    assert!(prompt.ends_with(message), "{prompt}");
    assert_eq!(prompt.matches(message).count(), 1, "{prompt}");
    assert!(
        prompt.contains("it summarises the work done in a fork of this thread, now merged back"),
        "the merge-back's part says what it is: {prompt}"
    );
    assert!(db.allows("th_1", 10, &doc_path));
    // A rollback of the run undoes what claude's thread took, not C1.
    db.complete("th_1", 10, "Claude merged.", RunStatus::Completed);
    let rb = store::rollback(&mut db.store, "th_1", 9).unwrap();
    let touched: Vec<&str> = rb.provider_threads.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(touched, [pt.as_str()]);
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert!(report.differences.is_empty(), "{report:?}");
}

/// Bug 4: a delta through the store never shows an empty `Handoff: ` line for a handoff that
/// carries no summary (every dispatch-made handoff).
/// A handoff goes with the run that took it. In seed-switch, claude's thread L1 was created
/// for run 6 and received H1 (runs 1-5) there. Rolling back to run 5 undoes run 6, so L1 no
/// longer holds H1. The profiles that resume a rolled-back thread (t3code) or trust coverage
/// (mcode) used to answer "resume L1, no handoff": claude would continue with none of runs 1-5.
/// The rollback now supersedes H1 with the runs, and every profile hands runs 1-5 over again.
#[rstest]
#[case::default("default")]
#[case::t3code("t3code")]
#[case::mcode("mcode")]
fn a_handoff_taken_by_an_undone_run_no_longer_counts_as_seen(#[case] profile: &str) {
    let p = policy::load(profile).unwrap();
    let mut db = Db::new();
    db.dispatch(&p, "th_1", "codex");
    db.complete("th_1", 9, "done", RunStatus::Completed);
    let r = store::rollback(&mut db.store, "th_1", 5).unwrap();
    assert_eq!(r.handoffs_superseded, ["H1", "H2"]);
    let d = db.dispatch(&p, "th_1", "claude");
    assert_ne!(d.decision.strategy.as_str(), "no_handoff", "{profile}");
    let covered = d.decision.covered_runs.expect("runs handed over");
    assert_eq!((covered.from, covered.to), (1, 5), "{profile}");
}

#[test]
fn a_delta_through_the_store_shows_no_empty_handoff_line() {
    let mut db = Db::new();
    let p = policy::load("t3code").unwrap();
    // Run 9 on codex (takes H2, a delta of runs 6-8), then run 10 back on claude: the delta
    // covers run 9, which consumed H2.
    db.dispatch(&p, "th_1", "codex");
    db.complete("th_1", 9, "Ship it.", RunStatus::Completed);
    let d = db.dispatch(&p, "th_1", "claude");
    let text = d.handoff.unwrap().inline;
    assert!(
        !text.lines().any(|l| l.trim_end().ends_with("Handoff:")),
        "{text}"
    );
    assert!(text.contains("Run 9, please."), "{text}");
}

/// Bug 5 (issue 15 item 8): an unused pre-grant dies with its run, however the run ends.
#[rstest]
#[case::completed(Some(RunStatus::Completed))]
#[case::failed(Some(RunStatus::Failed))]
#[case::interrupted(Some(RunStatus::Interrupted))]
#[case::rolled_back(None)]
fn an_unused_pregrant_dies_when_its_run_ends(#[case] end: Option<RunStatus>) {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    let d = db.dispatch(&p, "th_1", "codex");
    let doc = d.handoff.unwrap().document_path.unwrap();
    assert_eq!(db.store.find("th_1", 9).unwrap().len(), 1);
    match end {
        Some(status) => db.complete("th_1", 9, "done", status),
        None => {
            store::rollback(&mut db.store, "th_1", 8).unwrap();
        }
    }
    assert!(db.store.find("th_1", 9).unwrap().is_empty());
    let req = baton::deliver::CheckRequest {
        thread: "th_1".into(),
        run: 9,
        tool: "Read".into(),
        args: baton::deliver::PathArg::Path(doc.clone()),
    };
    let v = baton::deliver::check(&mut db.store, &req).unwrap();
    assert!(!v.allow);
    assert_eq!(v.reason, "no pre-grant for thread th_1 turn 9");
}

/// Bug 5: a merge-back waiting for the parent's next run keeps its grant through a rollback of
/// the parent (it goes with the run that takes it), and loses it when that run ends.
#[test]
fn a_waiting_merge_backs_grant_lives_until_the_run_that_takes_it_ends() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    fork_with_a_run(&mut db, &p);
    let opts = db.opts();
    let m = store::merge_back(&mut db.store, &engine(&p, &db.docs), "f", &opts).unwrap();
    let doc = m.handoff.unwrap().document_path.unwrap();
    store::rollback(&mut db.store, "th_1", 7).unwrap();
    assert_eq!(db.store.find("th_1", 9).unwrap().len(), 1);
    db.dispatch(&p, "th_1", "claude");
    db.complete("th_1", 9, "merged", RunStatus::Completed);
    assert!(!db.allows("th_1", 9, &doc));
}

/// Bug 6: every logged decision re-derives from (policy sha256, the state it was made on),
/// merge-backs included; `baton replay` finds no difference.
#[test]
fn every_logged_decision_replays_to_itself() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    let t3 = policy::load("t3code").unwrap();
    fork_with_a_run(&mut db, &p);
    let opts = db.opts();
    store::merge_back(&mut db.store, &engine(&p, &db.docs), "f", &opts).unwrap();
    let r = db.req("th_1", "claude", Some("Carry on."));
    store::dispatch(&mut db.store, &engine(&p, &db.docs), &r).unwrap();
    db.complete("th_1", 9, "merged", RunStatus::Completed);
    db.dispatch(&t3, "th_1", "codex");
    db.complete("th_1", 10, "switched", RunStatus::Failed);
    store::rollback(&mut db.store, "th_1", 9).unwrap();
    let d = db.dispatch(&p, "th_1", "cursor");
    let h = d.handoff.expect("cursor gets a handoff");
    let opts = db.opts();
    store::regenerate(&mut db.store, &engine(&p, &db.docs), "th_1", &h.id, &opts).unwrap();
    db.dispatch(&p, "f", "claude");
    // A merge-back made for cursor (the parent's last run) and taken on codex is made again
    // for the run that takes it (issue 27): both of its decisions replay.
    let cursor_run = d.run;
    db.complete("th_1", cursor_run, "Cursor's run.", RunStatus::Completed);
    store::fork(&mut db.store, "th_1", cursor_run, Some("g")).unwrap();
    let g = db.dispatch(&p, "g", "claude");
    db.complete("g", g.run, "Fork g's work.", RunStatus::Completed);
    let m = store::merge_back(&mut db.store, &engine(&p, &db.docs), "g", &opts).unwrap();
    assert_eq!(m.decision.target, "cursor");
    let d = db.dispatch(&p, "th_1", "codex");
    let taken = d.merge_back.or(d.handoff).unwrap();
    assert_eq!(
        taken.supersedes,
        m.handoff.map(|h| h.id),
        "made again for codex"
    );
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(report.checked, 11, "{report:?}");
    assert!(report.differences.is_empty(), "{report:?}");
    if let Some(keep) = std::env::var_os("BATON_LIFECYCLE_DB") {
        let from = db.store.path().unwrap().to_path_buf();
        drop(db.store);
        std::fs::copy(from, keep).unwrap();
    }
}

/// Bug 2, the prompt's layout: the merge-back's prompt, then the run's message, as the
/// inline template lays out a prompt with a message (after a blank line).
#[test]
fn the_taken_merge_backs_prompt_ends_with_the_runs_message_after_a_blank_line() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    fork_with_a_run(&mut db, &p);
    let opts = db.opts();
    let m = store::merge_back(&mut db.store, &engine(&p, &db.docs), "f", &opts).unwrap();
    let before = m.handoff.unwrap().inline;
    let r = db.req("th_1", "claude", Some("Go on."));
    let d = store::dispatch(&mut db.store, &engine(&p, &db.docs), &r).unwrap();
    assert_eq!(
        d.handoff.unwrap().inline,
        format!("{}\n\nGo on.", before.trim_end())
    );
}

/// Bug 6, delivery: a decision whose off-band write failed and fell back to inline (the
/// delivery stage's record, not the policy's choice) still replays to itself.
#[test]
fn a_decision_that_fell_back_to_inline_replays_to_itself() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    let file = db._dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let r = db.req("th_1", "codex", None);
    let d = store::dispatch(&mut db.store, &engine(&p, &file.join("docs")), &r).unwrap();
    let delivery = d.decision.delivery.unwrap();
    assert_eq!(delivery.mode.as_str(), "inline");
    assert!(delivery.fallback_reason.is_some());
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (1, 0),
        "{report:?}"
    );
}

/// A long thread: `n` runs alternating between codex and claude in blocks of five.
fn long_thread(n: u32) -> State {
    let mut yaml = String::from(
        "version: 1\nthread: {id: big, title: Big}\nprovider_threads:\n  - {id: C1, provider: codex, status: active}\n  - {id: L1, provider: claude, status: active}\nruns:\n",
    );
    for i in 1..=n {
        let (p, pt) = if (i - 1) / 5 % 2 == 0 {
            ("codex", "C1")
        } else {
            ("claude", "L1")
        };
        yaml += &format!(
            "  - ordinal: {i}\n    provider: {p}\n    provider_thread: {pt}\n    items:\n      - {{kind: user_message, text: \"message {i}\"}}\n"
        );
    }
    yaml += "request: {provider: codex}\n";
    state::parse_str(&yaml, state::Format::Yaml, "big.yaml").unwrap()
}

/// The decision log grows with what changed, not with the thread's history: a decision's
/// input keeps the state's long lists in shared chunks, and the next dispatch adds a few.
#[test]
fn the_decision_log_grows_with_the_delta_not_the_history() {
    let mut db = Db::with(long_thread(1000));
    let p = policy::load("default").unwrap();
    let chunks = |db: &Db| -> i64 {
        db.store
            .connection()
            .query_row("SELECT COUNT(*) FROM decision_chunks", [], |r| r.get(0))
            .unwrap()
    };
    db.dispatch(&p, "big", "codex");
    db.complete("big", 1001, "one", RunStatus::Completed);
    let first = chunks(&db);
    db.dispatch(&p, "big", "claude");
    db.complete("big", 1002, "two", RunStatus::Completed);
    db.dispatch(&p, "big", "codex");
    let added = chunks(&db) - first;
    assert!(
        added <= 8,
        "two dispatches added {added} chunks (first: {first})"
    );
    let longest: i64 = db
        .store
        .connection()
        .query_row("SELECT MAX(length(input)) FROM decision_log", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(longest < 4_000, "{longest} bytes");
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (3, 0),
        "{report:?}"
    );
    // A chunk gone missing is a difference that says so.
    db.store
        .connection()
        .execute("DELETE FROM decision_chunks", [])
        .unwrap();
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(report.differences.len(), 3);
    assert!(
        report.differences[0]
            .reason
            .starts_with("the logged input is unreadable: its chunk "),
        "{:?}",
        report.differences[0]
    );
}

/// A dispatch's logged input names the items of the thread's finished runs instead of copying
/// them; replacing the thread (an import with `replace`) makes the log keep a copy first, so
/// every logged decision still replays.
#[test]
fn a_replaced_thread_s_logged_decisions_still_replay() {
    let mut db = Db::with(long_thread(40));
    let p = policy::load("default").unwrap();
    for (i, target) in ["codex", "claude", "codex"].into_iter().enumerate() {
        db.dispatch(&p, "big", target);
        db.complete("big", 41 + i as u32, "done", RunStatus::Completed);
    }
    let named: i64 = db
        .store
        .connection()
        .query_row(
            "SELECT COUNT(*) FROM decision_log WHERE instr(input, '\"stored_items\"') > 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(named, 3);
    db.store.import_with(&long_thread(3), true).unwrap();
    db.dispatch(&p, "big", "claude");
    let report = store::replay(&db.store, &store::ReplayFilter::default(), &[]).unwrap();
    assert_eq!(
        (report.checked, report.differences.len()),
        (4, 0),
        "{report:?}"
    );
}

/// Issue 24, point 7: after a fork's first dispatch, deciding for the fork again (`baton
/// explain --db --thread FORK`) decides a plain dispatch, as the next dispatch will: the fork's
/// own provider thread, active since that dispatch, is resumed, not replaced.
#[test]
fn explaining_a_fork_after_its_first_dispatch_decides_a_plain_dispatch() {
    let mut db = Db::new();
    let p = policy::load("default").unwrap();
    fork_with_a_run(&mut db, &p);
    let engine = baton::Engine::new("default").unwrap();
    let d = db
        .store
        .decide(&engine, "f", Some("codex"))
        .unwrap()
        .unwrap();
    assert_eq!(d.strategy.as_str(), "no_handoff", "{:?}", d.decided_by);
}
