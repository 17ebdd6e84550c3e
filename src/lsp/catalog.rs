//! What the editor says about the language's names: facts (from the facts catalogue,
//! [`Fact::ALL`]), strategies, handoff strategies, forms, keywords.

use crate::facts::{Fact, FactDef, Type};

/// (strategy, what it does) — the table of docs/policy-language.md, "strategy".
pub const STRATEGIES: &[(&str, &str)] = &[
    ("no_handoff", "Resume the target's provider thread (create one if there is none) with no handoff document."),
    ("delta_existing", "Resume the target's provider thread and hand it what it missed: the eligible runs after `target.last_seen` (`delta_since_target_last_seen`)."),
    ("full_existing", "Resume the target's provider thread with a summary of every eligible run (`full_thread_summary`)."),
    ("full_new", "Create a new provider thread with a summary of every eligible run (`full_thread_summary`)."),
    ("native_fork", "Fork the fork source's provider thread natively; no document. Guard it with `fork.native_possible`."),
    ("unsupported", "The target cannot take this run: no thread, no handoff."),
];

/// (handoff strategy, what it covers).
pub const HANDOFF_STRATEGIES: &[(&str, &str)] = &[
    ("delta_since_target_last_seen", "The eligible runs after `target.last_seen` (the default of `delta_existing`)."),
    ("full_thread_summary", "Every eligible run (the default of `full_existing` and `full_new`)."),
    ("fork_delta_summary", "The runs after the fork point (used for every `merge_back`)."),
    ("checkpoint_summary", "The runs up to the latest checkpoint (`checkpoint.latest`) on `full_existing` or `full_new`."),
    ("manual_context", "Recorded as given; the covered runs are the strategy's own."),
];

/// (form, what it writes).
pub const FORMS: &[(&str, &str)] = &[
    (
        "full",
        "The item's text plus details (command output, diff size, ...). The default.",
    ),
    ("text", "The item's text only."),
    ("line", "One line through the `text max` rule."),
    ("path_only", "A file change as its path."),
    ("count", "A checkpoint as its file count."),
    (
        "activity",
        "A command as the Bash tool call that ran it (`Bash (failed, exit 1): cargo test`); a tool call as its activity line.",
    ),
];

/// (keyword, what it starts).
pub const KEYWORDS: &[(&str, &str)] = &[
    ("policy", "`policy \"name\" { ... }`: the header (name, description, extends, template)."),
    ("let", "`let NAME = VALUE`: a named constant."),
    ("eligible", "`eligible when COND`: which runs count (reads `run.*`)."),
    ("stale", "`stale NAME when COND because \"...\"`: a staleness signal; `stale` in a rule is true when any signal holds."),
    ("strategy", "`strategy { ... }`: the ladder; the first rule whose condition holds decides; it ends in `otherwise`."),
    ("summary", "`summary { ... }`: what a handoff summary contains (sections, include/exclude, budget, source)."),
    ("delivery", "`delivery { ... }`: `off_band` or `inline`, first match wins (default `inline`)."),
    ("pregrant", "`pregrant { ... }`: `read handoff.document [when COND]` and `turns N uses N`."),
    ("providers", "`providers { NAME { KEY VALUE [force] ... } }`: provider capabilities (`target.caps.*`) the policy sets; a state's explicit value wins unless the policy writes `force`."),
    ("force", "`KEY VALUE force` in a `providers` entry: the policy's value wins over the state's."),
    ("redact", "`redact { ... }`: secret redaction (docs/redaction.md). Every built-in rule is on unless `disable RULE` turns it off; `redact NAME pattern \"REGEX\"` adds a rule of the policy's own; `allow pattern \"REGEX\"` keeps what it matches."),
    ("disable", "`disable RULE` in a `redact` block: turn a built-in redaction rule off (its id, e.g. `jwt`)."),
    ("allow", "`allow pattern \"REGEX\"` in a `redact` block: a match of a rule that this pattern also matches is not redacted (e.g. a documented test key)."),
    ("log", "`log { ... }`: what the service's decision log writes for this policy's decisions (docs/policy-language.md#log): `drop FIELD`, `hash FIELD`, `keep input` / `keep trace`."),
    ("hash", "`hash FIELD` in a `log` block: write the field's sha256 (`\"sha256:...\"`) instead of its value."),
    ("keep", "`keep input` or `keep trace` in a `log` block: write a field that is off by default (`input` carries the thread's texts)."),
    ("pattern", "`pattern \"REGEX\"`: the regex crate's syntax, as written (only `\\\"` is unescaped); linear time, no look-around or backreferences."),
    ("extends", "`extends \"base\"`: compose this file on top of a file (relative to this one) or a shipped profile."),
    ("known_providers", "`known_providers [\"acme\"]`: providers beyond the shipped ones that the rules name (no \"unknown provider\" warning for them)."),
    ("include", "`include KIND into SECTION [as FORM] [when COND]`: put items of a kind into a section."),
    ("exclude", "`exclude KIND [when COND] [because \"reason\"]`: leave items out."),
    ("section", "`section NAME \"Title\"`: declare a section or retitle a built-in one."),
    ("otherwise", "The rule that matches when no rule above did."),
    ("because", "The reason recorded in the decision and shown by `baton explain`."),
    ("handoff", "`handoff HANDOFF_STRATEGY`: override the rule's default handoff strategy."),
    ("when", "The rule's condition (a bool expression)."),
    ("budget", "`budget N [newest_first | oldest_first]`: a character budget for the summary."),
    ("source", "`source deterministic` or `source command \"CMD\" [timeout_ms N]`: who writes the summary."),
    ("inline_limit", "`inline_limit N`: the pointer prompt limit: the characters the first-turn prompt of an off-band handoff aims to stay within (default 500); an inline handoff is not limited by it."),
    ("off_band", "Delivery as a private file the first-turn prompt points to."),
    ("inline", "Delivery in the prompt itself."),
];

