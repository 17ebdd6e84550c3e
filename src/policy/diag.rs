//! Diagnostics: `file:line:col: error: message`, the source line, a caret under the span,
//! and an optional help line ("did you mean ...").

use super::ast::Span;
use serde::Serialize;
use std::fmt;

/// One policy source file held in memory.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name shown in diagnostics and traces (`default.policy`, `policies/x.policy`).
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A rendered diagnostic: everything needed to print it, no reference to the sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// The source line and the caret line under it (empty when there is no span).
    #[serde(skip)]
    pub snippet: Vec<String>,
}

impl Diagnostic {
    pub fn new(
        sources: &[Source],
        severity: Severity,
        span: Span,
        message: impl Into<String>,
    ) -> Diagnostic {
        let (file, snippet) = match sources.get(span.source) {
            Some(src) => (src.name.clone(), snippet(&src.text, span)),
            None => (String::from("<policy>"), Vec::new()),
        };
        Diagnostic {
            severity,
            file,
            line: span.line.max(1),
            col: span.col.max(1),
            message: message.into(),
            help: None,
            snippet,
        }
    }

    /// A diagnostic about a whole file (cannot read it, ...).
    pub fn file_level(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            line: 1,
            col: 1,
            message: message.into(),
            help: None,
            snippet: Vec::new(),
        }
    }

    pub fn with_help(mut self, help: Option<String>) -> Diagnostic {
        self.help = help;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}:{}:{}: {sev}: {}",
            self.file, self.line, self.col, self.message
        )?;
        if self.snippet.len() == 2 {
            let num = self.line.to_string();
            let pad = " ".repeat(num.len());
            write!(
                f,
                "\n{pad} |\n{num} | {}\n{pad} | {}",
                self.snippet[0], self.snippet[1]
            )?;
        }
        if let Some(h) = &self.help {
            write!(f, "\n  = help: {h}")?;
        }
        Ok(())
    }
}

/// The source line of `span` and a caret line under the span (limited to that line).
fn snippet(text: &str, span: Span) -> Vec<String> {
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = text[start..]
        .find('\n')
        .map(|i| start + i)
        .unwrap_or(text.len());
    let line = &text[line_start..line_end];
    let line = line.trim_end_matches('\r');
    // Long lines are cut so that a diagnostic stays readable.
    let lead_chars = text[line_start..start].chars().count();
    let end = span.end.clamp(start, line_end);
    let width = text[start..end].chars().count().max(1);
    let shown: String = line.chars().take(200).collect();
    let caret_lead: String = text[line_start..start]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .take(200)
        .collect();
    let width = if lead_chars >= 200 {
        1
    } else {
        width.min(200 - lead_chars).max(1)
    };
    vec![shown, format!("{caret_lead}{}", "^".repeat(width))]
}

/// A set of diagnostics from one operation: errors make it fail, warnings ride along.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl PolicyError {
    pub fn single(d: Diagnostic) -> PolicyError {
        PolicyError {
            diagnostics: vec![d],
        }
    }
}
