//! A request its adapter wrote as HTTP/1.1 already (`Prepared::http`, a Binance
//! order from its template) goes on the wire byte for byte as the pool's encoder
//! writes the same request from its method, target, headers and body: for any
//! order, through the real pool, both ways. And as the adapter's builder's order
//! does (the bytes Binance saw before the template).

use ergon_core::{Budget, Class};
use ergon_io::client::PoolConfig;
use ergon_io::http::{unsendable, with_prepared, InvalidRequest, Limits};
use ergon_io::pool::{ConnId, Pool, PoolEvent, Refused, Transmit};
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Ed25519Key, Endpoints, Fill, NewOrder, OrderType, Prepared, Side,
    Symbol, TimeInForce,
};
use proptest::prelude::*;

/// The venues crate's order generator, shared by path.
#[path = "../../venues/src/binance_spot/template/case.rs"]
mod case;
use case::case;

const SEC: i64 = 1_000_000_000;
const T0: i64 = 10 * SEC;
const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const SECRET: &[u8] = b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

/// An adapter with `auth`, and the budget its orders are charged in.
fn spot(auth: Auth) -> (BinanceSpot, Budget) {
    let mut b = Budget::builder();
    let spot =
        BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(T0, 1_499_827_319_559), 0)
            .unwrap()
            .with_auth(auth);
    (spot, b.build(T0).unwrap())
}

/// A pool of one connected connection to `host`, its send buffer `max_request`.
fn pool(host: &str, budget: &mut Budget, max_request: usize) -> (Pool, ergon_io::client::PoolId) {
    let mut pool = Pool::new();
    let mut cfg = PoolConfig::new("127.0.0.1:443".parse().unwrap(), host);
    cfg.limits = Limits {
        max_request,
        ..Limits::default()
    };
    let id = pool.add_pool(cfg, T0).unwrap();
    pool.handle_timeout(budget, T0);
    while let Some(t) = pool.poll_transmit() {
        if let Transmit::Connect { conn, .. } = t {
            pool.handle_connect_started(conn, budget, T0);
            pool.handle_connected(conn, T0);
        }
    }
    while pool.poll_event().is_some() {}
    (pool, id)
}

/// The bytes the pool puts on the wire for `p`: copied out as written
/// (`http`), or encoded from its method, target, headers and body.
fn on_the_wire(p: &Prepared, budget: &mut Budget, http: bool) -> Result<Vec<u8>, InvalidRequest> {
    let (mut pool, id) = pool("api.binance.com", budget, 64 * 1024);
    let ticket = budget.try_charge(p.parts(), Class::Normal, T0).unwrap();
    let deadline = p.deadline_ns();
    let sent = if http {
        let h = p.http().expect("written as HTTP/1.1");
        pool.request(id, &h, ticket, deadline, T0, |_| true)
    } else {
        with_prepared(p, ticket, |r, t| {
            pool.request(id, r, t, deadline, T0, |_| true)
        })
        .unwrap_or_else(|_| panic!("a prepared request"))
    };
    match sent {
        Ok((_, conn)) => Ok(pool.transmit(conn).to_vec()),
        Err(Refused::Invalid(t, e)) => {
            let _ = budget.refund(t, T0);
            Err(e)
        }
        Err(e) => panic!("refused: {e:?}"),
    }
}

