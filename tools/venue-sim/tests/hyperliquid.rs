//! The `hyperliquid` profile: signatures checked by recovering the signer, the
//! nonce rules, `expiresAfter`, the IP windows, the address budget (with its
//! cancel allowance, exhausted rate, volume and purchases), batch weights,
//! `scheduleCancel`, and the info answers ergon's adapter reads.
//!
//! Requests are signed by ergon's own signer (`ergon_venues::hyperliquid::sign`,
//! checked against the official SDKs' vectors); the emulator recovers signers
//! with its own code (rmp-serde, k256).

mod common;

use std::time::Duration;

use common::{until, Client, Resp};
use ergon_venue_sim::{Config, Server, HYPERLIQUID_TEST_ADDRESS, HYPERLIQUID_TEST_KEY};
use ergon_venues::hyperliquid::sign::{address_hex, Network, Wallet};
use serde_json::Value;

const OTHER_KEY: &str = "0xe908f86dbb4d55ac876378565aafeabc187f6690f046459397b17d9b9a19688e";

fn wallet(key: &str) -> Wallet {
    Wallet::from_key_text(key.as_bytes(), Network::Mainnet).unwrap()
}

fn post(c: &mut Client, path: &str, body: &str) -> Resp {
    c.send_with("POST", path, &[("Content-Type", "application/json")], body)
        .expect("answer")
}

