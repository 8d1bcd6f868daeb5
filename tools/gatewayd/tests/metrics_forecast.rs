//! `/metrics`' address-budget forecast against a figure computed by hand.
//!
//! The emulator (the venue's rules from its docs: 10,000 requests plus one per
//! USDC traded, each order or cancel of a batch one request) counts what a
//! client of the test sends; the gateway's Hyperliquid account reads two of the
//! emulator's `userRateLimit` answers half an hour apart on its clock (jumped,
//! the emulator's too) and `/metrics` renders what it forecasts. Nothing of
//! ergon's computes the expected figure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ergon_core::Budget;
use ergon_gateway::observe::OpsSnapshot;
use ergon_gateway::Account;
use ergon_gatewayd::metrics::{render, View};
use ergon_venue_sim::{Config, Server, HYPERLIQUID_TEST_ADDRESS, HYPERLIQUID_TEST_KEY};
use ergon_venues::adapt::{Clock, Request, Venue};
use ergon_venues::hyperliquid::sign::{Network, Wallet};
use ergon_venues::hyperliquid::{self, Exchange, Hyperliquid};
use ergon_venues::response::Response;

const SEC: i64 = 1_000_000_000;

/// One POST over its own connection; the answer's status and body.
fn post(s: &Server, path: &str, body: &str) -> (u16, String) {
    let mut c = TcpStream::connect(s.addr()).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut text = String::new();
    c.read_to_string(&mut text).expect("read");
    let status = text[9..12].parse().expect("status");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// A client of the venue other than the gateway: the account's key signs.
struct Trader<'a> {
    s: &'a Server,
    w: Wallet,
    nonce: u64,
}

impl Trader<'_> {
    fn exchange(&mut self, action: &str) -> String {
        self.nonce = self.nonce.max(self.s.clock().now_ms() as u64) + 1;
        let sig = self
            .w
            .sign_json(action.as_bytes(), self.nonce, None)
            .expect("sign");
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let body = format!(
            r#"{{"action":{action},"nonce":{},"signature":{{"r":"0x{}","s":"0x{}","v":{}}}}}"#,
            self.nonce,
            hex(&sig.r),
            hex(&sig.s),
            sig.v
        );
        let (status, answer) = post(self.s, "/exchange", &body);
        assert_eq!(status, 200, "{answer}");
        assert!(answer.contains(r#""status":"ok""#), "{answer}");
        answer
    }

    /// A `cancelByCloid` of 1,000 orders that are not there: 1,000 requests
    /// of the address (IP weight 1 + 1000 / 40 = 26).
    fn thousand_cancels(&mut self, batch: u64) {
        let cancels: Vec<String> = (0..1_000)
            .map(|i| format!(r#"{{"asset":0,"cloid":"0x{:032x}"}}"#, batch * 1_000 + i))
            .collect();
        self.exchange(&format!(
            r#"{{"type":"cancelByCloid","cancels":[{}]}}"#,
            cancels.join(",")
        ));
    }
}

/// The gateway's account reads the emulator's `userRateLimit` at `now`.
fn read(ex: &mut Exchange<Wallet>, budget: &mut Budget, s: &Server, now: i64) {
    let (status, body) = post(
        s,
        "/info",
        &format!(r#"{{"type":"userRateLimit","user":"{HYPERLIQUID_TEST_ADDRESS}"}}"#),
    );
    let r = Response {
        status,
        headers: &[],
        body: body.as_bytes(),
    };
    ex.on_response(Request::Info("userRateLimit"), &r, budget, now)
        .expect("read");
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("ergon_{name} ")))
        .map(|v| v.trim().parse().expect("a number"))
}

#[test]
fn the_forecast_in_metrics_is_the_hand_computed_figure() {
    let mut cfg = Config::hyperliquid();
    // Cap 10,000 + 2,000 USDC traded: 12,000.
    cfg.hyperliquid.initial_volume_usdc = 2_000;
    let s = Server::start(cfg).expect("emulator");
    let mut t = Trader {
        s: &s,
        w: Wallet::from_key_text(HYPERLIQUID_TEST_KEY.as_bytes(), Network::Mainnet).expect("key"),
        nonce: 0,
    };
    let mut b = Budget::builder();
    let clock = Clock::anchor(0, s.clock().now_ms());
    let venue = Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).expect("venue");
    let wallet =
        Wallet::from_key_text(HYPERLIQUID_TEST_KEY.as_bytes(), Network::Mainnet).expect("key");
    let mut ex = Exchange::new(venue, wallet, &[("BTC", 0)], 5_000).expect("exchange");
    let mut budget = b.build(0).expect("budget");

    // Reading A: 2,000 used of 12,000: 10,000 left.
    t.thousand_cancels(0);
    t.thousand_cancels(1);
    read(&mut ex, &mut budget, &s, 0);
    let a = ex.address_budget().expect("one reading");
    assert_eq!(
        (a.used, a.cap, a.surplus, a.forecast_hours),
        (2_000, 12_000, 0, None)
    );

    // Half an hour on: 3,000 more cancels and one IOC buy of 0.02 at 50,000
    // (one request, 1,000 USDC traded: the cap grows by 1,000).
    s.advance_clock(1_800_000);
    for batch in 2..5 {
        t.thousand_cancels(batch);
    }
    let fill = t.exchange(
        r#"{"type":"order","orders":[{"a":0,"b":true,"p":"50000","s":"0.02","r":false,"t":{"limit":{"tif":"Ioc"}},"c":"0x000000000000000000000000000000ff"}],"grouping":"na"}"#,
    );
    assert!(fill.contains("filled"), "{fill}");
    read(&mut ex, &mut budget, &s, 1_800 * SEC);

    // Reading B: used 5,001, cap 13,000: 7,999 left. The budget lost
    // 10,000 - 7,999 = 2,001 requests in half an hour, 4,002 an hour:
    // 7,999 / 4,002 hours left.
    let expected = 7_999.0 / 4_002.0;
    let ops = OpsSnapshot {
        now_ns: 1_800 * SEC,
        address: ex.address_budget(),
        ..OpsSnapshot::default()
    };
    let text = render(&View {
        ops: Some(&ops),
        ..View::default()
    });
    assert_eq!(
        metric(&text, "address_requests_used"),
        Some(5_001.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "address_requests_cap"),
        Some(13_000.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "address_requests_surplus"),
        Some(0.0),
        "{text}"
    );
    let hours = metric(&text, "address_budget_forecast_hours").expect("the forecast");
    assert!(
        (hours - expected).abs() < 1e-9,
        "{hours} h, not {expected} h"
    );
    assert!((hours - 1.9988).abs() < 1e-4, "about 2 h: {hours}");
    assert_eq!(s.stop().throttled, 0);
}
