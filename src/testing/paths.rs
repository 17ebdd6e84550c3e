//! Where `baton test` finds test files when none are named.

use super::file::{is_test_file, TestFileError};
use super::runner::files_in;
use std::path::{Path, PathBuf};

/// The directory every test file of a project lives in by default (what `baton init` writes).
pub const DEFAULT_DIR: &str = "policies/tests";

/// The test files of a directory: its `*.yaml`/`*.yml` files that are test files (a top-level
/// `policy:` and `cases:`), so states kept beside them are passed over.
fn test_files_in(dir: &Path) -> Vec<PathBuf> {
    files_in(dir, &["yaml", "yml"])
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            crate::input::read_to_string(f, crate::input::MAX_TEXT_BYTES, "")
                .is_ok_and(|t| is_test_file(&t))
        })
        .collect()
}

/// The test paths `baton test` runs when given none. With a candidate policy `policy` that is
/// a file or directory: the test files in the `tests` directory beside it (for
/// `policies/team.policy`, `policies/tests/`), else those beside it. Then `policies/tests`
/// (relative to the working directory, as `baton init` lays a project out). An error names
/// every place looked in.
pub fn default_paths(policy: Option<&str>) -> Result<Vec<PathBuf>, TestFileError> {
    let mut looked = Vec::new();
    if let Some(spec) = policy {
        let p = Path::new(spec);
        let dir = if p.is_dir() {
            Some(p.to_path_buf())
        } else if p.is_file() {
            p.parent().map(Path::to_path_buf)
        } else {
            None
        };
        if let Some(dir) = dir {
            let dir = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            };
            for d in [dir.join("tests"), dir] {
                let files = test_files_in(&d);
                if !files.is_empty() {
                    return Ok(files);
                }
                looked.push(crate::state::display_path(&d));
            }
        }
    }
    let default = PathBuf::from(DEFAULT_DIR);
    if default.is_dir() {
        return Ok(vec![default]);
    }
    if !looked.iter().any(|l| l == DEFAULT_DIR) {
        looked.push(DEFAULT_DIR.to_string());
    }
    let looked = match looked.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => looked.join(""),
    };
    Err(TestFileError::NoDefaultTests { looked })
}
