//! The summarizer results an operation keeps (feature `postgres`): what lets a PostgreSQL
//! operation run its external summarizer once, outside its locks (`store::summarized`).

use crate::deliver::summarizer::ExternalCommand;
use crate::summarize::{SummarizerFailure, SummaryRequest};
use std::cell::RefCell;

/// A kept result: the command, the budget and the input it was run with, and what it gave.
struct Kept {
    key: String,
    out: Result<String, SummarizerFailure>,
}

thread_local! {
    static KEPT: RefCell<Option<Vec<Kept>>> = const { RefCell::new(None) };
}

/// Ends [`remembering`], also when the operation panics.
struct Forget(bool);

impl Drop for Forget {
    fn drop(&mut self) {
        if self.0 {
            KEPT.with(|k| k.borrow_mut().take());
        }
    }
}

/// Run `op` keeping every summarizer result it gets, for the rest of `op` (nested calls keep
/// the outer one's).
pub(crate) fn remembering<T>(op: impl FnOnce() -> T) -> T {
    let outer = KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let fresh = k.is_none();
        if fresh {
            *k = Some(Vec::new());
        }
        fresh
    });
    let _forget = Forget(outer);
    op()
}

fn key(cmd: &ExternalCommand, request: &SummaryRequest<'_>) -> String {
    format!(
        "{}\u{0}{:?}\u{0}{}\u{0}{}",
        cmd.program, cmd.args, request.budget, request.input
    )
}

/// The kept result of running `cmd` on `request`, if one is kept.
pub(crate) fn recalled(
    cmd: &ExternalCommand,
    request: &SummaryRequest<'_>,
) -> Option<Result<String, SummarizerFailure>> {
    KEPT.with(|k| {
        let k = k.borrow();
        let key = key(cmd, request);
        k.as_ref()?
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.out.clone())
    })
}

/// Keep what running `cmd` on `request` gave (while [`remembering`]).
pub(crate) fn remember(
    cmd: &ExternalCommand,
    request: &SummaryRequest<'_>,
    out: &Result<String, SummarizerFailure>,
) {
    KEPT.with(|k| {
        if let Some(kept) = k.borrow_mut().as_mut() {
            kept.push(Kept {
                key: key(cmd, request),
                out: out.clone(),
            });
        }
    });
}
