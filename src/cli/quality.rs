//! `baton quality`: a thin shell over [`crate::quality`].

use super::commands::{FAIL, OK};
use crate::quality::{DocReport, QualityReport, Ratio};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct QualityArgs {
    /// Directory of state files (*.yaml, *.yml, *.json).
    #[arg(long, value_name = "DIR", required_unless_present = "sessions")]
    pub corpus: Option<PathBuf>,
    /// Directory of labelled session logs (*.jsonl with *.expect.yaml): measure the import
    /// (prompts kept, commands with results, open-problem precision and recall).
    #[arg(long, value_name = "DIR")]
    pub sessions: Option<PathBuf>,
    /// Policy file, directory or shipped profile.
    #[arg(long, default_value = "default")]
    pub policy: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also measure generated long threads of these sizes (runs, comma-separated), both
    /// handed to a provider without a thread and back to one with its own thread, and gate on
    /// them (docs/cli.md#baton-quality).
    #[arg(long, value_name = "RUNS", value_delimiter = ',')]
    pub long_threads: Vec<u32>,
}

pub(crate) fn quality(a: QualityArgs) -> u8 {
    let mut code = OK;
    if let Some(dir) = &a.sessions {
        code = super::quality_sessions::run(dir, a.json);
    }
    let Some(corpus) = &a.corpus else {
        return code;
    };
    let Ok(policy) = super::commands::load_policy(&a.policy) else {
        return FAIL;
    };
    let report = match crate::quality::measure_corpus(&policy, corpus) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}", super::errors::quality_error(&e));
            return FAIL;
        }
    };
    let long = match crate::quality::long::measure_sizes(&policy, &a.long_threads) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("long threads: {}", crate::error::located(&e));
            return FAIL;
        }
    };
    let long_pass = long
        .iter()
        .all(|f| crate::quality::long::failures(f).is_empty());
    if a.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        if let Some(o) = v.as_object_mut().filter(|_| !long.is_empty()) {
            o.insert(
                "long_threads".into(),
                serde_json::to_value(&long).unwrap_or_default(),
            );
            o.insert("long_threads_pass".into(), long_pass.into());
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    } else {
        for d in &report.documents {
            outln!("{}", doc_line(d));
        }
        for line in summary(&report) {
            outln!("{line}");
        }
        for f in &long {
            outln!("{}", long_line(f));
        }
        if !long.is_empty() {
            outln!(
                "{}",
                if long_pass {
                    "long threads: PASS"
                } else {
                    "long threads: FAIL: every file named, the newest 10 requests whole, every decision of the newest 100 runs, every open problem, the budget kept, the oldest shed first, no cut under the limit, the transcript complete"
                }
            );
        }
    }
    if report.pass && long_pass {
        code
    } else {
        FAIL
    }
}

fn doc_line(d: &DocReport) -> String {
    let head = format!("{} -> {}:", d.state, d.target);
    if let Some(e) = &d.error {
        return format!("{head} error: {}", e.lines().next().unwrap_or(""));
    }
    let Some(f) = &d.figures else {
        return format!("{head} {} (no document)", d.strategy);
    };
    let r = |x: &crate::quality::Recall| {
        let mut s = format!("{}/{}", x.present, x.expected);
        if !x.missing.is_empty() {
            s.push_str(&format!(" (missing {})", x.missing.join(", ")));
        }
        s
    };
    let latest = match f.latest_user_message {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    };
    let leaks = if f.leaks.is_empty() {
        "0".to_string()
    } else {
        format!("{} ({})", f.leaks.len(), f.leaks.join(", "))
    };
    let graphemes = if f.broken_graphemes.is_empty() {
        "ok".to_string()
    } else {
        format!("BROKEN in {}", f.broken_graphemes.join(", "))
    };
    let secrets = if f.secrets_leaked.is_empty() {
        "0".to_string()
    } else {
        format!(
            "{} ({})",
            f.secrets_leaked.len(),
            f.secrets_leaked.join(", ")
        )
    };
    let false_redactions = if f.false_redactions.is_empty() {
        "0".to_string()
    } else {
        format!(
            "{} ({})",
            f.false_redactions.len(),
            f.false_redactions.join(", ")
        )
    };
    format!(
        "{head} {} {}; files {}; open {}; latest user message {latest}; instructions {}; leaks {leaks}; first turn {}/{} {}; graphemes {graphemes}; secrets {secrets}; false redactions {false_redactions}",
        d.strategy,
        d.delivery.as_deref().unwrap_or("-"),
        r(&f.changed_files),
        r(&f.open_problems),
        r(&f.user_instructions),
        f.budget.first_turn_chars,
        f.budget.limit,
        if f.budget.kept { "kept" } else { "OVER" },
    )
}

/// `n` per 100,000 of `of` (0 when `of` is 0).
fn per_100k(n: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        // Counts far below 2^52: exact in f64.
        (n as f64) * 100_000.0 / (of as f64)
    }
}

fn long_line(f: &crate::quality::long::LongFigures) -> String {
    let failures = crate::quality::long::failures(f);
    let transcript = match f.transcript_complete {
        Some(true) => "complete",
        Some(false) => "INCOMPLETE",
        None => "-",
    };
    format!(
        "long thread {} runs -> {}: {} {}; {} of {} chars; files {}/{}; newest requests {}/{}; decisions {}/{}; open {}/{}; requests shown {}/{}; transcript {transcript}; {}",
        f.runs,
        f.target,
        f.strategy,
        f.delivery,
        f.document_chars,
        f.limit,
        f.files.0,
        f.files.1,
        f.newest_requests.0,
        f.newest_requests.1,
        f.decisions.0,
        f.decisions.1,
        f.open.0,
        f.open.1,
        f.requests.0,
        f.requests.1,
        if failures.is_empty() {
            "ok".to_string()
        } else {
            format!("FAIL ({})", failures.join("; "))
        }
    )
}

fn summary(report: &QualityReport) -> Vec<String> {
    let t = &report.totals;
    let p = |name: &str, r: &Ratio| {
        format!(
            "  {name:<26} {:>6.1}%  ({}/{})",
            r.percent, r.present, r.expected
        )
    };
    vec![
        format!(
            "quality of policy `{}` on {}: {} documents, {} errors",
            report.policy, report.corpus, t.documents, t.errors
        ),
        p("changed-files recall", &t.changed_files),
        p("open-problem recall", &t.open_problems),
        p("latest user message", &t.latest_user_message),
        p("user-instruction recall", &t.user_instructions),
        format!("  {:<26} {:>6}", "leaks", t.leaks),
        p("budget kept", &t.budget_kept),
        p("cuts on grapheme bounds", &t.grapheme_safe),
        format!("  {:<26} {:>6}", "secrets shown", t.secrets_leaked),
        format!(
            "  {:<26} {:>6}  ({:.2} per 100,000 characters read)",
            "false redactions",
            t.false_redactions,
            per_100k(t.false_redactions, t.chars_read)
        ),
        if report.pass {
            "PASS".to_string()
        } else {
            "FAIL: every figure must be 100%, with no leak and no error".to_string()
        },
    ]
}
