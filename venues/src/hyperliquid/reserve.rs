//! Buying address requests (`reserveRequestWeight`) when the forecast says the
//! budget runs out, never more than the operator's USDC a day.
//!
//! Off unless built with [`Reserve::new`]. A decision is taken on each new
//! `userRateLimit` reading ([`Reserve::on_reading`]), handed out once by
//! [`Reserve::take`] (the spend is counted, and persisted through the caller's
//! hook, *before* the action is written: a purchase whose answer is lost stays
//! counted), and given back by [`Reserve::unsent`] if it never left. The day is
//! the UTC day of the venue's clock as the caller's clock maps it. Reads no
//! clock, performs no I/O of its own.
//!
//! Price: 0.0005 USDC a request
//! (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#reserve-additional-actions>,
//! checked 2026-12-06).

use std::sync::Arc;

use super::Address;

/// One request bought costs 0.0005 USDC: 500 micro-USDC.
pub const PRICE_MICRO_USDC: u64 = 500;
/// Buy when the forecast says the budget lasts less than this many hours.
pub const LEAD_HOURS: f64 = 1.0;
/// Buy too when fewer requests than this are left (a first reading has no
/// forecast yet, and an address this low is a few minutes from one request
/// per 10 s).
pub const LOW_WATER: u64 = 1_000;
/// The least a purchase buys: 2,000 requests, 1 USDC.
pub const MIN_PURCHASE: u64 = 2_000;

const DAY_MS: i64 = 86_400_000;

/// What was spent on one UTC day: the record the caller persists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    /// The UTC day (days since 1970-01-01).
    pub day: i64,
    /// Micro-USDC spent on it.
    pub micro_usdc: u64,
}

/// Why a persisted [`Spent`] line was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpentError {
    /// Empty: a write was cut (what was spent that day is not known).
    Empty,
    /// Not `day=N micro_usdc=M`.
    Unreadable,
}

impl core::fmt::Display for SpentError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpentError::Empty => write!(
                f,
                "empty (a write was cut: read nRequestsSurplus from the venue, then remove it)"
            ),
            SpentError::Unreadable => write!(f, "not `day=N micro_usdc=M`"),
        }
    }
}

impl Spent {
    /// The line the caller persists: `day=N micro_usdc=M`.
    pub fn line(&self) -> String {
        format!("day={} micro_usdc={}\n", self.day, self.micro_usdc)
    }

    /// Reads [`Spent::line`]'s text.
    pub fn parse(text: &str) -> Result<Spent, SpentError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SpentError::Empty);
        }
        let mut it = text.split_ascii_whitespace();
        let mut field = |name: &str| {
            it.next()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix('='))
                .ok_or(SpentError::Unreadable)
        };
        let day = field("day")?.parse().map_err(|_| SpentError::Unreadable)?;
        let micro_usdc = field("micro_usdc")?
            .parse()
            .map_err(|_| SpentError::Unreadable)?;
        if it.next().is_some() {
            return Err(SpentError::Unreadable);
        }
        Ok(Spent { day, micro_usdc })
    }

    /// Spent on `day`: nothing if this record is of another day.
    pub fn on(&self, day: i64) -> u64 {
        if self.day == day {
            self.micro_usdc
        } else {
            0
        }
    }
}

/// Called with the new record before a purchase is written (and after one is
/// given back); `false`: not recorded, so not bought.
pub type Persist = Arc<dyn Fn(Spent) -> bool + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    /// Decided on a reading, not yet handed out.
    Want(u64),
    /// Handed out: waits for the reading after it.
    Bought(u64),
}

/// The purchase policy (see the module).
#[derive(Clone)]
pub struct Reserve {
    cap_micro_per_day: u64,
    spent: Spent,
    state: State,
    considered_at_ns: Option<i64>,
    persist: Option<Persist>,
}

