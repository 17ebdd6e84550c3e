//! The properties baton's fuzz targets check. `tests/fuzz_props.rs` runs the same file under
//! proptest on stable, so `cargo test` checks them too.
#[path = "props.rs"]
pub mod props;
