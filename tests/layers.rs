//! The module graph follows the layer order of docs/architecture.md: core -> delivery ->
//! store -> serve and cli. Every module has a rank; a module may use only modules of a lower
//! rank (so within a layer the order is fixed too, and the graph stays acyclic). This test
//! reads every `crate::` path in the source files (comments skipped) and names each file and
//! line that imports against the order.

use std::path::{Path, PathBuf};

/// (module, layer, rank). A new top-level module must be added here, in its layer.
const LAYERS: &[(&str, &str, u32)] = &[
    // core: state -> facts -> policy -> decision -> eval -> select -> render
    ("suggest", "core", 0),
    ("ids", "core", 0),
    ("cut", "core", 0),
    ("input", "core", 0),
    ("redact", "core", 0),
    ("state", "core", 1),
    ("facts", "core", 2),
    ("policy", "core", 3),
    ("decision", "core", 4),
    ("summarize", "core", 4),
    ("fmt", "core", 4),
    ("eval", "core", 5),
    ("explain", "core", 5),
    // render's entry formats, below select, which measures what render shows
    ("entry", "core", 5),
    ("select", "core", 6),
    ("render", "core", 7),
    ("coverage", "core", 7),
    ("outcome", "core", 8),
    // delivery: off-band documents, pre-grants, GC, summarizer; the pipeline and the engine
    ("deliver", "delivery", 10),
    ("fit", "core", 8),
    ("pipeline", "delivery", 11),
    ("error", "delivery", 12),
    ("engine", "delivery", 13),
    ("testing", "delivery", 14),
    ("diff", "delivery", 15),
    ("quality", "delivery", 16),
    ("workspace", "delivery", 17),
    ("import", "core", 2),
    // store
    ("store", "store", 20),
    // shells
    ("serve", "serve", 30),
    ("lsp", "lsp", 30),
    ("schema", "cli", 31),
    ("cli", "cli", 32),
];

/// Items the crate root re-exports, and the module each comes from.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Decision", "decision"),
    ("CommandRunner", "deliver"),
    ("Context", "engine"),
    ("Engine", "engine"),
    ("EngineBuilder", "engine"),
    ("Error", "error"),
    ("Located", "error"),
    ("located", "error"),
    ("Outcome", "outcome"),
    ("Plan", "pipeline"),
    ("PipelineError", "pipeline"),
    ("DeliveryError", "deliver"),
    ("EvalError", "eval"),
    ("InvalidId", "ids"),
    ("Summarizer", "summarize"),
    ("RenderError", "render"),
    ("Diagnostic", "policy"),
    ("Policy", "policy"),
    ("PolicyError", "policy"),
    ("Severity", "policy"),
    ("Rendered", "render"),
    ("TemplateSet", "render"),
    ("State", "state"),
    ("StateError", "state"),
    ("EvalOptions", "eval"),
    ("decide", "pipeline"),
];

