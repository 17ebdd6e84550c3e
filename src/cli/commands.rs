//! One function per command: arguments in, exit code out.

use super::{CheckArgs, DecideArgs, ExplainArgs, RenderArgs, StateSource};
use crate::engine::Engine;
use crate::policy::{self, Diagnostic, Policy};
use crate::state::State;
use std::path::Path;

pub(crate) const OK: u8 = 0;
pub(crate) const FAIL: u8 = 1;
pub(crate) const USAGE: u8 = 2;

pub(crate) fn load_policy(spec: &str) -> Result<Policy, u8> {
    match policy::load(spec) {
        Ok(p) => {
            for w in &p.warnings {
                super::report::diagnostic(w);
            }
            Ok(p)
        }
        Err(e) => {
            super::report::policy_error(&e);
            Err(FAIL)
        }
    }
}

/// The state of a deciding command: `--state FILE`, or `--thread ID` from the database
/// (`command` names the command in the error for a database that does not exist). With
/// `json`, an invalid state is also printed on standard output as JSON (`state_error_json`).
pub(crate) fn load_state(src: &StateSource, command: &str, json: bool) -> Result<State, u8> {
    let Some(path) = &src.state else {
        return super::store::load_state(src, command);
    };
    crate::state::load_file(path).map_err(|e| {
        eprintln!("{e}");
        if json {
            outln!("{}", state_error_json(&e));
        }
        FAIL
    })
}

