//! Each profile's one instrument and account: the order rules its exchangeInfo or
//! instruments answer publishes, the funds its balance answer shows, and the code
//! and message each venue refuses a breach with. One table, so what an answer
//! publishes and what the engine enforces cannot drift apart.
//!
//! Sources (checked 2026-12-06):
//! - Binance Spot filters (`PRICE_FILTER`, `LOT_SIZE`, `NOTIONAL`,
//!   `MAX_NUM_ORDERS`) and their failures ("Filter failure: ..."), -1013 and
//!   -2010 (NEW_ORDER_REJECTED, "Account has insufficient balance for requested
//!   action."): <https://developers.binance.com/docs/binance-spot-api-docs/filters>,
//!   <https://developers.binance.com/docs/binance-spot-api-docs/errors>; BTCUSDT's
//!   figures (tick 0.01, step 0.00001, notional 5, 200 open orders) from its
//!   exchangeInfo. The venue answers `MAX_NUM_ORDERS` with -2010 (a client's log:
//!   <https://github.com/amazingchow/crypto-trading-bot/blob/main/TODO.md>).
//! - Binance USD-M: -4013, -4002, -4014, -4004, -4005, -4023, -4164, -2019, -2025:
//!   <https://developers.binance.com/docs/derivatives/usds-margined-futures/error-code>;
//!   BTCUSDT's notional 100 and 200 open orders; default leverage 20x.
//! - Bybit v5 linear BTCUSDT (`priceFilter`, `lotSizeFilter`,
//!   `minNotionalValue`): <https://bybit-exchange.github.io/docs/v5/market/instrument>;
//!   codes 10001, 110003, 110007 ("ab not enough for new order"), 110020 (500
//!   active orders), 110094: <https://bybit-exchange.github.io/docs/v5/error>.
//!   The profile plays linear contracts, so the 170xxx codes (Bybit Spot's) do
//!   not apply.
//! - OKX BTC-USDT-SWAP (`tickSz` 0.1, `lotSz`/`minSz` 0.01, `ctVal` 0.01 BTC):
//!   <https://www.okx.com/docs-v5/en/#public-data-rest-api-get-instruments>;
//!   `sCode` 51000, 51006, 51120, 51121, 51102, 51005, 51008:
//!   <https://www.okx.com/docs-v5/en/#error-code-rest-api>. The price limit is
//!   fixed here (OKX moves it with the mark price, `public/price-limit`).
//! - Deribit BTC-PERPETUAL (`tick_size` 0.5, `min_trade_amount` and
//!   `contract_size` 10 USD): <https://docs.deribit.com/#public-get_instruments>;
//!   errors 10002 qty_too_low, 10005 price_too_low, 10007 price_too_high, 10009
//!   not_enough_funds, 10027 non_integer_contract_amount, 10043 price_wrong_tick:
//!   <https://docs.deribit.com/#rpc-error-codes>. Deribit documents no open-order
//!   cap of its own code for a non-PME account: none is enforced.

use crate::config::Profile;
use crate::engine::rules::{Breach, Contract, Funds, Rules};

const E8: u64 = 100_000_000;

/// The rules and funds `profile` publishes and enforces.
pub(crate) fn rules(profile: Profile) -> Rules {
    match profile {
        Profile::BinanceSpot => Rules {
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
        },
        Profile::BinanceFutures => Rules {
            min_price_e8: E8 / 100,
            max_price_e8: 1_000_000 * E8,
            tick_e8: E8 / 100,
            min_qty_e8: E8 / 1_000,
            max_qty_e8: 1_000 * E8,
            step_e8: E8 / 1_000,
            min_notional_e8: 100 * E8,
            contract: Contract::Linear(E8),
            max_open: 200,
            funds: Funds::Margin {
                quote_e8: 100_000 * E8,
                leverage: 20,
            },
        },
        Profile::Bybit => Rules {
            min_price_e8: E8 / 10,
            max_price_e8: 1_999_999 * E8 + 80_000_000,
            tick_e8: E8 / 10,
            min_qty_e8: E8 / 1_000,
            max_qty_e8: 1_190 * E8,
            step_e8: E8 / 1_000,
            min_notional_e8: 5 * E8,
            contract: Contract::Linear(E8),
            max_open: 500,
            funds: Funds::Margin {
                quote_e8: 100_000 * E8,
                leverage: 10,
            },
        },
        Profile::Okx => Rules {
            min_price_e8: E8 / 10,
            max_price_e8: 1_000_000 * E8,
            tick_e8: E8 / 10,
            min_qty_e8: E8 / 100,
            max_qty_e8: 100_000_000 * E8,
            step_e8: E8 / 100,
            min_notional_e8: 0,
            contract: Contract::Linear(E8 / 100),
            max_open: 500,
            funds: Funds::Margin {
                quote_e8: 100_000 * E8,
                leverage: 10,
            },
        },
        Profile::Deribit => Rules {
            min_price_e8: E8 / 2,
            max_price_e8: 1_000_000 * E8,
            tick_e8: E8 / 2,
            min_qty_e8: 10 * E8,
            max_qty_e8: u64::MAX,
            step_e8: 10 * E8,
            min_notional_e8: 0,
            contract: Contract::Inverse,
            max_open: usize::MAX,
            funds: Funds::Inverse {
                base_e8: 10 * E8,
                leverage: 50,
            },
        },
        // The hyperliquid profile checks its own orders (profiles/hyperliquid:
        // prices of 5 significant figures, a $10 minimum, its open-order cap and
        // its own margin); these are the same figures in this table's terms, for
        // BTC (szDecimals 5), <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/tick-and-lot-size>.
        Profile::Hyperliquid => Rules {
            min_price_e8: E8 / 10,
            max_price_e8: 10_000_000 * E8,
            tick_e8: E8 / 10,
            min_qty_e8: 1_000,
            max_qty_e8: u64::MAX,
            step_e8: 1_000,
            min_notional_e8: 10 * E8,
            contract: Contract::Linear(E8),
            max_open: 1_000,
            funds: Funds::Margin {
                quote_e8: 1_000_000 * E8,
                leverage: 20,
            },
        },
    }
}

