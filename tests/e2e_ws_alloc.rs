//! The gateway's steady state over Binance Spot's WebSocket API allocates nothing
//! on the loop thread: 2,000 orders, one at a time, each prepared into a reused
//! buffer, submitted, written as its WebSocket API twin, answered (with the user
//! data stream's `executionReport` on the same connection) and delivered as an
//! Applied event and an order update, after a warm-up, counted by an allocator
//! that counts on this thread only (the emulator's threads allocate freely).
//! Twice: with an HMAC key (each frame from its template, signed), and with an
//! Ed25519 key (the lane logs on; each frame from its template, unsigned).

mod ws_gateway;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use ergon_core::Class;
use ergon_gateway::{self as gateway, Api, Event, Keys, Prepared, Strategy, WsState};
use ergon_venue_sim::{
    Account as SimAccount, Config, Interval, LimitType, RateLimit, Server, ED25519_TEST_API_KEY,
    ED25519_TEST_PRIVATE_PEM,
};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};
use std::io::Write as _;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|a| a.get())
}

const WARMUP: u64 = 300;
const MEASURED: u64 = 2_000;

struct Orders {
    req: Prepared,
    started: bool,
    applied: u64,
    other: u64,
    updates: u64,
    at_warm: u64,
    at_end: u64,
}

impl Orders {
    fn next(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        // A client order id written on the stack: no allocation.
        let mut buf = [0u8; 24];
        let mut c = std::io::Cursor::new(&mut buf[..]);
        write!(c, "a{}", self.applied).unwrap();
        let n = c.position() as usize;
        let id = std::str::from_utf8(&buf[..n]).unwrap();
        let o = NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Buy,
            order_type: OrderType::Limit(TimeInForce::Ioc),
            price: Some(Decimal::new("49000").unwrap()),
            quantity: Decimal::new("0.01").unwrap(),
            client_order_id: ClientOrderId::new(id).unwrap(),
            reduce_only: false,
        };
        let now = api.now();
        api.venue_mut().new_order(&mut self.req, &o, now).unwrap();
        if let Err(e) = api.submit(&mut self.req, Class::Normal, self.applied) {
            panic!("refused: {e:?}");
        }
    }
}

impl Strategy<BinanceSpot> for Orders {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpot>, ev: Event<'_>) {
        match ev {
            Event::Applied { .. } => self.applied += 1,
            _ if ev.is_final() => self.other += 1,
            _ => return,
        }
        if self.applied == WARMUP {
            self.at_warm = allocs();
        }
        if self.applied == WARMUP + MEASURED {
            self.at_end = allocs();
            api.stop();
            return;
        }
        self.next(api);
    }

    fn on_order_update(&mut self, _: &mut Api<'_, '_, BinanceSpot>, _: &Execution) {
        self.updates += 1;
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpot>) {
        if !std::mem::replace(&mut self.started, true) {
            self.next(api);
        }
    }
}

#[test]
fn the_websocket_api_steady_state_allocates_nothing_on_the_loop_thread() {
    steady_state(false);
}

/// The same with an Ed25519 key: the lane logs on, and every order goes from its
/// template without `apiKey` or `signature`.
#[test]
fn logged_on_orders_from_their_template_allocate_nothing_on_the_loop_thread() {
    steady_state(true);
}

fn steady_state(ed25519: bool) {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Minute, 1, 10_000_000),
        RateLimit::new(LimitType::Orders, Interval::Second, 10, 10_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 10_000_000),
    ];
    if ed25519 {
        c.accounts = vec![SimAccount::ed25519_test()];
    }
    let server = Server::start(c).unwrap();
    let (mut lp, gw, pool) = match ed25519 {
        false => ws_gateway::open(&server),
        true => {
            let keys = Keys {
                api_key: ED25519_TEST_API_KEY,
                secret: ED25519_TEST_PRIVATE_PEM.as_bytes(),
                passphrase: None,
            };
            ws_gateway::open_with(&server, &keys, gateway::SILENT_NS)
        }
    };
    let s = Orders {
        req: Prepared::with_capacity(1024),
        started: false,
        applied: 0,
        other: 0,
        updates: 0,
        at_warm: 0,
        at_end: 0,
    };
    let d = gateway::run(&mut lp, gw, pool, s, Arc::new(gateway::Control::default())).unwrap();
    let o = &d.strategy;
    assert_eq!(o.other, 0, "every order applied");
    assert_eq!(o.applied, WARMUP + MEASURED);
    let lane = d.gateway.ws_api().unwrap();
    assert_eq!(lane.state(), WsState::Open);
    assert!(
        lane.stats().requests >= WARMUP + MEASURED,
        "{:?}",
        lane.stats()
    );
    assert_eq!(
        lane.stats().templated,
        WARMUP + MEASURED,
        "every order from its template: {:?}",
        lane.stats()
    );
    assert!(
        o.updates > MEASURED,
        "execution reports delivered: {}",
        o.updates
    );
    assert!(o.at_warm > 0, "the counter counts (the start allocated)");
    assert_eq!(
        o.at_end - o.at_warm,
        0,
        "allocations on the loop thread over {MEASURED} orders"
    );
    let r = server.stop();
    assert_eq!((r.throttled, r.bans, r.duplicates), (0, 0, 0));
    assert_eq!(r.signature_rejects, 0);
    let unsigned = if ed25519 { WARMUP + MEASURED } else { 0 };
    assert_eq!(r.ws.api_unsigned, unsigned, "{:?}", r.ws);
}
