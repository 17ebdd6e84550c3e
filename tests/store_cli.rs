//! Lifecycle scenarios end to end through the CLI on a temporary database: seed 000's
//! example built run by run, rollback, fork (native and portable), merge-back,
//! regeneration, racing processes, fault injection, and the messages of bad input. Each on
//! both backends (issue 31), but for what is a SQLite file's own (its path, its lock).

use crate::common::backend::{Backend, TestDb};
use rstest_reuse::apply;

use baton::state::{self, HandoffStatus, ProviderThreadStatus, RunStatus, State, TransferStatus};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A database of one backend (`db init` done) and `baton` run on it (tests/common).
struct Db(TestDb);

impl std::ops::Deref for Db {
    type Target = TestDb;
    fn deref(&self) -> &TestDb {
        &self.0
    }
}

impl Db {
    fn new(backend: Backend) -> Db {
        let d = Db(TestDb::new(backend));
        d.ok(&["db", "init"]);
        d
    }

    /// Run, expect exit `code`, return stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "baton {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stderr).unwrap()
    }

    fn export(&self, thread: &str) -> State {
        let text = self.ok(&["db", "export", "--thread", thread]);
        state::parse_str(&text, state::Format::Yaml, "export").unwrap()
    }

    fn import(&self, file: &str) {
        self.ok(&["db", "import", file]);
    }

    /// `baton complete --thread T --run N --items FILE`; its output.
    fn complete(&self, thread: &str, run: u32, items: &Path) -> String {
        let run = run.to_string();
        let items = items.to_str().unwrap();
        self.ok(&[
            "complete", "--thread", thread, "--run", &run, "--items", items,
        ])
    }

    fn items_file(&self, run: &state::Run) -> PathBuf {
        let p = self.dir.path().join(format!("items-{}.yaml", run.ordinal));
        std::fs::write(&p, serde_yaml::to_string(&run.items).unwrap()).unwrap();
        p
    }

    /// SQLite's integrity check of the file (PostgreSQL keeps its own).
    fn integrity_ok(&self) {
        if self.backend == Backend::Sqlite {
            assert_eq!(self.strings("PRAGMA integrity_check"), ["ok"]);
        }
    }
}

fn seed() -> State {
    state::load_file(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seed-switch.yaml"
    )))
    .unwrap()
}

fn model_of(provider: &str) -> &'static str {
    if provider == "codex" {
        "gpt-5-codex"
    } else {
        "claude-sonnet-4"
    }
}

/// Dispatch and complete `run` of the seed example (its provider, its items).
fn play(db: &Db, run: &state::Run) -> serde_json::Value {
    let d = db.json(&[
        "dispatch",
        "--thread",
        "th_1",
        "--target",
        &run.provider,
        "--model",
        model_of(&run.provider),
        "--runtime-mode",
        "full_access",
        "--json",
    ]);
    assert_eq!(d["recorded"]["run"], run.ordinal);
    let items = db.items_file(run);
    db.ok(&[
        "complete",
        "--thread",
        "th_1",
        "--run",
        &run.ordinal.to_string(),
        "--items",
        items.to_str().unwrap(),
    ]);
    d
}

/// Seed 000 built run by run: runs 1-5 on codex, 6-8 on claude, 9 back on codex.
fn build_seed(db: &Db) -> Vec<serde_json::Value> {
    db.import("tests/fixtures/db/seed-empty.yaml");
    let seed = seed();
    let mut decisions: Vec<serde_json::Value> = seed.runs.iter().map(|r| play(db, r)).collect();
    let mut run9 = seed.runs[0].clone();
    run9.ordinal = 9;
    run9.items = vec![state::Item::UserMessage {
        id: None,
        text: "Now add tests for the CSRF check.".into(),
    }];
    decisions.push(play(db, &run9));
    decisions
}

