//! End to end, order entry over Binance Spot's WebSocket API through the gateway,
//! against the in-process emulator on real loopback sockets:
//! 1. mm_loop with `--order-entry ws` at 3x demand: its orders go over the
//!    WebSocket API, the user data stream is subscribed, and the venue counts no
//!    429 and no ban while the binding limit is used at 90% or more;
//! 2. the emulator drops 5% of the order requests' connections (executed or not)
//!    before answering: every unknown outcome is reconciled by client order id,
//!    and the venue sees each client order id placed at most once;
//! 3. a ban first seen on a WebSocket API answer halts the gateway for HTTP too,
//!    and the WebSocket API does not connect again until the halt is cleared;
//! 4. a venue that does not answer the WebSocket API: one warning line, orders
//!    over REST.

mod common;
#[path = "common/machine.rs"]
mod machine;
#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

#[path = "ws_gateway/chain.rs"]
mod chain;
mod ws_gateway;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use chain::{place, run_chain, Place};
use common::{go, no_429_no_ban, venue_utilization};
use ergon_core::{Class, Why};
use ergon_gateway::{self as gateway, Api, Event, Gateway, Prepared, Strategy, WsApiStats};
use ergon_gateway::{WsLane, WsState};
use ergon_io::client::PoolId;
use ergon_io::event_loop::EventLoop;
use ergon_venue_sim::{Config, Fault, Interval, LimitType, RateLimit, Server};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::endpoint::{Endpoints, Symbol};
use mm_loop::{run, Control, Options};

const ORDERS_1S: RateLimit = RateLimit::new(LimitType::Orders, Interval::Second, 1, 20);
const WEIGHT_1S: RateLimit = RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 150);
const MS: i64 = 1_000_000;

fn sim() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        WEIGHT_1S,
        ORDERS_1S,
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    c
}

fn ws_options(duration_s: f64, sim: Config) -> Options {
    Options {
        duration_s,
        demand: 3.0,
        quiet: true,
        guard_ms: 30,
        sim,
        ws: Some(true),
        ..Options::default()
    }
}

#[test]
fn ws_order_entry_at_three_times_the_demand_stays_inside_every_limit() {
    let _machine = machine::alone();
    let (s, r) = go(&ws_options(8.5, sim()));
    no_429_no_ban(&s, &r);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(r.ws.api_connects, 1, "one WebSocket API connection");
    assert_eq!(r.ws.api_subscriptions, 1, "the user data stream subscribed");
    assert!(
        r.ws.api_requests > r.executions,
        "orders went over the WebSocket API: {:?}",
        r.ws
    );
    assert!(s.gw.limited_full > 0, "the excess refused locally: {s:?}");
    let (orders, n) = venue_utilization(&r, &ORDERS_1S);
    let (weight, m) = venue_utilization(&r, &WEIGHT_1S);
    assert!(n >= 6 && m >= 6, "{n} and {m} full windows");
    let binding = orders.max(weight);
    assert!(
        binding >= 0.9,
        "binding limit used at {binding:.3} (orders {orders:.3}, weight {weight:.3})"
    );
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));
    assert_eq!(s.gw.unknown, 0);
}

#[test]
fn ws_drops_at_five_percent_never_send_an_order_twice() {
    let _machine = machine::shared();
    let mut c = sim();
    c.faults.seed = 5;
    c.faults.chances = vec![
        (Fault::ExecuteThenClose, 0.025),
        (Fault::CloseBeforeExecute, 0.025),
    ];
    let (s, r) = go(&ws_options(6.0, c));
    assert!(
        r.faults.execute_then_close + r.faults.close_before_execute >= 3,
        "drops injected: {:?}",
        r.faults
    );
    assert!(
        r.ws.api_connects > 1,
        "re-connected after drops: {:?}",
        r.ws
    );
    assert!(s.gw.unknown > 0, "drops made outcomes unknown: {s:?}");
    assert_eq!(s.gw.reconciled, s.gw.unknown, "every unknown reconciled");
    assert_eq!(r.duplicates, 0, "no order executed twice");
    assert_eq!(r.duplicate_rejects, 0, "no unknown order sent again");
    no_429_no_ban(&s, &r);
}

