//! The YAML test-file model and its loader. Every key is checked: an unknown key, a value of the
//! wrong type or an unknown strategy name is an error with `file:line:col`, never a silent pass.

use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

/// A problem with a test file, a state it names, or the policy it names. `Display` is the
/// message; the file (and line and column) is data, given by [`crate::Located`] (the
/// `baton` command prints `file:line:col: error: message` through [`crate::located`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TestFileError {
    /// The test file cannot be read.
    #[error("cannot read the test file: {message}")]
    Read {
        /// The test file, as given.
        file: String,
        /// The I/O error.
        message: String,
    },
    /// The test file does not parse or does not validate: an unknown key, a value of the wrong
    /// type, a case with no state or no expectation, a case name used twice, ...
    #[error("{message}")]
    Invalid {
        /// The test file, as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// What is wrong.
        message: String,
        /// The line in question with a caret under the column (empty when unknown).
        snippet: String,
    },
    /// A directory of test files cannot be read.
    #[error("cannot read the test directory: {message}")]
    ReadDir {
        /// The directory, as given.
        dir: String,
        /// The I/O error.
        message: String,
    },
    /// A directory given as a test path holds no test file.
    #[error("no test files (*.yaml, *.yml) in this directory")]
    NoTestFiles {
        /// The directory, as given.
        dir: String,
    },
    /// A policy the file names does not load or check; `message` holds its diagnostics.
    #[error("policy `{spec}` does not check:\n{message}")]
    PolicyDoesNotCheck {
        /// The test file, as given.
        file: String,
        /// 1-based line of the key naming the policy.
        line: usize,
        /// The policy as the file names it (`default`, `../team.policy`).
        spec: String,
        /// The policy's diagnostics.
        message: String,
    },
    /// `baton test` without paths found no test files where it looks by default
    /// ([`crate::testing::default_paths`]); `looked` lists those places.
    #[error("no test files given, and none found in {looked}")]
    NoDefaultTests {
        /// The places looked in, comma-separated, as the message prints them.
        looked: String,
    },
}

/// The test file (`file:line:col` where known) or directory; none for no default tests.
impl crate::error::Located for TestFileError {
    fn location(&self) -> Option<String> {
        match self {
            TestFileError::Read { file, .. } => Some(file.clone()),
            TestFileError::Invalid {
                file, line, col, ..
            } => Some(format!("{file}:{line}:{col}")),
            TestFileError::ReadDir { dir, .. } | TestFileError::NoTestFiles { dir } => {
                Some(dir.clone())
            }
            TestFileError::PolicyDoesNotCheck { file, line, .. } => {
                Some(format!("{file}:{line}:1"))
            }
            TestFileError::NoDefaultTests { .. } => None,
        }
    }

    /// An invalid file's message is followed by its line with a caret under the column.
    fn message(&self) -> String {
        match self {
            TestFileError::Invalid {
                message, snippet, ..
            } => format!("{message}{snippet}"),
            _ => self.to_string(),
        }
    }
}

impl TestFileError {
    pub(crate) fn at(file: &str, line: usize, col: usize, message: impl Into<String>) -> Self {
        TestFileError::Invalid {
            file: file.to_string(),
            line,
            col,
            message: message.into(),
            snippet: String::new(),
        }
    }

    /// Add the source line and a caret under the column, taken from the file's text.
    fn with_snippet(mut self, text: &str) -> Self {
        if let TestFileError::Invalid {
            line, col, snippet, ..
        } = &mut self
        {
            if let Some(src) = text.lines().nth(line.saturating_sub(1)) {
                let gutter = line.to_string();
                let pad = " ".repeat(gutter.len());
                let caret = " ".repeat(col.saturating_sub(1).min(src.chars().count()));
                *snippet = format!("\n{gutter} | {src}\n{pad} | {caret}^");
            }
        }
        self
    }
}

/// `Some(value)` for a key that is present, even when its value is `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// One test file: the policy under test and its cases.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// A shipped profile name, or a policy file/directory relative to the test file.
    pub policy: String,
    /// The default target of every case (else `request.provider`).
    #[serde(default)]
    pub target: Option<String>,
    /// The cases, in file order.
    pub cases: Vec<Case>,
    /// Where the file was read from (set by [`load`]).
    #[serde(skip)]
    pub path: PathBuf,
    /// 1-based line of the `policy:` key.
    #[serde(skip)]
    pub policy_line: usize,
}

