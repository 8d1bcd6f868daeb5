//! Deribit's order lane (JSON-RPC over WebSocket) in the in-process gateway,
//! against the emulator's `deribit` profile: its setup (auth, cancel-on-
//! disconnect, heartbeat) charges the adapter's `switch` reserve, and a setup
//! request the budget refuses waits for room and goes, never dropped (a
//! restarted gateway books its predecessor's recent calls: here, all but two
//! requests of the reserve).

use ergon_gateway::shm::Charged;
use ergon_gateway::ws_api::WsApiStart;
use ergon_gateway::{self as gateway, Account, Gateway, Keys, Start};
use ergon_venue_sim::{Config, Server};
use ergon_venues::deribit::{Deribit, SWITCH_CREDITS_MAX};

const SEC: i64 = 1_000_000_000;

#[test]
fn a_setup_the_budget_refuses_waits_for_the_reserve_and_the_lane_is_set_up() {
    let c = Config::deribit();
    let server = Server::start(c.clone()).unwrap();
    let mut start = Start::new(server.addr(), server.addr().to_string());
    start.ws_api = Some(WsApiStart::of_path(&start, None, "/ws/api/v2", false).unwrap());
    // The predecessor's calls: the reserve has room for two requests of 500.
    start.recent = vec![Charged {
        bucket: "switch".into(),
        at_ns: ergon_io::clock::now_ns(),
        units: SWITCH_CREDITS_MAX - 1_000,
    }];
    let a = &c.accounts[0];
    let keys = Keys {
        api_key: &a.api_key,
        secret: a.secret.as_bytes(),
        passphrase: None,
    };
    let (mut lp, gw, pool) = Gateway::start(&start, "BTC-PERPETUAL", |boot, b| {
        Deribit::declare(boot, b, &keys, 0)
    })
    .unwrap();
    let (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 10 * SEC);
    assert!(probe.order_entry, "{probe:?}");
    let lane = gw.ws_api().expect("the lane");
    assert!(lane.is_set_up() && lane.ready());
    // Auth and cancel-on-disconnect went at once; the heartbeat waited for 500
    // credits of the reserve's refill.
    assert!(lane.stats().setup_retries >= 1, "{:?}", lane.stats());
    assert_eq!(lane.stats().subscribed, 1);
    let r = server.report().deribit_ws;
    assert_eq!(r.auths, 1, "{r:?}");
}
