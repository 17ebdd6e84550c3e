//! Delivery benchmarks: a pre-grant check and an off-band write of a 1 MB document.
use std::hint::black_box;
use std::path::PathBuf;

use baton::deliver::{check, issue, CheckRequest, MemoryGrantStore, OffbandStore, PathArg};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

fn setup() -> (tempfile::TempDir, OffbandStore, PathBuf, MemoryGrantStore) {
    let tmp = tempfile::TempDir::new().expect("tempdir");
    let store = OffbandStore::new(Some(tmp.path().join("root")));
    let doc = store
        .write("t1", "h1", &[("handoff.md", b"# doc\n")])
        .expect("write");
    let mut grants = MemoryGrantStore::new();
    issue(&mut grants, "t1", 3, "Read", &doc, 1).expect("issue");
    (tmp, store, doc, grants)
}

fn pregrant(c: &mut Criterion) {
    let (_tmp, _store, doc, grants) = setup();
    let allow = CheckRequest {
        thread: "t1".into(),
        run: 3,
        tool: "Read".into(),
        args: PathArg::Args(serde_json::json!({ "file_path": doc })),
    };
    c.bench_function("pregrant_check_allow", |b| {
        b.iter_batched(
            || grants.clone(),
            |mut g| black_box(check(&mut g, &allow).expect("check")),
            BatchSize::SmallInput,
        )
    });
    let wrong_tool = CheckRequest {
        tool: "Bash".into(),
        ..allow.clone()
    };
    let mut g = grants.clone();
    c.bench_function("pregrant_check_deny_tool", |b| {
        b.iter(|| black_box(check(&mut g, &wrong_tool).expect("check")))
    });
}

fn offband(c: &mut Criterion) {
    let (tmp, store, _doc, _grants) = setup();
    let body = vec![b'x'; 1 << 20];
    let mut group = c.benchmark_group("offband_1mb");
    group.sample_size(20);
    group.bench_function("offband_write_1mb", |b| {
        b.iter(|| {
            black_box(
                store
                    .write("t1", "h2", &[("handoff.md", &body)])
                    .expect("write"),
            )
        })
    });
    let plain = tmp.path().join("plain.md");
    group.bench_function("plain_fs_write_1mb", |b| {
        b.iter(|| std::fs::write(&plain, &body).expect("write"))
    });
    group.finish();
}

/// The delivery stage on the seed example: write handoff.md, inline.md and handoff.json,
/// then issue the pre-grant.
fn stage(c: &mut Criterion) {
    let tmp = tempfile::TempDir::new().expect("tempdir");
    let root = tmp.path().join("root");
    let state = baton::state::load_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seed-switch.yaml"
    )))
    .expect("state");
    let policy = baton::policy::load("default").expect("policy");
    let eval = baton::eval::EvalOptions {
        target: None,
        document_root: Some(root.clone()),
    };
    let outcome = baton::pipeline::run(
        &policy,
        &state,
        &eval,
        &baton::render::RenderOptions::default(),
    )
    .expect("pipeline");
    let store = OffbandStore::new(Some(root));
    c.bench_function("deliver_stage_seed", |b| {
        b.iter_batched(
            || (outcome.clone(), MemoryGrantStore::new()),
            |(mut o, mut g)| black_box(baton::deliver::deliver(&mut o, &store, "th_1", &mut g)),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, pregrant, offband, stage);
criterion_main!(benches);
