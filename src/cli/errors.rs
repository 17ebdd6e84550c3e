//! How the `baton` command shows the library's errors. The library's errors are data (the
//! database, thread, run, ...) with a message that names no command; the advice to run
//! another `baton` command, written so that it can be pasted into a shell, is added here.

use crate::error::located;
use crate::store::hint::sh;
use crate::store::{ForkRefusal, RegenerateRefusal, StoreError, StoreErrorKind};

/// A store error located as `baton` prints it: `DB: error: message` (the library's message
/// names no database; [`StoreError::database`] is a field).
pub(crate) fn store_located(e: &StoreError) -> String {
    located(e)
}

/// A store error as `baton` prints it: located, then the command that helps.
pub(crate) fn store_error(e: &StoreError) -> String {
    let text = store_located(e);
    let path = e.database();
    match e.kind() {
        StoreErrorKind::ReadOnly { .. } => format!(
            "{text} (reading commands such as `baton db export` and `baton explain --thread` still work)"
        ),
        StoreErrorKind::NeedsMigration { .. } => format!(
            "{text}; run `baton db init --db {path}` where the file is writable to migrate it"
        ),
        StoreErrorKind::ThreadNotFound { .. } => {
            format!("{text}; import it first: `baton db import --db {} STATE_FILE`", sh(path))
        }
        StoreErrorKind::ThreadExists { .. } => format!(
            "{text}; to overwrite it: `baton db import --db {} --replace STATE_FILE`",
            sh(path)
        ),
        StoreErrorKind::RunInProgress { thread, run } => format!(
            "{text}: `baton complete --db {} --thread {} --run {run} --items ITEMS_FILE`",
            sh(path),
            sh(thread)
        ),
        StoreErrorKind::MergeBackWaiting {
            thread,
            handoff,
            fork,
        } => format!(
            "{path}: error: thread \"{thread}\" already has a merge-back from fork \"{fork}\" (handoff {handoff}) waiting for its next run; dispatch it first (`baton dispatch --db {} --thread {} --target PROVIDER`), then merge this fork back",
            sh(path),
            sh(thread)
        ),
        StoreErrorKind::BadForkPoint {
            thread,
            run,
            why: ForkRefusal::Running,
        } => format!(
            "{text}: `baton complete --db {} --thread {} --run {run} --items ITEMS_FILE`",
            sh(path),
            sh(thread)
        ),
        StoreErrorKind::BadForkPoint {
            thread,
            run,
            why: ForkRefusal::ChildExists { child },
        } => format!(
            "{path}: error: cannot fork thread \"{thread}\" at run {run}: a thread \"{child}\" is already in the database; name another child (`baton fork --db {} --thread {} --at {run} --child NEW_ID`), or leave `--child` out for a fresh id",
            sh(path),
            sh(thread)
        ),
        StoreErrorKind::NotRegenerable {
            why: RegenerateRefusal::MergeBack { fork },
            ..
        } => format!(
            "{text}: `baton merge-back --db {} --thread {}`",
            sh(path),
            sh(fork)
        ),
        _ => text,
    }
}

/// An engine error as `baton` prints it: an unknown target is an error of `--target`.
pub(crate) fn engine_error(e: &crate::Error) -> String {
    match e {
        crate::Error::Eval(crate::EvalError::UnknownTarget(_)) => format!("--target: error: {e}"),
        _ => located(e),
    }
}

/// A `baton diff` error as printed: an unknown target is an error of `--target`; a log
/// without inputs names the command that exports the store's with them.
pub(crate) fn diff_error(e: &crate::diff::DiffError) -> String {
    match e {
        crate::diff::DiffError::UnknownTarget(_) => format!("--target: error: {e}"),
        crate::diff::DiffError::NoInput(..) => {
            format!("{}: `baton log export --policy POLICY`", diff_located(e))
        }
        _ => diff_located(e),
    }
}

/// A corpus or log error located: `PATH: error: message`.
fn diff_located(e: &crate::diff::DiffError) -> String {
    located(e)
}

/// A `baton quality` corpus error as printed: the corpus located as [`diff_error`] does.
pub(crate) fn quality_error(e: &crate::quality::QualityError) -> String {
    match e {
        crate::quality::QualityError::Corpus(d) => diff_located(d),
        _ => e.to_string(),
    }
}

/// A `baton db copy`/PostgreSQL error as printed: a SQLite-side store error located as
/// [`store_located`] prints it; a destination that holds threads with the command that makes
/// an empty one.
#[cfg(feature = "postgres")]
pub(crate) fn copy_error(e: &crate::store::pg::CopyError) -> String {
    use crate::store::pg::CopyError;
    match e {
        CopyError::Sqlite(s) => store_located(s),
        CopyError::Postgres(p) => pg_error(p),
        CopyError::NotEmpty { db, .. } => {
            format!("{} (`baton db init --db {db}` makes one)", located(e))
        }
        _ => located(e),
    }
}

/// A PostgreSQL backend's error as printed: located at its URL; a schema older than this
/// baton's with the command that migrates it.
#[cfg(feature = "postgres")]
pub(crate) fn pg_error(e: &crate::store::pg::PgError) -> String {
    use crate::store::pg::PgError;
    match e {
        PgError::NeedsMigration { url, .. } => {
            format!(
                "{}; run `baton db migrate --db {url}` to migrate it",
                located(e)
            )
        }
        _ => located(e),
    }
}

/// An error of either backend as printed: a store error with the command that helps
/// ([`store_error`]), a PostgreSQL one as [`pg_error`] prints it, a `postgres://` URL given to
/// a baton without PostgreSQL with how to build one.
pub(crate) fn db_error(e: &crate::store::DbError) -> String {
    use crate::store::DbError;
    match e {
        DbError::Store(s) => store_error(s),
        #[cfg(feature = "postgres")]
        DbError::Postgres(p) => pg_error(p),
        // The library says the fact; the command says how to get a baton that has it.
        DbError::NoPostgres { .. } => format!(
            "{}; build it with `--features postgres` (docs/store.md#postgresql), or give a SQLite file with --db",
            located(e)
        ),
    }
}

/// A session-log import error as `baton` prints it: `LOG: error: message`, and for a log of
/// the other tool (or an unknown one) the `--from` that reads it.
pub(crate) fn import_error(e: &crate::import::ImportError) -> String {
    use crate::import::{unknown_lines, ImportError, Recognised};
    let path = e.path();
    match e {
        ImportError::NotRecognised {
            recognised: Recognised::Tool(t),
            ..
        } => format!("{path}: error: {e}; use --from {}", t.as_str()),
        ImportError::NotRecognised {
            expected,
            recognised: Recognised::Unknown { lines, types },
            ..
        } => format!(
            "{path}: error: not a {expected} session log: {}; baton reads Claude Code sessions (--from claude-code) and Codex CLI rollouts (--from codex)",
            unknown_lines(lines, types)
        ),
        _ => located(e),
    }
}

/// A policy diagnostic as `baton` shows it: the help of a `summary` block that replaces the
/// base's names the command that prints a shipped base (the library's help says the fact).
pub(crate) fn diagnostic(
    d: &crate::policy::Diagnostic,
) -> std::borrow::Cow<'_, crate::policy::Diagnostic> {
    match &d.help {
        Some(h) if d.code == "baton::lint::summary_replaces_base" => {
            let mut d = d.clone();
            d.help = Some(h.replacen(
                "(docs/",
                "(`baton policy show NAME` prints a shipped one; docs/",
                1,
            ));
            std::borrow::Cow::Owned(d)
        }
        _ => std::borrow::Cow::Borrowed(d),
    }
}
