//! Message framing: `Content-Length` headers as in the Language Server Protocol, or one JSON
//! document per line. Both enforce a size limit and resynchronise after a bad frame, so one bad
//! message never ends the connection.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How messages are delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: N\r\n\r\n` then N bytes (LSP base protocol; what `vscode-jsonrpc` speaks).
    ContentLength,
    /// One JSON document per line (for scripts: `nc`, `jq`, shell pipes).
    Lines,
}

impl Framing {
    /// `content-length` or `lines`.
    pub fn parse(s: &str) -> Option<Framing> {
        match s {
            "content-length" | "lsp" => Some(Framing::ContentLength),
            "lines" | "newline" => Some(Framing::Lines),
            _ => None,
        }
    }
}

/// Longest header line accepted; a longer one is a bad header.
const MAX_HEADER_LINE: usize = 8 * 1024;

/// A frame that could not be read. The reader has already skipped past it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad header: {0}")]
    BadHeader(String),
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("message line exceeds the limit of {max} bytes")]
    LineTooLong { max: usize },
}

/// What one read produced.
#[derive(Debug)]
pub enum Frame {
    /// A message body.
    Message(Vec<u8>),
    /// A bad frame, skipped; the next read continues after it.
    Bad(FrameError),
    /// The peer closed the stream.
    Eof,
}

/// Reads frames from a byte stream.
pub struct FrameReader<R> {
    inner: R,
    framing: Framing,
    max: usize,
    /// After a bad header the body length is unknown: skip until the next `Content-Length`.
    resync: bool,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, framing: Framing, max: usize) -> Self {
        FrameReader {
            inner,
            framing,
            max,
            resync: false,
        }
    }

    /// The next frame. I/O errors end the connection; framing errors do not.
    pub async fn next(&mut self) -> std::io::Result<Frame> {
        match self.framing {
            Framing::Lines => self.next_line().await,
            Framing::ContentLength => self.next_lsp().await,
        }
    }

    /// Wait until the next message's first byte is in (`true`) or the stream has ended
    /// (`false`), consuming nothing.
    pub async fn ready(&mut self) -> std::io::Result<bool> {
        Ok(!self.inner.fill_buf().await?.is_empty())
    }

    /// Read up to and including `\n`, keeping at most `limit` bytes; returns (bytes, overflowed).
    async fn read_line(&mut self, limit: usize) -> std::io::Result<Option<(Vec<u8>, bool)>> {
        let mut out = Vec::new();
        let mut over = false;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Ok(if out.is_empty() && !over {
                    None
                } else {
                    Some((out, over))
                });
            }
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (buf.get(..=i).unwrap_or(buf), true),
                None => (buf, false),
            };
            let n = chunk.len();
            if !over && out.len().saturating_add(n) <= limit {
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

    async fn next_line(&mut self) -> std::io::Result<Frame> {
        loop {
            let Some((line, over)) = self.read_line(self.max.saturating_add(2)).await? else {
                return Ok(Frame::Eof);
            };
            if over {
                return Ok(Frame::Bad(FrameError::LineTooLong { max: self.max }));
            }
            let body = trim_eol(&line);
            if body.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            if body.len() > self.max {
                return Ok(Frame::Bad(FrameError::TooLarge {
                    len: body.len(),
                    max: self.max,
                }));
            }
            return Ok(Frame::Message(body.to_vec()));
        }
    }

    async fn next_lsp(&mut self) -> std::io::Result<Frame> {
        let mut length: Option<usize> = None;
        let mut bad: Option<String> = None;
        let mut seen = false;
        loop {
            let Some((raw, over)) = self.read_line(MAX_HEADER_LINE).await? else {
                if seen && !self.resync {
                    return Ok(Frame::Bad(FrameError::BadHeader(
                        "stream ended inside a header".into(),
                    )));
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
                match find_ci(&line, "content-length:") {
                    Some(i) => {
                        line = line[i..].to_string();
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
                match value.trim().parse::<usize>() {
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
        if let Some(why) = bad {
            if length.is_none() {
                self.resync = true;
            } else if let Some(n) = length {
                self.discard(n).await?;
            }
            return Ok(Frame::Bad(FrameError::BadHeader(why)));
        }
        let Some(n) = length else {
            self.resync = true;
            return Ok(Frame::Bad(FrameError::BadHeader(
                "no Content-Length header".into(),
            )));
        };
        if n > self.max {
            self.discard(n).await?;
            return Ok(Frame::Bad(FrameError::TooLarge {
                len: n,
                max: self.max,
            }));
        }
        let mut body = vec![0u8; n];
        self.inner.read_exact(&mut body).await?;
        Ok(Frame::Message(body))
    }

    async fn discard(&mut self, mut n: usize) -> std::io::Result<()> {
        while n > 0 {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let k = buf.len().min(n);
            self.inner.consume(k);
            n = n.saturating_sub(k);
        }
        Ok(())
    }
}

/// One message with its framing, ready to go out in a single write: the `Content-Length`
/// header and the body, or the body and its newline.
pub fn frame(framing: Framing, mut body: Vec<u8>) -> Vec<u8> {
    match framing {
        Framing::ContentLength => {
            let head = format!("Content-Length: {}\r\n\r\n", body.len());
            let mut out = Vec::with_capacity(head.len().saturating_add(body.len()));
            out.extend_from_slice(head.as_bytes());
            out.append(&mut body);
            out
        }
        Framing::Lines => {
            body.push(b'\n');
            body
        }
    }
}

/// Write one message with the given framing (one write) and flush.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    framing: Framing,
    body: &[u8],
) -> std::io::Result<()> {
    w.write_all(&frame(framing, body.to_vec())).await?;
    w.flush().await
}

fn trim_eol(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    hay.to_ascii_lowercase().find(needle)
}

fn clip(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}