#[apply(crate::common::backend::backends)]
fn seed_000_built_run_by_run_has_the_seed_coverage(#[case] backend: Backend) {
    let db = Db::new(backend);
    let d = build_seed(&db);
    let strategies: Vec<&str> = d.iter().map(|d| d["strategy"].as_str().unwrap()).collect();
    assert_eq!(
        strategies,
        [
            "full_new",
            "no_handoff",
            "no_handoff",
            "no_handoff",
            "no_handoff",
            "full_new",
            "no_handoff",
            "no_handoff",
            "delta_existing"
        ]
    );
    assert_eq!(d[5]["handoff"]["id"], "H1");
    assert_eq!(d[8]["handoff"]["id"], "H2");
    assert_eq!(d[8]["provider_thread"]["id"], "C1");
    let s = db.export("th_1");
    let pts: Vec<(&str, &str)> = s
        .provider_threads
        .iter()
        .map(|p| (p.id.as_str(), p.provider.as_str()))
        .collect();
    assert_eq!(pts, [("C1", "codex"), ("L1", "claude")]);
    let on: Vec<&str> = s
        .runs
        .iter()
        .map(|r| r.provider_thread.as_deref().unwrap())
        .collect();
    assert_eq!(on, ["C1", "C1", "C1", "C1", "C1", "L1", "L1", "L1", "C1"]);
    // The runs carry the seed's items, and run 6 consumed H1, as in examples/seed-switch.yaml.
    let seed = seed();
    for (got, want) in s.runs.iter().zip(&seed.runs) {
        assert_eq!(got.items, want.items, "run {}", want.ordinal);
        assert_eq!(got.handoff, want.handoff, "run {}", want.ordinal);
        assert_eq!(got.status, RunStatus::Completed);
    }
    let h: Vec<_> = s
        .handoffs
        .iter()
        .map(|h| {
            (
                h.id.as_str(),
                h.covered.from,
                h.covered.to,
                h.to_provider_thread.as_deref().unwrap(),
                h.strategy.as_str(),
                h.status,
                h.target_run,
            )
        })
        .collect();
    assert_eq!(
        h,
        [
            (
                "H1",
                1,
                5,
                "L1",
                "full_thread_summary",
                HandoffStatus::Ready,
                Some(6)
            ),
            (
                "H2",
                6,
                8,
                "C1",
                "delta_since_target_last_seen",
                HandoffStatus::Ready,
                Some(9)
            ),
        ]
    );
    assert_eq!(s.handoffs[0].from_provider_threads, ["C1"]);
    assert_eq!(s.handoffs[1].from_provider_threads, ["L1"]);
    assert!(s
        .transfers
        .iter()
        .all(|t| t.status == TransferStatus::Consumed));
    // Coverage as the engine sees it (C1 native 1-5 and 9 plus H2; L1 native 6-8 plus H1) is
    // checked on this thread by a unit test of the facts (src/facts/seed_built_tests.rs), on
    // tests/fixtures/db/seed-built.yaml: the export is that fixture, but for the clock's times.
    let mut timeless = s.clone();
    for r in &mut timeless.runs {
        r.started_at = None;
        r.ended_at = None;
    }
    timeless.request.at = None;
    let built = state::load_file(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/db/seed-built.yaml"
    )))
    .unwrap();
    assert_eq!(
        serde_yaml::to_value(&timeless).unwrap(),
        serde_yaml::to_value(&built).unwrap()
    );
    // explain reads the stored thread too.
    let e = db.json(&[
        "explain", "--thread", "th_1", "--target", "claude", "--json",
    ]);
    assert_eq!(e["covered_runs"]["from"], 9);

    // Rollback to 5: runs 6-9 rolled back; H2 superseded (it covers them) and H1 too (run 6,
    // which took it, is undone); L1 rolled back (claude can roll back), C1 divergent (codex
    // cannot).
    let r = db.json(&["rollback", "--thread", "th_1", "--to", "5", "--json"]);
    assert_eq!(r["runs_rolled_back"], serde_json::json!([6, 7, 8, 9]));
    assert_eq!(r["handoffs_superseded"], serde_json::json!(["H1", "H2"]));
    let s2 = db.export("th_1");
    let status = |id: &str| {
        s2.provider_threads
            .iter()
            .find(|p| p.id == id)
            .unwrap()
            .status
    };
    assert_eq!(status("C1"), ProviderThreadStatus::Divergent);
    assert_eq!(status("L1"), ProviderThreadStatus::RolledBack);
    assert!(s2.runs[5..]
        .iter()
        .all(|r| r.status == RunStatus::RolledBack));
    assert_eq!(s2.handoffs[0].status, HandoffStatus::Superseded);
    assert_eq!(s2.handoffs[1].status, HandoffStatus::Superseded);
    // Nothing else about H2 changed.
    assert_eq!(
        state::Handoff {
            status: s.handoffs[1].status,
            ..s2.handoffs[1].clone()
        },
        s.handoffs[1]
    );
    // The next dispatch sees the stale signal and starts fresh with runs 1-5.
    let d = db.json(&[
        "dispatch", "--thread", "th_1", "--target", "codex", "--json",
    ]);
    assert_eq!(d["stale"], serde_json::json!(["diverged"]));
    assert_eq!(d["strategy"], "full_new");
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 1, "to": 5}));
    assert_eq!(d["recorded"]["run"], 10);
    assert_eq!(d["recorded"]["provider_thread"], "C2");
    db.integrity_ok();
}

