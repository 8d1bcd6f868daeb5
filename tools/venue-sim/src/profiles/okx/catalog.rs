//! OKX's answers about what is traded, which a third-party client asks for when
//! it starts (ccxt's `load_markets` and `fetch_currencies`). Shapes as documented
//! (checked 2026-12-06):
//! <https://www.okx.com/docs-v5/en/#public-data-rest-api-get-instruments>,
//! <https://www.okx.com/docs-v5/en/#funding-account-rest-api-get-currencies>.
//!
//! The instrument's figures are the ones the engine enforces
//! (`crate::profiles::instruments`); other instrument types list nothing.
//! `lever` is the leverage the margin check uses. Read-only; it never touches a
//! socket or reads a clock.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::engine::rules::{Contract, Funds};
use crate::engine::state::Venue;
use crate::profiles::instruments::{dec, rules};

/// `asset/currencies`: USDT, the settle currency, on one chain.
pub(super) fn currencies() -> Value {
    json!([{
        "ccy": "USDT",
        "name": "Tether",
        "chain": "USDT-ERC20",
        "canDep": true,
        "canWd": true,
        "canInternal": true,
        "minDep": "0.00000001",
        "minWd": "0",
        "maxWd": "9999999",
        "wdTickSz": "6",
        "wdQuota": "10000000",
        "usedWdQuota": "0",
        "minFee": "0",
        "maxFee": "0",
        "mainNet": true,
        "needTag": false,
        "logoLink": "",
        "minDepArrivalConfirm": "1",
        "minWdUnlockConfirm": "1",
        "depQuotaFixed": "",
        "usedDepQuotaFixed": "",
        "depQuoteDailyLayer2": "",
        "burningFeeRate": "",
        "depEstOpenTime": "",
        "wdEstOpenTime": ""
    }])
}

impl Venue {
    /// `public/instruments`: the one linear swap where it is listed, else none.
    pub(super) fn okx_instruments(&self, listed: bool) -> Value {
        if !listed {
            return json!([]);
        }
        let r = rules(Profile::Okx);
        let ct_val = match r.contract {
            Contract::Linear(c) => c,
            Contract::Inverse => 100_000_000,
        };
        let lever = match r.funds {
            Funds::Margin { leverage, .. } => leverage,
            _ => 1,
        };
        let sym = &self.cfg.symbol;
        let uly = sym.strip_suffix("-SWAP").unwrap_or(sym);
        let base = uly.split('-').next().unwrap_or("BTC");
        json!([{
            "instType": "SWAP",
            "instId": sym,
            "uly": uly,
            "instFamily": uly,
            "baseCcy": "",
            "quoteCcy": "",
            "settleCcy": "USDT",
            "ctVal": dec(ct_val),
            "ctMult": "1",
            "ctValCcy": base,
            "optType": "",
            "stk": "",
            "listTime": "1573557408000",
            "expTime": "",
            "lever": lever.to_string(),
            "tickSz": dec(r.tick_e8),
            "lotSz": dec(r.step_e8),
            "minSz": dec(r.min_qty_e8),
            "ctType": "linear",
            "alias": "",
            "state": "live",
            "ruleType": "normal",
            "maxLmtSz": dec(r.max_qty_e8),
            "maxMktSz": dec(r.max_qty_e8),
            "maxLmtAmt": "20000000",
            "maxMktAmt": "",
            "maxTwapSz": "",
            "maxIcebergSz": "",
            "maxTriggerSz": "",
            "maxStopSz": ""
        }])
    }
}
