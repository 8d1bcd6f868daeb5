//! The checker's model of what the gateway can know of a venue clock step
//! ([`Blind`]), fed by the run's HTTP answers and the WebSocket lane's.

const MS: i64 = 1_000_000;

/// What the gateway could know of the venue clock's step: nothing until the
/// answer to a request written after the step, stamped with the venue's time
/// (`transactTime`, `serverTime`), comes back. The venue's other answers (errors,
/// queries of orders) carry no time of its own, a usage figure read in one does
/// not say where the venue's window starts, and a stamp on a request written
/// before the step (queued, answered seconds later) dates nothing: its round
/// trip spans both clocks. A request written before that and
/// reaching the venue after the step met windows no evidence had moved yet: its
/// 429 is the step's doing, not the gateway's (each later one is the gateway's).
/// Over HTTP and the WebSocket API lane alike: the gateway learns the step from
/// either.
#[derive(Clone, Copy, Default)]
pub(crate) struct Blind {
    /// When the venue's clock stepped beyond the guard, and by how many ms, if
    /// it did (a step inside the guard is the budget's to absorb: no excuse).
    step: Option<(i64, i64)>,
    /// The gateway's guard around fixed windows' boundaries, ms.
    guard_ms: i64,
    /// When the first stamped answer to a request written after the step
    /// reached the gateway.
    seen_at: Option<i64>,
    /// 429s to requests written blind: weight (-1003), orders (-1015).
    pub(crate) throttled: u64,
    pub(crate) orders: u64,
    /// 418s to requests written blind: a burst written at once, blind, that
    /// reaches the venue inside a 429's Retry-After is banned before its first
    /// answer comes back.
    pub(crate) bans: u64,
}

impl Blind {
    /// The model of a run whose venue clock steps at our `at` by `by` ms (if
    /// it does), against a gateway whose guard is `guard_ms`: only a step
    /// beyond the guard is one (inside it, it is the budget's to absorb).
    pub(crate) fn new(step: Option<(i64, i64)>, guard_ms: i64) -> Blind {
        Blind {
            step: step.filter(|&(_, by)| by.abs() >= guard_ms),
            guard_ms,
            ..Blind::default()
        }
    }

    /// Whether a request written at `written_at` that reached the venue at
    /// `arrived_at` met the step blind.
    pub(crate) fn blind(&self, written_at: i64, arrived_at: i64) -> bool {
        let seen = self.seen_at.unwrap_or(i64::MAX);
        self.step.is_some_and(|(t, _)| arrived_at >= t) && written_at < seen
    }

    /// Whether a stamped answer to a request written at `written_at` and read
    /// at `read_at` dates the step: written after it, and read soon enough
    /// that the stamp proves the clock off (the venue stamped it between the
    /// write and the read, so a round trip longer than the step less half the
    /// guard, [`Clock::narrowed`](ergon_venues::adapt::Clock::narrowed)'s slack, and the drift's few ms, may prove
    /// nothing: found at seed 4066, a -40 ms step whose first stamp after it
    /// came back 434 ms after its write).
    pub(crate) fn dates(&self, written_at: i64, read_at: i64) -> bool {
        self.step.is_some_and(|(t, by)| {
            written_at >= t && read_at - written_at < (by.abs() - self.guard_ms / 2 - 5) * MS
        })
    }

    /// The venue answered a request met blind `status` (`orders`: an
    /// order-rate 429).
    pub(crate) fn refused(&mut self, status: u16, orders: bool) {
        match (status, orders) {
            (418, _) => self.bans += 1,
            (429, true) => self.orders += 1,
            (429, false) => self.throttled += 1,
            _ => {}
        }
    }

    /// A stamped answer dating the step reached the gateway at `now`.
    pub(crate) fn seen(&mut self, now: i64) {
        self.seen_at.get_or_insert(now);
    }
}
