//! The deribit profile: JSON-RPC over HTTP with bearer tokens from `public/auth`,
//! orders by label, credit pools (matching-engine requests dearer, from their own
//! pool) answered `too_many_requests` 10028 when empty, and the per-IP limit on
//! open connections answered HTTP 429.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Resp};
use ergon_venue_sim::{Config, Credits, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET};
use serde_json::{json, Value};

/// A JSON-RPC call over `POST /api/v2`.
fn rpc(c: &mut Client, token: Option<&str>, id: u64, method: &str, params: Value) -> Resp {
    let body =
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    c.send_with("POST", "/api/v2", &headers, &body)
        .expect("answer")
}

fn login(c: &mut Client) -> String {
    let r = rpc(
        c,
        None,
        1,
        "public/auth",
        json!({ "grant_type": "client_credentials", "client_id": DEFAULT_API_KEY, "client_secret": DEFAULT_API_SECRET }),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["result"]["token_type"], "bearer");
    v["result"]["access_token"].as_str().unwrap().to_string()
}

fn buy(label: &str) -> Value {
    json!({ "instrument_name": "BTC-PERPETUAL", "amount": 10, "type": "limit", "price": 49000, "label": label })
}

fn error_code(r: &Resp) -> i64 {
    r.json()["error"]["code"].as_i64().unwrap_or(0)
}

#[test]
fn orders_by_label_over_json_rpc_with_a_bearer_token() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.get("/api/v2/public/get_order_book?instrument_name=BTC-PERPETUAL&depth=3");
    assert_eq!(r.status, 200, "{}", r.body);
    let b = r.json();
    assert_eq!(b["jsonrpc"], "2.0");
    assert_eq!(b["result"]["bids"].as_array().unwrap().len(), 3);
    assert_eq!(b["result"]["best_ask_price"], 50000.01);
    assert!(b["usIn"].is_i64());

    let r = rpc(&mut c, None, 2, "private/buy", buy("q1"));
    assert_eq!((r.status, error_code(&r)), (400, 13009), "no token");
    let bad = rpc(
        &mut c,
        None,
        3,
        "public/auth",
        json!({ "grant_type": "client_credentials", "client_id": DEFAULT_API_KEY, "client_secret": "nope" }),
    );
    assert_eq!(error_code(&bad), 13004);
    let t = login(&mut c);

    let r = rpc(&mut c, Some(&t), 7, "private/buy", buy("q1"));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["id"], 7, "the id is echoed");
    let o = &v["result"]["order"];
    assert_eq!(
        (
            o["label"].as_str(),
            o["order_state"].as_str(),
            o["direction"].as_str()
        ),
        (Some("q1"), Some("open"), Some("buy"))
    );
    let order_id = o["order_id"].as_str().unwrap().to_string();

    let r = rpc(
        &mut c,
        Some(&t),
        8,
        "private/get_order_state_by_label",
        json!({ "currency": "BTC", "label": "q1" }),
    );
    assert_eq!(r.json()["result"][0]["order_id"], order_id.as_str());
    let r = rpc(
        &mut c,
        Some(&t),
        9,
        "private/edit",
        json!({ "order_id": order_id, "amount": 20, "price": 48000 }),
    );
    assert_eq!(r.json()["result"]["order"]["price"], 48000.0, "{}", r.body);
    let r = rpc(
        &mut c,
        Some(&t),
        10,
        "private/get_open_orders_by_instrument",
        json!({ "instrument_name": "BTC-PERPETUAL" }),
    );
    assert_eq!(r.json()["result"].as_array().unwrap().len(), 1);
    let r = rpc(
        &mut c,
        Some(&t),
        11,
        "private/cancel",
        json!({ "order_id": order_id }),
    );
    assert_eq!(r.json()["result"]["order_state"], "cancelled", "{}", r.body);
    let r = rpc(
        &mut c,
        Some(&t),
        12,
        "private/cancel",
        json!({ "order_id": order_id }),
    );
    assert_eq!(error_code(&r), 11044, "not open any more");
    let r = rpc(
        &mut c,
        Some(&t),
        13,
        "private/cancel",
        json!({ "order_id": "999999" }),
    );
    assert_eq!(error_code(&r), 10004);
    let r = rpc(&mut c, Some(&t), 14, "private/teleport", json!({}));
    assert_eq!(error_code(&r), -32601);
    let r = rpc(
        &mut c,
        Some(&t),
        15,
        "private/buy",
        json!({ "instrument_name": "BTC-PERPETUAL", "price": 1 }),
    );
    assert_eq!(error_code(&r), -32602, "amount missing");
    // Labels need not be unique: the second executes, and the report says so.
    let r = rpc(&mut c, Some(&t), 16, "private/buy", buy("q1"));
    assert_eq!(r.status, 200);
    let rep = s.stop();
    assert_eq!(
        (rep.executions, rep.duplicates, rep.cancels, rep.modifies),
        (2, 1, 1, 1)
    );
    assert_eq!(rep.credits.len(), 2);
    assert_eq!(
        (rep.credits[0].pool.as_str(), rep.credits[0].paid),
        ("matching", 7),
        "buy, edit, 3 cancels, 2 buys"
    );
}

