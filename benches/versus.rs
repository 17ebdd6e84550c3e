//! baton side by side with other ways of making the same decision, in one process:
//!
//! - `decide`: baton's one path as a user calls it (`Engine::plan`, then `Engine::finish`
//!   with no external summarizer: decide, select, fit to the budget, render; the shipped
//!   `default` policy, with its full trace) against the same decision hand-written in Rust
//!   the lean way (`hand_decide`: one pass over the runs, one over the handoffs, then the
//!   delta's items) and against regorus, the Rust Rego interpreter, evaluating the equivalent
//!   Rego policy (`benches/rego/default.rego`; tests/rego_agreement.rs checks that the two
//!   agree on every example state). The evaluator alone (`eval::decide`) is timed too, as a
//!   breakdown.
//! - `render`: the same one path against the hand-written decision followed by a
//!   hand-written selection of the delta runs written out as markdown
//!   (`support/hand_render.rs`, byte for byte baton's handoff) with its budget check.
//!
//! Threads of 10 and 10,000 runs (10 items each), built as in benches/engine.rs: providers
//! alternate in blocks of five runs, each switch consumes a handoff, the request enters codex
//! after a claude block, and the decision is `delta_existing`.
//!
//! Besides criterion's absolute times, the bench prints ratios: in each round it times a
//! batch of each contender back to back (the thread's CPU time, so that the time other
//! processes hold the core is not counted) and divides; it reports the median of the
//! per-round ratios, which the shared machine's load moves far less than it moves absolute
//! times.
//!
//!   cargo bench --features versus,unstable --bench versus -- --warm-up-time 1 --measurement-time 3
//!   BATON_VERSUS_ROUNDS=21 cargo bench --features versus,unstable --bench versus -- ratios   # ratios only

#[path = "support/hand_render.rs"]
mod hand_render;
#[path = "rego/input.rs"]
mod rego;
#[path = "support/thread.rs"]
mod thread;

