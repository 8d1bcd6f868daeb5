//! A strategy process over shared memory receives the gateway's order updates: an
//! in-process hub (as `ergon-gateway` runs it) over a gateway with the WebSocket
//! API's user data stream, against the emulator; a client attached to it places and
//! cancels an order and reads `ShmEvent::OrderUpdate` NEW, then CANCELED, of it.

mod ws_gateway;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::shm::{Call, ShmClient, ShmEvent};
use ergon_gateway::{self as gateway, Control};
use ergon_gatewayd::shm::{Hub, HubConfig};
use ergon_venue_sim::{Config, Server};
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
    let (mut lp, gw, pool) = ws_gateway::open(&server);
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
    let cid = c.next_client_order_id().unwrap();
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
