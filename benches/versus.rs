//! baton side by side with other ways of making the same decision, in one process:
//!
//! - `decide`: baton's `eval::decide` (the shipped `default` policy, with its full trace)
//!   against the same decision hand-written in Rust (`hand_decide`) and against regorus, the
//!   Rust Rego interpreter, evaluating the equivalent Rego policy (`benches/rego/default.rego`;
//!   tests/rego_agreement.rs checks that the two agree on every example state).
//! - `render`: baton's `select` + `render` (with the engine's compiled templates) against a
//!   hand-written selection of the same delta runs concatenated into markdown.
//!
//! Threads of 10 and 10,000 runs (10 items each), built as in benches/engine.rs: providers
//! alternate in blocks of five runs, each switch consumes a handoff, the request enters codex
//! after a claude block, and the decision is `delta_existing`.
//!
//! Besides criterion's absolute times, the bench prints ratios: in each round it times a
//! batch of each contender back to back and divides; it reports the median of the per-round
//! ratios, which the shared machine's load moves far less than it moves absolute times.
//!
//!   cargo bench --bench versus -- --warm-up-time 1 --measurement-time 3
//!   BATON_VERSUS_ROUNDS=31 cargo bench --bench versus -- ratios   # the ratios only

#[path = "support/hand_render.rs"]
mod hand_render;
#[path = "rego/input.rs"]
mod rego;
#[path = "support/thread.rs"]
mod thread;

use baton::decision::Decision;
use baton::eval::{decide, EvalOptions, RoughSizer};
use baton::state::{caps_for, HandoffStatus, ProviderThreadStatus, RequestKind, RunStatus, State};
use criterion::{criterion_group, BenchmarkId, Criterion};
use std::hint::black_box;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SIZES: &[usize] = &[10, 10_000];

/// The state of benches/engine.rs: `n` runs, codex and claude in blocks of five.
fn state(n: usize) -> State {
    baton::state::parse_str(
        &thread::state_yaml(n),
        baton::state::Format::Yaml,
        "bench.yaml",
    )
    .expect("valid state")
}

/// What the hand-written decision decides: the fields of baton's decision the default policy
/// determines (no trace).
#[derive(Debug, PartialEq)]
struct HandDecision {
    strategy: &'static str,
    stale: Vec<&'static str>,
    covered: Option<(u32, u32)>,
    off_band: bool,
    /// The provider thread resumed (`None` when one is created).
    provider_thread: Option<String>,
    /// The id the handoff gets.
    handoff_id: Option<String>,
    /// The off-band document's path: the canonical document root, the thread, the handoff.
    document: Option<String>,
}

