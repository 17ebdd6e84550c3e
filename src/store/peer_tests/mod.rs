//! The anchors' own test suites, ported: each case names the peer test it mirrors (t3code's
//! orchestration-v2 tests, Mcode's handoff tests) and checks the same behaviour, state in,
//! decision and documents out (pre-grants and off-band delivery through the store's internals,
//! so these are unit tests). See README.md for what is ported and what is not.
//!
//! Layout: this module (declared by `src/store/mod.rs`); every file in this directory is a
//! module listed here.

mod lifecycle_common;
mod support;

mod mcode_fork;
mod mcode_handoff;
mod mcode_pregrant;
mod t3code_fork;
mod t3code_handoff_text;
mod t3code_merge_back;
mod t3code_switch;
