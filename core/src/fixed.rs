//! Fixed windows aligned to the venue's clock, with a guard at each boundary.
//!
//! The venue resets its counter at its own boundary, which differs from ours by the
//! clock offset and the one-way latency. A charge within `guard` of a boundary is
//! counted in the windows on both sides of it, so every window the venue could be
//! using (ours shifted by any offset within ±guard) holds at most the limit.
//!
//! State: the counts of the previous, current and next window. Never allocates; the
//! steady path is one compare.

/// The fixed windows one charge counts in ([`Budget::counts_in`](crate::Budget::counts_in)):
/// a charge within the guard of a boundary counts on both sides of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountsIn {
    /// The window holding the charge's time: windows are numbered from the phase,
    /// window `n` starting at `phase + n·window`.
    pub index: i64,
    /// Within the guard after the window's start: window `index - 1` counts it too.
    pub previous: bool,
    /// Within the guard before the window's end: window `index + 1` counts it too.
    pub next: bool,
    /// The first instant a charge no longer counts in window `index`: the next
    /// window's start plus the guard (one window later per later index).
    pub clear_ns: i64,
    /// The window's length.
    pub window_ns: i64,
}

impl CountsIn {
    /// Each window index the charge counts in, lowest first.
    pub fn indices(&self) -> impl Iterator<Item = i64> {
        let (i, p, n) = (self.index, self.previous, self.next);
        [(i - 1, p), (i, true), (i + 1, n)]
            .into_iter()
            .filter_map(|(k, counted)| counted.then_some(k))
    }

    /// The first instant a charge no longer counts in window `index`.
    pub fn clear_of(&self, index: i64) -> i64 {
        self.clear_ns
            .saturating_add((index - self.index).saturating_mul(self.window_ns))
    }
}

/// When a usage figure was counted ([`Windows::figure_time`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum FigureTime {
    /// The venue's stamp, on the windows' clock.
    Stamped(i64),
    /// No stamp: read at this time.
    Read(i64),
}

#[derive(Clone, Debug)]
pub(crate) struct Windows {
    window_ns: i64,
    phase_ns: i64,
    guard_ns: i64,
    /// Index of the current window: windows are `[phase + n·W, phase + (n+1)·W)`.
    index: i64,
    start_ns: i64,
    end_ns: i64,
    /// Counts of windows index-1, index, index+1.
    counts: [u64; 3],
}

impl Windows {
    pub(crate) fn new(window_ns: i64, phase_ns: i64, guard_ns: i64, now: i64) -> Self {
        let phase_ns = phase_ns.rem_euclid(window_ns);
        let mut w = Windows {
            window_ns,
            phase_ns,
            guard_ns,
            index: 0,
            start_ns: 0,
            end_ns: 0,
            counts: [0; 3],
        };
        w.set_index(w.index_of(now));
        w
    }

    pub(crate) fn window_ns(&self) -> i64 {
        self.window_ns
    }

    /// Where the windows are aligned: they start at `phase + n·window`.
    pub(crate) fn phase_ns(&self) -> i64 {
        self.phase_ns
    }

    /// The guard around each boundary.
    pub(crate) fn guard_ns(&self) -> i64 {
        self.guard_ns
    }

    fn index_of(&self, t: i64) -> i64 {
        t.saturating_sub(self.phase_ns).div_euclid(self.window_ns)
    }

    fn start_of(&self, index: i64) -> i64 {
        index
            .saturating_mul(self.window_ns)
            .saturating_add(self.phase_ns)
    }

    fn set_index(&mut self, index: i64) {
        self.index = index;
        self.start_ns = self.start_of(index);
        self.end_ns = self.start_ns.saturating_add(self.window_ns);
    }

    #[inline]
    pub(crate) fn advance(&mut self, now: i64) {
        if now < self.end_ns {
            return;
        }
        self.roll(now);
    }

    #[cold]
    fn roll(&mut self, now: i64) {
        let index = self.index_of(now);
        self.counts = match index - self.index {
            1 => [self.counts[1], self.counts[2], 0],
            2 => [self.counts[2], 0, 0],
            _ => [0; 3],
        };
        self.set_index(index);
    }

    fn count(&self, index: i64) -> u64 {
        match index - self.index {
            -1 => self.counts[0],
            0 => self.counts[1],
            1 => self.counts[2],
            _ => 0,
        }
    }

