//! The template writes what `Session::prepare` writes, byte for byte, and its
//! logged-on form is that frame without `apiKey` and `signature`.

use proptest::prelude::*;

use super::*;
use crate::adapt::{Clock, Venue};
use crate::binance_spot::template::case::case;
use crate::binance_spot::template::tests::{API_KEY, INFO, SEC, SECRET};
use crate::binance_spot::BinanceSpot;
use crate::binance_spot_ws::Call;
use crate::endpoint::TimeInForce;

fn session(recv_window_ms: i64, keyed: bool) -> Session {
    let mut b = ergon_core::Budget::builder();
    let spot = BinanceSpot::from_exchange_info(
        INFO,
        &mut b,
        Clock::anchor(10 * SEC, 1_499_827_319_559),
        0,
    )
    .unwrap();
    let key = keyed.then_some((API_KEY, SECRET));
    Session::new(spot, key, recv_window_ms, 4).unwrap()
}

/// `frame` without its `"apiKey":"..."` parameter and its signature: the form of a
/// logged-on session as Binance documents it.
fn logged_on(frame: &str) -> String {
    let key = format!("\"apiKey\":\"{API_KEY}\",");
    let at = frame.find(",\"signature\":\"").expect("a signed frame");
    let unsigned = format!("{}}}}}", &frame[..at]);
    unsigned.replacen(&key, "", 1)
}

/// A pending request, its parts by bucket index (each session has its budget).
fn same(p: &Pending) -> impl PartialEq + core::fmt::Debug {
    let parts: Vec<_> = p.parts.iter().map(|x| (x.bucket.index(), x.cost)).collect();
    (p.id, p.kind, parts, p.deadline_ns, p.client_order_id)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_template_writes_what_prepare_writes(c in case(), earlier in 0usize..3) {
        let (order, fill) = c.order(false);
        let (symbol, side, order_type, now) = (order.symbol, c.side, c.order_type, c.now);
        let recv_window = c.recv_window;
        let (mut a, mut b, mut c) = (
            session(recv_window, true),
            session(recv_window, true),
            session(recv_window, true),
        );
        let signed = b.order_template(symbol, side, order_type, Signing::PerRequest).unwrap();
        let unsigned = c.order_template(symbol, side, order_type, Signing::Session).unwrap();
        let (mut fa, mut fb, mut fc) = (Vec::new(), String::new(), String::new());
        // `earlier` requests before it on each session: the ids move on alike.
        for _ in 0..earlier {
            let pa = a.prepare(&Call::Place(order), &mut fa, now).unwrap();
            let pb = b.prepare_from(&signed, &fill, &mut fb, now).unwrap();
            let pc = c.prepare_from(&unsigned, &fill, &mut fc, now).unwrap();
            prop_assert_eq!((pa.id, pb.id), (pc.id, pc.id));
        }
        let pa = a.prepare(&Call::Place(order), &mut fa, now).unwrap();
        let pb = b.prepare_from(&signed, &fill, &mut fb, now).unwrap();
        let pc = c.prepare_from(&unsigned, &fill, &mut fc, now).unwrap();
        prop_assert_eq!(&fa[..], fb.as_bytes());
        prop_assert_eq!(same(&pa), same(&pb));
        prop_assert_eq!(same(&pa), same(&pc));
        // The send path's `Text`, on a fourth session at the same point: the same
        // bytes as the `String`, the same pending request, and text.
        let mut d = session(recv_window, true);
        let mut fd = Text::default();
        for _ in 0..earlier {
            d.prepare_frame(&unsigned, &fill, &mut fd, now).unwrap();
        }
        let pd = d.prepare_frame(&unsigned, &fill, &mut fd, now).unwrap();
        prop_assert_eq!(fd.as_bytes(), fc.as_bytes());
        prop_assert_eq!(core::str::from_utf8(fd.as_bytes()), Ok(fc.as_str()));
        prop_assert_eq!(same(&pd), same(&pc));
        let fa = String::from_utf8(fa).unwrap();
        prop_assert_eq!(logged_on(&fa), fc);
        prop_assert_eq!(
            (a.in_flight(), b.in_flight(), c.in_flight()),
            (earlier + 1, earlier + 1, earlier + 1)
        );
    }
}