/// An exchange body: `action` signed by `w` with `nonce` (and `expiresAfter`).
fn signed(
    w: &mut Wallet,
    action: &str,
    nonce: u64,
    expires: Option<u64>,
    vault: Option<&str>,
) -> String {
    let sig = w.sign_json(action.as_bytes(), nonce, expires).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut body = format!(
        r#"{{"action":{action},"nonce":{nonce},"signature":{{"r":"0x{}","s":"0x{}","v":{}}}"#,
        hex(&sig.r),
        hex(&sig.s),
        sig.v
    );
    if let Some(v) = vault {
        body.push_str(&format!(r#","vaultAddress":"{v}""#));
    }
    if let Some(e) = expires {
        body.push_str(&format!(r#","expiresAfter":{e}"#));
    }
    body.push('}');
    body
}

fn order(cloid: &str, px: &str, tif: &str) -> String {
    format!(
        r#"{{"type":"order","orders":[{{"a":0,"b":true,"p":"{px}","s":"0.5","r":false,"t":{{"limit":{{"tif":"{tif}"}}}},"c":"{cloid}"}}],"grouping":"na"}}"#
    )
}

fn cloid(n: u64) -> String {
    format!("0x{n:032x}")
}

struct Session {
    s: Server,
    c: Client,
    w: Wallet,
    nonce: u64,
}

impl Session {
    fn new(cfg: Config) -> Self {
        let s = Server::start(cfg).unwrap();
        let c = Client::connect(s.addr());
        let nonce = s.clock().now_ms() as u64;
        Session {
            s,
            c,
            w: wallet(HYPERLIQUID_TEST_KEY),
            nonce,
        }
    }

    fn exchange(&mut self, action: &str) -> Value {
        self.nonce = self.nonce.max(self.s.clock().now_ms() as u64) + 1;
        let body = signed(&mut self.w, action, self.nonce, None, None);
        let r = post(&mut self.c, "/exchange", &body);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    fn info(&mut self, body: &str) -> Resp {
        post(&mut self.c, "/info", body)
    }
}

fn user(kind: &str) -> String {
    format!(r#"{{"type":"{kind}","user":"{HYPERLIQUID_TEST_ADDRESS}"}}"#)
}

#[test]
fn the_default_key_is_the_default_account() {
    assert_eq!(
        address_hex(&wallet(HYPERLIQUID_TEST_KEY).signer_address()).as_str(),
        HYPERLIQUID_TEST_ADDRESS
    );
}

#[test]
fn an_order_rests_is_found_and_is_cancelled_by_cloid() {
    let mut t = Session::new(Config::hyperliquid());
    let v = t.exchange(&order(&cloid(1), "49000", "Gtc"));
    assert_eq!(v["status"], "ok", "{v}");
    let oid = v["response"]["data"]["statuses"][0]["resting"]["oid"]
        .as_u64()
        .unwrap();
    let r = t.info(&format!(
        r#"{{"type":"orderStatus","user":"{HYPERLIQUID_TEST_ADDRESS}","oid":"{}"}}"#,
        cloid(1)
    ));
    assert_eq!(r.json()["order"]["status"], "open", "{}", r.body);
    assert_eq!(r.json()["order"]["order"]["oid"], oid);
    let open = t.info(&user("openOrders")).json();
    assert_eq!(open.as_array().unwrap().len(), 1);
    let v = t.exchange(&format!(
        r#"{{"type":"cancelByCloid","cancels":[{{"asset":0,"cloid":"{}"}}]}}"#,
        cloid(1)
    ));
    assert_eq!(v["response"]["data"]["statuses"][0], "success", "{v}");
    let v = t.exchange(&format!(
        r#"{{"type":"cancel","cancels":[{{"a":0,"o":{oid}}}]}}"#
    ));
    assert!(
        v["response"]["data"]["statuses"][0]["error"].is_string(),
        "{v}"
    );
    let r = t.info(&format!(
        r#"{{"type":"orderStatus","user":"{HYPERLIQUID_TEST_ADDRESS}","oid":{oid}}}"#
    ));
    assert_eq!(r.json()["order"]["status"], "canceled");
    let r = t.info(&format!(
        r#"{{"type":"orderStatus","user":"{HYPERLIQUID_TEST_ADDRESS}","oid":{}}}"#,
        oid + 100
    ));
    assert_eq!(r.json()["status"], "unknownOid");
}

#[test]
fn another_key_a_tampered_body_and_an_unknown_agent_are_refused() {
    let mut t = Session::new(Config::hyperliquid());
    let now = t.s.clock().now_ms() as u64;
    let mut other = wallet(OTHER_KEY);
    let other_addr = address_hex(&other.signer_address());
    let body = signed(
        &mut other,
        &order(&cloid(2), "49000", "Gtc"),
        now,
        None,
        None,
    );
    let r = post(&mut t.c, "/exchange", &body);
    assert_eq!(r.json()["status"], "err");
    assert_eq!(
        r.json()["response"],
        format!("User or API Wallet {} does not exist.", other_addr.as_str())
    );
    // Signed for one price, sent with another: another address recovers.
    let body = signed(
        &mut t.w,
        &order(&cloid(3), "49000", "Gtc"),
        now + 1,
        None,
        None,
    )
    .replace("\"49000\"", "\"1\"");
    let r = post(&mut t.c, "/exchange", &body);
    assert!(r.json()["response"]
        .as_str()
        .unwrap()
        .contains("does not exist"));
    // The testnet signature of the same action is not a mainnet one.
    let mut testnet =
        Wallet::from_key_text(HYPERLIQUID_TEST_KEY.as_bytes(), Network::Testnet).unwrap();
    let body = signed(
        &mut testnet,
        &order(&cloid(4), "49000", "Gtc"),
        now + 2,
        None,
        None,
    );
    let r = post(&mut t.c, "/exchange", &body);
    assert!(r.json()["response"]
        .as_str()
        .unwrap()
        .contains("does not exist"));
    let report = t.s.stop();
    assert_eq!(report.signature_rejects, 3);
    assert_eq!(report.executions, 0);
}

#[test]
fn a_registered_agent_trades_for_its_account_and_a_vault_for_its_own() {
    let agent = wallet(OTHER_KEY);
    let agent_addr = address_hex(&agent.signer_address()).to_string();
    let vault = "0x1719884eb866cb12b2287399b15f7db5e7d775ea";
    let mut cfg = Config::hyperliquid();
    cfg.accounts.push(ergon_venue_sim::Account {
        ed25519_public_key: None,
        api_key: vault.to_string(),
        secret: String::new(),
    });
    cfg.hyperliquid.agents = vec![(agent_addr, 0), (HYPERLIQUID_TEST_ADDRESS.to_string(), 1)];
    let mut t = Session::new(cfg);
    let now = t.s.clock().now_ms() as u64;
    let mut agent = agent;
    let r = post(
        &mut t.c,
        "/exchange",
        &signed(
            &mut agent,
            &order(&cloid(5), "49000", "Gtc"),
            now,
            None,
            None,
        ),
    );
    assert!(
        r.json()["response"]["data"]["statuses"][0]["resting"].is_object(),
        "{}",
        r.body
    );
    // The master trades for the vault; the vault's order is the vault's.
    let mut master = wallet(HYPERLIQUID_TEST_KEY).for_vault(vault).unwrap();
    let body = signed(
        &mut master,
        &order(&cloid(6), "49000", "Gtc"),
        now,
        None,
        Some(vault),
    );
    let r = post(&mut t.c, "/exchange", &body);
    assert!(
        r.json()["response"]["data"]["statuses"][0]["resting"].is_object(),
        "{}",
        r.body
    );
    let accounts: Vec<usize> = t.s.orders().iter().map(|o| o.account).collect();
    assert_eq!(accounts, vec![0, 1]);
    // The agent has no say over the vault.
    let mut agent = agent.for_vault(vault).unwrap();
    let body = signed(
        &mut agent,
        &order(&cloid(7), "49000", "Gtc"),
        now + 1,
        None,
        Some(vault),
    );
    let r = post(&mut t.c, "/exchange", &body);
    assert!(
        r.json()["response"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{}",
        r.body
    );
}

#[test]
fn nonces_are_unique_windowed_and_above_the_kept_hundred_and_expiry_refuses() {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.nonces_kept = 3;
    let mut t = Session::new(cfg);
    let now = t.s.clock().now_ms() as u64;
    let noop = r#"{"type":"noop"}"#;
    let send = |t: &mut Session, nonce: u64, expires: Option<u64>| {
        let body = signed(&mut t.w, noop, nonce, expires, None);
        post(&mut t.c, "/exchange", &body).json()
    };
    assert_eq!(send(&mut t, now + 10, None)["status"], "ok");
    let v = send(&mut t, now + 10, None);
    assert_eq!(
        v["response"],
        format!("Invalid nonce: duplicate nonce {}", now + 10)
    );
    // Out of order is fine while fewer than the kept count are held.
    assert_eq!(send(&mut t, now + 5, None)["status"], "ok");
    assert_eq!(send(&mut t, now + 20, None)["status"], "ok");
    // Three kept (5, 10, 20): a nonce under the least is refused; above it passes.
    let v = send(&mut t, now + 4, None);
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .contains("lower than the lowest"),
        "{v}"
    );
    assert_eq!(send(&mut t, now + 7, None)["status"], "ok");
    // The window: T - 2 days .. T + 1 day.
    let v = send(&mut t, now - 2 * 86_400_000 - 1000, None);
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .contains("outside the window"),
        "{v}"
    );
    let v = send(&mut t, now + 86_400_000 + 1000, None);
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .contains("outside the window"),
        "{v}"
    );
    // expiresAfter in the past refuses, and the hash covers it: moving it on the
    // wire recovers another signer.
    let v = send(&mut t, now + 30, Some(now - 1));
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .starts_with("Action expired"),
        "{v}"
    );
    let body = signed(&mut t.w, noop, now + 31, Some(now + 60_000), None).replace(
        &format!("{}}}", now + 60_000),
        &format!("{}}}", now + 60_001),
    );
    let v = post(&mut t.c, "/exchange", &body).json();
    assert!(
        v["response"].as_str().unwrap().contains("does not exist"),
        "{v}"
    );
    assert_eq!(send(&mut t, now + 32, Some(now + 60_000))["status"], "ok");
}

#[test]
fn the_short_window_throttles_a_burst_well_under_the_minute() {
    let mut t = Session::new(Config::hyperliquid());
    // l2Book weighs 2 and userRateLimit 20: 200 weight in 2 s is the default
    // short window; the 11th request of 20 goes over it.
    for i in 0..10 {
        let r = t.info(&user("userRateLimit"));
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
    }
    assert_eq!(t.info(&user("userRateLimit")).status, 429);
    t.s.advance_clock(2_001);
    let ok = t.info(r#"{"type":"l2Book","coin":"BTC"}"#);
    assert_eq!(ok.json()["levels"][0].as_array().unwrap().len(), 20);
    let report = t.s.stop();
    assert_eq!(report.throttled, 1);
}

#[test]
fn the_address_budget_counts_items_allows_cancels_further_then_one_per_ten_seconds() {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.initial_requests = 4;
    let mut t = Session::new(cfg);
    // A batch of three orders counts three.
    let batch = format!(
        r#"{{"type":"order","orders":[{}],"grouping":"na"}}"#,
        (10..13)
            .map(|n| format!(
                r#"{{"a":0,"b":true,"p":"49000","s":"0.5","r":false,"t":{{"limit":{{"tif":"Gtc"}}}},"c":"{}"}}"#,
                cloid(n)
            ))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(t.exchange(&batch)["status"], "ok");
    assert_eq!(
        t.exchange(&order(&cloid(13), "49000", "Gtc"))["status"],
        "ok"
    );
    let v = t.exchange(&order(&cloid(14), "49000", "Gtc"));
    // The exhausted rate: one request per 10 s; this one is it.
    assert_eq!(v["status"], "ok", "{v}");
    let v = t.exchange(&order(&cloid(15), "49000", "Gtc"));
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .starts_with("Too many cumulative requests"),
        "{v}"
    );
    // Cancels go on to min(cap + 100000, 2 cap) = 8.
    for n in [10, 11, 12] {
        let v = t.exchange(&format!(
            r#"{{"type":"cancelByCloid","cancels":[{{"asset":0,"cloid":"{}"}}]}}"#,
            cloid(n)
        ));
        assert_eq!(v["response"]["data"]["statuses"][0], "success", "{v}");
    }
    let v = t.exchange(&format!(
        r#"{{"type":"cancelByCloid","cancels":[{{"asset":0,"cloid":"{}"}}]}}"#,
        cloid(13)
    ));
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .starts_with("Too many cumulative"),
        "{v}"
    );
    t.s.advance_clock(10_000);
    assert_eq!(t.exchange(r#"{"type":"noop"}"#)["status"], "ok");
    // userRateLimit says it, in the shape ergon's adapter reads.
    let r = t.info(&user("userRateLimit"));
    let reading = ergon_venues::hyperliquid::Reading::parse(r.body.as_bytes(), 0).unwrap();
    assert_eq!(
        (reading.used, reading.cap, reading.surplus),
        (9, 4, 0),
        "{}",
        r.body
    );
    // Buying requests opens the budget again.
    assert_eq!(
        t.exchange(r#"{"type":"reserveRequestWeight","weight":10}"#)["status"],
        "ok"
    );
    assert_eq!(
        t.exchange(&order(&cloid(16), "49000", "Gtc"))["status"],
        "ok"
    );
    // Volume too: an IOC fills at once, 0.5 × 50000 = 25000 USDC.
    let v = t.exchange(&order(&cloid(17), "50000", "Ioc"));
    assert_eq!(
        v["response"]["data"]["statuses"][0]["filled"]["totalSz"], "0.5",
        "{v}"
    );
    let r = t.info(&user("userRateLimit")).json();
    assert_eq!(r["nRequestsCap"], 4 + 25_000);
    assert_eq!(r["cumVlm"], "25000.00000000");
    let report = t.s.stop();
    assert_eq!(report.duplicates, 0);
}

#[test]
fn schedule_cancel_needs_five_seconds_fires_and_empties_the_book_ten_times_a_day() {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.switch_fires_per_day = 2;
    let mut t = Session::new(cfg);
    for n in 0..3 {
        assert_eq!(
            t.exchange(&order(&cloid(20 + n), "49000", "Gtc"))["status"],
            "ok"
        );
    }
    let now = t.s.clock().now_ms();
    let v = t.exchange(&format!(
        r#"{{"type":"scheduleCancel","time":{}}}"#,
        now + 4_000
    ));
    assert!(
        v["response"]
            .as_str()
            .unwrap()
            .contains("at least 5 seconds"),
        "{v}"
    );
    let v = t.exchange(&format!(
        r#"{{"type":"scheduleCancel","time":{}}}"#,
        now + 60_000
    ));
    assert_eq!(
        v,
        serde_json::json!({"status":"ok","response":{"type":"default"}})
    );
    assert_eq!(t.s.switches().len(), 1);
    // Disarmed: it never fires.
    assert_eq!(t.exchange(r#"{"type":"scheduleCancel"}"#)["status"], "ok");
    assert!(t.s.switches().is_empty());
    // 100 ms over the least lead: the venue's clock moves on between reading
    // it here and the request's arrival (exactly 5 s drew a rare "too early").
    let fire = |t: &mut Session| {
        let now = t.s.clock().now_ms();
        let v = t.exchange(&format!(
            r#"{{"type":"scheduleCancel","time":{}}}"#,
            now + 5_100
        ));
        assert_eq!(v["status"], "ok", "{v}");
        t.s.advance_clock(5_101);
        until(Duration::from_secs(10), || {
            t.s.switches().is_empty().then_some(())
        })
        .expect("the switch fired");
    };
    fire(&mut t);
    assert!(
        t.s.orders().iter().all(|o| o.status != "NEW"),
        "{:?}",
        t.s.orders()
    );
    fire(&mut t);
    // Two triggers today (the configured count): a third arm is refused.
    let now = t.s.clock().now_ms();
    let v = t.exchange(&format!(
        r#"{{"type":"scheduleCancel","time":{}}}"#,
        now + 5_100
    ));
    assert!(
        v["response"].as_str().unwrap().starts_with("Too many"),
        "{v}"
    );
    assert_eq!(t.s.stop().switch_fires, 2);
}

#[test]
fn unreadable_bodies_are_422_and_limits_still_count() {
    let mut t = Session::new(Config::hyperliquid());
    for body in [
        "{",
        "[]",
        r#"{"type":"nope"}"#,
        r#"{"action":{"type":"order"},"nonce":1}"#,
    ] {
        let path = if body.contains("action") {
            "/exchange"
        } else {
            "/info"
        };
        let r = post(&mut t.c, path, body);
        assert_eq!(r.status, 422, "{body}: {}", r.body);
    }
    let r = t.info(r#"{"type":"meta"}"#);
    assert_eq!(r.json()["universe"][0]["name"], "BTC");
    assert_eq!(t.info(r#"{"type":"allMids"}"#).json()["BTC"], "50000");
}

#[test]
fn a_batch_weighs_one_plus_n_over_forty_on_the_ip_and_n_on_the_address() {
    let mut t = Session::new(Config::hyperliquid());
    let orders: Vec<String> = (100..180)
        .map(|n| {
            format!(
                r#"{{"a":0,"b":false,"p":"51000","s":"0.01","r":false,"t":{{"limit":{{"tif":"Alo"}}}},"c":"{}"}}"#,
                cloid(n)
            )
        })
        .collect();
    let batch = format!(
        r#"{{"type":"order","orders":[{}],"grouping":"na"}}"#,
        orders.join(",")
    );
    let v = t.exchange(&batch);
    let statuses = v["response"]["data"]["statuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 80);
    assert!(statuses.iter().all(|s| s["resting"]["oid"].is_u64()), "{v}");
    let r = t.info(&user("userRateLimit")).json();
    assert_eq!(r["nRequestsUsed"], 80);
    let report = t.s.stop();
    // 3 for the batch, then 20 for userRateLimit, in the same short window.
    assert!(
        report.limits.iter().all(|l| l.peak == 23),
        "{:?}",
        report.limits
    );
    assert_eq!(report.executions, 80);
}

#[test]
fn the_open_order_cap_refuses_the_order_past_it() {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.open_order_cap = 2;
    let mut t = Session::new(cfg);
    for n in 0..2 {
        assert!(
            t.exchange(&order(&cloid(200 + n), "49000", "Gtc"))["response"]["data"]["statuses"][0]
                ["resting"]
                .is_object()
        );
    }
    let v = t.exchange(&order(&cloid(202), "49000", "Gtc"));
    assert!(
        v["response"]["data"]["statuses"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Too many open orders"),
        "{v}"
    );
    // A duplicate cloid is an error of its own, and never a second execution.
    let v = t.exchange(&order(&cloid(200), "49000", "Ioc"));
    assert_eq!(
        v["response"]["data"]["statuses"][0]["error"], "Duplicate cloid.",
        "{v}"
    );
    let report = t.s.stop();
    assert_eq!(
        (
            report.executions,
            report.duplicates,
            report.duplicate_rejects
        ),
        (2, 0, 1)
    );
}

/// `reserveRequestWeight` costs 0.0005 USDC a request, paid from the account's
/// value, and is refused whole when the account cannot pay
/// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#reserve-additional-actions>).
#[test]
fn reserve_request_weight_costs_five_ten_thousandths_of_a_usdc_a_request() {
    let mut cfg = Config::hyperliquid();
    cfg.hyperliquid.account_value_usdc = 1;
    let mut t = Session::new(cfg);
    let v = t.exchange(r#"{"type":"reserveRequestWeight","weight":1500}"#);
    assert_eq!(v["status"], "ok", "{v}");
    // 1500 × 0.0005 = 0.75 USDC of the 1: 500 more would be 1.00, 501 is over.
    let v = t.exchange(r#"{"type":"reserveRequestWeight","weight":501}"#);
    assert_eq!(v["status"], "err", "{v}");
    let v = t.exchange(r#"{"type":"reserveRequestWeight","weight":500}"#);
    assert_eq!(v["status"], "ok", "{v}");
    let r = t.info(&user("userRateLimit")).json();
    assert_eq!(r["nRequestsSurplus"], 2_000, "{r}");
    let report = t.s.stop();
    assert_eq!(
        (report.reserved_requests, report.reserve_paid_e8),
        (2_000, 100_000_000)
    );
}

/// The report counts an order whose `cloid` the venue admitted before (a client
/// sending again what the venue took); a refused request is not admitted.
#[test]
fn an_order_admitted_twice_by_cloid_is_counted_resubmitted() {
    let mut t = Session::new(Config::hyperliquid());
    t.exchange(&order(&cloid(1), "49000", "Gtc"));
    t.exchange(&order(&cloid(2), "49000", "Gtc"));
    assert_eq!(t.s.report().resubmitted, 0);
    let v = t.exchange(&order(&cloid(1), "49000", "Gtc"));
    assert_eq!(
        v["response"]["data"]["statuses"][0]["error"], "Duplicate cloid.",
        "{v}"
    );
    assert_eq!(t.s.stop().resubmitted, 1);
}