#[apply(crate::common::backend::backends)]
fn fork_at_5_resolves_natively_on_the_source_provider_then_merges_back(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let out = db.ok(&[
        "fork", "--thread", "th_1", "--at", "5", "--child", "th_fork",
    ]);
    assert_eq!(
        out,
        "forked th_1 at run 5 as th_fork (transfer T1 pending until its first dispatch)\n"
    );
    let child = db.export("th_fork");
    assert_eq!(child.thread.parent.as_ref().unwrap().run, 5);
    assert_eq!(child.runs.len(), 5);
    assert_eq!(child.runs, seed().runs[..5].to_vec());
    let t = child.transfers.last().unwrap();
    assert_eq!(
        (t.kind.as_str(), t.status, t.source_run),
        ("fork", TransferStatus::Pending, Some(5))
    );
    // Nothing provider-specific was chosen at fork time.
    assert_eq!(child.provider_threads.len(), 1);

    let d = db.json(&[
        "dispatch", "--thread", "th_fork", "--target", "codex", "--json",
    ]);
    assert_eq!(d["strategy"], "native_fork");
    assert_eq!(
        d["provider_thread"],
        serde_json::json!({"action": "fork_native", "id": "C1"})
    );
    assert_eq!(d["recorded"]["provider_thread"], "C2");
    assert!(d["handoff"].is_null());
    let child = db.export("th_fork");
    let c2 = child
        .provider_threads
        .iter()
        .find(|p| p.id == "C2")
        .unwrap();
    assert_eq!(
        c2.model.as_deref(),
        Some("gpt-5-codex"),
        "inherited from C1"
    );
    let t = child.transfers.iter().find(|t| t.id == "T1").unwrap();
    assert_eq!(t.status, TransferStatus::ResolvedNative);
    assert_eq!(t.resolution.as_deref(), Some("native_fork"));

    // The fork's own run, then merge-back into the parent (last on claude, L1).
    let items = db.dir.path().join("fork-items.yaml");
    std::fs::write(
        &items,
        "- {kind: user_message, text: \"Try a Redis session store.\"}\n- {kind: decision, text: \"Keep Postgres after all.\"}\n",
    )
    .unwrap();
    db.ok(&[
        "complete",
        "--thread",
        "th_fork",
        "--run",
        "6",
        "--items",
        items.to_str().unwrap(),
    ]);
    let child_before = db.export("th_fork");
    let m = db.json(&["merge-back", "--thread", "th_fork", "--json"]);
    assert_eq!(m["handoff_strategy"], "fork_delta_summary");
    assert_eq!(m["covered_runs"], serde_json::json!({"from": 6, "to": 6}));
    assert_eq!(m["target"], "claude");
    assert_eq!(m["run"], 9, "the decision is for the parent's next run");
    assert_eq!(m["recorded"]["provider_thread"], "L1");
    assert_eq!(m["recorded"]["run"], 9);
    assert_eq!(m["handoff"]["covered_thread"], "th_fork");
    let hid = m["handoff"]["id"].as_str().unwrap().to_string();
    assert_eq!(hid, "H2", "numbered in the parent, after the seed's H1");
    let doc = m["handoff"]["document_path"].as_str().unwrap().to_string();
    assert!(doc.contains("th_1") && doc.contains("H2"), "{doc}");
    let text = std::fs::read_to_string(&doc).unwrap();
    assert!(text.contains("Keep Postgres after all."), "{text}");
    // The fork is unchanged; the merge-back lands in the parent.
    assert_eq!(db.export("th_fork"), child_before);
    let parent = db.export("th_1");
    let mb = parent.transfers.last().unwrap();
    assert_eq!(
        (
            mb.kind.as_str(),
            mb.status,
            mb.source_thread.as_deref(),
            mb.target_thread.as_deref(),
            mb.source_run,
            mb.handoff.as_deref()
        ),
        (
            "merge_back",
            TransferStatus::Pending,
            Some("th_fork"),
            Some("th_1"),
            Some(6),
            Some("H2")
        )
    );
    let h = parent.handoffs.last().unwrap();
    assert_eq!(h.id, "H2");
    assert_eq!(h.strategy.as_str(), "fork_delta_summary");
    assert_eq!(h.status, HandoffStatus::Ready);
    assert_eq!(h.covered_thread.as_deref(), Some("th_fork"));
    assert_eq!((h.covered.from, h.covered.to), (6, 6));
    assert_eq!(h.target_run, Some(9));
    assert_eq!(h.to_provider_thread.as_deref(), Some("L1"));
    assert_eq!(h.transfer.as_deref(), Some(mb.id.as_str()));
    // The parent's runs and coverage are untouched until it dispatches.
    assert_eq!(parent.runs, seed().runs);

    // The parent's next dispatch delivers it: L1 has seen runs 1-8, so the run makes no
    // handoff of its own and takes the merge-back, with its pre-grant.
    let d = db.json(&[
        "dispatch", "--thread", "th_1", "--target", "claude", "--json",
    ]);
    assert_eq!(d["strategy"], "no_handoff");
    assert_eq!(d["recorded"]["run"], 9);
    assert_eq!(d["recorded"]["provider_thread"], "L1");
    assert_eq!(d["handoff"]["id"], "H2");
    assert_eq!(d["handoff"]["strategy"], "fork_delta_summary");
    assert_eq!(d["handoff"]["covered_thread"], "th_fork");
    assert_eq!(d["handoff"]["document_path"].as_str(), Some(doc.as_str()));
    let allow = db.json(&[
        "pregrant", "check", "--thread", "th_1", "--run", "9", "--tool", "Read", "--path", &doc,
        "--json",
    ]);
    assert_eq!(allow["allow"], true, "{allow}");
    let parent = db.export("th_1");
    assert_eq!(parent.runs[8].handoff.as_deref(), Some("H2"));
    assert_eq!(parent.runs[8].status, RunStatus::Running);
    let mb = parent.transfers.last().unwrap();
    assert_eq!(mb.status, TransferStatus::ResolvedPortable);
    std::fs::write(&items, "- {kind: user_message, text: \"Merged.\"}\n").unwrap();
    let out = db.complete("th_1", 9, &items);
    assert!(out.contains("handoff H2 consumed"), "{out}");
    let parent = db.export("th_1");
    assert_eq!(
        parent.transfers.last().unwrap().status,
        TransferStatus::Consumed
    );
    let h = parent.handoffs.iter().find(|h| h.id == "H2").unwrap();
    assert_eq!(
        h.status,
        HandoffStatus::Ready,
        "a handoff's status stays in the contract vocabulary"
    );
    // The merge-back's content outlives it: its summary names the fork and what was selected
    // from it, and a policy that hands over prior handoffs passes it on when the parent
    // switches to codex with runs 6-9 (t3code itself does not: it passes handoffs on only in a
    // merge-back's fork delta).
    let summary = h.summary.as_deref().unwrap();
    assert!(
        summary.starts_with("merge-back of fork th_fork, runs 6-6: ")
            && summary.contains("Keep Postgres after all."),
        "{summary}"
    );
    let d = db.json(&[
        "dispatch",
        "--thread",
        "th_1",
        "--target",
        "codex",
        "--policy",
        PRIOR_HANDOFFS,
        "--json",
    ]);
    assert_eq!(d["strategy"], "delta_existing");
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 6, "to": 9}));
    // t3code delivers this one inline.
    let text = d["handoff"]["inline"].as_str().unwrap();
    assert!(text.contains("merge-back of fork th_fork"), "{text}");
    db.integrity_ok();
}

/// t3code's profile with every prior handoff handed over (t3code passes handoffs on only in a
/// merge-back's fork delta).
const PRIOR_HANDOFFS: &str = "tests/fixtures/policies/prior-handoffs.policy";

