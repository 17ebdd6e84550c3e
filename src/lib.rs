//! baton: a policy engine for handing conversation context between AI agent providers.
//!
//! The main path is one object, [`Engine`]: build it once from a policy (a file, a directory
//! of `*.policy` files, a shipped profile name, or text) and templates, then decide, render
//! and explain for any number of states:
//!
//! ```
//! let engine = baton::Engine::new("default")?;
//! let state = baton::State::load("examples/seed-switch.yaml")?;
//! let decision = engine.decide(&state, None)?;
//! println!("{}", engine.explain(&decision));
//! # Ok::<(), baton::Error>(())
//! ```
//!
//! The layers (docs/architecture.md), each importing only from the ones before it:
//! core (state, policy, facts, eval, select, render, decision, explain) -> delivery
//! (off-band documents, pre-grants, GC, the summarizer, the pipeline and the engine) ->
//! [`store`] (feature `store`) -> [`serve`] (feature `serve`) and the command line (feature
//! `cli`). Modules not listed here are internal; the `unstable` feature makes them public
//! for baton's own tests, with no stability promise.
#![deny(unsafe_code)]
// Strict lints for non-test code (as cedar-policy does): no unwrap/expect/panic, no indexing
// or slicing that can panic, no truncating casts, no unchecked arithmetic. Unit tests
// (`cfg(test)`) are exempt; integration tests, benches and examples are separate crates these
// crate-level attributes do not reach.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        clippy::arithmetic_side_effects
    )
)]
// Every public item is documented, with or without `unstable` (`clippy --all-features` and
// `cargo doc` run with `-D warnings` in CI); the internal modules `unstable` makes public are
// `doc(hidden)`, which `missing_docs` does not ask to document.
#![warn(missing_docs)]
// Every type a public signature names can be named by a user (exported, or wrapped): checked
// without `unstable` (`cargo clippy --lib -- -D warnings`, .ci/run), where the internal
// modules are private.
#![warn(unnameable_types)]
// No function over 150 lines (`too-many-lines-threshold` in clippy.toml; blank and comment
// lines do not count) without a reason: a longer one says why in a comment above its
// `#[allow(clippy::too_many_lines)]` (a match with one arm per fact, expression form or
// grammar statement). Checked with the other lints by both clippy runs in CI.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
// Dead code is an error in the default build (`cargo clippy --lib -- -D warnings`, .ci/run) and
// in the all-features build. A build with only some features (`--no-default-features --features
// store`, ...) compiles internal items whose only callers are features that are off; there,
// and only there, unused items are allowed rather than sprinkling per-feature cfgs on fields.
#![cfg_attr(
    not(all(
        feature = "store",
        feature = "serve",
        feature = "cli",
        feature = "lsp",
        feature = "git"
    )),
    allow(dead_code, unused_imports)
)]

// Unit tests moved from tests/ name the crate `baton::...`, as a user's code would.
#[cfg(test)]
extern crate self as baton;

/// A method public with the `unstable` feature (baton's own tests and benches), visible to
/// the crate only otherwise: for methods of public types whose signatures name internals.
macro_rules! unstable_pub {
    ($(#[$m:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "unstable")]
        $(#[$m])* pub fn $($rest)*
        #[cfg(not(feature = "unstable"))]
        $(#[$m])* pub(crate) fn $($rest)*
    };
}

// Internal modules: public only with the `unstable` feature (baton's own tests and benches).
macro_rules! internal {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "unstable")]
        #[doc(hidden)]
        pub mod $name;
        // Crate-visible, so that unit tests anywhere in the crate reach a nested one (serve's).
        #[cfg(not(feature = "unstable"))]
        pub(crate) mod $name;
    )*};
}

// The public API. Every public item is documented (`missing_docs`, an error in CI's
// `RUSTDOCFLAGS="-D warnings" cargo doc`): what a value means, its unit, when it is empty, and
// the contract field it maps to (DESIGN §3 state file, §4 decision).
pub mod decision;
mod engine;
mod error;
mod outcome;
#[cfg(feature = "serve")]
pub mod serve;
pub mod state;
#[cfg(feature = "store")]
pub mod store;
pub mod summarize;
pub mod testing;
pub mod workspace;

pub use decision::Decision;
pub use deliver::CommandRunner;
pub use deliver::DeliveryError;
pub use engine::{Context, Engine, EngineBuilder};
pub use error::{located, Error, Located};
pub use eval::EvalError;
pub use ids::InvalidId;
pub use outcome::Outcome;
pub use pipeline::{PipelineError, Plan};
pub use render::RenderError;

/// The parts of a policy diagnostic ([`Diagnostic`]) and of a policy's sources.
pub mod diagnostic {
    pub use crate::policy::ast::Span;
    pub use crate::policy::diag::{ByteRange, Label, Source, SourceText};
}

/// The parts of a handoff an [`Outcome`] carries: the selected summary (its sections and
/// entries, what was left out, what was redacted) and the rendered document's provenance.
pub mod handoff {
    pub use crate::redact::{
        BuildError as RedactorError, Context as RedactionContext, RedactError, RedactionReport,
        Redactor, Spec as RedactionSpec,
    };
    pub use crate::render::{Chars, Provenance, Templates};
    pub use crate::select::{Entry, Omitted, Redaction, Section, Summary};
}
pub use policy::{Diagnostic, Policy, PolicyError, Severity};
pub use render::{Rendered, TemplateSet};
pub use state::{State, StateError};
pub use summarize::Summarizer;

/// The README's code blocks run as doctests (its embedding example among them).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The language server behind `baton lsp` (feature `lsp`): diagnostics, hover, completion,
/// definitions, references, formatting and quick fixes for policies and policy tests.
#[cfg(feature = "lsp")]
pub mod lsp;

/// The `baton` command (src/main.rs calls [`cli::main`]); not a library interface.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

/// JSON Schemas of the documents baton reads and writes (`baton schema`); the service
/// request schema needs the server's types.
#[cfg(feature = "serve")]
#[doc(hidden)]
pub mod schema;

internal!(
    coverage, cut, deliver, entry, eval, explain, facts, fit, ids, input, pipeline, policy, redact,
    render, select, suggest,
);

// Internal modules only some features use (and the tests, through `unstable`): not compiled
// without them.
#[cfg(any(feature = "unstable", feature = "cli", feature = "serve"))]
internal!(diff);
#[cfg(any(feature = "unstable", feature = "cli", feature = "lsp"))]
internal!(fmt);
#[cfg(any(feature = "unstable", feature = "cli"))]
internal!(import, quality);

#[cfg(any(test, feature = "unstable"))]
#[doc(hidden)]
pub use eval::EvalOptions;
#[cfg(feature = "unstable")]
#[doc(hidden)]
pub use pipeline::decide;
