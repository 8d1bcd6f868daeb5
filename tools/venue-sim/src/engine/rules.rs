//! An instrument's order rules and an account's funds, whatever the venue: price
//! and lot filters (bounds, tick, step), the smallest notional, the cap on open
//! orders, and the funds open orders hold. [`Venue::check_placement`] says which
//! rule a new order breaks; the profile answers the breach with its venue's code.
//!
//! The figures are the profile's (`crate::profiles::instruments`), the same ones
//! its exchangeInfo or instruments answer publishes. Balances are fixed: fills
//! never move them, and only open orders hold funds (a market order is checked
//! against what is free, then fills and holds nothing). Plain arithmetic on
//! 1e-8 units: nothing here touches a socket, reads a clock or allocates.

use crate::engine::book::{OrdType, Placement, Side};
use crate::engine::state::Venue;

/// What one unit of an order's quantity is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contract {
    /// This much of the base asset, in 1e-8 (1e8: the quantity is in base;
    /// OKX's BTC-USDT-SWAP contract is 0.01 BTC).
    Linear(u64),
    /// One unit of the quote asset (Deribit's inverse BTC-PERPETUAL: the amount
    /// is in USD, and margin is held in BTC).
    Inverse,
}

/// The funds of every account, and what an open order holds of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Funds {
    /// Spot: an open buy holds its notional of the quote asset, an open sell
    /// its quantity of the base asset.
    Spot { base_e8: u64, quote_e8: u64 },
    /// Linear margin: an open order holds notional / leverage of the quote asset.
    Margin { quote_e8: u64, leverage: u64 },
    /// Inverse margin: an open order holds notional / price / leverage of the
    /// base asset.
    Inverse { base_e8: u64, leverage: u64 },
}

/// One instrument's rules, in 1e-8 units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    pub(crate) min_price_e8: u64,
    pub(crate) max_price_e8: u64,
    pub(crate) tick_e8: u64,
    pub(crate) min_qty_e8: u64,
    pub(crate) max_qty_e8: u64,
    pub(crate) step_e8: u64,
    /// The smallest price × quantity, in the quote asset (0: none).
    pub(crate) min_notional_e8: u64,
    pub(crate) contract: Contract,
    /// Open orders an account may hold on the instrument.
    pub(crate) max_open: usize,
    pub(crate) funds: Funds,
}

/// The rule a new order breaks, in the order the venues check them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Breach {
    PriceBelow,
    PriceAbove,
    PriceTick,
    QtyBelow,
    QtyAbove,
    QtyStep,
    Notional,
    OpenOrders,
    Funds,
}

/// Which funds an order holds: (base, quote), 1e-8.
fn held(r: &Rules, side: Side, price_e8: u64, qty_e8: u64) -> (u128, u128) {
    let notional = notional(r, price_e8, qty_e8);
    match r.funds {
        Funds::Spot { .. } => match side {
            Side::Buy => (0, notional),
            Side::Sell => (base_qty(r, qty_e8), 0),
        },
        Funds::Margin { leverage, .. } => (0, notional / u128::from(leverage.max(1))),
        Funds::Inverse { leverage, .. } => {
            let base = notional * 100_000_000 / u128::from(price_e8.max(1));
            (base / u128::from(leverage.max(1)), 0)
        }
    }
}

/// The order's quantity in the base asset (linear contracts), 1e-8.
fn base_qty(r: &Rules, qty_e8: u64) -> u128 {
    match r.contract {
        Contract::Linear(c) => u128::from(qty_e8) * u128::from(c) / 100_000_000,
        Contract::Inverse => u128::from(qty_e8),
    }
}

/// Price × quantity in the quote asset, 1e-8.
pub(crate) fn notional(r: &Rules, price_e8: u64, qty_e8: u64) -> u128 {
    match r.contract {
        Contract::Linear(_) => base_qty(r, qty_e8) * u128::from(price_e8) / 100_000_000,
        Contract::Inverse => u128::from(qty_e8),
    }
}

impl Rules {
    /// The price and lot filters alone (an amend is checked by these too).
    pub(crate) fn check_filters(
        &self,
        kind: OrdType,
        price_e8: u64,
        qty_e8: u64,
    ) -> Result<(), Breach> {
        if kind != OrdType::Market {
            if price_e8 < self.min_price_e8 {
                return Err(Breach::PriceBelow);
            }
            if price_e8 > self.max_price_e8 {
                return Err(Breach::PriceAbove);
            }
            if price_e8 % self.tick_e8.max(1) != 0 {
                return Err(Breach::PriceTick);
            }
        }
        if qty_e8 < self.min_qty_e8 {
            return Err(Breach::QtyBelow);
        }
        if qty_e8 > self.max_qty_e8 {
            return Err(Breach::QtyAbove);
        }
        if qty_e8 % self.step_e8.max(1) != 0 {
            return Err(Breach::QtyStep);
        }
        if notional(self, price_e8, qty_e8) < u128::from(self.min_notional_e8) {
            return Err(Breach::Notional);
        }
        Ok(())
    }
}

