//! One client connection, and the state every connection shares: per-thread FIFO queues,
//! cancellation, in-flight tracking for graceful shutdown, and server notifications.

use super::framing::{self, Frame, FrameError, FrameReader};
use super::methods;
use super::slots::{Slot, Slots};
use super::policy_set::PolicyHolder;
use super::rpc::{self, code, Id, Incoming, RpcError};
use super::stored::StorePool;
use super::ServeConfig;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{broadcast, mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};

/// Requests of one connection running or waiting at once. When they are all taken, the
/// connection reads nothing more until one finishes: a client that only sends cannot make the
/// server hold more than this many requests (each at most `--max-message`) for it.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 64;

/// Responses and errors waiting to be written to one connection. A request whose response
/// finds the queue full waits (holding its in-flight place), so a client that does not read
/// its responses stops the server reading its requests instead of growing its memory.
pub const MAX_QUEUED_RESPONSES: usize = 64;

/// A request's place in the queues of the threads it names: it runs when the previous request
/// of each of those threads has released its `Turn`, and releasing its own lets the next ones
/// run. Clones share one place: it is released when the last clone drops. The session keeps
/// one clone until the response is queued for writing (so one thread's responses leave in
/// order) and the work keeps another (so a cancelled read's blocking part still finishes
/// before the next request starts).
#[derive(Clone)]
pub struct Turn(#[allow(dead_code)] Arc<TurnInner>);

struct TurnInner {
    /// One release signal per thread queue the request stands in.
    _release: Vec<oneshot::Sender<()>>,
    /// The queues to clean up: the request's sequence number and the threads it names.
    places: Option<(Arc<Shared>, u64, Vec<String>)>,
}

impl Drop for TurnInner {
    fn drop(&mut self) {
        if let Some((shared, seq, threads)) = self.places.take() {
            let mut q = lock(&shared.queues);
            for thread in threads {
                // The entry is ours only if no later request has queued behind us.
                if q.get(&thread).map(|(s, _)| *s) == Some(seq) {
                    q.remove(&thread);
                }
            }
        }
    }
}

/// The last request queued for a thread: its sequence number and the signal its turn ends.
type QueueTail = (u64, Option<oneshot::Receiver<()>>);

/// Pending requests of one connection that `$/cancelRequest` can cancel.
type Cancels = Arc<Mutex<HashMap<Id, oneshot::Sender<()>>>>;

/// State shared by every connection of one server.
pub struct Shared {
    pub cfg: ServeConfig,
    /// The decision log and the metrics.
    pub ops: super::ops::Ops,
    /// The shadow policy (`--shadow`, `policy/shadow`).
    pub shadow: super::shadow::Shadow,
    pub policies: Arc<PolicyHolder>,
    pub stores: StorePool,
    /// thread id -> (sequence of the last queued request, its release signal).
    queues: Mutex<HashMap<String, QueueTail>>,
    seq: AtomicU64,
    in_flight: AtomicUsize,
    idle: Notify,
    shutting_down: AtomicBool,
    exit: Notify,
    exiting: AtomicBool,
    notifications: broadcast::Sender<Value>,
    pub started: Instant,
    /// The socket transport's connection slots.
    pub slots: Slots,
}

/// Counts a request as in flight until dropped; then counts it in the request metrics (its
/// method, how long it took, whether it failed).
struct InFlight {
    shared: Arc<Shared>,
    method: String,
    started: Instant,
    failed: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let secs = self.started.elapsed().as_secs_f64();
        self.shared
            .ops
            .metrics
            .request(&self.method, secs, self.failed);
        if self.shared.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.idle.notify_waiters();
        }
    }
}

