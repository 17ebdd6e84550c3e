//! [`Engine`]: the whole main path behind one owning object, like minijinja's
//! `Environment`. It is built once from a policy (file, directory, shipped profile name or
//! text) and a template set, both checked and compiled at build time, and then decides,
//! selects and renders for any number of states, from any number of threads.
//!
//! The `baton` command, the service and the store all decide through an engine (or the
//! [`crate::pipeline`] functions it calls), so the same state and target give the same
//! decision everywhere: summaries are always sized by the policy's own selection rules.

use crate::decision::Decision;
use crate::error::Error;
use crate::eval::DecisionContext;
use crate::ids::DocumentRoot;
use crate::outcome::Outcome;
use crate::pipeline::{Plan, Setup};
use crate::policy::{self, Diagnostic, Policy, PolicyError};
use crate::render::{RenderOptions, TemplateSet};
use crate::state::State;
use crate::summarize::{Deterministic, Summarizer};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A checked, compiled policy and template set: decide, render, explain.
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: build one and share it.
///
/// ```
/// let engine = baton::Engine::new("default")?;
/// let state = baton::State::load("examples/seed-switch.yaml")?;
/// let decision = engine.decide(&state, Some("codex"))?;
/// assert_eq!(decision.strategy.as_str(), "delta_existing");
/// let outcome = engine.run(&state, Some("codex"))?;
/// let handoff = outcome.rendered.expect("a delta handoff has a document");
/// assert!(handoff.document.contains("Handoff"));
/// println!("{}", engine.explain(&decision));
/// # Ok::<(), baton::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    policy: Arc<Policy>,
    templates: TemplateSet,
    document_root: Option<PathBuf>,
    /// `document_root` resolved once, when the engine was built.
    root: DocumentRoot,
}

/// What a decision is made in besides the policy, the state and the target: empty for a
/// state file (`Context::default()`); the store passes a window's history, a merge-back's
/// numbering or a waiting handoff through its own operations.
#[derive(Debug, Clone, Default)]
pub struct Context {
    inner: DecisionContext,
}

impl Context {
    /// The context of a state file: nothing besides the state.
    pub fn new() -> Context {
        Context::default()
    }
}

/// Where an engine's policy comes from.
#[derive(Debug, Clone)]
enum PolicySource {
    /// A spec of a kind: a shipped profile name, a file or a directory (see [`Engine::new`]).
    Spec(String, crate::policy::source::SpecKind),
    /// A file or a directory of `*.policy` files.
    Path(PathBuf),
    /// Policy text held in memory, shown in diagnostics as `name`.
    Text { name: String, text: String },
}

/// Builds an [`Engine`]: a policy, optional template overrides, an optional off-band root.
#[derive(Debug, Clone)]
pub struct EngineBuilder {
    policy: PolicySource,
    templates_dir: Option<PathBuf>,
    templates: Option<BTreeMap<String, String>>,
    document_root: Option<PathBuf>,
}

impl EngineBuilder {
    /// Override embedded templates by file name with every `*.j2` file of `dir`.
    pub fn templates_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.templates_dir = Some(dir.into());
        self
    }

    /// Override embedded templates with these texts (file name -> template text).
    pub fn templates(mut self, templates: BTreeMap<String, String>) -> Self {
        self.templates = Some(templates);
        self
    }

    /// The root of the off-band document directory (it appears in `delivery.document` and
    /// the pre-grant). Default: `<tmp>/baton-<uid>`; the library reads no environment.
    pub fn document_root(mut self, dir: Option<PathBuf>) -> Self {
        self.document_root = dir;
        self
    }

    /// Load, check and compile the policy and the templates.
    pub fn build(self) -> Result<Engine, Error> {
        let policy = match &self.policy {
            PolicySource::Spec(spec, kind) => policy::load_kind(spec, *kind)?,
            PolicySource::Path(path) => {
                let Some(spec) = path.to_str() else {
                    return Err(Error::Policy(PolicyError::single(Diagnostic::file_level(
                        &path.display().to_string(),
                        "a policy path must be UTF-8",
                    ))));
                };
                policy::load_kind(spec, crate::policy::source::SpecKind::Path)?
            }
            PolicySource::Text { name, text } => policy::load_text(name, text)?,
        };
        let templates = match (self.templates, self.templates_dir) {
            (Some(texts), dir) => TemplateSet::from_texts(texts, dir)?,
            (None, dir) => TemplateSet::load(dir.as_deref())?,
        };
        Engine::from_parts(Arc::new(policy), templates, self.document_root)
    }
}

