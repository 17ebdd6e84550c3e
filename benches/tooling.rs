//! Policy tooling benchmarks: running the shipped test suites with coverage, formatting a
//! policy, and diffing two policy versions over the example corpus.
//!
//! Run with:
//!   cargo bench --features unstable --bench tooling -- --warm-up-time 1 --measurement-time 3
use std::hint::black_box;
use std::path::PathBuf;

use baton::testing::{run_paths, RunOptions};
use criterion::{criterion_group, criterion_main, Criterion};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bench(c: &mut Criterion) {
    let suites = vec![root().join("policies/tests")];
    c.bench_function("test/shipped_suites_with_coverage", |b| {
        b.iter(|| {
            let r = run_paths(black_box(&suites), &RunOptions::default()).unwrap();
            assert_eq!(r.failed(), 0);
            r
        })
    });

    let text = std::fs::read_to_string(root().join("policies/default.policy")).unwrap();
    c.bench_function("fmt/default_policy", |b| {
        b.iter(|| baton::fmt::format_source("default.policy", black_box(&text)).unwrap())
    });

    let old = baton::Engine::new("default").unwrap();
    let new = baton::Engine::new("mcode").unwrap();
    let opts = baton::diff::DiffOptions::default();
    let corpus = root().join("examples");
    c.bench_function("diff/default_vs_mcode_examples", |b| {
        b.iter(|| {
            baton::diff::diff_corpus(black_box(&old), black_box(&new), &corpus, &opts).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
