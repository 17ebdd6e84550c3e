//! Checker scaling (issue 15): checking a policy with 10x more `let`s, staleness signals or
//! errors must cost about 10x, not 100x. Each shape is measured at 1x and 10x.
//!
//! Run with:
//!   cargo bench --features unstable --bench check -- --warm-up-time 1 --measurement-time 3
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

/// `n` lets, each used by the next (a chain), the first read by the ladder.
fn lets(n: usize) -> String {
    let mut s = String::from("policy \"p\" {}\n");
    for i in 0..n {
        if i + 1 < n {
            s.push_str(&format!("let v{i} = v{} + 1\n", i + 1));
        } else {
            s.push_str(&format!("let v{i} = 1\n"));
        }
    }
    s.push_str("strategy {\n  no_handoff when target.runs_since_last_seen == v0\n  full_new otherwise\n}\n");
    s
}

/// `n` staleness signals, each read by name in the ladder.
fn stales(n: usize) -> String {
    let mut s = String::from("policy \"p\" {}\n");
    for i in 0..n {
        s.push_str(&format!(
            "stale s{i} when target.runs_since_last_seen > {i}\n"
        ));
    }
    s.push_str("strategy {\n");
    for i in 0..n {
        s.push_str(&format!("  full_new when stale.s{i}\n"));
    }
    s.push_str("  full_new otherwise\n}\n");
    s
}

/// `n` errors: unknown facts (each with a suggestion search) and unknown signals.
fn errors(n: usize) -> String {
    let mut s = String::from("policy \"p\" {}\n");
    for i in 0..n {
        s.push_str(&format!("let v{i} = {i}\n"));
    }
    for i in 0..n {
        s.push_str(&format!(
            "stale s{i} when target.runs_since_last_sen > v{i} and stale.x{i}\n"
        ));
    }
    s.push_str("strategy {\n  full_new when stale\n  full_new otherwise\n}\n");
    s
}

/// A policy shape: its name, how to make it at a size, and whether it checks.
type Shape = (&'static str, fn(usize) -> String, bool);

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_scaling");
    g.sample_size(10);
    let shapes: [Shape; 3] = [
        ("lets", lets, true),
        ("stales", stales, true),
        ("errors", errors, false),
    ];
    for (name, make, ok) in shapes {
        for n in [1_000, 10_000] {
            let text = make(n);
            g.bench_with_input(BenchmarkId::new(name, n), &text, |b, text| {
                b.iter(|| {
                    let r = baton::policy::load_text("p.policy", black_box(text));
                    assert_eq!(r.is_ok(), ok);
                    r
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
