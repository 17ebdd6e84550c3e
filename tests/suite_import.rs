//! Test target `import` (`cargo test --test import`): importing sessions (Claude Code, Codex CLI)
//! and the quality gates. Each module is one file of tests/; the helpers the files share are
//! declared once below, and a file names them `crate::common` (docs/architecture.md#tests: how to
//! add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;

#[path = "import_cli.rs"]
mod import_cli;
#[path = "quality_cli.rs"]
mod quality_cli;
