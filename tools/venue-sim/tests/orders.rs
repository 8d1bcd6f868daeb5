//! Orders: place, query, cancel, open orders and cancel-replace in Binance's shapes,
//! and the registry that counts duplicate executions by client order id.

mod common;

use common::{order_params, Client, Resp};
use ergon_venue_sim::{Config, LimitType, Server};

fn start() -> (Server, Client) {
    let s = Server::start(Config::binance_spot()).unwrap();
    let c = Client::connect(s.addr());
    (s, c)
}

#[test]
fn place_query_cancel_in_documented_shapes() {
    let (s, mut c) = start();
    let r = place(&mut c, &s, &order_params("mm-1"));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    for k in [
        "symbol",
        "orderId",
        "orderListId",
        "clientOrderId",
        "transactTime",
        "price",
        "origQty",
        "executedQty",
        "cummulativeQuoteQty",
        "status",
        "timeInForce",
        "type",
        "side",
        "fills",
    ] {
        assert!(v.get(k).is_some(), "FULL response lacks {k}: {v}");
    }
    assert_eq!(v["clientOrderId"], "mm-1");
    assert_eq!(v["status"], "NEW");
    assert_eq!(v["price"], "49000.00000000");
    assert_eq!(v["origQty"], "0.01000000");
    assert_eq!(v["orderListId"], -1);
    assert!(r.header("X-MBX-ORDER-COUNT-10S").is_some());
    assert!(r.header("X-MBX-ORDER-COUNT-1D").is_some());
    let id = v["orderId"].as_u64().unwrap();

    let ack = place(
        &mut c,
        &s,
        &format!("{}&newOrderRespType=ACK", order_params("mm-2")),
    )
    .json();
    assert_eq!(ack.as_object().unwrap().len(), 5, "ACK shape: {ack}");

    let q = query(&mut c, &s, "symbol=BTCUSDT&origClientOrderId=mm-1");
    assert_eq!(q.status, 200);
    let qv = q.json();
    assert_eq!(qv["orderId"].as_u64(), Some(id));
    assert_eq!(qv["isWorking"], true);
    assert!(qv.get("updateTime").is_some());

    let open = c
        .signed(&s, "GET", "/api/v3/openOrders", "symbol=BTCUSDT")
        .unwrap()
        .json();
    assert_eq!(open.as_array().unwrap().len(), 2);

    let cx = c
        .signed(
            &s,
            "DELETE",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=mm-1&newClientOrderId=cx-1",
        )
        .unwrap();
    assert_eq!(cx.status, 200, "{}", cx.body);
    let cv = cx.json();
    assert_eq!(cv["status"], "CANCELED");
    assert_eq!(cv["origClientOrderId"], "mm-1");
    assert_eq!(cv["clientOrderId"], "cx-1");

    let again = c
        .signed(
            &s,
            "DELETE",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=mm-1",
        )
        .unwrap();
    assert_eq!((again.status, again.code()), (400, -2011));
    let q = query(&mut c, &s, "symbol=BTCUSDT&origClientOrderId=mm-1");
    assert_eq!(
        q.json()["status"],
        "CANCELED",
        "a canceled order can still be queried"
    );
    let q = query(&mut c, &s, "symbol=BTCUSDT&origClientOrderId=never");
    assert_eq!((q.status, q.code()), (400, -2013));
    let q = query(&mut c, &s, "symbol=BTCUSDT");
    assert_eq!(q.code(), -1102, "needs orderId or origClientOrderId");
    let q = query(&mut c, &s, "symbol=ETHUSDT&origClientOrderId=mm-1");
    assert_eq!(q.code(), -1121);

    let open = c
        .signed(&s, "GET", "/api/v3/openOrders", "")
        .unwrap()
        .json();
    assert_eq!(open.as_array().unwrap().len(), 1);
    let rep = s.stop();
    assert_eq!((rep.executions, rep.cancels, rep.duplicates), (2, 1, 0));
}

