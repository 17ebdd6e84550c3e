//! The connection slots of the socket transport (`--max-connections`): which connections are
//! partway through a message and when each last sent a byte. A client that starts a message
//! and never finishes it cannot hold its slot for ever: the rest of a message must arrive
//! within `--message-timeout` of its first byte, and when every slot is taken, a new client
//! takes the slot of the connection that is partway through a message and has sent nothing
//! for the longest (the idlest incomplete one), which is told why and closed. Connections
//! between messages are never timed out or evicted: an editor may keep one open all day.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

/// Default of `--message-timeout`: how long the rest of a message may take after its first
/// byte.
pub const DEFAULT_MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One socket connection's slot.
pub struct Slot {
    epoch: Instant,
    /// When the connection last sent a byte, in microseconds since `epoch`.
    last_read: AtomicU64,
    /// A message has started and is not complete yet.
    incomplete: AtomicBool,
    /// Chosen for eviction (it no longer counts toward the limit).
    evicted: AtomicBool,
    evict: Notify,
}

impl Slot {
    fn new(epoch: Instant) -> Slot {
        let slot = Slot {
            epoch,
            last_read: AtomicU64::new(0),
            incomplete: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        };
        slot.touch();
        slot
    }

    /// The connection sent a byte now.
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_read.store(now, Ordering::Relaxed);
    }

    /// A message has started (`true`) or has been read whole (`false`).
    pub fn set_incomplete(&self, incomplete: bool) {
        self.incomplete.store(incomplete, Ordering::SeqCst);
    }

    /// Completes when this connection has been evicted.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

/// Every socket connection's slot.
pub struct Slots {
    epoch: Instant,
    list: Mutex<Vec<Arc<Slot>>>,
}

/// Whether a new connection is admitted.
pub enum Admit {
    /// It takes a free slot.
    Free(Arc<Slot>),
    /// It takes the slot of the idlest incomplete connection, which is being closed.
    Evicting(Arc<Slot>),
    /// Every slot is taken by a connection between messages: refuse it.
    Full,
}

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            epoch: Instant::now(),
            list: Mutex::new(Vec::new()),
        }
    }
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Slot>>> {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        // A slot whose connection has ended is held by this list alone.
        list.retain(|s| Arc::strong_count(s) > 1);
        list
    }

    /// Admit a new connection under a limit of `max` connections.
    pub fn admit(&self, max: usize) -> Admit {
        let mut list = self.lock();
        let live = list
            .iter()
            .filter(|s| !s.evicted.load(Ordering::SeqCst))
            .count();
        let admit = if live < max {
            Admit::Free
        } else {
            let idlest = list
                .iter()
                .filter(|s| !s.evicted.load(Ordering::SeqCst))
                .filter(|s| s.incomplete.load(Ordering::SeqCst))
                .min_by_key(|s| s.last_read.load(Ordering::Relaxed));
            match idlest {
                Some(victim) => {
                    victim.evicted.store(true, Ordering::SeqCst);
                    victim.evict.notify_one();
                    Admit::Evicting
                }
                None => return Admit::Full,
            }
        };
        let slot = Arc::new(Slot::new(self.epoch));
        list.push(slot.clone());
        admit(slot)
    }

    /// (open connections, connections partway through a message), for `health`.
    pub fn counts(&self) -> (usize, usize) {
        let list = self.lock();
        let open = list
            .iter()
            .filter(|s| !s.evicted.load(Ordering::SeqCst))
            .count();
        let incomplete = list
            .iter()
            .filter(|s| !s.evicted.load(Ordering::SeqCst) && s.incomplete.load(Ordering::SeqCst))
            .count();
        (open, incomplete)
    }
}

/// A reader that records in its slot when the peer last sent a byte.
pub struct Tracked<R> {
    inner: R,
    slot: Arc<Slot>,
}

impl<R> Tracked<R> {
    pub fn new(inner: R, slot: Arc<Slot>) -> Tracked<R> {
        Tracked { inner, slot }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tracked<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.slot.touch();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idlest_incomplete_connection_is_evicted_and_idle_ones_are_not() {
        let slots = Slots::default();
        let Admit::Free(a) = slots.admit(3) else {
            panic!("a free slot")
        };
        let Admit::Free(b) = slots.admit(3) else {
            panic!("a free slot")
        };
        let Admit::Free(c) = slots.admit(3) else {
            panic!("a free slot")
        };
        assert!(matches!(slots.admit(3), Admit::Full));
        b.set_incomplete(true);
        c.set_incomplete(true);
        b.last_read.store(5, Ordering::Relaxed);
        c.last_read.store(1, Ordering::Relaxed);
        assert_eq!(slots.counts(), (3, 2));
        let Admit::Evicting(d) = slots.admit(3) else {
            panic!("evicts")
        };
        assert!(c.evicted.load(Ordering::SeqCst));
        assert!(!b.evicted.load(Ordering::SeqCst));
        assert_eq!(slots.counts(), (3, 1));
        drop((a, d));
        assert_eq!(slots.counts(), (1, 1));
    }
}
