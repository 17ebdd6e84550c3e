//! One client connection, and the state every connection shares: per-thread FIFO queues,
//! cancellation, in-flight tracking for graceful shutdown, and server notifications.

use super::framing::{self, Frame, FrameError, FrameReader};
use super::methods;
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
use tokio::sync::{broadcast, mpsc, oneshot, Notify};

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
}

/// Counts a request as in flight until dropped.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Shared {
    pub fn new(cfg: ServeConfig, policies: Arc<PolicyHolder>) -> Arc<Shared> {
        Arc::new(Shared {
            stores: StorePool::new(cfg.db.clone()),
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
        })
    }

    /// Requests currently running or queued.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
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
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
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
                note["message"] = json!(rej.message);
                self.notify_all("policy/rejected", note);
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
    let framing = shared.cfg.framing;
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Value>();
    let notes = shared.notifications.subscribe();
    let writer_task = tokio::spawn(write_loop(writer, framing, out_rx, notes));
    let cancels: Cancels = Arc::default();
    let mut frames = FrameReader::new(reader, framing, shared.cfg.max_message);
    loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = shared.exit_requested() => break,
        };
        let body = match frame {
            Ok(Frame::Message(b)) => b,
            Ok(Frame::Eof) | Err(_) => break,
            Ok(Frame::Bad(e)) => {
                let code = match e {
                    FrameError::BadHeader(_) => code::PARSE_ERROR,
                    FrameError::TooLarge { .. } | FrameError::LineTooLong { .. } => {
                        code::INVALID_REQUEST
                    }
                };
                let _ = out_tx.send(rpc::error_response(
                    None,
                    &RpcError::new(code, e.to_string()),
                ));
                continue;
            }
        };
        match rpc::parse(&body) {
            Err((id, err)) => {
                let _ = out_tx.send(rpc::error_response(id.as_ref(), &err));
            }
            Ok(Incoming::Response) => {}
            Ok(Incoming::Notification { method, params }) => match method.as_str() {
                "exit" => {
                    shared.request_exit();
                    break;
                }
                "$/cancelRequest" => {
                    let id = params.get("id").and_then(Id::from_value);
                    if let Some(tx) = id.and_then(|id| lock(&cancels).remove(&id)) {
                        let _ = tx.send(());
                    }
                }
                // Other notifications (`$/setTrace`, ...) need no answer.
                _ => {}
            },
            Ok(Incoming::Request { id, method, params }) => {
                handle_request(&shared, &out_tx, &cancels, id, method, params);
            }
        }
    }
    drop(out_tx);
    // Responses of requests still running are sent as they finish; the writer ends when the
    // last of them drops its sender.
    let _ = writer_task.await;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn handle_request(
    shared: &Arc<Shared>,
    out: &mpsc::UnboundedSender<Value>,
    cancels: &Cancels,
    id: Id,
    method: String,
    params: Value,
) {
    if method == "exit" {
        let _ = out.send(rpc::response(&id, Value::Null));
        shared.request_exit();
        return;
    }
    if shared.is_shutting_down() {
        let err = RpcError::new(
            code::SHUTTING_DOWN,
            format!("the server is shutting down; `{method}` was not run"),
        );
        let _ = out.send(rpc::error_response(Some(&id), &err));
        return;
    }
    if method == "shutdown" {
        shared.begin_shutdown();
        let (s, out) = (shared.clone(), out.clone());
        tokio::spawn(async move {
            s.drain().await;
            let _ = out.send(rpc::response(&id, Value::Null));
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
        let _ = out.send(rpc::error_response(Some(&id), &err));
        return;
    };
    let guard = shared.enter();
    let keys = methods::thread_keys(shared, &method, &params);
    let (waits, turn) = shared.queue(keys);
    let (cancel_tx, cancel_rx) = oneshot::channel::<()>();
    lock(cancels).insert(id.clone(), cancel_tx);
    let (s, out, cancels) = (shared.clone(), out.clone(), cancels.clone());
    let held = turn.clone();
    tokio::spawn(async move {
        let _guard = guard;
        let cancelled = async move {
            if cancel_rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::pin!(cancelled);
        let result = async {
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
                        return Err(cancelled_error(&method));
                    }
                    _ = &mut w => {}
                }
            }
            let work = methods::call(&s, &method, params, turn);
            if spec.mutates {
                // Once a change has started it runs to the end and reports what it committed.
                work.await
            } else {
                tokio::select! {
                    biased;
                    _ = &mut cancelled => Err(cancelled_error(&method)),
                    r = work => r,
                }
            }
        }
        .await;
        lock(&cancels).remove(&id);
        let msg = match result {
            Ok(v) => rpc::response(&id, v),
            Err(e) => rpc::error_response(Some(&id), &e),
        };
        let _ = out.send(msg);
        drop(held);
    });
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
    mut rx: mpsc::UnboundedReceiver<Value>,
    mut notes: broadcast::Receiver<Value>,
) {
    let mut notes_open = true;
    loop {
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
            n = notes.recv(), if notes_open => match n {
                Ok(n) => n,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => {
                    notes_open = false;
                    continue;
                }
            },
        };
        let body = serde_json::to_vec(&msg).unwrap_or_default();
        if framing::write_frame(&mut w, framing, &body).await.is_err() {
            // The peer is gone: keep draining so senders never block, but write nothing.
            while rx.recv().await.is_some() {}
            break;
        }
    }
}