#[test]
fn an_empty_pool_is_too_many_requests_and_matching_requests_pay_more_from_their_own() {
    let mut cfg = Config::deribit();
    // Bursts of 3 matching requests and 10 others; refills too slow to matter here.
    cfg.credits = Credits {
        max: 5_000,
        refill_per_s: 1,
        cost: 500,
        matching_max: 3_000,
        matching_refill_per_s: 1,
        matching_cost: 1_000,
        connections_per_ip: 32,
    };
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    let t = login(&mut c); // one public request, paid by the IP
    for i in 0..3 {
        let r = rpc(&mut c, Some(&t), i, "private/buy", buy(&format!("m{i}")));
        assert_eq!(r.status, 200, "matching request {i}: {}", r.body);
    }
    let r = rpc(&mut c, Some(&t), 9, "private/buy", buy("m9"));
    assert_eq!(r.status, 429);
    assert_eq!(
        (
            r.json()["error"]["code"].as_i64(),
            r.json()["error"]["message"].as_str()
        ),
        (Some(10028), Some("too_many_requests"))
    );
    assert_eq!(r.header("Connection"), Some("close"), "the session ends");
    assert!(
        c.send("GET", "/api/v2/public/get_time", None, "").is_err(),
        "the connection was closed"
    );

    // The other pool still pays: 10 reads of the account, then empty.
    let mut c = Client::connect(s.addr());
    let mut ok = 0;
    loop {
        let r = rpc(
            &mut c,
            Some(&t),
            20,
            "private/get_open_orders_by_instrument",
            json!({ "instrument_name": "BTC-PERPETUAL" }),
        );
        if r.status != 200 {
            assert_eq!(error_code(&r), 10028);
            break;
        }
        ok += 1;
        assert!(ok <= 10, "the pool holds 10 reads");
    }
    assert_eq!(ok, 10);
    let rep = s.stop();
    assert_eq!(rep.executions, 3, "the refused buy never ran");
    let m = &rep.credits[0];
    assert_eq!((m.paid, m.refused, m.lowest), (3, 1, 0));
    let n = &rep.credits[1];
    assert_eq!(
        (n.paid, n.refused),
        (11, 1),
        "auth by the IP, 10 reads by the account"
    );
    assert_eq!(rep.throttled, 2);
}

