//! Running test files: decide (and render) every case, check its expectations, report.

use super::file::{Case, DocumentExpect, Expect, TestFile, TestFileError};
use super::Checked;
use crate::coverage::Coverage;
use crate::policy::Policy;
use crate::state::State;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// `strategy`, `covered_runs`, `document.contains`, ...
    pub field: String,
    /// The expected value as the report prints it (`full_new`, `6-8`, `null`).
    pub expected: String,
    /// The decided (or rendered) value, printed the same way.
    pub actual: String,
}

/// The result of one case.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// `file:line` of the case.
    pub at: String,
    /// Empty when the case passed.
    pub mismatches: Vec<Mismatch>,
    /// The deciding rule with its values (when a decision was made).
    pub decided_by: Option<String>,
    /// A decision that could not be made, or a state that does not load.
    pub error: Option<String>,
}

impl CaseResult {
    /// Whether every expectation held and the case ran without error.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty() && self.error.is_none()
    }

    /// `ok name` or `FAIL name (file:line)` followed by one line per mismatch.
    pub fn report(&self) -> String {
        if self.passed() {
            return format!("ok   {}\n", self.name);
        }
        let mut out = format!("FAIL {}  ({})\n", self.name, self.at);
        if let Some(e) = &self.error {
            for l in e.lines() {
                out.push_str(&format!("  {l}\n"));
            }
        }
        for m in &self.mismatches {
            out.push_str(&format!(
                "  {}: expected {}, got {}\n",
                m.field, m.expected, m.actual
            ));
        }
        if let (Some(d), false) = (&self.decided_by, self.mismatches.is_empty()) {
            out.push_str(&format!("    decided by {d}\n"));
        }
        out
    }
}

/// Options for a test run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run only the cases whose name contains this text.
    pub filter: Option<String>,
    /// A candidate policy every case runs against instead of the one its test file (or the
    /// case) names (`baton test --policy`); the named policies are then not loaded.
    pub policy: Option<Arc<Policy>>,
    /// Policy texts read instead of their files when loading the policies the test files
    /// name (an editor's open buffers): the spec itself, a file of its directory or a base
    /// it `extends`.
    pub overlay: BTreeMap<PathBuf, String>,
}

/// All results of a run, and the coverage it gathered.
#[derive(Debug, Default)]
pub struct RunReport {
    /// One result per case run, in file order (files in the order given or found).
    pub results: Vec<CaseResult>,
    /// Which policy rules the cases' decisions exercised (printed by `baton test --coverage`).
    pub coverage: Coverage,
}

