//! Regression tests for the lifecycle bugs of issue 12 (and issue 15 item 8): forks, merge-backs,
//! rollbacks and grant lifetime through the store's library API ([`baton::store::Db`]), each on
//! both backends (issue 31; SQLite always, PostgreSQL with feature `postgres`). Each test failed
//! on the code before its fix. `BATON_LIFECYCLE_DB=FILE` keeps the SQLite database of the replay
//! test, which CI hands to `baton replay`.

use crate::common::backend::{Backend, TestDb};
use baton::decision::{ProviderThreadAction, ThreadAction};
use baton::state::{self, Caps, Item, RunStatus, State};
use baton::store::{Db, DispatchRequest, Dispatched, HandoffOptions, ReplayFilter, ReplayReport};
use rstest_reuse::apply;
use std::path::{Path, PathBuf};

pub(crate) fn seed() -> State {
    state::load_file(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml"))
        .expect("the seed loads")
}

/// The engine a store operation takes: the shipped profile `profile`, the embedded templates,
/// documents under `docs`.
pub(crate) fn engine(profile: &str, docs: &Path) -> baton::Engine {
    baton::Engine::builder(profile)
        .document_root(Some(docs.to_path_buf()))
        .build()
        .expect("the profile checks")
}

pub(crate) fn req(thread: &str, target: &str, message: Option<&str>) -> DispatchRequest {
    DispatchRequest {
        thread: thread.into(),
        target: target.into(),
        message: message.map(str::to_string),
        ..Default::default()
    }
}

/// A test's database (`t`) and the library's handle on it (`db`); lifecycle_replay.rs uses it
/// too.
pub(crate) struct Life {
    pub(crate) t: TestDb,
    pub(crate) db: Db,
}

impl Life {
    /// A database of `backend` holding the seed thread `th_1`.
    pub(crate) fn new(backend: Backend) -> Life {
        Life::with(backend, seed())
    }

    /// A database of `backend` holding `state`'s thread.
    pub(crate) fn with(backend: Backend, state: State) -> Life {
        let t = TestDb::new(backend);
        let mut db = t.open();
        db.import(&state).expect("the thread imports");
        Life { t, db }
    }

    pub(crate) fn engine(&self, profile: &str) -> baton::Engine {
        engine(profile, &self.t.docs())
    }

    pub(crate) fn dispatch(&mut self, profile: &str, thread: &str, target: &str) -> Dispatched {
        self.dispatch_saying(profile, thread, target, None)
    }

    pub(crate) fn dispatch_saying(
        &mut self,
        profile: &str,
        thread: &str,
        target: &str,
        message: Option<&str>,
    ) -> Dispatched {
        let e = self.engine(profile);
        self.db
            .dispatch(&e, &req(thread, target, message))
            .expect("dispatches")
    }

    pub(crate) fn complete(&mut self, thread: &str, run: u32, text: &str, status: RunStatus) {
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
        self.db
            .complete_run(thread, run, items, status)
            .expect("completes");
    }

    pub(crate) fn merge_back(&mut self, profile: &str, fork: &str) -> Dispatched {
        let e = self.engine(profile);
        self.db
            .merge_back(&e, fork, &HandoffOptions::default())
            .expect("merges back")
    }

    pub(crate) fn replay(&self) -> ReplayReport {
        self.db
            .replay(&ReplayFilter::default(), &[])
            .expect("replays")
    }

    /// `baton pregrant check` of `tool` reading `doc` in (thread, run), as an app's hook asks
    /// it: whether it is allowed (an allow consumes a use), and what baton said.
    fn check(&self, thread: &str, run: u32, tool: &str, doc: &Path) -> (bool, String) {
        let run = run.to_string();
        let doc = doc.display().to_string();
        let o = self.t.run(&[
            "pregrant", "check", "--thread", thread, "--turn", &run, "--tool", tool, "--path", &doc,
        ]);
        let said = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "pregrant check: {said}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.success(), said)
    }

    /// Whether the pre-grant of (thread, run) allows reading `doc` now (a use is consumed).
    fn allows(&self, thread: &str, run: u32, doc: &Path) -> bool {
        self.check(thread, run, "Read", doc).0
    }

    /// Whether (thread, run) holds a pre-grant, asked without consuming it: a tool that is
    /// never granted is denied for that reason only when the run holds one.
    fn holds_a_grant(&self, thread: &str, run: u32) -> bool {
        let (allowed, said) = self.check(thread, run, "Bash", Path::new("/nowhere"));
        assert!(!allowed, "{said}");
        said == "deny: tool Bash is not granted (only Read)"
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
#[apply(crate::common::backend::backends)]
fn a_forks_first_run_on_the_same_provider_never_resumes_the_parents_thread(
    #[case] backend: Backend,
    #[values("default", "t3code")] profile: &str,
) {
    let mut db = Life::with(backend, no_native_fork(seed(), "codex"));
    db.db.fork("th_1", 5, Some("f")).expect("forks");
    let d = db.dispatch(profile, "f", "codex");
    assert_eq!(
        d.decision.provider_thread.action,
        ThreadAction::Create,
        "{:?}",
        d.decision.decided_by
    );
    assert_ne!(d.provider_thread.as_deref(), Some("C1"));
    assert_eq!(
        d.decision.covered_runs,
        Some(state::RunRange { from: 1, to: 5 })
    );
    let h = d.handoff.expect("the child gets the parent's context");
    let child = db.db.load("f").expect("loads");
    let t = child.transfers.iter().find(|t| t.id == "T1").expect("T1");
    assert_eq!(t.status, state::TransferStatus::ResolvedPortable);
    assert_eq!(t.handoff.as_deref(), Some(h.id.as_str()));
    let c1 = child
        .provider_threads
        .iter()
        .find(|p| p.id == "C1")
        .expect("C1");
    assert_eq!(c1.status, state::ProviderThreadStatus::Closed);
    // The same request decided from the exported state (as `explain` would) agrees.
    let mut view = child.clone();
    view.runs.pop();
    assert_eq!(view.thread.parent.as_ref().map(|p| p.run), Some(5));
}

/// Bug 1, from a state file: a pending fork's request decides the same with or without the
/// copied threads closed (the dispatch order no longer matters).
#[apply(crate::common::backend::backends)]
fn a_pending_fork_decides_the_same_whether_or_not_the_copied_threads_are_closed(
    #[case] backend: Backend,
) {
    let mut db = Life::with(backend, no_native_fork(seed(), "codex"));
    db.db.fork("th_1", 5, Some("f")).expect("forks");
    let child = db.db.load("f").expect("loads");
    let mut closed = child.clone();
    for pt in &mut closed.provider_threads {
        pt.status = state::ProviderThreadStatus::Closed;
    }
    let e = db.engine("default");
    let open = e.decide(&child, Some("codex")).expect("decides");
    let shut = e.decide(&closed, Some("codex")).expect("decides");
    assert_eq!(open.strategy, shut.strategy);
    assert_eq!(open.covered_runs, shut.covered_runs);
    assert_eq!(open.provider_thread, shut.provider_thread);
}

/// Fork th_1 at 5 as `f`, run it natively on codex and complete run 6.
pub(crate) fn fork_with_a_run(db: &mut Life) {
    db.db.fork("th_1", 5, Some("f")).expect("forks");
    db.dispatch("default", "f", "codex");
    db.complete("f", 6, "Keep Postgres after all.", RunStatus::Completed);
}

/// Bug 2: the run that takes a waiting merge-back keeps its own user message, and its
/// decision says how the merge-back is delivered and granted; the merge-back's own decision
/// names the provider thread the parent's next run resumes.
#[apply(crate::common::backend::backends)]
fn a_run_taking_a_merge_back_keeps_its_message_and_its_decision_is_truthful(
    #[case] backend: Backend,
) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    let m = db.merge_back("default", "f");
    assert_eq!(m.run, 9);
    assert_eq!(m.provider_thread.as_deref(), Some("L1"));
    assert_eq!(
        m.decision.provider_thread,
        ProviderThreadAction::new(ThreadAction::None, None),
        "a merge-back starts no run: the run that takes it names the provider thread"
    );
    let why = m.decision.decided_by.because.clone().expect("a reason");
    assert!(
        why.ends_with("(decided on f as claude sees it; recorded in thread th_1 for its run 9)"),
        "{why}"
    );
    let mb = m.handoff.clone().expect("the merge-back's handoff");
    let doc = mb.document_path.clone().expect("off-band");

    let d = db.dispatch_saying(
        "default",
        "th_1",
        "claude",
        Some("Now wire up the logout button."),
    );
    assert_eq!(d.decision.strategy.as_str(), "no_handoff");
    let h = d.handoff.clone().expect("the merge-back");
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
#[apply(crate::common::backend::backends)]
fn a_merge_back_taken_on_another_provider_is_made_for_the_run_that_takes_it(
    #[case] backend: Backend,
) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    db.dispatch("default", "th_1", "codex");
    db.complete("th_1", 9, "Codex did run 9.", RunStatus::Completed);
    let m = db.merge_back("default", "f");
    assert_eq!(m.decision.target, "codex");
    assert_eq!(m.provider_thread.as_deref(), Some("C1"));
    assert_eq!(
        m.decision.provider_thread,
        ProviderThreadAction::new(ThreadAction::None, None),
        "no `resume` beside the ladder's strategy: the merge-back starts no run"
    );
    let waiting = m.handoff.expect("the waiting merge-back");

    let message = "Now wire up the logout button.";
    let d = db.dispatch_saying("default", "th_1", "claude", Some(message));
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
    let parent = db.db.load("th_1").expect("loads");
    let row = parent
        .handoffs
        .iter()
        .find(|h| h.id == mb.id)
        .expect("the new merge-back's row");
    assert_eq!(row.to_provider_thread.as_deref(), Some(pt.as_str()));
    assert_eq!(row.target_run, Some(10));
    let old = parent
        .handoffs
        .iter()
        .find(|h| h.id == waiting.id)
        .expect("the waiting one's row");
    assert_eq!(old.status, state::HandoffStatus::Superseded);
    let t = parent
        .transfers
        .iter()
        .find(|t| t.kind == state::TransferType::MergeBack)
        .expect("the merge-back transfer");
    assert_eq!(t.handoff.as_deref(), Some(mb.id.as_str()));
    // The document speaks to claude, and claude may read it.
    let doc_path = mb.document_path.clone().expect("off-band");
    let doc = std::fs::read_to_string(&doc_path).expect("the document");
    assert!(doc.contains(" on claude."), "{doc}");
    assert!(!doc.contains(" on codex."), "{doc}");
    // One first-turn prompt: both documents, the run's message once, at the end.
    let prompt = d.prompt.clone().expect("one prompt");
    let own_doc = own.document_path.clone().expect("off-band");
    for path in [&doc_path, &own_doc] {
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
    let rb = db.db.rollback("th_1", 9).expect("rolls back");
    let touched: Vec<&str> = rb.provider_threads.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(touched, [pt.as_str()]);
    let report = db.replay();
    assert!(report.differences.is_empty(), "{report:?}");
}

/// A handoff goes with the run that took it. In seed-switch, claude's thread L1 was created
/// for run 6 and received H1 (runs 1-5) there. Rolling back to run 5 undoes run 6, so L1 no
/// longer holds H1. The profiles that resume a rolled-back thread (t3code) or trust coverage
/// (mcode) used to answer "resume L1, no handoff": claude would continue with none of runs 1-5.
/// The rollback now supersedes H1 with the runs, and every profile hands runs 1-5 over again.
#[apply(crate::common::backend::backends)]
fn a_handoff_taken_by_an_undone_run_no_longer_counts_as_seen(
    #[case] backend: Backend,
    #[values("default", "t3code", "mcode")] profile: &str,
) {
    let mut db = Life::new(backend);
    db.dispatch(profile, "th_1", "codex");
    db.complete("th_1", 9, "done", RunStatus::Completed);
    let r = db.db.rollback("th_1", 5).expect("rolls back");
    assert_eq!(r.handoffs_superseded, ["H1", "H2"]);
    let d = db.dispatch(profile, "th_1", "claude");
    assert_ne!(d.decision.strategy.as_str(), "no_handoff", "{profile}");
    let covered = d.decision.covered_runs.expect("runs handed over");
    assert_eq!((covered.from, covered.to), (1, 5), "{profile}");
}

/// Bug 4: a delta through the store never shows an empty `Handoff: ` line for a handoff that
/// carries no summary (every dispatch-made handoff).
#[apply(crate::common::backend::backends)]
fn a_delta_through_the_store_shows_no_empty_handoff_line(#[case] backend: Backend) {
    let mut db = Life::new(backend);
    // Run 9 on codex (takes H2, a delta of runs 6-8), then run 10 back on claude: the delta
    // covers run 9, which consumed H2.
    db.dispatch("t3code", "th_1", "codex");
    db.complete("th_1", 9, "Ship it.", RunStatus::Completed);
    let d = db.dispatch("t3code", "th_1", "claude");
    let text = d.handoff.expect("a delta").inline;
    assert!(
        !text.lines().any(|l| l.trim_end().ends_with("Handoff:")),
        "{text}"
    );
    assert!(text.contains("Run 9, please."), "{text}");
}

/// Bug 5 (issue 15 item 8): an unused pre-grant dies with its run, however the run ends
/// (`None`: rolled back).
#[apply(crate::common::backend::backends)]
fn an_unused_pregrant_dies_when_its_run_ends(
    #[case] backend: Backend,
    #[values(
        Some(RunStatus::Completed),
        Some(RunStatus::Failed),
        Some(RunStatus::Interrupted),
        None
    )]
    end: Option<RunStatus>,
) {
    let mut db = Life::new(backend);
    let d = db.dispatch("default", "th_1", "codex");
    let doc = d
        .handoff
        .expect("a handoff")
        .document_path
        .expect("off-band");
    assert!(db.holds_a_grant("th_1", 9));
    match end {
        Some(status) => db.complete("th_1", 9, "done", status),
        None => {
            db.db.rollback("th_1", 8).expect("rolls back");
        }
    }
    assert!(!db.holds_a_grant("th_1", 9));
    assert_eq!(
        db.check("th_1", 9, "Read", &doc),
        (
            false,
            "deny: no pre-grant for thread th_1 turn 9".to_string()
        )
    );
}

/// Bug 5: a merge-back waiting for the parent's next run keeps its grant through a rollback of
/// the parent (it goes with the run that takes it), and loses it when that run ends.
#[apply(crate::common::backend::backends)]
fn a_waiting_merge_backs_grant_lives_until_the_run_that_takes_it_ends(#[case] backend: Backend) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    let m = db.merge_back("default", "f");
    let doc = m
        .handoff
        .expect("the merge-back")
        .document_path
        .expect("off-band");
    db.db.rollback("th_1", 7).expect("rolls back");
    assert!(db.holds_a_grant("th_1", 9));
    db.dispatch("default", "th_1", "claude");
    db.complete("th_1", 9, "merged", RunStatus::Completed);
    assert!(!db.allows("th_1", 9, &doc));
}

/// Bug 6: every logged decision re-derives from (policy sha256, the state it was made on),
/// merge-backs included; `baton replay` finds no difference. On SQLite, with
/// `BATON_LIFECYCLE_DB=FILE`, the database is kept as FILE (CI replays it with `baton replay`).
#[apply(crate::common::backend::backends)]
fn every_logged_decision_replays_to_itself(#[case] backend: Backend) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    db.merge_back("default", "f");
    db.dispatch_saying("default", "th_1", "claude", Some("Carry on."));
    db.complete("th_1", 9, "merged", RunStatus::Completed);
    db.dispatch("t3code", "th_1", "codex");
    db.complete("th_1", 10, "switched", RunStatus::Failed);
    db.db.rollback("th_1", 9).expect("rolls back");
    let d = db.dispatch("default", "th_1", "cursor");
    let h = d.handoff.expect("cursor gets a handoff");
    let e = db.engine("default");
    db.db
        .regenerate(&e, "th_1", &h.id, &HandoffOptions::default())
        .expect("regenerates");
    db.dispatch("default", "f", "claude");
    // A merge-back made for cursor (the parent's last run) and taken on codex is made again
    // for the run that takes it (issue 27): both of its decisions replay.
    let cursor_run = d.run;
    db.complete("th_1", cursor_run, "Cursor's run.", RunStatus::Completed);
    db.db.fork("th_1", cursor_run, Some("g")).expect("forks");
    let g = db.dispatch("default", "g", "claude");
    db.complete("g", g.run, "Fork g's work.", RunStatus::Completed);
    let m = db.merge_back("default", "g");
    assert_eq!(m.decision.target, "cursor");
    let d = db.dispatch("default", "th_1", "codex");
    let taken = d.merge_back.or(d.handoff).expect("the merge-back is taken");
    assert_eq!(
        taken.supersedes,
        m.handoff.map(|h| h.id),
        "made again for codex"
    );
    let report = db.replay();
    assert_eq!(report.checked, 11, "{report:?}");
    assert!(report.differences.is_empty(), "{report:?}");
    if let (Some(keep), Some(file)) = (std::env::var_os("BATON_LIFECYCLE_DB"), db.t.sqlite_path()) {
        drop(db.db);
        std::fs::copy(file, keep).expect("keeps the database");
    }
}

/// Bug 2, the prompt's layout: the merge-back's prompt, then the run's message, as the
/// inline template lays out a prompt with a message (after a blank line).
#[apply(crate::common::backend::backends)]
fn the_taken_merge_backs_prompt_ends_with_the_runs_message_after_a_blank_line(
    #[case] backend: Backend,
) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    let m = db.merge_back("default", "f");
    let before = m.handoff.expect("the merge-back").inline;
    let d = db.dispatch_saying("default", "th_1", "claude", Some("Go on."));
    assert_eq!(
        d.handoff.expect("the merge-back, taken").inline,
        format!("{}\n\nGo on.", before.trim_end())
    );
}

