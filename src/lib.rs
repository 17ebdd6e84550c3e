//! baton: a policy engine for handing conversation context between AI agent providers.
#![deny(unsafe_code)]

pub mod deliver;
pub mod state;
pub mod suggest;
