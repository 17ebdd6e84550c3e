//! The editor features of a `*.policy` document: diagnostics from the checker, hover,
//! completion, definitions and references, formatting and "did you mean" fixes.
//!
//! Diagnostics come from the same loader and checker as `baton check` (with `extends`, and
//! with the file's directory composed as a set, as `baton explain --policy DIR` loads it);
//! the open buffers are read instead of the disk. Everything else works on a tolerant token
//! scan ([`super::scan`]), so it keeps working on half-typed text the parser refuses.

use super::catalog::{self, fact_hover, lookup};
use super::scan::{self, Kind, Token};
use super::text::{line_range, range_of, whole};
use crate::facts::{Fact, Type};
use crate::policy::check::BUILTIN_SECTIONS;
use crate::policy::{self, Policy, Severity};
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Diagnostic,
    DiagnosticRelatedInformation, DiagnosticSeverity, Documentation, Location, MarkupContent,
    MarkupKind, NumberOrString, Range, TextEdit, Url,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The open policy buffers, by path: read instead of the files.
pub type Overlay = BTreeMap<PathBuf, String>;

/// The result of checking one document.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    pub diagnostics: Vec<Diagnostic>,
    /// The compiled policy of the document alone, when it checks (for `let` values).
    pub policy: Option<Policy>,
}

/// The "did you mean" replacement a diagnostic's help offers, if any: `` `x` `` or `"x"`.
pub fn suggestion(help: &str) -> Option<(char, String)> {
    let rest = help.split("did you mean ").nth(1)?;
    let q = rest.chars().next().filter(|c| *c == '`' || *c == '"')?;
    let body = rest.get(1..)?;
    let end = body.find(q)?;
    Some((q, body.get(..end)?.to_string()))
}

fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Check a policy document. `path` is its file (none for an unsaved, untitled buffer);
/// `overlay` holds every open policy buffer, this one included.
pub fn check(uri: &Url, path: Option<&Path>, text: &str, overlay: &Overlay) -> Checked {
    let Some(path) = path else {
        let name = uri.path().rsplit('/').next().unwrap_or("untitled.policy");
        let result = policy::load_text(name, text);
        return convert(uri, None, text, result, "");
    };
    let spec = path.display().to_string();
    let alone = policy::load_overlay(&spec, overlay);
    let mut checked = convert(uri, Some(path), text, alone, "");
    // The directory set: every `*.policy` file of the directory composed in name order.
    if let Some(dir) = path.parent() {
        let siblings = policy::source::policy_files(dir).unwrap_or_default();
        let listed = siblings.iter().any(|p| same_file(p, path));
        if siblings.len() >= 2 && listed {
            let set = policy::load_overlay(&dir.display().to_string(), overlay);
            let extra = convert(
                uri,
                Some(path),
                text,
                set,
                " (when the directory is composed as one policy set)",
            );
            // Only errors: a directory of independent profiles (like the shipped `policies/`)
            // composes with lints that are artefacts of composing them, but a set that does
            // not load is one `baton explain --policy DIR` would refuse.
            let errors = extra
                .diagnostics
                .into_iter()
                .filter(|d| d.severity == Some(DiagnosticSeverity::ERROR));
            for d in errors {
                let dup = checked
                    .diagnostics
                    .iter()
                    .any(|e| e.range == d.range && d.message.starts_with(e.message.as_str()));
                if !dup {
                    checked.diagnostics.push(d);
                }
            }
        }
    }
    checked
}

fn convert(
    uri: &Url,
    path: Option<&Path>,
    text: &str,
    result: Result<Policy, policy::PolicyError>,
    note: &str,
) -> Checked {
    let (diags, policy) = match result {
        Ok(p) => (p.warnings.clone(), Some(p)),
        Err(e) => (e.diagnostics, None),
    };
    let diagnostics = diags
        .iter()
        .map(|d| to_lsp(uri, path, text, d, note))
        .collect();
    Checked {
        diagnostics,
        policy,
    }
}

/// The range of the first `extends "..."` string of a document (where a problem in a base is
/// shown), else the start of the document.
fn extends_range(text: &str) -> Range {
    let code = scan::code(&scan::tokens(text));
    let found = scan::pairs(&code)
        .find(|(w0, w1)| w0.text(text) == "extends" && w1.kind == Kind::Str)
        .map(|(_, w1)| range_of(text, w1.start, w1.end));
    found.unwrap_or_default()
}