impl Engine {
    /// The engine of `policy`, with the embedded templates: a shipped profile name first
    /// (exactly `default`, `t3code`, `t3code-legacy` or `mcode`; a file or directory of that
    /// name in the working directory never shadows it, write `./default` for one), else a
    /// directory of `*.policy` files, else a policy file. This is what `baton --policy`
    /// takes (docs/cli.md#choosing-a-policy). [`Engine::shipped`] and [`Engine::from_path`]
    /// say which one they mean.
    pub fn new(policy: &str) -> Result<Engine, Error> {
        Engine::builder(policy).build()
    }

    /// The engine of a shipped profile (`default`, `t3code`, `t3code-legacy`, `mcode`); never
    /// reads the file system.
    pub fn shipped(name: &str) -> Result<Engine, Error> {
        Engine::builder_shipped(name).build()
    }

    /// The engine of a policy file or of a directory of `*.policy` files; never a shipped
    /// profile.
    pub fn from_path(path: impl AsRef<std::path::Path>) -> Result<Engine, Error> {
        Engine::builder_path(path).build()
    }

    /// The engine of policy text held in memory (`name` is shown in diagnostics and traces).
    pub fn from_text(name: &str, text: &str) -> Result<Engine, Error> {
        Engine::builder_from_text(name, text).build()
    }

    /// A builder for the policy `spec`, read as [`Engine::new`] reads it.
    pub fn builder(spec: &str) -> EngineBuilder {
        Engine::builder_of(PolicySource::Spec(
            spec.to_string(),
            crate::policy::source::SpecKind::Any,
        ))
    }

    /// A builder for a shipped profile (see [`Engine::shipped`]).
    pub fn builder_shipped(name: &str) -> EngineBuilder {
        Engine::builder_of(PolicySource::Spec(
            name.to_string(),
            crate::policy::source::SpecKind::Shipped,
        ))
    }

    /// A builder for a policy file or directory (see [`Engine::from_path`]).
    pub fn builder_path(path: impl AsRef<std::path::Path>) -> EngineBuilder {
        Engine::builder_of(PolicySource::Path(path.as_ref().to_path_buf()))
    }

    fn builder_of(policy: PolicySource) -> EngineBuilder {
        EngineBuilder {
            policy,
            templates_dir: None,
            templates: None,
            document_root: None,
        }
    }

    /// A builder for policy text held in memory.
    pub fn builder_from_text(name: &str, text: &str) -> EngineBuilder {
        Engine::builder_of(PolicySource::Text {
            name: name.to_string(),
            text: text.to_string(),
        })
    }

    /// An engine from an already checked policy and compiled templates. Fails when the
    /// policy names a template the set does not have.
    pub fn from_parts(
        policy: Arc<Policy>,
        templates: TemplateSet,
        document_root: Option<PathBuf>,
    ) -> Result<Engine, Error> {
        if let Some(t) = &policy.template {
            if !templates.contains(t) {
                let file = policy.sources.first().map_or(&policy.name, |s| &s.name);
                return Err(Error::Policy(PolicyError::single(Diagnostic::file_level(
                    file,
                    format!("the policy asks for template `{t}`, which is neither in the template directory nor embedded"),
                ))));
            }
        }
        let root = DocumentRoot::resolve(document_root.clone());
        Ok(Engine {
            inner: Arc::new(Inner {
                policy,
                templates,
                document_root,
                root,
            }),
        })
    }

    /// The checked policy (its name, sha256, sources and warnings).
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The checked policy, shared.
    pub fn shared_policy(&self) -> Arc<Policy> {
        self.inner.policy.clone()
    }

    /// The compiled templates.
    pub fn templates(&self) -> &TemplateSet {
        &self.inner.templates
    }

