//! Binance Spot's `/sapi` answers a third-party client asks for when it starts
//! (ccxt's `load_markets` and `fetch_currencies`): the wallet's coins and the
//! margin pairs. Shapes as documented:
//! <https://developers.binance.com/docs/wallet/capital/all-coins-info>,
//! <https://developers.binance.com/docs/margin_trading/market-data/Get-All-Cross-Margin-Pairs>,
//! <https://developers.binance.com/docs/margin_trading/market-data/Query-Isolated-Margin-Symbol>
//! (checked 2026-12-06).
//!
//! The account trades spot only (`exchangeInfo` says `isMarginTradingAllowed`
//! false), so the one pair is listed with margin trading off. Read-only; it never
//! touches a socket or reads a clock.

use serde_json::{json, Value};

use crate::engine::book::{base_asset, fmt_e8, quote_asset};
use crate::engine::rules::Funds;
use crate::engine::state::Venue;
use crate::profiles::instruments::rules;

impl Venue {
    /// `capital/config/getall`: the symbol's two coins, their free balances and
    /// one network each.
    pub(crate) fn capital_config(&self) -> Value {
        let sym = &self.cfg.symbol;
        let (base, quote) = match rules(self.cfg.profile).funds {
            Funds::Spot { base_e8, quote_e8 } => (base_e8, quote_e8),
            _ => (0, 0),
        };
        let coin = |c: &str, free: u64| {
            json!({
                "coin": c,
                "depositAllEnable": true,
                "withdrawAllEnable": true,
                "name": c,
                "free": fmt_e8(free),
                "locked": "0",
                "freeze": "0",
                "withdrawing": "0",
                "ipoing": "0",
                "ipoable": "0",
                "storage": "0",
                "isLegalMoney": false,
                "trading": true,
                "networkList": [{
                    "network": c,
                    "coin": c,
                    "withdrawIntegerMultiple": "0.00000001",
                    "isDefault": true,
                    "depositEnable": true,
                    "withdrawEnable": true,
                    "depositDesc": "",
                    "withdrawDesc": "",
                    "specialTips": "",
                    "name": c,
                    "resetAddressStatus": false,
                    "addressRegex": "",
                    "memoRegex": "",
                    "withdrawFee": "0",
                    "withdrawMin": "0",
                    "withdrawMax": "9999999",
                    "minConfirm": 1,
                    "unLockConfirm": 0,
                    "sameAddress": false,
                    "estimatedArrivalTime": 1,
                    "busy": false,
                    "contractAddressUrl": "",
                    "contractAddress": ""
                }]
            })
        };
        json!([coin(base_asset(sym), base), coin(quote_asset(sym), quote)])
    }

    /// `margin/allPairs` or `margin/isolated/allPairs`: the symbol, margin
    /// trading off.
    pub(crate) fn margin_pairs(&self, isolated: bool) -> Value {
        let sym = &self.cfg.symbol;
        let mut pair = json!({
            "base": base_asset(sym),
            "isBuyAllowed": false,
            "isMarginTrade": false,
            "isSellAllowed": false,
            "quote": quote_asset(sym),
            "symbol": sym,
        });
        if !isolated {
            pair["id"] = json!(1);
        }
        json!([pair])
    }
}
