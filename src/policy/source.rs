//! Finding policy sources: a file, a directory of `*.policy` files, or a shipped profile, plus
//! every base they `extends`. Shipped policies are embedded in the binary.

use super::ast::PolicyFile;
use super::diag::{Diagnostic, PolicyError, Source};
use super::parser;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Policies shipped with baton, embedded in the binary: (profile name, file name, text).
pub const SHIPPED: &[(&str, &str, &str)] = &[
    (
        "default",
        "default.policy",
        include_str!("../../policies/default.policy"),
    ),
    (
        "t3code",
        "t3code.policy",
        include_str!("../../policies/t3code.policy"),
    ),
    (
        "t3code-legacy",
        "t3code-legacy.policy",
        include_str!("../../policies/t3code-legacy.policy"),
    ),
    (
        "mcode",
        "mcode.policy",
        include_str!("../../policies/mcode.policy"),
    ),
];

/// Largest policy source file read: 16 MiB (the shipped policies are a few KB).
pub const MAX_POLICY_BYTES: u64 = 16 * 1024 * 1024;

/// Longest chain of `extends` (a file extending a file extending ...): 32 files.
pub const MAX_EXTENDS_DEPTH: usize = 32;

/// Names of the shipped profiles.
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(n, _, _)| *n).collect()
}

fn shipped(name: &str) -> Option<(&'static str, &'static str)> {
    let stem = name.strip_suffix(".policy").unwrap_or(name);
    SHIPPED
        .iter()
        .find(|(n, _, _)| *n == stem)
        .map(|(_, f, t)| (*f, *t))
}

/// Where a source came from, for resolving its `extends`.
#[derive(Debug, Clone)]
enum Origin {
    File(PathBuf),
    Shipped,
}

/// The loaded sources and the parsed files, bases before the files that extend them.
pub struct Loaded {
    pub sources: Vec<Source>,
    pub files: Vec<PolicyFile>,
}

#[derive(Default)]
struct Loader {
    sources: Vec<Source>,
    origins: Vec<Origin>,
    files: Vec<PolicyFile>,
    done: HashSet<String>,
    /// (key, name shown to people) of the sources being loaded, outermost first.
    stack: Vec<(String, String)>,
    /// Texts read instead of the files at these keys (an editor's unsaved buffers).
    overlay: BTreeMap<String, String>,
}

/// The key a file is loaded under: its canonical path, else the path as given.
fn file_key(path: &Path) -> String {
    std::fs::canonicalize(path)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// The policy files of a directory: every regular file named `*.policy`, sorted by path
/// (the order a directory set loads in). `baton check` and `baton fmt` list files with it too.
pub fn policy_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.extension().and_then(|e| e.to_str()) == Some("policy") && p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// What a policy spec names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecKind {
    /// A shipped profile name first (`default`, `t3code`, ...: exactly a name of
    /// [`shipped_names`], never shadowed by a file or directory of that name in the working
    /// directory; write `./default` for one), else a directory of `*.policy` files, else a
    /// file, else a shipped profile's file name (`default.policy`). What `--policy` takes.
    Any,
    /// A file or a directory of `*.policy` files, never a shipped profile.
    Path,
    /// A shipped profile name (`default` or `default.policy`), never the file system.
    Shipped,
}

/// Load a policy set from a spec: a shipped profile name, a directory, or a file
/// ([`SpecKind::Any`]).
pub fn load(spec: &str) -> Result<Loaded, PolicyError> {
    load_in(spec, SpecKind::Any, Loader::default())
}

/// [`load`] of a spec of a given kind.
pub fn load_kind(spec: &str, kind: SpecKind) -> Result<Loaded, PolicyError> {
    load_in(spec, kind, Loader::default())
}