    /// The windows (relative to the current one, -1..=1) a charge at `t` counts in.
    /// `t` must lie in the current window.
    #[inline]
    fn sides(&self, t: i64) -> (bool, bool) {
        // From the end, not start + window: after a phase change the current window
        // may be longer than one window.
        (
            t - self.start_ns < self.guard_ns,
            t >= self.end_ns.saturating_sub(self.guard_ns),
        )
    }

    /// The windows a charge at `t` counts in: the current window's sides where `t`
    /// lies in it (it may be stretched by a phase change), the plain geometry
    /// elsewhere.
    pub(crate) fn counts_in(&self, t: i64) -> CountsIn {
        let g = self.guard_ns;
        if (self.start_ns..self.end_ns).contains(&t) {
            let (previous, next) = self.sides(t);
            return CountsIn {
                index: self.index,
                previous,
                next,
                clear_ns: self.end_ns.saturating_add(g),
                window_ns: self.window_ns,
            };
        }
        let index = self.index_of(t);
        let start = self.start_of(index);
        let pos = t - start;
        CountsIn {
            index,
            previous: pos < g,
            next: pos >= self.window_ns - g,
            clear_ns: start.saturating_add(self.window_ns).saturating_add(g),
            window_ns: self.window_ns,
        }
    }

    /// At `now` (after [`Windows::advance`]): the most any window a charge counts in
    /// holds, and the instant until which a charge counts in those same windows
    /// (the next guard edge or boundary).
    pub(crate) fn steady(&self, now: i64) -> (u64, i64) {
        let (before, after) = self.sides(now);
        let mut most = self.counts[1];
        if before {
            most = most.max(self.counts[0]);
        }
        if after {
            most = most.max(self.counts[2]);
        }
        let until = if before {
            self.start_ns.saturating_add(self.guard_ns)
        } else if !after {
            self.end_ns.saturating_sub(self.guard_ns)
        } else {
            self.end_ns
        };
        (most, until)
    }

    /// Whether no window tracked holds a count.
    pub(crate) fn is_empty(&self) -> bool {
        self.counts == [0; 3]
    }

    /// The next instant after which a charge at `now` counts in other windows (a
    /// guard edge or a boundary); the current window's end if `now` is past it (the
    /// windows have yet to roll there).
    pub(crate) fn next_edge(&self, now: i64) -> i64 {
        if now >= self.end_ns {
            return self.end_ns;
        }
        self.steady(now).1
    }

    /// Whether `cost` fits at `now` (after [`Windows::advance`]).
    #[inline]
    pub(crate) fn fits(&self, cost: u64, allowance: u64, now: i64) -> bool {
        let (before, after) = self.sides(now);
        let fits = |count: u64| count.saturating_add(cost) <= allowance;
        fits(self.counts[1])
            && (!before || fits(self.counts[0]))
            && (!after || fits(self.counts[2]))
    }

    /// Whether `cost` would fit at any `t`, counting windows as they are now.
    fn fits_at(&self, cost: u64, allowance: u64, t: i64) -> bool {
        let index = self.index_of(t);
        let pos = t - self.start_of(index);
        let fits = |i: i64| self.count(i).saturating_add(cost) <= allowance;
        fits(index)
            && (pos >= self.guard_ns || fits(index - 1))
            && (pos < self.window_ns - self.guard_ns || fits(index + 1))
    }

    /// The earliest time after `now` at which `cost` fits if nothing else is charged.
    /// Which counts a charge must fit changes only at a boundary or a guard edge, and
    /// two windows on every window tracked is empty, so those few instants are the
    /// only candidates. The first is the end of the current window's leading guard:
    /// a window that is full only on the previous window's side is ready there.
    pub(crate) fn ready_at(&self, cost: u64, allowance: u64, now: i64) -> i64 {
        let g = self.guard_ns;
        let b1 = self.end_ns;
        let b2 = b1.saturating_add(self.window_ns);
        let candidates = [
            self.start_ns.saturating_add(g),
            b1.saturating_sub(g),
            b1,
            b1.saturating_add(g),
            b2.saturating_sub(g),
            b2,
            b2.saturating_add(g),
        ];
        candidates
            .into_iter()
            .filter(|&t| t > now)
            .find(|&t| self.fits_at(cost, allowance, t))
            .unwrap_or(b2.saturating_add(g))
    }

    #[inline]
    pub(crate) fn add(&mut self, cost: u64, now: i64) {
        let (before, after) = self.sides(now);
        self.counts[1] = self.counts[1].saturating_add(cost);
        if before {
            self.counts[0] = self.counts[0].saturating_add(cost);
        }
        if after {
            self.counts[2] = self.counts[2].saturating_add(cost);
        }
    }