/// Writes all of `conn`'s request, answers it (200, no body) and gives the
/// connection back to its pool, idle: the pool's next request reuses it.
fn answer(pool: &mut Pool, conn: ConnId) {
    let n = pool.transmit(conn).len();
    pool.handle_written(conn, n);
    let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    pool.recv_buf(conn)[..reply.len()].copy_from_slice(reply);
    pool.handle_recv(conn, reply.len(), T0);
    let mut answered = false;
    while let Some(ev) = pool.poll_event() {
        if let PoolEvent::Response {
            conn: c, flight, ..
        } = ev
        {
            assert_eq!(c, conn);
            drop(flight);
            answered = true;
        }
    }
    assert!(answered, "no answer");
    let buf = pool.take_buffer(conn);
    pool.release(conn, T0);
    pool.restore_buffer(conn, buf);
    assert!(pool.is_idle(conn));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_template_order_goes_out_as_the_encoder_writes_it(c in case(), ed25519 in any::<bool>()) {
        let auth = match ed25519 {
            false => Auth::new(API_KEY, SECRET, c.recv_window).unwrap(),
            true => Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[7; 32]), c.recv_window).unwrap(),
        };
        let (mut spot, mut budget) = spot(auth);
        // The order, and the same order as its template's fill.
        let (order, fill) = c.order(false);
        let t = spot.order_template(order.symbol, c.side, c.order_type).unwrap();
        let now = T0 + c.now;
        let mut p = Prepared::with_capacity(1024);
        spot.new_order_from(&t, &mut p, &fill, now).unwrap();
        let copied = on_the_wire(&p, &mut budget, true).unwrap();
        let encoded = on_the_wire(&p, &mut budget, false).unwrap();
        prop_assert_eq!(&copied, &encoded);
        // The builder's order, encoded: what went out before the template.
        let mut b = Prepared::default();
        spot.new_order(&mut b, &order, now).unwrap();
        prop_assert!(b.http().is_none());
        prop_assert_eq!(&on_the_wire(&b, &mut budget, false).unwrap(), &copied);
    }

    /// One connection carries order after order, copied or encoded in any mix, of
    /// any lengths: each goes out as a fresh connection's encoder writes it
    /// (nothing of the request before it shows through: the send buffer holds
    /// requests longer and shorter than the one it held).
    #[test]
    fn a_reused_connection_sends_each_order_as_a_fresh_one_does(
        orders in prop::collection::vec((case(), any::<bool>()), 1..8),
    ) {
        let (spot, mut budget) = spot(Auth::new(API_KEY, SECRET, 5_000).unwrap());
        let (mut pool, id) = pool("api.binance.com", &mut budget, 64 * 1024);
        let mut p = Prepared::with_capacity(1024);
        for (c, http) in &orders {
            let (order, fill) = c.order(false);
            let t = spot.order_template(order.symbol, c.side, c.order_type).unwrap();
            spot.new_order_from(&t, &mut p, &fill, T0 + c.now).unwrap();
            let fresh = on_the_wire(&p, &mut budget, false).unwrap();
            let ticket = budget.try_charge(p.parts(), Class::Normal, T0).unwrap();
            let deadline = p.deadline_ns();
            let sent = if *http {
                let h = p.http().expect("written as HTTP/1.1");
                pool.request(id, &h, ticket, deadline, T0, |_| true)
            } else {
                with_prepared(&p, ticket, |r, t| pool.request(id, r, t, deadline, T0, |_| true))
                    .unwrap_or_else(|_| panic!("a prepared request"))
            };
            let (_, conn) = sent.unwrap();
            prop_assert_eq!(pool.transmit(conn), &fresh[..]);
            answer(&mut pool, conn);
        }
    }
}