/// One test case.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The case's name, unique in the file; shown in the report and matched by the runner's
    /// name filter.
    pub name: String,
    /// A state file, relative to the test file.
    #[serde(default)]
    pub state: Option<String>,
    /// A whole state written in the test file.
    #[serde(default)]
    #[schemars(with = "Option<crate::state::State>")]
    pub state_inline: Option<serde_yaml::Value>,
    /// The target provider for this case; `None`: the file's `target`, else `request.provider`.
    #[serde(default)]
    pub target: Option<String>,
    /// Overrides the file's policy for this case.
    #[serde(default)]
    pub policy: Option<String>,
    /// What the decision and the document must be.
    pub expect: Expect,
    /// 1-based line of the case in its file (set by [`load`]).
    #[serde(skip)]
    pub line: usize,
    /// 1-based column of the case's `-` (set by [`load`]).
    #[serde(skip)]
    pub col: usize,
}

/// Expectations on the decision and the rendered document. Absent keys are not checked; a key
/// given as `null` expects the field to be null (no handoff, no delivery, no pre-grant).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The expected `strategy` (`full_new`).
    #[serde(default)]
    pub strategy: Option<crate::policy::Strategy>,
    /// The expected `handoff_strategy`; `null` expects none (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub handoff_strategy: Option<Option<crate::state::HandoffStrategy>>,
    /// The expected `provider_thread` (action and/or id).
    #[serde(default)]
    pub provider_thread: Option<ThreadExpect>,
    /// The expected `covered_runs`; `null` expects no handoff (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub covered_runs: Option<Option<RangeExpect>>,
    /// The stale signals exactly, in policy order.
    #[serde(default)]
    pub stale: Option<Vec<String>>,
    /// Signals that must hold (others may too).
    #[serde(default)]
    pub stale_contains: Option<Vec<String>>,
    /// Signals that must not hold.
    #[serde(default)]
    pub stale_not_contains: Option<Vec<String>>,
    /// The expected `delivery`; `null` expects none (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub delivery: Option<Option<DeliveryExpect>>,
    /// The expected `pregrant`; `null` expects none (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub pregrant: Option<Option<PregrantExpect>>,
    /// The ladder rule that decides: its strategy name (`full_new`) or label (`strategy full_new`).
    #[serde(default)]
    pub decided_by: Option<String>,
    /// Expectations on the rendered handoff document; `null` expects no
    /// document (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub document: Option<Option<DocumentExpect>>,
    /// What secret redaction replaced, exactly: rule id -> distinct secrets
    /// (`{github-token: 1}`; `{}` expects nothing redacted). docs/redaction.md.
    #[serde(default)]
    pub redacted: Option<std::collections::BTreeMap<String, usize>>,
}

impl Expect {
    /// Whether no expectation is given at all (such a case could never fail).
    pub fn is_empty(&self) -> bool {
        let Expect {
            strategy,
            handoff_strategy,
            provider_thread,
            covered_runs,
            stale,
            stale_contains,
            stale_not_contains,
            delivery,
            pregrant,
            decided_by,
            document,
            redacted,
        } = self;
        strategy.is_none()
            && handoff_strategy.is_none()
            && provider_thread.is_none()
            && covered_runs.is_none()
            && stale.is_none()
            && stale_contains.is_none()
            && stale_not_contains.is_none()
            && delivery.is_none()
            && pregrant.is_none()
            && decided_by.is_none()
            && document.is_none()
            && redacted.is_none()
    }
}

/// Expectations on `provider_thread`; absent keys are not checked.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadExpect {
    /// The expected action (`resume`, `create`, `fork_native`, `none`).
    #[serde(default)]
    pub action: Option<crate::decision::ThreadAction>,
    /// The expected provider thread id; `null` expects none (`Some(None)` here).
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Option<String>>,
}

/// An expected run range (`{from: 6, to: 8}`), both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RangeExpect {
    /// The first run ordinal.
    pub from: u32,
    /// The last run ordinal.
    pub to: u32,
}

/// Expectations on `delivery`; absent keys are not checked.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryExpect {
    /// The expected mode (`off_band`, `inline`).
    #[serde(default)]
    pub mode: Option<crate::decision::DeliveryMode>,
    /// The expected `inline_limit`, in characters.
    #[serde(default)]
    pub inline_limit: Option<usize>,
}

/// Expectations on `pregrant`; absent keys are not checked.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PregrantExpect {
    /// The expected tool (`Read`).
    #[serde(default)]
    pub tool: Option<String>,
    /// The expected number of turns.
    #[serde(default)]
    pub turns: Option<u32>,
    /// The expected number of uses.
    #[serde(default)]
    pub uses: Option<u32>,
}

