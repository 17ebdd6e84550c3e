//! Store benchmarks: import of a long thread, full load, dispatch (load from SQLite + decide +
//! render + deliver + record) and `complete_run` on threads of 100, 1,000 and 10,000 runs with
//! the same covered delta. At the end it prints the ratios of the 10,000-run and 1,000-run
//! figures to the 100-run ones (from criterion's estimates in `target/criterion`).
//!
//! The threads have 10 items per run. Providers alternate in blocks of five runs (codex on
//! C1, claude on L1); every switch consumes a handoff into the thread being entered. The
//! thread ends with a claude block, so a dispatch to codex resumes C1 with a delta of the
//! last 5 runs, whatever the length of the thread.
//!
//! Run with:
//!   cargo bench --features unstable --bench store -- --warm-up-time 1 --measurement-time 3
use baton::state::*;
use baton::store::{self, DispatchRequest, Store};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use std::path::{Path, PathBuf};

const BLOCK: u32 = 5;

fn items(o: u32) -> Vec<Item> {
    let t = |s: String| s;
    vec![
        Item::UserMessage {
            id: None,
            text: t(format!(
                "Step {o}: extend the OAuth flow and keep the tests green."
            )),
        },
        Item::Reasoning {
            id: None,
            text: t(format!(
                "Run {o} needs the callback route; check the router first."
            )),
        },
        Item::AssistantMessage {
            id: None,
            text: t(format!(
                "Run {o}: I will change the handler and add a test."
            )),
        },
        Item::FileChange {
            id: None,
            path: format!("src/mod_{}.rs", o % 17),
            change: Some(FileChangeKind::Modified),
            diff_lines: Some(10 + (o % 300) as i64),
            diff: None,
        },
        Item::Command {
            id: None,
            command: "cargo test".into(),
            exit_code: Some((o % 2) as i64),
            output: Some(format!("test result: {} passed", 40 + o % 7)),
        },
        Item::ToolCall {
            id: None,
            tool: "Read".into(),
            input: Some(format!("src/mod_{}.rs", o % 17)),
            status: Some(ToolStatus::Completed),
            output: Some("fn handler() {}".into()),
        },
        Item::Plan {
            id: None,
            steps: vec![
                PlanStep {
                    text: "Add route".into(),
                    status: StepStatus::Done,
                },
                PlanStep {
                    text: "Write tests".into(),
                    status: StepStatus::InProgress,
                },
            ],
        },
        Item::Decision {
            id: None,
            text: format!("Run {o}: keep sessions in Postgres."),
        },
        Item::Narration {
            id: None,
            text: format!("Looking at src/mod_{}.rs now.", o % 17),
        },
        Item::Protocol {
            id: None,
            text: "event: turn.completed".into(),
        },
    ]
}

/// A thread of `n` runs (a multiple of 10: the last block is claude's).
fn thread(n: u32) -> State {
    let pt = |id: &str, provider: &str, model: &str| ProviderThread {
        id: id.into(),
        provider: provider.into(),
        model: Some(model.into()),
        runtime_mode: Some("full_access".into()),
        status: ProviderThreadStatus::Active,
        resume_failed: false,
    };
    let mut handoffs = Vec::new();
    let mut runs = Vec::new();
    let mut seen = [0u32; 2];
    for start in (1..=n).step_by(BLOCK as usize) {
        let p = (((start - 1) / BLOCK) % 2) as usize;
        let (provider, id, from) = if p == 0 {
            ("codex", "C1", "L1")
        } else {
            ("claude", "L1", "C1")
        };
        let mut handoff = None;
        if start > 1 && seen[p] + 1 < start {
            let h = format!("H{}", handoffs.len() + 1);
            handoffs.push(Handoff {
                id: h.clone(),
                transfer: None,
                target_run: Some(start),
                from_provider_threads: vec![from.into()],
                to_provider_thread: Some(id.into()),
                covered: RunRange {
                    from: seen[p] + 1,
                    to: start - 1,
                },
                covered_thread: None,
                strategy: if seen[p] == 0 {
                    HandoffStrategy::FullThreadSummary
                } else {
                    HandoffStrategy::DeltaSinceTargetLastSeen
                },
                status: HandoffStatus::Ready,
                created_by: Some("deterministic".into()),
                summary: None,
                supersedes: None,
            });
            handoff = Some(h);
        }
        for o in start..(start + BLOCK).min(n + 1) {
            runs.push(Run {
                ordinal: o,
                provider: provider.into(),
                provider_thread: Some(id.into()),
                status: RunStatus::Completed,
                handoff: if o == start { handoff.clone() } else { None },
                items: items(o),
                started_at: None,
                ended_at: None,
                workspace: None,
            });
        }
        seen[p] = (start + BLOCK - 1).min(n);
    }
    State {
        version: 1,
        thread: Thread {
            id: "th_bench".into(),
            title: Some("Benchmark thread".into()),
            compact_summary: None,
            compact_summary_through: None,
            parent: None,
            workspace: None,
        },
        providers: Default::default(),
        provider_threads: vec![
            pt("C1", "codex", "gpt-5-codex"),
            pt("L1", "claude", "claude-sonnet-4"),
        ],
        runs,
        handoffs,
        transfers: Vec::new(),
        checkpoints: Vec::new(),
        request: Request {
            provider: "codex".into(),
            model: None,
            runtime_mode: None,
            clean_context: false,
            message: Some("Carry on.".into()),
            kind: RequestKind::Dispatch,
            fork_anchor: None,
            at: None,
            workspace: None,
        },
    }
}