/// What the pool refuses of a request encoded already, it refuses as it does the
/// same request encoded: too large for the send buffer, or a busy connection; and
/// the ticket comes back.
#[test]
fn a_written_request_is_refused_where_an_encoded_one_is() {
    let (spot, mut budget) = spot(Auth::new(API_KEY, SECRET, 5_000).unwrap());
    let t = spot
        .order_template(
            Symbol::new("LTCBTC").unwrap(),
            Side::Buy,
            OrderType::Limit(TimeInForce::Gtc),
        )
        .unwrap();
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("x1").unwrap(),
    };
    let mut p = Prepared::default();
    spot.new_order_from(&t, &mut p, &fill, T0).unwrap();
    let h = p.http().unwrap();
    let len = h.len_with_host("api.binance.com".len());
    // One byte short of the request: TooLarge both ways; exactly its size: sent.
    for (max, ok) in [(len - 1, false), (len, true)] {
        for http in [true, false] {
            let (mut pool, id) = pool("api.binance.com", &mut budget, max.max(64));
            let ticket = budget.try_charge(p.parts(), Class::Normal, T0).unwrap();
            let sent = if http {
                pool.request(id, &h, ticket, p.deadline_ns(), T0, |_| true)
            } else {
                with_prepared(&p, ticket, |r, t| {
                    pool.request(id, r, t, p.deadline_ns(), T0, |_| true)
                })
                .unwrap_or_else(|_| panic!("a prepared request"))
            };
            match sent {
                Ok((_, conn)) => {
                    assert!(ok, "{max} {http}");
                    assert_eq!(pool.transmit(conn).len(), len);
                    // The connection is busy now: the next is refused (no idle one).
                    let ticket = budget.try_charge(p.parts(), Class::Normal, T0).unwrap();
                    let again = pool.request(id, &h, ticket, p.deadline_ns(), T0, |_| true);
                    let Err(Refused::Busy(t)) = again else {
                        panic!("a busy connection took a request: {again:?}");
                    };
                    let _ = budget.refund(t, T0);
                }
                Err(Refused::Invalid(t, e)) => {
                    assert!(!ok, "{max} {http}");
                    assert_eq!(e, InvalidRequest::TooLarge);
                    let _ = budget.refund(t, T0);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }
}

/// A request prepared with its signature pending (for a WebSocket API lane) is
/// never encoded as it is: refused, with the reason named
/// ([`InvalidRequest::Unsigned`]); once its adapter signed it, it goes on the wire
/// as the request signed at once does, byte for byte.
#[test]
fn a_request_whose_signature_is_pending_is_refused_until_signed() {
    let (mut spot, mut budget) = spot(Auth::new(API_KEY, SECRET, 5_000).unwrap());
    let o = limit_order();
    let mut signed = Prepared::default();
    spot.new_order(&mut signed, &o, T0).unwrap();
    let mut p = Prepared::default();
    spot.defer_signatures(true);
    spot.new_order(&mut p, &o, T0).unwrap();
    assert!(p.signature_pending());
    assert_eq!(with_prepared(&p, 7, |_, x| x), Err(7));
    assert_eq!(unsendable(&p), InvalidRequest::Unsigned);
    assert_eq!(unsendable(&Prepared::default()), InvalidRequest::Method);
    assert_eq!(
        InvalidRequest::Unsigned.culprit(),
        ergon_io::Culprit::Caller
    );
    spot.sign_pending(&mut p).unwrap();
    assert_eq!(
        on_the_wire(&p, &mut budget, false),
        on_the_wire(&signed, &mut budget, false)
    );
}

/// A request emptied ([`Prepared::clear`]: a buffer lent for the next
/// preparation) is never encoded or copied out, though its bytes still hold it:
/// refused as an empty one is.
#[test]
fn a_cleared_request_is_not_sent_though_its_bytes_hold_it() {
    let (spot, _budget) = spot(Auth::new(API_KEY, SECRET, 5_000).unwrap());
    let o = limit_order();
    let t = spot.order_template(o.symbol, o.side, o.order_type).unwrap();
    let fill = Fill {
        price: o.price,
        quantity: o.quantity,
        client_order_id: o.client_order_id,
    };
    let mut p = Prepared::default();
    spot.new_order_from(&t, &mut p, &fill, T0).unwrap();
    assert!(p.http().is_some() && with_prepared(&p, 7, |_, x| x) == Ok(7));
    p.clear();
    assert!(p.is_empty());
    assert!(p.http().is_none());
    assert_eq!(with_prepared(&p, 7, |_, x| x), Err(7));
    assert_eq!(unsendable(&p), InvalidRequest::Method);
}

/// A LIMIT order of `LTCBTC`, client order id `x1`.
fn limit_order() -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("LTCBTC").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("x1").unwrap(),
        reduce_only: false,
    }
}