impl Shared {
    pub fn new(
        cfg: ServeConfig,
        policies: Arc<PolicyHolder>,
        ops: super::ops::Ops,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            ops,
            shadow: super::shadow::Shadow::default(),
            stores: StorePool::new(&cfg),
            cfg,
            policies,
            queues: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            shutting_down: AtomicBool::new(false),
            exit: Notify::new(),
            exiting: AtomicBool::new(false),
            notifications: broadcast::channel(64).0,
            started: Instant::now(),
            slots: Slots::default(),
        })
    }

    /// The shadow policy's status (null: none).
    pub fn shadow_status(&self) -> Value {
        self.shadow.status()
    }

    /// Requests currently running or queued.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn enter(self: &Arc<Self>, method: &str) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight {
            shared: self.clone(),
            method: method.to_string(),
            started: Instant::now(),
            failed: false,
        }
    }

    /// Take a place in the queue of every thread in `threads` (synchronously and all at once,
    /// so places follow arrival order and a request only ever waits for earlier ones).
    /// Returns the signals to wait for and the turn to hold while running.
    fn queue(self: &Arc<Self>, threads: Vec<String>) -> (Vec<oneshot::Receiver<()>>, Turn) {
        if threads.is_empty() {
            return (
                Vec::new(),
                Turn(Arc::new(TurnInner {
                    _release: Vec::new(),
                    places: None,
                })),
            );
        }
        // The counter wraps as `fetch_add` does (after 2^64 queued requests).
        let seq = self.seq.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        let mut waits = Vec::new();
        let mut releases = Vec::new();
        {
            let mut q = lock(&self.queues);
            for thread in &threads {
                let (tx, rx) = oneshot::channel();
                releases.push(tx);
                if let Some((_, Some(prev))) = q.insert(thread.clone(), (seq, Some(rx))) {
                    waits.push(prev);
                }
            }
        }
        (
            waits,
            Turn(Arc::new(TurnInner {
                _release: releases,
                places: Some((self.clone(), seq, threads)),
            })),
        )
    }

    /// Threads with a request running or queued (the per-thread queue map's size).
    pub fn queued_threads(&self) -> usize {
        lock(&self.queues).len()
    }

    /// Stop taking new requests.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Wait until no request is in flight.
    pub async fn drain(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Wait for `exit`.
    pub async fn exit_requested(&self) {
        loop {
            let n = self.exit.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.exiting.load(Ordering::SeqCst) {
                return;
            }
            n.await;
        }
    }

    /// Stop taking requests and end every connection's read loop.
    pub(crate) fn request_exit(&self) {
        self.begin_shutdown();
        self.exiting.store(true, Ordering::SeqCst);
        self.exit.notify_waiters();
    }

    /// Send a notification to every connected client.
    pub fn notify_all(&self, method: &str, params: Value) {
        let _ = self.notifications.send(rpc::notification(method, params));
    }

    /// Reload the policy set (from a blocking task) and tell clients what happened.
    /// Returns the `policy/reload` result or the rejection as an error.
    pub async fn reload_and_notify(self: &Arc<Self>) -> Result<Value, RpcError> {
        let holder = self.policies.clone();
        let outcome = tokio::task::spawn_blocking(move || holder.reload())
            .await
            .map_err(|e| RpcError::internal(format!("reload task failed: {e}")))?;
        self.ops.metrics.reload(outcome.is_ok());
        match outcome {
            Ok(r) => {
                let v = json!({
                    "policy": r.set.reference(),
                    "changed": r.changed,
                    "generation": r.set.generation,
                });
                if r.changed {
                    self.notify_all("policy/loaded", v.clone());
                }
                Ok(v)
            }
            Err(rej) => {
                let mut note = json!({
                    "diagnostics": rej.diagnostics,
                    "serving": self.policies.current().reference(),
                });
                // The error's data is the notification without the message.
                let data = note.clone();
                if let Some(fields) = note.as_object_mut() {
                    fields.insert("message".into(), json!(rej.message));
                }
                if !rej.repeated {
                    self.notify_all("policy/rejected", note);
                }
                Err(RpcError::new(code::POLICY_ERROR, rej.message).with_data(data))
            }
        }
    }
}