/// Bug 6, delivery: a decision whose off-band write failed and fell back to inline (the
/// delivery stage's record, not the policy's choice) still replays to itself.
#[apply(crate::common::backend::backends)]
fn a_decision_that_fell_back_to_inline_replays_to_itself(#[case] backend: Backend) {
    let mut db = Life::new(backend);
    let file = db.t.path().join("not-a-dir");
    std::fs::write(&file, "x").expect("writes");
    let e = engine("default", &file.join("docs"));
    let d = db
        .db
        .dispatch(&e, &req("th_1", "codex", None))
        .expect("dispatches");
    let delivery = d.decision.delivery.expect("a delivery");
    assert_eq!(delivery.mode.as_str(), "inline");
    assert!(delivery.fallback_reason.is_some());
    let report = db.replay();
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
    state::parse_str(&yaml, state::Format::Yaml, "big.yaml").expect("the long thread parses")
}

/// The decision log grows with what changed, not with the thread's history: a decision's
/// input keeps the state's long lists in shared chunks, and the next dispatch adds a few.
#[apply(crate::common::backend::backends)]
fn the_decision_log_grows_with_the_delta_not_the_history(#[case] backend: Backend) {
    let mut db = Life::with(backend, long_thread(1000));
    let chunks = |db: &Life| db.t.scalar("SELECT COUNT(*) FROM decision_chunks");
    db.dispatch("default", "big", "codex");
    db.complete("big", 1001, "one", RunStatus::Completed);
    let first = chunks(&db);
    db.dispatch("default", "big", "claude");
    db.complete("big", 1002, "two", RunStatus::Completed);
    db.dispatch("default", "big", "codex");
    let added = chunks(&db) - first;
    assert!(
        added <= 8,
        "two dispatches added {added} chunks (first: {first})"
    );
    let longest =
        db.t.scalar("SELECT CAST(MAX(length(input)) AS BIGINT) FROM decision_log");
    assert!(longest < 4_000, "{longest} bytes");
    let report = db.replay();
    assert_eq!(
        (report.checked, report.differences.len()),
        (3, 0),
        "{report:?}"
    );
    // A chunk gone missing is a difference that says so.
    db.t.execute("DELETE FROM decision_chunks");
    let report = db.replay();
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
#[apply(crate::common::backend::backends)]
fn a_replaced_thread_s_logged_decisions_still_replay(#[case] backend: Backend) {
    let mut db = Life::with(backend, long_thread(40));
    for (run, target) in [(41, "codex"), (42, "claude"), (43, "codex")] {
        db.dispatch("default", "big", target);
        db.complete("big", run, "done", RunStatus::Completed);
    }
    let named = match backend {
        Backend::Sqlite => db.t.scalar(
            "SELECT COUNT(*) FROM decision_log WHERE instr(input, '\"stored_items\"') > 0",
        ),
        #[cfg(feature = "postgres")]
        Backend::Postgres => db.t.scalar(
            "SELECT COUNT(*) FROM decision_log WHERE position('\"stored_items\"'::bytea IN input) > 0",
        ),
    };
    assert_eq!(named, 3);
    db.db
        .import_with(&long_thread(3), true)
        .expect("replaces the thread");
    db.dispatch("default", "big", "claude");
    let report = db.replay();
    assert_eq!(
        (report.checked, report.differences.len()),
        (4, 0),
        "{report:?}"
    );
}

/// Issue 24, point 7: after a fork's first dispatch, deciding for the fork again (`baton
/// explain --db --thread FORK`) decides a plain dispatch, as the next dispatch will: the fork's
/// own provider thread, active since that dispatch, is resumed, not replaced.
#[apply(crate::common::backend::backends)]
fn explaining_a_fork_after_its_first_dispatch_decides_a_plain_dispatch(#[case] backend: Backend) {
    let mut db = Life::new(backend);
    fork_with_a_run(&mut db);
    let e = baton::Engine::new("default").expect("the profile checks");
    let d = db
        .db
        .decide(&e, "f", Some("codex"))
        .expect("reads the thread")
        .expect("decides");
    assert_eq!(d.strategy.as_str(), "no_handoff", "{:?}", d.decided_by);
}
