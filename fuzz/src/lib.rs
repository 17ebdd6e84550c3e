//! The properties baton's fuzz targets check. `src/serve/fuzz_props_tests.rs` runs the same file under
//! proptest on stable, so `cargo test` checks them too.
#[path = "props.rs"]
pub mod props;
