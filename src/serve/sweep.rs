//! The service's periodic garbage collection of off-band handoff documents: the same pass as
//! `baton gc` (retention by age and count per thread; superseded handoffs and deleted threads
//! from the store), run on the blocking pool every `every`, never on a file baton did not
//! create. A pass that removed something or kept something on doubt is announced to every
//! client with a `handoffs/collected` notification.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::session::Shared;
use crate::deliver::{GcReport, OffbandStore, Retention};

/// When and what the sweep removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcSweep {
    /// Time between passes (the first pass runs one interval after start).
    pub every: Duration,
    /// What to keep.
    pub retention: Retention,
}

impl Default for GcSweep {
    /// Hourly; documents kept for 7 days and at most 10 per thread (as `baton gc`).
    fn default() -> Self {
        GcSweep {
            every: Duration::from_secs(3600),
            retention: Retention {
                max_age: Some(Duration::from_secs(7 * 86_400)),
                max_per_thread: Some(10),
            },
        }
    }
}

/// One pass: liveness from the store, under its write lock (and this process's writer lock:
/// see [`crate::store::Store::collect_documents`]); a store that cannot answer keeps the
/// handoff.
pub fn sweep_once(shared: &Shared, sweep: &GcSweep) -> Result<GcReport, SweepError> {
    let offband = OffbandStore::new(shared.cfg.handoff_dir.clone());
    Ok(shared
        .stores
        .write(|db| {
            Ok(db.collect_documents(&offband, &sweep.retention, SystemTime::now(), false))
        })
        .map_err(SweepError::Store)??)
}

/// Why a sweep pass did not run through (announced in the notification's `warnings`).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The store could not be opened.
    #[error("{}", .0.message)]
    Store(super::rpc::RpcError),
    /// The pass over the off-band directory failed.
    #[error(transparent)]
    Delivery(#[from] crate::deliver::DeliveryError),
}

/// Run [`sweep_once`] every `sweep.every` until the server shuts down.
pub async fn run(shared: Arc<Shared>, sweep: GcSweep) {
    let mut tick = tokio::time::interval(sweep.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate; start one interval from now
    loop {
        tick.tick().await;
        if shared.is_shutting_down() {
            return;
        }
        let s = shared.clone();
        let pass = tokio::task::spawn_blocking(move || sweep_once(&s, &sweep)).await;
        if let Ok(Ok(r)) = &pass {
            shared
                .ops
                .metrics
                .documents_collected(u64::try_from(r.removed.len()).unwrap_or(u64::MAX));
        }
        let params = match pass {
            Ok(Ok(r)) if r.removed.is_empty() && r.warnings.is_empty() => continue,
            Ok(Ok(r)) => json!({
                "removed": r.reasons.iter()
                    .map(|(p, why)| json!({"path": p, "reason": why}))
                    .collect::<Vec<_>>(),
                "kept": r.kept,
                "warnings": r.warnings,
            }),
            Ok(Err(e)) => json!({"removed": [], "kept": null, "warnings": [e.to_string()]}),
            Err(e) => json!({"removed": [], "kept": null, "warnings": [e.to_string()]}),
        };
        shared.notify_all("handoffs/collected", params);
    }
}
