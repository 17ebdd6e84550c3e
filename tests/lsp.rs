//! `baton lsp` over an in-memory transport: every request the server answers, on policy files
//! (with `extends`, directory sets and unsaved buffers) and on YAML policy test files.

use crate::lsp_support;

use lsp_support::{pos, uri, Client};
use serde_json::{json, Value};
use std::fs;

const TYPO: &str = "policy \"typo\" {}\n\nstrategy {\n  no_handoff when target.runs_since_lastseen == 0\n  full_new otherwise\n}\n";

fn labels(v: &Value) -> Vec<String> {
    v["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn hover_text(v: &Value) -> String {
    v["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn diagnostics_on_open_carry_range_severity_code_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.policy");
    fs::write(&path, TYPO).unwrap();
    let u = uri(&path);
    let mut c = Client::start(10);
    c.open(&u, "baton-policy", TYPO);
    let diags = c.diagnostics(&u, 1);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d["message"], "unknown fact `target.runs_since_lastseen`");
    assert_eq!(d["severity"], 1);
    assert_eq!(d["code"], "baton::check::unknown_fact");
    assert_eq!(d["source"], "baton");
    assert_eq!(
        d["range"],
        json!({"start": {"line": 3, "character": 18}, "end": {"line": 3, "character": 44}})
    );
    assert_eq!(
        d["relatedInformation"][0]["message"],
        "help: did you mean `target.runs_since_last_seen`?"
    );
    c.stop();
}

#[test]
fn the_quick_fix_applies_and_the_diagnostics_clear() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.policy");
    let u = uri(&path);
    let mut c = Client::start(10);
    // Never saved: the buffer is all there is.
    c.open(&u, "baton-policy", TYPO);
    let diags = c.diagnostics(&u, 1);
    let r = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": u},
            "range": diags[0]["range"],
            "context": {"diagnostics": diags}
        }),
    );
    let action = &r["result"][0];
    assert_eq!(
        action["title"],
        "Replace with `target.runs_since_last_seen`"
    );
    assert_eq!(action["kind"], "quickfix");
    let edit = &action["edit"]["changes"][&u][0];
    assert_eq!(edit["newText"], "target.runs_since_last_seen");
    c.change(
        &u,
        2,
        json!([{"range": edit["range"], "text": edit["newText"]}]),
    );
    assert_eq!(c.diagnostics(&u, 2), Vec::<Value>::new());
    c.stop();
}

#[test]
fn every_did_you_mean_has_a_quick_fix() {
    let text = "policy \"t\" {}\neligible when run.status in [\"complete\"]\nstrategy {\n  full_nwe otherwise\n}\nsummary {\n  include user_mesage into goals\n  include error into goals as lin\n  include decision into decisons\n}\n";
    let mut c = Client::start(10);
    let u = "untitled:Untitled-1.policy";
    c.open(u, "baton-policy", text);
    let diags = c.diagnostics(u, 1);
    let r = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": u}, "range": diags[0]["range"], "context": {"diagnostics": diags}}),
    );
    let mut fixes: Vec<String> = r["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a["edit"]["changes"][u][0]["newText"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    fixes.sort();
    assert_eq!(
        fixes,
        [
            "\"completed\"",
            "decisions",
            "full_new",
            "line",
            "user_message"
        ],
        "{diags:#?}"
    );
    c.stop();
}

