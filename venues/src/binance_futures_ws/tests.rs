//! USD-M's WebSocket API session: each method charges what its REST twin
//! charges on the USD-M adapter; the twins of the REST requests carry the same
//! parameters; a template twin is what the builder writes, byte for byte; Spot's
//! methods are refused before anything is reserved.

use proptest::prelude::*;

use super::*;
use crate::adapt::{Clock, Venue};
use crate::binance_auth::Auth;
use crate::binance_futures::DEFAULT_TABLE;
use crate::binance_spot::template::case::order_type;
use crate::binance_spot::template::tests::{API_KEY, SEC, SECRET};
use crate::binance_spot_ws::{Pending, PrepareError};
use crate::endpoint::{
    Amend, ClientOrderId, Decimal, Ed25519Key, Endpoints, NewOrder, OrderRef, OrderType, Prepared,
    Side, Symbol, TimeInForce,
};

fn futures(ed25519: bool) -> BinanceFutures {
    let auth = match ed25519 {
        true => Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[7; 32]), 2000),
        false => Auth::new(API_KEY, SECRET, 2000),
    };
    let mut b = ergon_core::Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_499_827_319_559);
    BinanceFutures::new(&mut b, clock, 0, DEFAULT_TABLE)
        .unwrap()
        .with_auth(auth.unwrap())
}

/// What a request charges and fixes: its kind, parts, deadline, client order id.
type Seen = (
    Request<'static>,
    Vec<ergon_core::Part>,
    i64,
    Option<ClientOrderId>,
);

fn same(p: &Pending) -> Seen {
    (p.kind, p.parts.to_vec(), p.deadline_ns, p.client_order_id)
}

fn order(cid: &str, order_type: OrderType, reduce_only: bool) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Sell,
        order_type,
        price: Some(Decimal::new("49000.5").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only,
    }
}

fn text(out: &[u8]) -> &str {
    core::str::from_utf8(out).unwrap()
}

#[test]
fn each_call_charges_its_rest_twin_and_names_usdm_parameters() {
    let mut rest = futures(false);
    let mut s = Session::over(rest.clone(), 8).unwrap();
    let (mut out, mut req) = (Vec::new(), Prepared::with_capacity(1024));
    let now = 20 * SEC;
    let r = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("c-1").unwrap(),
    };
    let post_only = order("c-1", OrderType::PostOnly, true);
    let amend = Amend {
        order: r,
        side: Side::Sell,
        price: Some(Decimal::new("48000").unwrap()),
        quantity: Some(Decimal::new("0.02").unwrap()),
    };
    // (call, its REST twin, what the frame must say)
    let place = s.prepare(&Call::Place(post_only), &mut out, now).unwrap();
    rest.new_order(&mut req, &post_only, now).unwrap();
    assert_eq!(same(&place), same_rest(&req));
    let f = text(&out);
    assert!(f.contains("\"method\":\"order.place\""), "{f}");
    assert!(f.contains("\"type\":\"LIMIT\"") && f.contains("\"timeInForce\":\"GTX\""));
    assert!(f.contains("\"reduceOnly\":\"true\""), "{f}");
    let modify = s.prepare(&Call::Modify(amend), &mut out, now).unwrap();
    rest.amend(&mut req, &amend, now).unwrap();
    assert_eq!(same(&modify), same_rest(&req));
    assert!(text(&out).contains("\"method\":\"order.modify\""));
    assert!(text(&out).contains("\"origClientOrderId\":\"c-1\",\"price\":\"48000\""));
    let cancel = s.prepare(&Call::Cancel(r), &mut out, now).unwrap();
    rest.cancel(&mut req, &r, now).unwrap();
    assert_eq!(same(&cancel), same_rest(&req));
    let status = s.prepare(&Call::Status(r), &mut out, now).unwrap();
    rest.query_order(&mut req, &r, now).unwrap();
    assert_eq!(same(&status), same_rest(&req));
    // The documented weights, on the adapter's limits: orders weigh 0 on the IP
    // and 1 on each ORDERS limit, a cancel and a query 1.
    let weight = |p: &Pending| -> u32 {
        let w = rest
            .limits
            .of(crate::binance_spot::Counts::Weight)
            .next()
            .unwrap();
        p.parts
            .iter()
            .filter(|x| x.bucket == w.bucket)
            .map(|x| x.cost)
            .sum()
    };
    assert_eq!(
        [&place, &modify, &cancel, &status].map(weight),
        [0, 0, 1, 1]
    );
    assert_eq!(place.parts, rest.parts(Request::Order).unwrap());
    assert_eq!(s.in_flight(), 4);
}

