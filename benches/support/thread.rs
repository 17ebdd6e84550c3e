//! The benchmark thread shared by benches/engine.rs and benches/versus.rs: `n` runs of ten
//! items, codex and claude in blocks of five, with the handoffs between them.

use std::fmt::Write as _;

/// Runs per provider block.
const BLOCK: usize = 5;

/// One item of run `o`, index `i` (0..10): a mix of kinds, about 40-120 characters each.
pub fn item(o: usize, i: usize) -> String {
    match i {
        0 => format!("{{kind: user_message, text: \"Step {o}: extend the OAuth flow and keep the tests green.\"}}"),
        1 => format!("{{kind: reasoning, text: \"Run {o} needs the callback route; check the router first.\"}}"),
        2 => format!("{{kind: assistant_message, text: \"Run {o}: I will change the handler and add a test.\"}}"),
        3 => format!("{{kind: file_change, path: src/mod_{}.rs, change: modified, diff_lines: {}}}", o % 17, 10 + o % 300),
        4 => format!("{{kind: command, command: cargo test, exit_code: {}, output: \"test result: {} passed\"}}", o % 2, 40 + o % 7),
        5 => format!("{{kind: tool_call, tool: Read, input: src/mod_{}.rs, status: completed, output: \"fn handler() {{}}\"}}", o % 17),
        6 => "{kind: plan, steps: [{text: \"Add route\", status: done}, {text: \"Write tests\", status: in_progress}]}".to_string(),
        7 => format!("{{kind: decision, text: \"Run {o}: keep sessions in Postgres.\"}}"),
        8 => format!("{{kind: narration, text: \"Looking at src/mod_{}.rs now.\"}}", o % 17),
        _ => "{kind: protocol, text: \"event: turn.completed\"}".to_string(),
    }
}

/// A valid state file (YAML) of `n` runs.
pub fn state_yaml(n: usize) -> String {
    let mut s = String::with_capacity(n * 1_000);
    s.push_str("version: 1\nthread: {id: th_bench, title: Benchmark thread}\n");
    s.push_str("provider_threads:\n");
    s.push_str("  - {id: C1, provider: codex, model: gpt-5-codex, runtime_mode: full_access, status: active}\n");
    s.push_str("  - {id: L1, provider: claude, model: claude-sonnet-4, runtime_mode: full_access, status: active}\n");
    // Handoffs: at the first run of every block after the first, into the block's thread,
    // covering the runs since that thread last saw the conversation.
    let mut handoffs = String::new();
    let mut run_handoff = vec![None; n + 1];
    let mut seen = [0usize; 2]; // last run covered by C1, L1
    let mut h = 0;
    for start in (1..=n).step_by(BLOCK) {
        let block = (start - 1) / BLOCK;
        let p = block % 2;
        if start > 1 && seen[p] + 1 < start {
            h += 1;
            let (pt, from_pt) = if p == 0 { ("C1", "L1") } else { ("L1", "C1") };
            let _ = writeln!(
                handoffs,
                "  - {{id: H{h}, target_run: {start}, from_provider_threads: [{from_pt}], to_provider_thread: {pt}, covered: {{from: {}, to: {}}}, strategy: {}, status: ready, summary: \"handoff {h}\"}}",
                seen[p] + 1,
                start - 1,
                if seen[p] == 0 { "full_thread_summary" } else { "delta_since_target_last_seen" },
            );
            run_handoff[start] = Some(h);
        }
        seen[p] = (start + BLOCK - 1).min(n);
    }
    s.push_str("runs:\n");
    for (o, handoff) in run_handoff.iter().enumerate().skip(1) {
        let block = (o - 1) / BLOCK;
        let (provider, pt) = if block.is_multiple_of(2) {
            ("codex", "C1")
        } else {
            ("claude", "L1")
        };
        let _ = writeln!(
            s,
            "  - ordinal: {o}\n    provider: {provider}\n    provider_thread: {pt}"
        );
        if let Some(h) = handoff {
            let _ = writeln!(s, "    handoff: H{h}");
        }
        s.push_str("    items:\n");
        for i in 0..10 {
            let _ = writeln!(s, "      - {}", item(o, i));
        }
    }
    if !handoffs.is_empty() {
        s.push_str("handoffs:\n");
        s.push_str(&handoffs);
    }
    let _ = writeln!(
        s,
        "checkpoints:\n  - {{run: {}, files_changed: 3, diff_summary: \"src/mod_1.rs (+10 -2)\"}}",
        n
    );
    // The request enters the provider that did not run last.
    let last_block = (n - 1) / BLOCK;
    let target = if last_block.is_multiple_of(2) {
        "claude"
    } else {
        "codex"
    };
    let model = if target == "codex" {
        "gpt-5-codex"
    } else {
        "claude-sonnet-4"
    };
    let _ = writeln!(
        s,
        "request: {{provider: {target}, model: {model}, runtime_mode: full_access, message: \"Carry on.\"}}"
    );
    s
}