/// Fork th_1 at run 5 as `child`, resume codex natively there and complete run 6 with
/// `items` (YAML). Returns the items file.
fn fork_with_a_run(db: &Db, child: &str, items: &str) -> PathBuf {
    db.ok(&["fork", "--thread", "th_1", "--at", "5", "--child", child]);
    db.ok(&["dispatch", "--thread", child, "--target", "codex"]);
    let path = db.dir.path().join(format!("{child}-items.yaml"));
    std::fs::write(&path, items).unwrap();
    db.complete(child, 6, &path);
    path
}

#[apply(crate::common::backend::backends)]
fn a_merge_back_rides_alongside_a_handoff_of_the_parents_own(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let items = fork_with_a_run(&db, "f", "- {kind: decision, text: \"Use Redis.\"}\n");
    let first = db.json(&["merge-back", "--thread", "f", "--json"]);
    // Merging the same fork back again supersedes the waiting handoff.
    let again = db.json(&["merge-back", "--thread", "f", "--json"]);
    assert_eq!(again["handoff"]["supersedes"], first["handoff"]["id"]);
    let parent = db.export("th_1");
    let old = parent
        .handoffs
        .iter()
        .find(|h| Some(h.id.as_str()) == first["handoff"]["id"].as_str())
        .unwrap();
    assert_eq!(old.status, HandoffStatus::Superseded);
    // Its pre-grant went with it; the new one's holds.
    let check = |doc: &serde_json::Value| {
        let doc = doc.as_str().unwrap();
        let args = [
            "pregrant", "check", "--thread", "th_1", "--run", "9", "--tool", "Read", "--path", doc,
            "--json",
        ];
        let o = db.run(&args);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["allow"].clone()
    };
    assert_eq!(check(&first["handoff"]["document_path"]), false);
    assert_eq!(check(&again["handoff"]["document_path"]), true);
    // The parent switches to codex: C1 needs runs 6-8 (a handoff of its own), and the
    // merge-back travels beside it, made again for codex (it was made for claude) and
    // recorded into C1.
    let d = db.json(&[
        "dispatch", "--thread", "th_1", "--target", "codex", "--json",
    ]);
    assert_eq!(d["strategy"], "delta_existing");
    assert_eq!(d["handoff"]["strategy"], "delta_since_target_last_seen");
    assert_eq!(d["merge_back"]["supersedes"], again["handoff"]["id"]);
    assert_eq!(d["merge_back"]["covered_thread"], "f");
    let parent = db.export("th_1");
    let mb = parent
        .handoffs
        .iter()
        .find(|h| Some(h.id.as_str()) == d["merge_back"]["id"].as_str())
        .unwrap();
    assert_eq!(mb.to_provider_thread.as_deref(), Some("C1"));
    // One first-turn prompt names both documents.
    let prompt = d["prompt"].as_str().unwrap();
    for doc in [
        &d["handoff"]["document_path"],
        &d["merge_back"]["document_path"],
    ] {
        assert!(prompt.contains(doc.as_str().unwrap()), "{prompt}");
    }
    let parent = db.export("th_1");
    assert_eq!(
        parent.runs[8].handoff,
        d["handoff"]["id"].as_str().map(String::from)
    );
    db.complete("th_1", 9, &items);
    let parent = db.export("th_1");
    assert!(parent
        .transfers
        .iter()
        .filter(|t| t.kind.as_str() != "fork")
        .all(|t| t.status == TransferStatus::Consumed || t.status == TransferStatus::Superseded));
    // Run 9 took the merge-back beside its own handoff: a later handoff covering run 9
    // (back to claude, with a policy that hands over prior handoffs) carries it.
    let d = db.json(&[
        "dispatch",
        "--thread",
        "th_1",
        "--target",
        "claude",
        "--policy",
        PRIOR_HANDOFFS,
        "--json",
    ]);
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 9, "to": 9}));
    let text = d["handoff"]["inline"].as_str().unwrap();
    assert!(text.contains("merge-back of fork f"), "{text}");
    db.integrity_ok();
}

#[apply(crate::common::backend::backends)]
fn a_merge_back_from_a_second_fork_waits_for_the_first(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    for f in ["f1", "f2"] {
        fork_with_a_run(&db, f, "- {kind: decision, text: \"x\"}\n");
    }
    let out = db.ok(&["merge-back", "--thread", "f1"]);
    let doc = db.dir.path().join("docs/th_1/H2/handoff.md");
    assert_eq!(
        out,
        format!(
            "merge-back for parent run 9 on claude\n  into provider thread: L1 (the parent's next run resumes it; a run elsewhere gets the merge-back made again for it)\n  handoff H2 (fork_delta_summary) covers runs 6-6 of fork f1, ready\n  document: {}\n",
            doc.display()
        )
    );
    let err = db.fails(&["merge-back", "--thread", "f2"], 1);
    assert_eq!(
        err,
        format!(
            "{db}: error: thread \"th_1\" already has a merge-back from fork \"f1\" (handoff H2) waiting for its next run; dispatch it first (`baton dispatch{opt} --thread th_1 --target PROVIDER`), then merge this fork back\n",
            db = db.shown(),
            opt = db.db_opt()
        )
    );
}

#[apply(crate::common::backend::backends)]
fn fork_at_5_resolves_portably_on_another_provider(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    db.ok(&["fork", "--thread", "th_1", "--at", "5"]);
    let d = db.json(&[
        "dispatch",
        "--thread",
        "th_1-fork1",
        "--target",
        "claude",
        "--json",
    ]);
    assert_eq!(d["strategy"], "full_new");
    assert_eq!(d["handoff_strategy"], "full_thread_summary");
    assert_eq!(d["covered_runs"], serde_json::json!({"from": 1, "to": 5}));
    let child = db.export("th_1-fork1");
    let t = child.transfers.last().unwrap();
    assert_eq!(t.status, TransferStatus::ResolvedPortable);
    assert_eq!(t.resolution.as_deref(), Some("portable_context"));
    assert_eq!(t.handoff.as_deref(), d["handoff"]["id"].as_str());
    // The parent's codex thread is the parent's: closed in the fork.
    let c1 = child
        .provider_threads
        .iter()
        .find(|p| p.id == "C1")
        .unwrap();
    assert_eq!(c1.status, ProviderThreadStatus::Closed);
}