#[test]
fn duplicates_are_counted_by_client_order_id() {
    let (s, mut c) = start();
    assert_eq!(place(&mut c, &s, &order_params("dup")).status, 200);
    // A re-send while the first is open: the venue refuses it, the report says so.
    let r = place(&mut c, &s, &order_params("dup"));
    assert_eq!((r.status, r.code()), (400, -2010));
    // Once the first is gone, a re-send executes a second time: a duplicate.
    c.signed(
        &s,
        "DELETE",
        "/api/v3/order",
        "symbol=BTCUSDT&origClientOrderId=dup",
    )
    .unwrap();
    assert_eq!(place(&mut c, &s, &order_params("dup")).status, 200);
    assert_eq!(place(&mut c, &s, &order_params("other")).status, 200);
    let rep = s.stop();
    assert_eq!(rep.executions, 3);
    assert_eq!(rep.duplicates, 1);
    assert_eq!(rep.duplicate_rejects, 1);
}

#[test]
fn cancel_replace_succeeds_fails_and_partially_fails_as_documented() {
    let (s, mut c) = start();
    place(&mut c, &s, &order_params("q1"));
    // A signed cancel-replace of `cancel` by `new`, in `mode`.
    let mut cr = |cancel: &str, new: &str, mode: &str| {
        let params = format!("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=49001&cancelReplaceMode={mode}&cancelOrigClientOrderId={cancel}&newClientOrderId={new}");
        c.signed(&s, "POST", "/api/v3/order/cancelReplace", &params)
            .unwrap()
    };
    let r = cr("q1", "q2", "STOP_ON_FAILURE");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["cancelResult"], "SUCCESS");
    assert_eq!(v["newOrderResult"], "SUCCESS");
    assert_eq!(v["cancelResponse"]["origClientOrderId"], "q1");
    assert_eq!(v["newOrderResponse"]["clientOrderId"], "q2");
    assert!(r.header("X-MBX-ORDER-COUNT-10S").is_some());

    // q1 is gone: stop on failure, the new order is not attempted.
    let r = cr("q1", "q3", "STOP_ON_FAILURE");
    assert_eq!((r.status, r.code()), (400, -2022));
    let v = r.json();
    assert_eq!(v["data"]["cancelResult"], "FAILURE");
    assert_eq!(v["data"]["newOrderResult"], "NOT_ATTEMPTED");
    assert_eq!(v["data"]["cancelResponse"]["code"], -2011);

    // Allow failure: the cancel fails, the new order goes in: 409 partial.
    let r = cr("q1", "q4", "ALLOW_FAILURE");
    assert_eq!((r.status, r.code()), (409, -2021));
    assert_eq!(r.json()["data"]["newOrderResult"], "SUCCESS");

    // The cancel works but the new id is taken by an open order: 409 partial.
    let r = cr("q2", "q4", "STOP_ON_FAILURE");
    assert_eq!((r.status, r.code()), (409, -2021));
    assert_eq!(r.json()["data"]["newOrderResponse"]["code"], -2010);

    let rep = s.stop();
    assert_eq!(rep.executions, 3, "q1, q2, q4");
    assert_eq!(rep.cancels, 2);
}

#[test]
fn bad_orders_are_refused_with_their_codes() {
    let (s, mut c) = start();
    let cases = [
        (
            "symbol=BTCUSDT&side=BUY&type=LIMIT&quantity=1&price=1",
            -1102,
        ),
        (
            "symbol=BTCUSDT&side=UP&type=LIMIT&timeInForce=GTC&quantity=1&price=1",
            -1117,
        ),
        ("symbol=BTCUSDT&side=BUY&type=STOP&quantity=1", -1116),
        (
            "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=abc&price=1",
            -1100,
        ),
        ("symbol=NOPE&side=BUY&type=MARKET&quantity=1", -1121),
        (
            "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&newClientOrderId=bad%20id",
            -1100,
        ),
    ];
    for (p, code) in cases {
        let r = place(&mut c, &s, p);
        assert_eq!((r.status, r.code()), (400, code), "{p}: {}", r.body);
    }
    let m = place(
        &mut c,
        &s,
        "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.5&newClientOrderId=m1",
    );
    let v = m.json();
    assert_eq!(v["status"], "FILLED");
    assert_eq!(v["fills"].as_array().unwrap().len(), 1);
    assert_eq!(s.stop().executions, 1);
}