impl core::fmt::Debug for Reserve {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reserve")
            .field("cap_micro_per_day", &self.cap_micro_per_day)
            .field("spent", &self.spent)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Default for Reserve {
    /// Off: never buys.
    fn default() -> Self {
        Reserve {
            cap_micro_per_day: 0,
            spent: Spent::default(),
            state: State::Idle,
            considered_at_ns: None,
            persist: None,
        }
    }
}

impl Reserve {
    /// Buys at most `cap_micro_per_day` micro-USDC a UTC day; `spent` is what an
    /// earlier process recorded, `persist` records each change.
    pub fn new(cap_micro_per_day: u64, spent: Spent, persist: Option<Persist>) -> Self {
        Reserve {
            cap_micro_per_day,
            spent,
            persist,
            ..Reserve::default()
        }
    }

    /// The daily cap in micro-USDC (0: off).
    pub fn cap_micro_per_day(&self) -> u64 {
        self.cap_micro_per_day
    }

    /// Micro-USDC spent on the UTC day of `utc_ms`.
    pub fn spent_on(&self, utc_ms: i64) -> u64 {
        self.spent.on(utc_ms.div_euclid(DAY_MS))
    }

    /// Requests wanted on the budget `a` shows: none while it lasts
    /// [`LEAD_HOURS`] and more than [`LOW_WATER`] are left; else an hour at the
    /// recent pace, at least [`MIN_PURCHASE`].
    pub fn wanted(a: &Address) -> u64 {
        let Some(left) = a.remaining() else {
            return 0;
        };
        let short = a.hours_to_exhaustion().is_some_and(|h| h < LEAD_HOURS);
        if !short && left >= LOW_WATER {
            return 0;
        }
        let hour = a.requests_per_hour().unwrap_or(0.0) * LEAD_HOURS;
        (hour.ceil() as u64).max(MIN_PURCHASE)
    }

    /// A new reading is in `a` (taken at `utc_ms` on the venue's clock): the
    /// purchase before it is settled, and a new one decided, within the day's
    /// USDC left.
    pub fn on_reading(&mut self, a: &Address, utc_ms: i64) {
        if self.cap_micro_per_day == 0 {
            return;
        }
        let Some(at) = a.last().map(|r| r.at_ns) else {
            return;
        };
        if self.considered_at_ns == Some(at) {
            return;
        }
        self.considered_at_ns = Some(at);
        if let State::Bought(_) = self.state {
            self.state = State::Idle;
        }
        if self.state != State::Idle {
            return;
        }
        let weight = Self::wanted(a).min(self.left_requests(utc_ms));
        if weight > 0 {
            self.state = State::Want(weight);
        }
    }

    fn left_requests(&self, utc_ms: i64) -> u64 {
        self.cap_micro_per_day.saturating_sub(self.spent_on(utc_ms)) / PRICE_MICRO_USDC
    }

    /// The purchase to write now, if one is decided: its weight (requests),
    /// within what the day of `utc_ms` has left, counted and persisted first.
    /// None: nothing to buy, or the record could not be written.
    pub fn take(&mut self, utc_ms: i64) -> Option<u64> {
        let State::Want(w) = self.state else {
            return None;
        };
        let w = w.min(self.left_requests(utc_ms));
        let day = utc_ms.div_euclid(DAY_MS);
        let next = Spent {
            day,
            micro_usdc: self.spent.on(day).saturating_add(w * PRICE_MICRO_USDC),
        };
        if w == 0 || !self.record(next) {
            self.state = State::Idle;
            return None;
        }
        self.spent = next;
        self.state = State::Bought(w);
        Some(w)
    }

    /// The purchase [`Reserve::take`] handed out was never written: not spent,
    /// and wanted again.
    pub fn unsent(&mut self) {
        let State::Bought(w) = self.state else {
            return;
        };
        let back = Spent {
            micro_usdc: self.spent.micro_usdc.saturating_sub(w * PRICE_MICRO_USDC),
            ..self.spent
        };
        if self.record(back) {
            self.spent = back;
        }
        self.state = State::Want(w);
    }

    /// A purchase is decided or was just made: the next reading is wanted now.
    pub fn wants_sync(&self) -> bool {
        self.state != State::Idle
    }

