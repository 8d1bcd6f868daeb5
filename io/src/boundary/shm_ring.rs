//! A bounded single-producer single-consumer ring of fixed-size byte slots that
//! can live in memory shared between processes (ergon-gateway's per-client
//! submit and event rings, `ergon_gateway::shm`).
//!
//! Layout: an [`Indices`] block (the producer's `tail` and the consumer's `head`,
//! each on its own 128-byte line) and `capacity` slots of `slot_bytes` each; a slot
//! is a little-endian `u32` length and then the message. The producer writes the
//! slot at `tail`, then publishes it with a Release store of `tail + 1`; the
//! consumer reads `tail` with Acquire, copies the slot out, and frees it with a
//! Release store of `head + 1`. Indices count up forever (u64: no wrap in
//! practice); the slot is `index % capacity`.
//!
//! The other side is another process and may be hostile: it can write any byte
//! of the block at any time, the slot being read included. So no reference is
//! ever made to shared bytes (a `&[u8]` asserts that nobody writes them while it
//! lives, which a hostile peer breaks, and a racing non-atomic read is a data
//! race): a slot goes between the shared block and a private buffer of its side
//! only by word-sized relaxed atomic loads and stores, and the closures of
//! [`ShmProducer::push`] and [`ShmConsumer::pop`] see that private buffer. Every
//! value taken from the shared block is read once into a local and checked
//! there (`tail - head` at most `capacity`, a length at most the slot) and a bad
//! one is [`Corrupt`], never a panic or an out-of-bounds access; the index that
//! picks a slot is our own count modulo the capacity, never the peer's. A peer
//! that rewrites a slot while it is copied gives us garbage bytes, which the
//! reader's decoder refuses, never undefined behaviour. A full ring is an
//! immediate [`ShmFull`]; nothing blocks, allocates (each side's buffer is made
//! with it) or makes a system call.
//!
//! Every atomic goes through `crate::sync`, so `io/tests/loom_shm_ring.rs` checks
//! this code under loom (the slot bytes are shadowed by loom cells there), and
//! `io/tests/miri_boundary.rs` runs it under Miri with real threads.
#![allow(unsafe_code)] // Slots are raw bytes in a mapping, guarded by the index protocol.

use core::fmt;

use crate::sync::{AtomicU64, Ordering};

/// Bytes of the length prefix at the start of every slot.
pub const LEN_BYTES: usize = 4;

/// The two indices of a ring: 256 bytes, `repr(C)`, all zero when new (a fresh
/// shared mapping is a valid empty ring). The other process may write any of its
/// bytes at any time: the padding is in `UnsafeCell`s (never read), so a
/// reference to it asserts nothing a peer can break.
#[repr(C, align(128))]
pub struct Indices {
    tail: AtomicU64,
    _pad0: core::cell::UnsafeCell<[u8; 120]>,
    head: AtomicU64,
    _pad1: core::cell::UnsafeCell<[u8; 120]>,
}

impl Indices {
    /// An empty ring's indices.
    pub fn new() -> Self {
        Indices {
            tail: AtomicU64::new(0),
            _pad0: core::cell::UnsafeCell::new([0; 120]),
            head: AtomicU64::new(0),
            _pad1: core::cell::UnsafeCell::new([0; 120]),
        }
    }
}

impl Default for Indices {
    fn default() -> Self {
        Self::new()
    }
}

/// The ring is full: nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShmFull;

impl fmt::Display for ShmFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shared ring full")
    }
}

impl std::error::Error for ShmFull {}

impl ShmFull {
    /// Always [`Culprit::Policy`](crate::Culprit::Policy): the ring's bound; the
    /// consumer is behind, try again later.
    pub fn culprit(&self) -> crate::Culprit {
        crate::Culprit::Policy
    }
}

/// What the other side wrote into the shared block makes no sense (a bug or a
/// scribble): the ring cannot be used any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shared ring corrupt (indices or a length out of range)")
    }
}

impl std::error::Error for Corrupt {}

impl Corrupt {
    /// Always [`Culprit::Peer`](crate::Culprit::Peer): the process at the other
    /// end of the shared memory wrote indices or lengths out of range.
    pub fn culprit(&self) -> crate::Culprit {
        crate::Culprit::Peer
    }
}

