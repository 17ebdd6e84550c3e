//! baton: a policy engine for handing conversation context between AI agent providers.
//!
//! The pipeline (DESIGN §1): [`state`] -> [`facts`] -> [`eval`] -> select -> render -> deliver.
#![deny(unsafe_code)]

pub mod cli;
pub mod coverage;
pub mod decision;
pub mod deliver;
pub mod diff;
pub mod engine;
pub mod error;
pub mod eval;
pub mod explain;
pub mod facts;
pub mod fmt;
pub mod ids;
pub mod outcome;
pub mod pipeline;
pub mod policy;
pub mod render;
pub mod select;
pub mod serve;

pub mod state;
pub mod store;
pub mod suggest;
pub mod testing;

pub use decision::Decision;
pub use engine::{Engine, EngineBuilder};
pub use error::Error;
pub use eval::EvalOptions;
pub use outcome::Outcome;
pub use pipeline::decide;
pub use policy::Policy;
pub use state::State;
