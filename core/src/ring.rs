//! The slotted ring behind sliding windows.
//!
//! The window W is cut into S slots of width w = W/S. The ring keeps S + 1 cells:
//! the slot of `now` and the S before it. A charge made in slot k is dropped only when
//! the ring enters slot k + S + 1, i.e. once the whole of slot k has left the window,
//! so a charge at t is counted at least until t + W has passed (conservative: the
//! classic S-cell ring drops it up to one slot early and over-admits). The price is
//! at most one slot of the window.
//!
//! Never allocates; the steady path (same slot as the last call) is one compare.

use crate::MAX_SLOTS;

#[derive(Clone, Debug)]
pub(crate) struct Ring {
    slot_ns: i64,
    /// Cells in use: S + 1.
    span: u32,
    /// Absolute index (t / w) of the newest slot accounted.
    head: i64,
    /// Cell of `head`.
    head_pos: u32,
    /// First instant after the head slot.
    head_end_ns: i64,
    sum: u64,
    cells: [u32; MAX_SLOTS + 1],
}

impl Ring {
    pub(crate) fn new(window_ns: i64, slots: u32, now: i64) -> Self {
        let slot_ns = window_ns / i64::from(slots);
        let span = slots + 1;
        let head = now.div_euclid(slot_ns);
        Ring {
            slot_ns,
            span,
            head,
            head_pos: head.rem_euclid(i64::from(span)) as u32,
            head_end_ns: head.saturating_add(1).saturating_mul(slot_ns),
            sum: 0,
            cells: [0; MAX_SLOTS + 1],
        }
    }

    pub(crate) fn window_ns(&self) -> i64 {
        self.slot_ns * i64::from(self.span - 1)
    }

    /// Moves the ring to `now`, dropping the slots that left the window.
    #[inline]
    pub(crate) fn advance(&mut self, now: i64) {
        if now < self.head_end_ns {
            return;
        }
        self.catch_up(now);
    }

    #[cold]
    fn catch_up(&mut self, now: i64) {
        let k = now.div_euclid(self.slot_ns);
        let steps = k - self.head;
        if steps >= i64::from(self.span) {
            self.cells[..self.span as usize].fill(0);
            self.sum = 0;
            self.head_pos = k.rem_euclid(i64::from(self.span)) as u32;
        } else {
            for _ in 0..steps {
                self.head_pos += 1;
                if self.head_pos == self.span {
                    self.head_pos = 0;
                }
                let cell = &mut self.cells[self.head_pos as usize];
                self.sum -= u64::from(*cell);
                *cell = 0;
            }
        }
        self.head = k;
        self.head_end_ns = k.saturating_add(1).saturating_mul(self.slot_ns);
    }

    /// The first instant after the slot of the last advance: until then
    /// [`Ring::used`] stays what it is unless something is charged.
    #[inline]
    pub(crate) fn steady_until_ns(&self) -> i64 {
        self.head_end_ns
    }

    /// Units counted now (after [`Ring::advance`]).
    #[inline]
    pub(crate) fn used(&self) -> u64 {
        self.sum
    }

    /// Units the venue surely still counts (after [`Ring::advance`]): all but the
    /// oldest slot's, part of which may already have left the venue's window.
    pub(crate) fn surely_counted(&self) -> u64 {
        let oldest = self.cells[self.pos(self.oldest(self.head))];
        self.sum - u64::from(oldest)
    }

    /// Units that would be counted at `now`, without moving the ring.
    pub(crate) fn used_at(&self, now: i64) -> u64 {
        if now < self.head_end_ns {
            return self.sum;
        }
        let oldest_kept = self.oldest(now.div_euclid(self.slot_ns));
        (oldest_kept.max(self.oldest(self.head))..=self.head)
            .map(|a| u64::from(self.cells[self.pos(a)]))
            .sum()
    }

    /// The oldest slot still in the window when `head` is the newest (saturating at
    /// the start of the clock's range).
    fn oldest(&self, head: i64) -> i64 {
        head.saturating_sub(i64::from(self.span) - 1)
    }

    fn pos(&self, abs: i64) -> usize {
        abs.rem_euclid(i64::from(self.span)) as usize
    }

    #[inline]
    pub(crate) fn add(&mut self, cost: u64) {
        let cell = &mut self.cells[self.head_pos as usize];
        let added = u64::from(u32::MAX - *cell).min(cost);
        // A cell saturates rather than wraps; what did not fit goes on the sum anyway
        // only as far as the cell can later give it back.
        *cell += added as u32;
        self.sum += added;
    }

    /// Takes back `cost` charged at `at` if its slot is still in the window.
    pub(crate) fn refund(&mut self, cost: u64, at: i64) {
        let abs = at.div_euclid(self.slot_ns);
        if abs > self.head || abs < self.oldest(self.head) {
            return;
        }
        let pos = self.pos(abs);
        let back = u64::from(self.cells[pos]).min(cost);
        self.cells[pos] -= back as u32;
        self.sum -= back;
    }

    /// The earliest time at which `used + cost <= allowance` holds if nothing else is
    /// charged. Call only when it does not hold now, with `cost <= allowance`.
    pub(crate) fn ready_at(&self, cost: u64, allowance: u64) -> i64 {
        let span = i64::from(self.span);
        let mut remaining = self.sum;
        let mut ready = self.head_end_ns;
        for abs in self.oldest(self.head)..=self.head {
            remaining -= u64::from(self.cells[self.pos(abs)]);
            ready = abs.saturating_add(span).saturating_mul(self.slot_ns);
            if remaining + cost <= allowance {
                break;
            }
        }
        ready
    }
}