#[apply(crate::common::backend::backends)]
fn regeneration_supersedes_the_old_handoff_and_links_the_new_one(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    db.ok(&["dispatch", "--thread", "th_1", "--target", "codex"]);
    let before = db.export("th_1");
    let out = db.ok(&["regenerate", "--thread", "th_1", "--handoff", "H2"]);
    assert!(
        out.contains("handoff H3 (delta_since_target_last_seen) covers runs 6-8, ready"),
        "{out}"
    );
    assert!(out.contains("supersedes: H2"), "{out}");
    let after = db.export("th_1");
    let old = after.handoffs.iter().find(|h| h.id == "H2").unwrap();
    assert_eq!(old.status, HandoffStatus::Superseded);
    let was = before.handoffs.iter().find(|h| h.id == "H2").unwrap();
    assert_eq!(
        state::Handoff {
            status: was.status,
            ..old.clone()
        },
        *was,
        "only the status of the old row changed"
    );
    let new = after.handoffs.iter().find(|h| h.id == "H3").unwrap();
    assert_eq!(new.supersedes.as_deref(), Some("H2"));
    assert_eq!(new.to_provider_thread.as_deref(), Some("C1"));
    assert_eq!(after.runs[8].handoff.as_deref(), Some("H3"));
    // A superseded handoff cannot be regenerated again.
    let err = db.fails(&["regenerate", "--thread", "th_1", "--handoff", "H2"], 1);
    assert!(
        err.contains(
            "cannot regenerate handoff \"H2\" of thread \"th_1\": it is already superseded"
        ),
        "{err}"
    );
}

#[apply(crate::common::backend::backends)]
fn forking_from_a_running_run_is_refused(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    db.ok(&["dispatch", "--thread", "th_1", "--target", "codex"]);
    let err = db.fails(&["fork", "--thread", "th_1", "--at", "9"], 1);
    assert_eq!(
        err,
        format!(
            "{}: error: cannot fork thread \"th_1\" at run 9: the run is still running; complete it first: `baton complete{} --thread th_1 --run 9 --items ITEMS_FILE`\n",
            db.shown(),
            db.db_opt()
        )
    );
}

#[rstest_reuse::template]
#[rstest::rstest]
#[case::export_unknown(&["db", "export", "--thread", "nope"], 1, "error: no thread \"nope\" in the database; import it first: `baton db import")]
#[case::dispatch_unknown(&["dispatch", "--thread", "nope", "--target", "codex"], 1, "no thread \"nope\"")]
#[case::dispatch_unknown_target(&["dispatch", "--thread", "th_1", "--target", "gemini"], 1, "unknown provider \"gemini\"")]
#[case::complete_not_running(&["complete", "--thread", "th_1", "--run", "3", "--items", "tests/fixtures/db/items.yaml"], 1, "run 3 of thread \"th_1\" is completed, not running; only a running run can be completed")]
#[case::complete_missing_run(&["complete", "--thread", "th_1", "--run", "30", "--items", "tests/fixtures/db/items.yaml"], 1, "thread \"th_1\" has no run 30 (it has 8 runs)")]
#[case::complete_bad_status(&["complete", "--thread", "th_1", "--run", "3", "--items", "tests/fixtures/db/items.yaml", "--status", "done"], 2, "--status: invalid value \"done\"; expected completed, failed or interrupted")]
#[case::complete_bad_items(&["complete", "--thread", "th_1", "--run", "3", "--items", "tests/fixtures/db/bad-items.yaml"], 1, "tests/fixtures/db/bad-items.yaml:2:10: error: [1].kind: unknown variant `telepathy`, expected one of")]
#[case::complete_missing_items(&["complete", "--thread", "th_1", "--run", "3", "--items", "nope.yaml"], 1, "nope.yaml: error: cannot read items file: no such file")]
#[case::rollback_beyond(&["rollback", "--thread", "th_1", "--to", "12"], 1, "cannot roll thread \"th_1\" back to run 12: the thread has 8 runs")]
#[case::rollback_nothing(&["rollback", "--thread", "th_1", "--to", "8"], 1, "cannot roll thread \"th_1\" back to run 8: no live run after run 8")]
#[case::fork_beyond(&["fork", "--thread", "th_1", "--at", "0"], 1, "cannot fork thread \"th_1\" at run 0: the thread has 8 runs")]
#[case::fork_existing_child(&["fork", "--thread", "th_1", "--at", "2", "--child", "th_1"], 1, "cannot fork thread \"th_1\" at run 2: a thread \"th_1\" is already in the database; name another child (`baton fork")]
#[case::fork_bad_child(&["fork", "--thread", "th_1", "--at", "2", "--child", "../x"], 1, "thread.id")]
#[case::merge_back_not_fork(&["merge-back", "--thread", "th_1"], 1, "thread \"th_1\" is not a fork, so it has nothing to merge back")]
#[case::regenerate_unknown(&["regenerate", "--thread", "th_1", "--handoff", "H7"], 1, "thread \"th_1\" has no handoff \"H7\"")]
#[case::regenerate_consumed(&["regenerate", "--thread", "th_1", "--handoff", "H1"], 1, "cannot regenerate handoff \"H1\" of thread \"th_1\": run 6 is not a running run that consumes it")]
#[case::import_twice(&["db", "import", "examples/seed-switch.yaml"], 1, "thread \"th_1\" is already in the database; to overwrite it: `baton db import")]
#[case::import_invalid(&["db", "import", "tests/fixtures/state/duplicate-item.yaml"], 1, "duplicate-item.yaml")]
#[case::explain_both_sources(&["explain", "--state", "examples/seed-switch.yaml", "--thread", "th_1"], 2, "cannot be used with")]
#[case::import_nothing(&["db", "import"], 2, "required")]
fn bad_inputs(#[case] args: &[&str], #[case] code: i32, #[case] msg: &str) {}

#[apply(bad_inputs)]
fn bad_input_says_what_is_wrong(#[case] args: &[&str], #[case] code: i32, #[case] msg: &str) {
    bad_input_says_what_is_wrong_on(Backend::Sqlite, args, code, msg);
}

#[cfg(feature = "postgres")]
#[apply(bad_inputs)]
fn bad_input_says_what_is_wrong_on_postgres(
    #[case] args: &[&str],
    #[case] code: i32,
    #[case] msg: &str,
) {
    bad_input_says_what_is_wrong_on(Backend::Postgres, args, code, msg);
}

fn bad_input_says_what_is_wrong_on(backend: Backend, args: &[&str], code: i32, msg: &str) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let err = db.fails(args, code);
    assert!(err.contains(msg), "stderr: {err}");
}

