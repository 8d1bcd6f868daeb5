//! The one switch between std and loom primitives.
//!
//! Every atomic, cell, `Arc` and backoff of the cross-thread structures
//! ([`crate::boundary`]) comes from here, so a build with `--cfg ergon_loom` runs
//! the very same code under loom's model checker:
//!
//! ```text
//! RUSTFLAGS="--cfg ergon_loom" cargo test --release -p ergon-io --test 'loom_*'
//! ```
//!
//! Nothing else belongs here: no policy, no helpers that hide an ordering.

#[cfg(not(ergon_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(ergon_loom))]
pub(crate) use std::sync::Arc;

#[cfg(ergon_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(ergon_loom)]
pub(crate) use loom::sync::Arc;
/// Only the loom model of the eventfd uses these (see `boundary::wake`).
#[cfg(ergon_loom)]
pub(crate) use loom::sync::{Condvar, Mutex};

/// Backs off in a retry loop on another thread's progress: crossbeam's
/// exponential spin (then yield) on std; under loom every step yields to loom's
/// scheduler, which cannot see a bare spin.
#[cfg(not(ergon_loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Loom's stand-in for crossbeam's `Backoff`: each step lets another modelled
/// thread run.
#[cfg(ergon_loom)]
#[derive(Debug, Default)]
pub(crate) struct Backoff;

#[cfg(ergon_loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }

    pub(crate) fn spin(&self) {
        loom::thread::yield_now();
    }

    pub(crate) fn snooze(&self) {
        loom::thread::yield_now();
    }
}

/// An `UnsafeCell` with loom's access API (`with`, `with_mut`), so loom can
/// check every access to the data it guards for races.
#[cfg(not(ergon_loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(ergon_loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(ergon_loom)]
pub(crate) use loom::cell::UnsafeCell;
