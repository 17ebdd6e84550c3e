//! Test target `cli` (`cargo test --test cli`): the `baton` command line: explain, delivery,
//! pre-grants, the reference pages. Each module is one file of tests/; the helpers the files share
//! are declared once below, and a file names them `crate::common` (docs/architecture.md#tests: how
//! to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;

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
