//! The `status` method (and `baton status --socket PATH`): what an operator asks a running
//! server first: its version, the policy serving (and its shadow), the store's figures, its
//! uptime, the last reload error and the decision log's health.

use super::session::Shared;
use serde_json::{json, Value};

/// The status of the server. Blocking (it counts the store's rows): call from the pool.
pub fn status(shared: &Shared) -> Value {
    let policy = shared.policies.status();
    let store = store_figures(shared);
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "policy": {
            "name": policy.get("name"),
            "sha256": policy.get("sha256"),
            "spec": policy.get("spec"),
            "generation": policy.get("generation"),
            "loaded_at_ms": policy.get("loaded_at_ms"),
        },
        "last_reload_error": policy
            .get("last_rejection")
            .and_then(|r| r.get("message"))
            .cloned()
            .unwrap_or(Value::Null),
        "shadow": shared.shadow_status(),
        "store": store,
        "decision_log": {
            "enabled": shared.ops.logging(),
            "error": shared.ops.log_error(),
        },
        "in_flight": shared.in_flight().saturating_sub(1),
    })
}

/// The store's figures: threads, runs, handoff documents, the database's size in bytes; the
/// error as text when the store cannot answer (a SQLite database not created yet is all zeros).
fn store_figures(shared: &Shared) -> Value {
    match shared.stores.url() {
        crate::store::DbUrl::Sqlite(path) => sqlite_figures(shared, path),
        #[cfg(feature = "postgres")]
        crate::store::DbUrl::Postgres(url) => pg_figures(url, &shared.stores.name()),
        #[cfg(not(feature = "postgres"))]
        crate::store::DbUrl::Postgres(_) => json!({
            "path": shared.stores.name(),
            "error": "this baton was built without PostgreSQL support",
        }),
    }
}

/// [`store_figures`] on PostgreSQL: one query on a connection of its own (an operator's
/// question, not worth a pooled connection); `bytes` is the database's size on the server.
#[cfg(feature = "postgres")]
fn pg_figures(url: &str, name: &str) -> Value {
    use crate::store::pg::postgres::{Client, NoTls};
    let counted = (|| -> Result<Value, crate::store::pg::postgres::Error> {
        let mut c = Client::connect(url, NoTls)?;
        let row = c.query_one(
            "SELECT (SELECT COUNT(*) FROM threads), (SELECT COUNT(*) FROM runs),
                    (SELECT COUNT(*) FROM handoffs WHERE document_path IS NOT NULL),
                    pg_database_size(current_database())",
            &[],
        )?;
        Ok(json!({
            "path": name,
            "threads": row.try_get::<_, i64>(0)?,
            "runs": row.try_get::<_, i64>(1)?,
            "documents": row.try_get::<_, i64>(2)?,
            "bytes": row.try_get::<_, i64>(3)?,
        }))
    })();
    counted.unwrap_or_else(|e| json!({"path": name, "error": format!("{name}: error: {e}")}))
}

fn sqlite_figures(shared: &Shared, db: &std::path::Path) -> Value {
    let size = std::fs::metadata(db).map(|m| m.len()).unwrap_or(0);
    if !db.is_file() {
        return json!({"path": db, "threads": 0, "runs": 0, "documents": 0, "bytes": 0});
    }
    let counted = shared.stores.with(|conn| {
        let Some(s) = conn.as_sqlite() else {
            return Ok(json!({"path": db}));
        };
        let count = |sql: &str| -> i64 {
            s.connection()
                .query_row(sql, [], |r| r.get(0))
                .unwrap_or(0)
        };
        Ok(json!({
            "path": db,
            "threads": count("SELECT COUNT(*) FROM threads"),
            "runs": count("SELECT COUNT(*) FROM runs"),
            "documents": count("SELECT COUNT(*) FROM handoffs WHERE document_path IS NOT NULL"),
            "bytes": size,
        }))
    });
    counted.unwrap_or_else(|e| json!({"path": db, "error": e.message}))
}
