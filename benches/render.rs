//! Selection + rendering of a 10,000-run, 100,000-item thread, next to a baseline that only
//! concatenates the same selected texts.

use baton::eval::EvalOptions;
use baton::render::RenderOptions;
use criterion::{criterion_group, criterion_main, Criterion};
use std::fmt::Write;

fn thread(runs: usize) -> baton::State {
    let mut y = String::from("version: 1\nthread: {id: th_bench}\nprovider_threads:\n  - {id: C1, provider: codex}\nruns:\n");
    for o in 1..=runs {
        let _ = write!(
            y,
            "  - ordinal: {o}\n    provider: codex\n    provider_thread: C1\n    items:\n      - {{kind: user_message, text: \"goal {o} keep the api stable\"}}\n      - {{kind: assistant_message, text: \"working on step {o}\"}}\n      - {{kind: reasoning, text: \"hidden {o}\"}}\n      - {{kind: command, command: \"cargo test -p c{}\", exit_code: 0, output: \"ok\"}}\n      - {{kind: file_change, path: \"src/m{}.rs\", diff_lines: {}}}\n      - {{kind: decision, text: \"decided {o}\"}}\n      - {{kind: tool_call, tool: Read, input: \"src/m{}.rs\", output: \"fn x()\"}}\n      - {{kind: narration, text: \"narrating {o}\"}}\n      - {{kind: protocol, text: \"noise\"}}\n      - {{kind: error, text: \"warning {o}\"}}\n",
            o % 50,
            o % 200,
            o % 300,
            o % 70
        );
    }
    y.push_str("request: {provider: claude}\n");
    baton::state::parse_str(&y, baton::state::Format::Yaml, "bench").expect("bench state")
}

fn bench(c: &mut Criterion) {
    let state = thread(10_000);
    let policy = baton::policy::load("default").expect("default policy");
    let eval = EvalOptions::default();
    let sizer = baton::select::PolicySizer { policy: &policy };
    let (decision, facts) = baton::eval::evaluate(&policy, &state, &eval, &sizer).expect("decides");
    let summary = baton::select::select(&policy, &facts, &decision);
    let mut g = c.benchmark_group("render_10k_runs");
    g.sample_size(10);
    g.bench_function("baseline_concat_selected", |b| {
        b.iter(|| {
            let mut out = String::new();
            for s in &summary.sections {
                out.push_str(&s.title);
                for e in &s.entries {
                    out.push_str("- ");
                    out.push_str(&e.text);
                    out.push('\n');
                }
            }
            out
        })
    });
    g.bench_function("render_only", |b| {
        b.iter(|| {
            baton::render::render(
                &policy,
                &state,
                &decision,
                &summary,
                &RenderOptions::default(),
            )
            .expect("renders")
        })
    });
    g.bench_function("select_only", |b| {
        b.iter(|| baton::select::select(&policy, &facts, &decision))
    });
    // Secret redaction's cost (docs/redaction.md#measured): select + render with the
    // built-in rules, and with every rule disabled (the pass does nothing).
    let mut bare = policy.clone();
    bare.redact.redactor = Some(std::sync::Arc::new(
        baton::redact::Redactor::new(&baton::redact::Spec {
            disabled: baton::redact::rules::ids().map(str::to_string).collect(),
            ..Default::default()
        })
        .expect("no rules"),
    ));
    let select_render = |p: &baton::Policy| {
        let s = baton::select::select(p, &facts, &decision);
        baton::render::render(p, &state, &decision, &s, &RenderOptions::default()).expect("renders")
    };
    g.bench_function("select_render_redacted", |b| {
        b.iter(|| select_render(&policy))
    });
    g.bench_function("select_render_unredacted", |b| {
        b.iter(|| select_render(&bare))
    });
    g.bench_function("decide_select_render", |b| {
        b.iter(|| {
            baton::pipeline::run(&policy, &state, &eval, &RenderOptions::default()).expect("runs")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
