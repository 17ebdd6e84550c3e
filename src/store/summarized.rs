//! An external summarizer run once per operation on PostgreSQL, outside the transaction.
//!
//! A PostgreSQL operation that may run the policy's summarizer (dispatch, regenerate,
//! merge-back) runs in two steps under [`remembering`]: first on a snapshot of its threads
//! (`PgStore::staged_read`: no lock, no transaction left open), where the summarizer runs and its
//! result is kept here; then in the staged unit of work that holds the threads' locks, where
//! the summarizer is not run again: the kept result is used for the same input. The lock is
//! therefore never held while a summarizer runs (it may take seconds), and a unit of work run
//! again after a serialization failure reuses the result too. Only when the thread changed
//! between the two steps (the input differs) does the summarizer run under the lock; the
//! SQLite-side re-check (`lifecycle::recheck`) then still applies within the staged store.

pub(crate) use crate::deliver::kept::remembering;
