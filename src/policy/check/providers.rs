//! The `providers` block: provider names and capability keys checked against the facts
//! catalogue (`target.caps.*`), values typed and range-checked, compiled to [`CProviders`].

use super::compose::Merged;
use super::resolve::help;
use super::{Checker, MAX_COUNT};
use crate::facts::{Fact, Type};
use crate::policy::ast::*;
use crate::policy::providers::{CCapSetting, CProvider, CProviders, CapValue};
use crate::state::{HandoffChannel, KNOWN_PROVIDERS};
use crate::suggest::did_you_mean;
use std::collections::HashMap;

/// Duplicates within one file: a provider with two entries in a block, a key set twice in
/// an entry.
pub(super) fn no_duplicates(c: &mut Checker<'_>, file: &PolicyFile) {
    let Some(block) = &file.providers else {
        return;
    };
    let mut names: HashMap<&str, Span> = HashMap::new();
    for entry in &block.providers {
        if let Some(prev) = names.insert(entry.name.node.as_str(), entry.name.span) {
            c.err(
                entry.name.span,
                format!(
                    "provider `{}` has a second entry in this `providers` block (the first is at line {})",
                    entry.name.node, prev.line
                ),
                Some("merge the two entries into one".into()),
            );
        }
        let mut keys: HashMap<&str, Span> = HashMap::new();
        for s in &entry.settings {
            if let Some(prev) = keys.insert(s.key.node.as_str(), s.key.span) {
                c.err(
                    s.key.span,
                    format!(
                        "`{}` is set twice for `{}` (first at line {})",
                        s.key.node, entry.name.node, prev.line
                    ),
                    Some("keep one of the two".into()),
                );
            }
        }
    }
}

/// Check and compile the merged `providers` entries.
pub(super) fn compile_providers(c: &mut Checker<'_>, merged: &Merged<'_>) -> CProviders {
    let mut out = CProviders {
        providers: Vec::new(),
        span: merged.providers_span,
    };
    let keys: Vec<&str> = Fact::caps().filter_map(|d| d.cap_key()).collect();
    for p in &merged.providers {
        name_lints(c, p.name);
        let mut settings = Vec::new();
        for s in &p.settings {
            let Some(def) = Fact::by_cap_key(&s.key.node) else {
                let help = help(&s.key.node, &keys, "provider capabilities", '`');
                c.err(
                    s.key.span,
                    format!("unknown provider capability `{}`", s.key.node),
                    help,
                );
                continue;
            };
            if let Some(value) = value(c, &s.key.node, def.ty, &s.value) {
                settings.push(CCapSetting {
                    fact: def.fact,
                    value,
                    force: s.force,
                    span: s.span,
                });
            }
        }
        let span = p.entries.last().map(|e| e.span).unwrap_or(p.name.span);
        out.providers.push(CProvider {
            name: p.name.node.clone(),
            span,
            settings,
        });
    }
    out
}

/// An empty name is an error; a name that is not one of baton's providers but is close to
/// one is a warning (it declares a new provider, which a typo should not).
fn name_lints(c: &mut Checker<'_>, name: &Spanned<String>) {
    if name.node.trim().is_empty() {
        c.err(name.span, "a provider name cannot be empty", None);
        return;
    }
    if KNOWN_PROVIDERS.contains(&name.node.as_str()) {
        return;
    }
    if let Some(known) = did_you_mean(&name.node, KNOWN_PROVIDERS.iter().copied()) {
        c.warn(
            name.span,
            format!(
                "`{}` is not a provider baton knows, so this entry declares a new provider",
                name.node
            ),
            Some(format!("did you mean `{known}`?")),
        );
    }
}

/// The value of `key` (of type `ty`) as written, typed and range-checked.
fn value(
    c: &mut Checker<'_>,
    key: &str,
    ty: Type,
    v: &Spanned<SettingValue>,
) -> Option<CapValue> {
    let found = match &v.node {
        SettingValue::Bool(b) => b.to_string(),
        SettingValue::Int(n) => n.to_string(),
        SettingValue::Word(w) => format!("`{w}`"),
        SettingValue::Str(s) => format!("\"{s}\""),
        SettingValue::Null => {
            c.err(
                v.span,
                format!("`{key}` cannot be null"),
                Some(
                    "leave the key out: the state's value, else baton's shipped one, applies"
                        .into(),
                ),
            );
            return None;
        }
    };
    match (ty, &v.node) {
        (Type::Bool, SettingValue::Bool(b)) => Some(CapValue::Bool(*b)),
        (Type::Bool, _) => {
            c.err(
                v.span,
                format!("`{key}` takes `true` or `false`, not {found}"),
                None,
            );
            None
        }
        (Type::Int, SettingValue::Int(n)) => {
            let n = c.in_range(
                &Spanned {
                    node: *n,
                    span: v.span,
                },
                key,
                1,
                MAX_COUNT,
                Some("a character count; every count in a policy is at most 4294967295"),
            )?;
            if n < i64::try_from(crate::policy::MUST_KEEP_FLOOR).unwrap_or(i64::MAX) {
                c.warn(
                    v.span,
                    format!("a per-turn budget of {n} characters cannot hold the must-keep items"),
                    Some(format!(
                        "the latest user message, open questions and approvals and the last failing command are never cut; leave them at least {} characters",
                        crate::policy::MUST_KEEP_FLOOR
                    )),
                );
            }
            u64::try_from(n).ok().map(CapValue::Chars)
        }
        (Type::Int, _) => {
            c.err(
                v.span,
                format!("`{key}` takes a number of characters, not {found}"),
                None,
            );
            None
        }
        (Type::Enum(values), SettingValue::Word(w) | SettingValue::Str(w)) => {
            let channel = HandoffChannel::parse(w);
            match channel {
                Some(ch) if values.contains(&w.as_str()) => Some(CapValue::Channel(ch)),
                _ => {
                    let help = help(w, values, "values", '`');
                    c.err(
                        v.span,
                        format!("{found} is not a possible value of `{key}`"),
                        help,
                    );
                    None
                }
            }
        }
        (Type::Enum(values), _) => {
            c.err(
                v.span,
                format!("`{key}` takes one of {}, not {found}", values.join(", ")),
                None,
            );
            None
        }
        _ => {
            c.err(
                v.span,
                format!("`{key}` cannot be set in a `providers` block"),
                None,
            );
            None
        }
    }
}
