//! A place-order round trip over Binance Spot's WebSocket API against the same
//! over HTTP/1.1 keep-alive, through the gateway, against the in-process emulator
//! on loopback, in the same run: one order at a time (submit → Applied → the
//! next), IOC orders that never rest. It prints the medians and their ratio (the
//! README quotes it) and asserts only that every order was applied over the
//! transport under test: times on a shared machine are not asserted.
//!
//! `cargo test --release --test e2e_ws_bench -- --nocapture`

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{
    self as gateway, Account, Api, Event, Gateway, Keys, Prepared, Start, Strategy,
};
use ergon_gateway::{WsApiStart, WsState};
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, Server};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const MS: i64 = 1_000_000;
/// Orders timed per transport (after `WARM` untimed ones).
const N: usize = 400;
const WARM: usize = 50;

struct OneAtATime {
    /// Client order ids are `prefix` and a count: unique per run.
    prefix: &'static str,
    req: Prepared,
    seq: usize,
    sent_at: i64,
    times: Vec<i64>,
    failed: usize,
}

impl OneAtATime {
    fn place(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        let now = api.now();
        self.seq += 1;
        let cid = ClientOrderId::new(&format!("{}{}", self.prefix, self.seq)).unwrap();
        let o = NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Buy,
            order_type: OrderType::Limit(TimeInForce::Ioc),
            price: Some(Decimal::new("49000").unwrap()),
            quantity: Decimal::new("0.01").unwrap(),
            client_order_id: cid,
            reduce_only: false,
        };
        api.venue_mut().new_order(&mut self.req, &o, now).unwrap();
        self.sent_at = now;
        if api.submit(&mut self.req, Class::Normal, 1).is_err() {
            self.failed += 1;
            api.stop();
        }
    }
}

impl Strategy<BinanceSpot> for OneAtATime {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        if !ev.is_final() {
            return;
        }
        if !matches!(ev, Event::Applied { .. }) {
            self.failed += 1;
        }
        if self.seq > WARM {
            self.times.push(api.now() - self.sent_at);
        }
        if self.seq >= WARM + N {
            api.stop();
        } else {
            self.place(api);
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        if self.seq == 0 {
            self.place(api);
        }
    }
}

/// Median round trip over `ws` or HTTP, and how many went over the WebSocket API.
fn round_trips(server: &Server, ws: bool) -> (i64, u64) {
    let cfg = server.config();
    let keys = Keys {
        api_key: &cfg.accounts[0].api_key,
        secret: cfg.accounts[0].secret.as_bytes(),
        passphrase: None,
    };
    let mut start = Start::new(server.addr(), server.addr().to_string());
    start.connections = 1;
    if ws {
        let url = format!("ws://{}/ws-api/v3", server.addr());
        start.ws_api = Some(WsApiStart::from_url(&url, false).unwrap());
    }
    let declare = |boot: &gateway::Boot, b: &mut _| BinanceSpot::declare(boot, b, &keys, 30 * MS);
    let (mut lp, mut gw, pool) = Gateway::start(&start, "BTCUSDT", declare).unwrap();
    if ws {
        let probe;
        (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 3_000 * MS);
        assert!(probe.order_entry, "{probe:?}");
    }
    let before = server.report().ws.api_requests;
    let s = OneAtATime {
        prefix: if ws { "ws" } else { "http" },
        req: Prepared::with_capacity(1024),
        seq: 0,
        sent_at: 0,
        times: Vec::with_capacity(N),
        failed: 0,
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(gateway::Control::default())).unwrap();
    let mut t = d.strategy.times;
    assert_eq!(d.strategy.failed, 0, "every order applied");
    assert_eq!(t.len(), N);
    if ws {
        let lane = d.gateway.ws_api().unwrap();
        assert_eq!(lane.state(), WsState::Open);
    }
    t.sort_unstable();
    (t[N / 2], server.report().ws.api_requests - before)
}

#[test]
fn a_place_order_round_trip_over_the_websocket_api_against_http() {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 1_000_000),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    let server = Server::start(c).unwrap();
    let (http, over_ws) = round_trips(&server, false);
    assert_eq!(over_ws, 0, "HTTP only");
    let (ws, over_ws) = round_trips(&server, true);
    assert!(
        over_ws >= (N + WARM) as u64,
        "every order over the WebSocket API"
    );
    let r = server.stop();
    assert_eq!(
        (r.throttled, r.bans, r.duplicates, r.duplicate_rejects),
        (0, 0, 0, 0)
    );
    println!(
        "place-order round trip, median of {N}: WebSocket API {:.1} us, HTTP keep-alive {:.1} us, HTTP/WS {:.2}",
        ws as f64 / 1e3,
        http as f64 / 1e3,
        http as f64 / ws as f64
    );
}
