//! The split of the operations that may run an external summarizer (`dispatch`,
//! `regenerate`, `merge_back`): **prepare** (load, decide, select, summarize, render) in a
//! read transaction, a snapshot that takes no lock, then **record** in the write transaction
//! after re-reading every thread the preparation read and finding it unchanged. A thread that
//! moved meanwhile is prepared once more; if it moved again, nothing is recorded and the error
//! is [`StoreErrorKind::ThreadMoved`]. Without an external summarizer, both steps run in one
//! write transaction, as every other lifecycle operation does.

use crate::policy::Policy;
use crate::state::State;
use crate::store::io::Cx;
use crate::store::{sql_err, Store, StoreError, StoreErrorKind};
use std::time::Duration;

/// The names of an operation's steps, as its errors say them.
pub(super) struct Steps {
    /// The one write transaction, without a summarizer (`"starting a dispatch"`).
    pub(super) at_once: &'static str,
    /// The read transaction that prepares (`"deciding a dispatch"`).
    pub(super) deciding: &'static str,
    /// The write transaction that records (`"recording a dispatch"`).
    pub(super) recording: &'static str,
    /// What to do after [`StoreErrorKind::ThreadMoved`] (`"dispatch again"`).
    pub(super) again: &'static str,
}

/// Prepare with `prepare` and record with `record`, holding the guard `writer` returns only
/// while the write transaction is open. See the module's documentation.
pub(super) fn prepare_then_record<P, T, G>(
    store: &mut Store,
    policy: &Policy,
    steps: &Steps,
    writer: impl Fn() -> G,
    mut prepare: impl FnMut(&Cx<'_>, &str, &mut Reads) -> Result<P, StoreError>,
    record: impl FnOnce(rusqlite::Transaction<'_>, &str, Duration, P) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if !crate::deliver::runs_command(policy) {
        let _writer = writer();
        let (tx, path, busy) = store.begin(steps.at_once)?;
        let cx = Cx::new(&tx, &path, busy);
        let prepared = prepare(&cx, &path, &mut Reads::default())?;
        return record(tx, &path, busy, prepared);
    }
    // A read-only database is refused before the summarizer runs, as `begin` refuses it
    // before anything else.
    store.refuse_read_only(steps.recording)?;
    let mut tries: u8 = 0;
    let (_writer, tx, path, busy, prepared) = loop {
        tries = tries.saturating_add(1);
        let (prepared, seen) = {
            let (tx, path, busy) = store.begin_read(steps.deciding)?;
            let cx = Cx::new(&tx, &path, busy);
            let mut reads = Reads::rechecking();
            let prepared = prepare(&cx, &path, &mut reads)?;

            // Nothing was written: ending the read transaction releases its snapshot.
            tx.rollback()
                .map_err(|e| sql_err(&path, busy, "ending the read", e))?;
            (prepared, reads.seen)
        };
        let guard = writer();
        let (tx, path, busy) = store.begin(steps.recording)?;
        let moved = {
            let cx = Cx::new(&tx, &path, busy);
            first_moved(&cx, &seen)?
        };
        match moved {
            None => break (guard, tx, path, busy, prepared),
            Some((thread, what)) if tries >= 2 => {
                return Err(StoreError::new(
                    path,
                    StoreErrorKind::ThreadMoved {
                        thread,
                        what,
                        again: steps.again.to_string(),
                    },
                ))
            }
            // Changed under the summarizer: prepare again from the threads as they are now.
            Some(_) => drop(tx),
        }
    };
    record(tx, &path, busy, prepared)
}

/// What an operation read of the threads it prepares from, to be re-checked before it records.
#[derive(Default)]
pub(super) struct Reads {
    recheck: bool,
    seen: Vec<Snapshot>,
}

impl Reads {
    /// Reads that remember what they read, for the re-check.
    pub(super) fn rechecking() -> Reads {
        Reads {
            recheck: true,
            seen: Vec::new(),
        }
    }

    /// Whether the operation re-checks what it read (it runs an external summarizer).
    pub(super) fn rechecks(&self) -> bool {
        self.recheck
    }

    /// `thread` without its items: run metadata, provider threads, handoffs, transfers,
    /// checkpoints and the thread record. When the operation re-checks, it is remembered
    /// with the thread's item count.
    pub(super) fn meta(&mut self, cx: &Cx<'_>, thread: &str) -> Result<State, StoreError> {
        let meta = cx.load_items_after(thread, u32::MAX)?;
        if self.recheck {
            self.seen.push(Snapshot {
                items: item_count(cx, thread)?,
                meta: meta.clone(),
            });
        }
        Ok(meta)
    }

    /// `thread` in full ([`Reads::meta`] and every item).
    pub(super) fn load(&mut self, cx: &Cx<'_>, thread: &str) -> Result<State, StoreError> {
        let mut state = self.meta(cx, thread)?;
        cx.fill_items(thread, 0, &mut state.runs)?;
        Ok(state)
    }
}

/// What is re-checked of a thread before recording: the thread without its items, and how
/// many items it has.
#[derive(Debug, PartialEq)]
struct Snapshot {
    meta: State,
    items: u64,
}

fn item_count(cx: &Cx<'_>, thread: &str) -> Result<u64, StoreError> {
    cx.conn
        .query_row(
            "SELECT COUNT(*) FROM items WHERE thread = ?1",
            [thread],
            |r| r.get::<_, u64>(0),
        )
        .map_err(|e| cx.err("counting the thread's items", e))
}

/// The first thread of `seen` that is not as it was read, and what changed in it.
fn first_moved(cx: &Cx<'_>, seen: &[Snapshot]) -> Result<Option<(String, String)>, StoreError> {
    for before in seen {
        let thread = before.meta.thread.id.as_str();
        let now = Snapshot {
            meta: cx.load_items_after(thread, u32::MAX)?,
            items: item_count(cx, thread)?,
        };
        if let Some(what) = what_moved(before, &now) {
            return Ok(Some((thread.to_string(), what)));
        }
    }
    Ok(None)
}

/// What differs between the thread as the operation read it and as it is now; `None` if
/// nothing does.
fn what_moved(before: &Snapshot, now: &Snapshot) -> Option<String> {
    let (b, n) = (&before.meta, &now.meta);
    let runs = |s: &State| match s.runs.last() {
        Some(r) => format!(
            "{} runs (last: run {} {})",
            s.runs.len(),
            r.ordinal,
            r.status.as_str()
        ),
        None => "no runs".to_string(),
    };
    let count = |what: &str, b: usize, n: usize| format!("its {what}: {b}, now {n}");
    if b.runs != n.runs {
        Some(format!("its runs: {}, now {}", runs(b), runs(n)))
    } else if before.items != now.items {
        Some(format!("its items: {}, now {}", before.items, now.items))
    } else if b.handoffs != n.handoffs {
        Some(count("handoffs", b.handoffs.len(), n.handoffs.len()))
    } else if b.transfers != n.transfers {
        Some(count("transfers", b.transfers.len(), n.transfers.len()))
    } else if b.provider_threads != n.provider_threads {
        Some(count(
            "provider threads",
            b.provider_threads.len(),
            n.provider_threads.len(),
        ))
    } else if b.checkpoints != n.checkpoints {
        Some(count(
            "checkpoints",
            b.checkpoints.len(),
            n.checkpoints.len(),
        ))
    } else if b != n {
        Some("its thread record (title, compaction summary, providers or request)".to_string())
    } else {
        None
    }
}
