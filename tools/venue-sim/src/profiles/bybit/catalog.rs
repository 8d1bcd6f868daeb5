//! Bybit's answers about what is traded and who trades it, which a third-party
//! client asks for when it starts (ccxt's `load_markets`, `fetch_currencies`,
//! its account checks): instruments, coins, the API key, the account. Shapes as
//! documented (checked 2026-12-06):
//! <https://bybit-exchange.github.io/docs/v5/market/instrument>,
//! <https://bybit-exchange.github.io/docs/v5/asset/coin-info>,
//! <https://bybit-exchange.github.io/docs/v5/user/apikey-info>,
//! <https://bybit-exchange.github.io/docs/v5/account/account-info>.
//!
//! The instrument's filters are the ones the engine enforces
//! (`crate::profiles::instruments`); the other categories (spot, inverse,
//! option) list nothing. Read-only; it never touches a socket or reads a clock.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::engine::book::{base_asset, quote_asset};
use crate::engine::state::Venue;
use crate::profiles::instruments::{dec, rules};

use super::private::DcpProduct;

impl Venue {
    /// `instruments-info`: the one linear perpetual, or an empty list.
    pub(super) fn bybit_instruments(&self, listed: bool) -> Value {
        if !listed {
            return json!({ "category": "", "list": [], "nextPageCursor": "" });
        }
        let r = rules(Profile::Bybit);
        let sym = &self.cfg.symbol;
        json!({
            "category": "linear",
            "list": [{
                "symbol": sym,
                "contractType": "LinearPerpetual",
                "status": "Trading",
                "baseCoin": base_asset(sym),
                "quoteCoin": quote_asset(sym),
                "launchTime": "1585526400000",
                "deliveryTime": "0",
                "deliveryFeeRate": "",
                "priceScale": "2",
                "leverageFilter": { "minLeverage": "1", "maxLeverage": "100.00", "leverageStep": "0.01" },
                "priceFilter": {
                    "minPrice": dec(r.min_price_e8),
                    "maxPrice": dec(r.max_price_e8),
                    "tickSize": dec(r.tick_e8)
                },
                "lotSizeFilter": {
                    "maxOrderQty": dec(r.max_qty_e8),
                    "minOrderQty": dec(r.min_qty_e8),
                    "qtyStep": dec(r.step_e8),
                    "postOnlyMaxOrderQty": dec(r.max_qty_e8),
                    "maxMktOrderQty": dec(r.max_qty_e8),
                    "minNotionalValue": dec(r.min_notional_e8)
                },
                "unifiedMarginTrade": true,
                "fundingInterval": 480,
                "settleCoin": quote_asset(sym),
                "copyTrading": "none",
                "upperFundingRate": "0.005",
                "lowerFundingRate": "-0.005",
                "isPreListing": false,
                "preListingInfo": null
            }],
            "nextPageCursor": ""
        })
    }

    /// `coin/query-info`: the settle coin, one chain.
    pub(super) fn bybit_coins(&self) -> Value {
        let coin = quote_asset(&self.cfg.symbol);
        json!({ "rows": [{
            "name": coin,
            "coin": coin,
            "remainAmount": "150000",
            "chains": [{
                "chainType": coin,
                "confirmation": "1",
                "withdrawFee": "0",
                "depositMin": "0",
                "withdrawMin": "0",
                "chain": coin,
                "chainDeposit": "1",
                "chainWithdraw": "1",
                "minAccuracy": "8",
                "withdrawPercentageFee": "0",
                "contractAddress": ""
            }]
        }]})
    }

    /// `user/query-api`: the key the request was signed with, trading allowed.
    pub(super) fn bybit_api_key(&self, account: usize, now: i64) -> Value {
        let key = self
            .cfg
            .accounts
            .get(account)
            .map_or("", |a| a.api_key.as_str());
        json!({
            "id": (account + 1).to_string(),
            "note": "ergon-venue-sim",
            "apiKey": key,
            "readOnly": 0,
            "secret": "",
            "permissions": {
                "ContractTrade": ["Order", "Position"],
                "Spot": ["SpotTrade"],
                "Wallet": [],
                "Options": [],
                "Derivatives": ["DerivativesTrade"],
                "CopyTrading": [],
                "BlockTrade": [],
                "Exchange": [],
                "NFT": []
            },
            "ips": ["*"],
            "type": 1,
            "deadlineDay": -1,
            "expiredAt": "",
            "createdAt": now.to_string(),
            "unified": 0,
            "uta": 1,
            "userID": account + 1,
            "inviterID": 0,
            "vipLevel": "No VIP",
            "mktMakerLevel": "0",
            "affiliateID": 0,
            "rsaPublicKey": "",
            "isMaster": true,
            "parentUid": "0",
            "kycLevel": "LEVEL_DEFAULT",
            "kycRegion": ""
        })
    }

    /// `account/info`: a unified account (UTA 2.0), regular margin, DCP as
    /// configured (the derivatives window).
    pub(super) fn bybit_account_info(&self, account: usize, now: i64) -> Value {
        let window_s = self
            .held
            .get(account)
            .and_then(|h| h[DcpProduct::Derivatives.index()].window_ms)
            .map_or(10, |ms| ms / 1_000);
        json!({
            "unifiedMarginStatus": 6,
            "marginMode": "REGULAR_MARGIN",
            "isMasterTrader": false,
            "spotHedgingStatus": "OFF",
            "updatedTime": now.to_string(),
            "dcpStatus": if self.cfg.bybit_dcp { "ON" } else { "OFF" },
            "timeWindow": window_s,
            "smpGroup": 0
        })
    }
}
