//! What a run did through its proxy: each destination, how it was
//! decided, the bytes each way; and the run's byte budget, which every
//! connection spends.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A destination as the program named it.
pub type Destination = (String, u16);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied,
}

/// One destination's line in the ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    pub allowed: u32,
    pub denied: u32,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// The run's egress, and what it may still send and receive.
#[derive(Debug)]
pub struct Ledger {
    entries: Mutex<BTreeMap<Destination, Entry>>,
    left: AtomicU64,
}

impl Ledger {
    pub fn new(budget: u64) -> Self {
        Self {
            entries: Mutex::default(),
            left: AtomicU64::new(budget),
        }
    }

    pub fn record(&self, at: &Destination, outcome: Outcome) {
        self.with(at, |e| match outcome {
            Outcome::Allowed => e.allowed += 1,
            Outcome::Denied => e.denied += 1,
        });
    }

    /// Every destination so far.
    pub fn entries(&self) -> BTreeMap<Destination, Entry> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }

    fn with(&self, at: &Destination, f: impl FnOnce(&mut Entry)) {
        if let Ok(mut entries) = self.entries.lock() {
            f(entries.entry(at.clone()).or_default());
        }
    }

    /// Takes `n` bytes from the budget: false when not that many are left.
    fn spend(&self, n: u64) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(n))
            .is_ok()
    }
}

/// A destination's stream that counts what passes, against the budget.
pub struct Metered<S> {
    pub inner: S,
    pub ledger: Arc<Ledger>,
    pub at: Destination,
}

fn spent() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the run's egress bytes are spent",
    )
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            if !self.ledger.spend(n) {
                return Poll::Ready(Err(spent()));
            }
            let at = self.at.clone();
            self.ledger.with(&at, |e| e.bytes_in += n);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            if !self.ledger.spend(n as u64) {
                return Poll::Ready(Err(spent()));
            }
            let at = self.at.clone();
            self.ledger.with(&at, |e| e.bytes_out += n as u64);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
