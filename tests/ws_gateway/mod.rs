//! What the end-to-end tests over Binance Spot's WebSocket API share: a gateway
//! on the in-process emulator, with order entry and the user data stream open.

use ergon_gateway::{self as gateway, Account, Boot, Gateway, Keys, Start, WsApiStart};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::Server;
use ergon_venues::binance_spot::BinanceSpot;

/// A gateway on `server`'s first account (a 30 ms guard on fixed windows), its
/// WebSocket API opened on `ws://ADDR/ws-api/v3` with the stream: both must open.
pub fn open(server: &Server) -> (EventLoop, Gateway<BinanceSpot>, PoolId) {
    open_silent_after(server, gateway::SILENT_NS)
}

/// [`open`], the connection given up after `silent_ns` without a frame.
pub fn open_silent_after(
    server: &Server,
    silent_ns: i64,
) -> (EventLoop, Gateway<BinanceSpot>, PoolId) {
    let cfg = server.config();
    let keys = Keys {
        api_key: &cfg.accounts[0].api_key,
        secret: cfg.accounts[0].secret.as_bytes(),
        passphrase: None,
    };
    open_with(server, &keys, silent_ns)
}

/// [`open`] with `keys` (an Ed25519 key's PEM as the secret: the lane logs on),
/// the connection given up after `silent_ns` without a frame.
pub fn open_with(
    server: &Server,
    keys: &Keys<'_>,
    silent_ns: i64,
) -> (EventLoop, Gateway<BinanceSpot>, PoolId) {
    let mut start = Start::new(server.addr(), server.addr().to_string());
    let mut ws = WsApiStart::of(&start, None, true).expect("ws api");
    ws.silent_ns = silent_ns;
    start.ws_api = Some(ws);
    let declare = |boot: &Boot, b: &mut _| BinanceSpot::declare(boot, b, keys, 30_000_000);
    let (mut lp, gw, pool) = Gateway::start(&start, "BTCUSDT", declare).expect("gateway");
    let (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 3_000_000_000);
    assert!(probe.order_entry && probe.stream, "{probe:?}");
    (lp, gw, pool)
}
