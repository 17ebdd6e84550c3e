//! Diagnostics: `file:line:col: error: message`, the source line, a caret under the span,
//! and an optional help line ("did you mean ...").
//!
//! Each diagnostic also carries its structure: a stable code (`baton::check::unknown_fact`,
//! see [`super::codes`]), the byte range in its source, and the source text itself, so that
//! it implements [`miette::Diagnostic`] (labels, help, code) for graphical rendering and
//! serialises with file, range, line/column, code, message and help for `--json`.

use super::ast::Span;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// A byte range in a policy source (`start..end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ByteRange {
    /// The first byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The source a diagnostic points into, for miette's snippet rendering. It is context, not
/// identity: two diagnostics compare equal whatever their source texts are.
///
/// It shares the text of its [`Source`] (one `Arc<str>`): a policy with thousands of
/// diagnostics holds its text once, not once per diagnostic (issue 27).
#[derive(Clone)]
pub struct SourceText(miette::NamedSource<Arc<str>>);

impl SourceText {
    /// The shared text (the same allocation as the [`Source`]'s `text`).
    pub fn text(&self) -> &Arc<str> {
        self.0.inner()
    }
}

impl fmt::Debug for SourceText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceText({})", self.0.name())
    }
}

impl PartialEq for SourceText {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for SourceText {}

/// One policy source file held in memory.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name shown in diagnostics and traces (`default.policy`, `policies/x.policy`).
    pub name: String,
    /// The text, shared with every diagnostic that points into it.
    pub text: Arc<str>,
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Severity {
    /// The policy does not load (`error`).
    Error,
    /// A lint: the policy loads, but something in it is probably wrong (`warning`).
    Warning,
}

/// A rendered diagnostic: everything needed to print it, no reference to the sources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The source's name (`default.policy`, `policies/team.policy`).
    pub file: String,
    /// 1-based line (1 for a problem about a whole file).
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// What is wrong, e.g. ``unknown fact `target.modle` ``.
    pub message: String,
    /// How to fix it, e.g. ``did you mean `target.model`?``; `None` when there is no hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// The stable code of the problem (`baton::check::unknown_fact`, ...).
    pub code: &'static str,
    /// The byte range in the source (none for a problem about a whole file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<ByteRange>,
    /// The source line and the caret line under it (empty when there is no span).
    #[serde(skip)]
    pub snippet: Vec<String>,
    /// The source text, for graphical rendering.
    #[serde(skip)]
    pub source: Option<SourceText>,
    /// Secondary locations the problem involves (where a `let` was defined, where an
    /// unclosed `{` opened, ...), each with what it shows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Label>,
}