use baton::decision::Decision;
use baton::eval::{decide, EvalOptions, RoughSizer};
use baton::state::{caps_for, HandoffStatus, ProviderThreadStatus, RequestKind, RunStatus, State};
use baton::summarize::Deterministic;
use criterion::{criterion_group, BenchmarkId, Criterion};
use std::hint::black_box;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
/// path under the canonical root `root`), for a request that is not a fork, the way a lean
/// hand-written decision would make it: one pass over the runs, one over the handoffs, then
/// the items of the delta runs only (the runs after the target last saw the thread, the tail
/// of the thread), summed for `over_budget`.
///
/// The bench's states carry no workspace, so the default policy's two workspace signals
/// (`cwd_changed`, `branch_changed`) are false and not computed; `fixture` asserts it.
fn hand_decide(state: &State, root: &Path) -> HandDecision {
    let target = state.request.provider.as_str();
    let caps = caps_for(state, target);
    let n = state.runs.len();
    /// Per provider thread (by its index in `state.provider_threads`): its newest eligible
    /// run, its newest eligible run that took no handoff, and how many eligible runs of
    /// other providers came before or with its newest one.
    #[derive(Clone, Copy, Default)]
    struct Native {
        last: u32,
        last_clean: u32,
        off_before: u32,
    }
    let mut native = vec![Native::default(); state.provider_threads.len()];
    // The pass over the runs: eligibility, each provider thread's native runs, and the
    // thread the target's newest run used.
    let (mut eligible_count, mut off_total) = (0u32, 0u32);
    let mut newest_target_thread: Option<&str> = None;
    for r in &state.runs {
        let eligible = matches!(
            r.status,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
        );
        let on_target = r.provider == target;
        if on_target && r.provider_thread.is_some() {
            newest_target_thread = r.provider_thread.as_deref();
        }
        if !eligible {
            continue;
        }
        eligible_count += 1;
        if !on_target {
            off_total += 1;
        }
        if let Some(pt) = r.provider_thread.as_deref() {
            let i = state.provider_threads.iter().position(|p| p.id == pt);
            if let Some(s) = i.and_then(|i| native.get_mut(i)) {
                s.last = r.ordinal;
                s.off_before = off_total;
                if r.handoff.is_none() {
                    s.last_clean = r.ordinal;
                }
            }
        }
    }
    // The target thread: the one the newest run of the provider used, unless closed.
    let pt = newest_target_thread.and_then(|id| {
        state
            .provider_threads
            .iter()
            .position(|p| p.id == id && p.status != ProviderThreadStatus::Closed)
    });
    let mut stale = Vec::new();
    let (mut off, mut since, mut chained) = (0u32, 0u32, 0u32);
    let (mut delta_chars, mut first_delta) = (0u64, None);
    if let Some(i) = pt {
        let (id, s) = (&state.provider_threads[i].id, native[i]);
        off = off_total - s.off_before;
        // The pass over the handoffs: what the target saw through them, and the chain.
        let mut last_seen = s.last;
        for h in &state.handoffs {
            if h.status == HandoffStatus::Ready && h.to_provider_thread.as_ref() == Some(id) {
                last_seen = last_seen.max(h.covered.to);
                if h.target_run.unwrap_or(h.covered.to + 1) > s.last_clean {
                    chained += 1;
                }
            }
        }
        // The delta: the eligible runs after `last_seen` (ordinals are 1, 2, 3, ...).
        for r in state.runs.get(last_seen as usize..).unwrap_or_default() {
            if !matches!(
                r.status,
                RunStatus::Completed | RunStatus::Failed | RunStatus::Interrupted
            ) {
                continue;
            }
            since += 1;
            first_delta.get_or_insert(r.ordinal);
            delta_chars += r
                .items
                .iter()
                .filter(|i| !matches!(i.kind(), "reasoning" | "protocol"))
                .map(|i| i.char_len() as u64)
                .sum::<u64>();
        }
    }
    if off > 12 {
        stale.push("too_many_off_provider_runs");
    }
    if chained >= 3 {
        stale.push("too_many_chained_handoffs");
    }
    let pt = pt.map(|i| &state.provider_threads[i]);
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
    // The delta's budget: the per-turn input inline, the document limit off-band.
    if pt.is_some()
        && since > 0
        && ((!caps.file_read && delta_chars > caps.max_input_chars_per_turn)
            || delta_chars > 60_000)
    {
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
    // Off-band, the decision names the document: under the canonical root (symlinks resolved
    // once, before, as baton's engine resolves it when it is built), by thread and handoff.
    let document = handoff_id.as_ref().filter(|_| off_band).map(|hid| {
        let mut path = root.to_path_buf();
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

/// The policy's name and the first 12 hex digits of its sha256, which the handoff document
/// names: constants to hand-written code, taken once from the engine.
struct PolicyId {
    name: String,
    sha12: String,
}

/// What the hand-written render needs from the hand-written decision: the covered runs, the
/// handoff's id and strategy, delivery and the limits (the default policy's `inline_limit 500`
/// and `document max 60_000`).
fn hand_job(state: &State, d: &HandDecision, policy: &PolicyId) -> Option<hand_render::Job> {
    let (from, to) = d.covered?;
    let handoff_strategy = match d.strategy {
        "delta_existing" => "delta_since_target_last_seen",
        _ => "full_thread_summary",
    };
    let target = state.request.provider.as_str();
    Some(hand_render::Job {
        target: target.to_string(),
        strategy: d.strategy.to_string(),
        handoff_id: d.handoff_id.clone()?,
        handoff_strategy: handoff_strategy.to_string(),
        from,
        to,
        document_path: d.document.clone(),
        inline_limit: 500,
        first_turn_limit: caps_for(state, target).max_input_chars_per_turn as usize,
        document_limit: 60_000,
        policy_name: policy.name.clone(),
        policy_sha12: policy.sha12.clone(),
    })
}

/// The hand-written decision, then (when it needs a handoff) the hand-written selection and
/// render with its budget check: what baton's one path (`plan` + `finish`) does, by hand.
fn hand_outcome(
    state: &State,
    root: &Path,
    policy: &PolicyId,
) -> (HandDecision, Option<hand_render::HandHandoff>) {
    let d = hand_decide(state, root);
    let handoff = hand_job(state, &d, policy).map(|job| hand_render::hand_render(state, &job));
    (d, handoff)
}

struct Fixture {
    n: usize,
    state: State,
    policy: baton::Policy,
    opts: EvalOptions,
    /// The off-band document root both contenders name the document under, canonical (the
    /// hand-written contender resolves it once, as baton's engine does when it is built).
    root: PathBuf,
    /// The engine of the `default` policy, its off-band root `root`.
    engine: baton::Engine,
    policy_id: PolicyId,
    rego: regorus::Engine,
    rego_input: regorus::Value,
}

fn fixture(n: usize) -> Fixture {
    let state = state(n);
    assert!(
        state.request.workspace.is_none() && state.runs.iter().all(|r| r.workspace.is_none()),
        "the hand-written decision computes no workspace signal"
    );
    let policy = baton::policy::load("default").expect("default checks");
    // An existing private directory, so that both contenders canonicalise a real path.
    let root = std::env::temp_dir().join("baton-bench-versus");
    std::fs::create_dir_all(&root).expect("creates the document root");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
        .expect("makes the document root private");
    let root = std::fs::canonicalize(&root).expect("resolves the document root");
    let opts = EvalOptions {
        target: None,
        document_root: Some(root.clone()),
    };
    let engine = baton::Engine::builder("default")
        .document_root(Some(root.clone()))
        .build()
        .expect("default engine");
    let policy_id = PolicyId {
        name: engine.policy().name.clone(),
        sha12: engine
            .policy()
            .sha256
            .get(..12)
            .unwrap_or_default()
            .to_string(),
    };
    let out = one_path(&engine, &state);
    let d = &out.decision;
    assert_eq!(d.strategy.as_str(), "delta_existing", "{n} runs");
    let (hand, hand_handoff) = hand_outcome(&state, &root, &policy_id);
    assert_eq!(
        hand_of(d),
        hand,
        "{n} runs: the hand-written decision agrees"
    );
    // The evaluation alone decides as the one path does (fitting changes nothing here).
    let evaluated = decide(&policy, &state, &opts, &RoughSizer).expect("decides");
    assert_eq!(hand_of(&evaluated), hand, "{n} runs: the evaluation agrees");
    let mut rego = rego::engine();
    let rego_input = rego::input(&state, None);
    let (strategy, stale, _) = rego::decide(&mut rego, &rego_input);
    assert_eq!(
        (strategy.as_str(), stale),
        (d.strategy.as_str(), d.stale.clone())
    );
    // The hand-written selection and render produce what baton does, byte for byte.
    let r = out.rendered.as_ref().expect("a handoff");
    let hand = hand_handoff.expect("a hand-written handoff");
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
    Fixture {
        n,
        state,
        policy,
        opts,
        root,
        engine,
        policy_id,
        rego,
        rego_input,
    }
}

/// baton's one path, as a user calls it: `Engine::plan`, then `Engine::finish` (decide,
/// select, fit to the budget, render), no external summarizer.
fn one_path(engine: &baton::Engine, state: &State) -> baton::Outcome {
    let plan = engine
        .plan(state, None, &baton::Context::new())
        .expect("plans");
    engine.finish(plan, &Deterministic).expect("finishes")
}

impl Fixture {
    fn baton_one_path(&self) -> baton::Outcome {
        one_path(&self.engine, black_box(&self.state))
    }

    /// The evaluator alone (`eval::decide`: no selection, fitting or rendering), for the
    /// breakdown.
    fn baton_evaluate(&self) -> Decision {
        decide(
            &self.policy,
            black_box(&self.state),
            &self.opts,
            &RoughSizer,
        )
        .expect("decides")
    }

    fn hand_decide(&self) -> HandDecision {
        hand_decide(black_box(&self.state), &self.root)
    }

    fn hand_outcome(&self) -> (HandDecision, Option<hand_render::HandHandoff>) {
        hand_outcome(black_box(&self.state), &self.root, &self.policy_id)
    }

    fn rego_decide(&mut self) -> (String, Vec<String>, String) {
        rego::decide(&mut self.rego, black_box(&self.rego_input))
    }
}

fn benches(c: &mut Criterion) {
    for &n in SIZES {
        let mut f = fixture(n);
        let mut g = c.benchmark_group("versus_decide");
        g.sample_size(if n > 1_000 { 10 } else { 50 });
        g.bench_function(BenchmarkId::new("baton_one_path", n), |b| {
            b.iter(|| f.baton_one_path())
        });
        g.bench_function(BenchmarkId::new("baton_evaluate", n), |b| {
            b.iter(|| f.baton_evaluate())
        });
        g.bench_function(BenchmarkId::new("hand_written", n), |b| {
            b.iter(|| f.hand_decide())
        });
        g.bench_function(BenchmarkId::new("regorus", n), |b| {
            b.iter(|| f.rego_decide())
        });
        g.finish();
        if n == 10 {
            let mut g = c.benchmark_group("versus_render");
            g.bench_function(BenchmarkId::new("baton_one_path", n), |b| {
                b.iter(|| f.baton_one_path())
            });
            g.bench_function(BenchmarkId::new("hand_decide_select_render", n), |b| {
                b.iter(|| f.hand_outcome())
            });
            g.finish();
        }
    }
}

/// The CPU time of the calling thread: what a batch costs, without the time other processes
/// of the shared machine held the core (which the wall clock counts).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The CPU time `batch` calls of `f` take on this thread.
fn timed(batch: u32, mut f: impl FnMut()) -> Duration {
    let start = thread_cpu();
    for _ in 0..batch {
        f();
    }
    thread_cpu() - start
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

/// The ratios the issues' goals are stated in; printed, one line each.
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
            batch(if big { 20 } else { 2_000 }),
            || drop(black_box(f.baton_one_path())),
            || drop(black_box(f.hand_decide())),
        );
        println!("ratio decide/{n}: baton plan + finish / hand-written decision = {r:.2}x");
        let r = median_ratio(
            rounds,
            batch(if big { 20 } else { 5_000 }),
            || drop(black_box(f.baton_evaluate())),
            || drop(black_box(f.hand_decide())),
        );
        println!("  (the evaluation alone, eval::decide, / hand-written decision = {r:.2}x)");
        let mut rego = f.rego.clone();
        let input = f.rego_input.clone();
        // At 10,000 runs one regorus call takes about 150 ms and one baton call under 1 ms:
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
            || drop(black_box(f.baton_one_path())),
        );
        println!(
            "ratio decide/{n}: regorus / baton plan + finish = {r:.1}x (baton is {r:.1}x faster)"
        );
        if big {
            let cold = median_ratio(
                rounds_rego,
                1,
                || drop(black_box(rego::decide(&mut rego, &input))),
                || drop(black_box(f.baton_one_path())),
            );
            println!(
                "  (one baton call right after each regorus call, its state out of the caches: {cold:.1}x)"
            );
        }
        if n == 10 {
            let r = median_ratio(
                rounds,
                batch(2_000),
                || drop(black_box(f.baton_one_path())),
                || drop(black_box(f.hand_outcome())),
            );
            println!(
                "ratio render/{n}: baton plan + finish / hand-written decide + select + render = {r:.2}x"
            );
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
    // `--profile-time` (a profiler's run of one benchmark): no ratios after it.
    if !args.iter().any(|a| a == "--profile-time") {
        ratios(quick);
    }
    Criterion::default().configure_from_args().final_summary();
}
