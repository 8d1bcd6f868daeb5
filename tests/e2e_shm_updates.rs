//! A strategy process over shared memory receives the gateway's order updates: an
//! in-process hub (as `ergon-gateway` runs it) over a gateway with the WebSocket
//! API's user data stream, against the emulator; a client attached to it places and
//! cancels an order and reads `ShmEvent::OrderUpdate` NEW, then CANCELED, of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_io::gateway::shm::{Call, Hub, HubConfig, ShmClient, ShmEvent};
use ergon_io::gateway::{self, Control, Gateway, Start, WsApiStart};
use ergon_venue_sim::{Config, Server};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderState, OrderType, Side, Symbol, TimeInForce,
};

static STOP: AtomicBool = AtomicBool::new(false);

/// The next update in `state` that names `cid` (as the order or the one it ended),
/// reading the client's other events on the way (bounded wait on real sockets).
fn update(c: &mut ShmClient, cid: ClientOrderId, state: OrderState) -> Execution {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        c.wait(50);
        while let Some((ev, _)) = c.poll() {
            if let ShmEvent::OrderUpdate(x) = ev {
                let names = [Some(x.client_order_id), x.orig_client_order_id];
                if x.state == state && names.contains(&Some(cid)) {
                    return x;
                }
            }
        }
    }
    panic!("no {state:?} update of {cid:?}");
}

#[test]
fn a_shared_memory_client_receives_its_order_updates() {
    let server = Server::start(Config::binance_spot()).unwrap();
    let account = server.config().accounts[0].clone();
    let auth = Auth::new(&account.api_key, account.secret.as_bytes(), 5_000).unwrap();
    let mut start = Start::new(server.addr(), server.addr().to_string());
    start.ws_api = Some(WsApiStart::of(&start, None, true).unwrap());
    let (mut lp, gw, pool) = Gateway::start(&start, "BTCUSDT", |boot, b| {
        let info = boot.limits.as_deref().unwrap_or_default();
        BinanceSpot::from_exchange_info(info, b, boot.clock, 30_000_000)
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    })
    .unwrap();
    let (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 3_000_000_000);
    assert!(probe.warnings(true).is_empty(), "{probe:?}");
    let name = format!("updates-{}", std::process::id());
    let cfg = HubConfig {
        name: name.clone(),
        ..HubConfig::default()
    };
    let hub = Hub::bind(cfg, Some(&STOP)).unwrap();
    hub.attach(&mut lp).unwrap();
    let runner = std::thread::spawn(move || {
        gateway::run(&mut lp, gw, pool, hub, Arc::new(Control::default())).map(|_| ())
    });

    let mut c = ShmClient::attach(&name, "s1", false).unwrap();
    let symbol = Symbol::new("BTCUSDT").unwrap();
    let cid = ClientOrderId::new("shm-up-1").unwrap();
    let order = NewOrder {
        symbol,
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("40000.00").ok(),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: cid,
        reduce_only: false,
    };
    c.submit(&Call::NewOrder(order), Class::Normal, 1).unwrap();
    let new = update(&mut c, cid, OrderState::New);
    assert!(!new.venue_order_id.is_empty(), "{new:?}");
    let it = OrderRef {
        symbol,
        client_order_id: cid,
    };
    c.submit(&Call::Cancel(it), Class::Normal, 2).unwrap();
    let ended = update(&mut c, cid, OrderState::Canceled);
    assert_eq!(ended.venue_order_id, new.venue_order_id);

    STOP.store(true, Ordering::SeqCst);
    drop(c);
    runner.join().unwrap().unwrap();
    let r = server.stop();
    assert_eq!((r.executions, r.duplicates, r.cancels), (1, 0, 1));
}
