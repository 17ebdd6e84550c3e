//! `baton lsp`: a thin shell over [`crate::lsp::run_stdio`].

use super::commands::{FAIL, OK};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct LspArgs {
    /// Talk over standard input and output (the only transport; accepted because editors'
    /// clients pass it).
    #[arg(long)]
    pub stdio: bool,
    /// Quiet time after an edit before the document is checked again.
    #[arg(long, default_value_t = 150, value_name = "MS")]
    pub debounce_ms: u64,
}

pub(crate) fn lsp(a: LspArgs) -> u8 {
    let options = crate::lsp::Options {
        debounce: Duration::from_millis(a.debounce_ms),
    };
    match crate::lsp::run_stdio(options) {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("{e}");
            FAIL
        }
    }
}
