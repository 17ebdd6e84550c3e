//! `baton test`, `baton fmt`, `baton diff`: thin shells over [`crate::testing`],
//! [`crate::coverage`], [`crate::fmt`] and [`crate::diff`].

use super::commands::{FAIL, OK, USAGE};
use super::{DiffArgs, FmtArgs, TestArgs};
use std::path::PathBuf;

pub(crate) fn test(a: TestArgs) -> u8 {
    if let Some(m) = a.min_coverage {
        if !(0.0..=100.0).contains(&m) {
            eprintln!("error: --min-coverage takes a percentage from 0 to 100, got {m}");
            return USAGE;
        }
    }
    let paths: Vec<PathBuf> = if a.paths.is_empty() {
        match crate::testing::default_paths(a.policy.as_deref()) {
            Ok(p) => p,
            Err(e @ crate::testing::TestFileError::NoDefaultTests { .. }) => {
                eprintln!("error: {e}\n  = help: name test files or directories (`baton test PATH...`); `baton init DIR` writes a policy with its tests in DIR/policies/tests");
                return FAIL;
            }
            Err(e) => {
                eprintln!("{}", crate::error::located(&e));
                return FAIL;
            }
        }
    } else {
        a.paths.clone()
    };
    for p in &paths {
        if !p.exists() {
            eprintln!("{}: error: no such test file or directory", p.display());
            return FAIL;
        }
    }
    let candidate = match a.policy.as_deref().map(super::commands::load_policy) {
        Some(Ok(p)) => Some(std::sync::Arc::new(p)),
        Some(Err(code)) => return code,
        None => None,
    };
    let opts = crate::testing::RunOptions {
        filter: a.filter.clone(),
        policy: candidate,
        ..Default::default()
    };
    let report = match crate::testing::run_paths(&paths, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}", crate::error::located(&e));
            return FAIL;
        }
    };
    if report.results.is_empty() && a.filter.is_some() {
        eprintln!("warning: --filter matched no case");
    }
    let coverage = a.coverage || a.min_coverage.is_some() || a.coverage_json.is_some();
    if !a.json {
        for r in &report.results {
            out!("{}", r.report());
        }
    }
    let mut code = if report.failed() > 0 { FAIL } else { OK };
    if coverage {
        if let Some(path) = &a.coverage_json {
            if let Err(e) = std::fs::write(path, report.coverage.to_json() + "\n") {
                eprintln!("{}: error: cannot write coverage: {e}", path.display());
                return FAIL;
            }
        }
        if !a.json {
            outln!();
            out!("{}", report.coverage.table());
        }
        if let Some(min) = a.min_coverage {
            for f in report.coverage.files() {
                if f.percent + 1e-9 < min {
                    eprintln!(
                        "{}: error: rule coverage {:.1}% is below --min-coverage {min}",
                        f.file, f.percent
                    );
                    code = FAIL;
                }
            }
        }
    }
    if a.json {
        outln!("{}", report.to_json(coverage));
    } else {
        outln!("{}", report.summary_line());
    }
    code
}

pub(crate) fn diff(a: DiffArgs) -> u8 {
    let (Ok(old), Ok(new)) = (
        super::commands::load_engine(&a.from, None, None),
        super::commands::load_engine(&a.to, None, None),
    ) else {
        return FAIL;
    };
    let opts = crate::diff::DiffOptions {
        targets: a
            .target
            .as_deref()
            .map(crate::diff::Targets::parse)
            .unwrap_or_default(),
    };
    let report = match (&a.corpus, &a.from_log) {
        (Some(corpus), _) => crate::diff::diff_corpus(&old, &new, corpus, &opts),
        (None, Some(log)) => crate::diff::diff_log(&old, &new, log, &opts),
        (None, None) => {
            eprintln!("error: give --corpus DIR or --from-log LOG");
            return super::commands::USAGE;
        }
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}", super::errors::diff_error(&e));
            return FAIL;
        }
    };
    for p in &report.problems {
        for e in [&p.old, &p.new].into_iter().flatten() {
            eprintln!("{e}");
        }
        match &p.target {
            Some(t) => eprintln!(
                "{} -> {t}: warning: skipped, a policy cannot decide it",
                p.state
            ),
            None => eprintln!("{}: warning: skipped, the state does not load", p.state),
        }
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    } else {
        out!("{}", report.text());
    }
    if a.fail_on_change && report.decisions_changed > 0 {
        FAIL
    } else {
        OK
    }
}

/// The policy files one `fmt` argument names: the file itself, or every `*.policy` of a
/// directory. A directory that cannot be read or holds no policy file is an error, not a
/// silent success.
fn policy_files(p: &std::path::Path) -> Result<Vec<PathBuf>, String> {
    if !p.is_dir() {
        return Ok(vec![p.to_path_buf()]);
    }
    let dir = crate::state::display_path(p);
    let v = crate::policy::source::policy_files(p)
        .map_err(|e| format!("{dir}: error: cannot read the directory: {e}"))?;
    if v.is_empty() {
        return Err(format!(
            "{dir}: error: no policy files (*.policy) in this directory"
        ));
    }
    Ok(v)
}

/// Replace `path` with `text` atomically (a sibling temp file with the same permissions,
/// then `rename`), so an interrupted `fmt` never leaves a half-written policy behind.
fn replace_file(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.baton-fmt.{}", std::process::id()));
    let result = std::fs::write(&tmp, text)
        .and_then(|()| std::fs::metadata(path))
        .and_then(|m| std::fs::set_permissions(&tmp, m.permissions()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

pub(crate) fn fmt(a: FmtArgs) -> u8 {
    let mut code = OK;
    for arg in &a.paths {
        let files = match policy_files(arg) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("{e}");
                code = FAIL;
                continue;
            }
        };
        for path in files {
            let name = crate::state::display_path(&path);
            let limit = crate::policy::source::MAX_POLICY_BYTES;
            let text = match crate::input::read_to_string(&path, limit, " (16 MiB)") {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{name}: error: cannot read the policy file: {e}");
                    code = FAIL;
                    continue;
                }
            };
            let formatted = match crate::fmt::format_source(&name, &text) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("{e}");
                    code = FAIL;
                    continue;
                }
            };
            if formatted == text {
                continue;
            }
            if a.check {
                out!("{}", crate::fmt::diff(&name, &text, &formatted));
                eprintln!("{name}: not formatted (run `baton fmt {name}`)");
                code = FAIL;
            } else if let Err(e) = replace_file(&path, &formatted) {
                eprintln!("{name}: error: cannot write the policy file: {e}");
                code = FAIL;
            } else {
                outln!("formatted {name}");
            }
        }
    }
    code
}