/// A fork of a thread whose run took a merge-back keeps it: its range numbers the other
/// fork's runs (6-7 here, beyond the fork point), and only the run that took it counts.
#[apply(crate::common::backend::backends)]
fn forking_after_a_merge_back_keeps_it(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("tests/fixtures/db/merge-back-taken.yaml");
    let items = db.dir.path().join("i.yaml");
    std::fs::write(&items, "- {kind: assistant_message, text: \"Merged.\"}\n").unwrap();
    db.complete("th_t", 2, &items);
    db.ok(&["fork", "--thread", "th_t", "--at", "2", "--child", "th_t2"]);
    let child = db.export("th_t2");
    assert_eq!(child.runs[1].handoff.as_deref(), Some("H1"));
    let h = child.handoffs.iter().find(|h| h.id == "H1").unwrap();
    assert_eq!(h.covered_thread.as_deref(), Some("th_t-fork"));
    assert_eq!(child.transfers[0].kind.as_str(), "merge_back");
    assert_eq!(child.transfers[0].status, TransferStatus::Consumed);
}

/// Rolling a thread back past the run that took a merge-back supersedes it; one still waiting
/// for the next run stays.
#[apply(crate::common::backend::backends)]
fn a_rollback_supersedes_a_taken_merge_back_and_keeps_a_waiting_one(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    fork_with_a_run(&db, "f", "- {kind: decision, text: \"x\"}\n");
    db.ok(&["merge-back", "--thread", "f"]);
    let r = db.json(&["rollback", "--thread", "th_1", "--to", "7", "--json"]);
    assert_eq!(r["handoffs_superseded"], serde_json::json!([]));
    let parent = db.export("th_1");
    assert_eq!(parent.handoffs[1].status, HandoffStatus::Ready);
    assert_eq!(parent.transfers[1].status, TransferStatus::Pending);
    // Run 9 takes it (with H3, the handoff of that dispatch). The rollback left L1, which
    // H2 was made for, divergent: run 9 starts another thread, and the merge-back is made
    // again for it (H4, superseding H2). Rolling back to 8 supersedes H3 and H4, the
    // merge-back with its transfer.
    db.ok(&["dispatch", "--thread", "th_1", "--target", "claude"]);
    let items = db.dir.path().join("i.yaml");
    std::fs::write(&items, "- {kind: decision, text: \"y\"}\n").unwrap();
    db.complete("th_1", 9, &items);
    let parent = db.export("th_1");
    assert_eq!(parent.handoffs[1].status, HandoffStatus::Superseded);
    assert_eq!(parent.handoffs[3].supersedes.as_deref(), Some("H2"));
    assert_eq!(
        parent.handoffs[3].to_provider_thread, parent.runs[8].provider_thread,
        "H4 went into the provider thread of run 9"
    );
    let r = db.json(&["rollback", "--thread", "th_1", "--to", "8", "--json"]);
    assert_eq!(r["handoffs_superseded"], serde_json::json!(["H3", "H4"]));
    let parent = db.export("th_1");
    assert_eq!(parent.handoffs[2].target_run, Some(9), "H3 went into run 9");
    assert_eq!(parent.transfers[1].status, TransferStatus::Superseded);
}