/// The default policy's decision, written directly against the state (the same facts: target
/// thread, coverage, signals, ladder, delivery, the handoff id and the off-band document's
/// path under the canonical root), for a request that is not a fork.
fn hand_decide(state: &State, root: &Path) -> HandDecision {
    let target = state.request.provider.as_str();
    let caps = caps_for(state, target);
    let n = state.runs.len();
    let eligible = |o: u32| {
        state.runs.get(o as usize - 1).is_some_and(|r| {
            matches!(
                r.status,
                RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
            )
        })
    };
    // The target thread: the one the newest run of the provider used.
    let pt = state
        .runs
        .iter()
        .rev()
        .find(|r| r.provider == target && r.provider_thread.is_some())
        .and_then(|r| r.provider_thread.as_deref())
        .and_then(|id| {
            state
                .provider_threads
                .iter()
                .find(|p| p.id == id && p.status != ProviderThreadStatus::Closed)
        });
    let (mut last_native, mut last_clean, mut native) = (0u32, 0u32, 0u32);
    let (mut off, mut since) = (0i64, 0i64);
    let mut last_seen = 0u32;
    let mut chained = 0i64;
    if let Some(pt) = pt {
        for r in &state.runs {
            if r.provider_thread.as_deref() == Some(pt.id.as_str()) && eligible(r.ordinal) {
                last_native = r.ordinal;
                native += 1;
                if r.handoff.is_none() {
                    last_clean = r.ordinal;
                }
            }
        }
        last_seen = last_native;
        for h in &state.handoffs {
            if h.status == HandoffStatus::Ready && h.to_provider_thread.as_deref() == Some(&pt.id) {
                if h.covered.to > last_seen {
                    last_seen = h.covered.to;
                }
                if h.target_run.unwrap_or(h.covered.to + 1) > last_clean {
                    chained += 1;
                }
            }
        }
    }
    let _ = native;
    let mut delta_chars = 0i64;
    let mut first_delta = None;
    let mut eligible_count = 0;
    for r in &state.runs {
        if !eligible(r.ordinal) {
            continue;
        }
        eligible_count += 1;
        if r.ordinal > last_native && r.provider != target {
            off += 1;
        }
        if r.ordinal > last_seen {
            since += 1;
            first_delta.get_or_insert(r.ordinal);
            delta_chars += r
                .items
                .iter()
                .filter(|i| !matches!(i.kind(), "reasoning" | "protocol"))
                .map(|i| i.char_len() as i64)
                .sum::<i64>();
        }
    }
    let mut stale = Vec::new();
    if off > 12 {
        stale.push("too_many_off_provider_runs");
    }
    if chained >= 3 {
        stale.push("too_many_chained_handoffs");
    }
    if let Some(pt) = pt {
        let same = state.request.provider == target;
        if same && matches!((&state.request.model, &pt.model), (Some(a), Some(b)) if a != b) {
            stale.push("model_changed");
        }
        if same
            && matches!((&state.request.runtime_mode, &pt.runtime_mode), (Some(a), Some(b)) if a != b)
        {
            stale.push("runtime_mode_changed");
        }
        if pt.resume_failed {
            stale.push("resume_failed");
        }
        if matches!(
            pt.status,
            ProviderThreadStatus::Divergent | ProviderThreadStatus::RolledBack
        ) {
            stale.push("diverged");
        }
    }
    if state.request.clean_context {
        stale.push("clean_context");
    }
    if pt.is_some() && since > 0 && delta_chars > caps.max_input_chars_per_turn as i64 {
        stale.push("over_budget");
    }
    let strategy = if state.request.kind == RequestKind::Fork {
        unreachable!("the bench's states are not forks")
    } else if pt.is_some() && since == 0 && stale.is_empty() {
        "no_handoff"
    } else if !caps.accepts_handoff && eligible_count > 0 {
        "unsupported"
    } else if pt.is_none() || !stale.is_empty() || !caps.resume {
        "full_new"
    } else if chained < 2 {
        "delta_existing"
    } else {
        "full_existing"
    };
    let covered = match strategy {
        "delta_existing" => first_delta.map(|f| (f, n as u32)),
        "full_new" | "full_existing" => (eligible_count > 0).then_some((1, n as u32)),
        _ => None,
    };
    let off_band = covered.is_some() && caps.file_read;
    let handoff_id = covered.map(|_| format!("H{}", state.handoffs.len() + 1));
    // Off-band, the decision names the document: under the canonical root (symlinks resolved,
    // as a pre-grant's path must be), by thread and handoff.
    let document = handoff_id.as_ref().filter(|_| off_band).map(|hid| {
        let mut path = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        path.push(&state.thread.id);
        path.push(hid);
        path.push("handoff.md");
        path.into_os_string().into_string().unwrap_or_default()
    });
    HandDecision {
        strategy,
        stale,
        covered,
        off_band,
        provider_thread: pt.filter(|_| strategy != "full_new").map(|p| p.id.clone()),
        handoff_id,
        document,
    }
}

fn hand_of(d: &Decision) -> HandDecision {
    let strategy = d.strategy.as_str();
    HandDecision {
        strategy: [
            "no_handoff",
            "unsupported",
            "full_new",
            "delta_existing",
            "full_existing",
        ]
        .into_iter()
        .find(|s| *s == strategy)
        .unwrap_or("other"),
        stale: d.stale.iter().map(|s| &*s.clone().leak()).collect(),
        covered: d.covered_runs.as_ref().map(|r| (r.from, r.to)),
        off_band: d
            .delivery
            .as_ref()
            .is_some_and(|x| x.mode.as_str() == "off_band"),
        provider_thread: d.provider_thread.id.clone(),
        handoff_id: d.handoff_id.clone(),
        document: d.delivery.as_ref().and_then(|x| x.document.clone()),
    }
}