fn to_lsp(
    uri: &Url,
    path: Option<&Path>,
    text: &str,
    d: &policy::Diagnostic,
    note: &str,
) -> Diagnostic {
    let here = match path {
        Some(p) => same_file(Path::new(&d.file), p),
        None => true,
    };
    let (range, message) = if here {
        let range = match d.range {
            Some(r) => range_of(text, r.start, r.end),
            None => line_range(text, d.line, d.col),
        };
        (range, format!("{}{note}", d.message))
    } else {
        (
            extends_range(text),
            format!("in {}:{}:{}: {}{note}", d.file, d.line, d.col, d.message),
        )
    };
    let fix = d
        .help
        .as_deref()
        .and_then(suggestion)
        .filter(|_| here)
        .map(|(q, s)| {
            // A string literal's range takes its quotes.
            let quoted = d
                .range
                .and_then(|r| text.get(r.start..r.end))
                .is_some_and(|t| t.starts_with('"'));
            if q == '"' && quoted {
                format!("\"{s}\"")
            } else {
                s
            }
        });
    Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        source: Some("baton".into()),
        message,
        related_information: related(uri, path, text, d, range),
        data: match (&d.help, fix) {
            (Some(h), Some(f)) => Some(serde_json::json!({ "help": h, "fix": f })),
            (Some(h), None) => Some(serde_json::json!({ "help": h })),
            _ => None,
        },
        ..Diagnostic::default()
    }
}

/// The related information of a diagnostic: its help, and each secondary label (where a
/// `let` was defined, where an unclosed `{` opened) at its own location.
fn related(
    uri: &Url,
    path: Option<&Path>,
    text: &str,
    d: &policy::Diagnostic,
    range: Range,
) -> Option<Vec<DiagnosticRelatedInformation>> {
    let mut out = Vec::new();
    if let Some(h) = &d.help {
        out.push(DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), range),
            message: format!("help: {h}"),
        });
    }
    for l in &d.labels {
        let here = match path {
            Some(p) => same_file(Path::new(&l.file), p),
            None => l.file == d.file,
        };
        let location = if here {
            Location::new(uri.clone(), range_of(text, l.range.start, l.range.end))
        } else {
            let Some(other) = std::fs::canonicalize(&l.file)
                .ok()
                .and_then(|p| Url::from_file_path(p).ok())
            else {
                continue;
            };
            let limit = crate::policy::source::MAX_POLICY_BYTES;
            let other_text =
                crate::input::read_to_string(Path::new(&l.file), limit, "").unwrap_or_default();
            Location::new(other, range_of(&other_text, l.range.start, l.range.end))
        };
        out.push(DiagnosticRelatedInformation {
            location,
            message: l.message.clone(),
        });
    }
    (!out.is_empty()).then_some(out)
}

/// Hover text (markdown) and the range it is about.
pub fn hover(
    text: &str,
    offset: usize,
    path: Option<&Path>,
    overlay: &Overlay,
    policy: Option<&Policy>,
) -> Option<(String, Range)> {
    let toks = scan::tokens(text);
    let code = scan::code(&toks);
    let i = scan::at(&code, offset)?;
    let tok = code.get(i)?;
    let word = tok.text(text);
    let range = range_of(text, tok.start, tok.end);
    let prev = i
        .checked_sub(1)
        .and_then(|j| code.get(j))
        .map(|t| t.text(text))
        .unwrap_or("");
    if tok.kind == Kind::Str {
        if prev == "extends" {
            let target = tok.unquoted(text);
            let md = match resolve_extends(path, target) {
                Some(p) => format!("Extends the policy file `{}`.", p.display()),
                None if policy::source::shipped_names()
                    .contains(&target.trim_end_matches(".policy")) =>
                {
                    format!("Extends the shipped profile `{target}` (embedded in baton).")
                }
                None => format!("No policy file or shipped profile named `{target}`."),
            };
            return Some((md, range));
        }
        return None;
    }
    if tok.kind != Kind::Word {
        return None;
    }
    if let Some(d) = Fact::by_name(word) {
        return Some((fact_hover(d), range));
    }
    // A built-in redaction rule's id (`disable github-token`): the word with its hyphens.
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let id_start = text
        .get(..tok.start)
        .and_then(|b| b.rfind(|c: char| !is_id(c)).map(|i| i.saturating_add(1)))
        .unwrap_or(0);
    let id_end = text
        .get(tok.end..)
        .and_then(|a| {
            a.find(|c: char| !is_id(c))
                .map(|i| tok.end.saturating_add(i))
        })
        .unwrap_or(text.len());
    if let Some(b) = text
        .get(id_start..id_end)
        .and_then(crate::redact::rules::builtin)
    {
        return Some((redaction_rule_hover(b), range_of(text, id_start, id_end)));
    }
    if let Some(d) = Fact::by_cap_key(word).filter(|_| in_provider_entry(text, &code, i)) {
        return Some((catalog::cap_hover(d), range));
    }
    if let Some(sig) = word.strip_prefix("stale.") {
        let def = find_decl(text, path, overlay, "stale", sig)?;
        return Some((
            format!("Staleness signal `{sig}`:\n```policy\n{}\n```", def.1),
            range,
        ));
    }
    if prev == "into" || prev == "section" {
        return section_title(text, word, policy)
            .map(|t| (format!("Section `{word}`: \"{t}\""), range));
    }
    if (prev == "include" || prev == "exclude") && crate::state::ITEM_KINDS.contains(&word) {
        return Some((
            format!("Item kind `{word}` (`item.kind == \"{word}\"`)."),
            range,
        ));
    }
    if prev == "as" {
        if let Some(m) = lookup(catalog::FORMS, word) {
            return Some((format!("Form `{word}`: {m}"), range));
        }
    }
    if let Some(m) = lookup(catalog::STRATEGIES, word) {
        return Some((format!("Strategy `{word}`: {m}"), range));
    }
    if let Some(m) = lookup(catalog::HANDOFF_STRATEGIES, word) {
        return Some((format!("Handoff strategy `{word}`: {m}"), range));
    }
    if let Some((_, def, _)) = find_decl(text, path, overlay, "let", word) {
        let value = policy
            .and_then(|p| p.lets.get(word))
            .and_then(|v| serde_json::to_string(v).ok());
        let md = match value {
            Some(v) => format!("`let {word}` = `{v}`\n```policy\n{def}\n```"),
            None => format!("`let {word}`\n```policy\n{def}\n```"),
        };
        return Some((md, range));
    }
    if let Some(m) = lookup(catalog::KEYWORDS, word) {
        return Some((m.to_string(), range));
    }
    None
}

