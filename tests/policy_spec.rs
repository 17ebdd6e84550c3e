//! How a policy argument is read (docs/cli.md#choosing-a-policy): a shipped profile name
//! first, never shadowed by a file or directory of that name in the working directory; a
//! path otherwise; and the constructors that say which they mean.

use baton::Engine;
use std::path::{Path, PathBuf};

use crate::common;

const TEAM: &str = r#"policy "team" { description "a local policy named like a shipped one" }
strategy {
  full_new otherwise because "always fresh"
}
"#;

/// A directory (the working directory of the command) holding a folder named `default`
/// whose one policy is not the shipped default.
fn shadowing_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("default")).unwrap();
    std::fs::write(dir.path().join("default/team.policy"), TEAM).unwrap();
    dir
}

fn seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed-switch.yaml")
}

fn explain_in(cwd: &Path, policy: &str) -> serde_json::Value {
    let out = common::baton_cmd()
        .current_dir(cwd)
        .args([
            "explain",
            "--state",
            seed().to_str().unwrap(),
            "--json",
            "--no-trace",
        ])
        .args(["--policy", policy])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_folder_named_default_does_not_shadow_the_shipped_default() {
    let dir = shadowing_dir();
    let v = explain_in(dir.path(), "default");
    assert_eq!(v["policy"]["name"], "default");
    assert_eq!(v["strategy"], "delta_existing");
}

#[test]
fn a_path_names_the_local_folder() {
    let dir = shadowing_dir();
    let v = explain_in(dir.path(), "./default");
    assert_eq!(v["policy"]["name"], "team");
    assert_eq!(v["strategy"], "full_new");
}

#[test]
fn the_library_reads_a_spec_as_the_command_does() {
    let dir = shadowing_dir();
    // `Engine::new` with a shipped name is the shipped profile wherever the process runs.
    assert_eq!(Engine::new("default").unwrap().policy().name(), "default");
    assert_eq!(Engine::shipped("t3code").unwrap().policy().name(), "t3code");
    let local = Engine::from_path(dir.path().join("default")).unwrap();
    assert_eq!(local.policy().name(), "team");
    let by_spec = Engine::new(dir.path().join("default").to_str().unwrap()).unwrap();
    assert_eq!(by_spec.policy().name(), "team");
}

#[test]
fn a_constructor_that_says_what_it_means_does_not_fall_back() {
    let e = Engine::shipped("no-such-profile").unwrap_err().to_string();
    assert!(
        e.contains("no shipped profile named `no-such-profile`"),
        "{e}"
    );
    assert!(e.contains("default, t3code"), "{e}");
    let missing = tempfile::tempdir().unwrap().path().join("mcode");
    let e = Engine::from_path(&missing).unwrap_err().to_string();
    assert!(
        e.contains("no policy file or directory at this path"),
        "{e}"
    );
}
