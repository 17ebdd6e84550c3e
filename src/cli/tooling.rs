//! `baton test`, `baton fmt`, `baton diff`: thin shells over [`crate::testing`],
//! [`crate::coverage`], [`crate::fmt`] and [`crate::diff`].

use super::commands::{FAIL, OK, USAGE};
use super::TestArgs;
use std::path::PathBuf;

macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

pub(crate) fn test(a: TestArgs) -> u8 {
    if let Some(m) = a.min_coverage {
        if !(0.0..=100.0).contains(&m) {
            eprintln!("error: --min-coverage takes a percentage from 0 to 100, got {m}");
            return USAGE;
        }
    }
    let paths: Vec<PathBuf> = if a.paths.is_empty() {
        vec![PathBuf::from("policies/tests")]
    } else {
        a.paths.clone()
    };
    for p in &paths {
        if !p.exists() {
            eprintln!("{}: error: no such test file or directory", p.display());
            return FAIL;
        }
    }
    let opts = crate::testing::RunOptions {
        filter: a.filter.clone(),
    };
    let report = match crate::testing::run_paths(&paths, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
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
        if a.json {
            outln!("{}", report.coverage.to_json());
        } else {
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
    if !a.json {
        outln!("{}", report.summary_line());
    }
    code
}
