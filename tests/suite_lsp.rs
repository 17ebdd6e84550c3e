//! Test target `lsp` (`cargo test --test lsp`): the language server (`baton lsp`, feature `lsp`).
//! Each module is one file of tests/, unchanged; `#[path]` makes rustc look for the file's own `mod
//! common;`-style helpers in tests/ itself (docs/architecture.md#tests: how to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod lsp_support;

#[path = "lsp.rs"]
mod lsp;
#[path = "lsp_props.rs"]
mod lsp_props;