impl RunReport {
    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.passed()).count()
    }
    /// How many cases failed (a mismatch or an error).
    pub fn failed(&self) -> usize {
        self.results.len().saturating_sub(self.passed())
    }
    /// `N passed, N failed`
    pub fn summary_line(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }

    /// The results as pretty JSON: `{"passed", "failed", "results": [...]}`, plus
    /// `"coverage": {"files": [...]}` when `coverage` is set.
    pub fn to_json(&self, coverage: bool) -> String {
        let mut v = serde_json::json!({
            "passed": self.passed(),
            "failed": self.failed(),
            "results": self.results.iter().map(|r| {
                let mut j = serde_json::to_value(r).unwrap_or_default();
                if let Some(fields) = j.as_object_mut() {
                    fields.insert("passed".into(), serde_json::Value::Bool(r.passed()));
                }
                j
            }).collect::<Vec<_>>(),
        });
        if coverage {
            if let Some(fields) = v.as_object_mut() {
                fields.insert(
                    "coverage".into(),
                    serde_json::from_str(&self.coverage.to_json()).unwrap_or_default(),
                );
            }
        }
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

fn base_dir(tf: &TestFile) -> PathBuf {
    tf.path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The policy a spec names: a path relative to the test file when one exists there (on disk
/// or in `overlay`), else a shipped profile name or a path as given.
fn policy_spec(tf: &TestFile, spec: &str, overlay: &BTreeMap<PathBuf, String>) -> String {
    let rel = base_dir(tf).join(spec);
    if rel.exists() || overlay.contains_key(&rel) {
        rel.display().to_string()
    } else {
        spec.to_string()
    }
}

/// Why a case's state does not load ([`case_state`]). `Display` is the message; the test
/// file's location is data ([`crate::Located`]), and [`crate::located`] gives the line
/// `baton test` reports for the case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseStateError {
    /// The case names a state file that does not exist.
    #[error("case `{case}`: state file {state} does not exist")]
    MissingFile {
        /// The test file, as shown.
        file: String,
        /// The case's line in the test file (1-based).
        line: usize,
        /// The case's column in the test file (1-based).
        column: usize,
        /// The case's name.
        case: String,
        /// The state file, as shown.
        state: String,
    },
    /// The state (file or `state_inline`) does not load or validate.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The inline state cannot be re-serialized for loading.
    #[error("case `{case}`: its state_inline cannot be read: {reason}")]
    Inline {
        /// The test file, as shown.
        file: String,
        /// The case's line in the test file (1-based).
        line: usize,
        /// The case's name.
        case: String,
        /// Why.
        reason: String,
    },
}

/// The case's place in the test file; a state error prints whole (its problems are located).
impl crate::error::Located for CaseStateError {
    fn location(&self) -> Option<String> {
        match self {
            CaseStateError::MissingFile {
                file, line, column, ..
            } => Some(format!("{file}:{line}:{column}")),
            CaseStateError::Inline { file, line, .. } => Some(format!("{file}:{line}")),
            CaseStateError::State(_) => None,
        }
    }
}

/// Load the state of a case.
pub fn case_state(tf: &TestFile, case: &Case) -> Result<State, CaseStateError> {
    let file = crate::state::display_path(&tf.path);
    if let Some(rel) = &case.state {
        let path = base_dir(tf).join(rel);
        if !path.exists() {
            return Err(CaseStateError::MissingFile {
                file,
                line: case.line,
                column: case.col,
                case: case.name.clone(),
                state: crate::state::display_path(&path),
            });
        }
        return Ok(crate::state::load_file(&path)?);
    }
    let value = case.state_inline.clone().unwrap_or_default();
    let text = serde_yaml::to_string(&value).map_err(|e| CaseStateError::Inline {
        file: file.clone(),
        line: case.line,
        case: case.name.clone(),
        reason: e.to_string(),
    })?;
    let name = format!("{file}:{} (state_inline of `{}`)", case.line, case.name);
    crate::state::parse_str(&text, crate::state::Format::Yaml, &name).map_err(|mut e| {
        // Positions would point into the re-serialized text, not the test file: the case's
        // line and the problem's path say where it is.
        for p in &mut e.problems {
            p.line = None;
            p.column = None;
        }
        CaseStateError::State(e)
    })
}

/// The policies the cases of one test file run against.
#[derive(Debug, Clone)]
pub struct CasePolicies {
    candidate: Option<Arc<Policy>>,
    named: BTreeMap<String, Policy>,
}

impl CasePolicies {
    /// The policy `case` runs against: the candidate, else the case's own `policy:`, else
    /// the file's.
    pub fn for_case(&self, tf: &TestFile, case: &Case) -> Option<&Policy> {
        if let Some(p) = &self.candidate {
            return Some(p);
        }
        self.named.get(case.policy.as_ref().unwrap_or(&tf.policy))
    }
}

/// Load every policy the file names, before any case runs: a policy that does not check is an
/// error for the whole file. With a candidate policy (`opts.policy`) nothing is loaded.
pub fn load_policies(tf: &TestFile, opts: &RunOptions) -> Result<CasePolicies, TestFileError> {
    let mut named = BTreeMap::new();
    if let Some(p) = &opts.policy {
        return Ok(CasePolicies {
            candidate: Some(p.clone()),
            named,
        });
    }
    let mut specs = vec![(tf.policy.clone(), tf.policy_line)];
    specs.extend(
        tf.cases
            .iter()
            .filter_map(|c| c.policy.clone().map(|p| (p, c.line))),
    );
    for (spec, line) in specs {
        if named.contains_key(&spec) {
            continue;
        }
        let path = policy_spec(tf, &spec, &opts.overlay);
        let policy = crate::policy::load_overlay(&path, &opts.overlay).map_err(|e| {
            TestFileError::PolicyDoesNotCheck {
                file: crate::state::display_path(&tf.path),
                line,
                spec: spec.clone(),
                message: e.to_string(),
            }
        })?;
        named.insert(spec, policy);
    }
    Ok(CasePolicies {
        candidate: None,
        named,
    })
}

/// One case run: its result, and the decision it checked with the summary rule evaluations
/// behind it (for coverage) when one was made.
#[derive(Debug, Clone)]
pub struct CaseRun {
    /// What `baton test` reports.
    pub result: CaseResult,
    /// The decision and document, when the state loaded and the policy decided.
    pub checked: Option<Checked>,
    /// The summary rule evaluations of the decision (for coverage).
    pub hits: Vec<crate::select::RuleHit>,
}

/// Run one case of `tf` against `policy`: load its state, decide (and render), check its
/// expectations.
pub fn run_case(tf: &TestFile, case: &Case, policy: &Policy) -> CaseRun {
    let file = crate::state::display_path(&tf.path);
    let mut run = CaseRun {
        result: CaseResult {
            name: case.name.clone(),
            at: format!("{file}:{}", case.line),
            mismatches: Vec::new(),
            decided_by: None,
            error: None,
        },
        checked: None,
        hits: Vec::new(),
    };
    let state = match case_state(tf, case) {
        Ok(s) => s,
        Err(e) => {
            run.result.error = Some(crate::error::located(&e));
            return run;
        }
    };
    let target = case.target.clone().or_else(|| tf.target.clone());
    match super::check(policy, &state, target.as_deref()) {
        Ok((checked, hits)) => {
            run.result.mismatches = check_expect(&checked, &case.expect);
            run.result.decided_by = Some(checked.deciding_rule());
            run.checked = Some(checked);
            run.hits = hits;
        }
        Err(e) => run.result.error = Some(crate::error::located(&e)),
    }
    run
}

/// Run the cases of one loaded test file, adding to `report`.
pub fn run_file(
    tf: &TestFile,
    opts: &RunOptions,
    report: &mut RunReport,
) -> Result<(), TestFileError> {
    let policies = load_policies(tf, opts)?;
    for case in &tf.cases {
        if let Some(f) = &opts.filter {
            if !case.name.contains(f.as_str()) {
                continue;
            }
        }
        let Some(policy) = policies.for_case(tf, case) else {
            continue;
        };
        report.coverage.register(policy);
        let run = run_case(tf, case, policy);
        if let Some(checked) = &run.checked {
            report
                .coverage
                .record(policy, &checked.outcome.decision, &run.hits);
        }
        report.results.push(run.result);
    }
    Ok(())
}

/// Every `*.yaml`/`*.yml` file under the given paths (directories are searched one level,
/// sorted); files are taken as given. A directory that cannot be read or holds no test file is
/// an error: it would otherwise pass with nothing tested.
pub fn test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, TestFileError> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let dir = crate::state::display_path(p);
        let v = files_in(p, &["yaml", "yml"]).map_err(|e| TestFileError::ReadDir {
            dir: dir.clone(),
            message: e.to_string(),
        })?;
        if v.is_empty() {
            return Err(TestFileError::NoTestFiles { dir });
        }
        out.extend(v);
    }
    Ok(out)
}

