//! Deribit's answers about what is traded and what the account holds, which a
//! third-party client asks for when it starts (ccxt's `load_markets`,
//! `fetch_currencies`, `fetch_balance`). Shapes as documented (checked
//! 2026-12-06): <https://docs.deribit.com/#public-get_instruments>,
//! <https://docs.deribit.com/#public-get_currencies>,
//! <https://docs.deribit.com/#private-get_account_summaries>.
//!
//! The instrument's figures are the ones the engine enforces
//! (`crate::profiles::instruments`); the account's equity is its fixed BTC and
//! its initial margin what its open orders hold. Read-only; it never touches a
//! socket or reads a clock.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::engine::rules::Funds;
use crate::engine::state::Venue;
use crate::profiles::instruments::rules;

use super::num;

/// `public/get_currencies`: BTC, the one currency traded.
pub(super) fn currencies() -> Value {
    json!([{
        "currency": "BTC",
        "currency_long": "Bitcoin",
        "coin_type": "BITCOIN",
        "fee_precision": 4,
        "min_confirmations": 1,
        "min_withdrawal_fee": 0.0001,
        "withdrawal_fee": 0.0001,
        "withdrawal_priorities": [],
        "apr": 0
    }])
}

impl Venue {
    /// `public/get_instruments`: the perpetual where it is listed, else none.
    pub(super) fn deribit_instruments(&self, listed: bool) -> Value {
        if !listed {
            return json!([]);
        }
        let r = rules(Profile::Deribit);
        let leverage = match r.funds {
            Funds::Inverse { leverage, .. } => leverage,
            _ => 1,
        };
        json!([{
            "instrument_name": self.cfg.symbol,
            "instrument_id": 1,
            "kind": "future",
            "instrument_type": "reversed",
            "settlement_period": "perpetual",
            "settlement_currency": "BTC",
            "base_currency": "BTC",
            "quote_currency": "USD",
            "counter_currency": "USD",
            "price_index": "btc_usd",
            "tick_size": num(r.tick_e8),
            "tick_size_steps": [],
            "min_trade_amount": num(r.min_qty_e8),
            "contract_size": num(r.step_e8),
            "max_leverage": leverage,
            "maker_commission": 0.0,
            "taker_commission": 0.0005,
            "max_liquidation_commission": 0.0075,
            "block_trade_commission": 0.00025,
            "block_trade_min_trade_amount": 200000,
            "block_trade_tick_size": 0.01,
            "is_active": true,
            "rfq": false,
            "creation_timestamp": 1534242287000i64,
            "expiration_timestamp": 32503708800000i64
        }])
    }

    /// `private/get_account_summaries`: the BTC summary, its initial margin
    /// what the open orders hold.
    pub(super) fn deribit_summaries(&self, account: usize) -> Value {
        let r = rules(Profile::Deribit);
        let equity = match r.funds {
            Funds::Inverse { base_e8, .. } => base_e8,
            _ => 0,
        };
        let (held, _) = self.held_by_open(account, &r);
        let held = u64::try_from(held).unwrap_or(u64::MAX).min(equity);
        let free = equity - held;
        json!({
            "id": account + 1,
            "username": format!("sim{}", account + 1),
            "system_name": format!("sim{}", account + 1),
            "type": "main",
            "summaries": [{
                "currency": "BTC",
                "equity": num(equity),
                "balance": num(equity),
                "margin_balance": num(equity),
                "initial_margin": num(held),
                "maintenance_margin": num(held / 2),
                "available_funds": num(free),
                "available_withdrawal_funds": num(free),
                "total_pl": 0.0,
                "session_upl": 0.0,
                "session_rpl": 0.0,
                "futures_pl": 0.0,
                "options_pl": 0.0,
                "delta_total": 0.0,
                "margin_model": "cross_sm",
                "portfolio_margining_enabled": false,
                "fee_balance": 0.0,
                "limits": {}
            }]
        })
    }
}
