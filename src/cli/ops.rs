//! `baton log export` (the store's decision log as decision-log lines) and `baton status`
//! (ask a running server how it is). Thin shells over the store and the service.

use super::commands::{FAIL, OK, USAGE};
use super::store::db_path;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct LogArgs {
    #[command(subcommand)]
    pub command: LogCommand,
}

#[derive(Subcommand, Debug)]
pub enum LogCommand {
    /// Write the store's decision log as JSON lines, the lines `baton serve --decision-log`
    /// writes (docs/service.md#decision-log).
    #[command(
        after_help = "Examples:\n  baton log export --db baton.db > decisions.jsonl\n  baton log export --db baton.db --since 2026-01-31T00:00:00Z\n  baton log export --db baton.db --since 24h --policy policies/   # masked by its log block\n\nThe lines carry no thread text unless the policy's `log { keep input }` asks for it."
    )]
    Export(LogExportArgs),
}

#[derive(Args, Debug)]
pub struct LogExportArgs {
    /// The database (default: $BATON_DB, else ./baton.db); it must exist.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Only decisions logged at or after TIME: an RFC 3339 time, or an age such as 24h or 7d.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// The policy whose `log` block masks the lines (drop, hash, keep input/trace).
    #[arg(long, value_name = "PATH")]
    pub policy: Option<String>,
    /// Write each decision's trace.
    #[arg(long)]
    pub trace: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The socket of the running server (`baton serve --socket PATH`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// The server's framing: `content-length` (its default) or `lines`.
    #[arg(long, default_value = "content-length", value_name = "FRAMING")]
    pub framing: String,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn log(a: LogArgs) -> u8 {
    match a.command {
        LogCommand::Export(a) => export(a),
    }
}

/// `--since`: an RFC 3339 time, or an age before now.
fn since(s: &str) -> Result<jiff::Timestamp, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let age = super::delivery::parse_age(s).map_err(|_| {
        format!("error: --since `{s}` is neither an RFC 3339 time (2026-01-31T00:00:00Z) nor an age (24h, 7d)")
    })?;
    let span =
        jiff::SignedDuration::try_from(age).map_err(|e| format!("error: --since `{s}`: {e}"))?;
    jiff::Timestamp::now()
        .checked_sub(span)
        .map_err(|e| format!("error: --since `{s}`: {e}"))
}

fn export(a: LogExportArgs) -> u8 {
    let since = match a.since.as_deref().map(since).transpose() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return USAGE;
        }
    };
    let mask = match &a.policy {
        None => crate::policy::CLog::default(),
        Some(p) => match crate::policy::load(p) {
            Ok(p) => p.log.clone(),
            Err(e) => {
                eprintln!("{e}");
                return FAIL;
            }
        },
    };
    let db = db_path(a.db.as_deref()).0;
    if let Err(c) = super::dbcheck::require_existing(&db, "baton log export") {
        return c;
    }
    let rows = match super::store::open_db_existing(&db).and_then(|s| {
        s.logged_decisions(since, mask.keeps("input"))
            .map_err(super::store::fail_db)
    }) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for row in &rows {
        let line = crate::serve::exported_line(row, &mask, a.trace);
        let text = serde_json::to_string(&Value::Object(line)).unwrap_or_default();
        if writeln!(out, "{text}").is_err() {
            return FAIL;
        }
    }
    if out.flush().is_err() {
        return FAIL;
    }
    OK
}

pub(crate) fn status(a: StatusArgs) -> u8 {
    let lines = match a.framing.as_str() {
        "content-length" => false,
        "lines" => true,
        other => {
            eprintln!("error: --framing must be `content-length` or `lines`, not `{other}`");
            return USAGE;
        }
    };
    let v = match ask(&a.socket, lines, "status") {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{}: error: {e}", a.socket.display());
            return FAIL;
        }
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return OK;
    }
    let s = |p: &str| -> String {
        match v.pointer(p) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "-".into(),
            Some(other) => other.to_string(),
        }
    };
    let short = |p: &str| s(p).chars().take(12).collect::<String>();
    outln!(
        "baton {} up {} s",
        s("/version"),
        v.pointer("/uptime_ms").and_then(Value::as_u64).unwrap_or(0) / 1000
    );
    outln!(
        "policy  {} sha256 {} (generation {}, loaded at {} ms)",
        s("/policy/name"),
        short("/policy/sha256"),
        s("/policy/generation"),
        s("/policy/loaded_at_ms")
    );
    if v.pointer("/shadow").is_some_and(|x| !x.is_null()) {
        outln!(
            "shadow  {} sha256 {} (loaded at {} ms)",
            s("/shadow/name"),
            short("/shadow/sha256"),
            s("/shadow/loaded_at_ms")
        );
    } else {
        outln!("shadow  none");
    }
    outln!(
        "store   {}: {} threads, {} runs, {} documents, {} bytes",
        s("/store/path"),
        s("/store/threads"),
        s("/store/runs"),
        s("/store/documents"),
        s("/store/bytes")
    );
    outln!("reload  last error: {}", s("/last_reload_error"));
    outln!(
        "log     {}{}",
        if v.pointer("/decision_log/enabled") == Some(&json!(true)) {
            "on"
        } else {
            "off"
        },
        match v.pointer("/decision_log/error").and_then(Value::as_str) {
            Some(e) => format!(", failing: {e}"),
            None => String::new(),
        }
    );
    OK
}

/// The largest response `baton status` reads (a status is a few hundred bytes).
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Send one request without params to the server at `socket` and return its result.
fn ask(socket: &std::path::Path, lines: bool, method: &str) -> Result<Value, String> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect (is `baton serve --socket` running?): {e}"))?;
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method}).to_string();
    let msg = if lines {
        format!("{body}\n")
    } else {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    stream
        .write_all(msg.as_bytes())
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut r = BufReader::new(stream);
    loop {
        let body = if lines {
            let mut line = String::new();
            if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the server closed the connection without answering".into());
            }
            line.into_bytes()
        } else {
            let mut len = None;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).map_err(|e| e.to_string())? == 0 {
                    return Err("the server closed the connection without answering".into());
                }
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse::<usize>().ok();
                    }
                }
            }
            let len = len.ok_or("a response without Content-Length")?;
            if len > MAX_RESPONSE {
                return Err(format!("a response of {len} bytes, over {MAX_RESPONSE}"));
            }
            let mut buf = vec![0u8; len];
            r.read_exact(&mut buf).map_err(|e| e.to_string())?;
            buf
        };
        let v: Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
        if v.get("id") != Some(&json!(1)) {
            continue; // a notification
        }
        if let Some(e) = v.get("error") {
            return Err(format!(
                "`{method}` failed: {}",
                e.get("message").and_then(Value::as_str).unwrap_or("")
            ));
        }
        return Ok(v.get("result").cloned().unwrap_or(Value::Null));
    }
}
