//! `select::compact`, the rule that shortens an entry's text (moved from tests/render.rs).

use rstest::rstest;

#[rstest]
#[case("  a \n\t b  ", 240, "a b")]
#[case(&"x".repeat(240), 240, &"x".repeat(240))]
#[case(&"x".repeat(241), 240, &format!("{}...", "x".repeat(237)))]
#[case(&"é".repeat(241), 240, &format!("{}...", "é".repeat(237)))]
#[case(&format!("{}  {}", "a".repeat(236), "bbbb"), 240, &format!("{} ...", "a".repeat(236)))]
fn compact_text_rule(#[case] input: &str, #[case] max: usize, #[case] expected: &str) {
    assert_eq!(baton::select::compact(input, max), expected);
}
