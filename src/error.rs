//! The one error type of the engine: every way loading, deciding or rendering can fail, each
//! kind keeping its own located error (policy diagnostics with file, line, column and byte
//! range; state problems with the state path; the deciding rule's location).

use crate::deliver::DeliveryError;
use crate::eval::EvalError;
use crate::pipeline::PipelineError;
use crate::policy::{Diagnostic, PolicyError};
use crate::render::RenderError;
use crate::state::StateError;

/// Why the engine could not load, decide or render. `Display` prints what the `baton`
/// command prints (`file:line:col: error: message`, with the source snippet and help);
/// [`Error::diagnostics`] gives the structured form.
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

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        match self {
            Error::Policy(p) => miette::Diagnostic::related(p),
            _ => None,
        }
    }
}
