//! Test target `cli` (`cargo test --test cli`): the `baton` command line: explain, delivery,
//! pre-grants, the reference pages. Each module is one file of tests/, unchanged; `#[path]` makes
//! rustc look for the file's own `mod common;`-style helpers in tests/ itself
//! (docs/architecture.md#tests: how to add one).

// Each file keeps its own `mod common;`-style helper module, so the files stay as they were
// (and can be edited in parallel); a helper is compiled once per file that uses it.
#![allow(clippy::duplicate_mod)]

#[path = "cli_delivery.rs"]
mod cli_delivery;
#[path = "cli_explain.rs"]
mod cli_explain;
#[path = "cli_pregrant.rs"]
mod cli_pregrant;
#[path = "cli_reference.rs"]
mod cli_reference;
#[path = "engine_cli.rs"]
mod engine_cli;