/// A ring's geometry is not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadGeometry;

impl fmt::Display for BadGeometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ring capacity must be 1..=65536 and slots 8..=1 MiB, multiples of 8")
    }
}

impl std::error::Error for BadGeometry {}

impl BadGeometry {
    /// Always [`Culprit::Caller`](crate::Culprit::Caller): the geometry asked.
    pub fn culprit(&self) -> crate::Culprit {
        crate::Culprit::Caller
    }
}

/// What keeps the ring's memory mapped (a shared mapping, or a heap block).
pub type Keep = std::sync::Arc<dyn Send + Sync>;

struct Raw {
    idx: *const Indices,
    /// 8-aligned: the slots are copied word by word.
    slots: *mut u8,
    cap: u64,
    slot: usize,
    _keep: Keep,
    /// Loom cannot see raw bytes: one cell per slot stands for its contents, so
    /// loom checks that the index protocol orders every access to a slot.
    #[cfg(ergon_loom)]
    shadow: std::sync::Arc<Vec<loom::cell::UnsafeCell<()>>>,
}

// SAFETY: the pointers stay valid while `_keep` lives (which is Send + Sync), and
// every access through them is atomic, so moving a side to another thread is
// sound whatever the peer does.
unsafe impl Send for Raw {}

impl Raw {
    /// The producer's index. Only the atomic fields of [`Indices`] are ever
    /// referenced: the padding between them is shared bytes a peer may write.
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: `idx` points to an `Indices` kept alive by `_keep` (from_raw's
        // contract); an `AtomicU64` may be written by anyone at any time.
        unsafe { &*core::ptr::addr_of!((*self.idx).tail) }
    }

    /// The consumer's index (as [`Raw::tail`]).
    fn head(&self) -> &AtomicU64 {
        // SAFETY: as in `tail`.
        unsafe { &*core::ptr::addr_of!((*self.idx).head) }
    }

    /// The words of the slot of `pos`: `i < cap` is our own arithmetic, never a
    /// value the peer wrote.
    fn slot_words(&self, pos: u64) -> *const Word {
        let i = (pos % self.cap) as usize;
        // SAFETY: i < cap, and the mapping holds cap * slot bytes (from_raw's
        // contract); slots is 8-aligned and slot a multiple of 8 (checked).
        unsafe { self.slots.add(i * self.slot) as *const Word }
    }

