//! The dead man's switch (cancel-on-disconnect) as the venues run it: a countdown
//! per account (OKX `cancel-all-after`) or per account and symbol (Binance USD-M
//! `countdownCancelAll`) that, when it runs out, cancels every open order of its
//! scope. Arming again replaces the countdown; a timeout of 0 removes it; once it
//! fires it is gone until armed again. The venue looks at its countdowns every
//! [`TICK_MS`] (Binance documents about every 10 ms; OKX says cancelling may take
//! a few seconds), on the server's own thread and before every request.
//!
//! Nothing here reads a clock: `now` is the venue's UTC ms.

use crate::engine::book::Status;
use crate::engine::state::{Countdown, Venue};

/// How often the server's switch thread looks at the countdowns, ms.
pub(crate) const TICK_MS: u64 = 20;

/// A switch as a test reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchView {
    /// The account.
    pub account: usize,
    /// Its symbol, where the switch is per symbol.
    pub symbol: Option<String>,
    /// When it fires, venue UTC ms.
    pub fires_at_ms: i64,
}

impl Venue {
    /// Arms (or, with `timeout_ms` 0, disarms) the switch of `account` and
    /// `symbol`; returns when it fires (0: disarmed).
    pub(crate) fn arm_switch(
        &mut self,
        account: usize,
        symbol: Option<String>,
        timeout_ms: i64,
        now: i64,
    ) -> i64 {
        self.switches
            .retain(|c| !(c.account == account && c.symbol == symbol));
        if timeout_ms == 0 {
            return 0;
        }
        let fires_at_ms = now.saturating_add(timeout_ms);
        self.switches.push(Countdown {
            account,
            symbol,
            fires_at_ms,
        });
        fires_at_ms
    }

    /// Fires every countdown due at `now`: each open order of its scope is
    /// cancelled, stamped with the countdown's own deadline.
    pub(crate) fn expire_switches(&mut self, now: i64) {
        if self.switches.iter().all(|c| c.fires_at_ms > now) {
            return;
        }
        let (due, keep): (Vec<Countdown>, Vec<Countdown>) = std::mem::take(&mut self.switches)
            .into_iter()
            .partition(|c| c.fires_at_ms <= now);
        self.switches = keep;
        for c in due {
            let hit: Vec<usize> = (0..self.orders.len())
                .filter(|&i| {
                    let o = &self.orders[i];
                    o.account == c.account
                        && o.status == Status::New
                        && c.symbol.as_deref().map_or(true, |s| s == self.cfg.symbol)
                })
                .collect();
            for i in hit {
                self.cancel_order(i, c.fires_at_ms);
            }
            self.report.switch_fires += 1;
        }
    }

    /// The armed switches.
    pub(crate) fn switches(&self) -> Vec<SwitchView> {
        self.switches
            .iter()
            .map(|c| SwitchView {
                account: c.account,
                symbol: c.symbol.clone(),
                fires_at_ms: c.fires_at_ms,
            })
            .collect()
    }
}
