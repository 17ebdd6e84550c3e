//! The store's two backends, for the suites that run on both (issue 31, docs/store.md).
//!
//! A test that goes through the store takes a [`Backend`] from the [`backends`] template:
//!
//! ```ignore
//! use crate::common::backend::{backends, Backend, TestDb};
//! use rstest_reuse::apply;
//!
//! #[apply(backends)]
//! fn a_dispatch_records_one_run(#[case] backend: Backend) {
//!     let db = TestDb::new(backend);
//!     db.ok(&["db", "import", "examples/seed-switch.yaml"]);
//! }
//! ```
//!
//! Every build runs the SQLite case. A build with feature `postgres` runs the PostgreSQL case
//! too, each test on a fresh database of the server `BATON_TEST_PG` names (`.ci/pg.sh start`
//! starts one); without that variable the PostgreSQL cases fail, naming it: never a mock, never
//! a silent skip. .ci/run runs the store and serve suites with the feature and a server.

// Not every suite that declares `common` applies the template.
#![allow(unused_macros, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Which backend a test's database is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in a temporary directory.
    Sqlite,
    /// A fresh database on the PostgreSQL server `BATON_TEST_PG` names.
    #[cfg(feature = "postgres")]
    Postgres,
}

/// The cases of a test that runs on every backend this build has: `sqlite`, and `postgres` in
/// builds with the feature. Use it with `#[rstest_reuse::apply(backends)]` and a
/// `#[case] backend: Backend` argument.
#[rstest_reuse::template]
#[rstest::rstest]
#[case::sqlite(crate::common::backend::Backend::Sqlite)]
#[cfg_attr(
    feature = "postgres",
    case::postgres(crate::common::backend::Backend::Postgres)
)]
pub fn backends(#[case] backend: Backend) {}

/// The PostgreSQL test server's URL, from `BATON_TEST_PG`; a loud failure without it.
#[cfg(feature = "postgres")]
pub fn pg_server_url() -> String {
    match std::env::var("BATON_TEST_PG") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "BATON_TEST_PG is not set: the postgres tests need a real server; run `eval \"$(.ci/pg.sh start)\"` first"
        ),
    }
}

/// A fresh, empty database on the PostgreSQL test server, for one test: its URL.
#[cfg(feature = "postgres")]
pub fn fresh_pg_db() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let base = pg_server_url();
    let name = format!(
        "baton_t{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut admin =
        baton::store::pg::postgres::Client::connect(&base, baton::store::pg::postgres::NoTls)
            .expect("the test server answers");
    // One statement each: DROP/CREATE DATABASE cannot run in a transaction block.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .expect("drops a leftover database");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("creates a database");
    with_database(&base, &name)
}

/// `url` naming database `db` instead of its own.
pub fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let (scheme, rest) = head.split_once("://").expect("a URL");
    let authority = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{authority}/{db}{query}")
}

/// A database of one backend for one test, with a temporary directory (off-band documents under
/// `docs/`), and the `baton` binary run on it through `$BATON_DB` and `$BATON_HANDOFF_DIR`.
pub struct TestDb {
    /// The backend the database is on.
    pub backend: Backend,
    /// The test's temporary directory (the SQLite file is `baton.db` in it).
    pub dir: tempfile::TempDir,
    /// What `--db` / `$BATON_DB` takes: the SQLite file's path or the PostgreSQL URL.
    pub url: String,
}

impl TestDb {
    /// A new, empty database on `backend` (on SQLite nothing is created until a command runs).
    pub fn new(backend: Backend) -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = match backend {
            Backend::Sqlite => dir.path().join("baton.db").display().to_string(),
            #[cfg(feature = "postgres")]
            Backend::Postgres => fresh_pg_db(),
        };
        TestDb { backend, dir, url }
    }

    /// How baton names this database in its messages (the location of its errors): the file's
    /// path, or the URL with its password hidden.
    pub fn shown(&self) -> String {
        baton::store::DbUrl::parse(&self.url).redacted()
    }

    /// The `--db` option of a command baton advises, as these tests' commands show it: the
    /// database comes from `BATON_DB`, so a PostgreSQL URL (whose password would be hidden) is
    /// left out of the advice; a SQLite file is named.
    pub fn db_opt(&self) -> String {
        match self.backend {
            Backend::Sqlite => format!(" --db {}", self.shown()),
            #[cfg(feature = "postgres")]
            Backend::Postgres => String::new(),
        }
    }

    /// The SQLite file, for a test about SQLite itself; `None` on PostgreSQL.
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        match self.backend {
            Backend::Sqlite => Some(PathBuf::from(&self.url)),
            #[cfg(feature = "postgres")]
            Backend::Postgres => None,
        }
    }

    /// Where the database's off-band documents go.
    pub fn docs(&self) -> PathBuf {
        self.dir.path().join("docs")
    }

    /// The test's temporary directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Opens the database through the library's one handle on either backend.
    pub fn open(&self) -> baton::store::Db {
        baton::store::Db::open(
            &baton::store::DbUrl::parse(&self.url),
            std::time::Duration::from_secs(5),
        )
        .expect("the test database opens")
    }

    /// `baton ARGS...` on this database.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = super::baton_cmd();
        c.env("BATON_HANDOFF_DIR", self.docs())
            .env("BATON_DB", &self.url)
            .env_remove("BATON_FAULT")
            .args(args);
        c
    }

    /// Run `baton ARGS...` on this database and collect its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("baton runs")
    }

    /// Run `baton ARGS...`, expect success, return what it printed.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "baton {args:?} on {}: {}{}",
            self.shown(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).expect("UTF-8")
    }

    /// [`TestDb::ok`], its output read as JSON.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).expect("JSON")
    }

    /// The one integer `sql` selects, asked of the database directly (for a test about what
    /// the store keeps; the SQL must mean the same on both backends).
    pub fn scalar(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Sqlite => rusqlite::Connection::open(&self.url)
                .expect("the SQLite file opens")
                .query_row(sql, [], |r| r.get(0))
                .expect("the query answers"),
            #[cfg(feature = "postgres")]
            Backend::Postgres => pg_client(&self.url)
                .query_one(sql, &[])
                .expect("the query answers")
                .get(0),
        }
    }

    /// The text column `sql` selects, one value a row, asked of the database directly.
    pub fn strings(&self, sql: &str) -> Vec<String> {
        match self.backend {
            Backend::Sqlite => {
                let c = rusqlite::Connection::open(&self.url).expect("the SQLite file opens");
                let mut st = c.prepare(sql).expect("the query prepares");
                let rows = st
                    .query_map([], |r| r.get::<_, String>(0))
                    .expect("the query answers")
                    .collect::<Result<Vec<_>, _>>()
                    .expect("every row reads");
                rows
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres => pg_client(&self.url)
                .query(sql, &[])
                .expect("the query answers")
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }

    /// Runs `sql` on the database directly (for a test that damages it on purpose).
    pub fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Sqlite => {
                rusqlite::Connection::open(&self.url)
                    .expect("the SQLite file opens")
                    .execute_batch(sql)
                    .expect("the statement runs");
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres => pg_client(&self.url)
                .batch_execute(sql)
                .expect("the statement runs"),
        }
    }
}

/// A plain connection to the PostgreSQL database `url`.
#[cfg(feature = "postgres")]
fn pg_client(url: &str) -> baton::store::pg::postgres::Client {
    baton::store::pg::postgres::Client::connect(url, baton::store::pg::postgres::NoTls)
        .expect("the test server answers")
}
