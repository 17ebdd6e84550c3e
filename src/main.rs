//! The `baton` command: a thin shell over the library. Exit codes: 0 success, 1 a policy,
//! state or test failure the user must fix, 2 bad usage.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::arithmetic_side_effects
)]

use baton::cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
