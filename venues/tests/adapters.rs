//! The venue adapters of ergon-venues, tested like library code: every
//! shipped fixture with its expected verdict and budget effect, the Spot ban step by
//! step, limits loaded from `exchangeInfo`, the address budget of Hyperliquid, and
//! the `classify` command line.

use std::collections::BTreeSet;

use ergon_core::{Budget, Class, Resend, Verdict, Why, DEFAULT_HOLD_GUARD_NS};
use ergon_venues::adapt::{self, Clock, Error, Request, Venue};
use ergon_venues::{binance_futures, binance_spot, bybit, classify, hyperliquid, okx};

use ergon_venues::classify::{classify, HttpFile, FIXTURE_NOW_UTC_MS, NOW_NS};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// A budget effect of one answer, checked on the budget after it.
#[derive(Clone, Copy, Debug)]
enum Effect {
    /// The bucket counts this much (the local charge raised to the server's count).
    Used(&'static str, u64),
    /// The bucket is held until this many ms after now.
    Held(&'static str, i64),
    /// The bucket is held until this many ns after now (a token bucket's window,
    /// interval times burst, need not be whole milliseconds).
    HeldNs(&'static str, i64),
    /// The bucket is halted; the venue's end of the ban is this many ms after now.
    Halted(&'static str, i64),
    /// A header could not be read and is reported.
    Warns(&'static str),
}

use Effect::{Halted, Held, HeldNs, Used, Warns};

/// venue, case, the line `classify` prints, the budget effects. Every bucket not
/// named in a Held or Halted effect must be neither.
#[rustfmt::skip]
const TABLE: &[(&str, &str, &str, &[Effect])] = &[
    // Deribit (issue 19): matching 5/s burst 20 (requests), credits 500 of 50,000 refilled 10,000/s.
    ("deribit", "order_ok", "Done", &[Used("matching", 1), Used("credits", 0)]),
    ("deribit", "matching_10028", "Throttled bucket=matching until_ms=4000", &[Held("matching", 4_000)]),
    ("deribit", "credits_10028", "Throttled bucket=credits until_ms=5050", &[Held("credits", 5_050), Used("credits", 500)]),
    ("deribit", "connections_429", "Throttled bucket=ip until_ms=1000", &[Held("ip", 1_000)]),
    ("deribit", "ban_403", "Banned bucket=ip until_ms=300000", &[Halted("ip", 300_000)]),
    ("deribit", "clock_13009", "ClockSkew", &[]),
    ("deribit", "retry_10040", "NotRun", &[]),
    // Issue 39 item 5: 13888 `timed_out`, "Server did not manage to process request when it
    // was valid (valid_until)": not run (this said Unknown, a needless reconcile).
    ("deribit", "timed_out_13888", "NotRun", &[]),
    ("deribit", "internal_11094", "NotRun", &[]),
    ("deribit", "not_enough_funds_10009", "Rejected", &[]),
    ("deribit", "gateway_502", "Unknown", &[]),
    // A day's wait is past the cap (5 min): a ban, not a throttle.
    ("deribit", "far_future_429", "Banned bucket=ip until_ms=86400000", &[Halted("ip", 86_400_000)]),
    // A zero wait holds one window (a gate's: 1 s).
    ("deribit", "zero_wait_429", "Throttled bucket=ip until_ms=1000", &[Held("ip", 1_000)]),
    ("deribit", "malformed_200", "Unknown", &[]),
    // Kraken Spot (issue 19): Intermediate, trading 125 at -2.34/s (427 ms a unit), calls 20 at -0.5/s.
    ("kraken-spot", "order_ok", "Done", &[Used("trading", 1)]),
    // A cancel without the order's age costs the youngest order's 8.
    ("kraken-spot", "cancel_young", "Done", &[Used("trading", 8)]),
    ("kraken-spot", "amend_ok", "Done", &[Used("trading", 4)]),
    // The venue's counter is full: ours is raised to 125 and held for one unit's decay
    // (in whole ms), plus the 50 ms hold guard.
    ("kraken-spot", "trading_limit", "Throttled bucket=trading until_ms=478", &[Held("trading", 478), Used("trading", 125)]),
    ("kraken-spot", "api_limit", "Throttled bucket=api until_ms=2050", &[Held("api", 2_050), Used("api", 20)]),
    ("kraken-spot", "lockout", "Banned bucket=ip until_ms=900000", &[Halted("ip", 900_000)]),
    ("kraken-spot", "invalid_nonce", "ClockSkew", &[]),
    ("kraken-spot", "busy", "Unknown", &[]),
    ("kraken-spot", "unavailable_read", "NotRun", &[Used("api", 1)]),
    ("kraken-spot", "insufficient_funds", "Rejected", &[]),
    ("kraken-spot", "batch_mixed", "Done", &[Used("trading", 1)]),
    ("kraken-spot", "gateway_502", "Unknown", &[]),
    ("kraken-spot", "far_future_429", "Banned bucket=ip until_ms=86400000", &[Halted("ip", 86_400_000)]),
    ("kraken-spot", "zero_wait_429", "Throttled bucket=ip until_ms=1000", &[Held("ip", 1_000)]),
    ("kraken-spot", "malformed_200", "Unknown", &[]),
    // Issue 30: `EService: Throttled: <UNIX s>` is held until that second (now + 3 s) plus
    // the guard, keeping the count; not processed, so no reconcile. Issue 39 item 5: it is
    // the limit of concurrent requests, not a counter: the IP gate is held, no counter
    // (these two said `bucket=trading` / `bucket=api`, holding the per-pair trading
    // counter and the call counter, which were not full).
    ("kraken-spot", "service_throttled", "Throttled bucket=ip until_ms=3050", &[Held("ip", 3_050), Used("trading", 1)]),
    ("kraken-spot", "service_throttled_read", "Throttled bucket=ip until_ms=3050", &[Held("ip", 3_050), Used("api", 1)]),
    // Issue 39 item 5: a warning (severity `W`) next to a `result` is a placed order, not a
    // refusal; an error after a warning still decides; a batch item placed with a warning
    // is placed.
    ("kraken-spot", "order_warning", "Done", &[Used("trading", 1)]),
    ("kraken-spot", "warning_then_error", "Rejected", &[]),
    ("kraken-spot", "batch_warning", "Done", &[Used("trading", 1)]),
    // The engine refused it past its deadline: not run, may be re-sent.
    ("kraken-spot", "deadline_elapsed", "NotRun", &[Used("trading", 1)]),
    // A market mode that refuses new orders: not run, final (the mode outlasts a re-send).
    ("kraken-spot", "cancel_only_mode", "Rejected", &[Used("trading", 1)]),
    ("kraken-spot", "post_only_mode", "Rejected", &[Used("trading", 1)]),
    ("kraken-spot", "limit_only_mode", "Rejected", &[Used("trading", 1)]),
    // Public endpoints answer their per-IP throttle with HTTP 200: the public gate, "a few
    // seconds" (5 s) plus the guard; the key's call counter is untouched.
    ("kraken-spot", "public_too_many", "Throttled bucket=public until_ms=5050", &[Held("public", 5_050), Used("api", 0)]),
    // Kraken derivatives (issue 19): 500 per 10 s; send/edit/cancel 10, a batch 9 + n.
    ("kraken-futures", "order_ok", "Done", &[Used("derivatives", 10)]),
    // The venue's full 500 raises the strategies' share (500 less the switch's 25,
    // issue 28) by at most one bucket, 475, above the order's 10: 485.
    ("kraken-futures", "api_limit", "Throttled bucket=derivatives until_ms=10000", &[Held("derivatives", 10_000), Used("derivatives", 485)]),
    ("kraken-futures", "nonce_below", "ClockSkew", &[]),
    ("kraken-futures", "unavailable", "Unknown", &[]),
    ("kraken-futures", "unavailable_read", "NotRun", &[Used("derivatives", 2)]),
    ("kraken-futures", "auth_error", "Rejected", &[]),
    ("kraken-futures", "insufficient_funds", "Rejected", &[]),
    ("kraken-futures", "edit_ok", "Done", &[Used("derivatives", 10)]),
    ("kraken-futures", "cancel_not_found", "Rejected", &[]),
    ("kraken-futures", "batch_mixed", "Done", &[Used("derivatives", 11)]),
    ("kraken-futures", "ban_403", "Banned bucket=ip until_ms=300000", &[Halted("ip", 300_000)]),
    ("kraken-futures", "far_future_429", "Banned bucket=derivatives until_ms=86400000", &[Halted("derivatives", 86_400_000)]),
    ("kraken-futures", "zero_wait_429", "Throttled bucket=derivatives until_ms=10000", &[Held("derivatives", 10_000)]),
    ("kraken-futures", "malformed_200", "Unknown", &[]),
    // Issue 30: a 429 with Retry-After 2 holds for 2 s plus the guard, keeping the count
    // (not raised to 500 for a whole window as a 200 `apiLimitExceeded` is).
    ("kraken-futures", "api_limit_429_retry", "Throttled bucket=derivatives until_ms=2050", &[Held("derivatives", 2_050), Used("derivatives", 10)]),
    // Public endpoints have no cost and no budget: a 429 on one holds the public gate.
    ("kraken-futures", "public_429", "Throttled bucket=public until_ms=1050", &[Held("public", 1_050), Used("derivatives", 0)]),
    // Coinbase Exchange (issue 19): private 15/s burst 30, /fills 10/20, public 10/15.
    // Without a wait a 429 holds one window: the burst's refill, 30 x 66,666,667 ns.
    ("coinbase-exchange", "order_ok", "Done", &[Used("private", 1)]),
    ("coinbase-exchange", "cancel_ok", "Done", &[Used("private", 1)]),
    ("coinbase-exchange", "private_429", "Throttled bucket=private until_ms=2000", &[HeldNs("private", 2_000_000_010)]),
    ("coinbase-exchange", "fills_429", "Throttled bucket=fills until_ms=2000", &[Held("fills", 2_000), Used("private", 0)]),
    ("coinbase-exchange", "public_429", "Throttled bucket=public until_ms=1500", &[Held("public", 1_500)]),
    ("coinbase-exchange", "timestamp_400", "ClockSkew", &[]),
    ("coinbase-exchange", "insufficient_400", "Rejected", &[]),
    ("coinbase-exchange", "post_only_rejected", "Rejected", &[]),
    ("coinbase-exchange", "internal_500", "Unknown", &[]),
    ("coinbase-exchange", "read_503", "NotRun", &[]),
    ("coinbase-exchange", "ban_403", "Banned bucket=ip until_ms=300000", &[Halted("ip", 300_000)]),
    ("coinbase-exchange", "far_future_429", "Banned bucket=private until_ms=86400000", &[Halted("private", 86_400_000)]),
    ("coinbase-exchange", "zero_wait_429", "Throttled bucket=private until_ms=2000", &[HeldNs("private", 2_000_000_010)]),
    ("coinbase-exchange", "malformed_200", "Unknown", &[]),
    // Issue 30: a public read named `read:0` holds the IP's public bucket, not the profile's.
    ("coinbase-exchange", "public_read_429", "Throttled bucket=public until_ms=1500", &[Held("public", 1_500), Used("private", 0)]),
    // Binance Spot: exchangeInfo 6000 weight/min, 100 orders/10 s, 200000/day, 61000 raw/5 min.
    ("binance-spot", "order_ok", "Done", &[Used("REQUEST_WEIGHT_1M", 1234), Used("ORDERS_10S", 7), Used("ORDERS_1D", 4321), Used("RAW_REQUESTS_5M", 1)]),
    ("binance-spot", "weight_429", "Throttled bucket=REQUEST_WEIGHT_1M until_ms=37050", &[Held("REQUEST_WEIGHT_1M", 37_050), Used("REQUEST_WEIGHT_1M", 6001)]),
    // No Retry-After: held to the end of the UTC 5-minute window (now is 200 s into it).
    ("binance-spot", "queued_429", "Throttled bucket=RAW_REQUESTS_5M until_ms=100050", &[Held("RAW_REQUESTS_5M", 100_050), Used("REQUEST_WEIGHT_1M", 20)]),
    ("binance-spot", "orders_10s_429", "Throttled bucket=ORDERS_10S until_ms=10050", &[Held("ORDERS_10S", 10_050), Used("ORDERS_10S", 101)]),
    ("binance-spot", "orders_1d_429", "Throttled bucket=ORDERS_1D until_ms=6400050", &[Held("ORDERS_1D", 6_400_050)]),
    ("binance-spot", "ban_418", "Banned bucket=ip until_ms=300000", &[Halted("ip", 300_000)]),
    ("binance-spot", "ban_418_until_in_msg", "Banned bucket=ip until_ms=450000", &[Halted("ip", 450_000)]),
    ("binance-spot", "waf_403", "Banned bucket=ip until_ms=120000", &[Halted("ip", 120_000)]),
    ("binance-spot", "clock_skew_1021", "ClockSkew", &[Used("REQUEST_WEIGHT_1M", 3)]),
    ("binance-spot", "timeout_1007", "Unknown", &[]),
    ("binance-spot", "unexpected_1006", "Unknown", &[]),
    ("binance-spot", "busy_1008", "Unknown", &[]),
    ("binance-spot", "gateway_502", "Unknown", &[]),
    ("binance-spot", "insufficient_2010", "Rejected", &[Used("REQUEST_WEIGHT_1M", 2), Used("ORDERS_10S", 1), Used("ORDERS_1D", 1)]),
    // Issue 39, item 1: each part's fate from `data` (these said NotRun and Unknown for the
    // whole request); the parts, new order then cancel, are checked below.
    ("binance-spot", "cancel_replace_failed_2022", "Done", &[]),
    ("binance-spot", "cancel_replace_partial_2021", "Done", &[]),
    ("binance-spot", "garbage_200", "Unknown", &[]),
    // Issue 12: a wait above the cap halts (saturated: 9999999999 s is past i64 ns); zero holds one window.
    ("binance-spot", "weight_429_far_future", "Banned bucket=REQUEST_WEIGHT_1M until_ms=9223371036854", &[Halted("REQUEST_WEIGHT_1M", i64::MAX)]),
    ("binance-spot", "weight_429_zero_wait", "Throttled bucket=REQUEST_WEIGHT_1M until_ms=60000", &[Held("REQUEST_WEIGHT_1M", 60_000)]),
    ("binance-spot", "query_found", "Done", &[Used("REQUEST_WEIGHT_1M", 9)]),
    ("binance-spot", "query_not_found_2013", "Rejected", &[Used("REQUEST_WEIGHT_1M", 9)]),
    ("binance-spot", "bad_usage_header_429", "Throttled bucket=REQUEST_WEIGHT_1M until_ms=37050", &[Held("REQUEST_WEIGHT_1M", 37_050), Used("REQUEST_WEIGHT_1M", 1), Warns("X-MBX-USED-WEIGHT-*")]),
    // Binance USD-M futures: 2400 weight/min, 1200 orders/min, 300/10 s.
    ("binance-futures", "order_ok", "Done", &[Used("REQUEST_WEIGHT_1M", 57), Used("ORDERS_1M", 3), Used("ORDERS_10S", 2)]),
    ("binance-futures", "weight_429", "Throttled bucket=REQUEST_WEIGHT_1M until_ms=37050", &[Held("REQUEST_WEIGHT_1M", 37_050), Used("REQUEST_WEIGHT_1M", 5)]),
    ("binance-futures", "orders_10s_429", "Throttled bucket=ORDERS_10S until_ms=10050", &[Held("ORDERS_10S", 10_050)]),
    ("binance-futures", "orders_1m_429", "Throttled bucket=ORDERS_1M until_ms=40050", &[Held("ORDERS_1M", 40_050)]),
    ("binance-futures", "ban_418", "Banned bucket=ip until_ms=300000", &[Halted("ip", 300_000)]),
    ("binance-futures", "clock_skew_1021", "ClockSkew", &[]),
    ("binance-futures", "protection_503_1008", "NotRun", &[]),
    ("binance-futures", "unavailable_503", "NotRun", &[]),
    ("binance-futures", "internal_503", "NotRun", &[]),
    ("binance-futures", "unknown_503", "Unknown", &[]),
    ("binance-futures", "timeout_408", "Unknown", &[]),
    ("binance-futures", "would_trigger_2021", "Rejected", &[]),
    ("binance-futures", "reduce_only_2022", "Rejected", &[]),
    ("binance-futures", "weight_429_date_2099", "Banned bucket=REQUEST_WEIGHT_1M until_ms=2370908800000", &[Halted("REQUEST_WEIGHT_1M", 2_370_908_800_000)]),
    ("binance-futures", "weight_429_past_date", "Throttled bucket=REQUEST_WEIGHT_1M until_ms=60000", &[Held("REQUEST_WEIGHT_1M", 60_000)]),
    ("binance-futures", "batch_mixed", "Done", &[Used("REQUEST_WEIGHT_1M", 5), Used("ORDERS_10S", 5), Used("ORDERS_1M", 1)]),
    ("binance-futures", "query_found", "Done", &[Used("REQUEST_WEIGHT_1M", 3)]),
    ("binance-futures", "query_not_found_2013", "Rejected", &[Used("REQUEST_WEIGHT_1M", 3)]),
    // Bybit v5.
    ("bybit", "order_ok", "Done", &[Used("/v5/order/create", 4), Used("ip_5s", 1)]),
    ("bybit", "rate_10006", "Throttled bucket=/v5/order/create until_ms=500", &[Held("/v5/order/create", 500), Used("/v5/order/create", 10)]),
    ("bybit", "ban_403", "Banned bucket=ip until_ms=600000", &[Halted("ip", 600_000)]),
    ("bybit", "clock_skew_10002", "ClockSkew", &[]),
    ("bybit", "server_error_10016", "Unknown", &[]),
    ("bybit", "timeout_10000", "Unknown", &[Used("/v5/order/cancel", 1)]),
    ("bybit", "backend_timeout_170007", "Unknown", &[]),
    ("bybit", "creation_timeout_170146", "Unknown", &[]),
    ("bybit", "rejected_110007", "Rejected", &[Used("/v5/order/create", 2)]),
    ("bybit", "batch_ok", "Done", &[Used("/v5/order/create", 2), Used("ip_5s", 1)]),
    ("bybit", "batch_mixed", "Done", &[Used("/v5/order/create", 2)]),
    ("bybit", "system_429", "Throttled bucket=ip until_ms=1000", &[Held("ip", 1_000)]),
    ("bybit", "gateway_502", "Unknown", &[]),
    ("bybit", "rate_10006_reset_far_future", "Banned bucket=/v5/order/create until_ms=2402444800000", &[Halted("/v5/order/create", 2_402_444_800_000)]),
    ("bybit", "rate_10006_reset_past", "Throttled bucket=/v5/order/create until_ms=1000", &[Held("/v5/order/create", 1000)]),
    ("bybit", "query_found", "Done", &[Used("read", 1)]),
    ("bybit", "query_not_found", "Done", &[Used("read", 1)]),
    ("bybit", "history_closed", "Done", &[Used("/v5/order/history", 1)]),
    ("bybit", "history_not_found", "Done", &[Used("/v5/order/history", 2)]),
    // OKX v5.
    ("okx", "order_ok", "Done", &[Used("/api/v5/trade/order", 1), Used("sub-account", 1)]),
    ("okx", "rate_50011_200", "Throttled bucket=/api/v5/trade/order until_ms=2000", &[Held("/api/v5/trade/order", 2_000)]),
    ("okx", "rate_50011_429", "Throttled bucket=/api/v5/trade/order until_ms=2000", &[Held("/api/v5/trade/order", 2_000)]),
    ("okx", "too_frequent_50040", "Throttled bucket=/api/v5/trade/cancel-order until_ms=2000", &[Held("/api/v5/trade/cancel-order", 2_000)]),
    ("okx", "sub_account_50061", "Throttled bucket=sub-account until_ms=2000", &[Held("sub-account", 2_000)]),
    ("okx", "clock_skew_50102", "ClockSkew", &[]),
    ("okx", "timeout_50004", "Unknown", &[]),
    ("okx", "unavailable_50001", "Unknown", &[]),
    ("okx", "unavailable_50001_read", "NotRun", &[Used("read", 1)]),
    ("okx", "system_error_50026", "Unknown", &[]),
    ("okx", "rejected_51008", "Rejected", &[]),
    ("okx", "batch_partial", "Done", &[Used("/api/v5/trade/batch-orders", 2), Used("sub-account", 2)]),
    ("okx", "batch_sub_account_50061", "Throttled bucket=sub-account until_ms=2000", &[Held("sub-account", 2_000)]),
    ("okx", "gateway_502", "Unknown", &[]),
    ("okx", "rate_50011_retry_far_future", "Banned bucket=/api/v5/trade/order until_ms=9223371036854", &[Halted("/api/v5/trade/order", i64::MAX)]),
    ("okx", "rate_50011_retry_zero", "Throttled bucket=/api/v5/trade/order until_ms=2000", &[Held("/api/v5/trade/order", 2000)]),
    ("okx", "query_found", "Done", &[]),
    ("okx", "query_not_found_51603", "Rejected", &[]),
    // Hyperliquid.
    ("hyperliquid", "order_resting", "Done", &[Used("ip_weight_1m", 1), Used("ip_burst", 1)]),
    ("hyperliquid", "batch_mixed", "Done", &[Used("ip_weight_1m", 1)]),
    ("hyperliquid", "order_rejected", "Rejected", &[]),
    ("hyperliquid", "address_limit", "Throttled bucket=address until_ms=10050", &[Held("address", 10_050)]),
    ("hyperliquid", "ip_429", "Throttled bucket=ip_burst until_ms=2000", &[Held("ip_burst", 2_000), Used("ip_weight_1m", 2)]),
    ("hyperliquid", "clock_skew_nonce", "ClockSkew", &[]),
    ("hyperliquid", "gateway_502", "Unknown", &[]),
    // 45 fills: weight 20, plus one per 20 items returned (rounded up): 3.
    ("hyperliquid", "info_user_fills", "Done", &[Used("ip_weight_1m", 23), Used("ip_burst", 20)]),
    ("hyperliquid", "info_user_rate_limit", "Done", &[Used("ip_weight_1m", 20)]),
    ("hyperliquid", "cancel_success", "Done", &[]),
    ("hyperliquid", "user_not_found_err", "Rejected", &[]),
    ("hyperliquid", "ip_429_retry_far_future", "Banned bucket=ip_burst until_ms=2370908800000", &[Halted("ip_burst", 2_370_908_800_000)]),
    ("hyperliquid", "ip_429_retry_zero", "Throttled bucket=ip_burst until_ms=2000", &[Held("ip_burst", 2000)]),
    ("hyperliquid", "order_status_found", "Done", &[Used("ip_weight_1m", 2)]),
    ("hyperliquid", "order_status_unknown_oid", "Done", &[Used("ip_weight_1m", 2)]),
];

fn fixture(venue: &str, case: &str) -> Vec<u8> {
    let path = classify::fixtures()
        .join(venue)
        .join(format!("{case}.http"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn request_of(venue: &str, case: &str) -> String {
    classify::cases(venue)
        .unwrap()
        .into_iter()
        .find(|c| c.name == case)
        .unwrap_or_else(|| panic!("{venue}/{case} is not in CASES"))
        .request
}

fn check_effects(
    venue: &str,
    case: &str,
    budget: &Budget,
    effects: &[Effect],
    warning: &Option<String>,
) {
    let at = format!("{venue}/{case}");
    let mut held = BTreeSet::new();
    let mut halted = BTreeSet::new();
    let mut warns = None;
    for e in effects {
        match *e {
            Used(name, n) => {
                let b = budget
                    .bucket(name)
                    .unwrap_or_else(|| panic!("{at}: no bucket {name}"));
                assert_eq!(budget.stats(b).unwrap().used, n, "{at}: used of {name}");
            }
            Held(name, ms) | HeldNs(name, ms) => {
                let ns = if matches!(e, HeldNs(..)) { ms } else { ms * MS };
                let b = budget
                    .bucket(name)
                    .unwrap_or_else(|| panic!("{at}: no bucket {name}"));
                assert_eq!(
                    budget.stats(b).unwrap().held_until_ns,
                    Some(NOW_NS + ns),
                    "{at}: hold of {name}"
                );
                held.insert(name);
            }
            Halted(name, ms) => {
                let b = budget
                    .bucket(name)
                    .unwrap_or_else(|| panic!("{at}: no bucket {name}"));
                let s = budget.stats(b).unwrap();
                assert!(s.halted, "{at}: {name} is not halted");
                assert_eq!(s.bans, 1, "{at}: bans of {name}");
                // i64::MAX ms: the venue's end saturated (a wait past the clock's range).
                let end = if ms == i64::MAX {
                    i64::MAX
                } else {
                    NOW_NS + ms * MS
                };
                assert_eq!(s.ban_until_ns, Some(end), "{at}: ban end of {name}");
                halted.insert(name);
            }
            Warns(header) => warns = Some(header),
        }
    }
    for b in budget.ids() {
        let name = budget.name(b).unwrap();
        let s = budget.stats(b).unwrap();
        if !held.contains(name) {
            assert_eq!(
                s.held_until_ns, None,
                "{at}: {name} is held, and should not be"
            );
        }
        if !halted.contains(name) {
            assert!(!s.halted, "{at}: {name} is halted, and should not be");
        }
    }
    match (warns, warning) {
        (None, None) => {}
        (Some(h), Some(w)) => assert!(w.contains(h), "{at}: warning {w:?} names not {h}"),
        (want, got) => panic!("{at}: warning expected {want:?}, got {got:?}"),
    }
}

#[test]
fn every_fixture_gives_its_verdict_and_budget_effect() {
    for &(venue, case, line, effects) in TABLE {
        let req = request_of(venue, case);
        let d = classify(venue, &req, FIXTURE_NOW_UTC_MS, &fixture(venue, case))
            .unwrap_or_else(|e| panic!("{venue}/{case}: {e}"));
        assert_eq!(d.line, line, "{venue}/{case} [{req}]");
        check_effects(venue, case, &d.budget, effects, &d.warning);
    }
}

#[test]
fn every_fixture_is_in_the_table_and_cites_its_page() {
    let table: BTreeSet<(&str, &str)> = TABLE.iter().map(|(v, c, ..)| (*v, *c)).collect();
    assert_eq!(table.len(), TABLE.len(), "a case is in the table twice");
    for venue in classify::VENUES {
        let cases = classify::cases(venue).unwrap();
        assert!(cases.len() >= 6, "{venue}: fewer than six fixtures");
        let mut files: BTreeSet<String> = std::fs::read_dir(classify::fixtures().join(venue))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".http"))
            .collect();
        for c in &cases {
            assert!(
                table.contains(&(venue, c.name.as_str())),
                "{venue}/{} has no row",
                c.name
            );
            assert!(
                files.remove(&format!("{}.http", c.name)),
                "{venue}/{} has no file",
                c.name
            );
            let official = [
                "https://developers.binance.com/",
                "https://bybit-exchange.github.io/docs/v5/",
                "https://www.okx.com/docs-v5/",
                "https://hyperliquid.gitbook.io/hyperliquid-docs/",
                "https://docs.deribit.com/",
                "https://docs.kraken.com/",
                "https://docs.cdp.coinbase.com/exchange/",
                "https://docs.cdp.coinbase.com/api-reference/exchange-api/",
            ];
            assert!(
                official.iter().any(|p| c.source.starts_with(p)),
                "{venue}/{}: {} is not the venue's documentation",
                c.name,
                c.source
            );
        }
        assert!(
            files.is_empty(),
            "{venue}: fixtures not in CASES: {files:?}"
        );
    }
    for (venue, case) in table {
        classify::cases(venue)
            .unwrap()
            .iter()
            .find(|c| c.name == case)
            .unwrap_or_else(|| panic!("table row {venue}/{case} has no fixture"));
    }
}

fn spot(now_ns: i64) -> (binance_spot::BinanceSpot, Budget) {
    let clock = Clock::anchor(now_ns, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let spot = binance_spot::BinanceSpot::from_exchange_info(
        classify::SPOT_EXCHANGE_INFO,
        &mut b,
        clock,
        classify::BINANCE_GUARD_NS,
    )
    .unwrap();
    (spot, b.build(now_ns).unwrap())
}

#[test]
fn spot_ban_step_by_step() {
    let now = NOW_NS;
    let (mut spot, mut budget) = spot(now);
    let ip = budget.bucket("ip").unwrap();
    let order = spot.parts(Request::Order).unwrap();
    let connect = spot.parts(Request::Connect).unwrap();
    assert_eq!(connect.as_slice(), &[ergon_core::Part::new(ip, 0)]);

    // A 418 with Retry-After 300: Banned until now + 300 s.
    let flight = budget
        .try_charge(&order, Class::Normal, now)
        .unwrap()
        .sent();
    let file = HttpFile::parse(&fixture("binance-spot", "ban_418")).unwrap();
    let verdict = file
        .with_response(|r| spot.on_response(Request::Order, r, &mut budget, now))
        .unwrap();
    budget.complete(flight, now).unwrap();
    assert_eq!(
        verdict,
        Verdict::Banned {
            bucket: ip,
            until_ns: now + 300 * SEC
        }
    );

    // Ten minutes later, past the venue's end: requests and connects are still
    // refused as halted, whatever their class.
    let later = now + 600 * SEC;
    for parts in [&order, &connect] {
        let refused = budget.try_charge(parts, Class::Urgent, later).unwrap_err();
        assert_eq!((refused.bucket, refused.why), (ip, Why::Halted));
    }
    assert!(matches!(
        budget.resend(&verdict, &order, Class::Urgent, i64::MAX, later),
        Resend::Wait(l) if l.why == Why::Halted
    ));

    // Alerts name ip, with one ban.
    let alerts: Vec<_> = adapt::alerts(&budget).collect();
    assert_eq!(alerts.len(), 1);
    assert_eq!((alerts[0].name, alerts[0].bans), ("ip", 1));
    assert_eq!(alerts[0].ban_until_ns, Some(now + 300 * SEC));

    // A person clears it: both pass.
    budget.clear_halt(ip).unwrap();
    assert_eq!(adapt::alerts(&budget).count(), 0);
    let t = budget.try_charge(&order, Class::Normal, later).unwrap();
    budget.refund(t, later).unwrap();
    let t = budget.try_charge(&connect, Class::Normal, later).unwrap();
    budget.refund(t, later).unwrap();
}

#[test]
fn a_bad_header_is_reported_and_undoes_no_hold_or_halt() {
    let now = NOW_NS;
    let (mut spot, mut budget) = spot(now);
    let weight = budget.bucket("REQUEST_WEIGHT_1M").unwrap();
    let file = HttpFile::parse(&fixture("binance-spot", "bad_usage_header_429")).unwrap();
    let answer = file.with_response(|r| spot.on_response(Request::Order, r, &mut budget, now));
    let throttled = Verdict::Throttled {
        bucket: weight,
        until_ns: now + 37 * SEC + DEFAULT_HOLD_GUARD_NS,
    };
    assert_eq!(
        answer,
        Err(Error::BadHeader {
            verdict: throttled,
            header: "X-MBX-USED-WEIGHT-*"
        })
    );
    assert_eq!(
        budget.stats(weight).unwrap().held_until_ns,
        Some(now + 37 * SEC + DEFAULT_HOLD_GUARD_NS)
    );

    // A ban whose Retry-After cannot be read still halts, from the message's end.
    let mut raw = fixture("binance-spot", "ban_418");
    let at = raw
        .windows(16)
        .position(|w| w == b"Retry-After: 300")
        .unwrap();
    raw.splice(at..at + 16, b"Retry-After: 3x0".iter().copied());
    let file = HttpFile::parse(&raw).unwrap();
    let ip = budget.bucket("ip").unwrap();
    let answer = file.with_response(|r| spot.on_response(Request::Order, r, &mut budget, now));
    let banned = Verdict::Banned {
        bucket: ip,
        until_ns: now + 300 * SEC, // "IP banned until 1700000300000"
    };
    assert_eq!(
        answer,
        Err(Error::BadHeader {
            verdict: banned,
            header: "Retry-After"
        })
    );
    assert!(budget.is_halted(ip).unwrap());
}

#[test]
fn spot_limits_come_from_exchange_info_aligned_to_utc() {
    let now = NOW_NS; // 20 s into a UTC minute
    let (spot, mut budget) = spot(now);
    for (name, limit) in [
        ("REQUEST_WEIGHT_1M", 6000),
        ("ORDERS_10S", 100),
        ("ORDERS_1D", 200_000),
        ("RAW_REQUESTS_5M", 61_000),
    ] {
        let b = budget.bucket(name).unwrap();
        assert_eq!(budget.stats(b).unwrap().limit, limit, "{name}");
    }
    // The whole minute's weight, at once.
    let read = spot.parts(Request::Read(6000)).unwrap();
    let t = budget.try_charge(&read, Class::Urgent, now).unwrap();
    let _ = t.sent();
    let one = spot.parts(Request::Read(1)).unwrap();
    let refused = budget
        .try_charge(&one, Class::Urgent, now + 30 * SEC)
        .unwrap_err();
    assert_eq!(refused.why, Why::Full);
    // Free again when the venue's minute ends (40 s on), plus the guard: not 60 s on.
    let minute_end = now + 40 * SEC;
    assert!(refused.ready_at_ns >= minute_end);
    assert!(refused.ready_at_ns <= minute_end + classify::BINANCE_GUARD_NS);
    let t = budget
        .try_charge(&one, Class::Urgent, refused.ready_at_ns)
        .unwrap();
    let _ = t.sent();
}

#[test]
fn bad_exchange_info_is_an_error() {
    let clock = Clock::anchor(0, FIXTURE_NOW_UTC_MS);
    for (body, want) in [
        (&b"<html>"[..], "configuration body: malformed JSON at byte 0"),
        (b"{}", "configuration body: field rateLimits missing or bad"),
        (
            br#"{"rateLimits":[{"rateLimitType":"ORDERS","interval":"WEEK","intervalNum":1,"limit":5}]}"#,
            "configuration body: field interval missing or bad",
        ),
        (
            br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":0}]}"#,
            "bucket configuration: the limit is zero: nothing could ever pass",
        ),
        (
            br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":10}]}"#,
            "configuration body: field rateLimits: no ORDERS limit missing or bad",
        ),
        (
            br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":"1","limit":10}]}"#,
            "configuration body: field intervalNum missing or bad",
        ),
    ] {
        let mut b = Budget::builder();
        let err = binance_spot::BinanceSpot::from_exchange_info(body, &mut b, clock, 0).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn futures_503_not_run_is_resent_inside_its_deadline_only() {
    let now = NOW_NS;
    let clock = Clock::anchor(now, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let mut fut = binance_futures::BinanceFutures::new(
        &mut b,
        clock,
        classify::BINANCE_GUARD_NS,
        binance_futures::DEFAULT_TABLE,
    )
    .unwrap();
    let mut budget = b.build(now).unwrap();
    let order = fut.parts(Request::Order).unwrap();
    let _ = budget
        .try_charge(&order, Class::Normal, now)
        .unwrap()
        .sent();
    let file = HttpFile::parse(&fixture("binance-futures", "protection_503_1008")).unwrap();
    let v = file
        .with_response(|r| fut.on_response(Request::Order, r, &mut budget, now))
        .unwrap();
    assert_eq!(v, Verdict::NotRun);
    // Signed at now with recvWindow 5000: the deadline is 5 s on.
    let deadline = fut.deadline_ns(FIXTURE_NOW_UTC_MS, 5_000);
    assert_eq!(deadline, now + 5 * SEC);
    assert!(matches!(
        budget.resend(&v, &order, Class::Normal, deadline, now + SEC),
        Resend::Send(_)
    ));
    assert_eq!(
        budget.resend(&v, &order, Class::Normal, deadline, now + 5 * SEC),
        Resend::Stale
    );
    // Unknown is never re-sent.
    let file = HttpFile::parse(&fixture("binance-futures", "unknown_503")).unwrap();
    let v = file
        .with_response(|r| fut.on_response(Request::Order, r, &mut budget, now))
        .unwrap();
    assert_eq!(
        budget.resend(&v, &order, Class::Normal, deadline, now + SEC),
        Resend::Reconcile
    );
}

#[test]
fn okx_exp_time_is_the_deadline_and_batches_charge_per_order() {
    let now = NOW_NS;
    let clock = Clock::anchor(now, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let okx = okx::Okx::new(&mut b, clock, okx::Config::default()).unwrap();
    let budget = b.build(now).unwrap();
    assert_eq!(
        okx.deadline_ns(FIXTURE_NOW_UTC_MS + 1_500),
        now + 1_500 * MS
    );
    let parts = okx.parts(Request::Batch(20)).unwrap();
    let cost = |name| {
        let id = budget.bucket(name).unwrap();
        parts
            .iter()
            .filter(|p| p.bucket == id)
            .map(|p| p.cost)
            .sum::<u32>()
    };
    assert_eq!(cost("/api/v5/trade/batch-orders"), 20);
    assert_eq!(cost("sub-account"), 20);
    assert_eq!(cost("/api/v5/trade/order"), 0);
    // Cancels do not count against the sub-account's order limit.
    let cancel = okx.parts(Request::Cancel).unwrap();
    assert!(cancel
        .iter()
        .all(|p| p.bucket != budget.bucket("sub-account").unwrap()));
}

#[test]
fn bybit_batch_charges_per_order_and_usage_comes_from_its_headers() {
    let now = NOW_NS;
    let clock = Clock::anchor(now, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let mut bybit = bybit::Bybit::new(&mut b, clock, bybit::Config::default()).unwrap();
    let mut budget = b.build(now).unwrap();
    let parts = bybit.parts(Request::Batch(7)).unwrap();
    let create = budget.bucket("/v5/order/create").unwrap();
    assert_eq!(parts.iter().find(|p| p.bucket == create).unwrap().cost, 7);
    // A batch of 11 cannot pass a limit of 10 per second: split it.
    let refused = budget
        .try_charge(
            &bybit.parts(Request::Batch(11)).unwrap(),
            Class::Urgent,
            now,
        )
        .unwrap_err();
    assert_eq!((refused.bucket, refused.why), (create, Why::TooBig));
    // Status above the limit is a bad header, reported; nothing counted from it.
    let raw = b"HTTP/1.1 200 OK\r\nX-Bapi-Limit: 10\r\nX-Bapi-Limit-Status: 11\r\nContent-Length: 28\r\n\r\n{\"retCode\":0,\"retMsg\":\"OK\"}\n";
    let file = HttpFile::parse(raw).unwrap();
    let answer = file.with_response(|r| bybit.on_response(Request::Order, r, &mut budget, now));
    assert_eq!(
        answer,
        Err(Error::BadHeader {
            verdict: Verdict::Done,
            header: "X-Bapi-Limit-Status"
        })
    );
    assert_eq!(budget.stats(create).unwrap().used, 0);
}

#[test]
fn bybit_403_is_a_ban_unless_its_body_has_a_ret_code() {
    let now = NOW_NS;
    let clock = Clock::anchor(now, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let mut bybit = bybit::Bybit::new(&mut b, clock, bybit::Config::default()).unwrap();
    let mut budget = b.build(now).unwrap();
    let ip = budget.bucket("ip").unwrap();
    // The body decides first: a retCode body is read by its code.
    let body = br#"{"retCode":10003,"retMsg":"API key is invalid."}"#;
    let mut raw = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    let file = HttpFile::parse(&raw).unwrap();
    let v = file.with_response(|r| bybit.on_response(Request::Order, r, &mut budget, now));
    assert_eq!(v, Ok(Verdict::Rejected));
    assert!(!budget.is_halted(ip).unwrap());
    let file = HttpFile::parse(&fixture("bybit", "ban_403")).unwrap();
    let v = file.with_response(|r| bybit.on_response(Request::Order, r, &mut budget, now));
    assert_eq!(
        v,
        Ok(Verdict::Banned {
            bucket: ip,
            until_ns: now + 600 * SEC
        })
    );
    assert!(budget.is_halted(ip).unwrap());
}

#[test]
fn hyperliquid_weights() {
    let clock = Clock::anchor(0, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let hl = hyperliquid::Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).unwrap();
    let budget = b.build(0).unwrap();
    let weight = budget.bucket("ip_weight_1m").unwrap();
    let cost = |r| {
        let parts = hl.parts(r).unwrap();
        parts.iter().find(|p| p.bucket == weight).unwrap().cost
    };
    assert_eq!(cost(Request::Order), 1);
    assert_eq!(cost(Request::Batch(39)), 1);
    assert_eq!(cost(Request::Batch(79)), 2);
    assert_eq!(cost(Request::Batch(80)), 3);
    assert_eq!(cost(Request::Info("l2Book")), 2);
    assert_eq!(cost(Request::Info("userRole")), 60);
    assert_eq!(cost(Request::Info("meta")), 20);
    // 1200 a minute: the strategies' share and the switch's (issue 28).
    assert_eq!(
        budget.stats(weight).unwrap().limit + budget.stats(hl.switch).unwrap().limit,
        1200
    );
    assert_eq!(
        budget.stats(weight).unwrap().limit,
        1200 - hyperliquid::SWITCH_RESERVE_WEIGHT
    );
}

fn user_rate_limit(
    vlm: &str,
    used: u64,
    cap: u64,
    surplus: u64,
    at_ns: i64,
) -> hyperliquid::Reading {
    let body = format!(
        r#"{{"cumVlm":"{vlm}","nRequestsUsed":{used},"nRequestsCap":{cap},"nRequestsSurplus":{surplus}}}"#
    );
    hyperliquid::Reading::parse(body.as_bytes(), at_ns).unwrap()
}

#[test]
fn hyperliquid_address_budget_counts_the_surplus_once() {
    // Not yet reflected in the cap: the surplus adds.
    let r = user_rate_limit("200.5", 100, 10_200, 500, 0);
    assert_eq!(r.allowance(), 10_700);
    assert_eq!(r.remaining(), 10_600);
    // The cap already grew by the purchase: not counted twice.
    let r = user_rate_limit("200.5", 100, 10_700, 500, 0);
    assert_eq!(r.allowance(), 10_700);
    // Partly reflected: only the rest adds.
    let r = user_rate_limit("200", 100, 10_500, 500, 0);
    assert_eq!(r.allowance(), 10_700);
    // Used past the cap: nothing left, never a wrapped count.
    let r = user_rate_limit("0.0", 12_000, 10_000, 0, 0);
    assert_eq!(r.remaining(), 0);
    for bad in [
        &br#"{"cumVlm":"-1","nRequestsUsed":1,"nRequestsCap":1,"nRequestsSurplus":0}"#[..],
        br#"{"cumVlm":"1.x","nRequestsUsed":1,"nRequestsCap":1,"nRequestsSurplus":0}"#,
        br#"{"cumVlm":"1","nRequestsCap":1,"nRequestsSurplus":0}"#,
        b"[]",
    ] {
        assert!(hyperliquid::Reading::parse(bad, 0).is_err());
    }
}

#[test]
fn hyperliquid_forecasts_hours_to_exhaustion() {
    const HOUR: i64 = 3600 * SEC;
    let mut a = hyperliquid::Address::default();
    a.read(user_rate_limit("1000", 5_000, 11_000, 0, 0));
    assert_eq!(a.hours_to_exhaustion(), None);
    // An hour later: 1000 more used, 400 more earned by volume: 600 per hour net,
    // 5400 left: 9 hours.
    a.read(user_rate_limit("1400", 6_000, 11_400, 0, HOUR));
    assert_eq!(a.remaining(), Some(5_400));
    let h = a.hours_to_exhaustion().unwrap();
    assert!((h - 9.0).abs() < 1e-9, "{h}");
    // Buying requests (the cap grows by them): no double count, longer forecast.
    a.read(user_rate_limit("1400", 6_600, 12_400, 1_000, 2 * HOUR));
    assert_eq!(a.remaining(), Some(5_800));
    assert_eq!(a.hours_to_exhaustion(), None); // 400 more left than an hour ago
}

#[test]
fn hyperliquid_spent_address_is_one_request_per_ten_seconds() {
    let now = NOW_NS;
    let clock = Clock::anchor(now, FIXTURE_NOW_UTC_MS);
    let mut b = Budget::builder();
    let mut hl =
        hyperliquid::Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).unwrap();
    let mut budget = b.build(now).unwrap();
    let address = budget.bucket("address").unwrap();
    // Two requests left.
    let body = br#"{"cumVlm":"0","nRequestsUsed":9998,"nRequestsCap":10000,"nRequestsSurplus":0}"#;
    let mut raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    raw.extend_from_slice(body);
    let file = HttpFile::parse(&raw).unwrap();
    let v =
        file.with_response(|r| hl.on_response(Request::Info("userRateLimit"), r, &mut budget, now));
    assert_eq!(v, Ok(Verdict::Done));
    assert_eq!(hl.address.remaining(), Some(2));
    let ok = HttpFile::parse(&fixture("hyperliquid", "order_resting")).unwrap();
    let order = hl.parts(Request::Order).unwrap();
    let mut t = now;
    for left in [1, 0] {
        let _ = budget.try_charge(&order, Class::Normal, t).unwrap().sent();
        ok.with_response(|r| hl.on_response(Request::Order, r, &mut budget, t))
            .unwrap();
        assert_eq!(hl.address.remaining(), Some(left));
        t += MS;
    }
    // Spent: the next action waits 10 s, then one passes, and the next waits again.
    let refused = budget.try_charge(&order, Class::Urgent, t).unwrap_err();
    assert_eq!((refused.bucket, refused.why), (address, Why::Held));
    assert_eq!(
        refused.ready_at_ns,
        t - MS + 10 * SEC + DEFAULT_HOLD_GUARD_NS
    );
    let t = refused.ready_at_ns;
    let _ = budget.try_charge(&order, Class::Urgent, t).unwrap().sent();
    ok.with_response(|r| hl.on_response(Request::Order, r, &mut budget, t))
        .unwrap();
    let refused = budget
        .try_charge(&order, Class::Urgent, t + SEC)
        .unwrap_err();
    assert_eq!(refused.ready_at_ns, t + 10 * SEC + DEFAULT_HOLD_GUARD_NS);
}

fn run(args: &[&str]) -> (Result<(), String>, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = classify::run(&args, &mut out, &mut err);
    (
        r,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// `classify --venue V --request R --now-utc-ms NOW FILE`, as [`run`] gives it.
fn classify_cli(
    venue: &str,
    request: &str,
    now_utc_ms: &str,
    file: &str,
) -> (Result<(), String>, String, String) {
    run(&[
        "classify",
        "--venue",
        venue,
        "--request",
        request,
        "--now-utc-ms",
        now_utc_ms,
        file,
    ])
}

#[test]
fn classify_prints_one_line() {
    let dir = classify::fixtures();
    let file = |v: &str, c: &str| dir.join(v).join(format!("{c}.http")).display().to_string();
    let (r, out, _) = classify_cli(
        "binance-spot",
        "order",
        "1700000000000",
        &file("binance-spot", "weight_429"),
    );
    assert_eq!(
        (r, out.as_str()),
        (
            Ok(()),
            "Throttled bucket=REQUEST_WEIGHT_1M until_ms=37050\n"
        )
    );
    // Another now: the UTC window ends elsewhere.
    let (r, out, _) = classify_cli(
        "binance-spot",
        "read:1",
        "1700000090000",
        &file("binance-spot", "queued_429"),
    );
    assert_eq!(
        (r, out.as_str()),
        (Ok(()), "Throttled bucket=RAW_REQUESTS_5M until_ms=10050\n")
    );
    let (r, out, _) = classify_cli(
        "hyperliquid",
        "info:userFills",
        "1700000000000",
        &file("hyperliquid", "info_user_fills"),
    );
    assert_eq!((r, out.as_str()), (Ok(()), "Done\n"));
    // A bad header: the line, and a warning on the side.
    let (r, out, err) = classify_cli(
        "binance-spot",
        "order",
        "1700000000000",
        &file("binance-spot", "bad_usage_header_429"),
    );
    assert_eq!(
        (r, out.as_str()),
        (
            Ok(()),
            "Throttled bucket=REQUEST_WEIGHT_1M until_ms=37050\n"
        )
    );
    assert!(err.contains("X-MBX-USED-WEIGHT-*"), "{err}");
}

#[test]
fn classify_refuses_what_is_not_an_http_response() {
    let tmp = std::env::temp_dir().join(format!("ergon-venues-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = tmp.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let not_http = write("not.http", b"{\"code\":0}");
    let short = write(
        "short.http",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
    );
    let head_only = write("head.http", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
    let html_order = write(
        "html.http",
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<html>",
    );
    let chunked = write(
        "chunked.http",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"cod\r\n11\r\ne\":\"50102\",\"x\":1}\r\n0\r\n\r\n",
    );
    for (venue, req, path) in [
        ("okx", "order", &not_http),
        ("okx", "order", &short),
        ("okx", "order", &head_only),
        ("okx", "nope", &html_order),
        ("kraken", "order", &html_order),
        (
            "okx",
            "order",
            &tmp.join("missing.http").display().to_string(),
        ),
    ] {
        let (r, out, _) = classify_cli(venue, req, "1", path);
        assert!(r.is_err(), "{venue} {req} {path}: {out}");
        assert_eq!(out, "");
    }
    let (r, _, _) = run(&[
        "classify",
        "--venue",
        "okx",
        "--request",
        "order",
        &html_order,
    ]);
    assert!(r.unwrap_err().contains("--now-utc-ms is required"));
    let (r, _, _) = run(&["frobnicate"]);
    assert!(r.is_err());
    // A body that is not the venue's JSON is a verdict: Unknown for an order.
    let (r, out, _) = classify_cli("okx", "order", "1", &html_order);
    assert_eq!((r, out.as_str()), (Ok(()), "Unknown\n"));
    // Chunked bodies are de-chunked.
    let (r, out, _) = classify_cli("okx", "order", "1", &chunked);
    assert_eq!((r, out.as_str()), (Ok(()), "ClockSkew\n"));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn the_program_prints_every_shipped_fixture() {
    let (r, out, _) = run(&[]);
    assert_eq!(r, Ok(()));
    assert_eq!(
        out.lines().filter(|l| !l.starts_with("  item ")).count(),
        TABLE.len()
    );
    assert!(out.contains("binance-spot/ban_418 [order]: Banned bucket=ip until_ms=300000\n"));
    assert!(out.contains("okx/batch_partial [batch:2]: Done\n"));
}

/// A batch answer keeps its items: one verdict per order, in the request's order,
/// after the batch's own line, which is Done once the venue processed the batch
/// and some order ran (issue 13).
#[test]
fn batches_keep_their_items() {
    for (venue, case, batch, items) in [
        (
            "bybit",
            "batch_ok",
            "Done",
            &["item 0 Done", "item 1 Done"][..],
        ),
        (
            "bybit",
            "batch_mixed",
            "Done",
            &["item 0 Done", "item 1 Rejected"],
        ),
        (
            "okx",
            "batch_partial",
            "Done",
            &["item 0 Done", "item 1 Rejected"],
        ),
        (
            "okx",
            "batch_sub_account_50061",
            "Throttled bucket=sub-account until_ms=2000",
            &[
                "item 0 Throttled bucket=sub-account until_ms=2000",
                "item 1 Throttled bucket=sub-account until_ms=2000",
            ],
        ),
        (
            "hyperliquid",
            "batch_mixed",
            "Done",
            &["item 0 Done", "item 1 Rejected"],
        ),
        (
            "kraken-spot",
            "batch_mixed",
            "Done",
            &["item 0 Done", "item 1 Rejected"],
        ),
        (
            "kraken-spot",
            "batch_warning",
            "Done",
            &["item 0 Done", "item 1 Done"],
        ),
        // A cancel-replace's parts (issue 39): the new order, then the cancel.
        // STOP_ON_FAILURE, the cancel refused (-2011): the new order not attempted.
        (
            "binance-spot",
            "cancel_replace_failed_2022",
            "Done",
            &["item 0 NotRun", "item 1 Rejected"],
        ),
        // The cancel ran; the new order refused (-2010).
        (
            "binance-spot",
            "cancel_replace_partial_2021",
            "Done",
            &["item 0 Rejected", "item 1 Done"],
        ),
        (
            "kraken-futures",
            "batch_mixed",
            "Done",
            &["item 0 Done", "item 1 Rejected"],
        ),
    ] {
        let d = classify(venue, "batch:2", FIXTURE_NOW_UTC_MS, &fixture(venue, case)).unwrap();
        assert_eq!(d.line, batch, "{venue}/{case}");
        assert_eq!(d.item_lines, items, "{venue}/{case}");
        assert_eq!(d.items.len(), 2);
        let mut want = format!("{batch}\n");
        items.iter().for_each(|i| want.push_str(&format!("{i}\n")));
        let path = classify::fixtures()
            .join(venue)
            .join(format!("{case}.http"));
        let (r, out, _) = classify_cli(
            venue,
            "batch:2",
            &FIXTURE_NOW_UTC_MS.to_string(),
            path.to_str().unwrap(),
        );
        assert_eq!(
            (r, out),
            (Ok(()), want),
            "{venue}/{case} on the command line"
        );
    }
    // A single order has no items.
    let d = classify(
        "okx",
        "order",
        FIXTURE_NOW_UTC_MS,
        &fixture("okx", "rejected_51008"),
    )
    .unwrap();
    assert!(d.items.is_empty() && d.item_lines.is_empty());
}

/// An order counted 5 s into a 10 s window (`transactTime`) whose answer is read
/// 2 s into the next: its `X-MBX-ORDER-COUNT-10S` is the window it was counted
/// in, so the next window starts empty. Without the stamp, a figure read then
/// can only be taken as the next window's.
#[test]
fn a_late_spot_order_count_is_booked_in_the_window_of_its_transact_time() {
    let answer = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
             X-MBX-ORDER-COUNT-10S: 7\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let stamped = answer(&format!(
        r#"{{"symbol":"BTCUSDT","orderId":28,"transactTime":{}}}"#,
        FIXTURE_NOW_UTC_MS + 5_000
    ));
    let unstamped = answer(r#"{"symbol":"BTCUSDT","orderId":28}"#);
    let read_at = NOW_NS + 12 * SEC;
    let mut used = Vec::new();
    for text in [stamped, unstamped] {
        let (mut spot, mut budget) = spot(NOW_NS);
        let orders = budget.bucket("ORDERS_10S").unwrap();
        let file = HttpFile::parse(text.as_bytes()).unwrap();
        let verdict = file
            .with_response(|r| spot.on_response(Request::Order, r, &mut budget, read_at))
            .unwrap();
        assert_eq!(verdict, Verdict::Done);
        budget.tick(read_at);
        used.push(budget.stats(orders).unwrap().used);
    }
    assert_eq!(used, [0, 7], "stamped, then unstamped");
}
