//! A cancel-replace ends with each part's fate (issue 39, item 1): the gateway in
//! process against the emulator's Binance Spot profile on loopback, one request at
//! a time, each of the documented outcomes of `POST /api/v3/order/cancelReplace`:
//!
//! - `STOP_ON_FAILURE`, the cancel runs and the new order fails (-2021): the cancel
//!   ran, the new order did not; on main the request was Unknown and its reconcile
//!   asked only for the new order, whose "not found" ended it as "nothing ran",
//!   while the old order was CANCELED at the venue;
//! - `STOP_ON_FAILURE`, the cancel fails (-2022): neither ran, the new order was
//!   not attempted;
//! - `ALLOW_FAILURE`, the cancel fails and the new order is placed (-2021);
//! - the answer lost after the venue ran both (the emulator executes, then closes
//!   the connection): each part queried by its own client order id, the new order
//!   found resting and the old one found CANCELED.
//!
//! And a batch's items each end with their own fate (issue 39, item 2), on the
//! emulator's Bybit profile (`/v5/order/create-batch`): a batch with one item
//! refused (a duplicate `orderLinkId`), and a batch whose answer is lost after the
//! venue placed both orders, each item queried by its own id.

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{
    self as gateway, Account, Api, Control, Event, Gateway, ItemFate, Keys, OrderState, Prepared,
    Start, Strategy,
};
use ergon_venue_sim::{Config, Fault, Server};
use ergon_venues::binance_replace::ReplaceMode;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const SYMBOL: &str = "BTCUSDT";