/// An invalid state as `--json` prints it: `{"error": {"kind": "state", "file", "message",
/// "problems": [{"at", "line", "column", "message"}]}}`, the `problems` the service's
/// `-32002` error carries in its `data`.
pub(crate) fn state_error_json(e: &crate::state::StateError) -> String {
    let v = serde_json::json!({
        "error": {
            "kind": "state",
            "file": e.file,
            "message": e.to_string(),
            "problems": e.problems,
        }
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// The policy files `check` looks at for one argument: each `*.policy` of a directory, or the
/// argument itself (a file, a shipped profile, or a directory `policy::load` will explain).
fn check_targets(spec: &str) -> Vec<String> {
    let p = Path::new(spec);
    match p.is_dir().then(|| policy::source::policy_files(p)) {
        Some(Ok(files)) if !files.is_empty() => {
            files.iter().map(|f| f.display().to_string()).collect()
        }
        _ => vec![spec.to_string()],
    }
}

pub(crate) fn check(a: CheckArgs) -> u8 {
    let specs: Vec<String> = if a.paths.is_empty() {
        policy::source::shipped_names()
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.paths.iter().flat_map(|p| check_targets(p)).collect()
    };
    let mut failed = 0usize;
    let mut all: Vec<(String, Vec<Diagnostic>, bool)> = Vec::new();
    for spec in &specs {
        match policy::load(spec) {
            Ok(p) => {
                let bad = a.deny_warnings && !p.warnings.is_empty();
                if bad {
                    failed = failed.saturating_add(1);
                }
                if !a.json {
                    for w in &p.warnings {
                        super::report::diagnostic(w);
                    }
                    outln!(
                        "{}: {} {} (policy \"{}\": {} signals, {} ladder rules, {} warnings)",
                        if bad { "fail" } else { "ok" },
                        spec,
                        &p.sha256[..12],
                        p.name,
                        p.stales.len(),
                        p.ladder.len(),
                        p.warnings.len()
                    );
                }
                all.push((spec.clone(), p.warnings.clone(), !bad));
            }
            Err(e) => {
                failed = failed.saturating_add(1);
                if !a.json {
                    super::report::policy_error(&e);
                    outln!("fail: {spec}");
                }
                all.push((spec.clone(), e.diagnostics.clone(), false));
            }
        }
    }
    if a.json {
        let out: Vec<serde_json::Value> = all
            .iter()
            .map(|(s, d, ok)| {
                let d: Vec<_> = d.iter().map(|d| super::errors::diagnostic(d)).collect();
                serde_json::json!({"policy": s, "ok": ok, "diagnostics": d})
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    }
    if failed > 0 {
        FAIL
    } else {
        OK
    }
}

/// The engine of a command's `--policy` (and `--templates`), with its warnings printed.
pub(crate) fn load_engine(
    policy: &str,
    templates: Option<&Path>,
    handoff_dir: Option<std::path::PathBuf>,
) -> Result<Engine, u8> {
    let mut builder = Engine::builder(policy).document_root(super::handoff_root(handoff_dir));
    if let Some(dir) = templates {
        builder = builder.templates_dir(dir);
    }
    match builder.build() {
        Ok(engine) => {
            for w in &engine.policy().warnings {
                super::report::diagnostic(w);
            }
            Ok(engine)
        }
        Err(e) => {
            super::report::error(&e);
            Err(FAIL)
        }
    }
}

/// The engine and the state of a deciding command.
fn inputs(
    a: &DecideArgs,
    templates: Option<&Path>,
    command: &str,
    json: bool,
) -> Result<(Engine, State), u8> {
    let engine = load_engine(&a.policy, templates, a.handoff_dir.clone())?;
    let state = load_state(&a.source, command, json)?;
    Ok((engine, state))
}

pub(crate) fn explain(a: ExplainArgs) -> u8 {
    let target = a.decide.target.as_deref();
    let (engine, decided) = if a.decide.source.state.is_none() {
        // A stored thread: the store reads only a window of a long one when that decides the
        // same (docs/store.md#speed).
        let engine = match load_engine(&a.decide.policy, None, a.decide.handoff_dir.clone()) {
            Ok(e) => e,
            Err(c) => return c,
        };
        match super::store::decide_stored(&a.decide.source, &engine, target, "baton explain") {
            Ok(d) => (engine, d),
            Err(c) => return c,
        }
    } else {
        let (engine, state) = match inputs(&a.decide, None, "baton explain", a.json) {
            Ok(x) => x,
            Err(c) => return c,
        };
        let d = engine.decide(&state, target);
        (engine, d)
    };
    match decided {
        Ok(d) => {
            if a.json && a.no_trace {
                let v = crate::store::report::to_value(&d, false);
                outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else if a.json {
                outln!("{}", d.to_json());
            } else if a.verbose {
                out!("{}", engine.explain_verbose(&d));
            } else {
                out!("{}", crate::explain::render_pointing_to(&d, "--verbose"));
            }
            OK
        }
        Err(e) => {
            eprintln!("{}", super::errors::engine_error(&e));
            FAIL
        }
    }
}

pub(crate) fn render(a: RenderArgs) -> u8 {
    let (engine, state) = match inputs(&a.decide, a.templates.as_deref(), "baton render", false) {
        Ok(x) => x,
        Err(c) => return c,
    };
    let outcome = match engine.run(&state, a.decide.target.as_deref()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{}", super::errors::engine_error(&e));
            return FAIL;
        }
    };
    if let Some(p) = outcome.rendered.as_ref().map(|r| &r.provenance) {
        if let Some(kind) = &p.fallback_reason {
            eprintln!(
                "warning: the summarizer failed ({kind}: {}); the deterministic summary is used",
                p.fallback_detail.as_deref().unwrap_or("no detail")
            );
        }
    }
    if a.json {
        let report = crate::store::report::RenderReport::new(outcome);
        let text = if a.no_trace {
            serde_json::to_string_pretty(&crate::store::report::to_value(&report, false))
        } else {
            serde_json::to_string_pretty(&report)
        };
        outln!("{}", text.unwrap_or_default());
        return OK;
    }
    if a.deliver && outcome.rendered.is_some() {
        return super::delivery::render_deliver(
            outcome,
            a.decide.handoff_dir.clone(),
            &state.thread.id,
        );
    }
    let Some(r) = outcome.rendered else {
        let d = &outcome.decision;
        outln!(
            "no handoff document: run {} on {} is `{}` ({})",
            d.run,
            d.target,
            d.strategy.as_str(),
            d.decided_by
                .because
                .as_deref()
                .unwrap_or("decided by the policy")
        );
        return OK;
    };
    if let Some(note) = &r.inline_note {
        eprintln!("warning: {note}");
    }
    match &a.out {
        None => {
            out!("{}", r.document);
            OK
        }
        Some(dir) => {
            let json = serde_json::to_string_pretty(&r.provenance).unwrap_or_default() + "\n";
            let mut files: Vec<(&str, &str)> = vec![
                ("handoff.md", &r.document),
                ("inline.md", &r.inline),
                ("handoff.json", &json),
            ];
            if let Some(t) = &r.transcript {
                files.push((crate::render::receipt::TRANSCRIPT_FILE, t));
            }
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!(
                    "{}: error: cannot create output directory: {}",
                    dir.display(),
                    crate::state::io_reason(&e)
                );
                return FAIL;
            }
            for (name, text) in files {
                let p = dir.join(name);
                if let Err(e) = std::fs::write(&p, text) {
                    eprintln!(
                        "{}: error: cannot write: {}",
                        p.display(),
                        crate::state::io_reason(&e)
                    );
                    return FAIL;
                }
                outln!("wrote {}", p.display());
            }
            OK
        }
    }
}