/// Serve one connection until the peer closes it or `exit` arrives. Requests still running
/// when the peer goes away run to completion (their changes are committed); only their
/// responses are dropped.
pub async fn run_connection<R, W>(shared: Arc<Shared>, reader: R, writer: W)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    run_connection_in(shared, reader, writer, None).await;
}

/// [`run_connection`] in a socket connection slot: the rest of a message must arrive within
/// `message_timeout` of its first byte, and the connection closes when the slot is evicted
/// (see [`super::slots`]). Each ends the connection with one error response saying why.
pub async fn run_connection_in<R, W>(
    shared: Arc<Shared>,
    reader: R,
    writer: W,
    slot: Option<Arc<Slot>>,
) where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let framing = shared.cfg.framing;
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(MAX_QUEUED_RESPONSES);
    let notes = shared.notifications.subscribe();
    let writer_task = tokio::spawn(write_loop(writer, framing, out_rx, notes));
    let cancels: Cancels = Arc::default();
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION));
    let mut conn = Conn {
        out: Out {
            tx: out_tx,
            framing,
        },
        cancels,
        permits,
        admitted: None,
    };
    let mut frames = FrameReader::new(reader, framing, shared.cfg.max_message);
    loop {
        // Read only while this connection has room for another request (backpressure).
        let permit = tokio::select! {
            p = conn.permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shared.exit_requested() => break,
        };
        let frame = match &slot {
            None => tokio::select! {
                f = frames.next() => f,
                _ = shared.exit_requested() => break,
            },
            Some(slot) => match next_in_slot(&shared, &mut frames, slot).await {
                Slotted::Frame(f) => f,
                Slotted::Exit => break,
                Slotted::Closed(why) => {
                    let err = RpcError::new(code::INVALID_REQUEST, why);
                    let _ = conn.out.send(rpc::error_response(None, &err)).await;
                    break;
                }
            },
        };
        let body = match frame {
            Ok(Frame::Message(b)) => b,
            Ok(Frame::Eof) | Err(_) => break,
            Ok(Frame::Bad(e)) => {
                // Over the limit: the message names the setting that sets it.
                let (code, message) = match e {
                    FrameError::BadHeader(_) => (code::PARSE_ERROR, e.to_string()),
                    FrameError::TooLarge { .. } | FrameError::LineTooLong { .. } => (
                        code::INVALID_REQUEST,
                        format!("{e} ({})", shared.cfg.settings.max_message),
                    ),
                };
                let _ = conn
                    .out
                    .send(rpc::error_response(None, &RpcError::new(code, message)))
                    .await;
                continue;
            }
        };
        match rpc::parse(&body) {
            Err((id, err)) => {
                let _ = conn.out.send(rpc::error_response(id.as_ref(), &err)).await;
            }
            Ok(Incoming::Response) => {}
            Ok(Incoming::Notification { method, params }) => match method.as_str() {
                "exit" => {
                    shared.request_exit();
                    break;
                }
                "$/cancelRequest" => {
                    let id = params.get("id").and_then(Id::from_value);
                    if let Some(tx) = id.and_then(|id| lock(&conn.cancels).remove(&id)) {
                        let _ = tx.send(());
                    }
                }
                // Other notifications (`$/setTrace`, ...) need no answer.
                _ => {}
            },
            Ok(Incoming::Request { id, method, params }) => {
                handle_request(&shared, &mut conn, permit, id, method, params).await;
            }
        }
    }
    drop(conn);
    // Responses of requests still running are sent as they finish; the writer ends when the
    // last of them drops its sender.
    let _ = writer_task.await;
}

/// What waiting for the next frame in a slot gave.
enum Slotted {
    Frame(std::io::Result<Frame>),
    /// The server is exiting.
    Exit,
    /// The connection is closed, for this reason (told to the client).
    Closed(String),
}

