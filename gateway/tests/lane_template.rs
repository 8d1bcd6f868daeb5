//! Through the gateway's lane API (`LaneApi`, the session the gateway's
//! WebSocket lane drives): a new order's frame written from its template
//! (`prepare_text`) is byte for byte what the builders write for the same
//! request, `prepare_rest` (the REST twin) and `Session::prepare(Call::Place)`
//! (the order written parameter by parameter), with an HMAC key signed per
//! request and with an Ed25519 key logged on; a cancel has no template and goes
//! by the builder.

use ergon_core::Budget;
use ergon_gateway::lane_api::LaneApi;
use ergon_gateway::Prepared;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::binance_spot_ws::{Call, Session};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Ed25519Key, Endpoints, NewOrder, OrderRef, OrderType, Side, Symbol,
    Text, TimeInForce,
};

const SEC: i64 = 1_000_000_000;
const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

fn spot(ed25519: bool) -> BinanceSpot {
    let auth = match ed25519 {
        true => Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[9; 32]), 5000),
        false => Auth::new(API_KEY, b"secret", 5000),
    };
    let mut b = Budget::builder();
    BinanceSpot::from_exchange_info(INFO, &mut b, Clock::anchor(0, 1_700_000_000_000), 0)
        .unwrap()
        .with_auth(auth.unwrap())
}

fn orders() -> Vec<NewOrder<'static>> {
    let types = [
        OrderType::Limit(TimeInForce::Gtc),
        OrderType::Limit(TimeInForce::Ioc),
        OrderType::PostOnly,
        OrderType::Market,
    ];
    let mut v = Vec::new();
    for (i, t) in types.into_iter().cycle().take(12).enumerate() {
        let id: &'static str = Box::leak(format!("lane-{i}").into_boxed_str());
        v.push(NewOrder {
            symbol: Symbol::new(["BTCUSDT", "ETHUSDT"][i % 2]).unwrap(),
            side: [Side::Buy, Side::Sell][i / 4 % 2],
            order_type: t,
            price: (t != OrderType::Market).then(|| Decimal::new("49000.25").unwrap()),
            quantity: Decimal::new("0.015").unwrap(),
            client_order_id: ClientOrderId::new(id).unwrap(),
            reduce_only: false,
        });
    }
    v
}

fn check(ed25519: bool) {
    let mut rest = spot(ed25519);
    let mut session = Session::over(rest.clone(), 64).unwrap();
    session.set_logged_on(ed25519);
    let mut builder = session.clone();
    let mut twin = session.clone();
    let lane: &mut dyn LaneApi = &mut session;
    let (mut text, mut by_call, mut by_rest) = (Text::default(), Vec::new(), Vec::new());
    let mut req = Prepared::with_capacity(1024);
    for (i, o) in orders().iter().enumerate() {
        let now = (i as i64 + 1) * SEC;
        rest.new_order(&mut req, o, now).unwrap();
        let id = lane
            .prepare_text(&req, &mut text)
            .unwrap()
            .expect("a template");
        let a = builder
            .prepare(&Call::Place(*o), &mut by_call, now)
            .unwrap();
        let b = twin.prepare_rest(&req, &mut by_rest).unwrap();
        assert_eq!((id, id), (a.id, b.id));
        assert_eq!(text.as_bytes(), &by_call[..], "order {i}");
        assert_eq!(text.as_bytes(), &by_rest[..], "order {i}");
        let frame = text.to_str();
        assert_eq!(frame.contains("signature"), !ed25519, "{frame}");
        lane.sent(id);
    }
    assert_eq!(session.templates(), 8, "one per symbol, side and type");
    // A cancel: no template; the builder writes it.
    let r = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("lane-0").unwrap(),
    };
    rest.cancel(&mut req, &r, 20 * SEC).unwrap();
    let lane: &mut dyn LaneApi = &mut session;
    assert_eq!(lane.prepare_text(&req, &mut text), Ok(None));
    assert!(text.is_empty());
    let id = lane.prepare_rest(&req, &mut by_rest).unwrap();
    let frame = String::from_utf8(by_rest.clone()).unwrap();
    assert!(frame.contains("\"order.cancel\""), "{frame} ({id})");
}

#[test]
fn hmac_frames_from_templates_are_the_builders_frames() {
    check(false);
}

#[test]
fn logged_on_frames_from_templates_are_the_builders_frames() {
    check(true);
}