/// What the hand-written render takes from baton's decision (as `Engine::render` takes the
/// decision): the covered runs, the handoff's id and strategy, delivery and the limits.
fn job_of(state: &State, d: &Decision) -> hand_render::Job {
    let (covered, delivery) = (
        d.covered_runs.as_ref().expect("a handoff covers runs"),
        d.delivery.as_ref().expect("a handoff is delivered"),
    );
    hand_render::Job {
        target: d.target.clone(),
        strategy: d.strategy.as_str().to_string(),
        handoff_id: d.handoff_id.clone().expect("a handoff id"),
        handoff_strategy: d
            .handoff_strategy
            .expect("a handoff strategy")
            .as_str()
            .to_string(),
        from: covered.from,
        to: covered.to,
        document_path: delivery.document.clone(),
        inline_limit: delivery.inline_limit,
        first_turn_limit: caps_for(state, &d.target).max_input_chars_per_turn as usize,
        document_limit: 60_000,
        policy_name: d.policy.name.clone(),
        policy_sha12: d.policy.sha256.get(..12).unwrap_or_default().to_string(),
    }
}

struct Fixture {
    n: usize,
    state: State,
    policy: baton::Policy,
    opts: EvalOptions,
    /// The off-band document root both contenders name the document under.
    root: PathBuf,
    engine: baton::Engine,
    rego: regorus::Engine,
    rego_input: regorus::Value,
}

fn fixture(n: usize) -> Fixture {
    let state = state(n);
    let policy = baton::policy::load("default").expect("default checks");
    // An existing private directory, so that both contenders canonicalise a real path.
    let root = std::env::temp_dir().join("baton-bench-versus");
    std::fs::create_dir_all(&root).expect("creates the document root");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
        .expect("makes the document root private");
    let opts = EvalOptions {
        target: None,
        document_root: Some(root.clone()),
    };
    let d = decide(&policy, &state, &opts, &RoughSizer).expect("decides");
    assert_eq!(d.strategy.as_str(), "delta_existing", "{n} runs");
    assert_eq!(
        hand_of(&d),
        hand_decide(&state, &root),
        "{n} runs: hand-written agrees"
    );
    let mut rego = rego::engine();
    let rego_input = rego::input(&state, None);
    let (strategy, stale, _) = rego::decide(&mut rego, &rego_input);
    assert_eq!(
        (strategy.as_str(), stale),
        (d.strategy.as_str(), d.stale.clone())
    );
    let engine = baton::Engine::new("default").expect("default engine");
    if n == 10 {
        // The hand-written render selects and renders what baton does, byte for byte.
        let out = engine.render(&state, &d).expect("renders");
        let r = out.rendered.expect("a handoff");
        let hand = hand_render::hand_render(&state, &job_of(&state, &d));
        assert!(hand.fits, "the hand-written handoff fits its budget");
        assert_eq!(hand.included, *r.provenance.included, "included item ids");
        let omitted: Vec<(String, &str)> = r
            .provenance
            .omitted
            .iter()
            .map(|o| (o.id.clone(), o.reason.as_str()))
            .collect();
        let hand_omitted: Vec<(String, &str)> =
            hand.omitted.iter().map(|(i, r)| (i.clone(), *r)).collect();
        assert_eq!(hand_omitted, omitted, "omitted item ids and reasons");
        assert_eq!(hand.document, r.document, "the document");
        assert_eq!(hand.inline, r.inline, "the first-turn prompt");
        assert_eq!(
            hand.inline_fallback, r.inline_fallback,
            "the inline fallback"
        );
    }
    Fixture {
        n,
        state,
        policy,
        opts,
        root,
        engine,
        rego,
        rego_input,
    }
}

impl Fixture {
    fn baton_decide(&self) -> Decision {
        decide(
            &self.policy,
            black_box(&self.state),
            &self.opts,
            &RoughSizer,
        )
        .expect("decides")
    }

    fn rego_decide(&mut self) -> (String, Vec<String>, String) {
        rego::decide(&mut self.rego, black_box(&self.rego_input))
    }

    fn baton_render(&self, d: &Decision) -> baton::Outcome {
        self.engine
            .render(black_box(&self.state), d)
            .expect("renders")
    }
}

