//! How the `baton` command shows the library's errors. The library's errors are data (the
//! database, thread, run, ...) with a message that names no command; the advice to run
//! another `baton` command, written so that it can be pasted into a shell, is added here.

use crate::error::located;
use crate::store::hint::sh;
use crate::store::{ForkRefusal, RegenerateRefusal, StoreError, StoreErrorKind};

/// ` --db DB` for a suggested command, written so that it can be pasted into a shell: a SQLite
/// file as one shell word; a PostgreSQL URL whose password the message hides (`***`) in double
/// quotes with `${PGPASSWORD}` in its place, so the shell fills it in; nothing when the URL is
/// `$BATON_DB`'s, which the command reads again. The database as the message shows it.
pub(crate) fn db_opt(shown: &str) -> String {
    let postgres = shown.starts_with("postgres://") || shown.starts_with("postgresql://");
    if !postgres {
        return format!(" --db {}", sh(shown));
    }
    if std::env::var("BATON_DB")
        .is_ok_and(|v| !v.is_empty() && crate::store::DbUrl::parse(&v).redacted() == shown)
    {
        return String::new();
    }
    if !shown.contains(":***@") && !shown.contains("password=***") {
        return format!(" --db {}", sh(shown));
    }
    let mut quoted = String::with_capacity(shown.len().saturating_add(16));
    for c in shown.chars() {
        if matches!(c, '"' | '\\' | '`' | '$') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    let quoted = quoted
        .replace(":***@", ":${PGPASSWORD}@")
        .replace("password=***", "password=${PGPASSWORD}");
    format!(" --db \"{quoted}\"")
}

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
            "{text}; run `baton db init{}` where the file is writable to migrate it",
            db_opt(path)
        ),
        StoreErrorKind::ThreadNotFound { .. } => {
            format!("{text}; import it first: `baton db import{} STATE_FILE`", db_opt(path))
        }
        StoreErrorKind::ThreadExists { .. } => format!(
            "{text}; to overwrite it: `baton db import{} --replace STATE_FILE`",
            db_opt(path)
        ),
        StoreErrorKind::RunInProgress { thread, run } => format!(
            "{text}: `baton complete{} --thread {} --run {run} --items ITEMS_FILE`",
            db_opt(path),
            sh(thread)
        ),
        StoreErrorKind::MergeBackWaiting {
            thread,
            handoff,
            fork,
        } => format!(
            "{path}: error: thread \"{thread}\" already has a merge-back from fork \"{fork}\" (handoff {handoff}) waiting for its next run; dispatch it first (`baton dispatch{} --thread {} --target PROVIDER`), then merge this fork back",
            db_opt(path),
            sh(thread)
        ),
        StoreErrorKind::BadForkPoint {
            thread,
            run,
            why: ForkRefusal::Running,
        } => format!(
            "{text}: `baton complete{} --thread {} --run {run} --items ITEMS_FILE`",
            db_opt(path),
            sh(thread)
        ),
        StoreErrorKind::BadForkPoint {
            thread,
            run,
            why: ForkRefusal::ChildExists { child },
        } => format!(
            "{path}: error: cannot fork thread \"{thread}\" at run {run}: a thread \"{child}\" is already in the database; name another child (`baton fork{} --thread {} --at {run} --child NEW_ID`), or leave `--child` out for a fresh id",
            db_opt(path),
            sh(thread)
        ),
        StoreErrorKind::NotRegenerable {
            why: RegenerateRefusal::MergeBack { fork },
            ..
        } => format!(
            "{text}: `baton merge-back{} --thread {}`",
            db_opt(path),
            sh(fork)
        ),
        _ => text,
    }
}

/// A `baton serve` start-up error as printed: located (`PATH: error: message`), or `error:
/// message` when it is about no place; a policy that does not load as its diagnostics.
pub(crate) fn serve_error(e: &crate::serve::ServeError) -> String {
    use crate::error::Located as _;
    use crate::serve::ServeError;
    match e {
        ServeError::Policy(p) => p.to_string(),
        _ if e.location().is_none() => format!("error: {}", located(e)),
        _ => located(e),
    }
}

/// The warning `baton` prints when an off-band delivery fell back to inline: the recorded
/// reason (the library's message, which says the fact), then the command that helps by its
/// kind: a full disk names `baton gc`. A decision recorded before baton recorded the kind
/// carries its advice in the reason itself.
pub(crate) fn delivery_fallback(
    reason: &str,
    kind: Option<crate::decision::FallbackKind>,
) -> String {
    use crate::decision::FallbackKind;
    let advice = match kind {
        Some(FallbackKind::DiskFull) => "; free some space or run `baton gc`",
        _ => "",
    };
    format!(
        "warning: off-band delivery failed, so the handoff is delivered inline: {reason}{advice}"
    )
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

/// A `baton quality` corpus error as printed: located at the corpus file, as [`diff_error`]
/// prints a corpus error; a state's problems as their list.
pub(crate) fn quality_error(e: &crate::quality::QualityError) -> String {
    located(e)
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
            format!("{} (`baton db init{}` makes one)", located(e), db_opt(db))
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
                "{}; run `baton db migrate{}` to migrate it",
                located(e),
                db_opt(url)
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

#[cfg(test)]
mod tests {
    use super::{db_opt, delivery_fallback};
    use crate::decision::FallbackKind;

    #[test]
    fn a_full_disk_fallback_is_shown_with_baton_gc_and_no_other_kind_is() {
        let warning = "warning: off-band delivery failed, so the handoff is delivered inline";
        assert_eq!(
            delivery_fallback(
                "cannot write /h/t/H1: disk full (x)",
                Some(FallbackKind::DiskFull)
            ),
            format!(
                "{warning}: cannot write /h/t/H1: disk full (x); free some space or run `baton gc`"
            )
        );
        assert_eq!(
            delivery_fallback("I/O error on /h: y", Some(FallbackKind::Io)),
            format!("{warning}: I/O error on /h: y")
        );
        // Logged before the kind was: the reason carries its advice already.
        let old = "cannot write /h: disk full (x); free some space or run `baton gc`";
        assert_eq!(delivery_fallback(old, None), format!("{warning}: {old}"));
    }

    #[test]
    fn a_suggested_db_can_be_pasted() {
        assert_eq!(db_opt("/tmp/b.db"), " --db /tmp/b.db");
        assert_eq!(db_opt("/tmp/my db"), " --db '/tmp/my db'");
        if std::env::var_os("BATON_DB").is_none() {
            assert_eq!(
                db_opt("postgresql://baton:***@db.internal/baton"),
                " --db \"postgresql://baton:${PGPASSWORD}@db.internal/baton\""
            );
            assert_eq!(
                db_opt("postgres://baton@%2Frun%2Fpg/b?password=***&x=$y"),
                " --db \"postgres://baton@%2Frun%2Fpg/b?password=${PGPASSWORD}&x=\\$y\""
            );
            assert_eq!(
                db_opt("postgresql://baton@db.internal/baton"),
                " --db postgresql://baton@db.internal/baton"
            );
        }
    }
}