#[test]
fn hover_explains_facts_lets_sections_strategies_and_extends() {
    let text = "policy \"h\" { extends \"default\" }\n\nlet limit = 3 + 4\n\nstrategy {\n  no_handoff when target.runs_since_last_seen == 0\n  full_new when target.off_provider_runs > limit\n  delta_existing otherwise\n}\n\nsummary {\n  section risks \"Risks\"\n  include error into risks\n  include decision into decisions\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.policy");
    let u = uri(&path);
    let mut c = Client::start(10);
    c.open(&u, "baton-policy", text);
    c.diagnostics(&u, 1);
    let (l, ch) = pos(text, "target.runs_since_last_seen", 3);
    let h = hover_text(&c.at("textDocument/hover", &u, l, ch));
    assert!(h.contains("**`target.runs_since_last_seen`**: int"), "{h}");
    assert!(h.contains("Eligible runs after `target.last_seen`."), "{h}");
    assert!(h.contains("when target.runs_since_last_seen > 0"), "{h}");
    let (l, ch) = pos(text, "> limit", 3);
    let h = hover_text(&c.at("textDocument/hover", &u, l, ch));
    assert!(h.contains("`let limit` = `7`"), "{h}");
    assert!(h.contains("let limit = 3 + 4"), "{h}");
    let (l, ch) = pos(text, "into risks", 6);
    assert_eq!(
        hover_text(&c.at("textDocument/hover", &u, l, ch)),
        "Section `risks`: \"Risks\""
    );
    let (l, ch) = pos(text, "into decisions", 6);
    assert!(hover_text(&c.at("textDocument/hover", &u, l, ch)).contains("(built in)"));
    let (l, ch) = pos(text, "delta_existing", 1);
    let h = hover_text(&c.at("textDocument/hover", &u, l, ch));
    assert!(h.starts_with("Strategy `delta_existing`: Resume"), "{h}");
    let (l, ch) = pos(text, "\"default\"", 2);
    let h = hover_text(&c.at("textDocument/hover", &u, l, ch));
    assert!(h.contains("shipped profile `default`"), "{h}");
    c.stop();
}

#[test]
fn completion_offers_what_fits_the_cursor() {
    let text = "policy \"c\" {}\nlet friends = [\"codex\"]\nstrategy {\n  \n  full_new when target.\n  full_new when request.provider == \"\n  full_new otherwise handoff \n}\nsummary {\n  section risks \"Risks\"\n  include \n  include error into \n  include error into risks as \n}\n";
    let u = "untitled:c.policy";
    let mut c = Client::start(10);
    c.open(u, "baton-policy", text);
    c.diagnostics(u, 1);
    let at = |c: &mut Client, needle: &str, skip| {
        let (l, ch) = pos(text, needle, skip);
        labels(&c.at("textDocument/completion", u, l, ch))
    };
    let facts = at(&mut c, "target.\n", 7);
    assert!(
        facts.contains(&"target.has_thread".to_string()),
        "{facts:?}"
    );
    assert!(facts.iter().all(|f| f.starts_with("target.")), "{facts:?}");
    let providers = at(&mut c, "== \"\n", 4);
    assert_eq!(providers, ["claude", "codex", "copilot", "cursor"]);
    let ladder = at(&mut c, "  \n  full_new when target.", 2);
    assert!(ladder.contains(&"delta_existing".to_string()), "{ladder:?}");
    assert!(ladder.contains(&"native_fork".to_string()), "{ladder:?}");
    let handoffs = at(&mut c, "handoff \n", 8);
    assert!(
        handoffs.contains(&"checkpoint_summary".to_string()),
        "{handoffs:?}"
    );
    let kinds = at(&mut c, "include \n", 8);
    assert!(kinds.contains(&"file_change".to_string()), "{kinds:?}");
    let sections = at(&mut c, "into \n", 5);
    assert!(sections.contains(&"risks".to_string()), "{sections:?}");
    assert!(sections.contains(&"goals".to_string()), "{sections:?}");
    let forms = at(&mut c, "as \n", 3);
    assert_eq!(
        forms,
        ["full", "text", "line", "path_only", "count", "activity"]
    );
    c.stop();
}

