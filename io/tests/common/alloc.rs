//! A counting global allocator for the allocation tests. It forwards every call
//! to the system allocator and counts allocations (`alloc`, `alloc_zeroed`,
//! `realloc`; never `dealloc`) made on threads that called [`watch`], while the
//! gate is open (a [`Counting::gated`] allocator starts closed; [`Counting::new`]
//! has no gate). Each test binary declares its own `#[global_allocator]` static of
//! this type; the counting must never change what is allocated.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Forwards to [`System`]; counts as the module docs say.
pub struct Counting {
    gated: bool,
}

impl Counting {
    /// Counts on watched threads, always.
    pub const fn new() -> Self {
        Counting { gated: false }
    }

    /// Counts on watched threads only while [`open`] says so.
    pub const fn gated() -> Self {
        Counting { gated: true }
    }

    fn note(&self) {
        if self.gated && !OPEN.load(Ordering::Relaxed) {
            return;
        }
        if WATCHED.try_with(Cell::get).unwrap_or(false) {
            TOTAL.fetch_add(1, Ordering::Relaxed);
            let _ = HERE.try_with(|n| n.set(n.get() + 1));
        }
    }
}

static TOTAL: AtomicU64 = AtomicU64::new(0);
static OPEN: AtomicBool = AtomicBool::new(false);

thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    static HERE: Cell<u64> = const { Cell::new(0) };
}

/// Counts (or stops counting) this thread's allocations.
pub fn watch(on: bool) {
    WATCHED.with(|w| w.set(on));
}

/// Opens (or closes) the gate of a [`Counting::gated`] allocator, for all threads.
pub fn open(on: bool) {
    OPEN.store(on, Ordering::SeqCst);
}

/// Allocations counted on all watched threads so far.
pub fn total() -> u64 {
    TOTAL.load(Ordering::SeqCst)
}

/// Allocations counted on this thread so far.
pub fn here() -> u64 {
    HERE.with(Cell::get)
}

// SAFETY: forwards to the system allocator; counting has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.note();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}
