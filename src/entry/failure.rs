//! The entry text of an open failing command or tool call: what failed, with its exit code,
//! whole, and the last lines of its output in a fence no line of the output can close.

use crate::cut::{code_span, escape_controls, longest_backtick_run, one_line};
use crate::facts::{is_test_command, ItemCtx};
use crate::state::Item;
use unicode_segmentation::UnicodeSegmentation;

/// Lines of output an open failing command keeps (the last ones).
pub const TAIL_LINES: usize = 12;
/// Grapheme clusters one kept output line keeps before it is cut.
pub const LINE_GRAPHEMES: usize = 300;

/// The text of an open failing command or tool call, or `None` when the item is not one.
pub fn open_failure_text(ctx: &ItemCtx, red: &mut crate::redact::Context) -> Option<String> {
    if !ctx.is_open() {
        return None;
    }
    let (head, output) = match ctx.item? {
        Item::Command {
            command,
            exit_code,
            output,
            ..
        } => {
            let what = if is_test_command(command) {
                "Failing test"
            } else {
                "Failing command"
            };
            let code = exit_code.map(|c| format!("exit {c}, ")).unwrap_or_default();
            (
                format!(
                    "{what} {} ({code}run {})",
                    code_span(&one_line(&red.text(&ctx.id, command))),
                    ctx.run
                ),
                output.as_deref(),
            )
        }
        Item::ToolCall {
            tool,
            input,
            output,
            ..
        } => {
            let input = input
                .as_deref()
                .map(|i| format!(" {}", code_span(&one_line(&red.text(&ctx.id, i)))))
                .unwrap_or_default();
            let tool = red.text(&ctx.id, tool);
            (
                format!("Failing tool call {tool}{input} (failed, run {})", ctx.run),
                output.as_deref(),
            )
        }
        _ => return None,
    };
    let output = output.map(|o| red.text(&ctx.id, o));
    Some(match output.as_deref().map(tail).filter(|t| !t.is_empty()) {
        Some(tail) => format!("{head}; last lines of output:\n{tail}"),
        None => head,
    })
}

/// The last [`TAIL_LINES`] non-blank lines of `output`, each cut to [`LINE_GRAPHEMES`]
/// grapheme clusters (the cut says so), fenced with more backticks than any run inside.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let skipped = lines.len().saturating_sub(TAIL_LINES);
    let kept: Vec<String> = lines
        .iter()
        .skip(skipped)
        .map(|l| cut_line(&escape_controls(l)))
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    let longest = kept
        .iter()
        .map(|l| longest_backtick_run(l))
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.saturating_add(1).max(3));
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("({skipped} earlier lines not shown)\n"));
    }
    out.push_str(&fence);
    out.push_str("text\n");
    for l in &kept {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&fence);
    out
}

fn cut_line(line: &str) -> String {
    let graphemes: Vec<&str> = line.graphemes(true).collect();
    if graphemes.len() <= LINE_GRAPHEMES {
        return line.to_string();
    }
    let kept: String = graphemes.iter().take(LINE_GRAPHEMES).copied().collect();
    let cut: usize = graphemes
        .iter()
        .skip(LINE_GRAPHEMES)
        .map(|g| g.chars().count())
        .sum();
    format!("{kept}[... {cut} characters cut ...]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines_in_a_safe_fence() {
        let out: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let t = tail(&format!("{out}has ```` inside\n"));
        assert!(t.starts_with("(9 earlier lines not shown)\n`````text\nline 10\n"));
        assert!(t.ends_with("has ```` inside\n`````"));
    }

    #[test]
    fn long_lines_are_cut_on_grapheme_boundaries() {
        let line = "👨‍👩‍👧".repeat(LINE_GRAPHEMES + 2);
        let cut = cut_line(&line);
        assert!(cut.starts_with(&"👨‍👩‍👧".repeat(LINE_GRAPHEMES)));
        assert!(cut.ends_with("[... 10 characters cut ...]"));
    }
}