/// One request of the script.
#[derive(Clone, Copy, Debug)]
enum Step {
    Place(&'static str),
    Replace {
        mode: ReplaceMode,
        cancel: &'static str,
        new: &'static str,
    },
}

const STEPS: [Step; 6] = [
    Step::Place("a0"),
    Step::Place("a1"),
    // a1 rests: the new order is refused (-2010 duplicate), after the cancel ran.
    Step::Replace {
        mode: ReplaceMode::StopOnFailure,
        cancel: "a0",
        new: "a1",
    },
    // No such order to cancel: the new order is not attempted.
    Step::Replace {
        mode: ReplaceMode::StopOnFailure,
        cancel: "zz0",
        new: "c0",
    },
    // No such order to cancel: the new order is placed anyway.
    Step::Replace {
        mode: ReplaceMode::AllowFailure,
        cancel: "zz1",
        new: "c1",
    },
    // The sixth order request: executed, then its connection closed unanswered.
    Step::Replace {
        mode: ReplaceMode::StopOnFailure,
        cancel: "a1",
        new: "d0",
    },
];

fn order(cid: &str) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new(SYMBOL).unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("40000.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    }
}

/// Runs the script, one request at a time; every event by step.
struct Script {
    req: Prepared,
    step: usize,
    waiting: bool,
    events: Vec<Vec<String>>,
}

impl Script {
    fn next(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        let Some(step) = STEPS.get(self.step).copied() else {
            api.stop();
            return;
        };
        let now = api.now();
        let v = api.venue_mut();
        match step {
            Step::Place(cid) => {
                use ergon_venues::endpoint::Endpoints;
                v.new_order(&mut self.req, &order(cid), now).unwrap();
            }
            Step::Replace { mode, cancel, new } => {
                use ergon_venues::endpoint::Endpoints;
                v.set_replace_mode(mode);
                let cr = CancelReplace {
                    cancel: ClientOrderId::new(cancel).unwrap(),
                    new: order(new),
                };
                v.cancel_replace(&mut self.req, &cr, now).unwrap();
            }
        }
        self.waiting = true;
        let tag = self.step as u64;
        if let Err(e) = api.submit(&mut self.req, Class::Normal, tag) {
            panic!("step {tag} refused: {e:?}");
        }
    }
}

impl Strategy<BinanceSpot> for Script {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        let tag = ev.tag() as usize;
        match ev {
            // A send handed back before any connection was idle: not a fate.
            Event::Retrying { .. } => {}
            Event::Applied { .. } => self.events[tag].push("Applied".into()),
            e => self.events[tag].push(format!("{e:?}")),
        }
        if ev.is_final() {
            assert_eq!(tag, self.step, "{ev:?}");
            self.step += 1;
            self.waiting = false;
            self.next(api);
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        if self.step == 0 && !self.waiting {
            self.next(api);
        }
    }
}

fn item(tag: u64, item: u8, fate: ItemFate) -> String {
    format!("{:?}", Event::Item { tag, item, fate })
}

#[test]
fn each_part_of_a_cancel_replace_ends_with_its_own_fate() {
    let mut c = Config::binance_spot();
    c.faults.script = vec![(6, Fault::ExecuteThenClose)];
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let a = &c.accounts[0];
    let keys = Keys {
        api_key: &a.api_key,
        secret: a.secret.as_bytes(),
        passphrase: None,
    };
    let (mut lp, gw, pool) = Gateway::start(&start, SYMBOL, |boot, b| {
        BinanceSpot::declare(boot, b, &keys, 0)
    })
    .unwrap();
    let s = Script {
        req: Prepared::with_capacity(1024),
        step: 0,
        waiting: false,
        events: vec![Vec::new(); STEPS.len()],
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(Control::default())).unwrap();
    let ev = &d.strategy.events;
    let settled = |tag| format!("{:?}", Event::BatchSettled { tag });
    assert_eq!(ev[0], ["Applied"]);
    assert_eq!(ev[1], ["Applied"]);
    // -2021, STOP_ON_FAILURE: item 0 is the new order, item 1 the cancel.
    assert_eq!(
        ev[2],
        [
            item(2, 0, ItemFate::Rejected),
            item(2, 1, ItemFate::Applied),
            settled(2)
        ]
    );
    // -2022, STOP_ON_FAILURE: the cancel refused, the new order not attempted.
    assert_eq!(
        ev[3],
        [
            item(3, 0, ItemFate::NotRun),
            item(3, 1, ItemFate::Rejected),
            settled(3)
        ]
    );
    // -2021, ALLOW_FAILURE: the new order placed, the cancel refused.
    assert_eq!(
        ev[4],
        [
            item(4, 0, ItemFate::Applied),
            item(4, 1, ItemFate::Rejected),
            settled(4)
        ]
    );
    // The answer lost: each part by its own id — the new order rests, the old one
    // was cancelled. "Not found" for one says nothing of the other.
    assert_eq!(
        ev[5],
        [
            format!("{:?}", Event::Reconciling { tag: 5 }),
            item(5, 0, ItemFate::Found(OrderState::New)),
            item(5, 1, ItemFate::Found(OrderState::Canceled)),
            settled(5)
        ]
    );
    let r = server.stop();
    assert_eq!(r.faults.execute_then_close, 1, "{:?}", r.faults);
    assert_eq!(r.duplicates, 0, "nothing executed twice: {r:?}");
    // The one -2010 is step 2's new order (a1 rested), caught by the venue.
    assert_eq!(r.duplicate_rejects, 1, "{r:?}");
}

/// Runs batches of Bybit orders, one request at a time; every event by step.
struct Batches {
    req: Prepared,
    steps: &'static [&'static [&'static str]],
    step: usize,
    waiting: bool,
    events: Vec<Vec<String>>,
}

impl Strategy<Bybit> for Batches {
    fn on_event(&mut self, api: &mut Api<'_, '_, Bybit>, ev: Event<'_>) {
        let tag = ev.tag() as usize;
        match ev {
            Event::Retrying { .. } => {}
            Event::Applied { .. } => self.events[tag].push("Applied".into()),
            e => self.events[tag].push(format!("{e:?}")),
        }
        if ev.is_final() {
            self.step += 1;
            self.waiting = false;
            self.on_turn(api);
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, Bybit>) {
        if self.waiting {
            return;
        }
        let Some(ids) = self.steps.get(self.step) else {
            api.stop();
            return;
        };
        let orders: Vec<NewOrder<'_>> = ids.iter().map(|c| order(c)).collect();
        let now = api.now();
        use ergon_venues::endpoint::Endpoints;
        match orders.len() {
            1 => api.venue_mut().new_order(&mut self.req, &orders[0], now),
            _ => api.venue_mut().batch_orders(&mut self.req, &orders, now),
        }
        .unwrap();
        self.waiting = true;
        let tag = self.step as u64;
        if let Err(e) = api.submit(&mut self.req, Class::Normal, tag) {
            panic!("step {tag} refused: {e:?}");
        }
    }
}

#[test]
fn each_item_of_a_batch_ends_with_its_own_fate() {
    let mut c = Config::bybit();
    c.symbol = SYMBOL.into();
    // The third order request (the second batch): placed, then its connection
    // closed unanswered.
    c.faults.script = vec![(3, Fault::ExecuteThenClose)];
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let (mut lp, gw, pool) = Gateway::start(&start, SYMBOL, |boot, b| {
        let a = &c.accounts[0];
        let auth =
            bybit::Auth::new(&a.api_key, a.secret.as_bytes(), 5_000).map_err(|e| e.to_string())?;
        Bybit::new(b, boot.clock, bybit::Config::default())
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    })
    .unwrap();
    const STEPS: &[&[&str]] = &[&["bb0"], &["bb1", "bb0", "bb2"], &["bb3", "bb4"]];
    let s = Batches {
        req: Prepared::with_capacity(4096),
        steps: STEPS,
        step: 0,
        waiting: false,
        events: vec![Vec::new(); STEPS.len()],
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(Control::default())).unwrap();
    let ev = &d.strategy.events;
    let settled = |tag| format!("{:?}", Event::BatchSettled { tag });
    assert_eq!(ev[0], ["Applied"]);
    // bb0 rests: its item is refused (110072), the others placed; nothing re-sent.
    assert_eq!(
        ev[1],
        [
            item(1, 0, ItemFate::Applied),
            item(1, 1, ItemFate::Rejected),
            item(1, 2, ItemFate::Applied),
            settled(1)
        ]
    );
    // The answer lost: each item by its own id, both found resting.
    assert_eq!(
        ev[2],
        [
            format!("{:?}", Event::Reconciling { tag: 2 }),
            item(2, 0, ItemFate::Found(OrderState::New)),
            item(2, 1, ItemFate::Found(OrderState::New)),
            settled(2)
        ]
    );
    let r = server.stop();
    assert_eq!(r.faults.execute_then_close, 1, "{:?}", r.faults);
    assert_eq!(r.duplicates, 0, "nothing executed twice: {r:?}");
    // The one refusal is the batch's bb0, caught by the venue; nothing re-sent.
    assert_eq!(r.duplicate_rejects, 1, "{r:?}");
    assert_eq!(r.executions, 5, "{r:?}");
}