#[test]
fn depth_and_account_have_their_shapes() {
    let (s, mut c) = start();
    let d = c.get("/api/v3/depth?symbol=BTCUSDT&limit=5").json();
    assert_eq!(d["bids"].as_array().unwrap().len(), 5);
    assert_eq!(d["asks"][0].as_array().unwrap().len(), 2);
    assert!(
        d["asks"][0][0].as_str().unwrap().parse::<f64>().unwrap()
            > d["bids"][0][0].as_str().unwrap().parse::<f64>().unwrap()
    );
    assert!(d.get("lastUpdateId").is_some());
    let r = c.get("/api/v3/depth?symbol=BTCUSDT&limit=0");
    assert_eq!(r.code(), -1130);
    let a = c.signed(&s, "GET", "/api/v3/account", "").unwrap().json();
    assert_eq!(a["balances"][0]["asset"], "BTC");
    assert_eq!(a["canTrade"], true);
    let r = c.get("/api/v3/nothing");
    assert_eq!(r.status, 404);
}

/// A signed `POST /api/v3/order` of `params`.
fn place(c: &mut Client, s: &Server, params: &str) -> Resp {
    c.signed(s, "POST", "/api/v3/order", params).unwrap()
}

/// A signed `GET /api/v3/order` of `params`.
fn query(c: &mut Client, s: &Server, params: &str) -> Resp {
    c.signed(s, "GET", "/api/v3/order", params).unwrap()
}

/// A signed LIMIT GTC order of `qty` at `price`.
fn limit(side: &str, qty: &str, price: &str) -> String {
    format!("symbol=BTCUSDT&side={side}&type=LIMIT&timeInForce=GTC&quantity={qty}&price={price}")
}

/// Binance Spot's BTCUSDT rules as its exchangeInfo publishes them (tick 0.01 up
/// to 1,000,000, step 0.00001 up to 9,000, notional 5, 200 open orders) and the
/// balances its account answer shows: each breach refused with the venue's code
/// and text (<https://developers.binance.com/docs/binance-spot-api-docs/filters>),
/// and nothing booked.
#[test]
fn orders_outside_the_filters_or_the_balance_are_refused_as_binance_does() {
    let mut cfg = Config::binance_spot();
    // The open-order cap takes 201 orders: no order-rate limit in the way.
    cfg.rate_limits.retain(|l| l.kind != LimitType::Orders);
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());
    let info = c.get("/api/v3/exchangeInfo").json();
    let filters = info["symbols"][0]["filters"].as_array().unwrap().clone();
    let filter = |t: &str| {
        filters
            .iter()
            .find(|f| f["filterType"] == t)
            .unwrap()
            .clone()
    };
    assert_eq!(filter("PRICE_FILTER")["maxPrice"], "1000000.00000000");
    assert_eq!(filter("PRICE_FILTER")["tickSize"], "0.01000000");
    assert_eq!(filter("LOT_SIZE")["maxQty"], "9000.00000000");
    assert_eq!(filter("LOT_SIZE")["stepSize"], "0.00001000");
    assert_eq!(filter("NOTIONAL")["minNotional"], "5.00000000");
    assert_eq!(filter("MAX_NUM_ORDERS")["maxNumOrders"], 200);

    let (price, lot) = ("Filter failure: PRICE_FILTER", "Filter failure: LOT_SIZE");
    let funds = "Account has insufficient balance for requested action.";
    let refused = [
        (limit("BUY", "1", "2000000"), -1013, price),
        (limit("BUY", "1", "49000.001"), -1013, price),
        (limit("BUY", "10000", "49000"), -1013, lot),
        (limit("BUY", "0.000001", "49000"), -1013, lot),
        (limit("BUY", "0.000015", "49000"), -1013, lot),
        (
            limit("BUY", "0.00001", "100"),
            -1013,
            "Filter failure: NOTIONAL",
        ),
        // 2,500 BTC at 49,000: 122.5 M USDT against 100 M.
        (limit("BUY", "2500", "49000"), -2010, funds),
        // 1,001 BTC against 1,000.
        (limit("SELL", "1001", "51000"), -2010, funds),
    ];
    for (params, code, msg) in refused {
        let r = place(&mut c, &s, &params);
        assert_eq!((r.status, r.code()), (400, code), "{params}: {}", r.body);
        assert_eq!(r.json()["msg"], msg, "{params}");
    }
    let open = c.signed(&s, "GET", "/api/v3/openOrders", "").unwrap();
    assert_eq!(open.json().as_array().unwrap().len(), 0, "nothing booked");
    assert_eq!(s.report().executions, 0);

    // Funds held by open orders count: 2,000 BTC bought at 49,000 holds 98 M USDT,
    // so another 50 BTC (2.45 M) no longer fits.
    let r = place(&mut c, &s, &limit("BUY", "2000", "49000"));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = place(&mut c, &s, &limit("BUY", "50", "49000"));
    assert_eq!(r.code(), -2010, "{}", r.body);
    // The open-order cap: 200 open, the 201st refused.
    for i in 1..200 {
        let r = place(&mut c, &s, &limit("BUY", "0.001", "49000"));
        assert_eq!(r.status, 200, "order {i}: {}", r.body);
    }
    let r = place(&mut c, &s, &limit("BUY", "0.001", "49000"));
    assert_eq!((r.status, r.code()), (400, -2010), "{}", r.body);
    assert_eq!(r.json()["msg"], "Filter failure: MAX_NUM_ORDERS");
}

