//! A chain of calls over a venue's WebSocket API lane, for any venue, run to its
//! end through the gateway's own driver (`gateway::run`): each call is sent once
//! the one before it ended, and the last one only once the lane is back (the
//! test's venue dropped the connection on the call before it). What the
//! end-to-end tests of a drop share (Binance Spot logged on and with its stream,
//! USD-M), and the order they place; each test keeps its own assertions on the
//! events and the venue.

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Account, Api, Driver, Event, Gateway, Prepared, Strategy};
use ergon_gateway::{WsApiStats, WsLane};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const MS: i64 = 1_000_000;

/// Sends a call (an order, its cancel) with a client order id and a tag: the
/// submit's refusal, if any.
pub type Place<E> = fn(&mut Prepared, &mut Api<'_, '_, E>, &str, u64) -> Option<Event<'static>>;

/// A limit buy of 0.01 BTCUSDT at 49000, good till cancelled, with client order
/// id `cid`.
pub fn order(cid: &str) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("49000").unwrap()),
        quantity: Decimal::new("0.01").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    }
}

/// [`order`] `cid` placed with tag `tag`, on any venue: the submit's refusal, if any.
pub fn place<E: Account>(
    req: &mut Prepared,
    api: &mut Api<'_, '_, E>,
    cid: &str,
    tag: u64,
) -> Option<Event<'static>> {
    let now = api.now();
    api.venue_mut().new_order(req, &order(cid), now).unwrap();
    api.submit(req, Class::Normal, tag).err()
}

/// An event as the tests compare them.
pub fn text(ev: &Event<'_>) -> String {
    match ev {
        Event::Applied { tag, .. } => format!("Applied {tag}"),
        other => format!("{other:?}"),
    }
}

/// The calls of a chain, in order, tagged 1, 2, ...; the last is sent once
/// `back` says the lane is back after the drop.
struct Chain<E> {
    calls: Vec<(Place<E>, &'static str)>,
    back: fn(&WsLane) -> bool,
    req: Prepared,
    /// How many calls were sent.
    sent: usize,
    /// The call before the last ended: the last waits for the lane.
    waiting: bool,
    events: Vec<String>,
}

impl<E: Account> Chain<E> {
    fn send(&mut self, api: &mut Api<'_, '_, E>) {
        let (call, cid) = self.calls[self.sent];
        self.sent += 1;
        let tag = self.sent as u64;
        assert_eq!(call(&mut self.req, api, cid, tag), None, "{cid} refused");
    }
}

impl<E: Account> Strategy<E> for Chain<E> {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        self.events.push(text(&ev));
        if !ev.is_final() || ev.tag() != self.sent as u64 {
            return;
        }
        match self.calls.len() - self.sent {
            0 => api.stop(),
            1 => self.waiting = true,
            _ => self.send(api),
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        let now = api.now();
        if self.sent == 0 {
            self.send(api);
        }
        if self.waiting && api.ws_api().is_some_and(self.back) {
            self.waiting = false;
            self.send(api);
        }
        let _ = api.set_timer(1, now + 10 * MS);
    }
}

/// Runs `calls` (at least two: the last follows the drop) through the gateway
/// `started` to the last one's final event; the events as [`text`] writes them,
/// the lane's counters, the loop and the driver (the gateway's own counters).
pub fn run_chain<E: Account>(
    started: (EventLoop, Gateway<E>, PoolId),
    calls: Vec<(Place<E>, &'static str)>,
    back: fn(&WsLane) -> bool,
) -> (
    Vec<String>,
    WsApiStats,
    EventLoop,
    Driver<E, impl Strategy<E>>,
) {
    assert!(calls.len() >= 2, "a call, then one after the drop");
    let (mut lp, gw, pool) = started;
    let strategy = Chain {
        calls,
        back,
        req: Prepared::with_capacity(1024),
        sent: 0,
        waiting: false,
        events: Vec::new(),
    };
    let control = Arc::new(gateway::Control::default());
    let mut d = gateway::run(&mut lp, gw, pool, strategy, control).unwrap();
    let events = std::mem::take(&mut d.strategy.events);
    let st = *d.gateway.ws_api().expect("the lane").stats();
    (events, st, lp, d)
}
