//! `baton policy list|show`, `baton init`, `baton completions`, `baton man`: what a new team
//! and a shell get from the binary alone.

use crate::common;

use std::path::Path;
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn policy_list_names_every_shipped_policy_and_template() {
    let out = common::baton(&["policy", "list"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    for name in [
        "default",
        "t3code",
        "t3code-legacy",
        "mcode",
        "handoff.md.j2",
        "inline.md.j2",
    ] {
        assert!(s.contains(name), "`{name}` missing from:\n{s}");
    }
    assert!(
        s.contains("Seed 000: resume the target's own thread"),
        "{s}"
    );
}

#[test]
fn policy_show_prints_the_shipped_source_byte_for_byte() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, file) in [
        ("default", "policies/default.policy"),
        ("mcode.policy", "policies/mcode.policy"),
        ("handoff.md.j2", "templates/handoff.md.j2"),
        ("t3code.md", "templates/t3code.md.j2"),
    ] {
        let out = common::baton(&["policy", "show", name]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            std::fs::read_to_string(root.join(file)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn a_shown_policy_saved_to_a_file_checks_and_decides_like_the_shipped_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::baton(&["policy", "show", "default"]);
    let mine = dir.path().join("my.policy");
    std::fs::write(&mine, &out.stdout).unwrap();
    let check = common::baton(&["check", mine.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let state = "examples/seed-switch.yaml";
    let a = common::baton(&["explain", "--state", state, "--json"]);
    let b = common::baton(&[
        "explain",
        "--state",
        state,
        "--json",
        "--policy",
        mine.to_str().unwrap(),
    ]);
    let strip = |o: &std::process::Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["policy"] = serde_json::Value::Null;
        v["decided_by"]["at"] = serde_json::Value::Null;
        v["trace"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn policy_show_of_an_unknown_name_says_what_exists() {
    let out = common::baton(&["policy", "show", "defualt"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "error: no shipped policy or template named `defualt`; did you mean `default`?"
        ),
        "{err}"
    );
    assert!(
        err.contains("shipped: default, t3code, t3code-legacy, mcode, handoff.md.j2"),
        "{err}"
    );
}

/// Each `baton ...` line of the CI script `baton init` writes, run in the new directory with
/// this build of baton: exactly what the team's CI runs.
#[test]
fn init_scaffolds_a_team_policy_whose_ci_script_passes_as_created() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("team");
    let out = common::baton(&["init", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    for f in [
        "policies/team.policy",
        "policies/tests/team.yaml",
        "states/switch.yaml",
        "states/stale.yaml",
        "ci/baton.sh",
    ] {
        assert!(dir.join(f).is_file(), "{f} not written");
        assert!(said.contains(f), "{f} not listed:\n{said}");
    }
    let policy = std::fs::read_to_string(dir.join("policies/team.policy")).unwrap();
    assert!(policy.contains("extends \"default\""), "{policy}");
    let script = std::fs::read_to_string(dir.join("ci/baton.sh")).unwrap();
    let lines: Vec<&str> = script.lines().filter(|l| l.starts_with("baton ")).collect();
    assert!(lines.len() >= 3, "{script}");
    assert!(
        lines.iter().any(|l| l.starts_with("baton check")),
        "{script}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("baton test")),
        "{script}"
    );
    for line in lines {
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let o = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(&args)
            .current_dir(&dir)
            .env("BATON_HANDOFF_DIR", tmp.path().join("docs"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "`{line}` failed in the new directory:\n{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        if line.starts_with("baton test") {
            let s = text(&o.stdout);
            assert!(s.contains("2 passed, 0 failed"), "{s}");
        }
        if line.starts_with("baton check") {
            assert!(
                text(&o.stdout).contains("0 warnings"),
                "{}",
                text(&o.stdout)
            );
        }
    }
    // The two states decide differently under the team's policy: the point of the example.
    let explain = |state: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args([
                "explain",
                "--state",
                state,
                "--policy",
                "policies/team.policy",
            ])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    assert!(explain("states/switch.yaml").contains("delta_existing"));
    let stale = explain("states/stale.yaml");
    assert!(stale.contains("full_new"), "{stale}");
    assert!(stale.contains("too_many_off_provider_runs"), "{stale}");
}

#[test]
fn init_never_overwrites_and_writes_nothing_when_a_file_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("states")).unwrap();
    std::fs::write(d.join("states/stale.yaml"), "mine").unwrap();
    let out = common::baton(&["init", d.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("states/stale.yaml: error: already exists; baton init writes only new files (nothing was written)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("states/stale.yaml")).unwrap(),
        "mine"
    );
    assert!(!d.join("policies").exists());
}

#[test]
fn completions_are_generated_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_baton()"),
        ("zsh", "#compdef baton"),
        ("fish", "complete -c baton"),
        ("elvish", "edit:completion:arg-completer[baton]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = common::baton(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let s = text(&out.stdout);
        assert!(s.contains(marker), "{shell}: no `{marker}`");
        for sub in ["explain", "merge-back", "completions", "complete"] {
            assert!(s.contains(sub), "{shell}: `{sub}` not completed");
        }
    }
    let out = common::baton(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("possible values: bash, elvish, fish, powershell, zsh"));
}

#[test]
fn a_mistyped_command_is_told_the_nearest_one() {
    for (typo, want) in [
        ("completion", "completions"),
        ("complet", "complete"),
        ("polcy", "policy"),
        ("schemas", "schema"),
    ] {
        let out = common::baton(&[typo]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("tip: a similar subcommand exists: '{want}'")),
            "`baton {typo}`:\n{err}"
        );
    }
}

#[test]
fn the_man_page_documents_every_command() {
    let out = common::baton(&["man"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(
        s.starts_with(".ie \\n(.g .ds Aq"),
        "not roff:\n{}",
        &s[..80.min(s.len())]
    );
    assert!(s.contains(".TH baton 1"), "{s}");
    for sub in ["explain", "dispatch", "merge\\-back", "completions", "init"] {
        assert!(s.contains(sub), "`{sub}` missing from the man page");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = common::baton(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in [
        "baton.1",
        "baton-explain.1",
        "baton-db-init.1",
        "baton-pregrant-check.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page} not written");
    }
    let explain = std::fs::read_to_string(dir.path().join("baton-explain.1")).unwrap();
    assert!(explain.contains("\\-\\-state"), "{explain}");
}

/// Help texts speak to users: no reference to the developers' design document, whose section
/// numbers mean nothing to them. The man pages hold every command's help, long form included.
#[test]
fn no_help_text_cites_the_design_document() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::baton(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    let mut pages = 0;
    for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
        pages += 1;
        let page = std::fs::read_to_string(e.path()).unwrap();
        for word in ["DESIGN", "§"] {
            assert!(
                !page.contains(word),
                "{} cites `{word}`",
                e.path().display()
            );
        }
    }
    assert!(pages > 25, "only {pages} man pages");
}

#[test]
fn init_and_man_say_which_directory_they_cannot_write() {
    let out = common::baton(&["init", "/dev/null/team"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .starts_with("/dev/null/team/policies: error: cannot create the directory: "),
        "{}",
        text(&out.stderr)
    );
    let out = common::baton(&["man", "--out", "/dev/null/man"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("/dev/null/man: error: cannot write the man pages: "),
        "{}",
        text(&out.stderr)
    );
}
