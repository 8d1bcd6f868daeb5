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

use ergon_gateway::{self as gateway, Gateway, Keys, WsLane};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::{
    Account as SimAccount, Config, Fault, Server, ED25519_TEST_API_KEY, ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::binance_spot::BinanceSpot;

#[allow(dead_code)] // open and open_silent_after serve the other binaries
mod ws_gateway;

#[path = "ws_gateway/chain.rs"]
mod chain;
#[path = "ws_gateway/revoke.rs"]
mod revoke;
use chain::{place, run_chain, Place};

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

#[test]
fn orders_go_unsigned_after_logon_and_a_reconnect_logs_on_again() {
    let mut c = sim();
    c.faults.script = vec![(1, Fault::ExecuteThenClose)];
    let server = Server::start(c).unwrap();
    // drop-1; after-1 once logged on and streaming again.
    let calls: Vec<(Place<_>, _)> = vec![(place, "drop-1"), (place, "after-1")];
    let back = |l: &WsLane| l.ready() && l.streaming();
    let (events, st, _, _) = run_chain(open(&server), calls, back);
    assert_eq!(
        events,
        [
            "Reconciling { tag: 1 }",
            "Reconciled { tag: 1, found: Some(New) }",
            "Applied 2",
        ]
    );
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