/// The next frame of a connection in a slot: waiting for a message's first byte is not
/// limited; the rest of it must come within `--message-timeout`. An eviction ends either wait.
async fn next_in_slot<R: AsyncBufRead + Unpin>(
    shared: &Shared,
    frames: &mut FrameReader<R>,
    slot: &Slot,
) -> Slotted {
    let evicted = || {
        Slotted::Closed(format!(
            "connection closed: all {} connection slots were taken ({}) and this connection had sent only part of a message, and nothing for the longest; finish each message you start",
            shared.cfg.max_connections, shared.cfg.settings.max_connections
        ))
    };
    let ready = tokio::select! {
        r = frames.ready() => r,
        _ = shared.exit_requested() => return Slotted::Exit,
        _ = slot.evicted() => return evicted(),
    };
    match ready {
        Ok(true) => {}
        Ok(false) => return Slotted::Frame(Ok(Frame::Eof)),
        Err(e) => return Slotted::Frame(Err(e)),
    }
    slot.set_incomplete(true);
    let limit = shared.cfg.message_timeout;
    let frame = tokio::select! {
        f = tokio::time::timeout(limit, frames.next()) => match f {
            Ok(f) => Slotted::Frame(f),
            Err(_) => Slotted::Closed(format!(
                "connection closed: a message was started but not finished within {} ({})",
                humanize(limit),
                shared.cfg.settings.message_timeout
            )),
        },
        _ = shared.exit_requested() => Slotted::Exit,
        _ = slot.evicted() => evicted(),
    };
    slot.set_incomplete(false);
    frame
}