/// Stored merge-backs in states the lifecycle does not make itself (imported state files).
#[rstest_reuse::template]
#[rstest::rstest]
#[case::pending_for_a_past_run(
    "tests/fixtures/db/merge-back-stale.yaml",
    &["dispatch", "--thread", "th_m", "--target", "codex"],
    "error: thread \"th_m\": merge-back transfer T1 is pending, but it names no ready handoff for run 2; supersede the transfer or merge the fork back again"
)]
#[case::regenerate_a_merge_back(
    "tests/fixtures/db/merge-back-taken.yaml",
    &["regenerate", "--thread", "th_t", "--handoff", "H1"],
    "error: cannot regenerate handoff \"H1\" of thread \"th_t\": it is a merge-back from fork \"th_t-fork\"; merge the fork back again instead"
)]
fn bad_merge_back_rows(#[case] state: &str, #[case] args: &[&str], #[case] msg: &str) {}

#[apply(bad_merge_back_rows)]
fn bad_merge_back_rows_say_what_is_wrong(
    #[case] state: &str,
    #[case] args: &[&str],
    #[case] msg: &str,
) {
    bad_merge_back_rows_say_what_is_wrong_on(Backend::Sqlite, state, args, msg);
}

#[cfg(feature = "postgres")]
#[apply(bad_merge_back_rows)]
fn bad_merge_back_rows_say_what_is_wrong_on_postgres(
    #[case] state: &str,
    #[case] args: &[&str],
    #[case] msg: &str,
) {
    bad_merge_back_rows_say_what_is_wrong_on(Backend::Postgres, state, args, msg);
}

fn bad_merge_back_rows_say_what_is_wrong_on(
    backend: Backend,
    state: &str,
    args: &[&str],
    msg: &str,
) {
    let db = Db::new(backend);
    db.import(state);
    let err = db.fails(args, 1);
    assert!(err.contains(msg), "stderr: {err}");
}

#[apply(crate::common::backend::backends)]
fn an_unsupported_target_starts_no_run_but_logs_the_decision(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/ladder-unsupported.yaml");
    let o = db.run(&[
        "dispatch",
        "--thread",
        "th_unsupported",
        "--target",
        "legacybot",
    ]);
    assert_eq!(o.status.code(), Some(1));
    // One message, no "started run" line before it; the command it suggests can be pasted.
    let message = format!(
        "error: no run started: the policy decided `unsupported` for run 3 on legacybot (the provider cannot take handoff context, default.policy:41:3); nothing was recorded but the decision log. Dispatch to another provider: `baton dispatch --db {} --thread th_unsupported --target PROVIDER`\n",
        db.shown()
    );
    assert_eq!(String::from_utf8_lossy(&o.stderr), message);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(db.export("th_unsupported").runs.len(), 2);
    assert_eq!(count(&db, "decision_log"), 1);
    // With --json: the result (nothing started) on stdout, the same one message, exit 1.
    let o = db.run(&[
        "dispatch",
        "--thread",
        "th_unsupported",
        "--target",
        "legacybot",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr), message);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["strategy"], "unsupported");
    assert_eq!(v["handoff"], serde_json::Value::Null);
    assert_eq!(v["fork_point"], serde_json::Value::Null);
    assert_eq!(v["recorded"]["started"], false);
    assert_eq!(v["recorded"]["provider_thread"], serde_json::Value::Null);
    assert_eq!(db.export("th_unsupported").runs.len(), 2);
}

#[apply(crate::common::backend::backends)]
fn render_reads_a_stored_thread(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let from_db = db.ok(&["render", "--thread", "th_1"]);
    let from_file = db.ok(&["render", "--state", "examples/seed-switch.yaml"]);
    assert_eq!(from_db, from_file);
    assert!(from_db.contains("Review the OAuth flow for CSRF issues."));
}

// SQLite only: a file that cannot be opened.
#[test]
fn a_database_that_cannot_be_opened_says_so() {
    let db = Db::new(Backend::Sqlite);
    let missing = db.dir.path().join("no/such/dir/b.db");
    let err = db.fails(&["db", "init", "--db", missing.to_str().unwrap()], 1);
    assert_eq!(
        err,
        format!(
            "{}: error: cannot open database: cannot create or open the file (does its directory exist, and is it writable?)\n",
            missing.display()
        )
    );
    let garbage = db.dir.path().join("garbage.db");
    std::fs::write(&garbage, "this is not a database, just some text that is long enough to fill a header page of sqlite .......................").unwrap();
    let err = db.fails(
        &[
            "db",
            "export",
            "--db",
            garbage.to_str().unwrap(),
            "--thread",
            "t",
        ],
        1,
    );
    assert!(
        err.starts_with(&format!(
            "{}: error: database error while configuring the connection: file is not a database",
            garbage.display()
        )),
        "{err}"
    );
}

#[apply(crate::common::backend::backends)]
fn merge_back_with_nothing_new_is_refused(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    db.ok(&["fork", "--thread", "th_1", "--at", "3", "--child", "f"]);
    let err = db.fails(&["merge-back", "--thread", "f"], 1);
    assert!(
        err.contains(
            "fork \"f\" has no runs of its own after the fork point (run 3); nothing to merge back"
        ),
        "{err}"
    );
}

// SQLite only: the default is a file in the current directory.
#[test]
fn the_db_path_defaults_to_baton_db_env_then_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .current_dir(dir.path())
        .env_remove("BATON_DB")
        .args(["db", "init"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(dir.path().join("baton.db").exists());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "baton.db: schema version 9\n"
    );
}

