//! The metrics endpoint (`baton serve --metrics ADDR`): a minimal HTTP/1.1 responder on
//! tokio's TCP listener, the only server the dependency tree already has (no hyper or axum in
//! it). `GET /metrics` answers the exposition text; other paths 404, other methods 405. One
//! request per connection (`Connection: close`); a request head is at most 8 KiB and must
//! arrive within 5 seconds.

use super::session::Shared;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the metrics endpoint cannot start. `Display` is the message; the address is its
/// location ([`crate::Located`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics: {reason}")]
#[non_exhaustive]
pub struct MetricsError {
    /// The `--metrics` address as given.
    pub addr: String,
    /// Why it cannot be served.
    pub reason: String,
}

impl crate::Located for MetricsError {
    fn location(&self) -> Option<String> {
        Some(self.addr.clone())
    }
}

/// Resolve `--metrics ADDR` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`). Refuse an
/// address that is not loopback unless `allow_remote`; the refusal names that setting as
/// `allow_remote_setting` (the `baton serve` command's `--metrics-allow-remote`,
/// [`super::SettingNames`]).
pub fn resolve(
    addr: &str,
    allow_remote: bool,
    allow_remote_setting: &str,
) -> Result<SocketAddr, MetricsError> {
    let err = |reason: String| MetricsError {
        addr: addr.to_string(),
        reason,
    };
    let all: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| err(format!("not an address (give HOST:PORT, e.g. 127.0.0.1:9464): {e}")))?
        .collect();
    let first = *all
        .first()
        .ok_or_else(|| err("the name resolves to no address".into()))?;
    if !allow_remote {
        if let Some(remote) = all.iter().find(|a| !a.ip().is_loopback()) {
            return Err(err(format!(
                "{} is not a loopback address: metrics are served on loopback only (127.0.0.1 or ::1); pass {allow_remote_setting} to serve them on another interface",
                remote.ip()
            )));
        }
    }
    Ok(first)
}

/// Bind the endpoint (at start, so that a port in use is an error before serving).
pub async fn bind(addr: SocketAddr, shown: &str) -> Result<tokio::net::TcpListener, MetricsError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| MetricsError {
            addr: shown.to_string(),
            reason: if e.kind() == std::io::ErrorKind::AddrInUse {
                "the port is in use by another process; choose another port".into()
            } else {
                crate::state::io_reason(&e)
            },
        })
}

/// Answer scrapes until the server exits.
pub async fn run(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let s = shared.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(HEAD_TIMEOUT, answer(stream, s)).await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            _ = shared.exit_requested() => return,
        }
    }
}

async fn answer(mut stream: tokio::net::TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(buf.get(..n).unwrap_or(&[]));
        if head.len() > MAX_HEAD {
            respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request head too large\n",
            )
            .await?;
            // Read (a little of) what the client is still sending before closing: closing with
            // unread input would reset the connection, and the client could lose the answer.
            let mut left: usize = 64 * 1024;
            while left > 0 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
            return Ok(());
        }
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            super::metrics::Metrics::CONTENT_TYPE,
            shared.ops.metrics_text(&shared).into_bytes(),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain",
            b"not found; metrics are at /metrics\n".to_vec(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            b"only GET /metrics\n".to_vec(),
        ),
    };
    respond(&mut stream, status, content_type, &body).await
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    stream.write_all(&msg).await?;
    stream.shutdown().await
}
