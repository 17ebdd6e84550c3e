//! The safety net of partial staging (the PostgreSQL backend, `store::pg::stage`): a lifecycle
//! operation may run on a staging store that holds only part of one thread (what a dispatch's
//! window or a run's completion reads). The loaders of `store::io` and `store::window` report
//! here what they read of that thread; a read of rows that were not staged is remembered, and
//! the backend then throws the operation's work away and runs it again on the whole thread.
//! Correctness therefore never depends on the staging being right, only its speed does.
//!
//! Nothing is active outside a partially staged operation: on SQLite every check is one
//! thread-local look-up that finds nothing.

// Only the PostgreSQL backend stages a thread partly.
#![cfg_attr(not(feature = "postgres"), allow(dead_code))]

use std::cell::RefCell;

/// What a staging store holds of one thread, besides its `threads` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Partial {
    /// The thread partly staged (other threads are staged whole).
    pub(crate) thread: String,
    /// Every run from this ordinal on is staged.
    pub(crate) runs_from: u32,
    /// Run 1 is staged too (a window's history reads it).
    pub(crate) first_run: bool,
    /// The items of every run after this one are staged.
    pub(crate) items_after: u32,
    /// `Some(a)`: the handoffs a window after run `a` reads are staged (with the thread's
    /// newest handoff); `None`: no read of the thread's handoffs is covered.
    pub(crate) handoffs_after: Option<u32>,
    /// Every provider thread, transfer and checkpoint of the thread is staged.
    pub(crate) meta: bool,
    /// The id the thread's next handoff gets, read from the whole thread on the server.
    pub(crate) next_handoff_id: Option<String>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Partial>> = const { RefCell::new(None) };
    static MISSED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Ends an activation, also when the operation panics.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().take());
    }
}

/// Run `op` with `partial` active (nothing when `None`); returns its result and the first read
/// it made of rows that were not staged (`None`: every read was covered).
pub(crate) fn run<T>(partial: Option<Partial>, op: impl FnOnce() -> T) -> (T, Option<String>) {
    MISSED.with(|m| m.borrow_mut().take());
    ACTIVE.with(|a| *a.borrow_mut() = partial);
    let reset = Reset;
    let out = op();
    drop(reset);
    (out, MISSED.with(|m| m.borrow_mut().take()))
}

/// Whether `thread` is partly staged: `ok` says whether the read is covered, `what` names it.
fn check(thread: &str, ok: impl FnOnce(&Partial) -> bool, what: impl FnOnce() -> String) {
    let missed = ACTIVE.with(|a| {
        a.borrow()
            .as_ref()
            .is_some_and(|p| p.thread == thread && !ok(p))
    });
    if missed {
        MISSED.with(|m| {
            m.borrow_mut().get_or_insert_with(what);
        });
    }
}

/// A read of `thread`'s runs in `after+1..=upto`.
pub(crate) fn runs(thread: &str, after: u32, upto: u32) {
    check(
        thread,
        |p| after.saturating_add(1) >= p.runs_from || (p.first_run && after == 0 && upto <= 1),
        || format!("runs {}..={upto}", after.saturating_add(1)),
    );
}

/// A read of the items of `thread`'s runs after `after`.
pub(crate) fn items(thread: &str, after: u32) {
    check(
        thread,
        |p| after >= p.items_after,
        || format!("the items after run {after}"),
    );
}

/// A read of `thread`'s handoffs: those a window after `after` needs (`None`: every one).
pub(crate) fn handoffs(thread: &str, after: Option<u32>) {
    check(
        thread,
        |p| matches!((p.handoffs_after, after), (Some(h), Some(a)) if a >= h),
        || "the handoffs".to_string(),
    );
}

/// A read of every provider thread, transfer or checkpoint of `thread` (`what`).
pub(crate) fn meta(thread: &str, what: &str) {
    check(thread, |p| p.meta, || what.to_string());
}

/// The id of `thread`'s next handoff when the thread is partly staged (its handoffs are not
/// all there to count).
pub(crate) fn next_handoff_id(thread: &str) -> Option<String> {
    ACTIVE.with(|a| {
        a.borrow()
            .as_ref()
            .filter(|p| p.thread == thread)
            .and_then(|p| p.next_handoff_id.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> Partial {
        Partial {
            thread: "t".into(),
            runs_from: 10,
            first_run: true,
            items_after: 10,
            handoffs_after: Some(10),
            meta: true,
            next_handoff_id: Some("H3".into()),
        }
    }

    #[test]
    fn reads_inside_what_was_staged_are_not_missed() {
        let ((), missed) = run(Some(window()), || {
            runs("t", 9, u32::MAX);
            runs("t", 0, 1);
            items("t", 10);
            handoffs("t", Some(10));
            meta("t", "transfers");
            runs("other", 0, u32::MAX);
            assert_eq!(next_handoff_id("t").as_deref(), Some("H3"));
        });
        assert_eq!(missed, None);
        assert_eq!(next_handoff_id("t"), None, "nothing is active afterwards");
    }

    #[test]
    fn the_first_read_outside_is_reported() {
        let ((), missed) = run(Some(window()), || {
            runs("t", 0, u32::MAX);
            items("t", 0);
        });
        assert_eq!(missed.as_deref(), Some("runs 1..=4294967295"));
        let ((), missed) = run(Some(window()), || handoffs("t", None));
        assert_eq!(missed.as_deref(), Some("the handoffs"));
        let ((), missed) = run(None, || handoffs("t", None));
        assert_eq!(missed, None);
    }
}
