//! A bounded, preallocated, lock-free multi-producer single-consumer queue.
//!
//! The slot-sequence ring of D. Vyukov's bounded queue: every slot carries a
//! sequence number that says whose turn it is (a producer of lap `n`, or the
//! consumer of lap `n`), so producers claim a position with one CAS on `tail`
//! and the consumer needs no CAS at all. All slots are allocated by
//! [`bounded`]; `push` and `pop` never allocate, lock, block or make a syscall.
//!
//! A full queue is an immediate [`Full`] that hands the value back: `push` never
//! waits for room and never drops. Each pushed value is popped exactly once.
//!
//! Every atomic and cell goes through `crate::sync`, so the loom models in
//! `io/tests/loom_ring.rs` check this very code.
//!
//! Why not crossbeam's `ArrayQueue` (the same design): it allocates and owns its
//! buffer, so it cannot be laid out in a shared-memory segment as a
//! multi-process user needs (ergon-gateway: a submit ring and an event ring per
//! strategy process), and its loom models run under crossbeam's own cfg, not ours. The
//! padding and the backoff are crossbeam's (`CachePadded`, `Backoff`).
#![allow(unsafe_code)] // The slots are written and read through raw pointers, guarded by the sequence protocol.

use core::fmt;
use core::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicUsize, Backoff, Ordering, UnsafeCell};

/// Largest capacity [`bounded`] accepts.
pub const MAX_CAPACITY: usize = 1 << 24;

/// The queue was full: the value comes back untouched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Full<T>(pub T);

impl<T> fmt::Debug for Full<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Full(..)")
    }
}

/// A capacity [`bounded`] cannot build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapacityError {
    /// The capacity must be a power of two, at least 2 and at most [`MAX_CAPACITY`]
    /// (the slot-sequence protocol cannot tell full from free with one slot).
    Invalid(usize),
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::Invalid(n) => write!(
                f,
                "queue capacity {n} is not a power of two between 2 and {MAX_CAPACITY}"
            ),
        }
    }
}

impl std::error::Error for CapacityError {}

impl CapacityError {
    /// Always [`Culprit::Caller`](crate::Culprit::Caller): the capacity asked.
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            CapacityError::Invalid(_) => crate::Culprit::Caller,
        }
    }
}

impl<T> Full<T> {
    /// Always [`Culprit::Policy`](crate::Culprit::Policy): the queue's bound; the
    /// consumer is behind, try again later.
    pub fn culprit(&self) -> crate::Culprit {
        crate::Culprit::Policy
    }
}

struct Slot<T> {
    /// `pos` when free for the producer of position `pos`; `pos + 1` once that
    /// value is published; `pos + capacity` once consumed (free for the next lap).
    seq: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

struct Ring<T> {
    /// The producers' next position, on its own cache line (crossbeam's
    /// `CachePadded`: 128 bytes on x86, where adjacent-line prefetch pairs lines).
    tail: CachePadded<AtomicUsize>,
    /// Written only by the single consumer; atomic so `Drop` and loom see it.
    head: CachePadded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    mask: usize,
}

// SAFETY: values move between threads through the slots, each slot handed over
// by a Release store of `seq` and taken by an Acquire load of it.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as above; a slot's value is only touched by the one thread whose turn
// `seq` says it is.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    fn push(&self, value: T) -> Result<(), Full<T>> {
        let backoff = Backoff::new();
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let lag = seq.wrapping_sub(pos) as isize;
            if lag == 0 {
                match self.tail.compare_exchange(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the CAS made this producer the only owner of
                        // position `pos`; the consumer does not read the slot
                        // until the Release store below.
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        slot.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(now) => pos = now,
                }
            } else if lag < 0 {
                // The slot still holds the value of the previous lap: full.
                return Err(Full(value));
            } else {
                // Another producer took `pos` since we read `tail`: our view of
                // `tail` is stale. (Rare; under loom the backoff lets it schedule
                // the others.)
                backoff.spin();
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// # Safety
    /// Only one thread at a time may call this (the single consumer, or `Drop`).
    unsafe fn pop(&self) -> Option<T> {
        let pos = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[pos & self.mask];
        let seq = slot.seq.load(Ordering::Acquire);
        if seq != pos.wrapping_add(1) {
            return None;
        }
        // SAFETY: `seq == pos + 1` (Acquire) means the producer of `pos` wrote the
        // value and will not touch the slot again this lap.
        let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
        slot.seq
            .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
        self.head.store(pos.wrapping_add(1), Ordering::Relaxed);
        Some(value)
    }

    fn ready(&self) -> bool {
        let pos = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[pos & self.mask];
        slot.seq.load(Ordering::Acquire) == pos.wrapping_add(1)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread can touch the ring.
        while unsafe { self.pop() }.is_some() {}
    }
}

/// Builds a queue of `capacity` slots, all allocated now.
pub fn bounded<T: Send>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), CapacityError> {
    if !(2..=MAX_CAPACITY).contains(&capacity) || !capacity.is_power_of_two() {
        return Err(CapacityError::Invalid(capacity));
    }
    let slots = (0..capacity)
        .map(|i| Slot {
            seq: AtomicUsize::new(i),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        })
        .collect::<Vec<_>>()
        .into_boxed_slice();
    let ring = Arc::new(Ring {
        tail: CachePadded::new(AtomicUsize::new(0)),
        head: CachePadded::new(AtomicUsize::new(0)),
        slots,
        mask: capacity - 1,
    });
    Ok((
        Producer {
            ring: Arc::clone(&ring),
        },
        Consumer { ring },
    ))
}

/// The sending side: any number of threads, each with its own clone.
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
}

impl<T> Clone for Producer<T> {
    fn clone(&self) -> Self {
        Self {
            ring: Arc::clone(&self.ring),
        }
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<T: Send> Producer<T> {
    /// Appends `value`, or hands it back at once if every slot is taken.
    /// Lock-free: a failed CAS means another producer made progress.
    #[inline]
    pub fn push(&self, value: T) -> Result<(), Full<T>> {
        self.ring.push(value)
    }
}

impl<T> Producer<T> {
    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }
}

/// The receiving side: one thread; `pop` takes `&mut self` so it cannot be shared.
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<T: Send> Consumer<T> {
    /// Takes the oldest published value, if any.
    ///
    /// `None` also while the producer that claimed the next position has not yet
    /// published it; values behind it wait for it (their order is kept).
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        // SAFETY: `Consumer` is not `Clone` and `pop` takes `&mut self`: one caller.
        unsafe { self.ring.pop() }
    }

    /// Whether `pop` would return a value now. An Acquire load: after a SeqCst
    /// fence, this is the loop's half of the park handshake ([`super::wake`]).
    #[inline]
    pub fn ready(&self) -> bool {
        self.ring.ready()
    }
}

impl<T> Consumer<T> {
    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }
}