    /// Copies the words `words` of the slot of `pos` into the same words of `to`
    /// (one slot long).
    fn load(&self, pos: u64, to: &mut [u64], words: core::ops::Range<usize>) {
        let from = self.slot_words(pos);
        let end = words.end.min(self.slot / 8).min(to.len());
        let start = words.start.min(end);
        for (k, w) in to[start..end].iter_mut().enumerate() {
            // SAFETY: start + k < slot / 8: inside the slot; an aligned word of
            // the mapping, which is only ever accessed atomically on our side.
            *w = unsafe { &*from.add(start + k) }.load(core::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Copies the first `words` words of `from` into the slot of `pos`.
    fn store(&self, pos: u64, from: &[u64], words: usize) {
        let to = self.slot_words(pos);
        for (k, w) in from.iter().take(words.min(self.slot / 8)).enumerate() {
            // SAFETY: as in `load`.
            unsafe { &*to.add(k) }.store(*w, core::sync::atomic::Ordering::Relaxed);
        }
    }

    #[cfg(ergon_loom)]
    fn touch(&self, pos: u64, write: bool) {
        let c = &self.shadow[(pos % self.cap) as usize];
        if write {
            c.with_mut(|_| ());
        } else {
            c.with(|_| ());
        }
    }

    #[cfg(not(ergon_loom))]
    #[inline(always)]
    fn touch(&self, _pos: u64, _write: bool) {}
}

/// A slot word. Not `crate::sync`'s: loom does not model these (its cells in
/// `Raw::shadow` stand for the slots), and a real atomic is what makes a
/// hostile peer's concurrent write harmless under Miri too.
type Word = core::sync::atomic::AtomicU64;

/// The writing side (one, in one process).
pub struct ShmProducer {
    raw: Raw,
    tail: u64,
    head_seen: u64,
    /// The message being written: private, one slot long.
    buf: Box<[u64]>,
}

/// The reading side (one, in one process).
pub struct ShmConsumer {
    raw: Raw,
    head: u64,
    tail_seen: u64,
    /// The message being read: private, one slot long.
    buf: Box<[u64]>,
}

fn check(cap: usize, slot: usize) -> Result<(), BadGeometry> {
    let ok = (1..=65_536).contains(&cap) && (8..=1 << 20).contains(&slot) && slot % 8 == 0;
    ok.then_some(()).ok_or(BadGeometry)
}

/// A private buffer of one slot, in words (so it is 8-aligned).
fn buffer(slot: usize) -> Box<[u64]> {
    vec![0u64; slot / 8].into_boxed_slice()
}

/// The bytes of a word buffer.
fn bytes(b: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and u8 no alignment; same length in bytes.
    unsafe { core::slice::from_raw_parts(b.as_ptr() as *const u8, b.len() * 8) }
}

/// The bytes of a word buffer, writable.
fn bytes_mut(b: &mut [u64]) -> &mut [u8] {
    // SAFETY: as `bytes`; every byte pattern is a valid u64.
    unsafe { core::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, b.len() * 8) }
}

/// Words holding the length prefix and `n` bytes of message.
fn words_for(n: usize) -> usize {
    (LEN_BYTES + n).div_ceil(8)
}

/// Bytes the slots of a ring of `cap` slots of `slot` bytes take.
pub fn slots_bytes(cap: usize, slot: usize) -> usize {
    cap * slot
}

impl Raw {
    /// # Safety
    /// `idx` and `slots` (`cap * slot` bytes) stay valid and mapped while `keep`
    /// lives. What anyone else writes there (the peer, a second side) cannot
    /// cause undefined behaviour here, only [`Corrupt`] or garbage messages.
    unsafe fn new(
        idx: *const Indices,
        slots: *mut u8,
        cap: usize,
        slot: usize,
        keep: Keep,
        #[cfg(ergon_loom)] shadow: std::sync::Arc<Vec<loom::cell::UnsafeCell<()>>>,
    ) -> Result<Self, BadGeometry> {
        check(cap, slot)?;
        if slots as usize % 8 != 0 || idx as usize % core::mem::align_of::<Indices>() != 0 {
            return Err(BadGeometry);
        }
        Ok(Raw {
            idx,
            slots,
            cap: cap as u64,
            slot,
            _keep: keep,
            #[cfg(ergon_loom)]
            shadow,
        })
    }
}

impl ShmProducer {
    /// The producer over a ring at `idx` with `cap` slots of `slot` bytes at `slots`.
    ///
    /// # Safety
    /// `idx` points to an [`Indices`] and `slots` to `cap * slot` bytes, both
    /// valid (mapped, readable, writable) while `keep` lives. Nothing else is
    /// asked of the other process: whatever it writes there, at any time, this
    /// side reads only by atomic loads and answers [`Corrupt`] or hands over
    /// garbage bytes, never undefined behaviour. For the ring to work there is
    /// one producer at a time (a later one may take over from a dead one: it
    /// resumes at the published `tail`). A `slots` that is not 8-aligned (or an
    /// `idx` not aligned for [`Indices`]) is [`BadGeometry`].
    #[cfg(not(ergon_loom))]
    pub unsafe fn from_raw(
        idx: *const Indices,
        slots: *mut u8,
        cap: usize,
        slot: usize,
        keep: Keep,
    ) -> Result<Self, BadGeometry> {
        // SAFETY: the caller's contract is Raw::new's.
        let raw = unsafe { Raw::new(idx, slots, cap, slot, keep)? };
        let tail = raw.tail().load(Ordering::Relaxed);
        let head_seen = raw.head().load(Ordering::Acquire);
        Ok(ShmProducer {
            raw,
            tail,
            head_seen,
            buf: buffer(slot),
        })
    }

    /// Largest message a slot holds.
    pub fn max_message(&self) -> usize {
        self.raw.slot - LEN_BYTES
    }

    /// Writes one message: `write` fills the payload (its argument, of
    /// [`ShmProducer::max_message`] bytes, a private buffer holding whatever an
    /// earlier message left) and returns how many bytes it used (clamped to the
    /// slot); those are copied into the slot. A full ring is `Err(ShmFull)` at
    /// once, `write` not called; a corrupt head is `Err(Corrupt)`.
    pub fn push(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> Result<(), PushError> {
        let cap = self.raw.cap;
        if self.tail.wrapping_sub(self.head_seen) >= cap {
            // Read once: the value checked is the value kept.
            let head = self.raw.head().load(Ordering::Acquire);
            let used = self.tail.wrapping_sub(head);
            if used > cap {
                return Err(PushError::Corrupt);
            }
            self.head_seen = head;
            if used == cap {
                return Err(PushError::Full);
            }
        }
        let max = self.max_message();
        let b = bytes_mut(&mut self.buf);
        let n = write(&mut b[LEN_BYTES..LEN_BYTES + max]).min(max);
        b[..LEN_BYTES].copy_from_slice(&(n as u32).to_le_bytes());
        self.raw.touch(self.tail, true);
        // The slot is ours until we publish tail + 1 (the consumer freed it:
        // head > tail - cap); a peer that writes it anyway only spoils the message.
        self.raw.store(self.tail, &self.buf, words_for(n));
        self.tail = self.tail.wrapping_add(1);
        self.raw.tail().store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Slots free now (reads the consumer's head; 0 if it is out of range).
    pub fn free(&self) -> usize {
        let head = self.raw.head().load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(head);
        self.raw.cap.saturating_sub(used) as usize
    }

    /// Whether the consumer has taken everything published (reads its head).
    pub fn drained(&self) -> bool {
        self.raw.head().load(Ordering::Acquire) == self.tail
    }
}

/// Why a push did not go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The ring is full: nothing was written.
    Full,
    /// The consumer's index is out of range.
    Corrupt,
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full => ShmFull.fmt(f),
            PushError::Corrupt => Corrupt.fmt(f),
        }
    }
}

impl std::error::Error for PushError {}

impl PushError {
    /// Who is at fault: Full is [`ShmFull::culprit`], Corrupt
    /// [`Corrupt::culprit`].
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            PushError::Full => ShmFull.culprit(),
            PushError::Corrupt => Corrupt.culprit(),
        }
    }
}