fn section_title(text: &str, name: &str, policy: Option<&Policy>) -> Option<String> {
    let code = scan::code(&scan::tokens(text));
    for (w0, w1, w2) in scan::triples(&code) {
        if w0.text(text) == "section" && w1.text(text) == name && w2.kind == Kind::Str {
            return Some(w2.unquoted(text).to_string());
        }
    }
    if let Some(t) = policy
        .and_then(|p| p.summary.as_ref())
        .and_then(|s| s.sections.iter().find(|(n, _)| n == name))
    {
        return Some(t.1.clone());
    }
    BUILTIN_SECTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| format!("{t} (built in)"))
}

/// Where `extends "target"` of the file at `path` points, when it is a file.
pub fn resolve_extends(path: Option<&Path>, target: &str) -> Option<PathBuf> {
    let c = path?.parent()?.join(target);
    c.is_file().then_some(c)
}

/// The text of a file: the open buffer when there is one, else the disk.
fn read(path: &Path, overlay: &Overlay) -> Option<String> {
    overlay
        .iter()
        .find(|(p, _)| same_file(p, path))
        .map(|(_, t)| t.clone())
        .or_else(|| {
            crate::input::read_to_string(path, crate::policy::source::MAX_POLICY_BYTES, "").ok()
        })
}

