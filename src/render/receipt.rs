//! The budget's receipt and transcript (docs/rendering.md#what-the-budget-leaves-out): per
//! kind, how many items the budget left out or cut and where to read them; and the transcript,
//! which carries each of them whole under its id.

use crate::cut::thousands;
use crate::select::ladder::noun;
use crate::select::Summary;
use crate::state::State;

/// What the budget did to one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindReceipt {
    pub kind: &'static str,
    /// Ids of the items left out, in id order.
    pub left_out: Vec<String>,
    /// Ids of the items shown shortened.
    pub cut: Vec<String>,
}

/// Whether an omission is the budget's (the policy included the item).
pub fn budget_omission(reason: &str) -> bool {
    reason.starts_with("dropped to fit the budget")
        || (reason.starts_with("over the ") && reason.ends_with("-character budget"))
}

/// Per kind, in the order kinds first appear: the items the budget left out or cut.
pub fn receipt(summary: &Summary) -> Vec<KindReceipt> {
    let mut out: Vec<KindReceipt> = Vec::new();
    let slot = |out: &mut Vec<KindReceipt>, kind: &'static str| -> usize {
        match out.iter().position(|r| r.kind == kind) {
            Some(i) => i,
            None => {
                out.push(KindReceipt {
                    kind,
                    ..KindReceipt::default()
                });
                out.len().saturating_sub(1)
            }
        }
    };
    for o in summary.omitted.iter().filter(|o| budget_omission(&o.reason)) {
        let i = slot(&mut out, o.kind);
        if let Some(r) = out.get_mut(i) {
            r.left_out.push(o.id.clone());
        }
    }
    for e in summary.sections.iter().flat_map(|s| &s.entries) {
        if (e.degraded || e.truncated) && !e.id.starts_with("count:") {
            let i = slot(&mut out, e.kind);
            if let Some(r) = out.get_mut(i) {
                r.cut.push(e.id.clone());
            }
        }
    }
    for r in &mut out {
        r.left_out.sort_by_key(|a| natural(a));
        r.cut.sort_by_key(|a| natural(a));
    }
    out
}

/// A key that orders `r9.1` before `r10.1`: the id's runs of digits as numbers.
fn natural(id: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut num: Option<u64> = None;
    for c in id.chars() {
        match c.to_digit(10) {
            Some(d) => num = Some(num.unwrap_or(0).saturating_mul(10).saturating_add(u64::from(d))),
            None => {
                if let Some(n) = num.take() {
                    out.push((std::mem::take(&mut text), n));
                }
                text.push(c);
            }
        }
    }
    out.push((text, num.unwrap_or(0)));
    out
}

fn ids(list: &[String]) -> String {
    match list {
        [] => String::new(),
        [one] => format!("`{one}`"),
        [a, b] => format!("`{a}`, `{b}`"),
        [first, .., last] => format!("`{first}` ... `{last}`"),
    }
}

/// The receipt as markdown bullets: `- requests: 312 left out (`r1.1` ... `r312.1`), 40 cut (...)`.
pub fn receipt_markdown(receipt: &[KindReceipt]) -> String {
    let mut s = String::new();
    for r in receipt {
        let mut parts = Vec::new();
        if !r.left_out.is_empty() {
            parts.push(format!(
                "{} left out ({})",
                thousands(r.left_out.len()),
                ids(&r.left_out)
            ));
        }
        if !r.cut.is_empty() {
            parts.push(format!("{} cut ({})", thousands(r.cut.len()), ids(&r.cut)));
        }
        let name = noun(r.kind, 2);
        let name = name.trim_start_matches(|c: char| c.is_ascii_digit() || c == ',');
        let name = name.trim_start().trim_start_matches("earlier ");
        s.push_str(&format!("- {name}: {}\n", parts.join(", ")));
    }
    s
}

/// The transcript's path beside an off-band document's (`.../handoff.md` -> `.../transcript.md`).
pub fn transcript_path(document: &str) -> String {
    std::path::Path::new(document)
        .with_file_name(TRANSCRIPT_FILE)
        .display()
        .to_string()
}

/// The transcript's file name in the handoff directory.
pub const TRANSCRIPT_FILE: &str = "transcript.md";

/// How many items the receipt says were left out and how many cut, over every kind.
pub fn counts(receipt: &[KindReceipt]) -> (usize, usize) {
    receipt.iter().fold((0usize, 0usize), |(l, c), r| {
        (l.saturating_add(r.left_out.len()), c.saturating_add(r.cut.len()))
    })
}

/// `1,333 older or less important items were left out and 412 were cut`.
pub fn summary_sentence(left_out: usize, cut: usize) -> String {
    let items = |n: usize| if n == 1 { "item was" } else { "items were" };
    match (left_out, cut) {
        (0, 0) => String::new(),
        (l, 0) => format!("{} older or less important {} left out", thousands(l), items(l)),
        (0, c) => format!("{} older or less important {} shortened", thousands(c), items(c)),
        (l, c) => format!(
            "{} older or less important {} left out and {} shortened",
            thousands(l),
            items(l),
            thousands(c)
        ),
    }
}

/// The sentence that says where what the receipt counts can be read.
pub fn where_to_read(transcript: Option<&str>) -> String {
    match transcript {
        Some(p) => format!(
            "Each of them is whole in the transcript `{p}`, under its id; read it when you need one."
        ),
        None => "They are not sent; handoff.json lists their ids.".to_string(),
    }
}

/// The transcript of an off-band handoff: every item the receipt counts, whole, under its id,
/// in run order. Its texts come from [`crate::select::whole_texts`], the document's own text
/// path, redacted in a clone of the redaction context of `summary` (the one the document was
/// built from), so that a secret has the same `[REDACTED:RULE#N]` in both (docs/redaction.md).
/// `note` is the workspace note (`Staleness::note`). `Ok(None)` when the budget left nothing
/// out and cut nothing; an error when a text could not be redacted: fail closed, the
/// transcript must not be written.
pub fn transcript(
    state: &State,
    summary: &Summary,
    handoff: &str,
    runs: &[u32],
    note: Option<&str>,
) -> Result<Option<String>, crate::redact::RedactError> {
    let receipt = receipt(summary);
    let wanted: std::collections::HashSet<&str> = receipt
        .iter()
        .flat_map(|r| r.left_out.iter().chain(&r.cut))
        .map(String::as_str)
        .collect();
    if wanted.is_empty() {
        return Ok(None);
    }
    let mut cx = summary.redaction.context.clone();
    let texts = crate::select::whole_texts(state, runs, &wanted, note, &mut cx);
    if let Some(e) = cx.failure() {
        return Err(e.clone());
    }
    let mut s = format!(
        "# Transcript of handoff {handoff}\n\nWhat handoff {handoff} left out or cut to fit its budget, whole, under each item's id ({} items).\n",
        thousands(texts.len())
    );
    for (id, kind, run, text) in texts {
        s.push_str(&format!("\n## {id} ({kind}, run {run})\n\n{text}\n"));
    }
    Ok(Some(s))
}
