//! A linear pre-scan of YAML text for flow collections (`[...]`, `{...}`) nested absurdly
//! deep. libyaml's scanner (under serde_yaml) takes time quadratic in the flow depth: a 200 KB
//! file of 100,000 nested `[` took 18 s to reject. A state file needs a handful of levels and
//! the deserializer refuses more than 128, so anything past [`MAX_FLOW_DEPTH`] is refused here,
//! at the bracket that crossed the line, before the parser sees it.
//!
//! The scan follows just enough YAML to count only real flow indicators: a bracket opens a
//! flow collection where a value starts (line start, after `: `, `- `, `? `) or inside
//! another flow collection; quoted scalars, comments and block scalars (`|`, `>`) are
//! skipped. A bracket in the middle of a plain scalar (`echo ${a[0]}`) counts for nothing.

/// The deepest flow nesting the scan lets through to the parser.
pub const MAX_FLOW_DEPTH: usize = 1000;

/// The 1-based line and column of the bracket that nests flow collections deeper than
/// [`MAX_FLOW_DEPTH`], if one does.
pub fn too_deep(text: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    // Inside a quoted scalar of a flow collection or value: its quote character.
    let mut quote: Option<char> = None;
    // Inside a block scalar: the indentation of the line that introduced it.
    let mut block_scalar: Option<usize> = None;
    for (li, line) in text.lines().enumerate() {
        let indent = line
            .len()
            .saturating_sub(line.trim_start_matches([' ', '\t']).len());
        if let (Some(owner), None) = (block_scalar, quote) {
            if line.trim().is_empty() || indent > owner {
                continue;
            }
            block_scalar = None;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut value_start = true;
        let mut i = 0usize;
        while let Some(&c) = chars.get(i) {
            let next = chars.get(i.saturating_add(1)).copied();
            if let Some(q) = quote {
                match (q, c) {
                    ('\'', '\'') if next == Some('\'') => i = i.saturating_add(1),
                    ('"', '\\') => i = i.saturating_add(1),
                    (q, c) if q == c => quote = None,
                    _ => {}
                }
                i = i.saturating_add(1);
                continue;
            }
            let spaced = next.is_none_or(|n| n == ' ' || n == '\t');
            match c {
                ' ' | '\t' => {}
                '#' if i == 0
                    || matches!(
                        i.checked_sub(1).and_then(|p| chars.get(p)),
                        Some(' ' | '\t')
                    ) =>
                {
                    break
                }
                '[' | '{' if depth > 0 || value_start => {
                    depth = depth.saturating_add(1);
                    if depth > MAX_FLOW_DEPTH {
                        return Some((li.saturating_add(1), i.saturating_add(1)));
                    }
                    value_start = true;
                }
                ']' | '}' if depth > 0 => {
                    depth = depth.saturating_sub(1);
                    value_start = false;
                }
                '"' | '\'' if depth > 0 || value_start => quote = Some(c),
                ':' | '-' | '?' if spaced => value_start = true,
                ':' if depth > 0 => value_start = true,
                ',' if depth > 0 => value_start = true,
                '|' | '>' if depth == 0 && value_start => {
                    block_scalar = Some(indent);
                    break;
                }
                _ => value_start = false,
            }
            i = i.saturating_add(1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_found_at_the_bracket_that_crosses_the_limit() {
        let text = format!(
            "version: 1\nruns: {}{}\n",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert_eq!(too_deep(&text), Some((2, 7 + MAX_FLOW_DEPTH)));
        let multi = format!("runs:\n{}", "- [\n".repeat(MAX_FLOW_DEPTH + 1));
        assert_eq!(too_deep(&multi), Some((MAX_FLOW_DEPTH + 2, 3)));
    }

    #[test]
    fn nesting_up_to_the_limit_passes() {
        let n = MAX_FLOW_DEPTH;
        let text = format!("runs: {}{}\n", "{a: [".repeat(n / 2), "]}".repeat(n / 2));
        assert_eq!(too_deep(&text), None);
    }

    #[test]
    fn brackets_that_are_not_flow_indicators_count_for_nothing() {
        let many = |s: &str| s.repeat(MAX_FLOW_DEPTH + 10);
        let cases = [
            // In plain scalars, after the value started.
            format!("text: echo ${{a[0]}} {}\n", many("[")),
            many("  - {kind: command, command: \"echo a[\", output: '[[{'}\n"),
            // In quoted scalars, in flow and block context, over several lines.
            format!("text: \"{}\"\n", many("[")),
            format!("text: '{}''{{'\n", many("{")),
            format!("text: \"first line\n  {}\"\nnext: 1\n", many("[")),
            // In comments.
            format!("version: 1 # {}\n", many("[")),
            // In block scalars, whatever their lines start with.
            format!("output: |\n  {}\n\n  more\nnext: [1]\n", many("[")),
            format!("  - output: >-\n      {}\n    next: x\n", many("{")),
        ];
        for text in cases {
            assert_eq!(too_deep(&text), None, "{}", &text[..text.len().min(80)]);
        }
    }
}
