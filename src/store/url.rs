//! Which database a `--db` (or `$BATON_DB`) names: a SQLite file (the default, and the embedded
//! choice) or a PostgreSQL server (`postgres://` or `postgresql://`, feature `postgres`).

use std::path::PathBuf;

/// A database location as the user gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// A SQLite file: a plain path, or `sqlite:PATH`.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host:port/db?...`, or
    /// `postgresql://...`), kept as given; [`DbUrl::redacted`] is the form for messages.
    Postgres(String),
}

impl DbUrl {
    /// Classify `given`: `postgres://` and `postgresql://` name a PostgreSQL server,
    /// `sqlite:PATH` and anything else a SQLite file.
    pub fn parse(given: &str) -> DbUrl {
        let lower = given.get(..13).unwrap_or(given).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            DbUrl::Postgres(given.to_string())
        } else if let Some(path) = given.strip_prefix("sqlite:") {
            DbUrl::Sqlite(PathBuf::from(path))
        } else {
            DbUrl::Sqlite(PathBuf::from(given))
        }
    }

    /// The location for messages: a file's path, or the URL with its password replaced by
    /// `***` (`postgres://baton:***@db.internal/baton`), also a `password=` query parameter.
    pub fn redacted(&self) -> String {
        match self {
            DbUrl::Sqlite(p) => p.display().to_string(),
            DbUrl::Postgres(url) => redact_url(url),
        }
    }
}

impl std::fmt::Display for DbUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `scheme://user:secret@host/...?password=secret` -> `scheme://user:***@host/...?password=***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority_end, _) = rest
        .char_indices()
        .find(|(_, c)| matches!(c, '/' | '?' | '#'))
        .unwrap_or((rest.len(), ' '));
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_backend_and_hides_its_password() {
        assert_eq!(
            DbUrl::parse("baton.db"),
            DbUrl::Sqlite(PathBuf::from("baton.db"))
        );
        assert_eq!(
            DbUrl::parse("sqlite:/var/baton.db"),
            DbUrl::Sqlite(PathBuf::from("/var/baton.db"))
        );
        let pg = DbUrl::parse("postgres://baton:s3cret@db.internal:5433/baton?sslmode=disable");
        assert!(matches!(pg, DbUrl::Postgres(_)));
        assert_eq!(
            pg.redacted(),
            "postgres://baton:***@db.internal:5433/baton?sslmode=disable"
        );
        assert_eq!(
            DbUrl::parse("PostgreSQL://u@%2Ftmp%2Fpg/db?password=x&user=u").redacted(),
            "PostgreSQL://u@%2Ftmp%2Fpg/db?password=***&user=u"
        );
        assert_eq!(
            DbUrl::parse("postgresql://h/db").redacted(),
            "postgresql://h/db"
        );
    }
}
