//! Test target `props` (`cargo test --test props`): property tests: the formatter's round trip and
//! the fuzz targets' properties. Each module is one file of tests/, unchanged; `#[path]` makes
//! rustc look for the file's own `mod common;`-style helpers in tests/ itself
//! (docs/architecture.md#tests: how to add one).

// Each file keeps its own `mod common;`-style helper module, so the files stay as they were
// (and can be edited in parallel); a helper is compiled once per file that uses it.
#![allow(clippy::duplicate_mod)]

#[path = "fuzz_props.rs"]
mod fuzz_props;
