//! Bybit's real-time query lists only the account's most recently closed orders
//! (500; 1 here, so the test needs few orders): an order cancelled or filled
//! before those is reconciled through the order history as found, in its final
//! state, not as NotFound (issue 26, item 2). The gateway and the emulator on
//! loopback; the emulator plays the documented retention
//! (<https://bybit-exchange.github.io/docs/v5/order/open-order>).

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Api, Control, Event, Gateway, OrderState, Prepared, Start};
use ergon_gateway::{Account, Strategy};
use ergon_venue_sim::{Config, Server};
use ergon_venues::bybit;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};

/// Where an order ended, tagged 100 and up.
const RECOVERED: u64 = 100;

#[derive(Clone, Copy)]
enum Step {
    Limit(&'static str),
    Market(&'static str),
    Cancel(&'static str),
    Recover(&'static str),
}

/// r0 cancelled, m0 filled, then r1 cancelled: with one closed order kept, the
/// real-time query lists r1 alone. Then r0 and m0 are reconciled.
const STEPS: [Step; 7] = [
    Step::Limit("r0"),
    Step::Cancel("r0"),
    Step::Market("m0"),
    Step::Limit("r1"),
    Step::Cancel("r1"),
    Step::Recover("r0"),
    Step::Recover("m0"),
];

struct Script {
    req: Prepared,
    step: usize,
    /// The final event of each step, in order.
    finals: Vec<String>,
}

impl Script {
    fn next<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        let Some(&step) = STEPS.get(self.step) else {
            api.stop();
            return;
        };
        let symbol = Symbol::new("BTCUSDT").unwrap();
        let id = |s| ClientOrderId::new(s).unwrap();
        let order = |s, order_type, price| NewOrder {
            symbol,
            side: Side::Buy,
            order_type,
            price,
            quantity: Decimal::new("0.01").unwrap(),
            client_order_id: id(s),
            reduce_only: false,
        };
        let now = api.now();
        let tag = self.step as u64;
        let v = api.venue_mut();
        let limit = OrderType::Limit(TimeInForce::Gtc);
        let sent = match step {
            Step::Limit(s) => {
                let o = order(s, limit, Some(Decimal::new("49000").unwrap()));
                v.new_order(&mut self.req, &o, now).unwrap();
                api.submit(&mut self.req, Class::Normal, tag)
            }
            Step::Market(s) => {
                v.new_order(&mut self.req, &order(s, OrderType::Market, None), now)
                    .unwrap();
                api.submit(&mut self.req, Class::Normal, tag)
            }
            Step::Cancel(s) => {
                let r = OrderRef {
                    symbol,
                    client_order_id: id(s),
                };
                v.cancel(&mut self.req, &r, now).unwrap();
                api.submit(&mut self.req, Class::Normal, tag)
            }
            Step::Recover(s) => {
                let r = OrderRef {
                    symbol,
                    client_order_id: id(s),
                };
                v.query_order(&mut self.req, &r, now).unwrap();
                api.recover(&mut self.req, RECOVERED + tag)
            }
        };
        sent.unwrap_or_else(|e| panic!("step {}: refused {e:?}", self.step));
    }
}

impl<E: Account> Strategy<E> for Script {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        if !ev.is_final() {
            return;
        }
        self.finals.push(format!("{ev:?}"));
        self.step += 1;
        self.next(api);
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        if self.step == 0 && self.finals.is_empty() && api.in_flight() == 0 {
            self.next(api);
        }
    }
}

#[test]
fn orders_closed_before_the_realtime_window_are_reconciled_from_the_history() {
    let c = Config {
        bybit_closed_kept: 1,
        ..Config::bybit()
    };
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let a = &c.accounts[0];
    let (mut lp, mut gw, pool) = Gateway::start(&start, "BTCUSDT", |boot, b| {
        let auth =
            bybit::Auth::new(&a.api_key, a.secret.as_bytes(), 5_000).map_err(|e| e.to_string())?;
        bybit::Bybit::new(b, boot.clock, bybit::Config::default())
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    })
    .unwrap();
    // Bybit states no NotFound bound: without the history the recoveries would
    // end Unresolved after this long.
    gw.set_unresolved_after_ns(2_000_000_000);
    let s = Script {
        req: Prepared::with_capacity(1024),
        step: 0,
        finals: Vec::new(),
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(Control::default())).unwrap();
    let report = server.stop();
    let finals = &d.strategy.finals;
    assert_eq!(finals.len(), STEPS.len(), "{finals:?}");
    assert!(
        finals[..5].iter().all(|f| f.starts_with("Applied")),
        "{finals:?}"
    );
    let reconciled = |tag: u64, state: OrderState| {
        format!(
            "{:?}",
            Event::Reconciled {
                tag: RECOVERED + tag,
                found: Some(state)
            }
        )
    };
    assert_eq!(
        finals[5..],
        [
            reconciled(5, OrderState::Canceled),
            reconciled(6, OrderState::Filled)
        ],
        "found in the history, not NotFound"
    );
    assert_eq!(report.duplicates, 0);
}
