//! The gateway on Bybit v5 and OKX v5 against the emulator's profiles: orders
//! placed and canceled one after another while the venue closes connections after
//! executing (faults): every request ends with one final event, every unknown
//! outcome is reconciled by client order id, nothing executes twice.

use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{
    self as gateway, Account, Api, Control, Event, Gateway, Prepared, Start, Strategy,
};
use ergon_venue_sim::{Config, Fault, Server};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::{bybit, okx};

const ORDERS: u64 = 30;

/// Places order i, then cancels it, for i in 0..ORDERS; one request at a time.
struct PlaceCancel {
    symbol: &'static str,
    req: Prepared,
    step: u64,
    waiting: bool,
    finals: u64,
    reconciling: u64,
    reconciled: u64,
}

impl PlaceCancel {
    fn next<E: Account>(&mut self, api: &mut Api<'_, '_, E>) {
        if self.step == 2 * ORDERS {
            api.stop();
            return;
        }
        let symbol = Symbol::new(self.symbol).unwrap();
        let id = format!("gw{}", self.step / 2);
        let client_order_id = ClientOrderId::new(&id).unwrap();
        let now = api.now();
        let v = api.venue_mut();
        let r = match self.step % 2 {
            0 => {
                let o = NewOrder {
                    symbol,
                    side: Side::Buy,
                    order_type: OrderType::Limit(TimeInForce::Gtc),
                    price: Some(Decimal::new("40000").unwrap()),
                    quantity: Decimal::new("1").unwrap(),
                    client_order_id,
                    reduce_only: false,
                };
                v.new_order(&mut self.req, &o, now).map(|_| ())
            }
            _ => {
                let o = OrderRef {
                    symbol,
                    client_order_id,
                };
                v.cancel(&mut self.req, &o, now).map(|_| ())
            }
        };
        r.unwrap();
        self.waiting = true;
        match api.submit(&mut self.req, Class::Normal, self.step) {
            Ok(()) => {}
            // The budget has no room yet (Bybit's per-second limits): try then.
            Err(Event::Limited { ready_in_ns, .. }) => {
                self.waiting = false;
                let at = now.saturating_add(ready_in_ns);
                api.set_timer(1, at).unwrap();
            }
            Err(e) => panic!("refused: {e:?}"),
        }
    }
}

impl<E: Account> Strategy<E> for PlaceCancel {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, ev: Event<'_>) {
        assert_eq!(ev.tag(), self.step, "{ev:?}");
        match ev {
            Event::Reconciling { .. } => self.reconciling += 1,
            Event::Reconciled { .. } => self.reconciled += 1,
            Event::Retrying { .. } => {}
            Event::Applied { .. } | Event::Rejected { .. } => {}
            e => panic!("{e:?}"),
        }
        if ev.is_final() {
            self.finals += 1;
            self.step += 1;
            self.waiting = false;
            self.next(api);
        }
    }

    fn on_timer(&mut self, api: &mut Api<'_, '_, E>, _token: u64) {
        if !self.waiting {
            self.next(api);
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        if self.step == 0 && !self.waiting {
            self.next(api);
        }
    }
}

fn run<E: Account + Clone>(
    mut c: Config,
    declare: impl FnOnce(&gateway::Boot, &mut ergon_core::Builder, &Config) -> Result<E, String>,
) -> (PlaceCancel, ergon_venue_sim::Report) {
    c.faults.seed = 5;
    c.faults.chances = vec![(Fault::ExecuteThenClose, 0.15)];
    let server = Server::start(c.clone()).unwrap();
    let start = Start::new(server.addr(), server.addr().to_string());
    let symbol: &'static str = Box::leak(c.symbol.clone().into_boxed_str());
    let (mut lp, gw, pool) =
        Gateway::start(&start, symbol, |boot, b| declare(boot, b, &c)).unwrap();
    let s = PlaceCancel {
        symbol,
        req: Prepared::with_capacity(1024),
        step: 0,
        waiting: false,
        finals: 0,
        reconciling: 0,
        reconciled: 0,
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(Control::default())).unwrap();
    (d.strategy, server.stop())
}

fn check(s: &PlaceCancel, r: &ergon_venue_sim::Report) {
    assert_eq!(s.finals, 2 * ORDERS, "one final event per request");
    assert!(
        r.faults.execute_then_close > 0,
        "faults injected: {:?}",
        r.faults
    );
    assert!(s.reconciling > 0, "faults made outcomes unknown");
    assert_eq!(s.reconciled, s.reconciling, "every unknown reconciled");
    assert_eq!(
        (r.duplicates, r.duplicate_rejects),
        (0, 0),
        "nothing re-sent: {r:?}"
    );
    assert_eq!(r.throttled + r.order_rate_limited + r.bans, 0);
}

#[test]
fn bybit_places_and_cancels_through_the_gateway() {
    let (s, r) = run(Config::bybit(), |boot, b, c| {
        let a = &c.accounts[0];
        let auth =
            bybit::Auth::new(&a.api_key, a.secret.as_bytes(), 5_000).map_err(|e| e.to_string())?;
        bybit::Bybit::new(b, boot.clock, bybit::Config::default())
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    });
    check(&s, &r);
}

#[test]
fn okx_places_and_cancels_through_the_gateway() {
    let (s, r) = run(Config::okx(), |boot, b, c| {
        let a = &c.accounts[0];
        let auth = okx::Auth::new(&a.api_key, a.secret.as_bytes(), &c.passphrase, 5_000)
            .map_err(|e| e.to_string())?;
        okx::Okx::new(b, boot.clock, okx::Config::default())
            .map(|v| v.with_auth(auth))
            .map_err(|e| e.to_string())
    });
    check(&s, &r);
}
