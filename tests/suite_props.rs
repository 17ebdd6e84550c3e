//! Test target `props` (`cargo test --test props`): property tests: the formatter's round trip and
//! the fuzz targets' properties. Each module is one file of tests/, unchanged; `#[path]` makes
//! rustc look for the file's own `mod common;`-style helpers in tests/ itself
//! (docs/architecture.md#tests: how to add one).

#[path = "fuzz_props.rs"]
mod fuzz_props;
