//! Test target `import` (`cargo test --test import`): importing sessions (Claude Code, Codex CLI)
//! and the quality gates. Each module is one file of tests/, unchanged; `#[path]` makes rustc look
//! for the file's own `mod common;`-style helpers in tests/ itself (docs/architecture.md#tests: how
//! to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;

#[path = "import_cli.rs"]
mod import_cli;
#[path = "quality_cli.rs"]
mod quality_cli;