/// IOC and FOK limit orders never rest: one that reaches the best price of the
/// other side fills, one that does not expires (Binance: status EXPIRED).
#[test]
fn immediate_orders_fill_or_expire_and_never_rest() {
    let (s, mut c) = start();
    let ioc = |side: &str, price: &str| {
        format!("symbol=BTCUSDT&side={side}&type=LIMIT&timeInForce=IOC&quantity=0.01&price={price}&newOrderRespType=RESULT")
    };
    let r = place(&mut c, &s, &ioc("BUY", "49000"));
    assert_eq!(r.json()["status"], "EXPIRED", "{}", r.body);
    assert_eq!(r.json()["executedQty"], "0.00000000");
    let r = place(&mut c, &s, &ioc("BUY", "50000.01"));
    assert_eq!(r.json()["status"], "FILLED", "{}", r.body);
    assert_eq!(r.json()["executedQty"], "0.01000000");
    let r = place(&mut c, &s, &ioc("SELL", "50000"));
    assert_eq!(r.json()["status"], "EXPIRED", "{}", r.body);
    let open = c.signed(&s, "GET", "/api/v3/openOrders", "").unwrap();
    assert_eq!(open.json().as_array().unwrap().len(), 0);
}

/// What ccxt asks Binance for at start besides `exchangeInfo`: the wallet's coins
/// (signed, weight 10) and the margin pairs (cross: weight 1 with no signature;
/// isolated: signed, weight 10), in their documented shapes.
#[test]
fn the_wallet_and_margin_answers_a_client_asks_for_at_start() {
    let (s, mut c) = start();
    let r = c
        .signed(&s, "GET", "/sapi/v1/capital/config/getall", "")
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header_u64("X-MBX-USED-WEIGHT-1M"), 10);
    let coins = r.json();
    let btc = coins
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["coin"] == "BTC")
        .unwrap()
        .clone();
    assert_eq!(btc["free"], "1000.00000000");
    assert_eq!(btc["networkList"][0]["network"], "BTC");
    assert_eq!(btc["trading"], true);
    let r = c.get("/sapi/v1/margin/allPairs");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()[0]["symbol"], "BTCUSDT");
    assert_eq!(r.json()[0]["isMarginTrade"], false, "as exchangeInfo says");
    let r = c
        .signed(&s, "GET", "/sapi/v1/margin/isolated/allPairs", "")
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()[0]["base"], "BTC");
    assert_eq!(
        c.get("/sapi/v1/capital/config/getall").code(),
        -2014,
        "signed"
    );
}