/// The document and its bases (files only, through `extends`), nearest first, each with its
/// text; `None` path for the document itself when it has no file.
fn chain(text: &str, path: Option<&Path>, overlay: &Overlay) -> Vec<(Option<PathBuf>, String)> {
    let mut out = vec![(path.map(Path::to_path_buf), text.to_string())];
    let mut seen: BTreeSet<PathBuf> = path.into_iter().map(Path::to_path_buf).collect();
    let mut i = 0;
    while let Some((p, t)) = out.get(i).cloned() {
        i = i.saturating_add(1);
        let code = scan::code(&scan::tokens(&t));
        for (w0, w1) in scan::pairs(&code) {
            if w0.text(&t) == "extends" && w1.kind == Kind::Str {
                if let Some(base) = resolve_extends(p.as_deref(), w1.unquoted(&t)) {
                    let key = std::fs::canonicalize(&base).unwrap_or(base.clone());
                    if seen.insert(key) && out.len() < 16 {
                        if let Some(bt) = read(&base, overlay) {
                            out.push((Some(base), bt));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The declaration `KEYWORD NAME` (`let x`, `section risks`, `stale big`) nearest in the
/// document or its bases: (file, its line as written, name range in that file's text, text).
fn find_decl(
    text: &str,
    path: Option<&Path>,
    overlay: &Overlay,
    keyword: &str,
    name: &str,
) -> Option<(Option<PathBuf>, String, Range)> {
    for (p, t) in chain(text, path, overlay) {
        let code = scan::code(&scan::tokens(&t));
        for (w0, w1) in scan::pairs(&code) {
            if w0.text(&t) == keyword && w1.text(&t) == name && w1.kind == Kind::Word {
                let line_start = t
                    .get(..w0.start)
                    .and_then(|s| s.rfind('\n'))
                    .map(|i| i.saturating_add(1))
                    .unwrap_or(0);
                let line_end = t
                    .get(w1.end..)
                    .and_then(|s| s.find('\n'))
                    .map(|i| w1.end.saturating_add(i))
                    .unwrap_or(t.len());
                let line = t.get(line_start..line_end).unwrap_or("").trim().to_string();
                return Some((p, line, range_of(&t, w1.start, w1.end)));
            }
        }
    }
    None
}

fn location(uri: &Url, file: Option<PathBuf>, range: Range) -> Option<Location> {
    let target = match file {
        Some(p) => Url::from_file_path(&p).ok()?,
        None => uri.clone(),
    };
    Some(Location::new(target, range))
}

/// What a name at the cursor is, for definitions and references.
enum Symbol {
    Let(String),
    Section(String),
    Signal(String),
    Extends(String),
}

fn symbol_at(text: &str, offset: usize) -> Option<Symbol> {
    let code = scan::code(&scan::tokens(text));
    let i = scan::at(&code, offset)?;
    let tok = code.get(i)?;
    let word = tok.text(text);
    let prev = i
        .checked_sub(1)
        .and_then(|j| code.get(j))
        .map(|t| t.text(text))
        .unwrap_or("");
    match tok.kind {
        Kind::Str if prev == "extends" => Some(Symbol::Extends(tok.unquoted(text).to_string())),
        Kind::Word if prev == "into" || prev == "section" => Some(Symbol::Section(word.into())),
        Kind::Word if prev == "stale" => Some(Symbol::Signal(word.into())),
        Kind::Word if word.starts_with("stale.") => {
            Some(Symbol::Signal(word.trim_start_matches("stale.").into()))
        }
        Kind::Word
            if !word.contains('.')
                && !word.starts_with(|c: char| c.is_ascii_digit())
                && Fact::by_name(word).is_none() =>
        {
            Some(Symbol::Let(word.into()))
        }
        _ => None,
    }
}

/// Go to definition: a `let`, a section declaration, a staleness signal, an `extends` base.
pub fn definition(
    uri: &Url,
    text: &str,
    offset: usize,
    path: Option<&Path>,
    overlay: &Overlay,
) -> Vec<Location> {
    let found = match symbol_at(text, offset) {
        Some(Symbol::Let(n)) => find_decl(text, path, overlay, "let", &n),
        Some(Symbol::Section(n)) => find_decl(text, path, overlay, "section", &n),
        Some(Symbol::Signal(n)) => find_decl(text, path, overlay, "stale", &n),
        Some(Symbol::Extends(target)) => {
            return resolve_extends(path, &target)
                .and_then(|p| location(uri, Some(p), Range::default()))
                .into_iter()
                .collect()
        }
        None => None,
    };
    found
        .and_then(|(p, _, r)| location(uri, p, r))
        .into_iter()
        .collect()
}

/// The documents references are searched in: this one, its bases, and the other policy files
/// of its directory (which compose with it as a set).
fn scope(text: &str, path: Option<&Path>, overlay: &Overlay) -> Vec<(Option<PathBuf>, String)> {
    let mut docs = chain(text, path, overlay);
    if let Some(dir) = path.and_then(Path::parent) {
        for f in policy::source::policy_files(dir).unwrap_or_default() {
            let known = docs
                .iter()
                .any(|(p, _)| p.as_deref().is_some_and(|p| same_file(p, &f)));
            if !known {
                if let Some(t) = read(&f, overlay) {
                    docs.push((Some(f), t));
                }
            }
        }
    }
    docs
}

/// Find references: every use (and, when asked, the declaration) of the name at the cursor.
pub fn references(
    uri: &Url,
    text: &str,
    offset: usize,
    path: Option<&Path>,
    overlay: &Overlay,
    include_declaration: bool,
) -> Vec<Location> {
    let Some(sym) = symbol_at(text, offset) else {
        return Vec::new();
    };
    let extends_target = match &sym {
        Symbol::Extends(t) => resolve_extends(path, t).and_then(|p| std::fs::canonicalize(p).ok()),
        _ => None,
    };
    let mut out = Vec::new();
    for (p, t) in scope(text, path, overlay) {
        let code = scan::code(&scan::tokens(&t));
        for (i, tok) in code.iter().enumerate() {
            let prev = i
                .checked_sub(1)
                .and_then(|j| code.get(j))
                .map(|x| x.text(&t))
                .unwrap_or("");
            let w = tok.text(&t);
            let (hit, decl) = match &sym {
                Symbol::Let(n) => (
                    tok.kind == Kind::Word
                        && w == n
                        && !matches!(
                            prev,
                            "into" | "section" | "include" | "exclude" | "as" | "handoff" | "stale"
                        ),
                    prev == "let",
                ),
                Symbol::Section(n) => (
                    w == n && (prev == "into" || prev == "section"),
                    prev == "section",
                ),
                Symbol::Signal(n) => (
                    (w == n && prev == "stale") || w.strip_prefix("stale.") == Some(n),
                    prev == "stale",
                ),
                Symbol::Extends(_) => {
                    let here = tok.kind == Kind::Str
                        && prev == "extends"
                        && resolve_extends(p.as_deref(), tok.unquoted(&t))
                            .and_then(|b| std::fs::canonicalize(b).ok())
                            .is_some_and(|b| Some(b) == extends_target);
                    (here, false)
                }
            };
            if hit && (include_declaration || !decl) {
                if let Some(l) = location(uri, p.clone(), range_of(&t, tok.start, tok.end)) {
                    out.push(l);
                }
            }
        }
    }
    out
}

/// Whole-document formatting through `baton fmt`; `None` when the text does not parse.
pub fn format(name: &str, text: &str) -> Option<Vec<TextEdit>> {
    let formatted = crate::fmt::format_source(name, text).ok()?;
    if formatted == text {
        return Some(Vec::new());
    }
    Some(vec![TextEdit::new(whole(text), formatted)])
}

fn item(
    label: &str,
    kind: CompletionItemKind,
    detail: Option<String>,
    doc: Option<String>,
    range: Range,
) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail,
        documentation: doc.map(|d| {
            Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: d,
            })
        }),
        text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
            range,
            label.to_string(),
        ))),
        ..CompletionItem::default()
    }
}

