//! End to end over loopback, the gateway with a Binance Ed25519 key against the
//! in-process emulator (which verifies Ed25519 with ring and implements
//! `session.logon` as documented):
//! 1. the lane logs on at open, before the user data stream and the first order;
//!    orders then go without `apiKey`/`signature` and are accepted; a drop
//!    re-connects and logs on again before the next order;
//! 2. the venue revokes the key: the order that meets it is rejected, the
//!    revocation frame halts order entry with a named reason, and the next order
//!    is refused locally.

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Api, Event, Gateway, Keys, Prepared, Strategy};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::{
    Account as SimAccount, Config, Fault, Server, ED25519_TEST_API_KEY, ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

#[allow(dead_code)] // open and open_silent_after serve the other binaries
mod ws_gateway;

const MS: i64 = 1_000_000;

#[path = "ws_gateway/revoke.rs"]
mod revoke;
use revoke::text;

/// The emulator with one account, an Ed25519 key.
fn sim() -> Config {
    let mut c = Config::binance_spot();
    c.accounts = vec![SimAccount::ed25519_test()];
    c
}

/// A gateway whose key is the PEM (detected as Ed25519), its WebSocket API
/// opened with the stream: both must be ready (logged on, subscribed).
fn open(server: &Server) -> (EventLoop, Gateway<BinanceSpot>, PoolId) {
    let keys = Keys {
        api_key: ED25519_TEST_API_KEY,
        secret: ED25519_TEST_PRIVATE_PEM.as_bytes(),
        passphrase: None,
    };
    ws_gateway::open_with(server, &keys, gateway::SILENT_NS)
}

/// `cid` placed with tag `tag`; the submit's refusal, if any.
fn place(
    req: &mut Prepared,
    api: &mut Api<'_, '_, BinanceSpot>,
    cid: &str,
    tag: u64,
) -> Option<Event<'static>> {
    let o = NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49000").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    };
    let now = api.now();
    api.venue_mut().new_order(req, &o, now).unwrap();
    api.submit(req, Class::Normal, tag).err()
}

/// Places `drop-1` (the venue executes it and drops the connection before the
/// answer); once it settled and the lane is logged on and streaming again,
/// places `after-1`.
struct DropProbe {
    req: Prepared,
    step: u8,
    events: Vec<String>,
}

impl Strategy<BinanceSpot> for DropProbe {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        self.events.push(text(&ev));
        match (ev.is_final(), ev.tag()) {
            (true, 1) => self.step = 2,
            (true, _) => api.stop(),
            _ => {}
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        let now = api.now();
        if self.step == 0 {
            self.step = 1;
            assert_eq!(place(&mut self.req, api, "drop-1", 1), None);
        }
        let ready = api.ws_api().is_some_and(|l| l.ready() && l.streaming());
        if self.step == 2 && ready {
            self.step = 20;
            assert_eq!(place(&mut self.req, api, "after-1", 2), None);
        }
        let _ = api.set_timer(1, now + 10 * MS);
    }
}

#[test]
fn orders_go_unsigned_after_logon_and_a_reconnect_logs_on_again() {
    let mut c = sim();
    c.faults.script = vec![(1, Fault::ExecuteThenClose)];
    let server = Server::start(c).unwrap();
    let (mut lp, gw, pool) = open(&server);
    let strategy = DropProbe {
        req: Prepared::with_capacity(1024),
        step: 0,
        events: Vec::new(),
    };
    let control = Arc::new(gateway::Control::default());
    let d = gateway::run(&mut lp, gw, pool, strategy, control).unwrap();
    assert_eq!(
        d.strategy.events,
        [
            "Reconciling { tag: 1 }",
            "Reconciled { tag: 1, found: Some(New) }",
            "Applied 2",
        ]
    );
    let st = *d.gateway.ws_api().unwrap().stats();
    // Each open: the logon and the stream, both confirmed.
    assert_eq!((st.opens, st.drops, st.subscribed), (2, 1, 2), "{st:?}");
    assert_eq!(st.requests, 2, "drop-1 and after-1 as frames: {st:?}");
    assert_eq!(st.templated, 2, "both from their template: {st:?}");
    let r = server.stop();
    assert_eq!(r.ws.api_logons, 2, "logged on at each open: {:?}", r.ws);
    assert_eq!(r.ws.api_subscriptions, 2, "{:?}", r.ws);
    assert_eq!(
        r.ws.api_unsigned, 2,
        "both orders without apiKey and signature: {:?}",
        r.ws
    );
    assert_eq!(r.executions, 2, "drop-1 once, after-1 once");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));
    assert_eq!(r.signature_rejects, 0);
}

#[test]
fn a_revoked_logon_halts_order_entry_with_its_reason() {
    let server = Arc::new(Server::start(sim()).unwrap());
    let started = open(&server);
    revoke::a_revoked_logon_halts_order_entry(&server, started, place);
}
