//! The store's side of off-band garbage collection ([`Store::collect_documents`]): the pass
//! asks whether each handoff is still live while holding the database's write lock.
//!
//! Why the lock: a dispatch (or a regenerate, rollback or merge-back) writes its off-band
//! document inside its write transaction, before it commits the handoff row. A pass that
//! asked the store without the lock could find the directory of a dispatch in progress,
//! see no handoff row yet, and remove the document as belonging to an unknown handoff — the
//! document the next provider is about to read. Under `BEGIN IMMEDIATE` no delivery is half
//! done: every document on disk either has its row committed or belongs to a write that
//! failed and rolled back.

use super::{sql_err, Store, StoreError};
use crate::deliver::{self, DeliveryError, GcReport, HandoffLiveness, OffbandStore, Retention};
use rusqlite::{Connection, OptionalExtension};
use std::time::{Duration, SystemTime};

impl Store {
    /// One garbage-collection pass over `offband` (`deliver::gc_checked`), with each
    /// handoff's liveness read under the database's write lock (see the module docs); the
    /// lock is held for the pass and nothing is written to the database. A store that cannot
    /// take the lock (busy past its timeout) answers no lookup: the pass keeps every
    /// handoff the store would have to judge and reports why in its warnings (never delete
    /// on doubt). A database this process may only read cannot hold a delivery of this
    /// process in progress: its lookups are plain reads.
    pub fn collect_documents(
        &mut self,
        offband: &OffbandStore,
        retention: &Retention,
        now: SystemTime,
        dry_run: bool,
    ) -> Result<GcReport, DeliveryError> {
        const DURING: &str = "collecting off-band documents";
        let (name, busy) = (self.name(), self.busy);
        if self.refuse_read_only(DURING).is_err() {
            let lookup =
                |t: &str, h: &str| liveness(&self.conn, &name, busy, t, h).map_err(InWarning);
            return deliver::gc_checked(offband, retention, &lookup, now, dry_run);
        }
        match self.begin(DURING) {
            Ok((tx, name, busy)) => {
                let lookup = |t: &str, h: &str| liveness(&tx, &name, busy, t, h).map_err(InWarning);
                // The transaction wrote nothing: dropping it releases the lock.
                deliver::gc_checked(offband, retention, &lookup, now, dry_run)
            }
            Err(e) => {
                let e = InWarning(e);
                let lookup = |_: &str, _: &str| Err(&e);
                deliver::gc_checked(offband, retention, &lookup, now, dry_run)
            }
        }
    }

    /// For off-band GC: is this handoff live, superseded, or unknown (thread/handoff deleted)?
    /// A plain read: [`Store::collect_documents`] asks under the write lock.
    pub fn handoff_liveness(
        &self,
        thread: &str,
        handoff: &str,
    ) -> Result<HandoffLiveness, StoreError> {
        liveness(&self.conn, &self.name(), self.busy, thread, handoff)
    }
}

/// One indexed read of a handoff's status.
/// A store error in the GC report's warning (`kept handoffs the store could not be asked
/// about: DB: error: ...`), located in its database as the shells print store errors.
struct InWarning(StoreError);

impl std::fmt::Display for InWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::error::located(&self.0))
    }
}

fn liveness(
    conn: &Connection,
    name: &str,
    busy: Duration,
    thread: &str,
    handoff: &str,
) -> Result<HandoffLiveness, StoreError> {
    let status: Option<String> = conn
        .query_row(
            "SELECT status FROM handoffs WHERE thread = ?1 AND id = ?2",
            (thread, handoff),
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| sql_err(name, busy, "looking up a handoff", e))?;
    Ok(match status.as_deref() {
        None => HandoffLiveness::Unknown,
        Some("superseded") => HandoffLiveness::Superseded,
        Some(_) => HandoffLiveness::Live,
    })
}
