//! Test target `store` (`cargo test --test store`): the store and the thread lifecycle:
//! dispatch, forks, merge-backs, rollbacks, crash safety, read-only and packed databases, growth.
//! A test that is not about a SQLite file runs on both backends (`common::backend::backends`:
//! `case_1_sqlite`, and `case_2_postgres` with feature `postgres`; docs/store.md#what-the-tests-cover-on-each-backend).
//! Each module is one file of tests/; the helpers the files share are declared once below, and a
//! file names them `crate::common` (docs/architecture.md#tests: how to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;
mod privilege;

#[path = "crash_safety.rs"]
mod crash_safety;
#[path = "delivery_fallback.rs"]
mod delivery_fallback;
#[path = "lifecycle_replay.rs"]
mod lifecycle_replay;
#[path = "rollback_leaves_nothing.rs"]
mod rollback_leaves_nothing;
#[path = "store_cli.rs"]
mod store_cli;
#[path = "store_cli_reports.rs"]
mod store_cli_reports;
#[path = "store_growth.rs"]
mod store_growth;
#[path = "store_lifecycle.rs"]
mod store_lifecycle;
#[path = "store_packed.rs"]
mod store_packed;
#[path = "store_readonly.rs"]
mod store_readonly;
