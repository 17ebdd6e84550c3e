//! What the lifecycle peer ports share: a store in a temporary directory, a thread written
//! in a few lines, and the operations the peer suites drive (dispatch with a message,
//! complete, fork, merge back, check a pre-grant).
#![allow(dead_code)]

use baton::deliver::{CheckRequest, GrantStore, PathArg};
use baton::policy::{self, Policy};
use baton::state::{self, Item, RunStatus, State};
use baton::store::{self, DispatchRequest, Dispatched, HandoffOptions, Store};
use std::path::{Path, PathBuf};

pub struct Db {
    _dir: tempfile::TempDir,
    pub docs: PathBuf,
    pub store: Store,
    pub policy: Policy,
}

/// A thread `id` whose runs are `runs` = (provider, user text, assistant text), each on the
/// provider's one provider thread (`C1` codex, `L1` claude, `U1` cursor).
pub fn thread(id: &str, runs: &[(&str, &str, &str)]) -> State {
    let pt = |p: &str| match p {
        "codex" => "C1",
        "claude" => "L1",
        _ => "U1",
    };
    let mut yaml =
        format!("version: 1\nthread: {{id: {id}, title: Peer port}}\nprovider_threads:\n");
    let mut seen: Vec<&str> = Vec::new();
    for (p, _, _) in runs {
        if !seen.contains(p) {
            seen.push(p);
            yaml += &format!(
                "  - {{id: {}, provider: {p}, model: m-{p}, runtime_mode: full_access, status: active}}\n",
                pt(p)
            );
        }
    }
    if seen.is_empty() {
        yaml = format!("version: 1\nthread: {{id: {id}, title: Peer port}}\n");
    }
    if !runs.is_empty() {
        yaml += "runs:\n";
    }
    for (i, (p, user, assistant)) in runs.iter().enumerate() {
        yaml += &format!(
            "  - ordinal: {}\n    provider: {p}\n    provider_thread: {}\n    items:\n      - {{kind: user_message, text: {user:?}}}\n      - {{kind: assistant_message, text: {assistant:?}}}\n",
            i + 1,
            pt(p)
        );
    }
    let first = runs.first().map(|r| r.0).unwrap_or("codex");
    yaml += &format!("request: {{provider: {first}}}\n");
    state::parse_str(&yaml, state::Format::Yaml, "peer.yaml").unwrap()
}

impl Db {
    pub fn new(state: State, profile: &str) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        let mut store = Store::open(&dir.path().join("b.db")).unwrap();
        store.import(&state).unwrap();
        Db {
            _dir: dir,
            docs,
            store,
            policy: policy::load(profile).unwrap(),
        }
    }

    /// The engine the store's operations take: the profile, the embedded templates, and
    /// documents under `docs`.
    pub fn engine(&self) -> baton::Engine {
        baton::Engine::from_parts(
            std::sync::Arc::new(self.policy.clone()),
            baton::TemplateSet::embedded(),
            Some(self.docs.clone()),
        )
        .unwrap()
    }

    pub fn import(&mut self, state: State) {
        self.store.import(&state).unwrap();
    }

    pub fn dispatch(&mut self, thread: &str, target: &str, message: &str) -> Dispatched {
        let req = DispatchRequest {
            thread: thread.into(),
            target: target.into(),
            message: Some(message.into()),
            ..Default::default()
        };
        let engine = self.engine();
        store::dispatch(&mut self.store, &engine, &req).unwrap()
    }

    /// Complete `run` with a user message and an assistant message.
    pub fn complete(&mut self, thread: &str, run: u32, user: &str, assistant: &str) {
        let items = vec![
            Item::UserMessage {
                id: None,
                text: user.into(),
            },
            Item::AssistantMessage {
                id: None,
                text: assistant.into(),
            },
        ];
        store::complete_run(&mut self.store, thread, run, items, RunStatus::Completed).unwrap();
    }

    /// Dispatch and complete one run (the user's message is the run's first item).
    pub fn turn(&mut self, thread: &str, target: &str, user: &str, assistant: &str) -> Dispatched {
        let d = self.dispatch(thread, target, user);
        self.complete(thread, d.run, user, assistant);
        d
    }

    pub fn fork(&mut self, thread: &str, at: u32, child: &str) {
        store::fork(&mut self.store, thread, at, Some(child)).unwrap();
    }

    pub fn merge_back(&mut self, child: &str) -> Dispatched {
        let opts = HandoffOptions::default();
        let engine = self.engine();
        store::merge_back(&mut self.store, &engine, child, &opts).unwrap()
    }

    pub fn load(&self, thread: &str) -> State {
        self.store.load(thread).unwrap()
    }

    /// Ask the pre-grant of (thread, run) about `tool` on `args`; an allow uses it.
    pub fn check(&mut self, thread: &str, run: u32, tool: &str, args: PathArg) -> bool {
        let req = CheckRequest {
            thread: thread.into(),
            run,
            tool: tool.into(),
            args,
        };
        baton::deliver::check(&mut self.store, &req).unwrap().allow
    }

    pub fn read(&mut self, thread: &str, run: u32, path: &Path) -> bool {
        self.check(thread, run, "Read", PathArg::Path(path.to_path_buf()))
    }

    pub fn grants_left(&self, thread: &str, run: u32) -> u32 {
        self.store
            .find(thread, run)
            .unwrap()
            .iter()
            .map(|g| g.uses_left)
            .sum()
    }
}

/// Every user and assistant text of a state's runs, one per line (what the thread shows).
pub fn conversation(s: &State) -> String {
    s.runs
        .iter()
        .filter(|r| r.status != RunStatus::RolledBack)
        .flat_map(|r| r.items.iter())
        .filter(|i| matches!(i.kind(), "user_message" | "assistant_message"))
        .map(|i| i.primary_text().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
