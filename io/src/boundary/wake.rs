//! Waking the loop thread when it is parked in `epoll_wait`: a flag plus an eventfd.
//!
//! The handshake is Dekker's: the loop announces `PARKED`, fences, and looks at its
//! queue once more before it sleeps; a submitter publishes its value, fences, and
//! looks at the flag. With a SeqCst fence on both sides at least one of them sees
//! the other's write, so either the loop finds the value and does not sleep, or the
//! submitter sees `PARKED` and writes the eventfd: a wakeup is never lost.
//!
//! Only the submitter that moves the flag `PARKED → NOTIFIED` writes the eventfd,
//! so there is at most one write per park, and none while the loop is awake. A
//! loop in busy-poll mode never announces a park, so no submit ever writes it.
//!
//! What this must never do: write the eventfd when the flag says `AWAKE`, block a
//! submitter, or allocate after [`pair`].
#![allow(unsafe_code)] // The eventfd: system calls through libc.

use crate::sync::{fence, Arc, AtomicU64, AtomicU8, Ordering};

const AWAKE: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

struct Shared {
    state: AtomicU8,
    signal: Signal,
    /// Eventfd writes made by [`Waker::notify`] (a syscall already happened).
    writes: AtomicU64,
    /// Parks announced by the loop; written by the loop thread only.
    parks: AtomicU64,
}

/// Builds the two sides: [`Parker`] for the loop thread, [`Waker`] for submitters.
#[cfg(not(ergon_loom))]
pub fn pair() -> std::io::Result<(Parker, Waker)> {
    Ok(from_signal(Signal::new()?))
}

/// Builds the two sides: [`Parker`] for the loop thread, [`Waker`] for submitters.
/// Under loom the eventfd is a model (a counter, a mutex and a condvar).
#[cfg(ergon_loom)]
pub fn pair() -> std::io::Result<(Parker, Waker)> {
    Ok(from_signal(Signal::new()))
}

fn from_signal(signal: Signal) -> (Parker, Waker) {
    let shared = Arc::new(Shared {
        state: AtomicU8::new(AWAKE),
        signal,
        writes: AtomicU64::new(0),
        parks: AtomicU64::new(0),
    });
    (
        Parker {
            shared: Arc::clone(&shared),
        },
        Waker { shared },
    )
}

/// The submitters' side: cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Waker {
    shared: Arc<Shared>,
}

impl core::fmt::Debug for Waker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Waker")
            .field("writes", &self.writes())
            .finish()
    }
}

impl Waker {
    /// Call after publishing a value the loop must see (e.g. after a successful
    /// push). Writes the eventfd only if the loop has announced a park and no other
    /// submitter has woken it yet; returns whether it wrote.
    #[inline]
    pub fn notify(&self) -> bool {
        // Pairs with the fence in `Parker::prepare_park` (store-buffering).
        fence(Ordering::SeqCst);
        let s = &self.shared;
        if s.state.load(Ordering::Relaxed) != PARKED {
            return false;
        }
        if s.state
            .compare_exchange(PARKED, NOTIFIED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            // AWAKE: the loop woke on its own; NOTIFIED: someone else writes.
            return false;
        }
        s.signal.write();
        s.writes.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Eventfd writes made so far by all wakers of this pair.
    pub fn writes(&self) -> u64 {
        self.shared.writes.load(Ordering::Relaxed)
    }

    /// Parks announced so far by the loop.
    pub fn parks(&self) -> u64 {
        self.shared.parks.load(Ordering::Relaxed)
    }
}

/// The loop thread's side. Not `Clone`: one loop parks.
///
/// Drive order: `prepare_park(pending)`; if it returns true, wait in epoll (with
/// [`Parker::fd`] registered for reading) or in [`Parker::wait`]; then `unpark()`
/// whatever woke you; `drain()` the eventfd when it is readable.
pub struct Parker {
    shared: Arc<Shared>,
}

impl core::fmt::Debug for Parker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Parker")
            .field("parks", &self.shared.parks.load(Ordering::Relaxed))
            .finish()
    }
}