fn rank(module: &str) -> Option<(&'static str, u32)> {
    LAYERS
        .iter()
        .find(|(m, _, _)| *m == module)
        .map(|(_, layer, r)| (*layer, *r))
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`None` for lib.rs and main.rs).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix("src").ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The modules named by the `crate::` paths on one line (`crate::a::b`, `crate::{a, b::c}`,
/// `crate::Engine`).
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        // `$crate::` and identifiers ending in `crate` are not crate paths.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut at_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        if !item.is_empty() {
                            out.push(std::mem::take(&mut item));
                        }
                        at_start = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 1 && at_start {
                    if c.is_alphanumeric() || c == '_' {
                        item.push(c);
                        continue;
                    } else if !item.is_empty() {
                        out.push(std::mem::take(&mut item));
                        at_start = false;
                    }
                }
            }
            if !item.is_empty() {
                out.push(item);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn imports_follow_the_layer_order() {
    let mut files = Vec::new();
    rs_files(Path::new("src"), &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        let Some((layer, own)) = rank(&module) else {
            problems.push(format!(
                "{}: module `{module}` has no layer; add it to LAYERS in tests/layers.rs and to docs/architecture.md",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let code = code.split(" // ").next().unwrap_or(code);
            for target in targets(code) {
                let target_module = match ROOT_ITEMS.iter().find(|(item, _)| *item == target) {
                    Some((_, m)) => m.to_string(),
                    None => target.clone(),
                };
                if target_module == module {
                    continue;
                }
                match rank(&target_module) {
                    Some((_, r)) if r < own => {}
                    Some((target_layer, _)) => problems.push(format!(
                        "{}:{}: `{module}` ({layer}) imports `crate::{target}` ({target_layer}), which is not below it in the layer order",
                        file.display(),
                        n + 1
                    )),
                    None => problems.push(format!(
                        "{}:{}: `crate::{target}` is not a module with a layer (nor a root re-export listed in ROOT_ITEMS)",
                        file.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_path_reader_sees_grouped_and_root_imports() {
    assert_eq!(targets("use crate::state::State;"), ["state"]);
    assert_eq!(
        targets("use crate::{policy::{self, Policy}, facts, Engine};"),
        ["policy", "facts", "Engine"]
    );
    assert_eq!(
        targets("let x = $crate::foo; notcrate::bar"),
        Vec::<String>::new()
    );
}

/// The test files that may sleep, each because it polls for an event that has no
/// notification (a socket appearing, a process gone, a file created, a thread's runs
/// committed) or, in crash_safety, to kill a command at a random point of its run.
const SLEEPERS: &[&str] = &[
    "crash_safety.rs",
    "src/deliver/summarizer_tests.rs",
    "multi_serve/mod.rs",
    "serve_store.rs",
    "serve_support/mod.rs",
    "store_pg_summarizer.rs",
    "summarizer_outside_lock.rs",
];

/// Tests wait for events, never for wall-clock budgets (issue 27: a 30 s wait for a hot reload
/// failed the suite on a loaded 2-core machine). A guard against a hang (`PATIENCE`,
/// `HANG_GUARD`) is at least ten minutes, so that only a test that would hang forever fails on
/// it; only the files in [`SLEEPERS`] sleep (polling for an event); and no test sleeps to let
/// something happen first (a summarizer that sleeps is a `GatedPolicy`).
#[test]
fn tests_wait_for_events_not_budgets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests = root.join("tests");
    let mut files = Vec::new();
    rs_files(&tests, &mut files);
    // The tests moved next to the code (`src/**/NAME_tests.rs`, `src/**/NAME_tests/`).
    let mut sources = Vec::new();
    rs_files(&root.join("src"), &mut sources);
    files.extend(sources.into_iter().filter(|f| {
        f.strip_prefix(root)
            .unwrap()
            .components()
            .any(|c| c.as_os_str().to_string_lossy().contains("_tests"))
    }));
    let mut problems = Vec::new();
    for f in &files {
        let rel = match f.strip_prefix(&tests) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => f.strip_prefix(root).unwrap().display().to_string(),
        };
        if rel == "layers.rs" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let at = match f.strip_prefix(&tests) {
                Ok(_) => format!("tests/{rel}:{}", i + 1),
                Err(_) => format!("{rel}:{}", i + 1),
            };
            let guard = line.contains("const PATIENCE") || line.contains("const HANG_GUARD");
            if guard {
                let secs = line
                    .split("from_secs(")
                    .nth(1)
                    .and_then(|r| r.split(')').next())
                    .and_then(|n| n.replace('_', "").parse::<u64>().ok());
                if secs.is_none_or(|s| s < 600) {
                    problems.push(format!("{at}: a hang guard under ten minutes: {line}"));
                }
            }
            if line.contains("thread::sleep(") && !SLEEPERS.contains(&rel.as_str()) {
                problems.push(format!("{at}: sleeps: wait for an event instead: {line}"));
            }
            if line.contains("sleep {secs}") || line.contains("sleep 1\\n") {
                problems.push(format!("{at}: a command that sleeps to be slow: {line}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
