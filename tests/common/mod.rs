//! Helpers shared by the integration tests that run the `baton` binary.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Where the tests' decisions put off-band documents, so that paths are stable.
pub const DOC_ROOT: &str = "/tmp/baton-test-docs";

/// The `baton` binary, run from the crate root with [`DOC_ROOT`] as its document root.
pub fn baton_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("BATON_HANDOFF_DIR", DOC_ROOT);
    c
}

/// Run `baton ARGS...` and collect its output.
pub fn baton(args: &[&str]) -> Output {
    baton_cmd().args(args).output().expect("baton runs")
}
