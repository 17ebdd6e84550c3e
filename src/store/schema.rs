//! Schema migrations. The schema version is `PRAGMA user_version`; migration `i` (1-based)
//! takes a database from version `i - 1` to `i`. A database is migrated in place on open; a
//! database newer than [`SCHEMA_VERSION`] is refused.

use super::{sql_err, StoreError, StoreErrorKind};
use rusqlite::{Connection, TransactionBehavior};
use std::time::Duration;

/// Version 1: the thread model of DESIGN §3 plus the decision log.
const V1: &str = r#"
CREATE TABLE threads (
    id                      TEXT PRIMARY KEY,
    version                 INTEGER NOT NULL,
    title                   TEXT,
    compact_summary         TEXT,
    compact_summary_through INTEGER,
    parent_thread           TEXT,
    parent_run              INTEGER,
    providers               TEXT NOT NULL DEFAULT '{}',  -- JSON: provider -> caps
    request                 TEXT NOT NULL                -- JSON: the run about to start
);
CREATE TABLE provider_threads (
    thread        TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT,
    runtime_mode  TEXT,
    status        TEXT NOT NULL,
    resume_failed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread, id)
);
CREATE TABLE runs (
    thread          TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    ordinal         INTEGER NOT NULL,
    provider        TEXT NOT NULL,
    provider_thread TEXT,
    status          TEXT NOT NULL,
    handoff         TEXT,
    PRIMARY KEY (thread, ordinal)
) WITHOUT ROWID;
CREATE TABLE items (
    thread TEXT NOT NULL,
    run    INTEGER NOT NULL,
    idx    INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,                                 -- JSON: the item as in a state file
    PRIMARY KEY (thread, run, idx),
    FOREIGN KEY (thread, run) REFERENCES runs(thread, ordinal) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE handoffs (
    thread                TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    id                    TEXT NOT NULL,
    seq                   INTEGER NOT NULL,
    transfer              TEXT,
    target_run            INTEGER,
    from_provider_threads TEXT NOT NULL DEFAULT '[]',     -- JSON list of ids
    to_provider_thread    TEXT,
    covered_from          INTEGER NOT NULL,
    covered_to            INTEGER NOT NULL,
    strategy              TEXT NOT NULL,
    status                TEXT NOT NULL,
    created_by            TEXT,
    summary               TEXT,
    supersedes            TEXT,
    document_path         TEXT,                           -- store only: where it was delivered
    document              TEXT,                           -- store only: the rendered document
    inline_prompt         TEXT,                           -- store only: the first-turn prompt
    PRIMARY KEY (thread, id)
);
CREATE INDEX handoffs_into ON handoffs (thread, to_provider_thread);
CREATE TABLE transfers (
    thread        TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    id            TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    type          TEXT NOT NULL,
    status        TEXT NOT NULL,
    source_thread TEXT,
    target_thread TEXT,
    source_run    INTEGER,
    resolution    TEXT,
    handoff       TEXT,
    PRIMARY KEY (thread, id)
);
CREATE TABLE checkpoints (
    thread        TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    run           INTEGER NOT NULL,
    files_changed INTEGER NOT NULL DEFAULT 0,
    diff_summary  TEXT,
    PRIMARY KEY (thread, seq)
);
CREATE TABLE decision_log (
    id            INTEGER PRIMARY KEY,
    thread        TEXT NOT NULL,
    run           INTEGER NOT NULL,
    operation     TEXT NOT NULL,
    policy_name   TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL,
    decision      TEXT NOT NULL,                           -- JSON: DESIGN §4
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX decision_log_by_thread ON decision_log (thread, run);
"#;

/// Version 2: pre-grants persist in the store.
const V2: &str = r#"
CREATE TABLE grants (
    id        INTEGER PRIMARY KEY,
    thread    TEXT NOT NULL,
    run       INTEGER NOT NULL,
    tool      TEXT NOT NULL,
    path      TEXT NOT NULL,
    uses_left INTEGER NOT NULL,
    handoff   TEXT NOT NULL
);
CREATE INDEX grants_by_turn ON grants (thread, run, path);
"#;

/// Version 3: a handoff can cover runs of another thread (a merge-back into the parent covers
/// the fork's runs), and a handoff's status stays in the contract vocabulary (DESIGN §3):
/// earlier versions marked a consumed handoff `consumed`; that is the run's and the
/// transfer's record, so such rows go back to `ready`. A trigger enforces DESIGN §8: no
/// handoff row is ever updated in place except its status.
const V3: &str = r#"
ALTER TABLE handoffs ADD COLUMN covered_thread TEXT;
UPDATE handoffs SET status = 'ready' WHERE status = 'consumed';
CREATE INDEX transfers_pending ON transfers (thread, type, status);
CREATE TRIGGER handoffs_change_only_status
BEFORE UPDATE OF thread, id, seq, transfer, target_run, from_provider_threads,
    to_provider_thread, covered_from, covered_to, covered_thread, strategy, created_by, summary,
    supersedes, document_path, document, inline_prompt ON handoffs
BEGIN
    SELECT RAISE(ABORT, 'a handoff row is never updated except its status (supersede it)');
END;
"#;

/// Version 4: the decision log keeps what each decision was made from (the state as
/// evaluated, the target, the off-band root and the store's context, as JSON), so that
/// `baton replay` can decide again and compare. Rows logged before have none. The state's long
/// lists are kept in `decision_chunks`, each chunk once, named by its sha256.
const V4: &str = r#"
ALTER TABLE decision_log ADD COLUMN input TEXT;
CREATE TABLE decision_chunks (
    sha  TEXT PRIMARY KEY,
    body TEXT NOT NULL                                     -- JSON: a list of state elements
) WITHOUT ROWID;
"#;

/// Version 5: a thread records its workspace root (`thread.workspace`).
const V5: &str = r#"
ALTER TABLE threads ADD COLUMN workspace TEXT;
"#;

/// Version 6: every item row carries its effective id (`item_id`: the item's own `id`, else
/// `r<run>.<n>`, as `state::item_id` gives it), indexed by thread, so that `complete_run` checks
/// the new items' ids against the thread without loading it. The decision log keeps the text
/// of a trace (rule names, locations, conditions: what only depends on the policy) once, in
/// `decision_rules`, and each row only the trace's outcomes and values (`store::trace_log`);
/// rows logged before keep their full trace.
const V6: &str = r#"
ALTER TABLE items ADD COLUMN item_id TEXT;
UPDATE items SET item_id = COALESCE(json_extract(body, '$.id'), 'r' || run || '.' || (idx + 1));
CREATE INDEX items_by_id ON items (thread, item_id);
CREATE TABLE decision_rules (
    sha  TEXT PRIMARY KEY,
    body TEXT NOT NULL                                     -- JSON: a trace's text, per entry
) WITHOUT ROWID;
"#;

/// The trigger body that takes a removed run (`OLD`) out of its tally row: one run fewer, its
/// oldest and newest recomputed, the row dropped when no run is left.
macro_rules! tally_remove_old {
    () => {
        r#"    UPDATE run_tally SET runs = runs - 1,
        first = COALESCE((SELECT MIN(ordinal) FROM runs INDEXED BY runs_by_key WHERE thread = OLD.thread AND provider_thread IS OLD.provider_thread
            AND provider = OLD.provider AND status = OLD.status
            AND (handoff IS NOT NULL) = (OLD.handoff IS NOT NULL)), 0),
        last = COALESCE((SELECT MAX(ordinal) FROM runs INDEXED BY runs_by_key WHERE thread = OLD.thread AND provider_thread IS OLD.provider_thread
            AND provider = OLD.provider AND status = OLD.status
            AND (handoff IS NOT NULL) = (OLD.handoff IS NOT NULL)), 0)
    WHERE thread = OLD.thread AND provider_thread IS OLD.provider_thread
            AND provider = OLD.provider AND status = OLD.status AND has_handoff = (OLD.handoff IS NOT NULL);
    DELETE FROM run_tally WHERE thread = OLD.thread AND provider_thread IS OLD.provider_thread
            AND provider = OLD.provider AND status = OLD.status AND has_handoff = (OLD.handoff IS NOT NULL)
        AND runs <= 0;
"#
    };
}

/// The trigger body that counts an added run (`NEW`) in its tally row, creating the row.
macro_rules! tally_add_new {
    () => {
        r#"    UPDATE run_tally SET runs = runs + 1, first = MIN(first, NEW.ordinal),
        last = MAX(last, NEW.ordinal)
    WHERE thread = NEW.thread AND provider_thread IS NEW.provider_thread
      AND provider = NEW.provider AND status = NEW.status
      AND has_handoff = (NEW.handoff IS NOT NULL);
    INSERT INTO run_tally (thread, provider_thread, provider, status, has_handoff, runs, first,
        last)
    SELECT NEW.thread, NEW.provider_thread, NEW.provider, NEW.status, NEW.handoff IS NOT NULL, 1,
        NEW.ordinal, NEW.ordinal
    WHERE NOT EXISTS (SELECT 1 FROM run_tally WHERE thread = NEW.thread
        AND provider_thread IS NEW.provider_thread AND provider = NEW.provider
        AND status = NEW.status AND has_handoff = (NEW.handoff IS NOT NULL));
"#
    };
}

/// Version 7: a tally of each thread's runs by (provider thread, provider, status, took a
/// handoff), with how many there are and the oldest and newest, kept by triggers on `runs` in
/// the same transaction as every change of a run (dispatch, complete, rollback, fork,
/// merge-back, regenerate, import). A dispatch reads the tally and only the runs after the
/// target's last clean native run (`store::window`), so its cost does not grow with the
/// thread. Indexes let the triggers recompute a combination's oldest and newest run (named with
/// `INDEXED BY`: without statistics the planner prefers the primary key's `thread` prefix, a
/// scan of the thread's runs), and let a window find the handoffs it needs, without scanning
/// the thread.
const V7: &str = concat!(
    r#"
CREATE TABLE run_tally (
    thread          TEXT NOT NULL,
    provider_thread TEXT,
    provider        TEXT NOT NULL,
    status          TEXT NOT NULL,
    has_handoff     INTEGER NOT NULL,
    runs            INTEGER NOT NULL,
    first           INTEGER NOT NULL,
    last            INTEGER NOT NULL
);
CREATE INDEX run_tally_key ON run_tally (thread, provider, provider_thread, status, has_handoff);
CREATE INDEX runs_by_key ON runs (thread, provider_thread, provider, status, ordinal);
CREATE INDEX handoffs_by_covered_to ON handoffs (thread, covered_to);
CREATE INDEX handoffs_by_target_run ON handoffs (thread, target_run);
INSERT INTO run_tally (thread, provider_thread, provider, status, has_handoff, runs, first, last)
SELECT thread, provider_thread, provider, status, handoff IS NOT NULL, COUNT(*), MIN(ordinal),
       MAX(ordinal)
FROM runs GROUP BY thread, provider_thread, provider, status, handoff IS NOT NULL;
CREATE TRIGGER run_tally_insert AFTER INSERT ON runs
BEGIN
"#,
    tally_add_new!(),
    r#"END;
CREATE TRIGGER run_tally_delete AFTER DELETE ON runs
BEGIN
"#,
    tally_remove_old!(),
    r#"END;
CREATE TRIGGER run_tally_update AFTER UPDATE OF thread, ordinal, provider, provider_thread,
    status, handoff ON runs
BEGIN
"#,
    tally_remove_old!(),
    tally_add_new!(),
    "END;\n",
);

/// Version 8: the index that finds a thread's transfers still to consume (`complete_run`
/// consumes the transfers its run took) holds only those, resolved and not yet consumed,
/// instead of every transfer the thread ever had: a turn's transfer leaves it when its run
/// completes. Its queries name the same condition (`status IN (...)`), so that SQLite uses it.
/// (Version 8 also keeps logged inputs packed and items without their `kind` in `body`; both
/// are read as before from rows written earlier, so neither needs a change of the rows.)
/// Likewise `items_by_id` holds only the items whose id is not the one generated for their
/// place (`r<run>.<n>`): `complete_run` looks an id of that form up at that place.
const V8: &str = r#"
DROP INDEX transfers_pending;
CREATE INDEX transfers_open ON transfers (thread, type, status)
    WHERE status IN ('resolved_native', 'resolved_portable');
DROP INDEX items_by_id;
CREATE INDEX items_by_id ON items (thread, item_id)
    WHERE item_id <> 'r' || run || '.' || (idx + 1);
"#;

/// Version 9: a run records when it started and ended (`runs[].started_at`, `ended_at`, RFC
/// 3339 text) and the workspace it ran in (`runs[].workspace`, JSON). Rows written earlier
/// have none: NULL reads as absent.
const V9: &str = r#"
ALTER TABLE runs ADD COLUMN started_at TEXT;
ALTER TABLE runs ADD COLUMN ended_at TEXT;
ALTER TABLE runs ADD COLUMN workspace TEXT;
"#;

/// The migrations, in order: `MIGRATIONS[i]` upgrades version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8, V9];

/// The schema version this baton writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Bring the database up to [`SCHEMA_VERSION`], all pending migrations in one transaction.
pub(crate) fn migrate(conn: &mut Connection, path: &str, busy: Duration) -> Result<(), StoreError> {
    let e = |during: &str, err| sql_err(path, busy, during, err);
    let found = user_version(conn).map_err(|err| e("reading the schema version", err))?;
    let too_new = |found| {
        StoreError::new(
            path.to_string(),
            StoreErrorKind::TooNew {
                found,
                supported: SCHEMA_VERSION,
            },
        )
    };
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|err| e("migrating the schema", err))?;
    // Another process may have migrated while we waited for the lock.
    let found = user_version(&tx).map_err(|err| e("reading the schema version", err))?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(found.max(0)).unwrap_or(usize::MAX))
    {
        let to = i.saturating_add(1);
        tx.execute_batch(sql)
            .map_err(|err| e(&format!("migrating the schema to version {to}"), err))?;
        tx.execute_batch(&format!("PRAGMA user_version = {to}"))
            .map_err(|err| e(&format!("migrating the schema to version {to}"), err))?;
    }
    tx.commit()
        .map_err(|err| e("committing the schema migration", err))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-6 database with runs gets their tally on the way to version 7, and the
    /// triggers keep it from there.
    #[test]
    fn version_7_tallies_the_runs_of_a_version_6_database() {
        let mut conn = Connection::open_in_memory().expect("opens");
        for sql in MIGRATIONS.iter().take(6) {
            conn.execute_batch(sql).expect("migrates");
        }
        conn.execute_batch(
            "PRAGMA user_version = 6;
             INSERT INTO threads (id, version, request) VALUES ('t', 1, '{}');
             INSERT INTO runs (thread, ordinal, provider, provider_thread, status, handoff) VALUES
                ('t', 1, 'codex', 'C1', 'completed', NULL),
                ('t', 2, 'codex', 'C1', 'failed', NULL),
                ('t', 3, 'claude', 'L1', 'completed', 'H1'),
                ('t', 4, 'claude', 'L1', 'completed', NULL),
                ('t', 5, 'codex', 'C1', 'completed', 'H2'),
                ('t', 6, 'codex', 'C1', 'rolled_back', NULL),
                ('t', 7, 'codex', NULL, 'running', NULL);",
        )
        .expect("fills");
        migrate(&mut conn, "test.db", Duration::ZERO).expect("migrates");
        assert_eq!(user_version(&conn).expect("version"), SCHEMA_VERSION);
        let tally = |conn: &Connection| -> Vec<String> {
            let mut st = conn
                .prepare(
                    "SELECT COALESCE(provider_thread, '-'), provider, status, has_handoff, runs,
                        first, last FROM run_tally ORDER BY 1, 2, 3, 4",
                )
                .expect("prepares");
            st.query_map([], |r| {
                Ok(format!(
                    "{} {} {} {} {} {}..{}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?
                ))
            })
            .expect("queries")
            .collect::<Result<_, _>>()
            .expect("rows")
        };
        assert_eq!(
            tally(&conn),
            [
                "- codex running 0 1 7..7",
                "C1 codex completed 0 1 1..1",
                "C1 codex completed 1 1 5..5",
                "C1 codex failed 0 1 2..2",
                "C1 codex rolled_back 0 1 6..6",
                "L1 claude completed 0 1 4..4",
                "L1 claude completed 1 1 3..3",
            ]
        );
        // Complete the running run on C1, roll back run 5, add run 8, drop the thread.
        conn.execute_batch(
            "UPDATE runs SET status = 'completed', provider_thread = 'C1' WHERE ordinal = 7;
             UPDATE runs SET status = 'rolled_back' WHERE ordinal = 5;
             INSERT INTO runs (thread, ordinal, provider, provider_thread, status, handoff)
                VALUES ('t', 8, 'codex', 'C1', 'completed', NULL);",
        )
        .expect("changes");
        assert_eq!(
            tally(&conn),
            [
                "C1 codex completed 0 3 1..8",
                "C1 codex failed 0 1 2..2",
                "C1 codex rolled_back 0 1 6..6",
                "C1 codex rolled_back 1 1 5..5",
                "L1 claude completed 0 1 4..4",
                "L1 claude completed 1 1 3..3",
            ]
        );
        conn.execute_batch("DELETE FROM runs WHERE thread = 't'")
            .expect("deletes");
        assert!(tally(&conn).is_empty());
    }
}
