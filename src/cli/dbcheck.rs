//! Reading commands never create a database. A `--db` that names no file is an error that
//! names the path and suggests the database the user most likely meant: a SQLite file beside
//! it (named `*.db`, `*.sqlite`, `*.sqlite3` or `*.db3`) with a similar name, or the only one
//! there.

use super::commands::FAIL;
use crate::store::hint::sh;
use std::path::{Path, PathBuf};

/// How many directory entries are looked at for a suggestion.
const MAX_ENTRIES: usize = 100_000;

/// The names a database file is given; only such files are opened to check their header.
const DB_EXTENSIONS: &[&str] = &["db", "sqlite", "sqlite3", "db3"];

/// Ok when `db` is a file; else print the error for the reading command `command` (as the
/// user would type it, `baton db export`) and give exit 1.
pub(crate) fn require_existing(db: &Path, command: &str) -> Result<(), u8> {
    if let crate::store::DbUrl::Postgres(_) = crate::store::DbUrl::parse(&db.to_string_lossy()) {
        // A server's database: opening it says whether it is there.
        #[cfg(feature = "postgres")]
        return Ok(());
        #[cfg(not(feature = "postgres"))]
        return super::store::refuse_postgres(db);
    }
    if db.is_file() {
        return Ok(());
    }
    eprintln!("{}", missing(db, command));
    Err(FAIL)
}

/// The message for a missing database.
pub(crate) fn missing(db: &Path, command: &str) -> String {
    let head = format!(
        "{}: error: no baton database here, and {command} never creates one",
        db.display()
    );
    match suggestion(db) {
        Some(other) => format!(
            "{head}; did you mean `--db {}`? `baton db init --db {}` creates an empty one",
            sh(&other.display().to_string()),
            sh(&db.display().to_string())
        ),
        None => format!(
            "{head}; give the database with --db FILE, or create one with `baton db init --db {}`",
            sh(&db.display().to_string())
        ),
    }
}

/// A SQLite database beside `db` whose name is close to its name, else the only one there.
fn suggestion(db: &Path) -> Option<PathBuf> {
    let name = db.file_name()?.to_str()?;
    let dir = match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut found: Vec<String> = entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            Path::new(n)
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| DB_EXTENSIONS.contains(&x))
        })
        .filter(|n| is_sqlite(&dir.join(n)))
        .collect();
    found.sort();
    let pick = crate::suggest::did_you_mean(name, found.iter().map(String::as_str))
        .map(str::to_string)
        .or_else(|| match found.as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        })?;
    Some(match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(pick),
        _ => PathBuf::from(pick),
    })
}

/// Whether the file starts with SQLite's header.
fn is_sqlite(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    crate::input::open(path)
        .ok()
        .and_then(|mut f| f.read_exact(&mut head).ok())
        .is_some()
        && &head == b"SQLite format 3\0"
}
