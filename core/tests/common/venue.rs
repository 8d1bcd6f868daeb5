//! What the venue counts: a second, independent safety check that needs no model of
//! the budget at all.
//!
//! The venue counts every request that reached it and every unit it says it
//! counted, each until it leaves the venue's window. This module keeps, per bucket,
//! the units the venue holds and the instants it took them, fed only with what the
//! caller did and what the venue said (admissions, refunds of requests never sent,
//! `charge_after`, `observe_used`); it never reads the budget's counts. At every
//! admission the venue's count in every window the admission lands in, plus the
//! admitted cost, must stay within the limit: if not, the venue would have answered
//! 429 (then 418 on Binance) to a request the budget let through.
//!
//! The venue's rules, as the venues document them:
//! - a sliding limit counts the units of the last `W` (OKX, Bybit, Hyperliquid: "N
//!   requests per W", rolling);
//! - a fixed limit counts per window of the venue's clock, which is ours shifted by
//!   at most the guard (Binance: "the weight resets every minute", on its own clock);
//! - a token limit lets `burst + Δt / interval` units pass over any span Δt (Kraken's
//!   counter, decremented at a fixed rate);
//! - an extra cost the answer reports (`charge_after`: Hyperliquid adds weight per
//!   20 items returned) is counted in full at the answer; a usage figure
//!   (`observe_used`: `X-MBX-USED-WEIGHT-1M`) says how much the venue holds now, so
//!   what it holds beyond our own units came from another sender, at the latest now;
//! - the one figure the venue cannot mean: more than a full bucket at one instant
//!   (the budget takes at most `limit` units from one figure, and so does this).
//!
//! A refund removes its units (the request never reached the venue), unless a usage
//! figure came after the charge: that figure was read while the request was still
//! unsent, so it excluded it, and the units the venue attributed to another sender
//! cover it (booked here at the charge, where they were counted when read).

use super::{BSpec, RKind};

#[derive(Clone, Copy, Debug)]
struct Unit {
    t: i64,
    cost: u64,
    ticket: Option<u64>,
}

/// The venue's view of every bucket of one configuration.
#[derive(Clone, Debug)]
pub struct Venue {
    specs: Vec<BSpec>,
    held: Vec<Vec<Unit>>,
}

impl Venue {
    /// A venue that holds nothing yet.
    pub fn new(specs: &[BSpec]) -> Self {
        Venue {
            specs: specs.to_vec(),
            held: vec![vec![]; specs.len()],
        }
    }

    /// Units the venue counts at `t` on bucket `b`.
    fn count(&self, b: usize, t: i64) -> u64 {
        counted(
            self.specs[b].kind,
            self.held[b].iter().map(|u| (u.t, u.cost)),
            t,
        )
    }

    /// Whether the venue takes `cost` more units on bucket `b` at `t` without
    /// answering 429: `Err` says what it holds.
    pub fn check(&self, b: usize, cost: u64, t: i64) -> Result<(), String> {
        let spec = self.specs[b];
        let held = &self.held[b];
        match spec.kind {
            RKind::Sliding { .. } | RKind::Fixed { .. } => {
                let x = window_start(spec.kind, t);
                let counted = self.count(b, t);
                if counted + cost > spec.limit {
                    return Err(format!(
                        "the venue holds {counted} units in [{x}, {t}] of bucket {b}; \
                         {cost} more exceed its limit {}: {held:?}",
                        spec.limit
                    ));
                }
            }
            RKind::Token { interval } => {
                let mut suffix = cost;
                for u in held.iter().rev() {
                    suffix += u.cost;
                    let allowed =
                        i128::from(spec.limit) * i128::from(interval) + i128::from(t - u.t);
                    if i128::from(suffix) * i128::from(interval) > allowed {
                        return Err(format!(
                            "the venue took {suffix} units over [{}, {t}] of bucket {b} \
                             (interval {interval}, burst {}): {held:?}",
                            u.t, spec.limit
                        ));
                    }
                }
            }
            RKind::InFlight | RKind::Gate => {}
        }
        Ok(())
    }