/// Words that leave a rule open: the next line continues it.
const OPEN_END: &[&str] = &[
    "and", "or", "not", "in", "when", "because", "handoff", "into", "as", "=", "==", "!=", "<",
    "<=", ">", ">=", "+", "-", ",", "[", "(",
];

/// Completion at `offset`: the candidates of the first context the cursor is in (a comment,
/// a string, the word after a keyword, a `providers` entry, a dotted name, a block's field,
/// the start of a rule, an expression).
pub fn completion(
    text: &str,
    offset: usize,
    path: Option<&Path>,
    overlay: &Overlay,
) -> Vec<CompletionItem> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset = offset.saturating_sub(1);
    }
    let toks = scan::tokens(text);
    // Inside a comment: nothing.
    if toks
        .iter()
        .any(|t| t.kind == Kind::Comment && t.start < offset && offset <= t.end)
    {
        return Vec::new();
    }
    let code = scan::code(&toks);
    // Inside a string: providers, enum values, base names.
    if let Some(i) = code.iter().position(|t| {
        let s = t.text(text);
        let closed = s.len() >= 2 && s.ends_with('"');
        t.kind == Kind::Str && t.start < offset && (offset < t.end || (offset == t.end && !closed))
    }) {
        let s = code.get(i).copied();
        return s
            .map(|s| string_completion(text, &code, i, s, offset, path))
            .unwrap_or_default();
    }
    let before = text.get(..offset).unwrap_or("");
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .last()
        .map(|(i, _)| i)
        .unwrap_or(offset);
    let idx = code
        .iter()
        .position(|t| t.start >= start)
        .unwrap_or(code.len());
    let prev = idx.checked_sub(1).and_then(|j| code.get(j));
    let at = Cursor {
        text,
        code: &code,
        idx,
        start,
        prefix: text.get(start..offset).unwrap_or(""),
        prev,
        prev_word: prev.map(|t| t.text(text)).unwrap_or(""),
        range: range_of(text, start, offset),
        path,
        overlay,
    };
    after_word(&at)
        .or_else(|| provider_entry(&at))
        .or_else(|| dotted(&at))
        .or_else(|| {
            let block = scan::block_at(text, &code, idx);
            block_field(&at, block).or_else(|| rule_start(&at, block))
        })
        .unwrap_or_else(|| expression(&at))
}

/// Where completion was asked: the word being typed and the code before it.
struct Cursor<'a> {
    text: &'a str,
    code: &'a [Token],
    /// The index in `code` of the first token at or after the word being typed.
    idx: usize,
    /// Where the word being typed starts.
    start: usize,
    /// The word being typed, up to the cursor.
    prefix: &'a str,
    /// The code token before the word.
    prev: Option<&'a Token>,
    /// Its text (empty at the start of the document).
    prev_word: &'a str,
    /// The range a candidate replaces.
    range: Range,
    path: Option<&'a Path>,
    overlay: &'a Overlay,
}

/// One candidate of `kind` per `(name, documentation)` of `table`.
fn push_table(
    out: &mut Vec<CompletionItem>,
    table: &[(&str, &str)],
    kind: CompletionItemKind,
    what: &str,
    range: Range,
) {
    for (n, m) in table {
        out.push(item(
            n,
            kind,
            Some(what.to_string()),
            Some(m.to_string()),
            range,
        ));
    }
}