    /// Takes back `cost` charged at `at` from every window it counted in that is still
    /// tracked.
    pub(crate) fn refund(&mut self, cost: u64, at: i64) {
        let index = self.index_of(at);
        let pos = at - self.start_of(index);
        let mut take = |i: i64| {
            if let Some(slot) = usize::try_from(i - self.index + 1)
                .ok()
                .and_then(|k| self.counts.get_mut(k))
            {
                *slot = slot.saturating_sub(cost);
            }
        };
        take(index);
        if pos < self.guard_ns {
            take(index - 1);
        }
        if pos >= self.window_ns - self.guard_ns {
            take(index + 1);
        }
    }

    /// Realigns the windows to `phase_ns` at `now` (after [`Windows::advance`]),
    /// never minting: the current window stretches from its start to the first new
    /// boundary at or after its end, so what it counted stays counted until the
    /// later of the old and the new window's end, and every window of either
    /// alignment inside it is held to the limit. If the new window holding `now`
    /// starts earlier, the previous window's count is added too (it may hold
    /// charges of that new window). Normal windows follow from that boundary.
    pub(crate) fn set_phase(&mut self, phase_ns: i64, now: i64) {
        let phase_ns = phase_ns.rem_euclid(self.window_ns);
        if phase_ns == self.phase_ns {
            return;
        }
        let (old_start, old_end, [prev, cur, next]) = (self.start_ns, self.end_ns, self.counts);
        self.phase_ns = phase_ns;
        let new_start = self.start_of(self.index_of(now));
        // The new window that ends at or after the old end.
        self.set_index(self.index_of(old_end.saturating_sub(1)));
        let cur = if new_start < old_start {
            cur.saturating_add(prev)
        } else {
            cur
        };
        self.start_ns = old_start;
        self.counts = [prev, cur, next];
    }

    /// Units that would be counted at `now`, without rolling.
    pub(crate) fn used_at(&self, now: i64) -> u64 {
        self.count(self.index_of(now))
    }

    /// When a figure was counted (after [`Windows::advance`] to `now`): its
    /// stamp, where it has one no more than a guard after `now` (the clock
    /// estimate's error; further is no stamp), else `now`, unstamped.
    pub(crate) fn figure_time(&self, stamp: Option<i64>, now: i64) -> FigureTime {
        match stamp.filter(|&t| t <= now.saturating_add(self.guard_ns)) {
            Some(at) => FigureTime::Stamped(at),
            None => FigureTime::Read(now),
        }
    }

    /// The windows (previous, current, next) a figure may belong to.
    ///
    /// - Read at `now`, unstamped (our clock): within a guard of a boundary the
    ///   venue may be on either side of it.
    /// - Stamped (the venue's own time, mapped with the clock these windows are
    ///   aligned on): the stamp names the venue's window, and the venue counts a
    ///   request before it stamps it, so the figure is that window's, or the
    ///   previous one's within a guard after its start; never the next one's. A
    ///   stamp before the current window is the previous window's (or an older
    ///   one's, which leaves nothing tracked but the previous one to raise:
    ///   raising it more is only more careful).
    fn figure_windows(&self, at: FigureTime) -> [bool; 3] {
        match at {
            FigureTime::Read(now) => {
                let (before, after) = self.sides(now);
                [before, true, after]
            }
            FigureTime::Stamped(t) if t < self.start_ns => [true, false, false],
            FigureTime::Stamped(t) if t < self.end_ns => {
                [t - self.start_ns < self.guard_ns, true, false]
            }
            FigureTime::Stamped(t) => [false, t - self.end_ns < self.guard_ns, true],
        }
    }

    /// The lowest count among the windows a figure may belong to (see
    /// [`Windows::figure_windows`]).
    pub(crate) fn least_counted(&self, at: FigureTime) -> u64 {
        let which = self.figure_windows(at);
        (0..3)
            .filter(|&i| which[i])
            .map(|i| self.counts[i])
            .min()
            .unwrap_or(0)
    }

    /// Raises the count of every window a figure may belong to (see
    /// [`Windows::figure_windows`]) to that figure, by at most `limit` in each
    /// window.
    pub(crate) fn raise_to(&mut self, used: u64, limit: u64, at: FigureTime) {
        let which = self.figure_windows(at);
        for (count, _) in self.counts.iter_mut().zip(which).filter(|(_, w)| *w) {
            *count = (*count).max(used.min(count.saturating_add(limit)));
        }
    }
}
