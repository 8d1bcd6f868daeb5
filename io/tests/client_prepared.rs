//! Prepared orders through the event loop (`Context::request_prepared`) to a
//! loopback server: each template order is copied as it is, with the pool's
//! `Host` line, into the connection's buffer and written from there (encrypted
//! over TLS); either way the server receives, order after order on one
//! keep-alive connection, exactly the bytes the encoder writes for each.

mod common;

use common::driver::{Answer, Driver, SEC};
use common::server::Server;
use ergon_core::Budget;
use ergon_io::http::{with_prepared, Conn, Limits};
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Fill, OrderType, Prepared, Side, Symbol, TimeInForce,
};

const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const SECRET: &[u8] = b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

/// Twelve template orders of changing lengths (quantity, price, id), each with the
/// bytes the encoder writes for it with `host`.
fn orders(host: &str) -> Vec<(Prepared, Vec<u8>)> {
    let t0 = 10 * SEC;
    let mut b = Budget::builder();
    let spot =
        BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(t0, 1_499_827_319_559), 0)
            .unwrap()
            .with_auth(Auth::new(API_KEY, SECRET, 5_000).unwrap());
    let t = spot
        .order_template(
            Symbol::new("LTCBTC").unwrap(),
            Side::Buy,
            OrderType::Limit(TimeInForce::Gtc),
        )
        .unwrap();
    (0..12)
        .map(|i| {
            let (q, p, id) = (
                "1".repeat(1 + i % 5),
                format!("0.{}", "5".repeat(1 + i % 3)),
                format!("mm-{}", "7".repeat(1 + i)),
            );
            let fill = Fill {
                price: Some(Decimal::new(&p).unwrap()),
                quantity: Decimal::new(&q).unwrap(),
                client_order_id: ClientOrderId::new(&id).unwrap(),
            };
            let mut p = Prepared::with_capacity(1024);
            spot.new_order_from(&t, &mut p, &fill, t0).unwrap();
            assert!(p.http().is_some(), "written as HTTP/1.1");
            let mut conn = Conn::new(Limits::default());
            with_prepared(&p, (), |r, ()| conn.send(r, host))
                .unwrap()
                .unwrap();
            let bytes = conn.transmit().to_vec();
            (p, bytes)
        })
        .collect()
}

/// Sends every order through `d`, one at a time, and checks what `server` got.
fn sends_each_as_encoded(mut d: Driver, server: &Server) {
    let host = server.addr.to_string();
    let orders = orders(&host);
    let mut expected = Vec::new();
    for (p, bytes) in &orders {
        // Busy until the first connect completes: the driver tries again.
        let (answer, _) = d.send_prepared(p, 10 * SEC);
        assert_eq!(answer, Answer::ok(b""));
        expected.extend_from_slice(bytes);
    }
    let c = *d.lp.client().counters();
    assert_eq!(
        (c.requests, c.responses, c.sent_no, c.sent_maybe),
        (12, 12, 0, 0)
    );
    let log = server.log.lock().unwrap();
    assert_eq!(log.conns.len(), 1, "one keep-alive connection");
    assert!(log.conns[0] == expected, "the bytes on the wire");
}

#[test]
fn prepared_orders_go_out_over_tcp_as_the_encoder_writes_them() {
    let server = Server::start(|p| p.echo());
    let d = Driver::new(server.addr, |_| {});
    sends_each_as_encoded(d, &server);
}

#[cfg(feature = "tls")]
#[test]
fn prepared_orders_go_out_over_tls_as_the_encoder_writes_them() {
    let pki = common::tls::Pki::new();
    let server = Server::start_tls(pki.server.clone(), |p| p.echo());
    let client = pki.client("localhost");
    let d = Driver::new(server.addr, |pc| pc.tls = Some(client));
    sends_each_as_encoded(d, &server);
}