/// After a keyword that takes a value of one kind: item kinds, sections, forms, strategies.
fn after_word(at: &Cursor<'_>) -> Option<Vec<CompletionItem>> {
    let (text, code, range) = (at.text, at.code, at.range);
    let mut out = Vec::new();
    match at.prev_word {
        "include" | "exclude" => {
            for k in crate::state::ITEM_KINDS {
                out.push(item(
                    k,
                    CompletionItemKind::ENUM_MEMBER,
                    Some("item kind".into()),
                    None,
                    range,
                ));
            }
            Some(out)
        }
        "into" => {
            let mut names: Vec<(String, String)> = BUILTIN_SECTIONS
                .iter()
                .map(|(n, t)| (n.to_string(), format!("\"{t}\" (built in)")))
                .collect();
            for (w0, w1, w2) in scan::triples(code) {
                if w0.text(text) == "section" && w1.kind == Kind::Word {
                    let n = w1.text(text).to_string();
                    let t = format!("\"{}\"", w2.unquoted(text));
                    match names.iter_mut().find(|(m, _)| *m == n) {
                        Some(e) => e.1 = t,
                        None => names.push((n, t)),
                    }
                }
            }
            for (n, t) in names {
                out.push(item(
                    &n,
                    CompletionItemKind::MODULE,
                    Some(format!("section {t}")),
                    None,
                    range,
                ));
            }
            Some(out)
        }
        "as" => {
            push_table(
                &mut out,
                catalog::FORMS,
                CompletionItemKind::ENUM_MEMBER,
                "form",
                range,
            );
            Some(out)
        }
        "handoff" => {
            push_table(
                &mut out,
                catalog::HANDOFF_STRATEGIES,
                CompletionItemKind::ENUM_MEMBER,
                "handoff strategy",
                range,
            );
            Some(out)
        }
        _ => None,
    }
}

/// Inside a `providers` entry: a capability's values after its key, `force` after a value,
/// else the next capability.
fn provider_entry(at: &Cursor<'_>) -> Option<Vec<CompletionItem>> {
    let (text, code, idx, range) = (at.text, at.code, at.idx, at.range);
    if !in_provider_entry(text, code, idx) {
        return None;
    }
    let mut out = Vec::new();
    let before = |k: usize| {
        idx.checked_sub(k)
            .and_then(|j| code.get(j))
            .map(|t| t.text(text))
            .unwrap_or("")
    };
    if let Some(d) = Fact::by_cap_key(before(1)) {
        let values: Vec<String> = match d.ty {
            Type::Bool => vec!["true".into(), "false".into()],
            Type::Enum(vs) => vs.iter().map(|v| v.to_string()).collect(),
            _ => Vec::new(),
        };
        for v in values {
            out.push(item(
                &v,
                CompletionItemKind::ENUM_MEMBER,
                Some(format!("a value of {}", d.name)),
                None,
                range,
            ));
        }
        return Some(out);
    }
    if Fact::by_cap_key(before(2)).is_some() {
        let doc = lookup(catalog::KEYWORDS, "force").map(str::to_string);
        out.push(item("force", CompletionItemKind::KEYWORD, None, doc, range));
    }
    // The next capability.
    for d in Fact::caps() {
        out.push(item(
            d.cap_key().unwrap_or(d.name),
            CompletionItemKind::PROPERTY,
            Some(catalog::type_name(d.ty)),
            Some(catalog::cap_hover(d)),
            range,
        ));
    }
    Some(out)
}

/// A dotted name: the facts under its root, or the signals after `stale.`.
fn dotted(at: &Cursor<'_>) -> Option<Vec<CompletionItem>> {
    let (text, path, overlay, range) = (at.text, at.path, at.overlay, at.range);
    let (root, _) = at.prefix.split_once('.')?;
    let mut out = Vec::new();
    if root == "stale" {
        for (n, line) in decls(text, path, overlay, "stale") {
            out.push(item(
                &format!("stale.{n}"),
                CompletionItemKind::EVENT,
                Some("staleness signal".into()),
                Some(format!("```policy\n{line}\n```")),
                range,
            ));
        }
        return Some(out);
    }
    for d in Fact::ALL
        .iter()
        .filter(|d| d.name.split('.').next() == Some(root))
    {
        out.push(item(
            d.name,
            CompletionItemKind::FIELD,
            Some(catalog::type_name(d.ty)),
            Some(fact_hover(d)),
            range,
        ));
    }
    Some(out)
}