#[test]
fn a_logged_on_frame_carries_no_key_and_no_signature() {
    let mut s = session(5000, false);
    let t = s
        .order_template(
            Symbol::new("BTCUSDT").unwrap(),
            Side::Buy,
            OrderType::Limit(TimeInForce::Gtc),
            Signing::Session,
        )
        .unwrap();
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("x1").unwrap(),
    };
    let mut out = String::new();
    let p = s.prepare_from(&t, &fill, &mut out, 10 * SEC).unwrap();
    assert_eq!(
        out,
        "{\"id\":1,\"method\":\"order.place\",\"params\":{\"newClientOrderId\":\"x1\",\
         \"price\":\"0.1\",\"quantity\":\"1\",\"recvWindow\":5000,\"side\":\"BUY\",\
         \"symbol\":\"BTCUSDT\",\"timeInForce\":\"GTC\",\"timestamp\":1499827319559,\
         \"type\":\"LIMIT\"}}"
    );
    assert_eq!(p.deadline_ns, 15 * SEC);
}

#[test]
fn bad_fills_change_nothing() {
    let mut keyless = session(5000, false);
    let symbol = Symbol::new("BTCUSDT").unwrap();
    assert_eq!(
        keyless
            .order_template(symbol, Side::Buy, OrderType::PostOnly, Signing::PerRequest)
            .unwrap_err(),
        Error::NoKey
    );
    let mut s = session(5000, true);
    let limit = s
        .order_template(symbol, Side::Buy, OrderType::PostOnly, Signing::PerRequest)
        .unwrap();
    let market = s
        .order_template(symbol, Side::Buy, OrderType::Market, Signing::Session)
        .unwrap();
    let q = Decimal::new("2").unwrap();
    let no_price = Fill {
        price: None,
        quantity: q,
        client_order_id: ClientOrderId::new("a").unwrap(),
    };
    let priced = Fill {
        price: Some(q),
        ..no_price
    };
    let mut out = String::from("junk");
    for (t, f) in [(&limit, &no_price), (&market, &priced)] {
        assert!(matches!(
            s.prepare_from(t, f, &mut out, 0),
            Err(PrepareError::Bad(Error::BadArgument(_)))
        ));
        assert!(out.is_empty());
    }
    // A per-request template on a session without a key; one of another window.
    assert_eq!(
        keyless
            .prepare_from(&limit, &priced, &mut out, 0)
            .unwrap_err(),
        PrepareError::Bad(Error::NoKey)
    );
    let mut other = session(6000, true);
    assert!(other.prepare_from(&limit, &priced, &mut out, 0).is_err());
    assert_eq!(
        (s.in_flight(), keyless.in_flight(), other.in_flight()),
        (0, 0, 0)
    );
    assert!(out.is_empty());
}

#[test]
fn a_template_asks_for_its_parts_again_once_the_limits_may_have_changed() {
    let mut s = session(5_000, true);
    let t = s
        .order_template(
            Symbol::new("LTCBTC").unwrap(),
            Side::Buy,
            OrderType::Limit(TimeInForce::Gtc),
            Signing::Session,
        )
        .unwrap();
    let fill = Fill {
        price: Some(Decimal::new("0.1").unwrap()),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("a").unwrap(),
    };
    let mut out = Text::default();
    let before = s.prepare_frame(&t, &fill, &mut out, 0).unwrap();
    assert_eq!(before.parts, s.adapter().parts(Request::Order).unwrap());
    assert_eq!(
        before.parts.len(),
        4,
        "the IP gate, weight, orders, raw requests"
    );
    // The orders limit taken away through `adapter_mut`: the template's kept parts
    // are stale, and the frame charges what the adapter says now.
    s.adapter_mut()
        .limits
        .limits_mut()
        .retain(|l| l.counts != crate::binance_spot::Counts::Orders);
    let after = s.prepare_frame(&t, &fill, &mut out, 0).unwrap();
    assert_eq!(after.parts, s.adapter().parts(Request::Order).unwrap());
    assert_eq!(after.parts.len(), 3);
    // Another session's template: its own adapter's parts, not the template's.
    let mut other = session(5_000, true);
    other
        .adapter_mut()
        .limits
        .limits_mut()
        .retain(|l| l.counts != crate::binance_spot::Counts::Raw);
    let p = other.prepare_frame(&t, &fill, &mut out, 0).unwrap();
    assert_eq!(p.parts, other.adapter().parts(Request::Order).unwrap());
    assert_eq!(p.parts.len(), 3);
}