    fn counts_units(&self, b: usize) -> bool {
        matches!(
            self.specs[b].kind,
            RKind::Sliding { .. } | RKind::Fixed { .. } | RKind::Token { .. }
        )
    }

    /// An admitted charge of ticket `ticket`: checked, then held.
    pub fn admit(&mut self, costs: &[(usize, u64)], ticket: u64, t: i64) {
        for &(b, cost) in costs {
            if let Err(e) = self.check(b, cost, t) {
                panic!("over-admission: {e}");
            }
        }
        for &(b, cost) in costs {
            if self.counts_units(b) && cost > 0 {
                self.held[b].push(Unit {
                    t,
                    cost,
                    ticket: Some(ticket),
                });
            }
        }
    }

    /// The request of `ticket` never left: the venue never saw it.
    pub fn refund(&mut self, ticket: u64) {
        for held in &mut self.held {
            held.retain(|u| u.ticket != Some(ticket));
        }
    }

    /// The answer says the request cost `cost` more units: all of them, up to a full
    /// bucket.
    pub fn charge_after(&mut self, b: usize, cost: u64, t: i64) {
        let cost = cost.min(self.specs[b].limit);
        if self.counts_units(b) && cost > 0 {
            self.held[b].push(Unit {
                t,
                cost,
                ticket: None,
            });
        }
    }

    /// The venue says it holds `used` units: what it holds beyond ours came from
    /// another sender, at the latest now (up to a full bucket). Within the leading
    /// guard of a fixed window the figure may be the previous window's, which no
    /// single instant describes: nothing is booked there (weaker, never wrong).
    pub fn observe(&mut self, b: usize, used: u64, t: i64) {
        if !self.counts_units(b) {
            return;
        }
        if let RKind::Fixed {
            window,
            phase,
            guard,
        } = self.specs[b].kind
        {
            if (t - phase).rem_euclid(window) < guard {
                return;
            }
        }
        let others = used
            .saturating_sub(self.count(b, t))
            .min(self.specs[b].limit);
        if others > 0 {
            self.held[b].push(Unit {
                t,
                cost: others,
                ticket: None,
            });
        }
    }
}

/// The earliest start of a venue window holding `t`: the last `W` for a sliding
/// limit, the earliest window whose boundaries are ours shifted by at most the
/// guard for a fixed one.
pub fn window_start(kind: RKind, t: i64) -> i64 {
    match kind {
        RKind::Sliding { window, .. } => t - window + 1,
        RKind::Fixed {
            window,
            phase,
            guard,
        } => {
            let first = t - window + 1;
            let r = (first - phase).rem_euclid(window);
            if r <= guard || r >= window - guard {
                first
            } else {
                first + (window - guard - r)
            }
        }
        _ => i64::MIN,
    }
}

/// Units a venue holding `units` (instant, cost; in time order) counts at `t`: its
/// busiest window holding `t`, or the units not yet drained for a token limit.
pub fn counted(kind: RKind, units: impl Iterator<Item = (i64, u64)>, t: i64) -> u64 {
    match kind {
        RKind::Sliding { .. } | RKind::Fixed { .. } => {
            let x = window_start(kind, t);
            units.filter(|u| u.0 >= x).map(|u| u.1).sum()
        }
        RKind::Token { interval } => {
            // Before any unit the bucket is drained: its TAT is the start of time.
            let mut tat = i128::from(i64::MIN);
            for (at, cost) in units {
                tat = tat.max(i128::from(at)) + i128::from(cost) * i128::from(interval);
            }
            let ahead = tat - i128::from(t);
            if ahead <= 0 {
                0
            } else {
                ((ahead + i128::from(interval) - 1) / i128::from(interval)) as u64
            }
        }
        RKind::InFlight | RKind::Gate => 0,
    }
}
