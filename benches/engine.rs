//! Engine benchmarks: policy parse + check, state loading, and facts + decision.
//!
//! Threads of 100, 1,000 and 10,000 runs with 10 items each. Providers alternate in blocks of
//! five runs (codex on provider thread C1, claude on L1); every switch consumes a handoff into
//! the provider thread being entered, so coverage, `last_seen` and `chained_handoffs` have real
//! work to do. The request is codex after a claude block: the default policy resumes C1 with a
//! delta, and its `over_budget` signal reads the lazy `summary.delta_chars` fact.
//!
//! Run with:
//!   cargo bench --bench engine -- --warm-up-time 1 --measurement-time 3
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;

use baton::eval::{decide, EvalOptions, RoughSizer};
use baton::state::{parse_str, Format};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SIZES: &[usize] = &[100, 1_000, 10_000];
const BLOCK: usize = 5;

/// One item of run `o`, index `i` (0..10): a mix of kinds, about 40-120 characters each.
fn item(o: usize, i: usize) -> String {
    match i {
        0 => format!("{{kind: user_message, text: \"Step {o}: extend the OAuth flow and keep the tests green.\"}}"),
        1 => format!("{{kind: reasoning, text: \"Run {o} needs the callback route; check the router first.\"}}"),
        2 => format!("{{kind: assistant_message, text: \"Run {o}: I will change the handler and add a test.\"}}"),
        3 => format!("{{kind: file_change, path: src/mod_{}.rs, change: modified, diff_lines: {}}}", o % 17, 10 + o % 300),
        4 => format!("{{kind: command, command: cargo test, exit_code: {}, output: \"test result: {} passed\"}}", o % 2, 40 + o % 7),
        5 => format!("{{kind: tool_call, tool: Read, input: src/mod_{}.rs, status: completed, output: \"fn handler() {{}}\"}}", o % 17),
        6 => "{kind: plan, steps: [{text: \"Add route\", status: done}, {text: \"Write tests\", status: in_progress}]}".to_string(),
        7 => format!("{{kind: decision, text: \"Run {o}: keep sessions in Postgres.\"}}"),
        8 => format!("{{kind: narration, text: \"Looking at src/mod_{}.rs now.\"}}", o % 17),
        _ => "{kind: protocol, text: \"event: turn.completed\"}".to_string(),
    }
}

/// A valid state file (YAML) of `n` runs.
fn state_yaml(n: usize) -> String {
    let mut s = String::with_capacity(n * 1_000);
    s.push_str("version: 1\nthread: {id: th_bench, title: Benchmark thread}\n");
    s.push_str("provider_threads:\n");
    s.push_str("  - {id: C1, provider: codex, model: gpt-5-codex, runtime_mode: full_access, status: active}\n");
    s.push_str("  - {id: L1, provider: claude, model: claude-sonnet-4, runtime_mode: full_access, status: active}\n");
    // Handoffs: at the first run of every block after the first, into the block's thread,
    // covering the runs since that thread last saw the conversation.
    let mut handoffs = String::new();
    let mut run_handoff = vec![None; n + 1];
    let mut seen = [0usize; 2]; // last run covered by C1, L1
    let mut h = 0;
    for start in (1..=n).step_by(BLOCK) {
        let block = (start - 1) / BLOCK;
        let p = block % 2;
        if start > 1 && seen[p] + 1 < start {
            h += 1;
            let (pt, from_pt) = if p == 0 { ("C1", "L1") } else { ("L1", "C1") };
            let _ = writeln!(
                handoffs,
                "  - {{id: H{h}, target_run: {start}, from_provider_threads: [{from_pt}], to_provider_thread: {pt}, covered: {{from: {}, to: {}}}, strategy: {}, status: ready, summary: \"handoff {h}\"}}",
                seen[p] + 1,
                start - 1,
                if seen[p] == 0 { "full_thread_summary" } else { "delta_since_target_last_seen" },
            );
            run_handoff[start] = Some(h);
        }
        seen[p] = (start + BLOCK - 1).min(n);
    }
    s.push_str("runs:\n");
    for (o, handoff) in run_handoff.iter().enumerate().skip(1) {
        let block = (o - 1) / BLOCK;
        let (provider, pt) = if block.is_multiple_of(2) {
            ("codex", "C1")
        } else {
            ("claude", "L1")
        };
        let _ = writeln!(
            s,
            "  - ordinal: {o}\n    provider: {provider}\n    provider_thread: {pt}"
        );
        if let Some(h) = handoff {
            let _ = writeln!(s, "    handoff: H{h}");
        }
        s.push_str("    items:\n");
        for i in 0..10 {
            let _ = writeln!(s, "      - {}", item(o, i));
        }
    }
    if !handoffs.is_empty() {
        s.push_str("handoffs:\n");
        s.push_str(&handoffs);
    }
    let _ = writeln!(
        s,
        "checkpoints:\n  - {{run: {}, files_changed: 3, diff_summary: \"src/mod_1.rs (+10 -2)\"}}",
        n
    );
    // The request enters the provider that did not run last.
    let last_block = (n - 1) / BLOCK;
    let target = if last_block.is_multiple_of(2) {
        "claude"
    } else {
        "codex"
    };
    let model = if target == "codex" {
        "gpt-5-codex"
    } else {
        "claude-sonnet-4"
    };
    let _ = writeln!(
        s,
        "request: {{provider: {target}, model: {model}, runtime_mode: full_access, message: \"Carry on.\"}}"
    );
    s
}

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