/// A timeout as `30 s` or `250 ms`.
fn humanize(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A connection's bounded response queue. Messages go in serialized and framed, so the
/// writer sends each with one write.
#[derive(Clone)]
struct Out {
    tx: mpsc::Sender<Vec<u8>>,
    framing: framing::Framing,
}

impl Out {
    /// Queue a message (waits while the queue is full).
    async fn send(&self, msg: Value) -> Result<(), mpsc::error::SendError<Vec<u8>>> {
        self.tx.send(encode(self.framing, &msg)).await
    }

    /// Queue a message already framed ([`reply`]).
    async fn send_frame(&self, frame: Vec<u8>) -> Result<(), mpsc::error::SendError<Vec<u8>>> {
        self.tx.send(frame).await
    }
}

/// A message serialized and framed.
fn encode(framing: framing::Framing, msg: &Value) -> Vec<u8> {
    framing::frame(framing, serde_json::to_vec(msg).unwrap_or_default())
}

/// The framed response of request `id`: its result, or its error.
fn reply(framing: framing::Framing, id: &Id, result: &Result<Value, RpcError>) -> Vec<u8> {
    match result {
        Ok(v) => framing::frame(framing, rpc::response_body(id, v)),
        Err(e) => encode(framing, &rpc::error_response(Some(id), e)),
    }
}

/// [`reply`] of a result given as its JSON text.
fn reply_json(framing: framing::Framing, id: &Id, result: &Result<Vec<u8>, RpcError>) -> Vec<u8> {
    match result {
        Ok(json) => framing::frame(framing, rpc::response_body_json(id, json)),
        Err(e) => encode(framing, &rpc::error_response(Some(id), e)),
    }
}

/// What the read loop of one connection keeps.
struct Conn {
    /// The connection's bounded response queue.
    out: Out,
    cancels: Cancels,
    /// The connection's in-flight places.
    permits: Arc<Semaphore>,
    /// Signalled when the last request that names threads has taken its queue places: the
    /// next one takes its places after it, so places follow the connection's arrival order
    /// although the thread ids are read (and `stateText` parsed) off the read loop.
    admitted: Option<oneshot::Receiver<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn handle_request(
    shared: &Arc<Shared>,
    conn: &mut Conn,
    permit: OwnedSemaphorePermit,
    id: Id,
    method: String,
    params: Value,
) {
    let out = &conn.out;
    if method == "exit" {
        let _ = out.send(rpc::response(&id, Value::Null)).await;
        shared.request_exit();
        return;
    }
    if shared.is_shutting_down() {
        let err = RpcError::new(
            code::SHUTTING_DOWN,
            format!("the server is shutting down; `{method}` was not run"),
        );
        let _ = out.send(rpc::error_response(Some(&id), &err)).await;
        return;
    }
    if method == "shutdown" {
        shared.begin_shutdown();
        let (s, out) = (shared.clone(), out.clone());
        tokio::spawn(async move {
            let _permit = permit;
            s.drain().await;
            let _ = out.send(rpc::response(&id, Value::Null)).await;
        });
        return;
    }
    let Some(spec) = methods::lookup(&method) else {
        let err = RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{method}`; methods: {}",
                methods::NAMES.join(", ")
            ),
        );
        let _ = out.send(rpc::error_response(Some(&id), &err)).await;
        return;
    };
    let guard = shared.enter(&method);
    // A request that can name threads takes its queue places after the connection's previous
    // such request; one that cannot (no thread, state or child in its params) needs no place.
    let names_threads = methods::may_name_threads(&method, &params);
    let admission = if names_threads {
        let (tx, rx) = oneshot::channel::<()>();
        Some((conn.admitted.replace(rx), tx))
    } else {
        None
    };
    let (cancel_tx, cancel_rx) = oneshot::channel::<()>();
    lock(&conn.cancels).insert(id.clone(), cancel_tx);
    let (s, out, cancels) = (shared.clone(), out.clone(), conn.cancels.clone());
    tokio::spawn(async move {
        let mut guard = guard;
        let _permit = permit;
        let mut cancel_rx = cancel_rx;
        // Read the threads the request names off the read loop (a `stateText` is parsed, a
        // `mergeBack` asks the store), then take their queue places in arrival order.
        let (params, keys, parsed, admitted) = match admission {
            None => (params, Vec::new(), None, None),
            Some((prev, admitted)) => {
                if let Some(prev) = prev {
                    let _ = prev.await;
                }
                if methods::keys_need_work(&method, &params) {
                    let hop = KeysHop {
                        s: s.clone(),
                        method: method.clone(),
                        id: id.clone(),
                        framing: out.framing,
                    };
                    // A small inline `explain`/`render` is answered on this worker, without
                    // a hop to the pool and back.
                    let end = if methods::computes_where_read(&s, &method, &params) {
                        hop.run_here(params, admitted)
                    } else {
                        hop.run(params, admitted, spec, &mut cancel_rx).await
                    };
                    match end {
                        HopEnd::Answered(msg, held, failed) => {
                            lock(&cancels).remove(&id);
                            let _ = out.send_frame(msg).await;
                            drop(held);
                            guard.failed = failed;
                        }
                        HopEnd::Failed(e) => {
                            lock(&cancels).remove(&id);
                            let _ = out.send(rpc::error_response(Some(&id), &e)).await;
                            guard.failed = true;
                        }
                        HopEnd::Queued(params, parsed, queued) => {
                            guard.failed = run_request(
                                s, out, cancels, cancel_rx, spec, id, method, params, parsed,
                                queued,
                            )
                            .await;
                        }
                    }
                    return;
                }
                let (keys, parsed) = methods::thread_keys(&s, &method, &params);
                (params, keys, parsed, Some(admitted))
            }
        };
        let queued = s.queue(keys);
        if let Some(admitted) = admitted {
            let _ = admitted.send(());
        }
        guard.failed = run_request(
            s, out, cancels, cancel_rx, spec, id, method, params, parsed, queued,
        )
        .await;
    });
}

/// A request's place in its threads' queues: the signals to wait for, and its turn.
type Queued = (Vec<oneshot::Receiver<()>>, Turn);

/// Reading a request's threads off the read loop (a `stateText` is parsed, a `mergeBack`
/// asks the store): on the blocking pool, or, for a small inline `explain`/`render`
/// ([`methods::computes_where_read`]), on the worker that read it. The same step takes the
/// request's queue places and, when no earlier request of its threads is still running and
/// the method only computes, runs it there and then: at most one hop to the pool, none for a
/// small inline request.
struct KeysHop {
    s: Arc<Shared>,
    method: String,
    id: Id,
    framing: framing::Framing,
}

/// What the hop to the blocking pool produced.
enum HopOutcome {
    /// The request ran: its framed response, its turn (held until the response is queued),
    /// and whether it failed.
    Ran(Vec<u8>, Turn, bool),
    /// Its places are taken; it waits for earlier requests (or runs on the pool later).
    Queued(Value, Option<methods::ParsedText>, Queued),
}

impl From<HopOutcome> for HopEnd {
    fn from(outcome: HopOutcome) -> HopEnd {
        match outcome {
            HopOutcome::Ran(msg, turn, failed) => HopEnd::Answered(msg, Some(turn), failed),
            HopOutcome::Queued(params, parsed, queued) => HopEnd::Queued(params, parsed, queued),
        }
    }
}

/// How the hop ended for the session.
enum HopEnd {
    /// The response to queue (the result, or the cancellation), the turn to hold until it is
    /// queued, and whether it is an error.
    Answered(Vec<u8>, Option<Turn>, bool),
    /// The hop failed (its task panicked).
    Failed(RpcError),
    /// The request holds its places; the rest runs as any other request.
    Queued(Value, Option<methods::ParsedText>, Queued),
}

impl KeysHop {
    /// Read the request's threads, take its queue places, and run it at once when it only
    /// computes and nothing of its threads runs ahead of it. Blocking: on the pool, or on a
    /// worker for a request small enough ([`methods::computes_where_read`]).
    fn read(self, params: Value, admitted: oneshot::Sender<()>) -> HopOutcome {
        let KeysHop {
            s,
            method,
            id,
            framing,
        } = self;
        let (keys, parsed) = methods::thread_keys(&s, &method, &params);
        let (waits, turn) = s.queue(keys);
        let _ = admitted.send(());
        if waits.is_empty() && methods::runs_where_keys_are_read(&method) {
            let result = methods::call_here(&s, &method, params, turn.clone(), parsed);
            HopOutcome::Ran(reply_json(framing, &id, &result), turn, result.is_err())
        } else {
            HopOutcome::Queued(params, parsed, (waits, turn))
        }
    }

    /// [`KeysHop::read`] on the calling thread (a runtime worker). A panic is answered as a
    /// pool task's is ([`HopEnd::Failed`]), not left unanswered with the worker's task.
    fn run_here(self, params: Value, admitted: oneshot::Sender<()>) -> HopEnd {
        let method = self.method.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.read(params, admitted)
        })) {
            Ok(outcome) => outcome.into(),
            Err(_) => HopEnd::Failed(RpcError::internal(format!(
                "reading the request's threads failed: `{method}` panicked"
            ))),
        }
    }

    async fn run(
        self,
        params: Value,
        admitted: oneshot::Sender<()>,
        spec: methods::Spec,
        cancel_rx: &mut oneshot::Receiver<()>,
    ) -> HopEnd {
        let (method, id, framing) = (self.method.clone(), self.id.clone(), self.framing);
        let mut hop = tokio::task::spawn_blocking(move || self.read(params, admitted));
        let done = if spec.mutates {
            Some((&mut hop).await)
        } else {
            let cancelled = async {
                if cancel_rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                biased;
                _ = cancelled => None,
                r = &mut hop => Some(r),
            }
        };
        match done {
            Some(Ok(outcome)) => outcome.into(),
            Some(Err(e)) => HopEnd::Failed(RpcError::internal(format!(
                "reading the request's threads failed: {e}"
            ))),
            None => {
                // Cancelled during the hop: answer at once. The hop's work finishes on the
                // pool; a request it left queued hands its threads on only once the requests
                // ahead of it have finished.
                tokio::spawn(async move {
                    if let Ok(HopOutcome::Queued(_, _, (waits, turn))) = hop.await {
                        for w in waits {
                            let _ = w.await;
                        }
                        drop(turn);
                    }
                });
                let err = cancelled_error(&method);
                HopEnd::Answered(
                    encode(framing, &rpc::error_response(Some(&id), &err)),
                    None,
                    true,
                )
            }
        }
    }
}

/// Wait for the request's turn in its threads' queues, run it, and queue its response.
/// Returns whether it failed.
#[allow(clippy::too_many_arguments)]
async fn run_request(
    s: Arc<Shared>,
    out: Out,
    cancels: Cancels,
    cancel_rx: oneshot::Receiver<()>,
    spec: methods::Spec,
    id: Id,
    method: String,
    params: Value,
    parsed: Option<methods::ParsedText>,
    (waits, turn): Queued,
) -> bool {
    let held = turn.clone();
    // A small inline `explain`/`render` whose turn came after waiting runs on this worker, as
    // one whose threads were free does (`KeysHop::run_here`): no hop to the pool and back
    // (issue 23 point 7: the clients of one thread at once, docs/performance.md).
    let here = methods::runs_where_keys_are_read(&method)
        && methods::computes_where_read(&s, &method, &params);
    let cancelled = async move {
        if cancel_rx.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(cancelled);
    let (msg, failed) = async {
        // Wait for the previous request of each thread named (cancellable while queued).
        let mut waits = waits.into_iter();
        while let Some(mut w) = waits.next() {
            tokio::select! {
                biased;
                _ = &mut cancelled => {
                    // Hand the threads on only once the requests ahead have finished.
                    tokio::spawn(async move {
                        let _ = w.await;
                        for w in waits {
                            let _ = w.await;
                        }
                        drop(turn);
                    });
                    let result = Err(cancelled_error(&method));
                    return (reply(out.framing, &id, &result), true);
                }
                _ = &mut w => {}
            }
        }
        if here {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                methods::call_here(&s, &method, params, turn, parsed)
            }))
            .unwrap_or_else(|_| Err(RpcError::internal(format!("`{method}` panicked"))));
            return (reply_json(out.framing, &id, &result), result.is_err());
        }
        let work = methods::call(&s, &method, params, turn, parsed);
        let result = if spec.mutates {
            // Once a change has started it runs to the end and reports what it committed.
            work.await
        } else {
            tokio::select! {
                biased;
                _ = &mut cancelled => Err(cancelled_error(&method)),
                r = work => r,
            }
        };
        (reply(out.framing, &id, &result), result.is_err())
    }
    .await;
    lock(&cancels).remove(&id);
    // Waits while the connection's queue is full (the client is not reading).
    let _ = out.send_frame(msg).await;
    drop(held);
    failed
}

fn cancelled_error(method: &str) -> RpcError {
    RpcError::new(
        code::REQUEST_CANCELLED,
        format!("`{method}` was cancelled by the client"),
    )
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    framing: framing::Framing,
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut notes: broadcast::Receiver<Value>,
) {
    use tokio::io::AsyncWriteExt;
    let mut notes_open = true;
    loop {
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
            n = notes.recv(), if notes_open => match n {
                Ok(n) => encode(framing, &n),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => {
                    notes_open = false;
                    continue;
                }
            },
        };
        let written = match w.write_all(&msg).await {
            Ok(()) => w.flush().await,
            Err(e) => Err(e),
        };
        if written.is_err() {
            // The peer is gone: keep draining so senders never block, but write nothing.
            while rx.recv().await.is_some() {}
            break;
        }
    }
}