/// [`load`] with `l`, whose overlay (if any) stands in for files on disk.
fn load_in(spec: &str, kind: SpecKind, mut l: Loader) -> Result<Loaded, PolicyError> {
    let path = Path::new(spec);
    let exact_shipped = SHIPPED.iter().any(|(n, _, _)| *n == spec);
    if kind == SpecKind::Shipped || (kind == SpecKind::Any && exact_shipped) {
        let Some((file, text)) = shipped(spec) else {
            return Err(PolicyError::single(Diagnostic::file_level(
                spec,
                format!(
                    "no shipped profile named `{spec}` (shipped profiles: {})",
                    shipped_names().join(", ")
                ),
            )));
        };
        l.load_text(file.to_string(), text.to_string(), Origin::Shipped, None)?;
        return Ok(l.into_loaded());
    }
    if path.is_dir() {
        let entries = policy_files(path).map_err(|e| {
            PolicyError::single(Diagnostic::file_level(
                spec,
                format!(
                    "cannot read policy directory: {}",
                    crate::state::io_reason(&e)
                ),
            ))
        })?;
        if entries.is_empty() {
            return Err(PolicyError::single(Diagnostic::file_level(
                spec,
                "no `*.policy` files in this directory",
            )));
        }
        for e in entries {
            l.load_file(&e, None)?;
        }
    } else if path.is_file() || l.overlay.contains_key(&file_key(path)) {
        l.load_file(path, None)?;
    } else if let Some((file, text)) = shipped(spec).filter(|_| kind == SpecKind::Any) {
        l.load_text(file.to_string(), text.to_string(), Origin::Shipped, None)?;
    } else if kind == SpecKind::Path {
        return Err(PolicyError::single(Diagnostic::file_level(
            spec,
            "no policy file or directory at this path",
        )));
    } else {
        return Err(PolicyError::single(Diagnostic::file_level(
            spec,
            format!(
                "no policy file, directory or shipped profile named `{spec}` (shipped profiles: {})",
                shipped_names().join(", ")
            ),
        )));
    }
    Ok(l.into_loaded())
}

/// [`load`] with some files' texts given in memory: a file named in `overlay` (the open
/// buffers of an editor) is read from there instead of the disk, whether it is the spec
/// itself, a file of the spec's directory or a base it `extends`.
pub fn load_overlay(spec: &str, overlay: &BTreeMap<PathBuf, String>) -> Result<Loaded, PolicyError> {
    let overlay: BTreeMap<String, String> = overlay
        .iter()
        .map(|(p, t)| (file_key(p), t.clone()))
        .collect();
    load_in(
        spec,
        SpecKind::Any,
        Loader {
            overlay,
            ..Loader::default()
        },
    )
}

/// Load a policy set from text already in memory (tests, the service).
pub fn load_text(name: &str, text: &str) -> Result<Loaded, PolicyError> {
    let mut l = Loader::default();
    l.load_text(
        name.to_string(),
        text.to_string(),
        Origin::File(PathBuf::from(name)),
        None,
    )?;
    Ok(l.into_loaded())
}

impl Loader {
    fn into_loaded(self) -> Loaded {
        Loaded {
            sources: self.sources,
            files: self.files,
        }
    }