#[test]
fn definition_and_references_for_lets_sections_and_extends() {
    let dir = tempfile::tempdir().unwrap();
    let base = "policy \"base\" { extends \"default\" }\n\nlet limit = 5\n\nstrategy {\n  full_new when target.off_provider_runs > limit\n  delta_existing otherwise\n}\n";
    let team = "policy \"team\" { extends \"base.policy\" }\n\nlet limit = 9\n\nsummary {\n  section risks \"Risks\"\n  include error into risks\n}\n";
    let base_path = dir.path().join("base.policy");
    let team_path = dir.path().join("team.policy");
    fs::write(&base_path, base).unwrap();
    fs::write(&team_path, team).unwrap();
    let (bu, tu) = (uri(&base_path), uri(&team_path));
    let mut c = Client::start(10);
    c.open(&tu, "baton-policy", team);
    c.diagnostics(&tu, 1);
    // `extends "base.policy"` goes to the file.
    let (l, ch) = pos(team, "base.policy", 1);
    let d = c.at("textDocument/definition", &tu, l, ch);
    assert_eq!(d["result"][0]["uri"], bu.as_str());
    // References of `extends "base.policy"`: here only.
    let r = c.at("textDocument/references", &tu, l, ch);
    assert_eq!(r["result"].as_array().unwrap().len(), 1, "{r}");
    // The section used in `into risks` is declared two lines up.
    let (l, ch) = pos(team, "into risks", 6);
    let d = c.at("textDocument/definition", &tu, l, ch);
    let (dl, dc) = pos(team, "risks \"Risks\"", 0);
    assert_eq!(
        d["result"][0]["range"]["start"],
        json!({"line": dl, "character": dc})
    );
    let r = c.at("textDocument/references", &tu, l, ch);
    assert_eq!(r["result"].as_array().unwrap().len(), 2, "{r}");
    // From the base, `limit` goes to its own `let`; its references span both files.
    c.open(&bu, "baton-policy", base);
    c.diagnostics(&bu, 1);
    let (l, ch) = pos(base, "> limit", 3);
    let d = c.at("textDocument/definition", &bu, l, ch);
    assert_eq!(d["result"][0]["uri"], bu.as_str());
    assert_eq!(
        d["result"][0]["range"]["start"],
        json!({"line": 2, "character": 4})
    );
    let r = c.at("textDocument/references", &bu, l, ch);
    let mut files: Vec<String> = r["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["uri"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    let mut expected = vec![bu.clone(), bu.clone(), tu.clone()];
    expected.sort();
    assert_eq!(files, expected);
    c.stop();
}

#[test]
fn formatting_is_baton_fmt_of_the_whole_document() {
    let text = "policy \"f\" {}\nstrategy {\nno_handoff when target.runs_since_last_seen==0\n   full_new   otherwise\n}\n";
    let u = "untitled:f.policy";
    let mut c = Client::start(10);
    c.open(u, "baton-policy", text);
    c.diagnostics(u, 1);
    let r = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": u}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    // What `baton fmt` writes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.policy");
    std::fs::write(&file, text).unwrap();
    let fmt = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["fmt", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        fmt.status.success(),
        "{}",
        String::from_utf8_lossy(&fmt.stderr)
    );
    let expected = std::fs::read_to_string(&file).unwrap();
    assert_eq!(r["result"][0]["newText"], expected.as_str());
    assert_eq!(
        r["result"][0]["range"]["start"],
        json!({"line": 0, "character": 0})
    );
    // Text that does not parse: no edits, no error.
    c.change(u, 2, json!([{"text": "strategy {"}]));
    c.diagnostics(u, 2);
    let r = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": u}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(r["result"], Value::Null);
    c.stop();
}

#[test]
fn open_buffers_win_over_the_disk_and_bases_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let base = "policy \"base\" {}\nlet limit = 5\nstrategy {\n  full_new when thread.runs > limit\n  full_new otherwise\n}\n";
    let team = "policy \"team\" { extends \"base.policy\" }\nlet limit = 7\n";
    let base_path = dir.path().join("base.policy");
    let team_path = dir.path().join("team.policy");
    fs::write(&base_path, base).unwrap();
    fs::write(&team_path, team).unwrap();
    let (bu, tu) = (uri(&base_path), uri(&team_path));
    let mut c = Client::start(10);
    c.open(&tu, "baton-policy", team);
    assert_eq!(c.diagnostics(&tu, 1), Vec::<Value>::new());
    // An unsaved edit of the base breaks the team file: shown at its `extends`.
    c.open(
        &bu,
        "baton-policy",
        &base.replace("thread.runs", "thread.rusn"),
    );
    let on_team = c.diagnostics(&tu, 1);
    assert_eq!(on_team.len(), 1, "{on_team:?}");
    assert!(
        on_team[0]["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown fact `thread.rusn`"),
        "{on_team:?}"
    );
    assert_eq!(
        on_team[0]["range"]["start"],
        json!({"line": 0, "character": 24})
    );
    // Fixing the base (unsaved still) clears the team file.
    c.change(&bu, 2, json!([{"text": base}]));
    c.diagnostics(&bu, 2);
    assert_eq!(c.diagnostics(&tu, 1), Vec::<Value>::new());
    c.stop();
}

