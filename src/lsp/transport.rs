//! The standard-input transport of `baton lsp`, with the framing limits and error handling of
//! `baton serve` (docs/service.md#framing): a message body over [`MAX_MESSAGE`] bytes is
//! refused without being read into memory, a header line over 8 KiB or a frame without a
//! `Content-Length` is a bad header, and a body that is not JSON, or not a JSON-RPC message,
//! is answered with a JSON-RPC error (`-32700` parse error, `-32600` invalid request). The
//! session goes on after each of them; only the end of input (or `exit`) ends it.
//!
//! `lsp-server`'s own stdio transport reads a body of any announced length into memory and
//! ends the session on the first body that does not parse; this one stands in front of the
//! same [`Connection`], so the server loop is unchanged.

use crossbeam_channel::{bounded, Receiver, Sender};
use lsp_server::{Connection, Message};
use serde_json::{json, Value};
use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The largest message body accepted, in bytes: 8 MiB, as `baton serve`'s default
/// (`serve --max-message`).
pub const MAX_MESSAGE: usize = 8 * 1024 * 1024;

/// The longest header line accepted; a longer one is a bad header.
const MAX_HEADER_LINE: usize = 8 * 1024;

/// JSON-RPC error codes the transport answers with.
const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;

/// What one read produced.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A message body.
    Message(Vec<u8>),
    /// A bad frame, with what to tell the client; the next read continues after it.
    Bad { code: i32, message: String },
    /// The input ended.
    Eof,
}

/// Reads `Content-Length` frames from a byte stream, never holding more than `max` bytes of a
/// body or [`MAX_HEADER_LINE`] bytes of a header line.
pub(crate) struct FrameReader<R> {
    inner: R,
    max: usize,
    /// Bytes of a refused body still to skip before the next header.
    skip: u64,
    /// After a bad header the body length is unknown: skip lines until a `Content-Length`.
    resync: bool,
}

impl<R: BufRead> FrameReader<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        FrameReader {
            inner,
            max,
            skip: 0,
            resync: false,
        }
    }

    /// The next frame. I/O errors end the session; framing errors do not.
    pub(crate) fn next_frame(&mut self) -> io::Result<Frame> {
        // A refused body is skipped after its error was answered, so that a client announcing
        // a huge body hears why at once (and the server ends cleanly if the body never comes).
        while self.skip > 0 {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok(Frame::Eof);
            }
            let k = usize::try_from(self.skip)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            self.inner.consume(k);
            self.skip = self
                .skip
                .saturating_sub(u64::try_from(k).unwrap_or(u64::MAX));
        }
        let mut length: Option<u64> = None;
        let mut bad: Option<String> = None;
        let mut seen = false;
        loop {
            let Some((raw, over)) = self.read_line()? else {
                if seen && !self.resync {
                    return Ok(bad_header("the input ended inside a header".into()));
                }
                return Ok(Frame::Eof);
            };
            if over {
                bad.get_or_insert_with(|| {
                    format!("header line longer than {MAX_HEADER_LINE} bytes")
                });
                seen = true;
                continue;
            }
            let mut line = String::from_utf8_lossy(trim_eol(&raw)).into_owned();
            if self.resync {
                // Skip the unknown body of the previous bad frame up to the next header.
                match line.to_ascii_lowercase().find("content-length:") {
                    Some(i) => {
                        line = line.get(i..).unwrap_or_default().to_string();
                        self.resync = false;
                    }
                    None => continue,
                }
            }
            if line.is_empty() {
                if seen {
                    break;
                }
                continue;
            }
            seen = true;
            let Some((name, value)) = line.split_once(':') else {
                bad.get_or_insert_with(|| format!("`{}` is not `Name: value`", clip(&line)));
                continue;
            };
            if name.trim().eq_ignore_ascii_case("content-length") {
                match value.trim().parse::<u64>() {
                    Ok(n) => length = Some(n),
                    Err(_) => {
                        bad.get_or_insert_with(|| {
                            format!(
                                "Content-Length `{}` is not a byte count",
                                clip(value.trim())
                            )
                        });
                    }
                }
            }
            // Content-Type and unknown headers are accepted and ignored.
        }
        let Some(n) = length else {
            self.resync = true;
            return Ok(bad_header(
                bad.unwrap_or_else(|| "no Content-Length header".into()),
            ));
        };
        if let Some(why) = bad {
            self.skip = n;
            return Ok(bad_header(why));
        }
        let len = usize::try_from(n).ok().filter(|len| *len <= self.max);
        let Some(len) = len else {
            self.skip = n;
            return Ok(Frame::Bad {
                code: INVALID_REQUEST,
                message: format!(
                    "message of {n} bytes exceeds the limit of {} bytes",
                    self.max
                ),
            });
        };
        let mut body = Vec::new();
        let read = (&mut self.inner)
            .take(u64::try_from(len).unwrap_or(u64::MAX))
            .read_to_end(&mut body)?;
        if read < len {
            return Ok(Frame::Eof);
        }
        Ok(Frame::Message(body))
    }

    /// Read up to and including `\n`, keeping at most [`MAX_HEADER_LINE`] bytes; returns
    /// (bytes, overflowed), or `None` at the end of input.
    fn read_line(&mut self) -> io::Result<Option<(Vec<u8>, bool)>> {
        let mut out = Vec::new();
        let mut over = false;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok((!out.is_empty() || over).then_some((out, over)));
            }
            let (n, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i.saturating_add(1), true),
                None => (buf.len(), false),
            };
            let chunk = buf.get(..n).unwrap_or(buf);
            if !over && out.len().saturating_add(n) <= MAX_HEADER_LINE {
                out.extend_from_slice(chunk);
            } else {
                over = true;
                out.clear();
            }
            self.inner.consume(n);
            if done {
                return Ok(Some((out, over)));
            }
        }
    }
}

