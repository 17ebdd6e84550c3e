//! Why a stored row cannot be read back: the `why` of [`super::StoreErrorKind::Corrupt`], kept
//! typed (its JSON, SQLite or inflate error as the source) until it is reported.

/// Why a stored row (a decision-log line, a logged input, a packed value) cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowError {
    /// Its JSON does not parse or does not have the expected shape.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A query it needs failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// What it holds is not what the log writes (a missing chunk, a chain too long, ...).
    #[error("{0}")]
    Shape(String),
}

impl From<String> for RowError {
    fn from(why: String) -> Self {
        RowError::Shape(why)
    }
}

impl From<&str> for RowError {
    fn from(why: &str) -> Self {
        RowError::Shape(why.to_string())
    }
}