/// A field of a `redact` or `log` block after its keyword.
fn block_field(at: &Cursor<'_>, block: Option<&str>) -> Option<Vec<CompletionItem>> {
    let (prev_word, range) = (at.prev_word, at.range);
    let mut out = Vec::new();
    // `disable |` in a `redact` block: the built-in rules.
    if block == Some("redact") && prev_word == "disable" {
        for b in crate::redact::BUILTINS {
            out.push(item(
                b.id,
                CompletionItemKind::ENUM_MEMBER,
                Some("redaction rule".into()),
                Some(redaction_rule_hover(b)),
                range,
            ));
        }
        return Some(out);
    }
    // `drop |`, `hash |`, `keep |` in a `log` block: the fields of a decision-log line.
    if block == Some("log") && matches!(prev_word, "drop" | "hash" | "keep") {
        for (name, kind, what) in crate::policy::LOG_FIELDS {
            let fits = match kind {
                crate::policy::LogField::Fixed => false,
                crate::policy::LogField::Written => prev_word != "keep",
                crate::policy::LogField::OffByDefault => prev_word != "hash",
            };
            if fits {
                out.push(item(
                    name,
                    CompletionItemKind::FIELD,
                    Some("decision-log field".into()),
                    Some((*what).to_string()),
                    range,
                ));
            }
        }
        return Some(out);
    }
    None
}

/// At the start of a rule: the keywords (or names) of the block the cursor is in.
fn rule_start(at: &Cursor<'_>, block: Option<&str>) -> Option<Vec<CompletionItem>> {
    let (text, start, prev, range) = (at.text, at.start, at.prev, at.range);
    // Does the cursor start a new rule (rather than continue an expression)?
    let rule_start = match prev {
        None => true,
        Some(p) => {
            let w = p.text(text);
            w == "{"
                || w == "}"
                || (text.get(p.end..start).is_some_and(|gap| gap.contains('\n'))
                    && !OPEN_END.contains(&w))
        }
    };
    if !rule_start {
        return None;
    }
    let mut out = Vec::new();
    match block {
        Some("providers") => {
            for p in crate::state::KNOWN_PROVIDERS {
                let caps = crate::state::shipped_caps(p);
                out.push(item(
                    p,
                    CompletionItemKind::MODULE,
                    Some("provider".into()),
                    Some(format!(
                        "`{p} {{ ... }}`: the capabilities this policy sets for {p} (shipped: {} characters per turn, file_read {})",
                        caps.max_input_chars_per_turn, caps.file_read
                    )),
                    range,
                ));
            }
            Some(out)
        }
        Some("strategy") => {
            push_table(
                &mut out,
                catalog::STRATEGIES,
                CompletionItemKind::ENUM_MEMBER,
                "strategy",
                range,
            );
            Some(out)
        }
        Some("delivery") => {
            for (n, m) in [
                ("off_band", "deliver as a private file"),
                ("inline", "deliver in the prompt"),
                (
                    "inline_limit",
                    "the off-band pointer prompt's character limit",
                ),
            ] {
                out.push(item(
                    n,
                    CompletionItemKind::KEYWORD,
                    None,
                    Some(m.into()),
                    range,
                ));
            }
            Some(out)
        }
        Some("summary") => {
            for n in ["include", "exclude", "section", "text", "budget", "source"] {
                let doc = lookup(catalog::KEYWORDS, n).map(str::to_string);
                out.push(item(n, CompletionItemKind::KEYWORD, None, doc, range));
            }
            Some(out)
        }
        Some("pregrant") => {
            for n in ["read", "turns"] {
                out.push(item(n, CompletionItemKind::KEYWORD, None, None, range));
            }
            Some(out)
        }
        Some("redact") => {
            for n in ["redact", "allow", "disable"] {
                let doc = lookup(catalog::KEYWORDS, n).map(str::to_string);
                out.push(item(n, CompletionItemKind::KEYWORD, None, doc, range));
            }
            Some(out)
        }
        Some("log") => {
            for n in ["drop", "hash", "keep"] {
                let doc = lookup(catalog::KEYWORDS, n).map(str::to_string);
                out.push(item(n, CompletionItemKind::KEYWORD, None, doc, range));
            }
            Some(out)
        }
        Some("policy") => {
            for n in ["description", "extends", "template", "known_providers"] {
                let doc = lookup(catalog::KEYWORDS, n).map(str::to_string);
                out.push(item(n, CompletionItemKind::KEYWORD, None, doc, range));
            }
            Some(out)
        }
        Some(_) => None,
        None => {
            for n in [
                "policy",
                "let",
                "eligible",
                "stale",
                "strategy",
                "summary",
                "delivery",
                "pregrant",
                "providers",
                "redact",
                "log",
            ] {
                let doc = lookup(catalog::KEYWORDS, n).map(str::to_string);
                out.push(item(n, CompletionItemKind::KEYWORD, None, doc, range));
            }
            Some(out)
        }
    }
}

