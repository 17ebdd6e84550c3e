//! Stable diagnostic codes (`baton::check::unknown_fact`, ...), derived from the diagnostic's
//! message so that every site that reports a problem gets its code without carrying one.
//! A code names the kind of problem; editors and JSON consumers match on it, never on the
//! message text. New messages fall back to the phase code (`baton::check`, `baton::parse`,
//! `baton::source`); give them a row here.

/// (message fragment, code); the first row whose fragment the message contains wins.
const CODES: &[(&str, &str)] = &[
    // Before "cannot read": a provider that cannot read files.
    ("cannot read files", "baton::check::offband_without_file_read"),
    // Loading sources.
    ("no policy file, directory or shipped profile", "baton::source::not_found"),
    ("cannot find base policy", "baton::source::unknown_base"),
    ("`extends` cycle", "baton::source::extends_cycle"),
    ("cannot read", "baton::source::io"),
    ("no `*.policy` files", "baton::source::empty_directory"),
    // Parsing.
    ("nested deeper than", "baton::parse::too_deep"),
    ("is out of range", "baton::parse::number_out_of_range"),
    ("has at most one", "baton::parse::duplicate_block"),
    ("is never closed", "baton::parse::unclosed"),
    ("closes nothing", "baton::parse::unclosed"),
    ("is not an operator", "baton::parse::foreign_operator"),
    ("only defines a `let`", "baton::parse::foreign_operator"),
    ("strings use double quotes", "baton::parse::single_quotes"),
    ("numbers take no unit", "baton::parse::number_unit"),
    ("unknown keyword", "baton::parse::unknown_keyword"),
    ("expected ", "baton::parse::syntax"),
    ("unexpected ", "baton::parse::syntax"),
    // Names.
    ("unknown fact", "baton::check::unknown_fact"),
    ("unknown staleness signal", "baton::check::unknown_signal"),
    ("unknown handoff strategy", "baton::check::unknown_handoff_strategy"),
    ("unknown strategy", "baton::check::unknown_strategy"),
    ("unknown section", "baton::check::unknown_section"),
    ("unknown form", "baton::check::unknown_form"),
    ("unknown item kind", "baton::check::unknown_item_kind"),
    ("unknown grant", "baton::check::unknown_grant"),
    ("unknown provider capability", "baton::check::unknown_capability"),
    ("unknown provider", "baton::check::unknown_provider"),
    ("unknown ", "baton::check::unknown_name"),
    ("cannot be read", "baton::check::out_of_scope"),
    ("is available", "baton::check::out_of_scope"),
    ("is known only after", "baton::check::out_of_scope"),
    ("is a fact name", "baton::check::let_shadows_fact"),
    ("depends on itself", "baton::check::let_cycle"),
    ("`let` values are constants", "baton::check::let_not_constant"),
    ("a `let` holds", "baton::check::let_not_constant"),
    // Types and values.
    ("is not a possible value", "baton::check::bad_enum_value"),
    ("never is", "baton::check::bad_enum_value"),
    ("is never null", "baton::check::constant_comparison"),
    ("needs a bool", "baton::check::type_mismatch"),
    ("must be a bool", "baton::check::type_mismatch"),
    ("cannot compare", "baton::check::type_mismatch"),
    ("needs ints", "baton::check::type_mismatch"),
    ("needs a list", "baton::check::type_mismatch"),
    ("cannot look for", "baton::check::type_mismatch"),
    ("lists hold", "baton::check::type_mismatch"),
    ("takes `true` or `false`", "baton::check::type_mismatch"),
    ("takes a number of characters", "baton::check::type_mismatch"),
    ("takes one of", "baton::check::type_mismatch"),
    ("cannot be null", "baton::check::type_mismatch"),
    ("a list holds", "baton::check::type_mismatch"),
    ("must be at least", "baton::check::out_of_range"),
    ("must be at most", "baton::check::out_of_range"),
    // Structure and safety.
    ("no `strategy { ... }` ladder", "baton::check::no_ladder"),
    ("no `otherwise`", "baton::check::no_otherwise"),
    ("makes no handoff document", "baton::check::handoff_without_document"),
    ("cannot be granted", "baton::check::grant_too_wide"),
    ("weakens the permission model", "baton::check::grant_too_wide"),
    ("hidden reasoning", "baton::check::reasoning_included"),
    ("is declared twice", "baton::check::duplicate_section"),
    ("is set twice for", "baton::check::duplicate_setting"),
    ("has a second entry in this `providers` block", "baton::check::duplicate_setting"),
    ("summarizer command is empty", "baton::check::empty_command"),
    ("asks for template", "baton::check::unknown_template"),
    ("may have no thread to resume", "baton::check::resume_without_thread"),
    ("may have no thread to fork", "baton::check::fork_without_source"),
    // Lints.
    ("unreachable", "baton::lint::unreachable_rule"),
    ("unused `let", "baton::lint::unused_let"),
    ("cannot change any decision", "baton::lint::unused_signal"),
    ("declares a new provider", "baton::lint::provider_typo"),
    // Before "block includes nothing": the extending policy's block that drops the base's.
    ("replaces the block of", "baton::lint::summary_replaces_base"),
    ("block includes nothing", "baton::lint::summary_includes_nothing"),
];

/// The code of a diagnostic with this message.
pub fn code_for(message: &str) -> &'static str {
    CODES
        .iter()
        .find(|(fragment, _)| message.contains(fragment))
        .map(|(_, code)| *code)
        .unwrap_or("baton::check")
}

#[cfg(test)]
mod tests {
    use super::code_for;

    #[test]
    fn codes_follow_the_message() {
        assert_eq!(
            code_for("unknown fact `target.has_thred`"),
            "baton::check::unknown_fact"
        );
        assert_eq!(
            code_for("unknown strategy `full`"),
            "baton::check::unknown_strategy"
        );
        assert_eq!(code_for("unused `let x`"), "baton::lint::unused_let");
        assert_eq!(code_for("something new"), "baton::check");
    }
}
