//! The `baton` command: a thin shell over the library. Exit codes: 0 success, 1 a policy,
//! state or test failure the user must fix, 2 bad usage.

use baton::cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
