//! A request prepared with its signature deferred (for a WebSocket API lane that
//! never sends the REST signature) and signed later is byte for byte the request
//! a signing preparation writes at the same time: every Binance kind a lane
//! carries (Spot's new order from the builder and from a template, cancel,
//! cancel-replace and order query; USD-M's new order, cancel, modify and order
//! query), HMAC and Ed25519 keys.
//! Until signed it carries no signature and says so; what a lane does not carry
//! is signed at once whatever the setting; signing allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ergon_core::Budget;
use ergon_venues::adapt::{Clock, Error};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::classify::SPOT_EXCHANGE_INFO;
use ergon_venues::endpoint::{
    Amend, CancelReplace, ClientOrderId, Decimal, Ed25519Key, Endpoints, Fill, NewOrder, OrderRef,
    OrderType, Prepared, Side, Symbol, TimeInForce,
};
use proptest::prelude::*;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

const SEC: i64 = 1_000_000_000;
const API_KEY: &str = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
const SECRET: &[u8] = b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";

fn auth(ed25519: bool, recv_window_ms: i64) -> Auth {
    match ed25519 {
        true => Auth::ed25519(API_KEY, Ed25519Key::from_seed(&[7; 32]), recv_window_ms).unwrap(),
        false => Auth::new(API_KEY, SECRET, recv_window_ms).unwrap(),
    }
}

fn clock() -> Clock {
    Clock::anchor(10 * SEC, 1_499_827_319_559)
}

fn spot(ed25519: bool, recv_window_ms: i64) -> BinanceSpot {
    let mut b = Budget::builder();
    BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut b, clock(), 0)
        .unwrap()
        .with_auth(auth(ed25519, recv_window_ms))
}

fn futures(ed25519: bool, recv_window_ms: i64) -> BinanceFutures {
    let mut b = Budget::builder();
    BinanceFutures::new(&mut b, clock(), 0, binance_futures::DEFAULT_TABLE)
        .unwrap()
        .with_auth(auth(ed25519, recv_window_ms))
}

/// Everything a `Prepared` says, as owned values, the request as HTTP/1.1
/// writes it included.
fn seen(p: &Prepared) -> impl PartialEq + core::fmt::Debug {
    (
        (p.kind(), p.method(), p.target().to_string()),
        p.headers()
            .map(|(n, v)| (n, v.to_string()))
            .collect::<Vec<_>>(),
        (p.body().to_vec(), p.parts().to_vec(), p.deadline_ns()),
        p.client_order_ids().to_vec(),
        p.symbol().map(|s| s.as_str().to_string()),
        p.http().map(|h| (h.line().to_vec(), h.rest().to_vec())),
        p.signature_pending(),
    )
}

/// One of the calls a lane carries, on either adapter.
#[derive(Clone, Copy, Debug)]
enum Call {
    SpotOrder,
    SpotTemplate,
    SpotCancel,
    SpotReplace,
    SpotQuery,
    UsdmOrder,
    UsdmTemplate,
    UsdmCancel,
    UsdmModify,
    UsdmQuery,
}

const CALLS: [Call; 10] = [
    Call::SpotOrder,
    Call::SpotTemplate,
    Call::SpotCancel,
    Call::SpotReplace,
    Call::SpotQuery,
    Call::UsdmOrder,
    Call::UsdmTemplate,
    Call::UsdmCancel,
    Call::UsdmModify,
    Call::UsdmQuery,
];

/// Whether `c` is Spot's.
fn spot_call(c: Call) -> bool {
    matches!(
        c,
        Call::SpotOrder
            | Call::SpotTemplate
            | Call::SpotCancel
            | Call::SpotReplace
            | Call::SpotQuery
    )
}

/// The generated values of one case, owned.
#[derive(Clone, Debug)]
struct Case {
    call: Call,
    ed25519: bool,
    symbol: String,
    side: Side,
    order_type: OrderType,
    price: String,
    quantity: String,
    id: String,
    now: i64,
    recv_window: i64,
}

