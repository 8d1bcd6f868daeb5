//! End to end over loopback, the gateway on Binance USD-M futures with an
//! Ed25519 key and its WebSocket API (`/ws-fapi/v1`) against the in-process
//! emulator (which verifies Ed25519 with ring, implements `session.logon` as
//! documented and serves USD-M's methods with USD-M's weights):
//! 1. the lane logs on at open (USD-M has no user data stream on it) and the
//!    orders go without `apiKey`/`signature`: one placed, cancelled over the
//!    lane; a drop after the venue ran the next one: reconciled, never re-sent,
//!    and the lane re-connects and logs on again before the next order;
//! 2. the venue revokes the key: the order that meets it is rejected, the
//!    revocation frame halts order entry with a named reason, and the next order
//!    is refused locally.
//!
//! The independent check is the emulator's truth: its orders, executions,
//! logons and unsigned requests.

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Account, Api, Boot, Event, Gateway, Keys, Prepared};
use ergon_gateway::{Start, WsApiStart, WsLane};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::{
    Account as SimAccount, Config, Fault, Server, ED25519_TEST_API_KEY, ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::binance_futures::BinanceFutures;
use ergon_venues::binance_futures_ws::PATH;
use ergon_venues::endpoint::{ClientOrderId, Endpoints, OrderRef, Symbol};

const MS: i64 = 1_000_000;

#[path = "ws_gateway/chain.rs"]
mod chain;
#[path = "ws_gateway/revoke.rs"]
mod revoke;
use chain::{place, run_chain, Place};

/// The USD-M emulator with one account, an Ed25519 key.
fn sim() -> Config {
    let mut c = Config::binance_futures();
    c.accounts = vec![SimAccount::ed25519_test()];
    c
}

/// A gateway whose key is the PEM (detected as Ed25519), its WebSocket API
/// opened on `/ws-fapi/v1` without a stream: it must be ready (logged on).
fn open(server: &Server) -> (EventLoop, Gateway<BinanceFutures>, PoolId) {
    let keys = Keys {
        api_key: ED25519_TEST_API_KEY,
        secret: ED25519_TEST_PRIVATE_PEM.as_bytes(),
        passphrase: None,
    };
    let mut start = Start::new(server.addr(), server.addr().to_string());
    start.ws_api = Some(WsApiStart::of_path(&start, None, PATH, false).expect("ws api"));
    let declare = |boot: &Boot, b: &mut _| BinanceFutures::declare(boot, b, &keys, 30 * MS);
    let (mut lp, gw, pool) = Gateway::start(&start, "BTCUSDT", declare).expect("gateway");
    let (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 3_000 * MS);
    assert!(probe.order_entry && !probe.stream, "{probe:?}");
    assert!(gw.ws_api().is_some_and(|l| l.ready()), "logged on");
    (lp, gw, pool)
}

/// `cid` cancelled with tag `tag`; the submit's refusal, if any.
fn cancel(
    req: &mut Prepared,
    api: &mut Api<'_, '_, BinanceFutures>,
    cid: &str,
    tag: u64,
) -> Option<Event<'static>> {
    let now = api.now();
    let r = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
    };
    api.venue_mut().cancel(req, &r, now).unwrap();
    api.submit(req, Class::Normal, tag).err()
}

#[test]
fn usdm_orders_and_a_cancel_go_unsigned_after_logon_and_a_reconnect_logs_on_again() {
    let mut c = sim();
    // The third order-changing request: drop-1.
    c.faults.script = vec![(3, Fault::ExecuteThenClose)];
    let server = Server::start(c).unwrap();
    // fa-1 placed and cancelled, drop-1 placed; after-1 once logged on again.
    let calls: Vec<(Place<_>, _)> = vec![
        (place, "fa-1"),
        (cancel, "fa-1"),
        (place, "drop-1"),
        (place, "after-1"),
    ];
    let (events, st, _, _) = run_chain(open(&server), calls, WsLane::ready);
    assert_eq!(
        events,
        [
            "Applied 1",
            "Applied 2",
            "Reconciling { tag: 3 }",
            "Reconciled { tag: 3, found: Some(New) }",
            "Applied 4",
        ]
    );
    // Each open: the logon, confirmed; no stream on USD-M's connection.
    assert_eq!((st.opens, st.drops, st.subscribed), (2, 1, 2), "{st:?}");
    assert!(
        st.requests >= 4,
        "fa-1, its cancel, drop-1, after-1: {st:?}"
    );
    assert_eq!(
        st.templated, 3,
        "the three orders from their template: {st:?}"
    );
    // The venue's book: fa-1 cancelled, drop-1 and after-1 resting.
    let mut orders: Vec<_> = server
        .orders()
        .into_iter()
        .map(|o| (o.client_id, o.status))
        .collect();
    orders.sort();
    let want = [("after-1", "NEW"), ("drop-1", "NEW"), ("fa-1", "CANCELED")];
    let want: Vec<_> = want
        .iter()
        .map(|(c, s)| (c.to_string(), s.to_string()))
        .collect();
    assert_eq!(orders, want);
    let r = server.stop();
    assert_eq!(r.ws.api_logons, 2, "logged on at each open: {:?}", r.ws);
    assert_eq!(r.ws.api_subscriptions, 0, "{:?}", r.ws);
    assert!(
        r.ws.api_unsigned >= 4,
        "every order and the cancel without apiKey and signature: {:?}",
        r.ws
    );
    assert_eq!(r.executions, 3, "fa-1, drop-1 once, after-1 once");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));
    assert_eq!(r.signature_rejects, 0);
}

#[test]
fn a_revoked_usdm_logon_halts_order_entry_with_its_reason() {
    let server = Arc::new(Server::start(sim()).unwrap());
    let started = open(&server);
    revoke::a_revoked_logon_halts_order_entry(&server, started, place);
}