fn bad_header(why: String) -> Frame {
    Frame::Bad {
        code: PARSE_ERROR,
        message: format!("bad header: {why}"),
    }
}

fn trim_eol(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

fn clip(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A message body as an LSP message, or the error response to send (with the request's id
/// when it has one).
pub(crate) fn parse(body: &[u8]) -> Result<Message, Value> {
    let error = |id: Value, code: i32, message: String| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        error(
            Value::Null,
            PARSE_ERROR,
            format!("invalid JSON at line {} column {}", e.line(), e.column()),
        )
    })?;
    let id = v.get("id").cloned().unwrap_or(Value::Null);
    serde_json::from_value(v).map_err(|e| {
        error(
            id,
            INVALID_REQUEST,
            format!("not a JSON-RPC request, response or notification: {e}"),
        )
    })
}

/// The reader and writer threads of [`stdio`].
pub struct IoThreads {
    reader: JoinHandle<io::Result<()>>,
    writer: JoinHandle<io::Result<()>>,
}

impl IoThreads {
    /// Wait for both threads; the first I/O error either met.
    pub fn join(self) -> io::Result<()> {
        let reader = self
            .reader
            .join()
            .map_err(|_| io::Error::other("the reader thread panicked"))?;
        let writer = self
            .writer
            .join()
            .map_err(|_| io::Error::other("the writer thread panicked"))?;
        reader.and(writer)
    }
}

/// A connection over standard input and output with bounded framing (see the module docs).
pub fn stdio() -> io::Result<(Connection, IoThreads)> {
    let out: Arc<Mutex<io::Stdout>> = Arc::new(Mutex::new(io::stdout()));
    let (writer_tx, writer_rx) = bounded::<Message>(0);
    let w = out.clone();
    let writer = std::thread::Builder::new()
        .name("baton-lsp-writer".into())
        .spawn(move || write_loop(&writer_rx, &w))?;
    let (reader_tx, reader_rx) = bounded::<Message>(0);
    let reader = std::thread::Builder::new()
        .name("baton-lsp-reader".into())
        .spawn(move || read_loop(io::stdin().lock(), &reader_tx, &out, MAX_MESSAGE))?;
    Ok((
        Connection {
            sender: writer_tx,
            receiver: reader_rx,
        },
        IoThreads { reader, writer },
    ))
}

fn write_loop(rx: &Receiver<Message>, out: &Mutex<io::Stdout>) -> io::Result<()> {
    for msg in rx {
        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
        msg.write(&mut *o)?;
    }
    Ok(())
}

/// Read frames until the input ends or `exit` arrives, passing messages to the server and
/// answering bad frames and bodies itself.
pub(crate) fn read_loop(
    input: impl BufRead,
    tx: &Sender<Message>,
    out: &Mutex<impl Write>,
    max: usize,
) -> io::Result<()> {
    let mut frames = FrameReader::new(input, max);
    loop {
        let answer = match frames.next_frame()? {
            Frame::Eof => return Ok(()),
            Frame::Message(body) => match parse(&body) {
                Ok(msg) => {
                    let exit = matches!(&msg, Message::Notification(n) if n.method == "exit");
                    if tx.send(msg).is_err() || exit {
                        return Ok(());
                    }
                    continue;
                }
                Err(answer) => answer,
            },
            Frame::Bad { code, message } => json!({
                "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
            }),
        };
        let text = serde_json::to_string(&answer).map_err(io::Error::other)?;
        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
        write!(o, "Content-Length: {}\r\n\r\n{text}", text.len())?;
        o.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut r = FrameReader::new(input, max);
        let mut out = Vec::new();
        loop {
            match r.next_frame().expect("reads") {
                Frame::Eof => return out,
                Frame::Message(b) => out.push(String::from_utf8(b).expect("utf-8")),
                Frame::Bad { code, message } => out.push(format!("{code} {message}")),
            }
        }
    }

    #[test]
    fn bad_frames_are_reported_and_the_next_one_is_read() {
        let input = b"Content-Length: 2\r\n\r\n{}Content-Length: 100\r\n\r\n0123456789Content-Length: 2\r\n\r\n[]";
        assert_eq!(
            frames(input, 10),
            vec![
                "{}".to_string(),
                "-32600 message of 100 bytes exceeds the limit of 10 bytes".into(),
            ]
        );
        let input = b"Content-Length: 12\r\n\r\n012345678901Content-Length: 2\r\n\r\n[]";
        assert_eq!(
            frames(input, 10),
            vec![
                "-32600 message of 12 bytes exceeds the limit of 10 bytes".to_string(),
                "[]".into(),
            ]
        );
        let input = b"Nonsense\r\n\r\nxxxContent-Length: 2\r\n\r\n[]";
        assert_eq!(
            frames(input, 10),
            vec![
                "-32700 bad header: `Nonsense` is not `Name: value`".to_string(),
                "[]".into()
            ]
        );
    }

    #[test]
    fn a_huge_length_is_refused_without_reading_the_body() {
        let input = b"Content-Length: 1099511627776\r\n\r\n{}";
        assert_eq!(
            frames(input, MAX_MESSAGE),
            vec![format!(
                "-32600 message of 1099511627776 bytes exceeds the limit of {MAX_MESSAGE} bytes"
            )]
        );
    }
}
