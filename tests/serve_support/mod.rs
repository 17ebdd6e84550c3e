//! A small JSON-RPC client for the `baton serve` tests: spawns the binary, frames messages
//! (Content-Length or lines) and reads responses over stdio or a Unix socket.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A hang guard, not a budget: how long a test polls for an event (a socket appearing, every
/// dispatch committed, an answer) before it fails instead of hanging forever. No test waits
/// this long unless the server is broken; a loaded machine only makes the event come later.
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(600);

/// `baton serve ARGS...` with a private document root and database (the SQLite file
/// `dir/baton.db`): for the tests that do not depend on the store's backend. A test that
/// does takes a `TestDb` of each backend and uses [`serve_on`].
pub fn serve_cmd(dir: &Path, args: &[&str]) -> Command {
    serve_on(dir, args)
}

/// A database a test serves, on either backend: what `baton serve` needs to run on it.
pub trait ServedDb {
    /// What `--db` / `$BATON_DB` takes: a SQLite file's path or a `postgres://` URL.
    fn db_url(&self) -> String;
    /// The test's directory: sockets, logs and policies go there.
    fn root(&self) -> &Path;
    /// The server's off-band document root (`$BATON_HANDOFF_DIR`).
    fn doc_root(&self) -> PathBuf;
}

/// A directory of its own: the SQLite file `baton.db` and the documents under `handoffs/` in
/// it (what [`serve_cmd`] serves).
impl ServedDb for Path {
    fn db_url(&self) -> String {
        self.join("baton.db").display().to_string()
    }
    fn root(&self) -> &Path {
        self
    }
    fn doc_root(&self) -> PathBuf {
        self.join("handoffs")
    }
}

