//! The fuzz targets' properties (`fuzz/src/props.rs`) under proptest, on stable, in
//! `cargo test`: inputs are the seed corpora (shipped policies, examples, test fixtures) with
//! random byte edits, and arbitrary text. The fuzzers in `fuzz/` explore the same properties
//! with coverage guidance (`.ci/run` runs them for a bounded time).

#[path = "../../fuzz/src/props.rs"]
mod props;

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn files(dirs: &[&str], exts: &[&str]) -> Vec<Vec<u8>> {
    fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, exts, out);
            } else if p
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| exts.contains(&x))
            {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for d in dirs {
        walk(&root.join(d), exts, &mut paths);
    }
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn policy_seeds() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| files(&["policies", "tests/fixtures/policies"], &["policy"]))
}

fn state_seeds() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        files(
            &["examples", "tests/fixtures/state", "tests/fixtures/db"],
            &["yaml", "json"],
        )
    })
}

fn framing_seeds() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/framing");
        let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect();
        v.sort();
        v
    })
}

/// One byte edit: replace, insert or delete at a position (taken modulo the length).
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    /// Copy a slice of the text elsewhere (repeats structure: nesting, `let` chains).
    Splice(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        prop::sample::select(b"{}[]()\"#:,-\n\t =.*&!|<>0123456789ae_".to_vec()),
        any::<u8>(),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(p, b)| Edit::Replace(p, b)),
        (any::<usize>(), byte).prop_map(|(p, b)| Edit::Insert(p, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), 1usize..64, any::<usize>()).prop_map(|(a, n, b)| Edit::Splice(a, n, b)),
    ]
}

fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let len = v.len().max(1);
        match *e {
            Edit::Replace(p, b) => {
                if let Some(x) = v.get_mut(p % len) {
                    *x = b;
                }
            }
            Edit::Insert(p, b) => v.insert(p % (v.len() + 1), b),
            Edit::Delete(p) => {
                if !v.is_empty() {
                    v.remove(p % len);
                }
            }
            Edit::Splice(a, n, b) => {
                let a = a % len;
                let end = (a + n).min(v.len());
                let chunk: Vec<u8> = v.get(a..end).unwrap_or_default().to_vec();
                let at = b % (v.len() + 1);
                v.splice(at..at, chunk);
            }
        }
    }
    v
}

fn mutated(seeds: fn() -> &'static [Vec<u8>]) -> impl Strategy<Value = Vec<u8>> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec(edit(), 0..8),
    )
        .prop_map(move |(i, edits)| mutate(i.get::<Vec<u8>>(seeds()), &edits))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn policy_check_never_panics(data in mutated(policy_seeds)) {
        props::policy_parses_or_errs(&data);
    }

    #[test]
    fn policy_check_never_panics_on_any_text(text in "\\PC{0,200}") {
        props::policy_parses_or_errs(text.as_bytes());
    }

    #[test]
    fn fmt_is_idempotent_and_keeps_meaning(data in mutated(policy_seeds)) {
        props::fmt_is_idempotent_and_keeps_meaning(&data);
    }

    #[test]
    fn state_loader_never_panics_and_round_trips(data in mutated(state_seeds)) {
        props::state_loads_or_errs(&data);
    }

    #[test]
    fn state_loader_never_panics_on_any_text(text in "\\PC{0,200}") {
        props::state_loads_or_errs(text.as_bytes());
    }

    #[test]
    fn framing_always_terminates(data in mutated(framing_seeds)) {
        props::framing_terminates(&data);
    }

    #[test]
    fn framing_always_terminates_on_any_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        props::framing_terminates(&data);
    }
}