/// The files directly in `dir` whose extension is one of `exts`, sorted.
pub(crate) fn files_in(dir: &Path, exts: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && (p.extension().and_then(|e| e.to_str())).is_some_and(|e| exts.contains(&e))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Load, validate and run every test file; the first invalid file stops the run.
pub fn run_paths(paths: &[PathBuf], opts: &RunOptions) -> Result<RunReport, TestFileError> {
    let mut report = RunReport::default();
    let mut loaded = Vec::new();
    for f in &test_files(paths)? {
        loaded.push(super::file::load(f)?);
    }
    for tf in &loaded {
        run_file(tf, opts, &mut report)?;
    }
    Ok(report)
}

// How test failures and `baton diff` print decision fields.

/// The value, or `null`.
pub(crate) fn opt_str(v: Option<&str>) -> String {
    v.map(|s| s.to_string()).unwrap_or_else(|| "null".into())
}

/// `[a, b]`
pub(crate) fn list(v: &[String]) -> String {
    format!("[{}]", v.join(", "))
}

/// `from-to` (`from` for one run), or `null`: ranges as `baton explain` prints them.
pub(crate) fn run_range(r: Option<(u32, u32)>) -> String {
    match r {
        Some((f, t)) if f == t => f.to_string(),
        Some((f, t)) => format!("{f}-{t}"),
        None => "null".into(),
    }
}

/// `action id`, the id `null` when there is none.
pub(crate) fn thread(action: &str, id: Option<&str>) -> String {
    format!("{action} {}", id.unwrap_or("null"))
}

/// Check every expectation of a case against a decision and its document.
pub fn check_expect(c: &Checked, e: &Expect) -> Vec<Mismatch> {
    let d = &c.outcome.decision;
    let mut out = Vec::new();
    let mut mis = |field: &str, expected: String, actual: String| {
        if expected != actual {
            out.push(Mismatch {
                field: field.into(),
                expected,
                actual,
            })
        }
    };
    if let Some(s) = e.strategy {
        mis("strategy", s.as_str().into(), d.strategy.as_str().into());
    }
    if let Some(h) = &e.handoff_strategy {
        mis(
            "handoff_strategy",
            opt_str(h.map(|h| h.as_str())),
            opt_str(d.handoff_strategy.map(|h| h.as_str())),
        );
    }
    if let Some(t) = &e.provider_thread {
        if let Some(a) = t.action {
            mis(
                "provider_thread.action",
                a.as_str().into(),
                d.provider_thread.action.as_str().into(),
            );
        }
        if let Some(id) = &t.id {
            mis(
                "provider_thread.id",
                opt_str(id.as_deref()),
                opt_str(d.provider_thread.id.as_deref()),
            );
        }
    }
    if let Some(r) = &e.covered_runs {
        mis(
            "covered_runs",
            run_range(r.map(|r| (r.from, r.to))),
            run_range(d.covered_runs.as_ref().map(|r| (r.from, r.to))),
        );
    }
    if let Some(s) = &e.stale {
        mis("stale", list(s), list(&d.stale));
    }
    // `stale_contains` / `stale_not_contains`: each listed signal must (not) hold.
    for (field, wanted, held, verb) in [
        ("stale_contains", &e.stale_contains, true, "to hold"),
        (
            "stale_not_contains",
            &e.stale_not_contains,
            false,
            "not to hold",
        ),
    ] {
        let wrong: Vec<String> = wanted
            .iter()
            .flatten()
            .filter(|x| d.stale.contains(x) != held)
            .cloned()
            .collect();
        if !wrong.is_empty() {
            mis(field, format!("{} {verb}", list(&wrong)), list(&d.stale));
        }
    }
    if let Some(exp) = &e.delivery {
        match (exp, &d.delivery) {
            (None, None) => {}
            (None, Some(got)) => mis("delivery", "null".into(), got.mode.as_str().into()),
            (Some(_), None) => mis("delivery", "a delivery".into(), "null (no handoff)".into()),
            (Some(exp), Some(got)) => {
                if let Some(m) = exp.mode {
                    mis("delivery.mode", m.as_str().into(), got.mode.as_str().into());
                }
                if let Some(l) = exp.inline_limit {
                    mis(
                        "delivery.inline_limit",
                        l.to_string(),
                        got.inline_limit.to_string(),
                    );
                }
            }
        }
    }
    if let Some(exp) = &e.pregrant {
        match (exp, &d.pregrant) {
            (None, None) => {}
            (None, Some(got)) => mis(
                "pregrant",
                "null".into(),
                format!("{} {}", got.tool, got.path),
            ),
            (Some(_), None) => mis("pregrant", "a pre-grant".into(), "null".into()),
            (Some(exp), Some(got)) => {
                if let Some(t) = &exp.tool {
                    mis("pregrant.tool", t.clone(), got.tool.clone());
                }
                if let Some(t) = exp.turns {
                    mis("pregrant.turns", t.to_string(), got.turns.to_string());
                }
                if let Some(u) = exp.uses {
                    mis("pregrant.uses", u.to_string(), got.uses.to_string());
                }
            }
        }
    }
    if let Some(rule) = &e.decided_by {
        let want = if rule.starts_with("strategy ") {
            rule.clone()
        } else {
            format!("strategy {rule}")
        };
        mis("decided_by", want, d.decided_by.rule.clone());
    }
    if let Some(want) = &e.redacted {
        let show = |m: &mut dyn Iterator<Item = (String, usize)>| {
            let parts: Vec<String> = m.map(|(r, n)| format!("{r}: {n}")).collect();
            format!("{{{}}}", parts.join(", "))
        };
        let mut got: Vec<(String, usize)> = d
            .redactions
            .iter()
            .map(|r| (r.rule.clone(), r.count))
            .collect();
        got.sort();
        mis(
            "redacted",
            show(&mut want.iter().map(|(r, n)| (r.clone(), *n))),
            show(&mut got.into_iter()),
        );
    }
    if let Some(doc) = &e.document {
        check_document(c, doc.as_ref(), &mut out);
    }
    out
}

fn check_document(c: &Checked, doc: Option<&DocumentExpect>, out: &mut Vec<Mismatch>) {
    let rendered = c.outcome.rendered.as_ref();
    let (doc, rendered) = match (doc, rendered) {
        (None, None) => return,
        (None, Some(_)) => {
            out.push(Mismatch {
                field: "document".into(),
                expected: "no document".into(),
                actual: "a document".into(),
            });
            return;
        }
        (Some(_), None) => {
            out.push(Mismatch {
                field: "document".into(),
                expected: "a document".into(),
                actual: format!("none ({})", c.outcome.decision.strategy.as_str()),
            });
            return;
        }
        (Some(d), Some(r)) => (d, r),
    };
    for s in &doc.contains {
        if !rendered.document.contains(s.as_str()) {
            out.push(Mismatch {
                field: "document.contains".into(),
                expected: format!("{s:?}"),
                actual: "not found".into(),
            });
        }
    }
    for s in &doc.not_contains {
        if let Some(line) = rendered.document.lines().find(|l| l.contains(s.as_str())) {
            out.push(Mismatch {
                field: "document.not_contains".into(),
                expected: format!("no {s:?}"),
                actual: format!("found in line {:?}", line.trim()),
            });
        }
    }
    let sections: Vec<String> = c
        .outcome
        .summary
        .as_ref()
        .map(|s| s.sections.iter().map(|x| x.name.clone()).collect())
        .unwrap_or_default();
    let has = |want: &str| {
        c.outcome
            .summary
            .as_ref()
            .is_some_and(|s| s.sections.iter().any(|x| x.name == want || x.title == want))
    };
    for s in &doc.sections {
        if !has(s) {
            out.push(Mismatch {
                field: "document.sections".into(),
                expected: format!("section {s:?}"),
                actual: list(&sections),
            });
        }
    }
    for s in &doc.no_sections {
        if has(s) {
            out.push(Mismatch {
                field: "document.no_sections".into(),
                expected: format!("no section {s:?}"),
                actual: list(&sections),
            });
        }
    }
}