#[test]
fn a_directory_set_is_checked_as_composed() {
    let dir = tempfile::tempdir().unwrap();
    let a = "policy \"a\" {}\nlet limit = 3\nstrategy {\n  full_new when thread.runs > limit\n  full_new otherwise\n}\n";
    let b = "let limit = \"three\"\n";
    fs::write(dir.path().join("a.policy"), a).unwrap();
    fs::write(dir.path().join("b.policy"), "let limit = 4\n").unwrap();
    let au = uri(&dir.path().join("a.policy"));
    let bu = uri(&dir.path().join("b.policy"));
    let mut c = Client::start(10);
    c.open(&au, "baton-policy", a);
    assert_eq!(c.diagnostics(&au, 1), Vec::<Value>::new());
    // b's unsaved text makes `limit` a string: a's rule no longer types in the set.
    c.open(&bu, "baton-policy", b);
    let on_a = c.diagnostics(&au, 1);
    assert_eq!(on_a.len(), 1, "{on_a:?}");
    let m = on_a[0]["message"].as_str().unwrap();
    assert!(m.contains("needs ints"), "{m}");
    assert!(
        m.ends_with("(when the directory is composed as one policy set)"),
        "{m}"
    );
    let (l, ch) = pos(a, "> limit", 2);
    assert_eq!(
        on_a[0]["range"]["start"],
        json!({"line": l, "character": ch})
    );
    c.stop();
}

#[test]
fn test_files_get_case_diagnostics_and_the_deciding_rule_on_hover() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::env::current_dir().unwrap();
    let state = root.join("examples/seed-switch.yaml");
    let text = format!(
        "policy: default\ncases:\n  - name: switch\n    state: {s}\n    expect:\n      strategy: full_new\n  - name: wrong\n    state: {s}\n    expect:\n      strategy: no_handoff\n",
        s = state.display()
    );
    let path = dir.path().join("t.yaml");
    let u = uri(&path);
    let mut c = Client::start(10);
    c.open(&u, "yaml", &text);
    let diags = c.diagnostics(&u, 1);
    let want = baton::testing::run_paths(
        &[{
            fs::write(&path, &text).unwrap();
            path.clone()
        }],
        &Default::default(),
    )
    .unwrap();
    let failing: Vec<&str> = want
        .results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(diags.len(), failing.len(), "{diags:?}");
    for (d, name) in diags.iter().zip(&failing) {
        let m = d["message"].as_str().unwrap();
        assert!(
            m.starts_with(&format!("case `{name}` fails: strategy: expected")),
            "{m}"
        );
        assert_eq!(d["code"], "baton::test::case_failed");
    }
    let h = hover_text(&c.at("textDocument/hover", &u, 8, 6));
    assert!(h.starts_with("Case `wrong`"), "{h}");
    assert!(h.contains("```policy\n"), "{h}");
    assert!(h.contains("at default.policy:"), "{h}");
    // A broken test file: the message `baton test` gives, on its line.
    c.change(
        &u,
        2,
        json!([{"text": "policy: default\ncases:\n  - name: x\n    stat: a.yaml\n"}]),
    );
    let diags = c.diagnostics(&u, 2);
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0]["range"]["start"]["line"], 3, "{diags:?}");
    assert!(
        diags[0]["message"].as_str().unwrap().contains("stat"),
        "{diags:?}"
    );
    c.stop();
}