impl Venue {
    /// What `account`'s open orders hold under `rules`: (base, quote), 1e-8.
    pub(crate) fn held_by_open(&self, account: usize, rules: &Rules) -> (u128, u128) {
        self.open_orders(account)
            .map(|o| held(rules, o.side, o.price_e8, o.qty_e8 - o.executed_e8))
            .fold((0, 0), |(b, q), (b1, q1)| (b + b1, q + q1))
    }

    /// Whether `account` may place `new` under `rules`: its filters, then the
    /// open-order cap, then the funds its open orders leave free. A market
    /// order's price is the synthetic mid.
    pub(crate) fn check_placement(
        &self,
        account: usize,
        rules: &Rules,
        new: &Placement,
    ) -> Result<(), Breach> {
        rules.check_filters(new.kind, new.price_e8, new.qty_e8)?;
        let open = self.open_orders(account).count();
        if open >= rules.max_open {
            return Err(Breach::OpenOrders);
        }
        let (b, q) = held(rules, new.side, new.price_e8, new.qty_e8);
        let (base, quote) = self.held_by_open(account, rules);
        let (base, quote) = (base + b, quote + q);
        let enough = match rules.funds {
            Funds::Spot { base_e8, quote_e8 } => {
                base <= u128::from(base_e8) && quote <= u128::from(quote_e8)
            }
            Funds::Margin { quote_e8, .. } => quote <= u128::from(quote_e8),
            Funds::Inverse { base_e8, .. } => base <= u128::from(base_e8),
        };
        if enough {
            Ok(())
        } else {
            Err(Breach::Funds)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E8: u64 = 100_000_000;

    fn spot() -> Rules {
        Rules {
            min_price_e8: E8 / 100,
            max_price_e8: 1_000_000 * E8,
            tick_e8: E8 / 100,
            min_qty_e8: 1_000,
            max_qty_e8: 9_000 * E8,
            step_e8: 1_000,
            min_notional_e8: 5 * E8,
            contract: Contract::Linear(E8),
            max_open: 200,
            funds: Funds::Spot {
                base_e8: 1_000 * E8,
                quote_e8: 100_000_000 * E8,
            },
        }
    }

    #[test]
    fn filters_in_the_venue_order() {
        let r = spot();
        let ok = |p, q| r.check_filters(OrdType::Limit, p, q);
        assert_eq!(ok(50_000 * E8, E8), Ok(()));
        assert_eq!(ok(2_000_000 * E8, E8), Err(Breach::PriceAbove));
        assert_eq!(ok(E8 / 1000, E8), Err(Breach::PriceBelow));
        assert_eq!(ok(50_000 * E8 + 1, E8), Err(Breach::PriceTick));
        assert_eq!(ok(50_000 * E8, 10_000 * E8), Err(Breach::QtyAbove));
        assert_eq!(ok(50_000 * E8, 100), Err(Breach::QtyBelow));
        assert_eq!(ok(50_000 * E8, 1_001), Err(Breach::QtyStep));
        // 0.00001 BTC at 100 USDT: 0.001 USDT, under 5.
        assert_eq!(ok(100 * E8, 1_000), Err(Breach::Notional));
        // A market order has no price of its own to filter (the caller passes
        // the mid, off the tick here).
        assert_eq!(
            r.check_filters(OrdType::Market, 50_000 * E8 + 1, E8),
            Ok(())
        );
    }

    #[test]
    fn margin_and_inverse_hold_notional_over_leverage() {
        let mut r = spot();
        r.funds = Funds::Margin {
            quote_e8: 100_000 * E8,
            leverage: 20,
        };
        // 1 BTC at 50,000 holds 2,500 USDT.
        assert_eq!(
            held(&r, Side::Sell, 50_000 * E8, E8),
            (0, 2_500 * u128::from(E8))
        );
        r.contract = Contract::Inverse;
        r.funds = Funds::Inverse {
            base_e8: 10 * E8,
            leverage: 50,
        };
        // 50,000 USD at 50,000 is 1 BTC; at 50x it holds 0.02 BTC.
        assert_eq!(
            held(&r, Side::Buy, 50_000 * E8, 50_000 * E8),
            (2_000_000, 0)
        );
    }
}