#[test]
fn without_a_websocket_api_orders_go_over_rest_with_one_warning() {
    let _machine = machine::shared();
    let mut o = ws_options(1.5, sim());
    let server = Arc::new(Server::start(sim()).unwrap());
    o.ws_api = Some(format!("ws://{}/no-such-path", server.addr()));
    let s = run(&o, Arc::new(Control::default()), Some(Arc::clone(&server))).unwrap();
    let r = server.report();
    assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    assert!(
        s.warnings[0].contains("orders go over REST"),
        "{:?}",
        s.warnings
    );
    assert!(s.warnings[1].contains("polling"), "{:?}", s.warnings);
    assert_eq!(r.ws.api_requests, 0);
    assert!(r.executions > 0, "orders went over REST: {s:?}");
}

/// Places one order over the WebSocket API once the venue has banned the IP, then
/// a read over HTTP once the order is Halted.
struct BanProbe {
    req: Prepared,
    placed: bool,
    order: Option<Event<'static>>,
    rest: Option<Event<'static>>,
    halted_at: Option<i64>,
    connects_at_halt: u64,
}

impl Strategy<BinanceSpot> for BanProbe {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        if ev.tag() != 1 || !ev.is_final() {
            return;
        }
        self.order = Some(match ev {
            Event::Halted { tag, bucket } => Event::Halted { tag, bucket },
            Event::Applied { tag, .. } => Event::Applied { tag, body: b"" },
            other => Event::Rejected { tag: other.tag() },
        });
        self.halted_at = Some(api.now());
        self.connects_at_halt = api.ws_api().map_or(0, |l| l.stats().connects);
        let now = api.now();
        let sym = Symbol::new("BTCUSDT").unwrap();
        api.venue_mut().book(&mut self.req, sym, 100, now).unwrap();
        self.rest = api.submit(&mut self.req, Class::Normal, 2).err();
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        let now = api.now();
        if !self.placed {
            self.placed = true;
            if let Some(e) = place(&mut self.req, api, "ban-1", 1) {
                panic!("refused locally: {e:?}");
            }
        }
        // Half a second after the halt (the lane's backoff is far shorter): no
        // re-connect may have left.
        match self.halted_at {
            Some(t) if now >= t + 500 * MS => api.stop(),
            _ => {
                let _ = api.set_timer(1, now + 20 * MS);
            }
        }
    }
}

#[test]
fn a_ban_first_seen_on_a_websocket_answer_halts_rest_too() {
    let _machine = machine::shared();
    let server = Server::start(sim()).unwrap();
    let (mut lp, gw, pool) = ws_gateway::open(&server);
    let before = server.report();
    server.ban(IpAddr::V4(Ipv4Addr::LOCALHOST), 60_000);
    let strategy = BanProbe {
        req: Prepared::with_capacity(1024),
        placed: false,
        order: None,
        rest: None,
        halted_at: None,
        connects_at_halt: 0,
    };
    let control = Arc::new(gateway::Control::default());
    let d = gateway::run(&mut lp, gw, pool, strategy, control).unwrap();
    let st = &d.strategy;
    assert!(
        matches!(st.order, Some(Event::Halted { tag: 1, .. })),
        "the WebSocket API answer halted it: {:?}",
        st.order
    );
    assert!(
        matches!(
            st.rest,
            Some(Event::Limited {
                tag: 2,
                why: Why::Halted,
                ..
            })
        ),
        "HTTP refused locally after the WebSocket ban: {:?}",
        st.rest
    );
    let lane = d.gateway.ws_api().expect("the lane");
    assert_ne!(
        lane.state(),
        WsState::Open,
        "the venue cut it after its 418"
    );
    assert_eq!(
        lane.stats().connects,
        st.connects_at_halt,
        "no re-connect while halted"
    );
    assert!(lane.stats().connects_refused > 0, "{:?}", lane.stats());
    assert_eq!(d.gateway.stats().banned, 1);
    let r = server.stop();
    assert_eq!(
        r.banned_requests, 1,
        "one request met the ban: the WebSocket one"
    );
    assert_eq!(
        r.requests, before.requests,
        "nothing over HTTP after the ban"
    );
    assert_eq!(
        r.ws.api_requests,
        before.ws.api_requests + 1,
        "the order, over the WebSocket API"
    );
    assert_eq!(r.ws.api_connects, before.ws.api_connects);
}

