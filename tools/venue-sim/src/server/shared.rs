//! What every connection thread shares: the venue state behind its one lock, the
//! venue clock and the stop flag.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::clock::VenueClock;
use crate::engine::state::Venue;

/// How often blocked threads look at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(50);

pub(crate) struct Shared {
    pub(crate) venue: Mutex<Venue>,
    pub(crate) stop: AtomicBool,
    /// The venue clock's offset from the host's, ms: the configured offset plus
    /// every [`crate::Server::advance_clock`] so far.
    pub(crate) offset_ms: AtomicI64,
    pub(crate) conns: Mutex<Vec<JoinHandle<()>>>,
    /// Raised by [`crate::Server::drop_bybit_private`]: every Bybit private
    /// connection opened before ends at its next look (a network cut).
    pub(crate) private_cuts: AtomicU64,
    /// Raised by [`crate::Server::drop_deribit_ws`]: every Deribit WebSocket
    /// opened before ends at its next look (a network cut).
    pub(crate) deribit_cuts: AtomicU64,
}

impl Shared {
    pub(crate) fn venue(&self) -> MutexGuard<'_, Venue> {
        // A poisoned lock means a handler panicked; the counts are still the best
        // record there is, so keep serving them.
        self.venue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The venue's clock as it stands.
    pub(crate) fn clock(&self) -> VenueClock {
        VenueClock {
            offset_ms: self.offset_ms.load(Ordering::SeqCst),
        }
    }

    /// The venue's current time, UTC ms.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock().now_ms()
    }
}

/// Sleeps `total`, in steps, returning early once the server is stopping.
pub(crate) fn sleep_unless_stopped(total: Duration, shared: &Shared) {
    let mut left = total;
    while !left.is_zero() && !shared.stop.load(Ordering::SeqCst) {
        let step = left.min(POLL);
        thread::sleep(step);
        left -= step;
    }
}