/// Expectations on the rendered handoff document (`document: null` expects none).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentExpect {
    /// Texts the document must contain, each as an exact substring.
    #[serde(default)]
    pub contains: Vec<String>,
    /// Texts the document must not contain.
    #[serde(default)]
    pub not_contains: Vec<String>,
    /// Sections present, by name (`goals`) or title (`Current state`).
    #[serde(default)]
    pub sections: Vec<String>,
    /// Sections absent, by name or title.
    #[serde(default)]
    pub no_sections: Vec<String>,
}

/// Load and validate a test file.
pub fn load(path: &Path) -> Result<TestFile, TestFileError> {
    let file = crate::state::display_path(path);
    let text = crate::input::read_to_string(path, crate::input::MAX_TEXT_BYTES, " (64 MiB)")
        .map_err(|e| TestFileError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
    let mut tf = parse_str(&text, &file)?;
    tf.path = path.to_path_buf();
    Ok(tf)
}

/// Parse and validate test-file text; `file` names it in errors.
pub fn parse_str(text: &str, file: &str) -> Result<TestFile, TestFileError> {
    parse_unsnipped(text, file).map_err(|e| e.with_snippet(text))
}

fn parse_unsnipped(text: &str, file: &str) -> Result<TestFile, TestFileError> {
    let de = serde_yaml::Deserializer::from_str(text);
    let mut tf: TestFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let (line, col) = inner
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let mut msg = inner.to_string();
        // serde_yaml appends " at line L column C"; the prefix says it already.
        if let Some(i) = msg.find(" at line ") {
            msg.truncate(i);
        }
        // serde_yaml names the enclosing mapping; name the key itself when it does not.
        let msg = if path.is_empty() || path == "." || msg.starts_with(&path) {
            msg
        } else if let Some(rest) = path
            .rsplit_once('.')
            .and_then(|(head, _)| msg.strip_prefix(head).map(|r| r.to_string()))
        {
            format!("{path}{}", rest.trim_start_matches(|c| c != ':'))
        } else {
            format!("{path}: {msg}")
        };
        TestFileError::at(file, line, col, msg)
    })?;
    tf.policy_line = text
        .lines()
        .position(|l| l.starts_with("policy:"))
        .map(|i| i.saturating_add(1))
        .unwrap_or(1);
    let lines = case_lines(text);
    for (i, case) in tf.cases.iter_mut().enumerate() {
        (case.line, case.col) = lines.get(i).copied().unwrap_or((1, 1));
        match (&case.state, &case.state_inline) {
            (Some(_), Some(_)) => {
                return Err(TestFileError::at(
                    file,
                    case.line,
                    case.col,
                    format!(
                        "cases[{i}] `{}`: give `state` or `state_inline`, not both",
                        case.name
                    ),
                ))
            }
            (None, None) => {
                return Err(TestFileError::at(
                    file,
                    case.line,
                    case.col,
                    format!(
                        "cases[{i}] `{}`: no state; give `state: FILE` or `state_inline: {{...}}`",
                        case.name
                    ),
                ))
            }
            _ => {}
        }
        if case.expect.is_empty() {
            return Err(TestFileError::at(
                file,
                case.line,
                case.col,
                format!(
                    "cases[{i}] `{}`: `expect` is empty, so the case could never fail; expect at least one field",
                    case.name
                ),
            ));
        }
    }
    if tf.cases.is_empty() {
        return Err(TestFileError::at(file, 1, 1, "the file has no cases"));
    }
    let mut names = std::collections::BTreeMap::new();
    for c in &tf.cases {
        if let Some(first) = names.insert(c.name.clone(), c.line) {
            return Err(TestFileError::at(
                file,
                c.line,
                c.col,
                format!(
                    "case name `{}` is used twice (first at line {first})",
                    c.name
                ),
            ));
        }
    }
    Ok(tf)
}

/// The line and column of each case: the items of the top-level `cases:` list, in order.
fn case_lines(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut in_cases = false;
    let mut item_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len().saturating_sub(trimmed.len());
        if indent == 0 && !trimmed.is_empty() && !trimmed.starts_with('#') {
            in_cases = trimmed.starts_with("cases:");
            continue;
        }
        if !in_cases {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("- ") {
            let ind = *item_indent.get_or_insert(indent);
            if ind == indent {
                let _ = rest;
                out.push((i.saturating_add(1), indent.saturating_add(1)));
            }
        }
    }
    out
}

/// Whether a YAML text looks like a policy test file: a top-level `policy:` and `cases:`.
pub fn is_test_file(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("policy:")) && text.lines().any(|l| l.starts_with("cases:"))
}
