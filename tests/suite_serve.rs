//! Test target `serve` (`cargo test --test serve`): the JSON-RPC service (`baton serve`):
//! transport, concurrency, errors, operations, limits. The tests that go through the store run
//! on both backends (`common::backend`: SQLite always, PostgreSQL with feature `postgres`;
//! docs/service.md#tested-on-both-backends). Each module is one file of tests/; the helpers
//! the files share are declared once below, and a file names them `crate::common`
//! (docs/architecture.md#tests: how to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;
mod multi_serve;
mod serve_support;

// A test database of either backend (`common::backend`) is one `baton serve` can run on, with
// its documents under `docs/`, where the `baton` commands `TestDb::cmd` runs put them too.
// (Here, not in serve_support: the benches that share serve_support have no `common`.)
impl serve_support::ServedDb for common::backend::TestDb {
    fn db_url(&self) -> String {
        self.url.clone()
    }
    fn root(&self) -> &std::path::Path {
        self.path()
    }
    fn doc_root(&self) -> std::path::PathBuf {
        self.docs()
    }
}

#[path = "limits_serve.rs"]
mod limits_serve;
#[path = "serve_concurrency.rs"]
mod serve_concurrency;
#[path = "serve_database.rs"]
mod serve_database;
#[path = "serve_docs.rs"]
mod serve_docs;
#[path = "serve_errors.rs"]
mod serve_errors;
#[path = "serve_ops.rs"]
mod serve_ops;
#[path = "serve_reports.rs"]
mod serve_reports;
#[path = "serve_state_text_pool.rs"]
mod serve_state_text_pool;
#[path = "serve_store.rs"]
mod serve_store;
#[path = "serve_summarizer_lock.rs"]
mod serve_summarizer_lock;
#[path = "serve_transport.rs"]
mod serve_transport;
