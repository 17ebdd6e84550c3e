//! Test target `engine` (`cargo test --test engine`): deciding: state and policy in, decisions,
//! facts and diagnostics out; the public API; the policy language's errors, limits and traps; the
//! schemas and JSON shapes. Each module is one file of tests/; the helpers the files share are
//! declared once below, and a file names them `crate::common` (docs/architecture.md#tests: how to
//! add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;
mod lsp_support;
mod serve_support;

#[path = "decisions.rs"]
mod decisions;
#[path = "diagnostics.rs"]
mod diagnostics;
#[path = "json_shapes.rs"]
mod json_shapes;
#[path = "limits_policy.rs"]
mod limits_policy;
#[path = "limits_state.rs"]
mod limits_state;
#[path = "one_path.rs"]
mod one_path;
#[path = "policy_errors.rs"]
mod policy_errors;
#[path = "policy_spec.rs"]
mod policy_spec;
#[path = "policy_suites.rs"]
mod policy_suites;
#[path = "policy_traps.rs"]
mod policy_traps;
#[path = "providers.rs"]
mod providers;
#[path = "public_api.rs"]
mod public_api;
#[path = "schema.rs"]
mod schema;
#[path = "state_errors.rs"]
mod state_errors;
#[path = "workspace.rs"]
mod workspace;
