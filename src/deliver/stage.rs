//! The delivery stage: after the pipeline has decided and rendered, put an off-band handoff
//! on disk and issue its pre-grant, or fall back to inline delivery when that fails.
//!
//! Public entry point: [`deliver`]. It never fails: a failed write or grant turns the
//! delivery into an inline one whose first-turn prompt carries the whole document, and the
//! error's message (which names the path and says the fact, never a command) is recorded as
//! `delivery.fallback_reason` in the decision, as `delivery_fallback_reason` in the
//! provenance, and in [`Delivered`]; its kind (`disk_full`, ...) beside it as
//! `delivery.fallback_kind`, `delivery_fallback_kind` and [`Delivered::fallback_kind`], by
//! which a shell picks its advice (the `baton` command's "run `baton gc`").

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::offband::OffbandStore;
use super::pregrant::{issue, Grant, GrantStore};
use super::DeliveryError;
use crate::decision::{DeliveryMode, FallbackKind};
use crate::outcome::Outcome;
use crate::render::receipt::TRANSCRIPT_FILE;

/// File name of the first-turn prompt written next to the document.
pub const INLINE_FILE: &str = "inline.md";
/// File name of the provenance written next to the document.
pub const PROVENANCE_FILE: &str = "handoff.json";

/// What the delivery stage did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// The off-band document written (`None` when delivered inline).
    pub document_path: Option<PathBuf>,
    /// The pre-grant issued for the document, if the decision asked for one.
    pub grant: Option<Grant>,
    /// The same pre-grant for the transcript written beside the document, if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_grant: Option<Grant>,
    /// Why an off-band delivery fell back to inline (the error's message), if it did.
    pub fallback_reason: Option<String>,
    /// The kind of that failure, when delivery fell back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_kind: Option<FallbackKind>,
}

/// Deliver `outcome`'s handoff for `thread_id`.
///
/// Does nothing unless the decision's delivery is off-band and a handoff was rendered.
/// Off-band: writes `handoff.md`, `inline.md` and `handoff.json` with
/// [`OffbandStore::write`] at the handoff id's stable path, then issues the pre-grant
/// `decision.pregrant` describes for (`thread_id`, `decision.run`) into `grants`. On any
/// failure it falls back to inline delivery (see the module docs) and reports why.
pub fn deliver(
    outcome: &mut Outcome,
    offband: &OffbandStore,
    thread_id: &str,
    grants: &mut dyn GrantStore,
) -> Delivered {
    let off_band = outcome
        .decision
        .delivery
        .as_ref()
        .is_some_and(|d| d.mode == DeliveryMode::OffBand);
    if !off_band {
        return Delivered::default();
    }
    match write_and_grant(outcome, offband, thread_id, grants) {
        Ok(delivered) => delivered,
        Err(e) => {
            let reason = e.to_string();
            let kind = e.fallback_kind();
            fall_back_to_inline(outcome, &reason, kind);
            Delivered {
                document_path: None,
                grant: None,
                transcript_grant: None,
                fallback_reason: Some(reason),
                fallback_kind: Some(kind),
            }
        }
    }
}

fn write_and_grant(
    outcome: &mut Outcome,
    offband: &OffbandStore,
    thread_id: &str,
    grants: &mut dyn GrantStore,
) -> Result<Delivered, DeliveryError> {
    let Some(rendered) = outcome.rendered.as_ref() else {
        // Nothing was rendered: nothing to deliver.
        return Ok(Delivered::default());
    };
    let decision = &outcome.decision;
    let Some(handoff_id) = decision.handoff_id.as_deref() else {
        return Err(DeliveryError::InvalidId {
            kind: "handoff id",
            id: String::new(),
            why: "the decision names no handoff id",
        });
    };
    let provenance = serde_json::to_string_pretty(&rendered.provenance)
        .map_err(|e| DeliveryError::Store(format!("cannot encode provenance: {e}")))?
        + "\n";
    let mut files: Vec<(&str, &[u8])> = vec![
        (super::DOCUMENT_FILE, rendered.document.as_bytes()),
        (INLINE_FILE, rendered.inline.as_bytes()),
        (PROVENANCE_FILE, provenance.as_bytes()),
    ];
    // What the budget left out or shortened, whole, beside the document.
    if let Some(t) = &rendered.transcript {
        files.push((TRANSCRIPT_FILE, t.as_bytes()));
    }
    let path = offband.write(thread_id, handoff_id, &files)?;
    // The first-turn prompt was rendered with the decision's path; the child must be told
    // the very path the pre-grant allows, never one the check would deny.
    if let Some(announced) = decision.delivery.as_ref().and_then(|d| d.document.as_ref()) {
        if Path::new(announced) != path {
            return Err(DeliveryError::InvalidGrant {
                path,
                why: format!(
                    "the first-turn prompt names {announced}, not the written document; \
                     decide and deliver with the same off-band root"
                ),
            });
        }
    }
    let grant = match &decision.pregrant {
        Some(p) => Some(issue(
            grants,
            thread_id,
            decision.run,
            &p.tool,
            &path,
            p.uses,
        )?),
        None => None,
    };
    // The pre-grant covers the transcript too, for the same first turn and as many uses.
    let transcript_grant = match (&decision.pregrant, &rendered.transcript) {
        (Some(p), Some(_)) => Some(issue(
            grants,
            thread_id,
            decision.run,
            &p.tool,
            &path.with_file_name(TRANSCRIPT_FILE),
            p.uses,
        )?),
        _ => None,
    };
    record_path(outcome, &path, grant.as_ref());
    Ok(Delivered {
        document_path: Some(path),
        grant,
        transcript_grant,
        fallback_reason: None,
        fallback_kind: None,
    })
}

/// The document went where the decision said; make sure every record names that path, and
/// that the decision's pre-grant names the canonical path the grant actually allows.
fn record_path(outcome: &mut Outcome, path: &Path, grant: Option<&Grant>) {
    let shown = path.display().to_string();
    if let Some(d) = outcome.decision.delivery.as_mut() {
        d.document = Some(shown.clone());
    }
    if let (Some(p), Some(g)) = (outcome.decision.pregrant.as_mut(), grant) {
        p.path = g.path.display().to_string();
    }
    if let Some(r) = outcome.rendered.as_mut() {
        r.document_path = Some(shown);
    }
}

/// Turn an off-band outcome into an inline one that carries the whole document.
fn fall_back_to_inline(outcome: &mut Outcome, reason: &str, kind: FallbackKind) {
    if let Some(d) = outcome.decision.delivery.as_mut() {
        d.mode = DeliveryMode::Inline;
        d.document = None;
        d.inline_note = None;
        d.fallback_reason = Some(reason.to_string());
        d.fallback_kind = Some(kind);
    }
    outcome.decision.pregrant = None;
    if let Some(r) = outcome.rendered.as_mut() {
        let inline = match r.inline_fallback.take() {
            Some(text) => text,
            // Rendered without the inline form: the document itself is the prompt.
            None => r.document.clone(),
        };
        r.provenance.chars.inline = inline.chars().count();
        r.inline = inline;
        r.document_path = None;
        r.inline_note = None;
        r.provenance.delivery = DeliveryMode::Inline.as_str().to_string();
        r.provenance.delivery_fallback_reason = Some(reason.to_string());
        r.provenance.delivery_fallback_kind = Some(kind);
    }
}