#[test]
fn connections_past_the_per_ip_limit_are_refused_with_429() {
    let mut cfg = Config::deribit();
    cfg.credits.connections_per_ip = 2;
    let s = Server::start(cfg).unwrap();
    let mut a = Client::connect(s.addr());
    let mut b = Client::connect(s.addr());
    assert_eq!(a.get("/api/v2/public/get_time").status, 200);
    assert_eq!(b.get("/api/v2/public/get_time").status, 200);
    let mut third = Client::connect(s.addr());
    let r = third.read_response().expect("an answer without a request");
    assert_eq!(r.status, 429);
    drop(a);
    // The server sees the close when its thread reads EOF; poll for the slot.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = Client::connect(s.addr());
        match c.send("GET", "/api/v2/public/get_time", None, "") {
            Ok(r) if r.status == 200 => break,
            _ => assert!(Instant::now() < until, "the slot never came back"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.get("/api/v2/public/get_time").status, 200);
    let rep = s.stop();
    assert!(rep.connections_refused >= 1);
    assert_eq!(
        rep.responses.get(&429).copied().unwrap_or(0),
        rep.connections_refused
    );
}

/// Deribit's BTC-PERPETUAL rules (tick 0.5, amounts in USD in steps of the 10 USD
/// contract from 10; 10 BTC of equity at 50x): each breach refused with the error
/// Deribit's table gives it, nothing booked. An amount of 1e11 USD is
/// `not_enough_funds`, as the venue answers it, not a malformed amount.
#[test]
fn orders_outside_the_rules_or_the_funds_are_refused_as_deribit_does() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut c = Client::connect(s.addr());
    let token = login(&mut c);
    let o = |amount: Value, price: Value| json!({ "instrument_name": "BTC-PERPETUAL", "amount": amount, "type": "limit", "price": price });
    let refused = [
        (o(json!(10), json!(2_000_000)), 10007, "price_too_high"),
        (o(json!(10), json!(0.1)), 10005, "price_too_low"),
        (o(json!(10), json!(49000.25)), 10043, "price_wrong_tick"),
        (o(json!(5), json!(49000)), 10002, "qty_too_low"),
        (
            o(json!(15), json!(49000)),
            10027,
            "non_integer_contract_amount",
        ),
        (o(json!(1e11), json!(49000)), 10009, "not_enough_funds"),
        // 30 M USD at 49,000 is 612 BTC: 12.2 BTC at 50x against 10.
        (
            o(json!(30_000_000), json!(49000)),
            10009,
            "not_enough_funds",
        ),
    ];
    for (i, (params, code, message)) in refused.into_iter().enumerate() {
        let r = rpc(
            &mut c,
            Some(&token),
            10 + i as u64,
            "private/buy",
            params.clone(),
        );
        assert_eq!(error_code(&r), code, "{params}: {}", r.body);
        assert_eq!(r.json()["error"]["message"], message, "{params}");
    }
    assert_eq!(s.report().executions, 0, "nothing booked");
    let r = rpc(
        &mut c,
        Some(&token),
        30,
        "private/buy",
        o(json!(10), json!(49000.5)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

/// What ccxt asks Deribit for at start and to clean up: instruments (BTC
/// futures list the perpetual with the figures the engine enforces), currencies,
/// the account summaries (its initial margin what its open orders hold), and
/// `cancel_all_by_instrument` (the number cancelled).
#[test]
fn the_catalog_summaries_and_cancel_all_answer_as_deribit_does() {
    let s = Server::start(Config::deribit()).unwrap();
    let mut c = Client::connect(s.addr());
    let token = login(&mut c);
    let r = rpc(
        &mut c,
        None,
        2,
        "public/get_instruments",
        json!({ "currency": "BTC", "kind": "future" }),
    );
    let i = r.json()["result"][0].clone();
    assert_eq!(i["instrument_name"], "BTC-PERPETUAL", "{}", r.body);
    assert_eq!(i["tick_size"], 0.5);
    assert_eq!(i["contract_size"], 10.0);
    assert_eq!(i["min_trade_amount"], 10.0);
    let r = rpc(
        &mut c,
        None,
        3,
        "public/get_instruments",
        json!({ "currency": "ETH" }),
    );
    assert_eq!(
        r.json()["result"].as_array().unwrap().len(),
        0,
        "{}",
        r.body
    );
    let r = rpc(&mut c, None, 4, "public/get_currencies", json!({}));
    assert_eq!(r.json()["result"][0]["currency"], "BTC", "{}", r.body);
    let r = rpc(
        &mut c,
        Some(&token),
        5,
        "private/get_account_summaries",
        json!({}),
    );
    let sum = r.json()["result"]["summaries"][0].clone();
    assert_eq!(sum["equity"], 10.0, "{}", r.body);
    assert_eq!(sum["initial_margin"], 0.0);
    // 490,000 USD at 49,000 is 10 BTC: 0.2 BTC held at 50x.
    let buy = json!({ "instrument_name": "BTC-PERPETUAL", "amount": 490000, "type": "limit", "price": 49000 });
    for id in [6, 7] {
        let r = rpc(&mut c, Some(&token), id, "private/buy", buy.clone());
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = rpc(
        &mut c,
        Some(&token),
        8,
        "private/get_account_summaries",
        json!({}),
    );
    assert_eq!(
        r.json()["result"]["summaries"][0]["initial_margin"],
        0.4,
        "{}",
        r.body
    );
    assert_eq!(r.json()["result"]["summaries"][0]["available_funds"], 9.6);
    let cancel = json!({ "instrument_name": "BTC-PERPETUAL" });
    let r = rpc(
        &mut c,
        Some(&token),
        9,
        "private/cancel_all_by_instrument",
        cancel.clone(),
    );
    assert_eq!(r.json()["result"], 2, "{}", r.body);
    let r = rpc(
        &mut c,
        Some(&token),
        10,
        "private/cancel_all_by_instrument",
        cancel,
    );
    assert_eq!(r.json()["result"], 0, "{}", r.body);
    let r = rpc(&mut c, None, 11, "private/get_account_summaries", json!({}));
    assert_eq!(error_code(&r), 13009, "private: {}", r.body);
}
