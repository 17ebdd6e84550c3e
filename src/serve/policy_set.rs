//! The policy set the service decides with: the compiled policy plus the template directory,
//! loaded and checked as a whole, swapped in atomically, and reloaded when its files change.
//!
//! A request takes one [`Arc<PolicySet>`] snapshot when it starts and uses it to the end, so
//! it sees either the old set or the new one, never a mix. A set that does not check is
//! rejected and the last good set keeps serving.

use crate::engine::Engine;
use crate::policy::{self, Diagnostic, Policy, PolicyError};
use crate::render::TemplateSet;
use notify_debouncer_mini::notify;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One checked generation of the policy and its templates.
#[derive(Debug)]
pub struct PolicySet {
    /// The checked policy of this generation.
    pub policy: Arc<Policy>,
    /// Templates read from the template directory (name -> text); embedded ones fill the rest.
    pub templates: BTreeMap<String, String>,
    /// The engine of this generation: the policy and its templates, compiled once. Every
    /// render of the generation uses these compiled templates, so a render never sees a
    /// half-edited template directory and nothing is written to disk.
    pub engine: Engine,
    /// 1 for the set loaded at start, +1 for every swap.
    pub generation: u64,
    /// Unix time in milliseconds when the set was swapped in.
    pub loaded_at_ms: u64,
}

impl PolicySet {
    /// The policy sources and template files the set was built from.
    pub fn files(&self) -> Vec<&str> {
        let sources = self.policy.sources.iter().map(|s| s.name.as_str());
        sources
            .chain(self.templates.keys().map(String::as_str))
            .collect()
    }

    /// `{"name": ..., "sha256": ...}`, the reference every decision-carrying response holds.
    pub fn reference(&self) -> Value {
        json!({"name": self.policy.name, "sha256": self.policy.sha256})
    }
}

/// The last reload that was refused.
#[derive(Debug, Clone, Serialize)]
pub struct Rejection {
    /// When (milliseconds since the epoch).
    pub at_ms: u64,
    /// Why the set was rejected.
    pub message: String,
    /// The checker's diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// The same rejection as the previous reload's (nothing changed since): not announced
    /// again, so one bad edit makes one `policy/rejected`.
    #[serde(skip)]
    pub repeated: bool,
}

/// The outcome of a reload that checked.
#[derive(Debug, Clone)]
pub struct Reloaded {
    /// The new set.
    pub set: Arc<PolicySet>,
    /// False when the files were unchanged (same policy sha256 and templates): nothing swapped.
    pub changed: bool,
}

/// Holds the current set and reloads it.
#[derive(Debug)]
pub struct PolicyHolder {
    spec: String,
    templates_dir: Option<PathBuf>,
    document_root: Option<PathBuf>,
    current: RwLock<Arc<PolicySet>>,
    rejection: Mutex<Option<Rejection>>,
    /// Whether the last reload was rejected (and with what), so that the same rejection is
    /// announced once.
    rejected_since_load: Mutex<Option<(String, Vec<Diagnostic>)>>,
    /// Serialises reloads so two cannot interleave their check and swap.
    reloading: Mutex<()>,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn io_diag(path: &Path, what: &str, e: &std::io::Error) -> PolicyError {
    PolicyError::single(Diagnostic::file_level(
        &path.display().to_string(),
        format!("{what}: {}", crate::state::io_reason(e)),
    ))
}

/// Read every `*.j2` in `dir` and check that each parses; errors carry file and line.
fn load_templates(dir: &Path) -> Result<BTreeMap<String, String>, PolicyError> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| io_diag(dir, "cannot read template directory", &e))?;
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
            .map_err(|e| {
                PolicyError::single(Diagnostic::file_level(
                    &path.display().to_string(),
                    format!("cannot read template: {e}"),
                ))
            })?;
        out.insert(name.to_string(), text);
    }
    let mut env = minijinja::Environment::new();
    let mut diags = Vec::new();
    for (name, text) in &out {
        if let Err(e) = env.add_template(name, text) {
            let mut d = Diagnostic::file_level(
                &dir.join(name).display().to_string(),
                e.detail()
                    .map(str::to_string)
                    .unwrap_or_else(|| e.kind().to_string()),
            );
            d.line = e.line().unwrap_or(1);
            diags.push(d);
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(PolicyError { diagnostics: diags })
    }
}

/// Load and check the whole set: the policy, the templates, and that the template the policy
/// names exists; compile it into an engine.
fn build(
    spec: &str,
    templates_dir: Option<&Path>,
    document_root: Option<PathBuf>,
) -> Result<(Engine, BTreeMap<String, String>), PolicyError> {
    let policy = Arc::new(policy::load(spec)?);
    let templates = match templates_dir {
        Some(d) => load_templates(d)?,
        None => BTreeMap::new(),
    };
    let name = policy.name.clone();
    let compiled = TemplateSet::from_texts(templates.clone(), templates_dir.map(Path::to_path_buf))
        .map_err(|e| {
            let file = templates_dir.map_or(e.template.clone(), |d| {
                d.join(&e.template).display().to_string()
            });
            let mut d = Diagnostic::file_level(&file, e.message);
            d.line = e.line.max(1);
            PolicyError::single(d)
        })?;
    let engine = Engine::from_parts(policy, compiled, document_root).map_err(|e| match e {
        crate::Error::Policy(p) => p,
        other => PolicyError::single(Diagnostic::file_level(&name, crate::error::located(&other))),
    })?;
    Ok((engine, templates))
}