impl Parker {
    /// Announces a park, then asks `pending` once more whether work arrived (it
    /// must look at every queue a [`Waker`] guards, with Acquire loads). Returns
    /// true if the loop may now sleep: any later submit will write the eventfd.
    /// Returns false (and stays awake) if work is pending.
    pub fn prepare_park(&mut self, pending: impl FnOnce() -> bool) -> bool {
        let s = &self.shared;
        s.parks
            .store(s.parks.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        s.state.store(PARKED, Ordering::Relaxed);
        // Pairs with the fence in `Waker::notify` (store-buffering).
        fence(Ordering::SeqCst);
        if pending() {
            self.unpark();
            return false;
        }
        true
    }

    /// Back to `AWAKE` after the sleep, whatever ended it. Returns whether a waker
    /// wrote (or is about to write) the eventfd for this park; that write leaves the
    /// eventfd readable until [`Parker::drain`].
    pub fn unpark(&mut self) -> bool {
        self.shared.state.swap(AWAKE, Ordering::Relaxed) == NOTIFIED
    }

    /// Reads the eventfd's counter back to zero (non-blocking); returns what it held.
    pub fn drain(&mut self) -> u64 {
        self.shared.signal.drain()
    }

    /// Parks announced so far.
    pub fn parks(&self) -> u64 {
        self.shared.parks.load(Ordering::Relaxed)
    }

    /// The eventfd, for the loop's epoll set (readable = woken).
    #[cfg(not(ergon_loom))]
    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.shared.signal.fd.as_raw_fd()
    }

    /// For a loop that has nothing but this eventfd to wait on: sleeps until the
    /// eventfd is readable or `timeout` passes (`None`: no timeout), then drains it.
    /// Returns whether the eventfd was written (false: the timeout ended the
    /// sleep). Call only after `prepare_park` returned true, and `unpark` after.
    pub fn wait(&mut self, timeout: Option<std::time::Duration>) -> bool {
        self.shared.signal.wait(timeout)
    }
}

/// The eventfd.
#[cfg(not(ergon_loom))]
struct Signal {
    fd: std::os::fd::OwnedFd,
}

#[cfg(not(ergon_loom))]
impl Signal {
    fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    fn write(&self) {
        use std::os::fd::AsRawFd;
        let one: u64 = 1;
        loop {
            // SAFETY: writes 8 bytes from a live u64 to an fd we own.
            let n = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    (&one as *const u64).cast(),
                    core::mem::size_of::<u64>(),
                )
            };
            if n >= 0 {
                return;
            }
            // EAGAIN means the counter is at its maximum: already readable, nothing
            // lost. EINTR: again. Nothing else can happen on an eventfd we own.
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
        }
    }

    fn drain(&self) -> u64 {
        use std::os::fd::AsRawFd;
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from an fd we own (non-blocking).
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast(),
                core::mem::size_of::<u64>(),
            )
        };
        if n == core::mem::size_of::<u64>() as isize {
            v
        } else {
            0
        }
    }

    fn wait(&self, timeout: Option<std::time::Duration>) -> bool {
        use std::os::fd::AsRawFd;
        let ms = match timeout {
            None => -1,
            Some(d) => d.as_millis().min(i32::MAX as u128) as i32,
        };
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd. EINTR or a timeout just return: the caller's
        // loop looks at its queues again either way.
        unsafe { libc::poll(&mut pfd, 1, ms) };
        self.drain() > 0
    }
}

/// The loom model of an eventfd: a counter; `wait` blocks until it is non-zero.
/// A lost wakeup leaves the loop blocked forever, which loom reports as a deadlock.
#[cfg(ergon_loom)]
struct Signal {
    count: crate::sync::Mutex<u64>,
    ready: crate::sync::Condvar,
}

#[cfg(ergon_loom)]
impl Signal {
    fn new() -> Self {
        Self {
            count: crate::sync::Mutex::new(0),
            ready: crate::sync::Condvar::new(),
        }
    }

    fn write(&self) {
        *self.count.lock().unwrap() += 1;
        self.ready.notify_one();
    }

    fn drain(&self) -> u64 {
        core::mem::take(&mut *self.count.lock().unwrap())
    }

    fn wait(&self, _timeout: Option<std::time::Duration>) -> bool {
        // No timeout in the model: a timeout would hide a lost wakeup.
        let mut count = self.count.lock().unwrap();
        while *count == 0 {
            count = self.ready.wait(count).unwrap();
        }
        *count = 0;
        true
    }
}
