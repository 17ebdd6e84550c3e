//! Test target `deliver` (`cargo test --test deliver`): delivery: off-band documents, staging,
//! pre-grants, garbage collection, the external summarizer. Kept apart from the suites that run the
//! `baton` binary: `deliver_offband` changes this process's environment ($BATON_HANDOFF_DIR), which
//! a spawned `baton` would inherit. Each module is one file of tests/, unchanged; `#[path]` makes
//! rustc look for the file's own `mod common;`-style helpers in tests/ itself
//! (docs/architecture.md#tests: how to add one).

// Each file keeps its own `mod common;`-style helper module, so the files stay as they were
// (and can be edited in parallel); a helper is compiled once per file that uses it.
#![allow(clippy::duplicate_mod)]

#[path = "deliver_gc.rs"]
mod deliver_gc;
#[path = "deliver_offband.rs"]
mod deliver_offband;
#[path = "deliver_pregrant.rs"]
mod deliver_pregrant;
#[path = "deliver_stage.rs"]
mod deliver_stage;
#[path = "deliver_summarizer.rs"]
mod deliver_summarizer;
