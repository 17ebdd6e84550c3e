//! The language server never crashes or stops answering, whatever the editor sends: random
//! edits (any range, any text, half-typed policy syntax, multi-byte characters, positions past
//! the end) through the document sync, each followed by requests at random positions.

use crate::lsp_support;

use lsp_support::Client;
use proptest::prelude::*;
use serde_json::json;

const START: &str = "policy \"p\" { extends \"default\" }\n\nlet limit = 3\n\nstrategy {\n  no_handoff when target.runs_since_last_seen == 0\n  full_new when stale or target.off_provider_runs > limit because \"x\"\n  delta_existing otherwise\n}\n\nsummary {\n  section risks \"Risks\"\n  include error into risks as line\n}\n";

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("target.".to_string()),
        Just("\"".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\n".to_string()),
        Just("include ".to_string()),
        Just("into ".to_string()),
        Just(" when stale.".to_string()),
        Just("let x = [".to_string()),
        Just("é😀".to_string()),
        Just("# comment".to_string()),
        "[a-z_. =<>\"(){}\\[\\]#\n0-9-]{0,12}",
    ]
}

#[derive(Debug, Clone)]
struct Edit {
    start: (u32, u32),
    end: (u32, u32),
    text: String,
    full: bool,
}

fn edit() -> impl Strategy<Value = Edit> {
    (
        (0u32..20, 0u32..80),
        (0u32..20, 0u32..80),
        fragment(),
        proptest::bool::weighted(0.05),
    )
        .prop_map(|(start, end, text, full)| Edit {
            start,
            end,
            text,
            full,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_edits_never_stop_the_server(edits in proptest::collection::vec(edit(), 1..25), probes in proptest::collection::vec((0u32..22, 0u32..90), 1..4)) {
        let u = "untitled:fuzz.policy";
        let mut c = Client::start(0);
        c.open(u, "baton-policy", START);
        let mut version = 1;
        for e in &edits {
            version += 1;
            let change = if e.full {
                json!([{ "text": e.text }])
            } else {
                json!([{ "range": {
                    "start": { "line": e.start.0, "character": e.start.1 },
                    "end": { "line": e.end.0, "character": e.end.1 }
                }, "text": e.text }])
            };
            c.change(u, version, change);
            for (line, ch) in &probes {
                for m in ["textDocument/hover", "textDocument/completion", "textDocument/definition", "textDocument/references"] {
                    let r = c.at(m, u, *line, *ch);
                    prop_assert!(r.get("error").is_none(), "{m}: {r}");
                }
            }
        }
        let r = c.request("textDocument/formatting", json!({"textDocument": {"uri": u}, "options": {"tabSize": 2, "insertSpaces": true}}));
        prop_assert!(r.get("error").is_none(), "{r}");
        // The last version is checked and published.
        c.diagnostics(u, version);
        c.stop();
    }
}