/// The hover text of a `providers` block key: the capability fact it sets, and the rule.
pub fn cap_hover(d: &FactDef) -> String {
    format!(
        "**`{}`** in a `providers` entry sets **`{}`**: {}\n\n{}\n\nThe state's explicit value wins over the policy's; `{} VALUE force` makes the policy's win.",
        d.cap_key().unwrap_or(d.name),
        d.name,
        type_name(d.ty),
        d.doc,
        d.cap_key().unwrap_or(d.name),
    )
}

/// The roots of the fact names (`target`, `request`, ...).
pub fn fact_roots() -> Vec<&'static str> {
    let mut roots: Vec<&str> = Fact::ALL
        .iter()
        .filter_map(|d| d.name.split('.').next())
        .collect();
    roots.dedup();
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// The type of a fact as the checker names it.
pub fn type_name(ty: Type) -> String {
    match ty {
        Type::Enum(values) => format!(
            "enum ({})",
            values
                .iter()
                .map(|v| format!("\"{v}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.name(),
    }
}

/// A condition that reads the fact, as a policy would write it.
pub fn example(d: &FactDef) -> String {
    let rule = match d.ty {
        Type::Bool => format!("when {}", d.name),
        Type::Int => format!("when {} > 0", d.name),
        Type::Enum(values) => format!(
            "when {} == \"{}\"",
            d.name,
            values.first().copied().unwrap_or("")
        ),
        Type::StrList => format!("when \"codex\" in {}", d.name),
        _ => format!("when {} == \"codex\"", d.name),
    };
    rule
}

/// The hover text of a fact: name, type, nullability, meaning, where it can be read, example.
pub fn fact_hover(d: &FactDef) -> String {
    format!(
        "**`{}`**: {}{}\n\n{}\n\nReadable {}.\n\nExample:\n```policy\n{}\n```",
        d.name,
        type_name(d.ty),
        if d.nullable { ", may be null" } else { "" },
        d.doc,
        d.scope.describe(),
        example(d)
    )
}

/// The meaning of a word from one of the tables.
pub fn lookup(table: &'static [(&'static str, &'static str)], word: &str) -> Option<&'static str> {
    table.iter().find(|(n, _)| *n == word).map(|(_, m)| *m)
}
