//! Loading a [`State`] through the type itself, for library users.

use super::{Format, State, StateError};
use std::path::Path;

impl State {
    /// Load and validate a state file (YAML, or JSON by extension).
    pub fn load(path: impl AsRef<Path>) -> Result<State, StateError> {
        super::load_file(path.as_ref())
    }

    /// Parse and validate a YAML state; `name` is shown in error messages.
    pub fn from_yaml(text: &str, name: &str) -> Result<State, StateError> {
        super::parse_str(text, Format::Yaml, name)
    }

    /// Parse and validate a JSON state; `name` is shown in error messages.
    pub fn from_json(text: &str, name: &str) -> Result<State, StateError> {
        super::parse_str(text, Format::Json, name)
    }
}
