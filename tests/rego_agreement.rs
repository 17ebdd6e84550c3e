//! The Rego policy benches/versus.rs measures baton against (`benches/rego/default.rego`, run
//! by regorus) makes the same decision as baton's shipped `default` policy: strategy, stale
//! signals (in order) and delivery mode, on every loadable state of examples/, docs/examples/
//! and tests/fixtures/, for the state's own target and every provider it knows.

#[path = "../benches/rego/input.rs"]
mod rego;

use baton::eval::{decide, EvalOptions, RoughSizer};
use std::path::{Path, PathBuf};
mod common;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "json") {
            out.push(p);
        }
    }
}

#[test]
fn rego_policy_agrees_with_the_default_policy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["examples", "docs/examples", "tests/fixtures"] {
        yaml_files(&root.join(dir), &mut files);
    }
    let policy = common::policy("default").expect("default checks");
    let mut engine = rego::engine();
    let (mut compared, mut strategies) = (0, std::collections::BTreeSet::new());
    for file in &files {
        // Test files, policies' fixtures and bad states are not states: skip what does not load.
        let Ok(state) = baton::state::load_file(file) else {
            continue;
        };
        let mut targets: Vec<String> = ["codex", "claude", "cursor", "copilot"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        targets.extend(state.providers.keys().cloned());
        targets.push(state.request.provider.clone());
        targets.sort();
        targets.dedup();
        for target in &targets {
            let opts = EvalOptions {
                target: Some(target.clone()),
                document_root: None,
            };
            let Ok(d) = decide(&policy, &state, &opts, &RoughSizer) else {
                continue;
            };
            let input = rego::input(&state, Some(target));
            let (strategy, stale, delivery) = rego::decide(&mut engine, &input);
            let at = format!("{} for {target}", file.display());
            assert_eq!(strategy, d.strategy.as_str(), "strategy: {at}");
            assert_eq!(stale, d.stale, "stale signals: {at}");
            if let Some(dd) = &d.delivery {
                assert_eq!(delivery, dd.mode.as_str(), "delivery: {at}");
            }
            compared += 1;
            strategies.insert(strategy);
        }
    }
    // Every strategy the default policy can reach is among the cases.
    assert!(compared >= 100, "only {compared} decisions compared");
    assert_eq!(
        strategies.into_iter().collect::<Vec<_>>(),
        [
            "delta_existing",
            "full_existing",
            "full_new",
            "native_fork",
            "no_handoff",
            "unsupported"
        ],
    );
}