    fn load_file(
        &mut self,
        path: &Path,
        from: Option<(usize, super::ast::Span)>,
    ) -> Result<(), PolicyError> {
        let name = path.display().to_string();
        let key = file_key(path);
        if self.done.contains(&key) {
            return Ok(());
        }
        if let Some(text) = self.overlay.get(&key).cloned() {
            return self.load_keyed(key, name, text, Origin::File(path.to_path_buf()), from);
        }
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.len() > MAX_POLICY_BYTES {
                let msg = format!(
                    "policy `{name}` is {} bytes, over the policy size limit of {MAX_POLICY_BYTES} bytes (16 MiB)",
                    meta.len()
                );
                return Err(self.error_at(from, &name, msg));
            }
        }
        // Bounded while reading, and only a regular file (a device or a FIFO is refused).
        let bytes = crate::input::read(path, MAX_POLICY_BYTES, " (16 MiB, the policy size limit)")
            .map_err(|e| {
                let msg = format!("cannot read policy `{name}`: {e}");
                self.error_at(from, &name, msg)
            })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let msg = format!(
                "policy `{name}` is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            );
            self.error_at(from, &name, msg)
        })?;
        self.load_keyed(key, name, text, Origin::File(path.to_path_buf()), from)
    }

    fn load_text(
        &mut self,
        name: String,
        text: String,
        origin: Origin,
        from: Option<(usize, super::ast::Span)>,
    ) -> Result<(), PolicyError> {
        let key = format!("shipped:{name}");
        self.load_keyed(key, name, text, origin, from)
    }

    fn error_at(
        &self,
        from: Option<(usize, super::ast::Span)>,
        file: &str,
        msg: String,
    ) -> PolicyError {
        match from {
            Some((_, span)) => PolicyError::single(Diagnostic::new(
                &self.sources,
                super::diag::Severity::Error,
                span,
                msg,
            )),
            None => PolicyError::single(Diagnostic::file_level(file, msg)),
        }
    }

    fn load_keyed(
        &mut self,
        key: String,
        name: String,
        text: String,
        origin: Origin,
        from: Option<(usize, super::ast::Span)>,
    ) -> Result<(), PolicyError> {
        if self.done.contains(&key) {
            return Ok(());
        }
        if self.stack.iter().any(|(k, _)| *k == key) {
            // Names as the user wrote them, not the canonical paths used as keys.
            let chain = self
                .stack
                .iter()
                .map(|(_, n)| n.clone())
                .collect::<Vec<_>>()
                .join(" -> ");
            return Err(self.error_at(from, &name, format!("`extends` cycle: {chain} -> {name}")));
        }
        if self.stack.len() >= MAX_EXTENDS_DEPTH {
            return Err(self.error_at(
                from,
                &name,
                format!("`extends` chain deeper than {MAX_EXTENDS_DEPTH} files"),
            ));
        }
        if text.len() as u64 > MAX_POLICY_BYTES {
            let msg = format!(
                "policy `{name}` is {} bytes, over the policy size limit of {MAX_POLICY_BYTES} bytes (16 MiB)",
                text.len()
            );
            return Err(self.error_at(from, &name, msg));
        }
        let index = self.sources.len();
        self.sources.push(Source {
            name: name.clone(),
            text: text.into(),
        });
        self.origins.push(origin.clone());
        let file = parser::parse(&self.sources, index)?;
        self.stack.push((key.clone(), name));
        for ext in &file.extends {
            let target = ext.node.clone();
            let here = Some((index, ext.span));
            let base_dir = match &origin {
                Origin::File(p) => p.parent().map(|d| d.to_path_buf()),
                Origin::Shipped => None,
            };
            let candidate = base_dir.map(|d| d.join(&target));
            match candidate {
                Some(c) if c.is_file() || self.overlay.contains_key(&file_key(&c)) => self.load_file(&c, here)?,
                _ => match shipped(&target) {
                    Some((f, t)) => {
                        self.load_text(f.to_string(), t.to_string(), Origin::Shipped, here)?
                    }
                    None => {
                        return Err(PolicyError::single(
                            Diagnostic::new(
                                &self.sources,
                                super::diag::Severity::Error,
                                ext.span,
                                format!("cannot find base policy `{target}`"),
                            )
                            .with_help(Some(format!(
                                "name a file relative to this one, or a shipped profile ({})",
                                shipped_names().join(", ")
                            ))),
                        ))
                    }
                },
            }
        }
        self.stack.pop();
        self.done.insert(key);
        self.files.push(file);
        Ok(())
    }
}

/// sha256 of the policy source set: every source's length and text, in load order.
pub fn sha256(sources: &[Source]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in sources {
        h.update((s.text.len() as u64).to_le_bytes());
        h.update(s.text.as_bytes());
    }
    let out = h.finalize();
    out.iter().map(|b| format!("{b:02x}")).collect()
}
