//! What every connection thread shares: the venue state behind its one lock, the
//! venue clock and the stop flag.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::clock::VenueClock;
use crate::engine::state::Venue;

/// How often blocked threads look at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(50);

pub(crate) struct Shared {
    pub(crate) venue: Mutex<Venue>,
    /// Notified when a holder of `venue` lets it go while a test waits on it
    /// ([`Shared::wait`]): the hand-off a test waits on instead of polling.
    pub(crate) changed: Condvar,
    /// How many wait in [`Shared::wait`] (none: nobody is notified).
    pub(crate) waiters: AtomicUsize,
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

/// The venue, locked; waiters in [`Shared::wait`] look again when it is let go.
pub(crate) struct VenueGuard<'a> {
    guard: MutexGuard<'a, Venue>,
    shared: &'a Shared,
}

impl Deref for VenueGuard<'_> {
    type Target = Venue;
    fn deref(&self) -> &Venue {
        &self.guard
    }
}

impl DerefMut for VenueGuard<'_> {
    fn deref_mut(&mut self) -> &mut Venue {
        &mut self.guard
    }
}

impl Drop for VenueGuard<'_> {
    fn drop(&mut self) {
        // A waiter counts itself under the lock before it looks, so one that
        // looked before this holder took the lock is asleep in `wait` by now.
        if self.shared.waiters.load(Ordering::SeqCst) > 0 {
            self.shared.changed.notify_all();
        }
    }
}

impl Shared {
    pub(crate) fn venue(&self) -> VenueGuard<'_> {
        // A poisoned lock means a handler panicked; the counts are still the best
        // record there is, so keep serving them.
        let guard = self.venue.lock().unwrap_or_else(|e| e.into_inner());
        VenueGuard {
            guard,
            shared: self,
        }
    }

    /// Waits until `done` holds of the venue, looked at now and each time a
    /// holder lets the venue go, or until `limit` has passed: whether it holds.
    pub(crate) fn wait(&self, limit: Duration, mut done: impl FnMut(&Venue) -> bool) -> bool {
        let end = Instant::now() + limit;
        let mut v = self.venue.lock().unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let held = loop {
            if done(&v) {
                break true;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            v = match self.changed.wait_timeout(v, left) {
                Ok((v, _)) => v,
                Err(e) => e.into_inner().0,
            };
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        held
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