#[apply(crate::common::backend::backends)]
fn two_racing_processes_start_one_run(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let children: Vec<_> = (0..2)
        .map(|_| {
            db.cmd(&["dispatch", "--thread", "th_1", "--target", "codex"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{outs:?}");
    let loser = outs.iter().find(|o| !o.status.success()).unwrap();
    assert!(
        String::from_utf8_lossy(&loser.stderr)
            .contains("run 9 of thread \"th_1\" is still running"),
        "{loser:?}"
    );
    let s = db.export("th_1");
    assert_eq!(
        (s.runs.len(), s.handoffs.len(), s.provider_threads.len()),
        (9, 2, 2)
    );
    db.integrity_ok();
}

// SQLite only: a file another connection holds SQLite's write lock on.
#[test]
fn a_locked_database_is_reported_not_corrupted() {
    let db = Db::new(Backend::Sqlite);
    db.import("examples/seed-switch.yaml");
    let holder = rusqlite::Connection::open(&db.url).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let o = db
        .cmd(&["dispatch", "--thread", "th_1", "--target", "codex"])
        .env("BATON_BUSY_TIMEOUT_MS", "200")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "{}: error: the database is locked by another process (still busy after 200 ms while starting a dispatch); try again when it has finished\n",
            db.shown()
        )
    );
    holder.execute_batch("ROLLBACK").unwrap();
    db.integrity_ok();
    assert_eq!(db.export("th_1"), seed());
}

fn count(db: &Db, table: &str) -> i64 {
    db.scalar(&format!("SELECT COUNT(*) FROM {table}"))
}

/// Kill the process at a chosen step of a dispatch: the database is before or after the
/// whole operation, never between.
#[rstest_reuse::template]
#[rstest::rstest]
#[case::after_decide("dispatch:after_decide", false)]
#[case::after_handoff("dispatch:after_handoff", false)]
#[case::after_commit("dispatch:after_commit", true)]
fn dispatch_kill_points(#[case] step: &str, #[case] committed: bool) {}

#[apply(dispatch_kill_points)]
fn a_dispatch_killed_midway_leaves_the_database_before_or_after(
    #[case] step: &str,
    #[case] committed: bool,
) {
    a_dispatch_killed_midway_leaves_the_database_before_or_after_on(
        Backend::Sqlite,
        step,
        committed,
    );
}

#[cfg(feature = "postgres")]
#[apply(dispatch_kill_points)]
fn a_dispatch_killed_midway_leaves_the_database_before_or_after_on_postgres(
    #[case] step: &str,
    #[case] committed: bool,
) {
    a_dispatch_killed_midway_leaves_the_database_before_or_after_on(
        Backend::Postgres,
        step,
        committed,
    );
}

fn a_dispatch_killed_midway_leaves_the_database_before_or_after_on(
    backend: Backend,
    step: &str,
    committed: bool,
) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let before = db.export("th_1");
    let o = db
        .cmd(&["dispatch", "--thread", "th_1", "--target", "codex"])
        .env("BATON_FAULT", step)
        .output()
        .unwrap();
    assert!(!o.status.success(), "the fault hook aborts the process");
    db.integrity_ok();
    let after = db.export("th_1");
    if committed {
        assert_eq!(after.runs.len(), 9);
        assert_eq!(after.handoffs.len(), 2);
        assert_eq!((count(&db, "decision_log"), count(&db, "grants")), (1, 1));
    } else {
        assert_eq!(after, before);
        assert_eq!((count(&db, "decision_log"), count(&db, "grants")), (0, 0));
        // And the thread still works.
        db.ok(&["dispatch", "--thread", "th_1", "--target", "codex"]);
        assert_eq!(db.export("th_1").runs.len(), 9);
    }
}

/// The rollback's advice for a provider thread that can roll back says how many of its turns
/// to keep; when every one of them was undone, it says so in words.
#[rstest_reuse::template]
#[rstest::rstest]
#[case::all_undone("5", "claude thread L1: roll it back with claude's own rollback, undoing all its turns (its turns for runs 6-8 were undone)")]
#[case::one_kept("6", "claude thread L1: roll it back with claude's own rollback, keeping its first turn (its turns for runs 7-8 were undone)")]
#[case::two_kept("7", "claude thread L1: roll it back with claude's own rollback, keeping its first 2 turns (its turn for run 8 was undone)")]
fn rollback_points(#[case] to: &str, #[case] line: &str) {}

#[apply(rollback_points)]
fn rollback_advice_counts_the_turns_kept(#[case] to: &str, #[case] line: &str) {
    rollback_advice_counts_the_turns_kept_on(Backend::Sqlite, to, line);
}

#[cfg(feature = "postgres")]
#[apply(rollback_points)]
fn rollback_advice_counts_the_turns_kept_on_postgres(#[case] to: &str, #[case] line: &str) {
    rollback_advice_counts_the_turns_kept_on(Backend::Postgres, to, line);
}

fn rollback_advice_counts_the_turns_kept_on(backend: Backend, to: &str, line: &str) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    let out = db.ok(&[
        "rollback", "--thread", "th_1", "--to", to, "--policy", "t3code",
    ]);
    assert!(
        out.lines().any(|l| l.trim_start().starts_with(line)),
        "{out}"
    );
}

/// Issue 24, point 7: after a fork's first dispatch (here portable, onto claude, which had no
/// thread in the fork), `baton explain --db --thread FORK --target claude` decides as the next
/// dispatch will: the fork's own claude thread is active and has seen every run, so it is not
/// `full_new` "no thread for this provider yet".
#[apply(crate::common::backend::backends)]
fn explain_on_a_fork_after_its_first_dispatch_sees_the_forks_own_thread(#[case] backend: Backend) {
    let db = Db::new(backend);
    db.import("examples/seed-switch.yaml");
    db.ok(&[
        "fork", "--thread", "th_1", "--at", "5", "--child", "th_fork",
    ]);
    let d = db.json(&[
        "dispatch", "--thread", "th_fork", "--target", "claude", "--json",
    ]);
    assert_eq!(d["strategy"], "full_new", "{d}");
    let created = d["recorded"]["provider_thread"]
        .as_str()
        .unwrap()
        .to_string();
    let items = db.dir.path().join("fork-run.yaml");
    std::fs::write(
        &items,
        "- {kind: user_message, text: \"Try a Redis session store.\"}\n- {kind: assistant_message, text: \"Done.\"}\n",
    )
    .unwrap();
    db.complete("th_fork", 6, &items);
    let e = db.json(&[
        "explain", "--thread", "th_fork", "--target", "claude", "--json",
    ]);
    assert_eq!(e["strategy"], "no_handoff", "{e}");
    assert_eq!(e["provider_thread"]["id"], created.as_str(), "{e}");
    let human = db.ok(&["explain", "--thread", "th_fork", "--target", "claude"]);
    assert!(
        !human.contains("no thread for this provider yet"),
        "{human}"
    );
    // The next dispatch agrees.
    let d = db.json(&[
        "dispatch", "--thread", "th_fork", "--target", "claude", "--json",
    ]);
    assert_eq!(d["strategy"], "no_handoff", "{d}");
}