impl Case {
    fn order(&self) -> NewOrder<'_> {
        let priced = !matches!(self.order_type, OrderType::Market);
        NewOrder {
            symbol: Symbol::new(&self.symbol).unwrap(),
            side: self.side,
            order_type: self.order_type,
            price: priced.then(|| Decimal::new(&self.price).unwrap()),
            quantity: Decimal::new(&self.quantity).unwrap(),
            client_order_id: ClientOrderId::new(&self.id).unwrap(),
            reduce_only: false,
        }
    }

    /// Its adapters (one budget, so that the two preparations' parts compare).
    fn adapters(&self) -> (BinanceSpot, BinanceFutures) {
        (
            spot(self.ed25519, self.recv_window),
            futures(self.ed25519, self.recv_window),
        )
    }

    /// The case's call on its adapter, deferring or not.
    fn prepare(
        &self,
        (s, f): &mut (BinanceSpot, BinanceFutures),
        defer: bool,
        out: &mut Prepared,
    ) -> Result<(), Error> {
        let o = self.order();
        let fill = Fill {
            price: o.price,
            quantity: o.quantity,
            client_order_id: o.client_order_id,
        };
        let r = OrderRef {
            symbol: o.symbol,
            client_order_id: o.client_order_id,
        };
        let now = self.now;
        match self.call {
            c if spot_call(c) => {
                let v = s;
                v.defer_signatures(defer);
                match self.call {
                    Call::SpotOrder => v.new_order(out, &o, now).map(drop),
                    Call::SpotTemplate => {
                        let t = v.order_template(o.symbol, o.side, o.order_type)?;
                        v.new_order_from(&t, out, &fill, now).map(drop)
                    }
                    Call::SpotCancel => v.cancel(out, &r, now).map(drop),
                    Call::SpotQuery => v.query_order(out, &r, now).map(drop),
                    _ => {
                        let a = CancelReplace {
                            cancel: ClientOrderId::new("old-1").unwrap(),
                            new: o,
                        };
                        v.cancel_replace(out, &a, now).map(drop)
                    }
                }
            }
            _ => {
                let v = f;
                v.defer_signatures(defer);
                match self.call {
                    Call::UsdmOrder => v.new_order(out, &o, now).map(drop),
                    Call::UsdmTemplate => {
                        let t = v.order_template(o.symbol, o.side, o.order_type, false)?;
                        v.new_order_from(&t, out, &fill, now).map(drop)
                    }
                    Call::UsdmCancel => v.cancel(out, &r, now).map(drop),
                    Call::UsdmQuery => v.query_order(out, &r, now).map(drop),
                    _ => {
                        let a = Amend {
                            order: r,
                            side: o.side,
                            price: Some(Decimal::new(&self.price).unwrap()),
                            quantity: Some(o.quantity),
                        };
                        v.amend(out, &a, now).map(drop)
                    }
                }
            }
        }
    }

    /// Signs `p` with the case's adapter.
    fn sign(&self, (s, f): &(BinanceSpot, BinanceFutures), p: &mut Prepared) -> Result<(), Error> {
        match spot_call(self.call) {
            true => s.sign_pending(p),
            false => f.sign_pending(p),
        }
    }
}

