//! A single-writer seqlock over `N` 64-bit words: the loop publishes, any number of
//! monitoring threads read a consistent copy without ever stopping the writer.
//!
//! Every word is an `AtomicU64` (Relaxed), so a reader that races the writer reads
//! a mix of old and new words without undefined behaviour, then sees the sequence
//! move and throws the copy away. The fences are Boehm's ("Can seqlocks get along
//! with programming language memory models?", 2012): the writer makes the sequence
//! odd, Release fence, words, then the even sequence with Release; the reader loads
//! the sequence with Acquire, the words, an Acquire fence, the sequence again.
//!
//! What this must never do: make the writer wait for a reader, allocate after
//! [`seqlock`], or hand a reader a copy that mixes two publications.

use crate::sync::{fence, Arc, AtomicU64, Backoff, Ordering};

struct Shared<const N: usize> {
    seq: AtomicU64,
    words: [AtomicU64; N],
}

/// Builds the lock, every word zero, sequence 0 (nothing published yet).
pub fn seqlock<const N: usize>() -> (SeqWriter<N>, SeqReader<N>) {
    let shared = Arc::new(Shared {
        seq: AtomicU64::new(0),
        words: core::array::from_fn(|_| AtomicU64::new(0)),
    });
    (
        SeqWriter {
            shared: Arc::clone(&shared),
        },
        SeqReader { shared },
    )
}

/// The one writer (not `Clone`).
pub struct SeqWriter<const N: usize> {
    shared: Arc<Shared<N>>,
}

impl<const N: usize> core::fmt::Debug for SeqWriter<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SeqWriter").field("words", &N).finish()
    }
}

impl<const N: usize> SeqWriter<N> {
    /// Publishes `words`: wait-free, N + 2 stores and two fences.
    pub fn publish(&mut self, words: &[u64; N]) {
        let s = &self.shared;
        // Only this writer stores `seq`, so a load + store is enough.
        let seq = s.seq.load(Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd sequence before every word store below.
        fence(Ordering::Release);
        for (cell, &w) in s.words.iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        s.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Publications so far.
    pub fn version(&self) -> u64 {
        self.shared.seq.load(Ordering::Relaxed) / 2
    }
}

/// A reader; clone one per monitoring thread.
#[derive(Clone)]
pub struct SeqReader<const N: usize> {
    shared: Arc<Shared<N>>,
}

impl<const N: usize> core::fmt::Debug for SeqReader<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SeqReader").field("words", &N).finish()
    }
}

impl<const N: usize> SeqReader<N> {
    /// One attempt: copies the words into `out` and returns the publication's
    /// version (publications so far), or `None` if a publication was under way or
    /// overlapped the copy (`out` then holds garbage; try again).
    pub fn try_read(&self, out: &mut [u64; N]) -> Option<u64> {
        let s = &self.shared;
        let before = s.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        for (o, cell) in out.iter_mut().zip(&s.words) {
            *o = cell.load(Ordering::Relaxed);
        }
        // Any word written by a later publication carries that publication's odd
        // sequence with it (writer's Release fence → this Acquire fence).
        fence(Ordering::Acquire);
        let after = s.seq.load(Ordering::Relaxed);
        (after == before).then_some(before / 2)
    }

    /// Copies a consistent publication into `out`, retrying while the writer is
    /// in the middle of one; returns its version. Lock-free for the reader only in
    /// the sense that it never stops the writer: a writer that publishes without
    /// pause can make it spin.
    pub fn read(&self, out: &mut [u64; N]) -> u64 {
        let backoff = Backoff::new();
        loop {
            if let Some(v) = self.try_read(out) {
                return v;
            }
            backoff.snooze();
        }
    }
}
