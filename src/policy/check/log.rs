//! The `log` block (docs/policy-language.md#log): what the service's decision log writes for a
//! decision of this policy. Each entry names a field of a log line ([`crate::policy::LOG_FIELDS`])
//! and drops it, hashes it, or keeps one that is off by default. Blocks add up along `extends`:
//! a later file's entry for a field replaces the base's.

use super::compose::Merged;
use super::Checker;
use crate::policy::{CLog, LogField, LOG_FIELDS};
use crate::suggest::did_you_mean;

pub(super) fn compile_log(c: &mut Checker<'_>, merged: &Merged<'_>) -> CLog {
    let mut out = CLog::default();
    for b in &merged.log {
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for e in &b.entries {
            let (action, field) = (e.action.node.as_str(), e.field.node.as_str());
            let Some((_, kind, _)) = LOG_FIELDS.iter().find(|(n, _, _)| *n == field) else {
                let help = did_you_mean(field, LOG_FIELDS.iter().map(|(n, _, _)| *n))
                    .map(|s| format!("did you mean `{s}`?"))
                    .or_else(|| {
                        Some(format!(
                            "the fields of a log line are {}",
                            LOG_FIELDS
                                .iter()
                                .map(|(n, _, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    });
                c.err(
                    e.field.span,
                    format!("`{action} {field}`: a decision-log line has no field `{field}`"),
                    help,
                );
                continue;
            };
            if !seen.insert(field) {
                c.err(
                    e.field.span,
                    format!("`{field}` is named twice in this `log` block"),
                    Some("name each field once: `drop`, `hash` or `keep`".into()),
                );
                continue;
            }
            match (action, kind) {
                (_, LogField::Fixed) => {
                    c.err(
                        e.field.span,
                        format!("`{action} {field}`: `{field}` is written on every line"),
                        Some(
                            "a line always carries its id, time, method and policy (they identify it)"
                                .into(),
                        ),
                    );
                    continue;
                }
                ("keep", LogField::Written) => {
                    c.err(
                        e.field.span,
                        format!("`keep {field}`: `{field}` is written by default"),
                        Some("`keep` turns on `input` or `trace`; `drop` or `hash` change the others".into()),
                    );
                    continue;
                }
                ("hash", LogField::OffByDefault) => {
                    c.err(
                        e.field.span,
                        format!("`hash {field}`: `{field}` cannot be hashed"),
                        Some(format!("`keep {field}` writes it, `drop {field}` leaves it out")),
                    );
                    continue;
                }
                _ => {}
            }
            out.set(action, field);
        }
    }
    out
}