impl ShmConsumer {
    /// The consumer over a ring (see [`ShmProducer::from_raw`]).
    ///
    /// # Safety
    /// As [`ShmProducer::from_raw`], for the one consumer.
    #[cfg(not(ergon_loom))]
    pub unsafe fn from_raw(
        idx: *const Indices,
        slots: *mut u8,
        cap: usize,
        slot: usize,
        keep: Keep,
    ) -> Result<Self, BadGeometry> {
        // SAFETY: the caller's contract is Raw::new's.
        let raw = unsafe { Raw::new(idx, slots, cap, slot, keep)? };
        let head = raw.head().load(Ordering::Relaxed);
        Ok(ShmConsumer {
            raw,
            head,
            tail_seen: head,
            buf: buffer(slot),
        })
    }

    /// Whether a message is waiting (an Acquire load of the producer's tail).
    pub fn ready(&self) -> bool {
        self.head != self.raw.tail().load(Ordering::Acquire)
    }

    /// Takes one message: `read` gets a private copy of its bytes (valid for the
    /// call) and its result comes back. `Ok(None)`: empty. `Err(Corrupt)`: the
    /// producer's tail or the slot's length is out of range (nothing taken).
    pub fn pop<R>(&mut self, read: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, Corrupt> {
        if self.head == self.tail_seen {
            // Read once: the value checked is the value kept.
            let tail = self.raw.tail().load(Ordering::Acquire);
            let avail = tail.wrapping_sub(self.head);
            if avail > self.raw.cap {
                return Err(Corrupt);
            }
            self.tail_seen = tail;
            if avail == 0 {
                return Ok(None);
            }
        }
        self.raw.touch(self.head, false);
        // The slot was published (head < tail, Acquire above) and stays ours
        // until we store head + 1. The length is read once, into our copy, and
        // checked there; the payload's words follow, copied after the check.
        self.raw.load(self.head, &mut self.buf, 0..1);
        let mut len = [0u8; LEN_BYTES];
        len.copy_from_slice(&bytes(&self.buf)[..LEN_BYTES]);
        let n = u32::from_le_bytes(len) as usize;
        if n > self.raw.slot - LEN_BYTES {
            return Err(Corrupt);
        }
        self.raw.load(self.head, &mut self.buf, 1..words_for(n));
        let r = read(&bytes(&self.buf)[LEN_BYTES..LEN_BYTES + n]);
        self.head = self.head.wrapping_add(1);
        self.raw.head().store(self.head, Ordering::Release);
        Ok(Some(r))
    }
}

/// A ring in heap memory with both sides (tests, Miri, loom).
pub fn heap(cap: usize, slot: usize) -> Result<(ShmProducer, ShmConsumer), BadGeometry> {
    check(cap, slot)?;
    struct Block {
        idx: Box<Indices>,
        /// Atomic words, as the ring accesses them: 8-aligned.
        slots: Box<[Word]>,
    }
    // SAFETY: every byte of the block is an atomic (the padding of `Indices`
    // is never referenced); loom's atomics in `Indices` are Sync under loom.
    unsafe impl Sync for Block {}
    // SAFETY: as above.
    unsafe impl Send for Block {}
    let block = std::sync::Arc::new(Block {
        idx: Box::new(Indices::new()),
        slots: (0..cap * slot / 8).map(|_| Word::new(0)).collect(),
    });
    let idx: *const Indices = &*block.idx;
    let slots = block.slots.as_ptr() as *mut u8;
    #[cfg(ergon_loom)]
    let shadow = std::sync::Arc::new(
        (0..cap)
            .map(|_| loom::cell::UnsafeCell::new(()))
            .collect::<Vec<_>>(),
    );
    let keep: Keep = block;
    // SAFETY: the block lives as long as either side (keep); one producer, one consumer.
    let p = unsafe {
        Raw::new(
            idx,
            slots,
            cap,
            slot,
            keep.clone(),
            #[cfg(ergon_loom)]
            shadow.clone(),
        )?
    };
    // SAFETY: as above.
    let c = unsafe {
        Raw::new(
            idx,
            slots,
            cap,
            slot,
            keep,
            #[cfg(ergon_loom)]
            shadow,
        )?
    };
    Ok((
        ShmProducer {
            raw: p,
            tail: 0,
            head_seen: 0,
            buf: buffer(slot),
        },
        ShmConsumer {
            raw: c,
            head: 0,
            tail_seen: 0,
            buf: buffer(slot),
        },
    ))
}

#[cfg(all(test, not(ergon_loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_at_once_and_in_order() {
        let (mut p, mut c) = heap(4, 16).unwrap();
        for i in 0..4u8 {
            p.push(|b| {
                b[0] = i;
                1
            })
            .unwrap();
        }
        assert_eq!(p.push(|_| 1), Err(PushError::Full));
        assert_eq!(p.free(), 0);
        for i in 0..4u8 {
            assert_eq!(c.pop(|b| b.to_vec()).unwrap(), Some(vec![i]));
        }
        assert_eq!(c.pop(|b| b.len()).unwrap(), None);
        assert!(p.drained());
    }

    #[test]
    fn corrupt_indices_and_lengths_are_errors_not_panics() {
        let (mut p, mut c) = heap(2, 16).unwrap();
        // A scribbled tail far ahead of head.
        p.raw.tail().store(1000, Ordering::Release);
        assert_eq!(c.pop(|b| b.len()), Err(Corrupt));
        p.raw.tail().store(0, Ordering::Release);
        p.push(|_| 3).unwrap();
        // A length beyond the slot.
        p.raw.store(0, &[999], 1);
        assert_eq!(c.pop(|b| b.len()), Err(Corrupt));
        // A head ahead of tail.
        c.raw.head().store(50, Ordering::Release);
        p.head_seen = 0;
        p.tail = 2;
        assert_eq!(p.push(|_| 1), Err(PushError::Corrupt));
        assert_eq!(heap(0, 16).err(), Some(BadGeometry));
        assert_eq!(heap(2, 12).err(), Some(BadGeometry));
    }
}