    fn record(&self, s: Spent) -> bool {
        self.persist.as_ref().map_or(true, |p| p(s))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Reading;
    use super::*;

    const HOUR_NS: i64 = 3_600_000_000_000;

    fn reading(at_ns: i64, used: u64, surplus: u64) -> Reading {
        Reading {
            at_ns,
            volume: 0,
            used,
            cap: 10_000,
            surplus,
        }
    }

    #[test]
    fn off_by_default_buys_nothing_even_when_spent() {
        let mut r = Reserve::default();
        let mut a = Address::default();
        a.read(reading(0, 10_000, 0));
        r.on_reading(&a, 0);
        assert_eq!((r.take(0), r.wants_sync()), (None, false));
    }

    #[test]
    fn buys_an_hour_at_the_pace_when_the_forecast_is_short_and_the_day_caps_it() {
        // 3 USDC a day: 6,000 requests.
        let mut r = Reserve::new(3_000_000, Spent::default(), None);
        let mut a = Address::default();
        a.read(reading(0, 5_000, 0));
        r.on_reading(&a, 1_000);
        assert_eq!(r.take(1_000), None, "5,000 left, no forecast yet");
        // 2,400 used in half an hour: 4,800 an hour, 2,600 left: 0.54 h.
        a.read(reading(HOUR_NS / 2, 7_400, 0));
        r.on_reading(&a, 1_800_000);
        assert!(r.wants_sync());
        assert_eq!(r.take(1_800_000), Some(4_800));
        assert_eq!(r.spent_on(1_800_000), 2_400_000);
        // The same reading again decides nothing more.
        r.on_reading(&a, 1_800_000);
        assert_eq!(r.take(1_800_000), None);
        // Still short an hour later: only 1,200 requests (0.6 USDC) are left today.
        a.read(reading(HOUR_NS, 12_000, 4_800));
        a.read(reading(2 * HOUR_NS, 14_790, 4_800));
        r.on_reading(&a, 7_200_000);
        assert_eq!(r.take(7_200_000), Some(1_200));
        assert_eq!(r.spent_on(7_200_000), 3_000_000);
        a.read(reading(3 * HOUR_NS, 15_990, 6_000));
        r.on_reading(&a, 10_800_000);
        assert_eq!(r.take(10_800_000), None, "the day's cap holds");
        // The next UTC day (clock jumped): the cap is whole again.
        a.read(reading(26 * HOUR_NS, 15_995, 6_000));
        r.on_reading(&a, DAY_MS + 1);
        assert_eq!(r.take(DAY_MS + 1), Some(MIN_PURCHASE));
        assert_eq!(r.spent_on(DAY_MS + 1), 1_000_000);
        assert_eq!(r.spent_on(10_800_000), 0, "the record is the new day's");
    }

    #[test]
    fn a_purchase_never_written_is_given_back_and_a_failed_record_buys_nothing() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let ok = Arc::new(AtomicBool::new(true));
        let flag = ok.clone();
        let mut r = Reserve::new(
            10_000_000,
            Spent {
                day: 0,
                micro_usdc: 9_000_000,
            },
            Some(Arc::new(move |_| flag.load(Ordering::SeqCst))),
        );
        let mut a = Address::default();
        a.read(reading(0, 9_500, 0));
        r.on_reading(&a, 0);
        assert_eq!(r.take(0), Some(MIN_PURCHASE));
        r.unsent();
        assert_eq!(r.spent_on(0), 9_000_000);
        ok.store(false, Ordering::SeqCst);
        assert_eq!(r.take(0), None, "not recorded, not bought");
        assert_eq!(r.spent_on(0), 9_000_000);
    }

    #[test]
    fn the_record_reads_back_and_refuses_what_it_cannot_read() {
        let s = Spent {
            day: 20_428,
            micro_usdc: 1_500_000,
        };
        assert_eq!(Spent::parse(&s.line()), Ok(s));
        assert_eq!(Spent::parse(""), Err(SpentError::Empty));
        for bad in [
            "day=1",
            "day=x micro_usdc=1",
            "micro_usdc=1 day=1",
            "day=1 micro_usdc=-1",
            "day=1 micro_usdc=1 more",
        ] {
            assert_eq!(Spent::parse(bad), Err(SpentError::Unreadable), "{bad}");
        }
    }
}