/// A secondary location of a [`Diagnostic`]: file, line, column, byte range and what it shows
/// ("`limit` is defined here").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Label {
    /// The file the location is in.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// The byte range in that file.
    pub range: ByteRange,
    /// What the location shows.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic at `span` of `sources`, with its snippet, byte range and stable code.
    pub fn new(
        sources: &[Source],
        severity: Severity,
        span: Span,
        message: impl Into<String>,
    ) -> Diagnostic {
        let (file, snippet, source, range) = match sources.get(span.source) {
            Some(src) => {
                let start = span.start.min(src.text.len());
                let range = ByteRange {
                    start,
                    end: span.end.clamp(start, src.text.len()),
                };
                let named = miette::NamedSource::new(src.name.clone(), Arc::clone(&src.text));
                (
                    src.name.clone(),
                    snippet(&src.text, span),
                    Some(SourceText(named)),
                    Some(range),
                )
            }
            None => (String::from("<policy>"), Vec::new(), None, None),
        };
        let message = message.into();
        Diagnostic {
            severity,
            file,
            line: span.line.max(1),
            col: span.col.max(1),
            code: super::codes::code_for(&message),
            message,
            help: None,
            range,
            snippet,
            source,
            labels: Vec::new(),
        }
    }

    /// A diagnostic about a whole file (cannot read it, ...).
    pub fn file_level(file: &str, message: impl Into<String>) -> Diagnostic {
        let message = message.into();
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            line: 1,
            col: 1,
            code: super::codes::code_for(&message),
            message,
            help: None,
            range: None,
            snippet: Vec::new(),
            source: None,
            labels: Vec::new(),
        }
    }

    /// Set the help line.
    pub fn with_help(mut self, help: Option<String>) -> Diagnostic {
        self.help = help;
        self
    }

    /// Add a secondary location (`span` in `sources`) with what it shows; a span outside
    /// `sources` is left out.
    pub fn with_label(mut self, sources: &[Source], span: Span, message: impl Into<String>) -> Diagnostic {
        if let Some(src) = sources.get(span.source) {
            let start = span.start.min(src.text.len());
            self.labels.push(Label {
                file: src.name.clone(),
                line: span.line.max(1),
                col: span.col.max(1),
                range: ByteRange {
                    start,
                    end: span.end.clamp(start, src.text.len()),
                },
                message: message.into(),
            });
        }
        self
    }

    /// Whether its severity is [`Severity::Error`].
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
        if let [source, caret] = self.snippet.as_slice() {
            let num = self.line.to_string();
            let pad = " ".repeat(num.len());
            write!(f, "\n{pad} |\n{num} | {source}\n{pad} | {caret}")?;
        }
        for l in &self.labels {
            write!(f, "\n  = note: {}:{}:{}: {}", l.file, l.line, l.col, l.message)?;
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
    let line_start = text[..start]
        .rfind('\n')
        .map(|i| i.saturating_add(1))
        .unwrap_or(0);
    let line_end = text[start..]
        .find('\n')
        .map(|i| start.saturating_add(i))
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
        width.min(200usize.saturating_sub(lead_chars)).max(1)
    };
    vec![shown, format!("{caret_lead}{}", "^".repeat(width))]
}

/// A set of diagnostics from one operation: errors make it fail, warnings ride along.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// Every diagnostic, errors first.
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
    /// An error of one diagnostic.
    pub fn single(d: Diagnostic) -> PolicyError {
        PolicyError {
            diagnostics: vec![d],
        }
    }
}

impl std::error::Error for Diagnostic {}

impl miette::Diagnostic for Diagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'a>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source
            .as_ref()
            .map(|s| &s.0 as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let range = self.range?;
        self.source.as_ref()?;
        let label = miette::LabeledSpan::new_primary_with_span(
            None,
            (range.start, range.end.saturating_sub(range.start)),
        );
        // Secondary labels in the same file; miette draws one source per report.
        let secondary = self
            .labels
            .iter()
            .filter(|l| l.file == self.file)
            .map(|l| {
                miette::LabeledSpan::new_with_span(
                    Some(l.message.clone()),
                    (l.range.start, l.range.end.saturating_sub(l.range.start)),
                )
            });
        Some(Box::new(std::iter::once(label).chain(secondary)))
    }
}

/// A diagnostic whose `Display` is its message alone, for miette's graphical handler (which
/// draws the location, snippet, code and help itself).
#[cfg(any(feature = "unstable", feature = "cli"))]
#[derive(Debug)]
pub struct Headline<'a>(pub &'a Diagnostic);

#[cfg(any(feature = "unstable", feature = "cli"))]
impl fmt::Display for Headline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.source {
            // The snippet header names the file; without one, the headline does.
            Some(_) => f.write_str(&self.0.message),
            None => write!(f, "{}: {}", self.0.file, self.0.message),
        }
    }
}

#[cfg(any(feature = "unstable", feature = "cli"))]
impl std::error::Error for Headline<'_> {}

#[cfg(any(feature = "unstable", feature = "cli"))]
impl miette::Diagnostic for Headline<'_> {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.code()
    }
    fn severity(&self) -> Option<miette::Severity> {
        miette::Diagnostic::severity(self.0)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        miette::Diagnostic::help(self.0)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.0.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.0.labels()
    }
}

impl miette::Diagnostic for PolicyError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.diagnostics
            .first()
            .map(|d| Box::new(d.code) as Box<dyn fmt::Display + 'a>)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.diagnostics
                .iter()
                .map(|d| d as &dyn miette::Diagnostic),
        ))
    }
}
