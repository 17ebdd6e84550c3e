//! Pre-grants persisted in the `grants` table: the [`GrantStore`] of the SQLite store.
//! [`SqlGrants`] works on any connection, so a dispatch inserts its grant inside the same
//! transaction as its handoff.

use super::Store;
use crate::deliver::{DeliveryError, Grant, GrantStore};
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};

/// Grants on one connection or open transaction.
pub(crate) struct SqlGrants<'c> {
    pub conn: &'c Connection,
    pub path: String,
}

impl SqlGrants<'_> {
    fn fail(&self, e: rusqlite::Error) -> DeliveryError {
        DeliveryError::Store(format!("{}: {e}", self.path))
    }

    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT tool, path, uses_left, handoff FROM grants
                 WHERE thread = ?1 AND run = ?2 ORDER BY id",
            )
            .map_err(|e| self.fail(e))?;
        let rows = st
            .query_map(params![thread, run], |r| {
                Ok(Grant {
                    thread: thread.to_string(),
                    run,
                    tool: r.get(0)?,
                    path: PathBuf::from(r.get::<_, String>(1)?),
                    uses_left: r.get(2)?,
                    handoff: r.get(3)?,
                })
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(e))
    }

    fn consume(&self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError> {
        // One statement: two checks racing for the last use cannot both win.
        let n = self
            .conn
            .execute(
                "UPDATE grants SET uses_left = uses_left - 1
                 WHERE id = (SELECT id FROM grants WHERE thread = ?1 AND run = ?2 AND path = ?3
                             AND uses_left > 0 ORDER BY id LIMIT 1)",
                params![thread, run, path.to_string_lossy()],
            )
            .map_err(|e| self.fail(e))?;
        Ok(n == 1)
    }

    fn insert(&self, g: &Grant) -> Result<(), DeliveryError> {
        self.conn
            .execute(
                "INSERT INTO grants (thread, run, tool, path, uses_left, handoff)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    g.thread,
                    g.run,
                    g.tool,
                    g.path.to_string_lossy(),
                    g.uses_left,
                    g.handoff
                ],
            )
            .map(|_| ())
            .map_err(|e| self.fail(e))
    }
}

impl GrantStore for SqlGrants<'_> {
    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError> {
        SqlGrants::find(self, thread, run)
    }
    fn consume(&mut self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError> {
        SqlGrants::consume(self, thread, run, path)
    }
    fn insert(&mut self, g: Grant) -> Result<(), DeliveryError> {
        SqlGrants::insert(self, &g)
    }
}

impl Store {
    fn grants(&self) -> SqlGrants<'_> {
        SqlGrants {
            conn: &self.conn,
            path: self.name(),
        }
    }
}

impl GrantStore for Store {
    fn find(&self, thread: &str, run: u32) -> Result<Vec<Grant>, DeliveryError> {
        self.grants().find(thread, run)
    }
    fn consume(&mut self, thread: &str, run: u32, path: &Path) -> Result<bool, DeliveryError> {
        self.grants().consume(thread, run, path)
    }
    fn insert(&mut self, g: Grant) -> Result<(), DeliveryError> {
        self.grants().insert(&g)
    }
}
