//! The compiled template set: the embedded templates, overridden by file name by the `*.j2`
//! files of a template directory, read and compiled once. Renders share it (it is an `Arc`
//! inside), so no render reads or compiles a template.

use super::{inline_template_for, template_error, Reads, RenderError, EMBEDDED};
use minijinja::{Environment, UndefinedBehavior};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Compiled templates, cheap to clone and share across threads.
#[derive(Debug, Clone)]
pub struct TemplateSet {
    env: Arc<Environment<'static>>,
    /// Per template: what its source names and its first-turn prompt's template, worked out
    /// once here rather than on every render.
    info: Arc<BTreeMap<String, TemplateInfo>>,
    /// The texts read from the template directory (file name -> text).
    overrides: Arc<BTreeMap<String, String>>,
    dir: Option<PathBuf>,
}

impl Default for TemplateSet {
    fn default() -> Self {
        TemplateSet::embedded()
    }
}

fn base_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(true);
    env
}

impl TemplateSet {
    /// The embedded templates only, compiled once per process and shared (a render without
    /// an engine's templates compiles nothing).
    pub fn embedded() -> TemplateSet {
        static EMBEDDED_SET: OnceLock<TemplateSet> = OnceLock::new();
        EMBEDDED_SET
            .get_or_init(|| match TemplateSet::from_texts(BTreeMap::new(), None) {
                Ok(set) => set,
                // The embedded templates are compiled in every test run; keep serving without
                // them rather than panic if one ever failed.
                Err(_) => TemplateSet {
                    env: Arc::new(base_environment()),
                    info: Arc::default(),
                    overrides: Arc::default(),
                    dir: None,
                },
            })
            .clone()
    }

    /// The embedded templates overridden by every `*.j2` file of `dir` (when given); every
    /// template is compiled now, and the first error names the file and line.
    pub fn load(dir: Option<&Path>) -> Result<TemplateSet, RenderError> {
        let Some(dir) = dir else {
            return Ok(TemplateSet::embedded());
        };
        TemplateSet::from_texts(read_dir(dir)?, Some(dir.to_path_buf()))
    }

    /// Compile the embedded templates overridden by `overrides` (file name -> text); `dir`
    /// is where they were read from, if anywhere.
    pub fn from_texts(
        overrides: BTreeMap<String, String>,
        dir: Option<PathBuf>,
    ) -> Result<TemplateSet, RenderError> {
        let mut env = base_environment();
        for (name, text) in EMBEDDED {
            if !overrides.contains_key(*name) {
                env.add_template(name, text)
                    .map_err(|e| template_error(name, &e))?;
            }
        }
        for (name, text) in &overrides {
            env.add_template_owned(name.clone(), text.clone())
                .map_err(|e| template_error(name, &e))?;
        }
        // `templates()` holds the environment's template store while it iterates: look the
        // first-turn templates up afterwards.
        let reads: Vec<(String, Reads)> = env
            .templates()
            .map(|(name, t)| (name.to_string(), Reads::of(t.source())))
            .collect();
        let info = reads
            .into_iter()
            .map(|(name, reads)| {
                let inline = inline_template_for(&env, &name);
                (name, TemplateInfo { reads, inline })
            })
            .collect();
        Ok(TemplateSet {
            env: Arc::new(env),
            info: Arc::new(info),
            overrides: Arc::new(overrides),
            dir,
        })
    }

    /// The templates read from the directory (file name -> text).
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The directory the overrides came from.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Whether a template of this name exists (overridden or embedded).
    pub fn contains(&self, name: &str) -> bool {
        self.env.get_template(name).is_ok()
    }

    pub(crate) fn env(&self) -> &Environment<'static> {
        &self.env
    }

    /// What template `name` names (everything when there is no such template).
    pub(crate) fn reads(&self, name: &str) -> Reads {
        self.info.get(name).map_or(Reads::ALL, |i| i.reads)
    }

    /// The first-turn prompt's template for document template `name`.
    pub(crate) fn inline_for(&self, name: &str) -> String {
        match self.info.get(name) {
            Some(i) => i.inline.clone(),
            None => inline_template_for(&self.env, name),
        }
    }
}

/// What the set knows about one of its templates.
#[derive(Debug, Clone)]
struct TemplateInfo {
    reads: Reads,
    inline: String,
}

/// Read every `*.j2` regular file in `dir`.
fn read_dir(dir: &Path) -> Result<BTreeMap<String, String>, RenderError> {
    let io = |path: &Path, what: &str, e: std::io::Error| RenderError {
        template: path.display().to_string(),
        line: 0,
        message: format!("{what}: {}", crate::state::io_reason(&e)),
    };
    let io_input = |path: &Path, what: &str, e: crate::input::InputError| RenderError {
        template: path.display().to_string(),
        line: 0,
        message: format!("{what}: {e}"),
    };
    let rd = std::fs::read_dir(dir).map_err(|e| io(dir, "cannot read template directory", e))?;
    let mut out = BTreeMap::new();
    for entry in rd.filter_map(|e| e.ok()) {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".j2") || !path.is_file() {
            continue;
        }
        let text = crate::input::read_to_string(&path, crate::input::MAX_TEXT_BYTES, " (64 MiB)")
            .map_err(|e| io_input(&path, "cannot read template", e))?;
        out.insert(name.to_string(), text);
    }
    Ok(out)
}
