//! baton: a policy engine for handing conversation context between AI agent providers.
//!
//! The pipeline (DESIGN §1): [`state`] -> [`facts`] -> [`eval`] -> select -> render -> deliver.
#![deny(unsafe_code)]

pub mod cli;
pub mod coverage;
pub mod decision;
pub mod deliver;
pub mod diff;
pub mod eval;
pub mod explain;
pub mod facts;
pub mod fmt;
pub mod pipeline;
pub mod policy;
pub mod quality;
pub mod render;
pub mod schema;
pub mod select;
pub mod serve;

pub mod state;
pub mod store;
pub mod suggest;
pub mod testing;

pub use decision::Decision;
pub use eval::{decide, EvalOptions};
pub use policy::Policy;
pub use state::State;
