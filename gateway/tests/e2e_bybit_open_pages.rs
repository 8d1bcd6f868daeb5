//! Bybit's open orders come by pages of at most 50, newest first
//! (<https://bybit-exchange.github.io/docs/v5/order/open-order>: `limit`
//! "[1, 50]", `nextPageCursor`), and the emulator pages so. A poll's
//! `OpenOrders` events list every page's orders (issue 43): one event a page,
//! `page` 0 first, the last with `more` false. On main only the first page made
//! an event (and a poll with no id watched asked no second page), so a client
//! reading its open orders from the polls missed every order behind the 50
//! newest. The gateway and the emulator on loopback, 60 orders resting.

use std::collections::BTreeSet;
use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Api, Control, Event, Gateway, Prepared, Start};
use ergon_gateway::{Account, Strategy};
use ergon_venue_sim::{Config, LimitType, Server};
use ergon_venues::bybit;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

/// Orders placed: more than one page of 50.
const ORDERS: usize = 60;
/// The create limit of this account, orders a rolling second (the venue's and
/// the adapter's), above the documented default of 10 so that the test is short.
const CREATE_PER_S: u64 = 100;

struct Script {
    req: Prepared,
    placed: Vec<String>,
    applied: usize,
    polled: bool,
    /// Each OpenOrders event: its ids, and what the event said of its page.
    polls: Vec<(Vec<String>, String)>,
}

impl Script {
    fn place<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        while self.placed.len() < ORDERS && api.in_flight() < 8 {
            let n = self.placed.len();
            let id = format!("page-order-{n}");
            let o = NewOrder {
                symbol: Symbol::new("BTCUSDT").unwrap(),
                side: Side::Buy,
                order_type: OrderType::Limit(TimeInForce::Gtc),
                price: Decimal::new("49000").ok(),
                quantity: Decimal::new("0.01").unwrap(),
                client_order_id: ClientOrderId::new(&id).unwrap(),
                reduce_only: false,
            };
            let now = api.now();
            api.venue_mut().new_order(&mut self.req, &o, now).unwrap();
            if api.submit(&mut self.req, Class::Normal, n as u64).is_err() {
                return; // the budget's window: the next turn
            }
            self.placed.push(id);
        }
    }
}

impl<E: Account> Strategy<E> for Script {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        if let Event::OpenOrders { body, .. } = ev {
            let mut ids = Vec::new();
            api.venue().open_ids(body, &mut |id| {
                ids.push(String::from_utf8_lossy(id).into_owned());
            });
            // The page fields by their Debug form (`page: 1, more: false`), so
            // that this test builds on main too, whose event has neither.
            let shown = format!("{ev:?}");
            let at = shown.find("page").unwrap_or(shown.len());
            self.polls.push((ids, shown[at..].to_string()));
            let last = shown.contains("more: false") || !shown.contains("more");
            if last {
                api.stop();
            }
            return;
        }
        if ev.is_final() {
            assert!(matches!(ev, Event::Applied { .. }), "{ev:?}");
            self.applied += 1;
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        self.place(api);
        if self.applied == ORDERS && !self.polled {
            self.polled = true;
            api.poll_open_orders_once();
        }
    }
}

#[test]
fn a_poll_of_bybits_open_orders_lists_every_page() {
    let mut c = Config::bybit();
    for l in &mut c.rate_limits {
        if l.kind == LimitType::BybitCreate {
            l.limit = CREATE_PER_S;
        }
    }
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let a = &c.accounts[0];
    let (mut lp, gw, pool) = Gateway::start(&start, "BTCUSDT", |boot, b| {
        let auth =
            bybit::Auth::new(&a.api_key, a.secret.as_bytes(), 5_000).map_err(|e| e.to_string())?;
        let cfg = bybit::Config {
            create_per_s: CREATE_PER_S,
            ..bybit::Config::default()
        };
        bybit::Bybit::new(b, boot.clock, cfg)
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    })
    .unwrap();
    let s = Script {
        req: Prepared::with_capacity(1024),
        placed: Vec::new(),
        applied: 0,
        polled: false,
        polls: Vec::new(),
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(Control::default())).unwrap();
    let report = server.stop();
    let polls = &d.strategy.polls;
    let listed: BTreeSet<&String> = polls.iter().flat_map(|(ids, _)| ids).collect();
    let placed: BTreeSet<&String> = d.strategy.placed.iter().collect();
    assert_eq!(
        listed.len(),
        ORDERS,
        "the poll's events list {} of the {ORDERS} open orders: {:?}",
        listed.len(),
        polls
            .iter()
            .map(|(ids, p)| (ids.len(), p))
            .collect::<Vec<_>>()
    );
    assert_eq!(listed, placed);
    let pages: Vec<(usize, &str)> = polls.iter().map(|(i, p)| (i.len(), p.as_str())).collect();
    assert_eq!(
        pages,
        [
            (50, "page: 0, more: true }"),
            (10, "page: 1, more: false }")
        ],
        "one event a page, newest first"
    );
    assert_eq!((report.duplicates, report.executions), (0, ORDERS as u64));
}