fn order_type() -> impl Strategy<Value = OrderType> {
    prop_oneof![
        Just(OrderType::Limit(TimeInForce::Gtc)),
        Just(OrderType::Limit(TimeInForce::Ioc)),
        Just(OrderType::Limit(TimeInForce::Fok)),
        Just(OrderType::PostOnly),
        Just(OrderType::Market),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        (0..CALLS.len(), any::<bool>(), "[A-Z]{2,12}", any::<bool>()),
        (order_type(), "[1-9][0-9]{0,6}(\\.[0-9]{1,8})?"),
        ("[1-9][0-9]{0,4}(\\.[0-9]{1,8})?", "[A-Za-z0-9._:/-]{1,36}"),
        (0i64..1_000_000 * SEC, 1i64..=60_000),
    )
        .prop_map(
            |((c, ed, symbol, buy), (ot, price), (quantity, id), (now, rw))| Case {
                call: CALLS[c],
                ed25519: ed,
                symbol,
                side: if buy { Side::Buy } else { Side::Sell },
                order_type: ot,
                price,
                quantity,
                id,
                now,
                recv_window: rw,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Deferred, then signed: the signing preparation's request, byte for byte;
    /// unsigned until then, and no `signature` anywhere in it.
    #[test]
    fn a_deferred_signature_signed_later_is_the_signed_request(c in case()) {
        let mut signed = Prepared::with_capacity(64);
        let mut deferred = Prepared::with_capacity(64);
        let mut v = c.adapters();
        let a = c.prepare(&mut v, false, &mut signed);
        let b = c.prepare(&mut v, true, &mut deferred);
        prop_assert_eq!(a.is_ok(), b.is_ok(), "{:?} {:?}", a, b);
        if a.is_err() {
            return Ok(());
        }
        prop_assert!(!signed.signature_pending());
        prop_assert!(signed.target().contains("&signature="));
        prop_assert!(deferred.signature_pending());
        prop_assert!(!deferred.target().contains("signature"));
        let all = deferred.http().map(|h| [h.line(), h.rest()].concat());
        prop_assert!(all.is_none_or(|b| !b.windows(9).any(|w| w == b"signature")));
        // Everything but the signature is there already: what a lane reads.
        let cut = signed.target().find("&signature=").unwrap();
        prop_assert_eq!(deferred.target(), &signed.target()[..cut]);
        prop_assert_eq!(deferred.parts(), signed.parts());
        prop_assert_eq!(deferred.deadline_ns(), signed.deadline_ns());
        c.sign(&v, &mut deferred).unwrap();
        prop_assert_eq!(seen(&deferred), seen(&signed));
        // Signing again changes nothing.
        c.sign(&v, &mut deferred).unwrap();
        prop_assert_eq!(seen(&deferred), seen(&signed));
    }
}

#[test]
fn what_a_lane_does_not_carry_is_signed_whatever_the_setting() {
    let mut v = spot(false, 5000);
    v.defer_signatures(true);
    let r = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("q-1").unwrap(),
    };
    let mut p = Prepared::default();
    v.open_orders(&mut p, Some(r.symbol), 11 * SEC).unwrap();
    assert!(!p.signature_pending() && p.target().contains("&signature="));
    v.cancel_all(&mut p, r.symbol, 11 * SEC).unwrap();
    assert!(!p.signature_pending() && p.target().contains("&signature="));
    // A re-stamp for a re-send signs too.
    v.cancel(&mut p, &r, 11 * SEC).unwrap();
    assert!(p.signature_pending());
    v.restamp(&mut p, 12 * SEC).unwrap();
    assert!(!p.signature_pending() && p.target().contains("&signature="));
    // Off again: signed at once.
    v.defer_signatures(false);
    v.cancel(&mut p, &r, 11 * SEC).unwrap();
    assert!(!p.signature_pending() && p.target().contains("&signature="));
}

#[test]
fn a_pending_signature_without_a_key_stays_pending() {
    let mut v = spot(true, 5000);
    v.defer_signatures(true);
    let o = NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("1.5").unwrap()),
        quantity: Decimal::new("2").unwrap(),
        client_order_id: ClientOrderId::new("k-1").unwrap(),
        reduce_only: false,
    };
    let mut p = Prepared::default();
    v.new_order(&mut p, &o, 11 * SEC).unwrap();
    let keyless = {
        let mut b = Budget::builder();
        BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut b, clock(), 0).unwrap()
    };
    let before = p.target().to_string();
    assert_eq!(keyless.sign_pending(&mut p), Err(Error::NoKey));
    assert!(p.signature_pending());
    assert_eq!(p.target(), before);
}

/// Preparing deferred and signing later allocates nothing once the buffer has
/// held one request (HMAC and Ed25519, builder and template).
#[test]
fn deferring_and_signing_allocate_nothing() {
    for ed25519 in [false, true] {
        let mut v = spot(ed25519, 5000);
        v.defer_signatures(true);
        let o = NewOrder {
            symbol: Symbol::new("BTCUSDT").unwrap(),
            side: Side::Sell,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(Decimal::new("30001.25").unwrap()),
            quantity: Decimal::new("0.001").unwrap(),
            client_order_id: ClientOrderId::new("0123456789abcdef0123456789abcdef").unwrap(),
            reduce_only: false,
        };
        let t = v.order_template(o.symbol, o.side, o.order_type).unwrap();
        let fill = Fill {
            price: o.price,
            quantity: o.quantity,
            client_order_id: o.client_order_id,
        };
        let mut p = Prepared::with_capacity(1024);
        v.new_order(&mut p, &o, 11 * SEC).unwrap();
        v.sign_pending(&mut p).unwrap();
        let before = ALLOCS.with(Cell::get);
        for i in 0..1000 {
            if i % 2 == 0 {
                v.new_order(&mut p, &o, 11 * SEC + i).unwrap();
            } else {
                v.new_order_from(&t, &mut p, &fill, 11 * SEC + i).unwrap();
            }
            assert!(p.signature_pending());
            v.sign_pending(&mut p).unwrap();
            assert!(!p.signature_pending());
        }
        assert_eq!(ALLOCS.with(Cell::get) - before, 0, "ed25519: {ed25519}");
    }
}
