//! Test target `render` (`cargo test --test render`): rendering handoff documents: templates,
//! budgets, the summarizer pipeline. Each module is one file of tests/; the helpers the files share
//! are declared once below, and a file names them `crate::common` (docs/architecture.md#tests: how
//! to add one).

// The helpers this target's files share, compiled once (a file names them `crate::common`, ...).
mod common;

#[path = "render.rs"]
mod render;
#[path = "render_problems.rs"]
mod render_problems;
#[path = "summarizer_outside_lock.rs"]
mod summarizer_outside_lock;
#[path = "summarizer_pipeline.rs"]
mod summarizer_pipeline;
