//! Secret redaction's figures in the quality report (docs/redaction.md#measured):
//!
//! - **secrets leaked**: planted secrets (any token holding the sentinel [`SECRET`], shaped as
//!   a real credential so a rule must find it) that the text shows: must be 0;
//! - **false redactions**: what redaction replaced in an item (or the title, the compaction
//!   summary, the fork anchor) whose texts hold no planted secret: a git SHA, a UUID, a
//!   lockfile hash, a base64 image, an identifier taken for a secret. Reported, per 100,000
//!   characters of text read, not gated.

use crate::facts::ItemCtx;
use crate::redact::RedactionReport;
use crate::state::{Item, State};

/// The sentinel planted secrets carry (`ghp_SNTL...`, `AKIASNTL...`, `postgres://u:SNTLpw@h`).
pub const SECRET: &str = "SNTL";

/// Planted secrets the text shows: each token (letters, digits and `_-+/=.:@`) holding
/// [`SECRET`].
pub fn leaked(read: &str) -> Vec<String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "_-+/=.:@".contains(c);
    let mut out: Vec<String> = Vec::new();
    for (at, _) in read.match_indices(SECRET) {
        let before = read.get(..at).unwrap_or("");
        let start = before
            .rfind(|c: char| !token(c))
            .map(|i| i.saturating_add(1))
            .unwrap_or(0);
        let after = read.get(at..).unwrap_or("");
        let end = after
            .find(|c: char| !token(c))
            .map(|i| at.saturating_add(i))
            .unwrap_or(read.len());
        let s = read.get(start..end).unwrap_or("").to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Every text of one item (what redaction reads of it).
pub fn item_texts(item: &Item) -> Vec<&str> {
    match item {
        Item::Command {
            command, output, ..
        } => std::iter::once(command.as_str())
            .chain(output.as_deref())
            .collect(),
        Item::ToolCall {
            tool,
            input,
            output,
            ..
        } => std::iter::once(tool.as_str())
            .chain(input.as_deref())
            .chain(output.as_deref())
            .collect(),
        Item::FileChange { path, diff, .. } => {
            std::iter::once(path.as_str()).chain(diff.as_deref()).collect()
        }
        Item::Plan { steps, .. } => steps.iter().map(|s| s.text.as_str()).collect(),
        Item::SubagentResult { agent, text, .. } => vec![agent.as_str(), text.as_str()],
        other => vec![other.primary_text()],
    }
}

/// The texts of what redaction reports as `id`.
fn texts_of<'s>(state: &'s State, items: &[ItemCtx<'s>], id: &str) -> Vec<&'s str> {
    match id {
        crate::select::TITLE_ID => state.thread.title.as_deref().into_iter().collect(),
        "compact_summary" => state.thread.compact_summary.as_deref().into_iter().collect(),
        "fork_anchor" => state
            .request
            .fork_anchor
            .as_ref()
            .map(|a| a.text.as_str())
            .into_iter()
            .collect(),
        _ => {
            let item = items.iter().find(|c| c.id == id).and_then(|c| c.item);
            match item {
                Some(i) => item_texts(i),
                None => state
                    .handoffs
                    .iter()
                    .filter(|h| h.id == id)
                    .filter_map(|h| h.summary.as_deref())
                    .collect(),
            }
        }
    }
}

/// Redactions in texts that hold no planted secret: `RULE in ITEM`, one per rule and item.
pub fn false_redactions(
    state: &State,
    items: &[ItemCtx<'_>],
    redactions: &[RedactionReport],
) -> Vec<String> {
    let mut out = Vec::new();
    for r in redactions {
        for id in &r.items {
            let texts = texts_of(state, items, id);
            if !texts.iter().any(|t| t.contains(SECRET)) {
                out.push(format!("{} in {id}", r.rule));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaked_tokens_are_whole() {
        assert_eq!(
            leaked("a ghp_SNTLabc, and postgres://u:SNTLpw@db/x."),
            ["ghp_SNTLabc", "postgres://u:SNTLpw@db/x."]
        );
        assert!(leaked("[REDACTED:github-token#1]").is_empty());
    }
}