#[test]
fn bad_requests_get_errors_and_the_server_goes_on() {
    let mut c = Client::start(10);
    let r = c.request("textDocument/hover", json!({"nonsense": true}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = c.request("workspace/symbol", json!({"query": ""}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // A document never opened: no answer to give, but an answer.
    let r = c.at("textDocument/hover", "file:///nowhere.policy", 0, 0);
    assert_eq!(r["result"], Value::Null);
    c.stop();
}

#[test]
fn rapid_changes_are_checked_once_after_the_quiet_time() {
    let u = "untitled:d.policy";
    let mut c = Client::start(1500);
    c.open(u, "baton-policy", TYPO);
    c.diagnostics(u, 1);
    for v in 2..=20 {
        c.change(u, v, json!([{"text": format!("{TYPO}# edit {v}\n")}]));
    }
    // Only the last version is checked: nothing arrives for the versions in between.
    let last = c.diagnostics(u, 20);
    assert_eq!(last.len(), 1);
    let versions: Vec<Value> = c
        .backlog
        .iter()
        .filter(|n| n.method == "textDocument/publishDiagnostics")
        .map(|n| n.params["version"].clone())
        .collect();
    assert!(versions.is_empty(), "{versions:?}");
    c.stop();
}

#[test]
fn test_files_run_against_the_open_policy_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::env::current_dir().unwrap();
    let policy = "policy \"team\" {}\nstrategy {\n  full_new otherwise\n}\n";
    fs::write(dir.path().join("team.policy"), policy).unwrap();
    let text = format!(
        "policy: team.policy\ncases:\n  - name: always new\n    state: {}\n    expect:\n      strategy: full_new\n",
        root.join("examples/seed-switch.yaml").display()
    );
    let tu = uri(&dir.path().join("t.yaml"));
    let pu = uri(&dir.path().join("team.policy"));
    let mut c = Client::start(10);
    c.open(&tu, "yaml", &text);
    assert_eq!(c.diagnostics(&tu, 1), Vec::<Value>::new());
    // An unsaved edit of the policy: the case now fails, on its line.
    c.open(
        &pu,
        "baton-policy",
        &policy.replace("full_new otherwise", "no_handoff otherwise"),
    );
    let diags = c.diagnostics(&tu, 1);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(
        diags[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("case `always new` fails: strategy: expected full_new, got no_handoff"),
        "{diags:?}"
    );
    assert_eq!(diags[0]["range"]["start"]["line"], 2);
    c.stop();
}

/// A test file naming a FIFO or a device as a case's state gets a diagnostic on that case; the
/// server neither blocks on the FIFO nor reads the device until memory runs out.
#[test]
fn test_files_naming_a_fifo_or_a_device_get_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("state.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let text = format!(
        "policy: default\ncases:\n  - name: piped\n    state: {}\n    expect:\n      strategy: full_new\n  - name: endless\n    state: /dev/zero\n    expect:\n      strategy: full_new\n",
        fifo.display()
    );
    let tu = uri(&dir.path().join("t.yaml"));
    let mut c = Client::start(10);
    c.open(&tu, "yaml", &text);
    let diags = c.diagnostics(&tu, 1);
    let messages: Vec<&str> = diags
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("it is a FIFO (named pipe), not a regular file"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("it is a character device, not a regular file"),
        "{messages:?}"
    );
    // The server goes on.
    c.stop();
}

#[test]
fn exit_without_shutdown_is_an_error() {
    let (server, client) = lsp_server::Connection::memory();
    let h = std::thread::spawn(move || baton::lsp::serve(&server, Default::default()));
    let init = lsp_server::Request::new(1.into(), "initialize".into(), json!({"capabilities": {}}));
    client.sender.send(init.into()).unwrap();
    let _ = client.receiver.recv().unwrap();
    let n = lsp_server::Notification::new("initialized".into(), json!({}));
    client.sender.send(n.into()).unwrap();
    let n = lsp_server::Notification::new("exit".into(), Value::Null);
    client.sender.send(n.into()).unwrap();
    let e = h.join().unwrap().unwrap_err();
    assert_eq!(
        e.to_string(),
        "lsp: protocol error: `exit` without `shutdown`"
    );
}

#[test]
fn the_shipped_policies_and_their_tests_open_without_a_diagnostic() {
    let root = std::env::current_dir().unwrap();
    let mut c = Client::start(10);
    for f in [
        "policies/default.policy",
        "policies/t3code.policy",
        "policies/t3code-legacy.policy",
        "policies/mcode.policy",
        "policies/tests/default.yaml",
        "policies/tests/mcode.yaml",
    ] {
        let path = root.join(f);
        let u = uri(&path);
        let lang = if f.ends_with(".yaml") {
            "yaml"
        } else {
            "baton-policy"
        };
        c.open(&u, lang, &fs::read_to_string(&path).unwrap());
        assert_eq!(c.diagnostics(&u, 1), Vec::<Value>::new(), "{f}");
    }
    c.stop();
}

#[test]
fn a_client_that_skips_initialized_is_served() {
    let (server, client) = lsp_server::Connection::memory();
    let h = std::thread::spawn(move || baton::lsp::serve(&server, Default::default()));
    let init = lsp_server::Request::new(1.into(), "initialize".into(), json!({"capabilities": {}}));
    client.sender.send(init.into()).unwrap();
    let _ = client.receiver.recv().unwrap();
    let open = lsp_server::Notification::new(
        "textDocument/didOpen".into(),
        json!({"textDocument": {"uri": "untitled:x.policy", "languageId": "baton-policy", "version": 1, "text": TYPO}}),
    );
    client.sender.send(open.into()).unwrap();
    match client.receiver.recv().unwrap() {
        lsp_server::Message::Notification(n) => {
            assert_eq!(n.method, "textDocument/publishDiagnostics");
            assert_eq!(n.params["diagnostics"].as_array().unwrap().len(), 1);
        }
        other => panic!("{other:?}"),
    }
    drop(client);
    h.join().unwrap().unwrap();
}

#[test]
fn providers_block_keys_values_and_hover_come_from_the_catalogue() {
    let text = "policy \"p\" { extends \"default\" }\n\nproviders {\n  \n  cursor {\n    file_read false\n    max_input_chars_per_turn 4000 \n    handoff_channel \n  }\n}\n";
    let u = "untitled:p.policy";
    let mut c = Client::start(10);
    c.open(u, "baton-policy", text);
    c.diagnostics(u, 1);
    let at = |c: &mut Client, needle: &str, skip| {
        let (l, ch) = pos(text, needle, skip);
        labels(&c.at("textDocument/completion", u, l, ch))
    };
    // A provider name at the start of an entry.
    let names = at(&mut c, "  \n  cursor", 2);
    assert_eq!(names, ["claude", "codex", "copilot", "cursor"]);
    // Capability keys: every `target.caps.*` fact of the catalogue, by its last part (the
    // catalogue's order, as docs/facts.md lists it).
    let keys = at(&mut c, "    file_read", 4);
    let facts_md = include_str!("../docs/facts.md");
    let expected: Vec<String> = facts_md
        .lines()
        // The catalogue's table (name, type, nullable, scope, doc), not the enums' values.
        .filter(|l| l.matches('|').count() == 6)
        .filter_map(|l| l.strip_prefix("| `target.caps."))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert_eq!(keys, expected);
    assert!(keys.contains(&"max_input_chars_per_turn".to_string()));
    // After a value: `force` first, then the next key.
    let after = at(&mut c, "4000 \n", 5);
    assert_eq!(
        after.first().map(String::as_str),
        Some("force"),
        "{after:?}"
    );
    // An enum capability's values.
    let channels = at(&mut c, "handoff_channel \n", 16);
    assert_eq!(channels, ["system", "developer", "user", "preamble"]);
    // Hover on a key: the fact it sets and the precedence rule.
    let (l, ch) = pos(text, "file_read false", 2);
    let h = hover_text(&c.at("textDocument/hover", u, l, ch));
    assert!(h.contains("sets **`target.caps.file_read`**: bool"), "{h}");
    assert!(h.contains("`file_read VALUE force`"), "{h}");
    // A provider the block declares is offered where a provider name is compared.
    let text2 = "providers { aider { resume true } }\nstrategy {\n  full_new when target.provider == \"\n  full_new otherwise\n}\n";
    let u2 = "untitled:q.policy";
    c.open(u2, "baton-policy", text2);
    c.diagnostics(u2, 1);
    let (l, ch) = pos(text2, "== \"\n", 4);
    let names = labels(&c.at("textDocument/completion", u2, l, ch));
    assert_eq!(names, ["claude", "codex", "copilot", "cursor", "aider"]);
    // Outside a providers entry `file_read` is no key.
    let (l, ch) = pos(text, "providers {", 2);
    let h = hover_text(&c.at("textDocument/hover", u, l, ch));
    assert!(h.contains("provider capabilities"), "{h}");
    c.stop();
}

/// The real `baton lsp` process on pipes: raw frames in, framed messages out.
struct Process {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Process {
    fn start() -> Process {
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["lsp", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton lsp starts");
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        Process {
            child,
            input,
            output,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.input.write_all(bytes).unwrap();
        self.input.flush().unwrap();
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// The next message the server writes.
    fn recv(&mut self) -> Value {
        use std::io::{BufRead, Read};
        let mut len = None;
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "stdout closed"
            );
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length: ") {
                len = Some(n.parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; len.expect("a Content-Length")];
        self.output.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// The response to request `id`, skipping notifications.
    fn response(&mut self, id: Value) -> Value {
        loop {
            let m = self.recv();
            if m.get("id") == Some(&id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    fn initialize(&mut self) {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}));
        assert_eq!(
            self.response(json!(1))["result"]["serverInfo"]["name"],
            "baton"
        );
        self.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    }

    /// `shutdown`, `exit`, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        self.send(json!({"jsonrpc": "2.0", "id": 99, "method": "shutdown"}));
        assert_eq!(self.response(json!(99))["result"], Value::Null);
        self.send(json!({"jsonrpc": "2.0", "method": "exit"}));
        self.child.wait().unwrap()
    }
}

#[test]
fn the_process_answers_invalid_json_with_a_parse_error_and_goes_on() {
    let mut p = Process::start();
    p.initialize();
    let bad = b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": ";
    p.send_raw(format!("Content-Length: {}\r\n\r\n", bad.len()).as_bytes());
    p.send_raw(bad);
    let r = p.recv();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON at line 1 column"),
        "{r}"
    );
    // Valid JSON that is no JSON-RPC message: an invalid request, with its id.
    p.send(json!({"id": 3, "what": "nothing"}));
    let r = p.recv();
    assert_eq!(
        (&r["id"], &r["error"]["code"]),
        (&json!(3), &json!(-32600)),
        "{r}"
    );
    // A bad header: answered, and the next frame is read.
    p.send_raw(b"Nonsense\r\n\r\n");
    let r = p.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(
        r["error"]["message"],
        "bad header: `Nonsense` is not `Name: value`"
    );
    // The session goes on.
    p.send(json!({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///nowhere.policy"}, "position": {"line": 0, "character": 0}}}));
    assert_eq!(p.response(json!(4))["result"], Value::Null);
    assert!(p.stop().success());
}

#[test]
fn the_process_refuses_a_huge_content_length_and_ends_cleanly() {
    let mut p = Process::start();
    p.initialize();
    p.send_raw(b"Content-Length: 1099511627776\r\n\r\n{\"jsonrpc\": \"2.0\"");
    let r = p.recv();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(
        r["error"]["message"],
        "message of 1099511627776 bytes exceeds the limit of 8388608 bytes"
    );
    // The announced body never comes: at the end of input the server ends, without an abort.
    drop(p.input);
    let status = p.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // A refused body that does arrive is skipped, and the next message is served.
    let mut p = Process::start();
    p.initialize();
    let big = "x".repeat(8 * 1024 * 1024 + 1);
    p.send_raw(format!("Content-Length: {}\r\n\r\n{big}", big.len()).as_bytes());
    assert_eq!(p.recv()["error"]["code"], -32600);
    p.send(json!({"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///nowhere.policy"}, "position": {"line": 0, "character": 0}}}));
    assert_eq!(p.response(json!(5))["result"], Value::Null);
    assert!(p.stop().success());
}

#[test]
fn redact_block_completion_hover_and_diagnostics() {
    let bad =
        "policy \"p\" { extends \"default\" }\n\nredact {\n  redact emp pattern \"ab(c\"\n}\n";
    let u0 = "untitled:q.policy";
    let mut c = Client::start(10);
    c.open(u0, "baton-policy", bad);
    // The checker's error on the invalid pattern, at the regex parser's caret.
    let diags = c.diagnostics(u0, 1);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(
        diags[0]["message"],
        "invalid redaction pattern: unclosed group"
    );
    assert_eq!(
        diags[0]["range"]["start"],
        json!({"line": 3, "character": 24})
    );
    let text = "policy \"p\" { extends \"default\" }\n\nredact {\n  \n  disable \n}\n";
    let u = "untitled:r.policy";
    c.open(u, "baton-policy", text);
    c.diagnostics(u, 1);
    // The block's keywords at the start of an entry.
    let (l, ch) = pos(text, "  \n  disable", 2);
    let names = labels(&c.at("textDocument/completion", u, l, ch));
    assert_eq!(names, ["redact", "allow", "disable"]);
    // After `disable`: the built-in rules.
    let (l, ch) = pos(text, "disable \n", 8);
    let ids = labels(&c.at("textDocument/completion", u, l, ch));
    let expected: Vec<String> = baton::handoff::Redactor::builtin()
        .unwrap()
        .rule_ids()
        .map(str::to_string)
        .collect();
    assert_eq!(ids, expected);
    // Hover on a rule id (hyphens and all) and on the block keyword.
    let text2 = "redact {\n  disable github-token\n}\n";
    let u2 = "untitled:s.policy";
    c.open(u2, "baton-policy", text2);
    c.diagnostics(u2, 1);
    let (l, ch) = pos(text2, "token\n", 1);
    let h = hover_text(&c.at("textDocument/hover", u2, l, ch));
    assert!(h.contains("Built-in redaction rule `github-token`"), "{h}");
    let (l, ch) = pos(text2, "redact {", 1);
    let h = hover_text(&c.at("textDocument/hover", u2, l, ch));
    assert!(h.contains("secret redaction"), "{h}");
    c.stop();
}

#[test]
fn log_block_completion_names_its_actions_and_fields() {
    let text = "policy \"p\" { extends \"default\" }\n\nlog {\n  \n  keep \n  drop \n}\n";
    let u = "untitled:log.policy";
    let mut c = Client::start(10);
    c.open(u, "baton-policy", text);
    c.diagnostics(u, 1);
    // The block's actions at the start of an entry.
    let (l, ch) = pos(text, "  \n  keep", 2);
    let names = labels(&c.at("textDocument/completion", u, l, ch));
    assert_eq!(names, ["drop", "hash", "keep"]);
    // After `keep`: the fields written only when kept.
    let (l, ch) = pos(text, "keep \n", 5);
    let names = labels(&c.at("textDocument/completion", u, l, ch));
    assert_eq!(names, ["input", "trace"]);
    // After `drop`: the fields a line carries by default (and those kept).
    let (l, ch) = pos(text, "drop \n", 5);
    let names = labels(&c.at("textDocument/completion", u, l, ch));
    assert!(
        names.contains(&"thread".to_string()) && names.contains(&"budget".to_string()),
        "{names:?}"
    );
    assert!(!names.contains(&"id".to_string()), "{names:?}");
    c.stop();
}