/// In an expression: fact roots, lets, `stale`, operators.
fn expression(at: &Cursor<'_>) -> Vec<CompletionItem> {
    let (text, path, overlay, range) = (at.text, at.path, at.overlay, at.range);
    let mut out = Vec::new();
    for root in catalog::fact_roots() {
        out.push(item(
            &format!("{root}."),
            CompletionItemKind::MODULE,
            Some("facts".into()),
            None,
            range,
        ));
    }
    for (n, line) in decls(text, path, overlay, "let") {
        out.push(item(
            &n,
            CompletionItemKind::CONSTANT,
            Some("let".into()),
            Some(format!("```policy\n{line}\n```")),
            range,
        ));
    }
    for n in [
        "stale",
        "and",
        "or",
        "not",
        "in",
        "true",
        "false",
        "null",
        "otherwise",
        "because",
        "handoff",
        "when",
    ] {
        out.push(item(n, CompletionItemKind::KEYWORD, None, None, range));
    }
    out
}

/// The hover text of a built-in redaction rule.
fn redaction_rule_hover(b: &crate::redact::Builtin) -> String {
    format!(
        "Built-in redaction rule `{}`: {}. A secret it finds is replaced by `[REDACTED:{}#N]`; `disable {}` in a `redact` block turns it off (docs/redaction.md).",
        b.id, b.about, b.id, b.id
    )
}

/// Whether token index `idx` is inside one provider's entry of a `providers` block.
fn in_provider_entry(text: &str, code: &[Token], idx: usize) -> bool {
    let stack = scan::blocks_at(text, code, idx);
    stack.len() >= 2 && stack.get(stack.len().saturating_sub(2)) == Some(&"providers")
}

/// Every `KEYWORD NAME` declaration of the document and its bases: (name, its line).
fn decls(
    text: &str,
    path: Option<&Path>,
    overlay: &Overlay,
    keyword: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (_, t) in chain(text, path, overlay) {
        let code = scan::code(&scan::tokens(&t));
        for (w0, w1) in scan::pairs(&code) {
            if w0.text(&t) == keyword && w1.kind == Kind::Word {
                let n = w1.text(&t).to_string();
                if !out.iter().any(|(m, _)| *m == n) {
                    let end = t
                        .get(w1.end..)
                        .and_then(|s| s.find('\n'))
                        .map(|i| w1.end.saturating_add(i))
                        .unwrap_or(t.len());
                    out.push((n, t.get(w0.start..end).unwrap_or("").trim().to_string()));
                }
            }
        }
    }
    out
}

fn string_completion(
    text: &str,
    code: &[Token],
    i: usize,
    s: Token,
    offset: usize,
    path: Option<&Path>,
) -> Vec<CompletionItem> {
    let range = range_of(text, s.start.saturating_add(1), offset);
    let prev = |k: usize| {
        i.checked_sub(k)
            .and_then(|j| code.get(j))
            .map(|t| t.text(text))
            .unwrap_or("")
    };
    let mut out = Vec::new();
    if prev(1) == "extends" {
        for n in policy::source::shipped_names() {
            out.push(item(
                n,
                CompletionItemKind::MODULE,
                Some("shipped profile".into()),
                None,
                range,
            ));
        }
        if let Some(dir) = path.and_then(Path::parent) {
            for f in policy::source::policy_files(dir).unwrap_or_default() {
                if path.is_some_and(|p| same_file(p, &f)) {
                    continue;
                }
                if let Some(n) = f.file_name().and_then(|n| n.to_str()) {
                    out.push(item(
                        n,
                        CompletionItemKind::FILE,
                        Some("policy file".into()),
                        None,
                        range,
                    ));
                }
            }
        }
        return out;
    }
    // The fact this string is compared with: `FACT == "`, `FACT in ["a", "`, `"x" in FACT`.
    let mut k = 1;
    while prev(k) == "["
        || prev(k) == ","
        || code
            .get(i.wrapping_sub(k))
            .is_some_and(|t| t.kind == Kind::Str)
    {
        k = k.saturating_add(1);
    }
    let next = |k: usize| {
        code.get(i.saturating_add(k))
            .map(|t| t.text(text))
            .unwrap_or("")
    };
    let fact = if matches!(prev(k), "==" | "!=" | "in") {
        Fact::by_name(prev(k.saturating_add(1)))
    } else if matches!(next(1), "==" | "!=" | "in") {
        Fact::by_name(next(2))
    } else {
        None
    };
    let Some(def) = fact else {
        return out;
    };
    let values: Vec<&str> = match def.ty {
        Type::Enum(vs) => vs.to_vec(),
        _ if def.name.ends_with("provider") || def.name == "thread.providers" => {
            // baton's providers, then those this policy's `providers` block declares.
            let mut names = crate::state::KNOWN_PROVIDERS.to_vec();
            for n in scan::provider_names(text, code) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            names
        }
        _ => Vec::new(),
    };
    for v in values {
        out.push(item(
            v,
            CompletionItemKind::ENUM_MEMBER,
            Some(format!("a value of {}", def.name)),
            None,
            range,
        ));
    }
    out
}
