//! Helpers shared by the integration tests that run the `baton` binary.
#![allow(dead_code)]

use std::process::{Command, Output};

pub mod backend;

/// Where the tests' decisions put off-band documents, so that paths are stable.
pub const DOC_ROOT: &str = "/tmp/baton-test-docs";

/// The `baton` binary, run from the crate root with [`DOC_ROOT`] as its document root.
pub fn baton_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("BATON_HANDOFF_DIR", DOC_ROOT);
    c
}

/// What a run printed on standard output (lossy UTF-8).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a run printed on standard error (lossy UTF-8).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Run `baton ARGS...` and collect its output.
pub fn baton(args: &[&str]) -> Output {
    baton_cmd().args(args).output().expect("baton runs")
}

/// Replace every short policy hash (`sha256 0123456789ab`) with `sha256 <policy>`, so that
/// snapshots of explain output and documents do not change with every edit of a policy.
pub fn redact_sha(text: &str) -> String {
    const TAG: &str = "sha256 ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(TAG) {
        let (head, tail) = rest.split_at(i + TAG.len());
        out.push_str(head);
        let hex = tail.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        if hex >= 12 {
            out.push_str("<policy>");
            rest = &tail[hex..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// A checked policy (a shipped profile name, a policy file or a directory), as a user gets one:
/// from the [`baton::Engine`] built from it. Its error is the policy's, as `baton check` shows.
pub fn policy(spec: &str) -> Result<std::sync::Arc<baton::Policy>, baton::PolicyError> {
    checked(baton::Engine::new(spec))
}

/// Policy text held in memory, checked (see [`policy`]).
pub fn policy_text(
    name: &str,
    text: &str,
) -> Result<std::sync::Arc<baton::Policy>, baton::PolicyError> {
    checked(baton::Engine::from_text(name, text))
}

fn checked(
    engine: Result<baton::Engine, baton::Error>,
) -> Result<std::sync::Arc<baton::Policy>, baton::PolicyError> {
    match engine {
        Ok(engine) => Ok(engine.shared_policy()),
        Err(baton::Error::Policy(e)) => Err(e),
        Err(e) => panic!("building the engine failed for another reason than its policy: {e}"),
    }
}

/// The engine of a checked `policy` with the embedded templates, deciding with off-band
/// documents under `root` (`None`: the default `<tmp>/baton-<uid>`).
pub fn engine_of(
    policy: &std::sync::Arc<baton::Policy>,
    root: Option<std::path::PathBuf>,
) -> baton::Engine {
    let templates = baton::TemplateSet::load(None).expect("the embedded templates compile");
    baton::Engine::from_parts(policy.clone(), templates, root).expect("the engine builds")
}

/// The engine of the policy `spec` (see [`policy`]) with off-band documents under `root`.
pub fn engine_in(spec: &str, root: impl Into<std::path::PathBuf>) -> baton::Engine {
    baton::Engine::builder(spec)
        .document_root(Some(root.into()))
        .build()
        .expect("policy checks")
}

/// A summarizer script in `dir` that, on its n-th call, marks `started.n` in `dir` and waits
/// for `go.n` (or gives up when `dir` is gone), then prints a summary naming the call: the
/// tests that hold a summarizer mid-run (outside the store's lock) share it.
pub fn gated_summarizer(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let marks = dir.display().to_string();
    let script = dir.join("gated.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\nn=1\nwhile [ -e '{marks}/started.'$n ]; do n=$((n+1)); done\n\
             touch '{marks}/started.'$n\nwhile [ ! -e '{marks}/go.'$n ]; do [ -d '{marks}' ] || exit 1; sleep 0.01; done\n\
             echo '## Summary'\necho \"Written by the gated summarizer, call $n.\"\n"
        ),
    )
    .expect("writes the script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}