/// A database file holding `thread(n)`, closed (checkpointed) so a file copy is complete.
fn prepared(dir: &Path, n: u32) -> PathBuf {
    let path = dir.join(format!("prepared-{n}.db"));
    let mut s = Store::open(&path).expect("opens");
    s.import(&thread(n)).expect("imports");
    drop(s);
    path
}

/// A store on a scratch file (its own copy of a prepared file, or a new one); the files go when it is dropped (outside the
/// timed routine), so the copies of a long run neither fill the disk nor leave dirty pages
/// for later iterations' writes to flush.
struct Copy {
    store: Store,
    path: PathBuf,
}

impl Drop for Copy {
    fn drop(&mut self) {
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", self.path.display()));
        }
    }
}

fn fresh_copy(dir: &Path, from: &Path, k: &mut u64) -> Copy {
    *k += 1;
    let to = dir.join(format!("copy-{k}.db"));
    std::fs::copy(from, &to).expect("copies");
    Copy {
        store: Store::open(&to).expect("opens copy"),
        path: to,
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = dir.path().join("docs");
    let policy = baton::policy::load("default").expect("default policy");
    let engine = baton::Engine::new("default").expect("default engine");
    let mut k = 0u64;

    let mut g = c.benchmark_group("store");
    g.sample_size(10);
    let big = thread(10_000);
    g.bench_function("import/10000", |b| {
        b.iter_batched(
            || {
                k += 1;
                let path = dir.path().join(format!("import-{k}.db"));
                Copy {
                    store: Store::open(&path).expect("opens"),
                    path,
                }
            },
            |mut c| {
                c.store.import(&big).expect("imports");
                c
            },
            BatchSize::PerIteration,
        )
    });
    for n in [100u32, 1_000, 10_000] {
        let db = prepared(dir.path(), n);
        let store = Store::open(&db).expect("opens");
        g.bench_with_input(BenchmarkId::new("load_full", n), &n, |b, _| {
            b.iter(|| store.load("th_bench").expect("loads"))
        });
        g.bench_with_input(BenchmarkId::new("load_metadata", n), &n, |b, _| {
            b.iter(|| store.load_items_after("th_bench", u32::MAX).expect("loads"))
        });
        let meta = store.load_items_after("th_bench", u32::MAX).expect("loads");
        let eval = baton::EvalOptions {
            target: Some("claude".into()),
            document_root: None,
        };
        g.bench_with_input(BenchmarkId::new("decide_on_metadata", n), &n, |b, _| {
            b.iter(|| baton::pipeline::decide(&policy, &meta, &eval).expect("decides"))
        });
        drop(store);
        let req = DispatchRequest {
            thread: "th_bench".into(),
            target: "codex".into(),
            message: Some("Carry on.".into()),
            ..Default::default()
        };
        // The engine every store operation takes: the policy, the embedded templates and the
        // off-band root, resolved once.
        let with_docs = baton::Engine::from_parts(
            std::sync::Arc::new(policy.clone()),
            baton::TemplateSet::embedded(),
            Some(docs.clone()),
        )
        .expect("builds");
        g.bench_with_input(BenchmarkId::new("dispatch", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &db, &mut k),
                |mut c| {
                    let d = store::dispatch(&mut c.store, &with_docs, &req).expect("dispatches");
                    assert_eq!(
                        d.decision.covered_runs.as_ref().map(|c| c.to - c.from + 1),
                        Some(5)
                    );
                    c
                },
                BatchSize::PerIteration,
            )
        });
        // Metadata in a fresh connection on a fresh copy: what a dispatch's load costs.
        g.bench_with_input(BenchmarkId::new("load_metadata_cold", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &db, &mut k),
                |c| {
                    let st = c
                        .store
                        .load_items_after("th_bench", u32::MAX)
                        .expect("loads");
                    (c, st)
                },
                BatchSize::PerIteration,
            )
        });
        // The same, to claude, whose thread saw every run: no handoff to render or deliver.
        let req = DispatchRequest {
            target: "claude".into(),
            ..req
        };
        // Complete the run a dispatch to claude started: the items appended, the status set.
        let started = dir.path().join(format!("started-{n}.db"));
        std::fs::copy(&db, &started).expect("copies");
        let mut s = Store::open(&started).expect("opens");
        store::dispatch(
            &mut s,
            &with_docs,
            &DispatchRequest {
                target: "claude".into(),
                ..req.clone()
            },
        )
        .expect("dispatches");
        drop(s);
        g.bench_with_input(BenchmarkId::new("complete_run", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &started, &mut k),
                |mut c| {
                    store::complete_run(
                        &mut c.store,
                        "th_bench",
                        n + 1,
                        items(n + 1),
                        RunStatus::Completed,
                    )
                    .expect("completes");
                    c
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_with_input(BenchmarkId::new("dispatch_no_handoff", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &db, &mut k),
                |mut c| {
                    let d = store::dispatch(&mut c.store, &with_docs, &req).expect("dispatches");
                    assert!(d.handoff.is_none());
                    c
                },
                BatchSize::PerIteration,
            )
        });
        // A thread's second logged dispatch: codex was dispatched and completed (run n+1), and
        // claude follows with a delta of that one run. Its input is logged as a delta on the
        // first dispatch's, not as a keyframe.
        let second = dir.path().join(format!("second-{n}.db"));
        std::fs::copy(&db, &second).expect("copies");
        let mut s = Store::open(&second).expect("opens");
        let first = DispatchRequest {
            target: "codex".into(),
            ..req.clone()
        };
        let d = store::dispatch(&mut s, &with_docs, &first).expect("dispatches");
        store::complete_run(
            &mut s,
            "th_bench",
            d.run,
            items(d.run),
            RunStatus::Completed,
        )
        .expect("completes");
        drop(s);
        g.bench_with_input(BenchmarkId::new("dispatch_second", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &second, &mut k),
                |mut c| {
                    let d = store::dispatch(&mut c.store, &with_docs, &req).expect("dispatches");
                    assert_eq!(
                        d.decision.covered_runs.as_ref().map(|c| c.to - c.from + 1),
                        Some(1)
                    );
                    c
                },
                BatchSize::PerIteration,
            )
        });
        // What `baton explain --db --thread` and the service's explain of a stored thread do
        // (`Store::decide`): read the thread (a window of it when that decides the same), decide
        // (its request: codex, a delta of 5 runs) and fit the handoff.
        g.bench_with_input(BenchmarkId::new("explain_stored", n), &n, |b, _| {
            b.iter_batched(
                || fresh_copy(dir.path(), &db, &mut k),
                |c| {
                    let d = c
                        .store
                        .decide(&engine, "th_bench", None)
                        .expect("reads")
                        .expect("decides");
                    (c, d)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
    ratios();
}

/// The 1,000- and 10,000-run medians of each size-dependent benchmark against its 100-run
/// median, from criterion's estimates of this run.
fn ratios() {
    let median = |name: &str, n: u32| -> Option<f64> {
        let path = format!("target/criterion/store/{name}/{n}/new/estimates.json");
        let text = std::fs::read_to_string(path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("median")?.get("point_estimate")?.as_f64()
    };
    for name in [
        "complete_run",
        "dispatch_no_handoff",
        "dispatch",
        "dispatch_second",
        "explain_stored",
        "load_metadata",
        "load_full",
    ] {
        let (Some(a), Some(b), Some(c)) =
            (median(name, 100), median(name, 1_000), median(name, 10_000))
        else {
            continue;
        };
        println!(
            "ratio {name}: 100 runs {:.3} ms, 1,000 runs {:.2}x, 10,000 runs {:.2}x",
            a / 1e6,
            b / a,
            c / a
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