/// A decimal of 1e-8 units without trailing zeros (`0.01`, `1000000`).
pub(crate) fn dec(v: u64) -> String {
    let s = format!("{}.{:08}", v / E8, v % E8);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Binance's answer to a breach (Spot or USD-M): code and message.
pub(crate) fn binance_refusal(profile: Profile, b: Breach) -> (i32, String) {
    let r = rules(profile);
    if profile == Profile::BinanceSpot {
        let (code, msg) = match b {
            Breach::PriceBelow | Breach::PriceAbove | Breach::PriceTick => {
                (-1013, "Filter failure: PRICE_FILTER")
            }
            Breach::QtyBelow | Breach::QtyAbove | Breach::QtyStep => {
                (-1013, "Filter failure: LOT_SIZE")
            }
            Breach::Notional => (-1013, "Filter failure: NOTIONAL"),
            Breach::OpenOrders => (-2010, "Filter failure: MAX_NUM_ORDERS"),
            Breach::Funds => (
                -2010,
                "Account has insufficient balance for requested action.",
            ),
        };
        return (code, msg.to_string());
    }
    match b {
        Breach::PriceBelow => (-4013, "Price less than min price.".into()),
        Breach::PriceAbove => (-4002, "Price greater than max price.".into()),
        Breach::PriceTick => (-4014, "Price not increased by tick size.".into()),
        Breach::QtyBelow => (-4004, "Quantity less than min quantity.".into()),
        Breach::QtyAbove => (-4005, "Quantity greater than max quantity.".into()),
        Breach::QtyStep => (-4023, "Qty not increased by step size.".into()),
        Breach::Notional => (
            -4164,
            format!(
                "Order's notional must be no smaller than {} (unless you choose reduce only).",
                dec(r.min_notional_e8)
            ),
        ),
        Breach::OpenOrders => (-2025, "Reach max open order limit.".into()),
        Breach::Funds => (-2019, "Margin is insufficient.".into()),
    }
}

/// Bybit's answer to a breach: `retCode` and `retMsg`.
pub(crate) fn bybit_refusal(b: Breach) -> (i64, &'static str) {
    match b {
        Breach::PriceBelow | Breach::PriceAbove => {
            (110003, "Order price is out of permissible range")
        }
        Breach::PriceTick => (10001, "The price must be a multiple of the tick size"),
        Breach::QtyBelow => (
            10001,
            "The number of contracts exceeds minimum limit allowed",
        ),
        Breach::QtyAbove => (
            10001,
            "The number of contracts exceeds maximum limit allowed: too large",
        ),
        Breach::QtyStep => (10001, "Qty invalid"),
        Breach::Notional => (110094, "Order does not meet minimum order value 5USDT"),
        Breach::OpenOrders => (110020, "Not allowed to have more than 500 active orders"),
        Breach::Funds => (110007, "ab not enough for new order"),
    }
}

/// OKX's answer to a breach: the order's `sCode` and `sMsg`.
pub(crate) fn okx_refusal(b: Breach) -> (&'static str, String) {
    let r = rules(Profile::Okx);
    match b {
        Breach::PriceBelow | Breach::PriceAbove => (
            "51006",
            format!(
                "Order price is not within the price limit (max buy price: {}; min sell price: {})",
                dec(r.max_price_e8),
                dec(r.min_price_e8)
            ),
        ),
        Breach::PriceTick => ("51000", "Parameter px error".into()),
        Breach::QtyBelow | Breach::Notional => (
            "51120",
            format!(
                "Order quantity is less than {}. Please try again",
                dec(r.min_qty_e8)
            ),
        ),
        Breach::QtyAbove => ("51005", "Order amount exceeds the limit".into()),
        Breach::QtyStep => (
            "51121",
            "Order quantity must be a multiple of the lot size.".into(),
        ),
        Breach::OpenOrders => (
            "51102",
            "Entered amount exceeds the max pending count".into(),
        ),
        Breach::Funds => (
            "51008",
            "Order failed. Insufficient USDT margin in account".into(),
        ),
    }
}

/// Deribit's answer to a breach: error code and message.
pub(crate) fn deribit_refusal(b: Breach) -> (i64, &'static str) {
    match b {
        Breach::PriceBelow => (10005, "price_too_low"),
        Breach::PriceAbove => (10007, "price_too_high"),
        Breach::PriceTick => (10043, "price_wrong_tick"),
        Breach::QtyBelow | Breach::Notional => (10002, "qty_too_low"),
        Breach::QtyStep => (10027, "non_integer_contract_amount"),
        Breach::QtyAbove | Breach::OpenOrders | Breach::Funds => (10009, "not_enough_funds"),
    }
}
