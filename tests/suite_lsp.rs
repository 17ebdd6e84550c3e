//! Test target `lsp` (`cargo test --test lsp`): the language server (`baton lsp`, feature `lsp`).
//! Each module is one file of tests/; the helpers the files share are declared once below, and a
//! file names them `crate::common` (docs/architecture.md#tests: how to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod lsp_support;

#[path = "lsp.rs"]
mod lsp;
#[path = "lsp_props.rs"]
mod lsp_props;
