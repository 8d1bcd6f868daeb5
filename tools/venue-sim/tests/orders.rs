//! Orders: place, query, cancel, open orders and cancel-replace in Binance's shapes,
//! and the registry that counts duplicate executions by client order id.

mod common;

use common::{order_params, Client};
use ergon_venue_sim::{Config, Server};

fn start() -> (Server, Client) {
    let s = Server::start(Config::binance_spot()).unwrap();
    let c = Client::connect(s.addr());
    (s, c)
}

#[test]
fn place_query_cancel_in_documented_shapes() {
    let (s, mut c) = start();
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("mm-1"))
        .unwrap();
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

    let ack = c
        .signed(
            &s,
            "POST",
            "/api/v3/order",
            &format!("{}&newOrderRespType=ACK", order_params("mm-2")),
        )
        .unwrap()
        .json();
    assert_eq!(ack.as_object().unwrap().len(), 5, "ACK shape: {ack}");

    let q = c
        .signed(
            &s,
            "GET",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=mm-1",
        )
        .unwrap();
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
    let q = c
        .signed(
            &s,
            "GET",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=mm-1",
        )
        .unwrap();
    assert_eq!(
        q.json()["status"],
        "CANCELED",
        "a canceled order can still be queried"
    );
    let q = c
        .signed(
            &s,
            "GET",
            "/api/v3/order",
            "symbol=BTCUSDT&origClientOrderId=never",
        )
        .unwrap();
    assert_eq!((q.status, q.code()), (400, -2013));
    let q = c
        .signed(&s, "GET", "/api/v3/order", "symbol=BTCUSDT")
        .unwrap();
    assert_eq!(q.code(), -1102, "needs orderId or origClientOrderId");
    let q = c
        .signed(
            &s,
            "GET",
            "/api/v3/order",
            "symbol=ETHUSDT&origClientOrderId=mm-1",
        )
        .unwrap();
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
    assert_eq!(
        c.signed(&s, "POST", "/api/v3/order", &order_params("dup"))
            .unwrap()
            .status,
        200
    );
    // A re-send while the first is open: the venue refuses it, the report says so.
    let r = c
        .signed(&s, "POST", "/api/v3/order", &order_params("dup"))
        .unwrap();
    assert_eq!((r.status, r.code()), (400, -2010));
    // Once the first is gone, a re-send executes a second time: a duplicate.
    c.signed(
        &s,
        "DELETE",
        "/api/v3/order",
        "symbol=BTCUSDT&origClientOrderId=dup",
    )
    .unwrap();
    assert_eq!(
        c.signed(&s, "POST", "/api/v3/order", &order_params("dup"))
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        c.signed(&s, "POST", "/api/v3/order", &order_params("other"))
            .unwrap()
            .status,
        200
    );
    let rep = s.stop();
    assert_eq!(rep.executions, 3);
    assert_eq!(rep.duplicates, 1);
    assert_eq!(rep.duplicate_rejects, 1);
}

#[test]
fn cancel_replace_succeeds_fails_and_partially_fails_as_documented() {
    let (s, mut c) = start();
    c.signed(&s, "POST", "/api/v3/order", &order_params("q1"))
        .unwrap();
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
        let r = c.signed(&s, "POST", "/api/v3/order", p).unwrap();
        assert_eq!((r.status, r.code()), (400, code), "{p}: {}", r.body);
    }
    let m = c
        .signed(
            &s,
            "POST",
            "/api/v3/order",
            "symbol=BTCUSDT&side=SELL&type=MARKET&quantity=0.5&newClientOrderId=m1",
        )
        .unwrap();
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