fn benches(c: &mut Criterion) {
    for &n in SIZES {
        let mut f = fixture(n);
        let mut g = c.benchmark_group("versus_decide");
        g.sample_size(if n > 1_000 { 10 } else { 50 });
        g.bench_function(BenchmarkId::new("baton", n), |b| {
            b.iter(|| f.baton_decide())
        });
        g.bench_function(BenchmarkId::new("hand_written", n), |b| {
            b.iter(|| hand_decide(black_box(&f.state), &f.root))
        });
        g.bench_function(BenchmarkId::new("regorus", n), |b| {
            b.iter(|| f.rego_decide())
        });
        g.finish();
        if n == 10 {
            let d = f.baton_decide();
            let job = job_of(&f.state, &d);
            let mut g = c.benchmark_group("versus_render");
            g.bench_function(BenchmarkId::new("baton_select_render", n), |b| {
                b.iter(|| f.baton_render(&d))
            });
            g.bench_function(BenchmarkId::new("hand_concat", n), |b| {
                b.iter(|| hand_render::hand_render(black_box(&f.state), &job))
            });
            g.finish();
        }
    }
}

/// Time `batch` calls of `f`.
fn timed(batch: u32, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..batch {
        f();
    }
    start.elapsed()
}

/// The median over `rounds` of (time of `a`) / (time of `b`), each round timing a batch of
/// each back to back.
fn median_ratio(rounds: usize, batch: u32, a: impl FnMut(), b: impl FnMut()) -> f64 {
    median_ratio_per_call(rounds, (batch, batch), a, b)
}

/// The median over `rounds` of (time per call of `a`) / (time per call of `b`), each round
/// timing a batch of `batches.0` calls of `a`, then `batches.1` calls of `b`.
fn median_ratio_per_call(
    rounds: usize,
    batches: (u32, u32),
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> f64 {
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|_| {
            let ta = timed(batches.0, &mut a).as_secs_f64() / f64::from(batches.0);
            let tb = timed(batches.1, &mut b).as_secs_f64() / f64::from(batches.1);
            ta / tb
        })
        .collect();
    ratios.sort_by(|x, y| x.total_cmp(y));
    ratios[ratios.len() / 2]
}

/// The ratios the goals are stated in; printed, one line each.
fn ratios(quick: bool) {
    let rounds = std::env::var("BATON_VERSUS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if quick { 3 } else { 21 });
    for &n in SIZES {
        let f = fixture(n);
        let batch = |per_call: u32| if quick { 1 } else { per_call };
        let big = n > 1_000;
        let r = median_ratio(
            rounds,
            batch(if big { 20 } else { 5_000 }),
            || drop(black_box(f.baton_decide())),
            || drop(black_box(hand_decide(black_box(&f.state), &f.root))),
        );
        println!("ratio decide/{n}: baton / hand-written = {r:.2}x");
        let mut rego = f.rego.clone();
        let input = f.rego_input.clone();
        // At 10,000 runs one regorus call takes about 150 ms and one baton call about 0.4 ms:
        // each side is timed per call over a batch long enough to run warm (regorus 1 call,
        // baton 20). The first baton call after a regorus call runs with the 10,000-run state
        // evicted from the caches (several ms on this machine): printed, not the figure.
        let (rounds_rego, batches) = if big {
            (rounds.min(7), (batch(1), batch(20)))
        } else {
            (rounds, (batch(200), batch(200)))
        };
        let r = median_ratio_per_call(
            rounds_rego,
            batches,
            || drop(black_box(rego::decide(&mut rego, &input))),
            || drop(black_box(f.baton_decide())),
        );
        println!("ratio decide/{n}: regorus / baton = {r:.1}x (baton is {r:.1}x faster)");
        if big {
            let cold = median_ratio(
                rounds_rego,
                1,
                || drop(black_box(rego::decide(&mut rego, &input))),
                || drop(black_box(f.baton_decide())),
            );
            println!(
                "  (one baton call right after each regorus call, its state out of the caches: {cold:.1}x)"
            );
        }
        if n == 10 {
            let d = f.baton_decide();
            let job = job_of(&f.state, &d);
            let r = median_ratio(
                rounds,
                batch(2_000),
                || drop(black_box(f.baton_render(&d))),
                || {
                    drop(black_box(hand_render::hand_render(
                        black_box(&f.state),
                        &job,
                    )))
                },
            );
            println!("ratio render/{n}: baton select + render / hand-written = {r:.2}x");
        }
        let _ = f.n;
    }
}

criterion_group!(versus, benches);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--test");
    if args.iter().any(|a| a == "ratios") {
        ratios(quick);
        return;
    }
    versus();
    ratios(quick);
    Criterion::default().configure_from_args().final_summary();
}
