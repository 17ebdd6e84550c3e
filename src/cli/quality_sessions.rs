//! `baton quality --sessions DIR`: a thin shell over [`crate::quality::sessions`].

use super::commands::{FAIL, OK};
use crate::quality::sessions::{measure_sessions, LogFigures, MIN_OPEN_PRECISION};
use crate::quality::Ratio;
use std::path::Path;

/// Measure the labelled session logs of `dir`, print the figures; FAIL when the gate fails.
pub(crate) fn run(dir: &Path, json: bool) -> u8 {
    let report = measure_sessions(dir);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    } else {
        for e in &report.errors {
            eprintln!("{e}");
        }
        for f in &report.logs {
            outln!("{}", log_line(f));
            for n in &f.notes {
                outln!("    {n}");
            }
        }
        let p = |name: &str, r: &Ratio| {
            format!(
                "  {name:<28} {:>6.1}%  ({}/{})",
                r.percent, r.present, r.expected
            )
        };
        outln!(
            "import quality on {}: {} logs, {} errors",
            report.corpus,
            report.logs.len(),
            report.errors.len()
        );
        outln!("{}", p("prompts kept", &report.prompts));
        outln!("{}", p("commands with results", &report.commands));
        outln!("{}", p("open-problem precision", &report.open_precision));
        outln!("{}", p("open-problem recall", &report.open_recall));
        outln!("  {:<28} {:>6}", "prompts kept twice", report.extra_prompts);
        outln!("  {:<28} {:>6}", "polls left as items", report.stray_polls);
        if report.pass {
            outln!("PASS");
        } else {
            outln!(
                "FAIL: prompts and command results must be 100%, with no prompt kept twice, no poll left as an item, and open-problem precision at least {MIN_OPEN_PRECISION}%"
            );
        }
    }
    if report.pass {
        OK
    } else {
        FAIL
    }
}

fn log_line(f: &LogFigures) -> String {
    let r = |x: &Ratio| format!("{}/{}", x.present, x.expected);
    format!(
        "{}: prompts {}; commands {}; open precision {}; open recall {}; {} warnings",
        f.log,
        r(&f.prompts),
        r(&f.commands),
        r(&f.open_precision),
        r(&f.open_recall),
        f.warnings
    )
}
