//! The one error type of the engine: every way loading, deciding or rendering can fail, each
//! kind keeping its own located error (policy diagnostics with file, line, column and byte
//! range; state problems with the state path; the deciding rule's location).

use crate::deliver::DeliveryError;
use crate::eval::EvalError;
use crate::pipeline::PipelineError;
use crate::policy::{Diagnostic, PolicyError};
use crate::render::RenderError;
use crate::state::StateError;

/// Why the engine could not load, decide or render. `Display` is the message (for a policy,
/// its diagnostics as the `baton` command prints them, `file:line:col: error: message` with
/// the snippet and help); [`Error::diagnostics`] gives the structured form, and [`Located`]
/// the location and help of a decision or template error ([`located`] prints them).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The policy (or the template set) does not load or check.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The state file does not load or validate.
    #[error(transparent)]
    State(#[from] StateError),
    /// The decision the policy asked for cannot be carried out on this state.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// A template failed to compile or render.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The off-band document or its pre-grant could not be written.
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

impl From<PipelineError> for Error {
    fn from(e: PipelineError) -> Self {
        match e {
            PipelineError::Eval(e) => Error::Eval(e),
            PipelineError::Render(e) => Error::Render(e),
        }
    }
}

impl Error {
    /// The policy diagnostics of this error (file, line, column, byte range, code, message,
    /// help); empty for the kinds that are not about policy text.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Error::Policy(p) => &p.diagnostics,
            _ => &[],
        }
    }

    /// The stable code of this error (`baton::check::unknown_fact`, `baton::state::invalid`,
    /// `baton::eval::no_thread_to_resume`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Policy(p) => p.diagnostics.first().map_or("baton::check", |d| d.code),
            Error::State(_) => "baton::state::invalid",
            Error::Eval(EvalError::NoThreadToResume { .. }) => "baton::eval::no_thread_to_resume",
            Error::Eval(EvalError::NoNativeFork { .. }) => "baton::eval::no_native_fork",
            Error::Eval(EvalError::UnknownTarget(_)) => "baton::eval::unknown_target",
            Error::Render(_) => "baton::render::template",
            Error::Delivery(_) => "baton::deliver",
        }
    }
}

impl miette::Diagnostic for Error {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(Error::code(self)))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Located::help(self).map(|h| Box::new(h) as Box<dyn std::fmt::Display + 'a>)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        match self {
            Error::Policy(p) => miette::Diagnostic::related(p),
            _ => None,
        }
    }
}

/// Where a library error is, as data: the library's `Display` is the message about the input,
/// and the place in the input (a policy rule's `file:line:col`, `template:line`, a file, a
/// database) is this. [`located`] joins them the way the `baton` command and the service
/// print errors.
pub trait Located: std::fmt::Display {
    /// Where the error is; `None` when it is about no place in an input (an unknown target).
    fn location(&self) -> Option<String>;

    /// A hint about the input (how to fix the policy; never a command to run).
    fn help(&self) -> Option<&str> {
        None
    }

    /// The message; an error that wraps a located one gives the inner error located.
    fn message(&self) -> String {
        self.to_string()
    }
}

/// `LOCATION: error: MESSAGE`, then `\n  = help: HELP` when there is help; the message alone
/// when there is no location. The one layout of located errors (the CLI prints it in pipes;
/// the service sends it as `error.message`; reports that list errors use it).
pub fn located(e: &dyn Located) -> String {
    let mut out = match e.location() {
        Some(at) => format!("{at}: error: {}", e.message()),
        None => e.message(),
    };
    if let Some(help) = e.help() {
        out.push_str("\n  = help: ");
        out.push_str(help);
    }
    out
}

impl Located for EvalError {
    fn location(&self) -> Option<String> {
        self.at().map(str::to_string)
    }

    fn help(&self) -> Option<&str> {
        EvalError::help(self)
    }
}

impl Located for RenderError {
    fn location(&self) -> Option<String> {
        Some(format!("{}:{}", self.template, self.line))
    }
}

impl Located for PipelineError {
    fn location(&self) -> Option<String> {
        match self {
            PipelineError::Eval(e) => e.location(),
            PipelineError::Render(e) => e.location(),
        }
    }

    fn help(&self) -> Option<&str> {
        match self {
            PipelineError::Eval(e) => Located::help(e),
            PipelineError::Render(e) => e.help(),
        }
    }
}

/// The policy and state errors print whole (their diagnostics and problems carry their own
/// locations); decision and template errors are located.
impl Located for Error {
    fn location(&self) -> Option<String> {
        match self {
            Error::Eval(e) => e.location(),
            Error::Render(e) => e.location(),
            _ => None,
        }
    }

    fn help(&self) -> Option<&str> {
        match self {
            Error::Eval(e) => Located::help(e),
            _ => None,
        }
    }
}

// The importer is compiled with the command line (and `unstable`) only.
#[cfg(any(feature = "unstable", feature = "cli"))]
impl Located for crate::import::ImportError {
    fn location(&self) -> Option<String> {
        Some(self.path().to_string())
    }
}