fn same_rest(p: &Prepared) -> Seen {
    (
        p.kind().unwrap(),
        p.parts().to_vec(),
        p.deadline_ns(),
        p.client_order_id().copied(),
    )
}

#[test]
fn spot_methods_are_refused_and_reserve_nothing() {
    let mut s = Session::over(futures(true), 4).unwrap();
    let mut out = Vec::new();
    let o = order("c-1", OrderType::Market, false);
    let spot_only = [
        Call::Subscribe,
        Call::Account,
        Call::OpenOrders(None),
        Call::ExchangeInfo(None),
        Call::CancelReplace {
            cancel: o.client_order_id,
            new: o,
        },
    ];
    for call in spot_only {
        let r = s.prepare(&call, &mut out, 20 * SEC);
        assert_eq!(r, Err(PrepareError::Bad(Error::Unsupported)), "{call:?}");
        assert!(out.is_empty());
    }
    assert_eq!(s.in_flight(), 0);
    // Spot's session has no order.modify.
    let spot = crate::binance_spot::BinanceSpot::from_exchange_info(
        crate::binance_spot::template::tests::INFO,
        &mut ergon_core::Budget::builder(),
        Clock::anchor(0, 0),
        0,
    )
    .unwrap();
    let mut spot = binance_spot_ws::Session::over(spot, 1).unwrap();
    let amend = Amend {
        order: OrderRef {
            symbol: o.symbol,
            client_order_id: o.client_order_id,
        },
        side: Side::Buy,
        price: o.price,
        quantity: Some(o.quantity),
    };
    let r = spot.prepare(&Call::Modify(amend), &mut out, 0);
    assert_eq!(r, Err(PrepareError::Bad(Error::Unsupported)));
    assert_eq!(spot.in_flight(), 0);
}

#[test]
fn the_rest_twins_are_usdm_methods() {
    let mut rest = futures(false);
    let mut s = Session::over(rest.clone(), 4).unwrap();
    let (mut out, mut req) = (Vec::new(), Prepared::with_capacity(1024));
    rest.book(&mut req, Symbol::new("BTCUSDT").unwrap(), 5, 0)
        .unwrap();
    let r = s.prepare_rest(&req, &mut out);
    assert!(matches!(r, Err(PrepareError::Bad(_))), "{r:?}");
    let o = order("c-9", OrderType::Limit(TimeInForce::Ioc), true);
    rest.new_order(&mut req, &o, 30 * SEC).unwrap();
    let p = s.prepare_rest(&req, &mut out).unwrap();
    assert_eq!(same(&p), same_rest(&req));
    let f = text(&out);
    assert!(f.contains("\"method\":\"order.place\""), "{f}");
    assert!(f.contains("\"reduceOnly\":\"true\""), "{f}");
    // A reduce-only order is no template's: the builder writes it.
    let mut t = String::new();
    assert_eq!(s.prepare_rest_order(&req, &mut t), Ok(None));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_template_twin_is_what_the_builders_write(
        order_type in order_type(),
        buy in any::<bool>(),
        id in "[a-zA-Z0-9._:/-]{1,36}",
        now in 0i64..1_000_000 * SEC,
        ed25519 in any::<bool>(),
        logged_on in any::<bool>(),
    ) {
        let priced = !matches!(order_type, OrderType::Market);
        let o = NewOrder {
            symbol: Symbol::new("ETHUSDT").unwrap(),
            side: if buy { Side::Buy } else { Side::Sell },
            order_type,
            price: priced.then(|| Decimal::new("3000.25").unwrap()),
            quantity: Decimal::new("1.5").unwrap(),
            client_order_id: ClientOrderId::new(&id).unwrap(),
            reduce_only: false,
        };
        let mut rest = futures(ed25519);
        let mut req = Prepared::with_capacity(1024);
        rest.new_order(&mut req, &o, now).unwrap();
        let mut a = Session::over(rest, 4).unwrap();
        a.set_logged_on(logged_on);
        let mut b = a.clone();
        let (mut fa, mut fb) = (Vec::new(), String::new());
        let pa = a.prepare_rest(&req, &mut fa).unwrap();
        let pb = b.prepare_rest_order(&req, &mut fb).unwrap().unwrap();
        prop_assert_eq!(&fa[..], fb.as_bytes());
        prop_assert_eq!(same(&pa), same(&pb));
        prop_assert_eq!(b.templates(), 1);
        prop_assert_eq!(fb.contains("\"signature\""), !logged_on);
    }
}