    /// The off-band root decisions are made for (`None`: `<tmp>/baton-<uid>`).
    pub fn document_root(&self) -> Option<&std::path::Path> {
        self.inner.document_root.as_deref()
    }

    unstable_pub! {
        /// The render options that render with this engine's compiled templates.
        fn render_options(&self) -> RenderOptions {
            RenderOptions {
                templates: Some(self.inner.templates.clone()),
                templates_dir: self.inner.templates.dir().map(|d| d.to_path_buf()),
                ..RenderOptions::default()
            }
        }
    }

    /// The setup of a decision for `target` in `context` with this engine's resolved
    /// off-band root and compiled templates.
    pub(crate) fn setup(&self, target: Option<&str>, context: &Context) -> Setup {
        self.setup_in(target, &context.inner)
    }

    /// [`Engine::setup`] in a crate-internal decision context (the store's window, merge-back
    /// numbering and waiting handoff): the engine's root, templates and policy, nothing else.
    pub(crate) fn setup_in(&self, target: Option<&str>, context: &DecisionContext) -> Setup {
        Setup {
            target: target.map(str::to_string),
            root: self.inner.root.clone(),
            context: context.clone(),
            render: self.render_options(),
        }
    }

    /// The first of the two calls every caller makes: decide how the requested run of
    /// `state` starts on `target` (`None`: the state's `request.provider`) in `context`.
    /// Nothing is selected, summarized, fitted or rendered yet: pass the plan to
    /// [`Engine::finish`].
    pub fn plan<'a>(
        &'a self,
        state: &'a State,
        target: Option<&str>,
        context: &Context,
    ) -> Result<Plan<'a>, Error> {
        Ok(crate::pipeline::plan(
            self.policy(),
            state,
            &self.setup(target, context),
        )?)
    }

    /// The second call: select the handoff's items, summarize them with `summarizer` when
    /// the policy names an external source ([`crate::CommandRunner`] runs its command,
    /// [`crate::summarize::Deterministic`] runs nothing), fit the handoff to its budget
    /// (degradation steps; delivery moved off-band, or `unsupported`, when what the next
    /// provider must act on cannot reach it otherwise) and render it.
    pub fn finish(&self, plan: Plan<'_>, summarizer: &dyn Summarizer) -> Result<Outcome, Error> {
        Ok(crate::pipeline::finish(plan, summarizer)?)
    }

    /// Decide how the requested run of `state` starts on `target` (`None`: the state's
    /// `request.provider`): [`Engine::plan`] and [`Engine::finish`] with no external
    /// summarizer, so the decision is fitted to its budget exactly as [`Engine::run`] and the
    /// store decide.
    pub fn decide(&self, state: &State, target: Option<&str>) -> Result<Decision, Error> {
        let plan = self.plan(state, target, &Context::default())?;
        Ok(self.finish(plan, &Deterministic)?.decision)
    }

    /// Decide, then select, summarize (the policy's external command, when it names one)
    /// and render the handoff when the decision needs one.
    pub fn run(&self, state: &State, target: Option<&str>) -> Result<Outcome, Error> {
        let plan = self.plan(state, target, &Context::default())?;
        self.finish(plan, &crate::deliver::CommandRunner)
    }

    /// Select, summarize and render the handoff of a `decision` this engine made for
    /// `state` (and the caller may have adjusted). A decision that needs no handoff comes
    /// back with no document.
    pub fn render(&self, state: &State, decision: &Decision) -> Result<Outcome, Error> {
        let plan = self
            .plan(state, Some(&decision.target), &Context::default())?
            .with_decision(decision.clone());
        self.finish(plan, &crate::deliver::CommandRunner)
    }

    /// The human explanation of a decision (what `baton explain` prints, its last line
    /// counting the rules evaluated where the command names `--verbose`).
    pub fn explain(&self, decision: &Decision) -> String {
        crate::explain::render(decision, false)
    }

    /// [`Engine::explain`] with every rule evaluated and the values it read
    /// (`baton explain --verbose`).
    pub fn explain_verbose(&self, decision: &Decision) -> String {
        crate::explain::render(decision, true)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn engine_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<super::Engine>();
    }
}
