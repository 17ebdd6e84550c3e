//! Import benchmarks: a Claude Code session log and a Codex CLI rollout of about 100 MB each
//! (`BATON_BENCH_IMPORT_MB` changes the size), generated in a temporary directory and
//! imported from the file with `baton::import::import_file` (streamed line by line).
//!
//! The logs repeat a realistic turn: a prompt, 2 KB of reasoning, narration, a shell command
//! with 8 KB of output (Claude Code writes it twice: the model's text and `toolUseResult`), an
//! edit whose result carries the 20 KB original file, a plan update, bookkeeping entries,
//! and every 50th turn a 1 MB tool output.
//!
//! Run with:
//!   cargo bench --features unstable --bench import -- --warm-up-time 1 --measurement-time 5
//! Smoke run (one iteration):
//!   cargo bench --features unstable --bench import -- --test
use baton::import::{import_file, ImportOptions, Tool};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use std::io::Write;
use std::path::Path;

fn target_bytes() -> u64 {
    std::env::var("BATON_BENCH_IMPORT_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(100)
        * 1024
        * 1024
}

fn text(n: usize, seed: usize) -> String {
    let words = [
        "the", "callback", "route", "session", "table", "token", "verify", "state", "cookie",
        "router", "handler", "test",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut i = seed;
    while s.len() < n {
        s.push_str(words[i % words.len()]);
        s.push(if i.is_multiple_of(13) { '\n' } else { ' ' });
        i += 7;
    }
    s
}

fn claude_turn(t: usize) -> Vec<serde_json::Value> {
    let base = |ty: &str, msg: serde_json::Value| {
        json!({"parentUuid": format!("p{t}"), "isSidechain": false, "userType": "external",
               "cwd": "/home/dev/app", "sessionId": "bench-claude", "version": "2.0.61",
               "type": ty, "uuid": format!("u{t}"), "timestamp": "2026-11-30T10:00:00.000Z",
               "message": msg})
    };
    let out = text(if t % 50 == 49 { 1024 * 1024 } else { 8 * 1024 }, t);
    let orig = text(20 * 1024, t + 1);
    vec![
        base(
            "user",
            json!({"role": "user", "content": format!("Turn {t}: {}", text(300, t))}),
        ),
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "thinking", "thinking": text(2048, t), "signature": "s"}]}),
        ),
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text(600, t)}]}),
        ),
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": format!("b{t}"), "name": "Bash", "input": {"command": "cargo test"}}]}),
        ),
        {
            let mut v = base(
                "user",
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("b{t}"), "content": out}]}),
            );
            v["toolUseResult"] =
                json!({"stdout": out, "stderr": "", "interrupted": false, "isImage": false});
            v
        },
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": format!("e{t}"), "name": "Edit", "input": {"file_path": format!("/home/dev/app/src/m{}.rs", t % 40), "old_string": text(500, t), "new_string": text(700, t + 3)}}]}),
        ),
        {
            let mut v = base(
                "user",
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("e{t}"), "content": "The file has been updated."}]}),
            );
            v["toolUseResult"] =
                json!({"filePath": "x", "originalFile": orig, "structuredPatch": []});
            v
        },
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": format!("t{t}"), "name": "TodoWrite", "input": {"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]}}]}),
        ),
        base(
            "user",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{t}"), "content": "ok"}]}),
        ),
        json!({"type": "progress", "sessionId": "bench-claude", "data": {"type": "hook_progress"}}),
        base(
            "assistant",
            json!({"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text(400, t + 5)}]}),
        ),
        json!({"type": "system", "subtype": "turn_duration", "sessionId": "bench-claude"}),
    ]
}

fn codex_turn(t: usize) -> Vec<serde_json::Value> {
    let l = |ty: &str, p: serde_json::Value| json!({"timestamp": "2026-11-30T11:00:00.000Z", "type": ty, "payload": p});
    let out = text(if t % 50 == 49 { 1024 * 1024 } else { 8 * 1024 }, t);
    let prompt = format!("Turn {t}: {}", text(300, t));
    let answer = text(600, t + 2);
    let patch = format!(
        "*** Begin Patch\n*** Update File: src/m{}.rs\n@@\n-{}\n+{}\n*** End Patch\n",
        t % 40,
        text(500, t).replace('\n', "\n-"),
        text(700, t + 3).replace('\n', "\n+")
    );
    vec![
        l(
            "turn_context",
            json!({"cwd": "/home/dev/app", "approval_policy": "on-request", "model": "gpt-5-codex"}),
        ),
        l(
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}),
        ),
        l(
            "event_msg",
            json!({"type": "user_message", "message": prompt}),
        ),
        l(
            "response_item",
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": text(2048, t)}], "encrypted_content": text(4096, t + 9)}),
        ),
        l(
            "response_item",
            json!({"type": "function_call", "name": "shell", "arguments": json!({"command": ["bash", "-lc", "cargo test"]}).to_string(), "call_id": format!("s{t}")}),
        ),
        l(
            "response_item",
            json!({"type": "function_call_output", "call_id": format!("s{t}"), "output": json!({"output": out, "metadata": {"exit_code": 0}}).to_string()}),
        ),
        l(
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": format!("p{t}")}),
        ),
        l(
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": format!("p{t}"), "output": "{\"output\":\"Success.\",\"metadata\":{\"exit_code\":0}}"}),
        ),
        l(
            "event_msg",
            json!({"type": "token_count", "info": {"total_token_usage": {"input_tokens": 1000}}}),
        ),
        l(
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}),
        ),
        l(
            "event_msg",
            json!({"type": "agent_message", "message": answer}),
        ),
    ]
}

fn write_log(
    path: &Path,
    header: Option<serde_json::Value>,
    turn: fn(usize) -> Vec<serde_json::Value>,
) -> u64 {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut n: u64 = 0;
    if let Some(h) = header {
        let s = h.to_string();
        n += s.len() as u64 + 1;
        writeln!(f, "{s}").expect("write");
    }
    let mut t = 0;
    while n < target_bytes() {
        for v in turn(t) {
            let s = v.to_string();
            n += s.len() as u64 + 1;
            writeln!(f, "{s}").expect("write");
        }
        t += 1;
    }
    f.flush().expect("flush");
    n
}

fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let claude = dir.path().join("claude.jsonl");
    let codex = dir.path().join("rollout-bench.jsonl");
    let claude_bytes = write_log(&claude, None, claude_turn);
    let codex_bytes = write_log(
        &codex,
        Some(
            json!({"timestamp": "2026-11-30T11:00:00.000Z", "type": "session_meta", "payload": {"id": "bench-codex", "cwd": "/home/dev/app", "cli_version": "0.63.0"}}),
        ),
        codex_turn,
    );
    eprintln!(
        "import bench: claude {} MB, codex {} MB; peak RSS before importing {} KB",
        claude_bytes / (1024 * 1024),
        codex_bytes / (1024 * 1024),
        peak_rss_kb().unwrap_or(0)
    );
    let mut g = c.benchmark_group("import");
    g.sample_size(10);
    for (name, tool, path, bytes) in [
        ("claude_code", Tool::ClaudeCode, &claude, claude_bytes),
        ("codex", Tool::Codex, &codex, codex_bytes),
    ] {
        g.throughput(Throughput::Bytes(bytes));
        g.bench_function(name, |b| {
            b.iter(|| {
                let im = import_file(tool, path, &ImportOptions::default()).expect("imports");
                assert!(im.state.runs.len() > 100);
                im.state.runs.len()
            })
        });
        eprintln!(
            "import bench: after {name}: peak RSS {} KB",
            peak_rss_kb().unwrap_or(0)
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
