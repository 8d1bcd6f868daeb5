//! The one switch between std and loom primitives.
//!
//! Every atomic, cell, `Arc` and spin hint of the cross-thread structures
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

/// Tells the CPU (or loom's scheduler) that this thread is spinning on another one.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(ergon_loom))]
    std::hint::spin_loop();
    #[cfg(ergon_loom)]
    loom::thread::yield_now();
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
