//! Properties of baton's input-facing parts, for any input bytes. Each function panics when a
//! property fails, so a fuzzer (or proptest) reports the input. Shared by the fuzz targets
//! (`fuzz/`) and `src/serve/fuzz_props_tests.rs`.

use baton::fmt::format_source;
use baton::policy;
use baton::serve::framing::{Frame, FrameReader};
use baton::serve::{rpc, Framing};
use baton::state::{self, Format};

/// Parsing and checking a policy never panics, whatever the text.
pub fn policy_parses_or_errs(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = policy::load_text("fuzz.policy", text);
}

/// Loading a state file never panics, and a state that loads survives a round trip through
/// the YAML baton writes: loading that text again gives the same state.
pub fn state_loads_or_errs(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [Format::Yaml, Format::Json] {
        if let Ok(s) = state::parse_str(text, format, "fuzz.yaml") {
            let yaml = state::to_yaml(&s);
            match state::parse_str(&yaml, Format::Yaml, "round-trip.yaml") {
                Ok(again) => assert!(again == s, "round trip changed the state:\n{yaml}"),
                Err(e) => panic!("baton's own YAML does not load again: {e}\n{yaml}"),
            }
        }
    }
}

/// `fmt` is idempotent (formatting the formatted text changes nothing), and the formatted
/// text checks the same as the input (both pass, or both fail).
pub fn fmt_is_idempotent_and_keeps_meaning(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(once) = format_source("fuzz.policy", text) else {
        return;
    };
    let twice = match format_source("fuzz.policy", &once) {
        Ok(t) => t,
        Err(e) => {
            panic!("formatted text does not parse: {e}\n--- input\n{text}\n--- formatted\n{once}")
        }
    };
    assert!(
        twice == once,
        "fmt is not idempotent\n--- once\n{once}\n--- twice\n{twice}"
    );
    let before = policy::load_text("fuzz.policy", text).is_ok();
    let after = policy::load_text("fuzz.policy", &once).is_ok();
    assert!(
        before == after,
        "formatting changed whether the policy checks ({before} -> {after})\n--- input\n{text}\n--- formatted\n{once}"
    );
}

/// Reading frames from any byte stream ends (each read consumes input), never yields a
/// message over the limit, and every message parses as JSON-RPC or gives an error.
pub fn framing_terminates(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let framing = if first & 1 == 0 {
        Framing::ContentLength
    } else {
        Framing::Lines
    };
    let max = 16 + usize::from(first >> 1) * 8;
    let rt = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(_) => return,
    };
    rt.block_on(async {
        let mut reader = FrameReader::new(rest, framing, max);
        // Every frame but the last consumes at least one byte.
        for _ in 0..=rest.len() + 1 {
            match reader.next().await {
                Ok(Frame::Eof) => return,
                Ok(Frame::Message(body)) => {
                    assert!(
                        body.len() <= max,
                        "a {} byte message over {max}",
                        body.len()
                    );
                    let _ = rpc::parse(&body);
                }
                Ok(Frame::Bad(_)) => {}
                // The stream ended inside a body: the server closes the connection.
                Err(_) => return,
            }
        }
        panic!("more frames than input bytes: the reader does not make progress");
    });
}
