//! Rows <-> [`State`]: import (insert a whole thread), load/export, and the row-level writes
//! the lifecycle operations share. Everything here runs on a connection or an open
//! transaction ([`rusqlite::Transaction`] derefs to a connection).

use super::{sql_err, StoreError, StoreErrorKind};
use crate::state::*;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{de::DeserializeOwned, Serialize};
use std::time::Duration;

/// A connection (or transaction) with the names errors need.
pub(crate) struct Cx<'c> {
    pub conn: &'c Connection,
    pub path: String,
    busy: Duration,
}

/// Status names without a trip through serde (the hot path of loading long threads).
fn run_status(s: &str) -> Option<RunStatus> {
    Some(match s {
        "completed" => RunStatus::Completed,
        "failed" => RunStatus::Failed,
        "interrupted" => RunStatus::Interrupted,
        "running" => RunStatus::Running,
        "rolled_back" => RunStatus::RolledBack,
        _ => return None,
    })
}

fn handoff_status(s: &str) -> Option<HandoffStatus> {
    Some(match s {
        "pending" => HandoffStatus::Pending,
        "ready" => HandoffStatus::Ready,
        "failed" => HandoffStatus::Failed,
        "superseded" => HandoffStatus::Superseded,
        _ => return None,
    })
}

/// A stored handoff with the store-only columns.
#[derive(Debug, Clone)]
pub(crate) struct HandoffRow {
    pub handoff: Handoff,
    pub document_path: Option<String>,
    pub document: Option<String>,
    pub inline: Option<String>,
}