impl PolicyHolder {
    /// Load the first set; the service does not start without one that checks.
    pub fn load(
        spec: &str,
        templates_dir: Option<PathBuf>,
        document_root: Option<PathBuf>,
    ) -> Result<PolicyHolder, PolicyError> {
        let (engine, templates) = build(spec, templates_dir.as_deref(), document_root.clone())?;
        let set = Self::make(engine, templates, 1);
        Ok(PolicyHolder {
            spec: spec.to_string(),
            templates_dir,
            document_root,
            current: RwLock::new(Arc::new(set)),
            rejection: Mutex::new(None),
            rejected_since_load: Mutex::new(None),
            reloading: Mutex::new(()),
        })
    }

    fn make(engine: Engine, templates: BTreeMap<String, String>, generation: u64) -> PolicySet {
        PolicySet {
            policy: engine.shared_policy(),
            templates,
            engine,
            generation,
            loaded_at_ms: now_ms(),
        }
    }

    /// The set new requests use.
    pub fn current(&self) -> Arc<PolicySet> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-read and check the whole set; swap it in if it checks and differs. Blocking (file
    /// I/O and parsing): call it from a blocking task.
    pub fn reload(&self) -> Result<Reloaded, Rejection> {
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.current();
        let built = build(
            &self.spec,
            self.templates_dir.as_deref(),
            self.document_root.clone(),
        )
        .map(|(engine, templates)| {
            if cur.policy.sha256 == engine.policy().sha256 && cur.templates == templates {
                None
            } else {
                Some(Self::make(engine, templates, cur.generation.saturating_add(1))
)
            }
        });
        if built.is_ok() {
            *self
                .rejected_since_load
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
        }
        match built {
            Ok(None) => Ok(Reloaded {
                set: cur,
                changed: false,
            }),
            Ok(Some(set)) => {
                let set = Arc::new(set);
                match self.current.write() {
                    Ok(mut g) => *g = set.clone(),
                    Err(p) => *p.into_inner() = set.clone(),
                }
                Ok(Reloaded { set, changed: true })
            }
            Err(e) => {
                let message = format!(
                    "policy set rejected; still serving the last good set: {}",
                    e.diagnostics
                        .first()
                        .map(|d| d.to_string())
                        .unwrap_or_default()
                );
                let seen = (message.clone(), e.diagnostics.clone());
                let mut last = self
                    .rejected_since_load
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let repeated = last.as_ref() == Some(&seen);
                *last = Some(seen);
                drop(last);
                let r = Rejection {
                    at_ms: now_ms(),
                    message,
                    diagnostics: e.diagnostics,
                    repeated,
                };
                *self.rejection.lock().unwrap_or_else(|p| p.into_inner()) = Some(r.clone());
                Err(r)
            }
        }
    }

    /// `policy/status`: the set serving now and the last rejection.
    pub fn status(&self) -> Value {
        let cur = self.current();
        let rejection = self
            .rejection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        json!({
            "name": cur.policy.name,
            "sha256": cur.policy.sha256,
            "spec": self.spec,
            "templates_dir": self.templates_dir,
            "files": cur.files(),
            "generation": cur.generation,
            "loaded_at_ms": cur.loaded_at_ms,
            "warnings": cur.policy.warnings,
            "last_rejection": rejection,
        })
    }

    /// Directories to watch: the policy file's directory (or the policy directory) and the
    /// template directory. A shipped profile has nothing to watch.
    pub fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        let p = Path::new(&self.spec);
        if p.is_dir() {
            dirs.push(p.to_path_buf());
        } else if p.is_file() {
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
            dirs.push(parent.unwrap_or(Path::new(".")).to_path_buf());
        }
        if let Some(t) = &self.templates_dir {
            if !dirs.contains(t) {
                dirs.push(t.clone());
            }
        }
        dirs
    }
}

/// Watch `dirs` and call `on_change` once per burst of changes (debounced by `quiet`).
/// The returned value stops watching when dropped.
///
/// Only changes count: the watcher also reports files being opened and read (inotify's
/// `IN_OPEN`, `IN_CLOSE_NOWRITE`), and a reload reads every file of the set, so counting
/// those made each reload trigger the next, forever (five `policy/rejected` a second for one
/// bad edit).
pub fn watch(
    dirs: &[PathBuf],
    quiet: Duration,
    on_change: impl Fn() + Send + 'static,
) -> Result<Watcher, notify::Error> {
    use notify::event::{AccessKind, AccessMode};
    use notify::{EventKind, RecursiveMode, Watcher as _};
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let (tx, rx) = channel::<()>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let change = match res {
            Ok(ev) => match ev.kind {
                // A file written and closed is a change; opening or reading one is not.
                EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                EventKind::Access(_) => false,
                _ => true,
            },
            // An error (events lost): reload to be sure.
            Err(_) => true,
        };
        if change {
            let _ = tx.send(());
        }
    })?;
    for d in dirs {
        watcher.watch(d, RecursiveMode::NonRecursive)?;
    }
    // Debounce: after a change, wait until `quiet` passes without another, then reload once.
    // The thread ends when the watcher (and with it the sender) is dropped.
    std::thread::Builder::new()
        .name("baton-policy-watch".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                loop {
                    match rx.recv_timeout(quiet) {
                        Ok(()) => continue,
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                on_change();
            }
        })
        .map_err(notify::Error::io)?;
    Ok(Watcher { _watcher: watcher })
}

/// A running file watcher.
pub struct Watcher {
    _watcher: notify::RecommendedWatcher,
}
