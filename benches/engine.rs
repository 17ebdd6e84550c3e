//! Engine benchmarks: policy parse + check, state loading, and facts + decision.
//!
//! Threads of 100, 1,000 and 10,000 runs with 10 items each. Providers alternate in blocks of
//! five runs (codex on provider thread C1, claude on L1); every switch consumes a handoff into
//! the provider thread being entered, so coverage, `last_seen` and `chained_handoffs` have real
//! work to do. The request is codex after a claude block: the default policy resumes C1 with a
//! delta, and its `over_budget` signal reads the lazy `summary.delta_chars` fact.
//!
//! Run with:
//!   cargo bench --features unstable --bench engine -- --warm-up-time 1 --measurement-time 3
use std::hint::black_box;
use std::path::PathBuf;

use baton::eval::{decide, EvalOptions, RoughSizer};
use baton::state::{parse_str, Format};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SIZES: &[usize] = &[100, 1_000, 10_000];

#[path = "support/thread.rs"]
mod thread;
use thread::state_yaml;

fn policy_load(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy_load");
    for name in baton::policy::source::shipped_names() {
        g.bench_function(name, |b| {
            b.iter(|| black_box(baton::policy::load(black_box(name)).expect("shipped checks")))
        });
    }
    g.finish();
}

fn state_load(c: &mut Criterion) {
    let mut g = c.benchmark_group("state_parse");
    g.sample_size(10);
    for &n in SIZES {
        let text = state_yaml(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| black_box(parse_str(text, Format::Yaml, "bench.yaml").expect("valid state")))
        });
    }
    g.finish();
}

/// Rejecting absurdly deep YAML flow nesting: the pre-scan refuses it in linear time (the
/// parser alone took 18 s on the 100,000-level file). Compare the two sizes: ~10x, not ~100x.
fn deep_yaml_rejection(c: &mut Criterion) {
    let mut g = c.benchmark_group("state_parse_deep_flow");
    g.sample_size(10);
    for &depth in &[10_000usize, 100_000] {
        let text = format!(
            "version: 1\nthread: {{id: t}}\nrequest: {{provider: codex}}\nruns: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(depth), &text, |b, text| {
            b.iter(|| black_box(parse_str(text, Format::Yaml, "deep.yaml").is_err()))
        });
    }
    g.finish();
}

fn decision(c: &mut Criterion) {
    let policy = baton::policy::load("default").expect("default checks");
    let opts = EvalOptions {
        target: None,
        document_root: Some(PathBuf::from("/tmp/baton-bench")),
    };
    let mut g = c.benchmark_group("decide");
    for &n in SIZES {
        let state = parse_str(&state_yaml(n), Format::Yaml, "bench.yaml").expect("valid state");
        // Sanity: the decision is the non-trivial one the header describes.
        let d = decide(&policy, &state, &opts, &RoughSizer).expect("decides");
        assert_eq!(
            d.strategy.as_str(),
            "delta_existing",
            "{n} runs: {}",
            d.to_json()
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &state, |b, state| {
            b.iter(|| {
                black_box(decide(&policy, black_box(state), &opts, &RoughSizer).expect("decides"))
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    policy_load,
    state_load,
    deep_yaml_rejection,
    decision
);
criterion_main!(benches);