/// `baton serve ARGS...` on `db` (through `$BATON_DB`) with its document root.
pub fn serve_on(db: &(impl ServedDb + ?Sized), args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.current_dir(ROOT)
        .arg("serve")
        .args(args)
        .env("BATON_HANDOFF_DIR", db.doc_root())
        .env("BATON_DB", db.db_url())
        .env_remove("BATON_FAULT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// `baton serve --stdio ARGS...` on `db`, and the client attached to it.
pub fn stdio_on(db: &(impl ServedDb + ?Sized), args: &[&str]) -> Stdio_ {
    let lines = args.windows(2).any(|w| w == ["--framing", "lines"]);
    spawn_stdio(serve_on(db, &[&["--stdio"], args].concat()), lines)
}

/// `baton serve --socket ROOT/s.sock ARGS...` on `db`: the server and its socket (connect
/// with [`Client::connect`], which waits for it).
pub fn socket_on(db: &(impl ServedDb + ?Sized), args: &[&str]) -> (Child, PathBuf) {
    let sock = db.root().join("s.sock");
    let sock_arg = sock.display().to_string();
    let child = serve_on(db, &[&["--socket", &sock_arg], args].concat())
        .spawn()
        .expect("baton serve starts");
    (child, sock)
}

/// One side of a connection: write frames, read frames.
pub struct Client {
    w: Box<dyn Write + Send>,
    r: Box<dyn BufRead + Send>,
    lines: bool,
    next_id: i64,
    /// Notifications read while waiting for responses.
    pub notes: Vec<Value>,
    /// Responses read while waiting for another id.
    stash: Vec<Value>,
}

impl Client {
    pub fn new(w: Box<dyn Write + Send>, r: Box<dyn BufRead + Send>, lines: bool) -> Client {
        Client {
            w,
            r,
            lines,
            next_id: 1000,
            notes: Vec::new(),
            stash: Vec::new(),
        }
    }

    /// Connect to a socket, waiting for the server to create it (polling for that event; only
    /// [`HANG_GUARD`] ends the wait, so a slow start on a loaded machine is never a failure).
    pub fn connect(path: &Path, lines: bool) -> Client {
        let start = std::time::Instant::now();
        loop {
            match UnixStream::connect(path) {
                Ok(s) => {
                    let r = s.try_clone().unwrap();
                    return Client::new(Box::new(s), Box::new(BufReader::new(r)), lines);
                }
                Err(e) if start.elapsed() > HANG_GUARD => {
                    panic!("cannot connect to {}: {e:?}", path.display())
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }

    /// Close the writing side (the server sees end of input); further sends fail.
    pub fn w_take(&mut self) -> Box<dyn Write + Send> {
        std::mem::replace(&mut self.w, Box::new(std::io::sink()))
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
        self.w.flush().unwrap();
    }

    pub fn frame(&self, body: &[u8]) -> Vec<u8> {
        if self.lines {
            let mut v = body.to_vec();
            v.push(b'\n');
            v
        } else {
            let mut v = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            v.extend_from_slice(body);
            v
        }
    }

    pub fn send(&mut self, msg: &Value) {
        let f = self.frame(msg.to_string().as_bytes());
        self.send_raw(&f);
    }

    /// Send a request and return its id.
    pub fn start(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message, or None at end of stream.
    pub fn read(&mut self) -> Option<Value> {
        if self.lines {
            let mut line = String::new();
            if self.r.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            return Some(serde_json::from_str(&line).unwrap());
        }
        let mut len = None;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = Some(v.parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; len.expect("Content-Length")];
        self.r.read_exact(&mut body).unwrap();
        Some(serde_json::from_slice(&body).unwrap())
    }

    /// The next response (notifications are kept in `notes`).
    pub fn response(&mut self) -> Value {
        if !self.stash.is_empty() {
            return self.stash.remove(0);
        }
        loop {
            let m = self.read().expect("a response before end of stream");
            if m.get("method").is_some() {
                self.notes.push(m);
            } else {
                return m;
            }
        }
    }

    /// The response to request `id`.
    pub fn response_to(&mut self, id: i64) -> Value {
        if let Some(i) = self.stash.iter().position(|m| m["id"] == json!(id)) {
            return self.stash.remove(i);
        }
        loop {
            let m = self.read().expect("a response before end of stream");
            if m.get("method").is_some() {
                self.notes.push(m);
            } else if m["id"] == json!(id) {
                return m;
            } else {
                self.stash.push(m);
            }
        }
    }

    /// Call `method` and return its whole response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.start(method, params);
        self.response_to(id)
    }

    /// Call `method` and return its result, failing on an error response.
    pub fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }
}

/// A server on stdio and the client attached to it.
pub struct Stdio_ {
    pub child: Child,
    pub client: Client,
}

pub fn stdio(dir: &Path, args: &[&str]) -> Stdio_ {
    let lines = args.windows(2).any(|w| w == ["--framing", "lines"]);
    spawn_stdio(serve_cmd(dir, &[&["--stdio"], args].concat()), lines)
}

/// Spawn a prepared `baton serve --stdio` command and attach a client to it.
pub fn spawn_stdio(mut cmd: Command, lines: bool) -> Stdio_ {
    let mut child = cmd.spawn().expect("baton serve starts");
    let w: ChildStdin = child.stdin.take().unwrap();
    let r = BufReader::new(child.stdout.take().unwrap());
    Stdio_ {
        child,
        client: Client::new(Box::new(w), Box::new(r), lines),
    }
}

impl Stdio_ {
    /// `shutdown`, then `exit`; returns the exit code.
    pub fn stop(mut self) -> i32 {
        self.client.result("shutdown", json!({}));
        self.client.notify("exit", json!({}));
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

/// A state document (JSON) from an example YAML file.
pub fn example_state(name: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join("examples").join(name)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// A state for thread `id` with `runs` codex runs and a switch to claude requested; big
/// enough that deciding it takes a while.
pub fn long_state(id: &str, runs: u32) -> Value {
    let runs: Vec<Value> = (1..=runs)
        .map(|n| {
            json!({"ordinal": n, "provider": "codex", "provider_thread": "C1", "items": [
                {"kind": "user_message", "text": format!("Step {n}: change the handler and keep the tests green.")},
                {"kind": "assistant_message", "text": format!("Done with step {n}; the handler now validates its input.")},
                {"kind": "file_change", "path": format!("src/m{}.rs", n % 50), "change": "modified", "diff_lines": 12},
                {"kind": "command", "command": "cargo test", "exit_code": 0, "output": "test result: ok"},
            ]})
        })
        .collect();
    json!({
        "version": 1,
        "thread": {"id": id, "title": "long thread"},
        "provider_threads": [{"id": "C1", "provider": "codex", "status": "active"}],
        "runs": runs,
        "request": {"provider": "claude"},
    })
}

/// A copy of `policies/default.policy` in `dir/policies/`; returns the file's path.
pub fn policy_copy(dir: &Path) -> PathBuf {
    let d = dir.join("policies");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("default.policy");
    std::fs::copy(Path::new(ROOT).join("policies/default.policy"), &f).unwrap();
    f
}

/// Replace a file's contents atomically (write a sibling, rename over).
pub fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp-edit");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A policy extending `default` whose summary command signals that it started and then waits
/// to be let go: a `render` with it is held at a point the test controls, with no sleeps.
pub struct GatedPolicy {
    pub policy: PathBuf,
    started: PathBuf,
    go: PathBuf,
}

impl GatedPolicy {
    pub fn new(dir: &Path) -> GatedPolicy {
        use std::os::unix::fs::PermissionsExt;
        let started = dir.join("started.fifo");
        let go = dir.join("go.fifo");
        for f in [&started, &go] {
            let ok = Command::new("mkfifo").arg(f).status().unwrap().success();
            assert!(ok, "mkfifo {}", f.display());
        }
        let script = dir.join("gated.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncat >/dev/null\necho started > '{}'\nread go < '{}'\necho '## Summary'\necho 'Written when let go.'\n",
                started.display(),
                go.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = dir.join("gated.policy");
        std::fs::write(
            &policy,
            format!(
                "policy \"gated\" {{\n  extends \"default\"\n}}\n\nsummary {{\n  include user_message into goals\n  source command \"{}\" timeout_ms 600000\n}}\n",
                script.display()
            ),
        )
        .unwrap();
        GatedPolicy {
            policy,
            started,
            go,
        }
    }

    /// Block until the summary command has started (a render is in progress).
    pub fn wait_started(&self) {
        let mut line = String::new();
        BufReader::new(std::fs::File::open(&self.started).unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "started");
    }

    /// Block until `n` summary commands have started. One reader reads every line: commands
    /// that start together may write theirs while one reader has the FIFO open.
    pub fn wait_started_n(&self, n: usize) {
        let mut r = BufReader::new(std::fs::File::open(&self.started).unwrap());
        let mut seen = 0;
        while seen < n {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                // Every writer closed: open again for the next one.
                r = BufReader::new(std::fs::File::open(&self.started).unwrap());
                continue;
            }
            assert_eq!(line.trim(), "started");
            seen += 1;
        }
    }

    /// Let `n` waiting summary commands finish. The returned writer keeps the FIFO open:
    /// hold it until they have answered, so that a command that opens it late still reads
    /// its line.
    pub fn release_n(&self, n: usize) -> std::fs::File {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.go)
            .unwrap();
        for _ in 0..n {
            f.write_all(b"go\n").unwrap();
        }
        f
    }

    /// Let the waiting summary command finish.
    pub fn release(&self) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.go)
            .unwrap();
        f.write_all(b"go\n").unwrap();
    }
}
