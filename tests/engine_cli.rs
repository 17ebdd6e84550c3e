//! The Engine and the `baton` command make the same decision on every example state, for the
//! state's own provider and for every shipped provider: one path, one sizer.

use crate::common;

use baton::{Engine, State};
use std::path::PathBuf;

fn example_states() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    files.sort();
    assert!(files.len() > 10, "the examples are found");
    files
}

#[test]
fn engine_and_cli_decide_alike_on_every_example() {
    let engine = Engine::builder("default")
        .document_root(Some(PathBuf::from(common::DOC_ROOT)))
        .build()
        .unwrap();
    let mut compared = 0;
    for file in example_states() {
        let state = State::load(&file).unwrap();
        for target in [
            None,
            Some("codex"),
            Some("claude"),
            Some("cursor"),
            Some("copilot"),
        ] {
            let mut args = vec!["explain", "--json", "--state", file.to_str().unwrap()];
            if let Some(t) = target {
                args.extend(["--target", t]);
            }
            let out = common::baton(&args);
            let cli = String::from_utf8_lossy(&out.stdout).to_string();
            match engine.decide(&state, target) {
                Ok(d) => {
                    assert!(out.status.success(), "{file:?} {target:?}: {cli}");
                    assert_eq!(
                        d.to_json().trim_end(),
                        cli.trim_end(),
                        "{file:?} {target:?}"
                    );
                    compared += 1;
                }
                Err(e) => {
                    assert_eq!(out.status.code(), Some(1), "{file:?} {target:?}");
                    assert_eq!(
                        format!("{e}\n"),
                        String::from_utf8_lossy(&out.stderr),
                        "{file:?} {target:?}"
                    );
                }
            }
        }
    }
    assert!(compared > 50, "{compared} decisions compared");
}

#[test]
fn engine_run_renders_what_the_cli_renders() {
    let engine = Engine::new("default").unwrap();
    let state = State::load("examples/seed-switch.yaml").unwrap();
    let outcome = engine.run(&state, Some("codex")).unwrap();
    let out = common::baton(&[
        "render",
        "--state",
        "examples/seed-switch.yaml",
        "--target",
        "codex",
    ]);
    assert!(out.status.success());
    let doc = outcome.rendered.unwrap().document;
    assert_eq!(doc, String::from_utf8_lossy(&out.stdout));
    // Rendering a decision made earlier gives the same document as `run`.
    let decision = engine.decide(&state, Some("codex")).unwrap();
    let again = engine.render(&state, &decision).unwrap();
    assert_eq!(again.rendered.unwrap().document, doc);
}

#[test]
fn a_template_the_policy_names_must_exist_when_the_engine_is_built() {
    let err = Engine::from_text(
        "t.policy",
        "policy \"t\" {\n  template \"missing.md.j2\"\n}\nstrategy { full_new otherwise }\n",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "t.policy:1:1: error: the policy asks for template `missing.md.j2`, which is neither in the template directory nor embedded"
    );
}
