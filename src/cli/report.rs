//! How the command prints policy diagnostics: miette's graphical report when stderr is a
//! terminal (in colour unless `NO_COLOR` is set), and the plain
//! `file:line:col: error: message` text with its snippet and help everywhere else (pipes,
//! files, tests), so scripts and editors that parse it keep working.

use crate::policy::diag::Headline;
use crate::policy::{Diagnostic, PolicyError};
use miette::{GraphicalReportHandler, GraphicalTheme};
use std::io::IsTerminal;

fn graphical() -> Option<GraphicalReportHandler> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme = if no_color {
        GraphicalTheme::unicode_nocolor()
    } else {
        GraphicalTheme::unicode()
    };
    Some(GraphicalReportHandler::new_themed(theme))
}

/// Print one diagnostic on stderr.
pub(crate) fn diagnostic(d: &Diagnostic) {
    let d = &*super::errors::diagnostic(d);
    if let Some(handler) = graphical() {
        let mut out = String::new();
        if handler.render_report(&mut out, &Headline(d)).is_ok() {
            eprint!("{out}");
            return;
        }
    }
    eprintln!("{d}");
}

/// Print every diagnostic of a policy error on stderr.
pub(crate) fn policy_error(e: &PolicyError) {
    for d in &e.diagnostics {
        diagnostic(d);
    }
}

/// Print an engine error on stderr: policy diagnostics as [`diagnostic`], anything else as
/// its message.
pub(crate) fn error(e: &crate::Error) {
    match e {
        crate::Error::Policy(p) => policy_error(p),
        other => eprintln!("{}", super::errors::engine_error(other)),
    }
}