impl<'c> Cx<'c> {
    pub fn new(conn: &'c Connection, path: &str, busy: Duration) -> Cx<'c> {
        Cx {
            conn,
            path: path.to_string(),
            busy,
        }
    }

    pub fn err(&self, during: &str, e: rusqlite::Error) -> StoreError {
        sql_err(&self.path, self.busy, during, e)
    }

    fn corrupt(&self, what: String, why: impl ToString) -> StoreError {
        StoreError::new(
            self.path.clone(),
            StoreErrorKind::Corrupt {
                what,
                why: why.to_string(),
            },
        )
    }

    pub fn json<T: Serialize>(&self, what: &str, v: &T) -> Result<String, StoreError> {
        serde_json::to_string(v).map_err(|e| self.corrupt(what.to_string(), e))
    }

    fn parse_json<T: DeserializeOwned>(&self, what: String, s: &str) -> Result<T, StoreError> {
        serde_json::from_str(s).map_err(|e| self.corrupt(what, e))
    }

    fn parse_enum<T: DeserializeOwned>(&self, what: String, s: &str) -> Result<T, StoreError> {
        serde_json::from_value(serde_json::Value::String(s.to_string()))
            .map_err(|e| self.corrupt(what, e))
    }

    pub fn thread_exists(&self, thread: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row("SELECT 1 FROM threads WHERE id = ?1", [thread], |_| Ok(()))
            .optional()
            .map(|o| o.is_some())
            .map_err(|e| self.err("looking up a thread", e))
    }

    pub fn not_found(&self, thread: &str) -> StoreError {
        StoreError::new(
            self.path.clone(),
            StoreErrorKind::ThreadNotFound {
                thread: thread.to_string(),
            },
        )
    }

    pub fn parent_of(&self, thread: &str) -> Result<Option<String>, StoreError> {
        let parents = self.rows(
            "reading a thread's parent",
            "SELECT parent_thread FROM threads WHERE id = ?1",
            [thread],
            |r| r.get::<_, Option<String>>(0),
        )?;
        Ok(parents.into_iter().next().flatten())
    }

    pub fn threads(&self) -> Result<Vec<String>, StoreError> {
        self.rows(
            "listing threads",
            "SELECT id FROM threads ORDER BY id",
            [],
            |r| r.get(0),
        )
    }

    pub fn delete_thread(&self, thread: &str) -> Result<(), StoreError> {
        // The runs' tally goes first, so that the runs' delete trigger has no row to update.
        self.exec(
            "deleting a thread",
            "DELETE FROM run_tally WHERE thread = ?1",
            [thread],
        )?;
        let during = "deleting a thread";
        // The decision log names the stored items of the thread's runs: it keeps a copy now.
        let (chunks, rows) = super::input_log::freeze(self.conn, thread)
            .map_err(|e| self.corrupt(format!("thread {thread}: decision log"), e))?;
        for (sha, body) in chunks {
            self.exec(
                during,
                "INSERT OR IGNORE INTO decision_chunks (sha, body) VALUES (?1, ?2)",
                params![sha, super::packed::pack(&body)],
            )?;
        }
        for (id, input) in rows {
            self.exec(
                during,
                "UPDATE decision_log SET input = ?2 WHERE id = ?1",
                params![id, super::packed::pack_input(&input)],
            )?;
        }
        for sql in [
            "DELETE FROM items WHERE thread = ?1",
            "DELETE FROM runs WHERE thread = ?1",
            "DELETE FROM provider_threads WHERE thread = ?1",
            "DELETE FROM handoffs WHERE thread = ?1",
            "DELETE FROM transfers WHERE thread = ?1",
            "DELETE FROM checkpoints WHERE thread = ?1",
            // A replaced thread's run numbers start over: an old grant must not carry over
            // to a new run that happens to have the same number.
            "DELETE FROM grants WHERE thread = ?1",
            "DELETE FROM threads WHERE id = ?1",
        ] {
            self.exec(during, sql, [thread])?;
        }
        Ok(())
    }

    /// Insert a whole thread (the caller checked it is not stored yet).
    pub fn insert_state(&self, s: &State) -> Result<(), StoreError> {
        let during = "importing a thread";
        let t = &s.thread;
        self.conn
            .execute(
                "INSERT INTO threads (id, version, title, compact_summary, compact_summary_through,
                    parent_thread, parent_run, providers, request, workspace)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    t.id,
                    s.version,
                    t.title,
                    t.compact_summary,
                    t.compact_summary_through,
                    t.parent.as_ref().map(|p| p.thread.as_str()),
                    t.parent.as_ref().map(|p| p.run),
                    self.json("providers", &s.providers)?,
                    self.json("request", &s.request)?,
                    t.workspace,
                ],
            )
            .map_err(|e| self.err(during, e))?;
        for (seq, pt) in s.provider_threads.iter().enumerate() {
            self.insert_provider_thread(&t.id, seq as i64, pt)?;
        }
        for run in &s.runs {
            self.insert_run(&t.id, run)?;
            self.insert_items(&t.id, run.ordinal, 0, &run.items)?;
        }
        for (seq, h) in s.handoffs.iter().enumerate() {
            self.insert_handoff(
                &t.id,
                seq as i64,
                &HandoffRow {
                    handoff: h.clone(),
                    document_path: None,
                    document: None,
                    inline: None,
                },
            )?;
        }
        for (seq, x) in s.transfers.iter().enumerate() {
            self.insert_transfer(&t.id, seq as i64, x)?;
        }
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT INTO checkpoints (thread, seq, run, files_changed, diff_summary)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|e| self.err(during, e))?;
        for (seq, c) in s.checkpoints.iter().enumerate() {
            st.execute(params![
                t.id,
                seq as i64,
                c.run,
                c.files_changed,
                c.diff_summary
            ])
            .map_err(|e| self.err(during, e))?;
        }
        Ok(())
    }

    pub fn insert_provider_thread(
        &self,
        thread: &str,
        seq: i64,
        pt: &ProviderThread,
    ) -> Result<(), StoreError> {
        self.exec(
            "recording a provider thread",
            "INSERT INTO provider_threads (thread, id, seq, provider, model, runtime_mode,
                    status, resume_failed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                thread,
                pt.id,
                seq,
                pt.provider,
                pt.model,
                pt.runtime_mode,
                pt.status.as_str(),
                pt.resume_failed
            ],
        )
    }

    pub fn insert_run(&self, thread: &str, run: &Run) -> Result<(), StoreError> {
        self.exec(
            &format!("recording run {}", run.ordinal),
            "INSERT INTO runs (thread, ordinal, provider, provider_thread, status, handoff,
                 started_at, ended_at, workspace)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                thread,
                run.ordinal,
                run.provider,
                run.provider_thread,
                run.status.as_str(),
                run.handoff,
                run.started_at,
                run.ended_at,
                self.workspace_json(run.workspace.as_ref())?
            ],
        )
    }

    /// A workspace as its `runs.workspace` column holds it (JSON; NULL when absent).
    pub fn workspace_json(
        &self,
        workspace: Option<&crate::state::Workspace>,
    ) -> Result<Option<String>, StoreError> {
        workspace.map(|w| self.json("workspace", w)).transpose()
    }

    /// Append `items` to run `run`, numbering them from `first`.
    pub fn insert_items(
        &self,
        thread: &str,
        run: u32,
        first: usize,
        items: &[Item],
    ) -> Result<(), StoreError> {
        let during = format!("recording the items of run {run}");
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT INTO items (thread, run, idx, kind, body, item_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(|e| self.err(&during, e))?;
        for (i, item) in items.iter().enumerate() {
            let body = body_of(self.json("item", item)?, item.kind());
            let idx = first.saturating_add(i);
            st.execute(params![
                thread,
                run,
                i64::try_from(idx).unwrap_or(i64::MAX),
                item.kind(),
                body,
                crate::state::item_id(item, run, idx)
            ])
            .map_err(|e| self.err(&during, e))?;
        }
        Ok(())
    }

    pub fn insert_handoff(
        &self,
        thread: &str,
        seq: i64,
        row: &HandoffRow,
    ) -> Result<(), StoreError> {
        let h = &row.handoff;
        self.exec(
            &format!("recording handoff {}", h.id),
            "INSERT INTO handoffs (thread, id, seq, transfer, target_run, from_provider_threads,
                    to_provider_thread, covered_from, covered_to, strategy, status, created_by,
                    summary, supersedes, document_path, document, inline_prompt, covered_thread)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                    ?18)",
            params![
                thread,
                h.id,
                seq,
                h.transfer,
                h.target_run,
                super::packed::pack_long(
                    self.json("from_provider_threads", &h.from_provider_threads)?
                ),
                h.to_provider_thread,
                h.covered.from,
                h.covered.to,
                h.strategy.as_str(),
                h.status.as_str(),
                h.created_by,
                h.summary,
                h.supersedes,
                row.document_path,
                row.document.as_deref().map(super::packed::pack),
                row.inline.as_deref().map(super::packed::pack),
                h.covered_thread,
            ],
        )
    }

    pub fn insert_transfer(&self, thread: &str, seq: i64, t: &Transfer) -> Result<(), StoreError> {
        self.exec(
            &format!("recording transfer {}", t.id),
            "INSERT INTO transfers (thread, id, seq, type, status, source_thread, target_thread,
                    source_run, resolution, handoff)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                thread,
                t.id,
                seq,
                t.kind.as_str(),
                t.status.as_str(),
                t.source_thread,
                t.target_thread,
                t.source_run,
                t.resolution,
                t.handoff
            ],
        )
    }

    /// Next free `seq` of a per-thread ordered table.
    pub fn next_seq(&self, table: &str, thread: &str) -> Result<i64, StoreError> {
        match table {
            // A partly staged thread holds its newest handoff.
            "handoffs" => super::partial::handoffs(thread, Some(u32::MAX)),
            other => super::partial::meta(thread, other),
        }
        self.conn
            .query_row(
                &format!("SELECT COALESCE(MAX(seq) + 1, 0) FROM {table} WHERE thread = ?1"),
                [thread],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&format!("numbering {table}"), e))
    }

    /// Run one UPDATE/INSERT/DELETE statement.
    pub fn exec(
        &self,
        during: &str,
        sql: &str,
        p: impl rusqlite::Params,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut st| st.execute(p))
            .map(|_| ())
            .map_err(|e| self.err(during, e))
    }

    /// Run a query and collect its rows.
    pub(super) fn rows<T>(
        &self,
        during: &str,
        sql: &str,
        p: impl rusqlite::Params,
        f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| self.err(during, e))?;
        let rows = st.query_map(p, f).map_err(|e| self.err(during, e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(during, e))
    }

    /// Load a thread as a state.
    pub fn load(&self, thread: &str) -> Result<State, StoreError> {
        self.load_items_after(thread, 0)
    }

    /// Load a thread with the items of runs after `after` only (earlier runs keep their
    /// metadata, with no items): dispatch reads only what the covered delta needs.
    pub fn load_items_after(&self, thread: &str, after: u32) -> Result<State, StoreError> {
        self.load_range(thread, 0, after, None)
    }

    /// Load a thread's runs after `base` only, with the items of runs after `items_after`;
    /// with `handoffs_after`, only the handoffs a window after that run needs (see
    /// [`Cx::window_handoffs`]), else every handoff.
    pub(super) fn load_range(
        &self,
        thread: &str,
        base: u32,
        items_after: u32,
        handoffs_after: Option<u32>,
    ) -> Result<State, StoreError> {
        let during = "loading a thread";
        type ThreadRow = (
            u32,
            Option<String>,
            Option<String>,
            Option<u32>,
            Option<String>,
            Option<u32>,
            String,
            String,
            Option<String>,
        );
        let row: Option<ThreadRow> = self
            .conn
            .prepare_cached(
                "SELECT version, title, compact_summary, compact_summary_through, parent_thread,
                    parent_run, providers, request, workspace FROM threads WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([thread], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                    ))
                })
                .optional()
            })
            .map_err(|e| self.err(during, e))?;
        let Some((
            version,
            title,
            compact_summary,
            through,
            pthread,
            prun,
            providers,
            request,
            workspace,
        )) = row
        else {
            return Err(self.not_found(thread));
        };
        let parent = match (pthread, prun) {
            (Some(thread), Some(run)) => Some(ParentRef { thread, run }),
            _ => None,
        };
        let providers = self.parse_json(format!("thread {thread}: providers"), &providers)?;
        let request = self.parse_json(format!("thread {thread}: request"), &request)?;
        Ok(State {
            version,
            thread: Thread {
                id: thread.to_string(),
                title,
                compact_summary,
                compact_summary_through: through,
                parent,
                workspace,
            },
            providers,
            provider_threads: self.provider_threads(thread)?,
            runs: self.runs(thread, base, items_after)?,
            handoffs: match handoffs_after {
                Some(after) => self.window_handoffs(thread, after)?,
                None => self.handoffs(thread)?,
            },
            transfers: self.transfers(thread)?,
            checkpoints: self.checkpoints(thread)?,
            request,
        })
    }

    pub(super) fn provider_threads(&self, thread: &str) -> Result<Vec<ProviderThread>, StoreError> {
        super::partial::meta(thread, "provider threads");
        let raw = self.rows(
            "loading provider threads",
            "SELECT id, provider, model, runtime_mode, status, resume_failed
             FROM provider_threads WHERE thread = ?1 ORDER BY seq",
            [thread],
            |r| {
                Ok((
                    ProviderThread {
                        id: r.get(0)?,
                        provider: r.get(1)?,
                        model: r.get(2)?,
                        runtime_mode: r.get(3)?,
                        status: ProviderThreadStatus::Active,
                        resume_failed: r.get(5)?,
                    },
                    r.get::<_, String>(4)?,
                ))
            },
        )?;
        raw.into_iter()
            .map(|(mut pt, status)| {
                pt.status =
                    self.parse_enum(format!("provider thread {}: status", pt.id), &status)?;
                Ok(pt)
            })
            .collect()
    }

    fn runs(&self, thread: &str, base: u32, items_after: u32) -> Result<Vec<Run>, StoreError> {
        let mut runs = self.runs_upto(thread, base, u32::MAX)?;
        self.fill_items(thread, items_after, &mut runs)?;
        Ok(runs)
    }

    /// The runs of `thread` in `after+1..=upto`, without their items.
    pub fn runs_upto(&self, thread: &str, after: u32, upto: u32) -> Result<Vec<Run>, StoreError> {
        super::partial::runs(thread, after, upto);
        let raw = self.rows(
            "loading runs",
            "SELECT ordinal, provider, provider_thread, status, handoff, started_at, ended_at,
                    workspace
             FROM runs WHERE thread = ?1 AND ordinal > ?2 AND ordinal <= ?3 ORDER BY ordinal",
            params![thread, after, upto],
            |r| {
                Ok((
                    Run {
                        ordinal: r.get(0)?,
                        provider: r.get(1)?,
                        provider_thread: r.get(2)?,
                        status: RunStatus::Running,
                        handoff: r.get(4)?,
                        items: Vec::new(),
                        started_at: r.get(5)?,
                        ended_at: r.get(6)?,
                        workspace: None,
                    },
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(7)?,
                ))
            },
        )?;
        let mut runs = Vec::with_capacity(raw.len());
        for (mut run, status, workspace) in raw {
            run.status = match run_status(&status) {
                Some(s) => s,
                None => self.parse_enum(format!("run {}: status", run.ordinal), &status)?,
            };
            if let Some(w) = workspace {
                run.workspace =
                    Some(self.parse_json(format!("run {}: workspace", run.ordinal), &w)?);
            }
            runs.push(run);
        }
        Ok(runs)
    }

    /// Load the items of runs after `after` into `runs` (whose items must be empty; the runs
    /// are contiguous, from run 1 or, in a window, from the window's first run).
    pub fn fill_items(&self, thread: &str, after: u32, runs: &mut [Run]) -> Result<(), StoreError> {
        let first = runs.first().map(|r| r.ordinal).unwrap_or(1);
        let after = after.max(first.saturating_sub(1));
        super::partial::items(thread, after);
        let during = "loading items";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT run, idx, kind, body FROM items WHERE thread = ?1 AND run > ?2
                 ORDER BY run, idx",
            )
            .map_err(|e| self.err(during, e))?;
        let rows = st
            .query_map(params![thread, after], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(during, e))?;
        // Runs are contiguous (validated on the way in), so the ordinal gives the index.
        // Streamed, not collected: a long history's items are parsed straight into their run.
        for row in rows {
            let (run, idx, kind, body) = row.map_err(|e| self.err(during, e))?;
            let item: Item =
                self.parse_json(format!("run {run} item {idx}"), &item_json(&kind, &body))?;
            match runs.get_mut(run.wrapping_sub(first) as usize) {
                Some(r) if r.ordinal == run => r.items.push(item),
                _ => {
                    return Err(self.corrupt(
                        format!("run {run} item {idx}"),
                        "the item belongs to a run that is not stored in order",
                    ))
                }
            }
        }
        Ok(())
    }

    pub fn handoffs(&self, thread: &str) -> Result<Vec<Handoff>, StoreError> {
        super::partial::handoffs(thread, None);
        self.handoffs_where("", params![thread])
    }

    /// The handoffs a window of the runs after `after` needs: those into a run after it
    /// (a handoff without a target run counts as into the run after its range) and those whose
    /// range reaches it. The others cover runs at or before `after` and went into runs at or
    /// before it, which a decision on the window never reads (see `facts::History`).
    pub(super) fn window_handoffs(
        &self,
        thread: &str,
        after: u32,
    ) -> Result<Vec<Handoff>, StoreError> {
        super::partial::handoffs(thread, Some(after));
        self.handoffs_where(
            " AND (covered_to >= ?2 OR target_run > ?2)",
            params![thread, after],
        )
    }

    fn handoffs_where(
        &self,
        filter: &str,
        p: impl rusqlite::Params,
    ) -> Result<Vec<Handoff>, StoreError> {
        /// The enum and JSON columns, parsed after the query (their errors name the handoff).
        struct Raw {
            from: rusqlite::types::Value,
            strategy: String,
            status: String,
        }
        let raw = self.rows(
            "loading handoffs",
            &format!(
                "SELECT id, transfer, target_run, from_provider_threads, to_provider_thread,
                covered_from, covered_to, strategy, status, created_by, summary, supersedes,
                covered_thread
             FROM handoffs WHERE thread = ?1{filter} ORDER BY seq"
            ),
            p,
            |r| {
                Ok((
                    Handoff {
                        id: r.get(0)?,
                        transfer: r.get(1)?,
                        target_run: r.get(2)?,
                        from_provider_threads: Vec::new(),
                        to_provider_thread: r.get(4)?,
                        covered: RunRange {
                            from: r.get(5)?,
                            to: r.get(6)?,
                        },
                        covered_thread: r.get(12)?,
                        strategy: HandoffStrategy::ManualContext,
                        status: HandoffStatus::Pending,
                        created_by: r.get(9)?,
                        summary: r.get(10)?,
                        supersedes: r.get(11)?,
                    },
                    Raw {
                        from: r.get(3)?,
                        strategy: r.get(7)?,
                        status: r.get(8)?,
                    },
                ))
            },
        )?;
        let mut out = Vec::with_capacity(raw.len());
        for (mut h, raw) in raw {
            let id = &h.id;
            let what = || format!("handoff {id}: from_provider_threads");
            let from = super::packed::text_of(raw.from).map_err(|e| self.corrupt(what(), e))?;
            h.from_provider_threads = self.parse_json(what(), &from)?;
            h.strategy = match HandoffStrategy::parse(&raw.strategy) {
                Some(s) => s,
                None => self.parse_enum(format!("handoff {id}: strategy"), &raw.strategy)?,
            };
            h.status = match handoff_status(&raw.status) {
                Some(s) => s,
                None => self.parse_enum(format!("handoff {id}: status"), &raw.status)?,
            };
            out.push(h);
        }
        Ok(out)
    }

    fn transfers(&self, thread: &str) -> Result<Vec<Transfer>, StoreError> {
        super::partial::meta(thread, "transfers");
        let raw = self.rows(
            "loading transfers",
            "SELECT id, type, status, source_thread, target_thread, source_run, resolution,
                handoff FROM transfers WHERE thread = ?1 ORDER BY seq",
            [thread],
            |r| {
                Ok((
                    Transfer {
                        id: r.get(0)?,
                        kind: TransferType::ProviderHandoff,
                        status: TransferStatus::Pending,
                        source_thread: r.get(3)?,
                        target_thread: r.get(4)?,
                        source_run: r.get(5)?,
                        resolution: r.get(6)?,
                        handoff: r.get(7)?,
                    },
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )?;
        raw.into_iter()
            .map(|(mut t, kind, status)| {
                t.kind = self.parse_enum(format!("transfer {}: type", t.id), &kind)?;
                t.status = self.parse_enum(format!("transfer {}: status", t.id), &status)?;
                Ok(t)
            })
            .collect()
    }

    fn checkpoints(&self, thread: &str) -> Result<Vec<Checkpoint>, StoreError> {
        super::partial::meta(thread, "checkpoints");
        self.rows(
            "loading checkpoints",
            "SELECT run, files_changed, diff_summary FROM checkpoints
             WHERE thread = ?1 ORDER BY seq",
            [thread],
            |r| {
                Ok(Checkpoint {
                    run: r.get(0)?,
                    files_changed: r.get(1)?,
                    diff_summary: r.get(2)?,
                })
            },
        )
    }

    /// Supersede handoff `id` of `thread`: its status, the only change a handoff row ever
    /// gets, and the pre-grants that let a provider read its document; with `transfers`, the
    /// transfers that carry it too.
    pub fn supersede_handoff(
        &self,
        thread: &str,
        id: &str,
        transfers: bool,
    ) -> Result<(), StoreError> {
        // A partly staged thread may not hold the handoff (or its grants and transfers).
        super::partial::handoffs(thread, None);
        let during = format!("superseding handoff {id}");
        self.exec(
            &during,
            "UPDATE handoffs SET status = 'superseded' WHERE thread = ?1 AND id = ?2",
            params![thread, id],
        )?;
        self.exec(
            &during,
            "DELETE FROM grants WHERE thread = ?1 AND handoff = ?2",
            params![thread, id],
        )?;
        if transfers {
            self.exec(
                &during,
                "UPDATE transfers SET status = 'superseded' WHERE thread = ?1 AND handoff = ?2",
                params![thread, id],
            )?;
        }
        Ok(())
    }

    /// A stored handoff as the record a dispatch returns (document path and prompt included).
    pub fn handoff_record(
        &self,
        thread: &str,
        id: &str,
    ) -> Result<crate::store::HandoffRecord, StoreError> {
        let h = self
            .handoffs(thread)?
            .into_iter()
            .find(|h| h.id == id)
            .ok_or_else(|| {
                StoreError::new(
                    self.path.clone(),
                    StoreErrorKind::HandoffNotFound {
                        thread: thread.to_string(),
                        handoff: id.to_string(),
                    },
                )
            })?;
        let (document_path, inline): (Option<String>, Option<super::packed::Text>) = self
            .conn
            .query_row(
                "SELECT document_path, inline_prompt FROM handoffs WHERE thread = ?1 AND id = ?2",
                params![thread, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err("loading a handoff's document", e))?;
        Ok(crate::store::HandoffRecord {
            id: h.id,
            document_path: document_path.map(std::path::PathBuf::from),
            inline: inline.map(|t| t.0).unwrap_or_default(),
            status: h.status,
            covered: h.covered,
            covered_thread: h.covered_thread,
            strategy: h.strategy,
            transfer: h.transfer,
            supersedes: h.supersedes,
        })
    }

    /// A decision input as the log keeps it: a delta on the thread's latest logged input, or
    /// a keyframe whose long lists are chunks kept once each in `decision_chunks` (see
    /// `store::input_log`), so the log grows with what changed, not with the thread's history.
    fn encoded_input(
        &self,
        thread: &str,
        operation: &str,
        input: serde_json::Value,
    ) -> Result<String, StoreError> {
        let (text, chunks) = super::input_log::encode(self.conn, thread, operation, input)
            .map_err(|e| self.corrupt("decision input".into(), e))?;
        for (sha, body) in chunks {
            self.exec(
                "recording the decision's input",
                "INSERT OR IGNORE INTO decision_chunks (sha, body) VALUES (?1, ?2)",
                params![sha, super::packed::pack(&body)],
            )?;
        }
        Ok(text)
    }

    /// The merge-back `handoff` of `thread` as its own decision (the latest `merge_back` row of
    /// the log naming it) delivered it: the delivery and pre-grant the run that takes it gets.
    pub fn waiting(&self, thread: &str, handoff: &str) -> Result<crate::eval::Waiting, StoreError> {
        let logged: Option<String> = self
            .conn
            .query_row(
                "SELECT decision FROM decision_log
                 WHERE thread = ?1 AND operation = 'merge_back'
                   AND json_extract(decision, '$.handoff_id') = ?2
                 ORDER BY id DESC LIMIT 1",
                params![thread, handoff],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err("reading the merge-back's decision", e))?;
        let mut waiting = crate::eval::Waiting {
            handoff_id: handoff.to_string(),
            delivery: None,
            pregrant: None,
        };
        if let Some(json) = logged {
            let v: serde_json::Value =
                self.parse_json(format!("merge-back {handoff}: decision"), &json)?;
            let field = |k: &str| v.get(k).cloned().unwrap_or_default();
            waiting.delivery =
                self.parse_value(format!("merge-back {handoff}: delivery"), field("delivery"))?;
            waiting.pregrant =
                self.parse_value(format!("merge-back {handoff}: pregrant"), field("pregrant"))?;
        }
        Ok(waiting)
    }

    fn parse_value<T: DeserializeOwned>(
        &self,
        what: String,
        v: serde_json::Value,
    ) -> Result<T, StoreError> {
        serde_json::from_value(v).map_err(|e| self.corrupt(what, e))
    }

    /// Record a decision in the log, with what it was decided from (`input`: a
    /// [`crate::store::DecisionInput`] as JSON, its long lists kept as shared chunks).
    pub fn log_decision(
        &self,
        thread: &str,
        operation: &str,
        decision: &crate::decision::Decision,
        input: serde_json::Value,
    ) -> Result<(), StoreError> {
        let value =
            serde_json::to_value(decision).map_err(|e| self.corrupt("decision".into(), e))?;
        let split = super::trace_log::split(value);
        if let Some((sha, body)) = &split.rules {
            self.exec(
                "recording the decision's trace text",
                "INSERT OR IGNORE INTO decision_rules (sha, body) VALUES (?1, ?2)",
                params![sha, body],
            )?;
        }
        let json: rusqlite::types::Value =
            match super::trace_log::encode(self.conn, thread, operation, &split.decision) {
                super::trace_log::Logged::Whole(text) => text.into(),
                super::trace_log::Logged::Delta(text) => super::packed::pack(&text),
            };
        let input = self.encoded_input(thread, operation, input)?;
        self.exec(
            "recording the decision",
            "INSERT INTO decision_log (thread, run, operation, policy_name, policy_sha256, decision,
                input)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                thread,
                decision.run,
                operation,
                decision.policy.name,
                decision.policy.sha256,
                json,
                super::packed::pack_input(&input)
            ],
        )
    }
}

/// An item's JSON (`{"kind":"K",...}`, as serialized: the tag first) as `items.body` keeps it,
/// without its `kind`, which the row's `kind` column holds (since schema 8).
fn body_of(json: String, kind: &str) -> String {
    let tag = format!("{{\"kind\":{}", serde_json::Value::from(kind));
    match json.strip_prefix(tag.as_str()) {
        Some(rest) => {
            let rest = rest.strip_prefix(',').unwrap_or(rest);
            format!("{{{rest}")
        }
        None => json,
    }
}

/// An item row's JSON with its `kind` put back ([`body_of`]); a body written before schema 8
/// has it already and is read as it is.
pub(crate) fn item_json<'a>(kind: &str, body: &'a str) -> std::borrow::Cow<'a, str> {
    let Some(rest) = body.strip_prefix('{') else {
        return body.into();
    };
    if rest.starts_with("\"kind\":") {
        return body.into();
    }
    let sep = if rest.trim_start().starts_with('}') {
        ""
    } else {
        ","
    };
    format!("{{\"kind\":{}{sep}{rest}", serde_json::Value::from(kind)).into()
}

#[cfg(test)]
mod tests {
    use super::{body_of, item_json};

    #[test]
    fn an_item_body_keeps_no_kind_and_reads_back_with_it() {
        for (json, kind, kept) in [
            (
                r#"{"kind":"user_message","text":"Hi."}"#,
                "user_message",
                r#"{"text":"Hi."}"#,
            ),
            (r#"{"kind":"protocol"}"#, "protocol", "{}"),
        ] {
            let body = body_of(json.to_string(), kind);
            assert_eq!(body, kept);
            assert_eq!(item_json(kind, &body), json);
            // A body written before schema 8 keeps its kind and reads as it is.
            assert_eq!(item_json(kind, json), json);
        }
    }
}