/// `drop-1` once; when it has settled and the connection is open and streaming
/// again, `after-1`: run through the gateway `started`.
fn drop_then_after(
    started: (EventLoop, Gateway<BinanceSpot>, PoolId),
) -> (Vec<String>, WsApiStats, EventLoop, gateway::Stats) {
    let calls: Vec<(Place<_>, _)> = vec![(place, "drop-1"), (place, "after-1")];
    let back = |l: &WsLane| l.state() == WsState::Open && l.streaming();
    let (events, st, lp, d) = run_chain(started, calls, back);
    (events, st, lp, *d.gateway.stats())
}

#[test]
fn a_drop_after_the_venue_executed_is_reconciled_and_never_sent_again() {
    let _machine = machine::shared();
    let mut c = sim();
    // The first order is executed, then its connection drops before the answer.
    c.faults.script = vec![(1, Fault::ExecuteThenClose)];
    let server = Server::start(c).unwrap();
    let (events, st, lp, g) = drop_then_after(ws_gateway::open(&server));
    assert_eq!(
        events,
        [
            "Reconciling { tag: 1 }",
            "Reconciled { tag: 1, found: Some(New) }",
            "Applied 2",
        ],
        "the lost answer reconciled by client order id, then trading goes on"
    );
    // Each connect charged locally: weight 2 and one of the 300 per 5 minutes.
    let b = lp.budget();
    let connects = b.stats(b.bucket("WS_API_CONNECTS_5M").unwrap()).unwrap();
    assert_eq!(connects.admitted, 2, "{connects:?}");
    assert_eq!((st.opens, st.drops, st.subscribed), (2, 1, 2), "{st:?}");
    // The query went while the connection was down: over HTTP, same ledger.
    assert_eq!(
        (st.requests, st.to_http),
        (2, 1),
        "drop-1 and after-1 as frames, the order.status query over HTTP: {st:?}"
    );
    assert_eq!((g.unknown, g.reconciled, g.reconciled_found), (1, 1, 1));
    let r = server.stop();
    assert_eq!(r.faults.execute_then_close, 1);
    assert_eq!(r.executions, 2, "drop-1 once, after-1 once");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));
}

/// What became of a run where the venue holds the first order 8 s, answering
/// nothing meanwhile (a silent, half-open peer; past the gateway's 2 s recvWindow
/// it may no longer run it), with the lane giving the connection up after
/// `silent_ns` of silence: the strategy's events, the lane's and the gateway's
/// counters. The venue ran nothing twice, and not the held order.
fn held_by_a_silent_venue(silent_ns: i64) -> (Vec<String>, WsApiStats, gateway::Stats) {
    let mut c = sim();
    c.faults.script = vec![(1, Fault::Delay)];
    c.faults.delay_ms = 8_000;
    let server = Server::start(c).unwrap();
    let started = ws_gateway::open_silent_after(&server, silent_ns);
    let (ev, st, _, g) = drop_then_after(started);
    assert_eq!(
        ev.first().map(String::as_str),
        Some("Reconciling { tag: 1 }"),
        "unanswered: Unknown, reconciled: {ev:?}"
    );
    assert_eq!(ev.last().map(String::as_str), Some("Applied 2"), "{ev:?}");
    let r = server.stop();
    assert_eq!(r.faults.delay, 1);
    assert_eq!(r.executions, 1, "after-1 only: drop-1 never ran");
    assert_eq!((r.duplicates, r.duplicate_rejects), (0, 0));
    (ev, st, g)
}

#[test]
fn an_answer_missing_at_its_deadline_gives_the_connection_up_and_reconciles() {
    let _machine = machine::shared();
    // On main the request waited for the venue with no end: its first event was
    // the answer 8 s later.
    let (ev, st, g) = held_by_a_silent_venue(gateway::SILENT_NS);
    assert!(
        ev.iter().any(|e| e == "Reconciled { tag: 1, found: None }"),
        "never ran, concluded only once the venue could no longer run it: {ev:?}"
    );
    assert_eq!(
        (st.deadlines, st.opens),
        (1, 2),
        "given up once, opened again: {st:?}"
    );
    assert_eq!(g.unknown, 1, "{g:?}");
}

#[test]
fn a_silent_connection_is_given_up_before_any_deadline() {
    let _machine = machine::shared();
    let (_, st, _) = held_by_a_silent_venue(600 * MS);
    assert_eq!(
        (st.silences, st.deadlines),
        (1, 0),
        "silent for 600 ms, well before the order's 2 s deadline: {st:?}"
    );
    assert!(st.pings >= 1, "a ping went unanswered first: {st:?}");
}
