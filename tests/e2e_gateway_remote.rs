//! A strategy thread behind the boundary: it prepares orders with its own copy of
//! the venue's endpoints, submits them through a `RemoteHandle`, and receives the
//! gateway's typed events (place Applied, cancel Applied, a cancel of an order
//! that is gone Rejected), while the gateway runs on the loop thread against the
//! emulator. With the WebSocket API's user data stream on, the strategy thread
//! also receives the order updates (typed `Execution`s) of what it placed and
//! canceled.

mod ws_gateway;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ergon_core::Class;
use ergon_gateway::{
    self as gateway, remote, Control, Delivered, Event, Gateway, RemoteHandle, Start,
};
use ergon_venue_sim::{Config, Server};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderState, OrderType, Side, Symbol,
    TimeInForce,
};

fn wait_for(h: &mut ergon_gateway::RemoteHandle, tag: u64) -> Delivered {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        while let Some(d) = h.poll() {
            if d.event.tag() == tag && d.event.is_final() {
                return d;
            }
        }
        // The loop runs on its own thread against a real socket: poll its answer
        // (bounded above), nothing here waits for time itself to pass.
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no final event for {tag}");
}

#[test]
fn a_strategy_thread_places_and_cancels_through_the_gateway() {
    let server = Server::start(Config::binance_spot()).unwrap();
    let account = server.config().accounts[0].clone();
    let auth = Auth::new(&account.api_key, account.secret.as_bytes(), 5_000).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let (mut lp, gw, pool) = Gateway::start(&start, "BTCUSDT", |boot, b| {
        let info = boot.limits.as_deref().unwrap_or_default();
        BinanceSpot::from_exchange_info(info, b, boot.clock, 30_000_000)
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    })
    .unwrap();
    // The strategy thread's own endpoints: same buckets, same clock, same key.
    let mut venue = gw.venue().clone();
    let (loop_side, mut handle) = remote(8, 1024).unwrap();
    loop_side.attach(&mut lp).unwrap();
    let runner = std::thread::spawn(move || {
        let d = gateway::run(&mut lp, gw, pool, loop_side, Arc::new(Control::default())).unwrap();
        (*d.gateway.stats(), d.strategy.lost)
    });

    let symbol = Symbol::new("BTCUSDT").unwrap();
    let cid = ClientOrderId::new("remote-1").unwrap();
    let now = || ergon_io::clock::now_ns();
    let mut req = handle.buffer();
    let order = NewOrder {
        symbol,
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("40000.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: cid,
        reduce_only: false,
    };
    venue.new_order(&mut req, &order, now()).unwrap();
    handle.submit(req, Class::Normal, 1).unwrap();
    let placed = wait_for(&mut handle, 1);
    assert!(
        matches!(placed.event, Event::Applied { tag: 1, .. }),
        "{placed:?}"
    );
    assert!(
        String::from_utf8_lossy(&placed.body).contains("remote-1"),
        "the answer's body comes along: {placed:?}"
    );

    let mut req = handle.buffer();
    let it = OrderRef {
        symbol,
        client_order_id: cid,
    };
    venue.cancel(&mut req, &it, now()).unwrap();
    handle.submit(req, Class::Normal, 2).unwrap();
    let canceled = wait_for(&mut handle, 2);
    assert!(
        matches!(canceled.event, Event::Applied { tag: 2, .. }),
        "{canceled:?}"
    );

    // The same cancel again: the order is gone, the venue refuses it.
    let mut req = handle.buffer();
    venue.cancel(&mut req, &it, now()).unwrap();
    handle.submit(req, Class::Normal, 3).unwrap();
    let again = wait_for(&mut handle, 3);
    assert_eq!(again.event, Event::Rejected { tag: 3 });
    assert_eq!(handle.in_flight(), 0);

    handle.stop();
    let (stats, lost) = runner.join().unwrap();
    assert_eq!((stats.applied, stats.rejected, lost), (2, 1, 0));
    let r = server.stop();
    assert_eq!(
        (r.executions, r.duplicates),
        (1, 0),
        "the order placed once"
    );
    assert_eq!(r.cancels, 1);
}

/// The next order update of `cid` in `state`, skipping others (bounded wait).
fn wait_update(h: &mut RemoteHandle, cid: &str, state: OrderState) -> Execution {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        while let Some(x) = h.poll_update() {
            if x.client_order_id.as_str() == cid && x.state == state {
                return x;
            }
        }
        while h.poll().is_some() {}
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no order update {cid} {state:?}");
}

#[test]
fn a_strategy_thread_receives_its_order_updates() {
    let server = Server::start(Config::binance_spot()).unwrap();
    let (mut lp, gw, pool) = ws_gateway::open(&server);
    let mut venue = gw.venue().clone();
    let (loop_side, mut handle) = remote(8, 1024).unwrap();
    loop_side.attach(&mut lp).unwrap();
    let runner = std::thread::spawn(move || {
        let d = gateway::run(&mut lp, gw, pool, loop_side, Arc::new(Control::default())).unwrap();
        (d.strategy.lost, d.strategy.lost_updates)
    });

    let symbol = Symbol::new("BTCUSDT").unwrap();
    let cid = ClientOrderId::new("remote-x1").unwrap();
    let now = || ergon_io::clock::now_ns();
    let mut req = handle.buffer();
    let order = NewOrder {
        symbol,
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("40000.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: cid,
        reduce_only: false,
    };
    venue.new_order(&mut req, &order, now()).unwrap();
    handle.submit(req, Class::Normal, 1).unwrap();
    let placed = wait_for(&mut handle, 1);
    assert!(matches!(placed.event, Event::Applied { .. }), "{placed:?}");
    let new = wait_update(&mut handle, "remote-x1", OrderState::New);
    assert!(!new.venue_order_id.is_empty(), "{new:?}");

    let mut req = handle.buffer();
    let it = OrderRef {
        symbol,
        client_order_id: cid,
    };
    venue.cancel(&mut req, &it, now()).unwrap();
    handle.submit(req, Class::Normal, 2).unwrap();
    let canceled = wait_for(&mut handle, 2);
    assert!(
        matches!(canceled.event, Event::Applied { .. }),
        "{canceled:?}"
    );
    // A cancel's update names the order it ended (`C`), or the order itself.
    let t0 = Instant::now();
    let ended = loop {
        assert!(t0.elapsed() < Duration::from_secs(5), "no CANCELED update");
        match handle.poll_update() {
            Some(x) if x.state == OrderState::Canceled => break x,
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    let names = [Some(ended.client_order_id), ended.orig_client_order_id];
    assert!(names.contains(&Some(cid)), "{ended:?}");
    assert_eq!(ended.venue_order_id, new.venue_order_id);

    handle.stop();
    assert_eq!(runner.join().unwrap(), (0, 0));
    let _ = server.stop();
}
