//! Preparing a request allocates nothing once its buffer has held one: a counting
//! allocator (per thread, so other tests do not count) sees zero allocations over
//! a thousand preparations of every kind.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ergon_core::Budget;
use ergon_venues::adapt::Clock;
use ergon_venues::adapt::Error;
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot::{self, BinanceSpot};
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::classify::SPOT_EXCHANGE_INFO;
use ergon_venues::endpoint::{
    Amend, CancelReplace, ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType,
    Prepared, Side, Symbol, TimeInForce,
};
use ergon_venues::hyperliquid::{self, Action, Exchange, Hyperliquid, Signature, Signer};
use ergon_venues::okx::{self, Okx};

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
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|a| a.get())
}

/// Prepares one request of every kind `E` offers, `n` times, with fresh ids.
fn every_kind<E: Endpoints>(venue: &mut E, p: &mut Prepared, n: u32) {
    every_kind_ids(venue, p, n, false)
}

/// As [`every_kind`]; `hex_ids`: ids as Hyperliquid writes them (`0x` and 32 hex digits).
fn every_kind_ids<E: Endpoints>(venue: &mut E, p: &mut Prepared, n: u32, hex_ids: bool) {
    let symbol = Symbol::new("BTCUSDT").unwrap();
    let (price, qty) = (
        Decimal::new("37000.01").unwrap(),
        Decimal::new("0.001").unwrap(),
    );
    for i in 0..n {
        let mut text = arrayvec::ArrayString::<36>::new();
        let _ = if hex_ids {
            core::fmt::write(&mut text, format_args!("0x{:032x}", i + 1))
        } else {
            core::fmt::write(&mut text, format_args!("mm{i}"))
        };
        let cloid = ClientOrderId::new(&text).unwrap();
        let order = NewOrder {
            symbol,
            side: Side::Sell,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(price),
            quantity: qty,
            client_order_id: cloid,
            reduce_only: false,
        };
        let now = i64::from(i) * 1_000_000;
        let r = OrderRef {
            symbol,
            client_order_id: cloid,
        };
        assert!(venue.new_order(p, &order, now).is_ok());
        assert!(venue.cancel(p, &r, now).is_ok());
        let _ = venue.cancel_replace(
            p,
            &CancelReplace {
                cancel: cloid,
                new: order,
            },
            now,
        );
        assert!(venue.query_order(p, &r, now).is_ok());
        let _ = venue.query_closed_order(p, &r, now);
        assert!(venue.open_orders(p, Some(symbol), now).is_ok());
        assert!(venue.book(p, symbol, 100, now).is_ok() || venue.book(p, symbol, 20, now).is_ok());
        let _ = venue.batch_orders(p, &[order, order], now);
        let amend = Amend {
            order: r,
            side: Side::Sell,
            price: Some(price),
            quantity: Some(qty),
        };
        let _ = venue.amend(p, &amend, now);
        assert!(venue.account(p, now).is_ok());
    }
}

#[test]
fn binance_spot_preparation_allocates_nothing() {
    let mut b = Budget::builder();
    let auth = binance_spot::Auth::new("key", b"secret", 5000).unwrap();
    let mut spot = BinanceSpot::from_exchange_info(
        SPOT_EXCHANGE_INFO,
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        0,
    )
    .unwrap()
    .with_auth(auth);
    let mut p = Prepared::with_capacity(1024);
    every_kind(&mut spot, &mut p, 1);
    let before = allocs();
    every_kind(&mut spot, &mut p, 1000);
    assert_eq!(allocs() - before, 0);
    // The counter counts: one allocation on this thread shows.
    let v = std::hint::black_box(vec![1u8; 8]);
    assert_eq!(allocs() - before, 1, "{v:?}");
}

#[test]
fn binance_futures_preparation_allocates_nothing() {
    let mut b = Budget::builder();
    let auth = binance_spot::Auth::new("key", b"secret", 5000).unwrap();
    let mut f = BinanceFutures::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        0,
        binance_futures::DEFAULT_TABLE,
    )
    .unwrap()
    .with_auth(auth);
    let mut p = Prepared::with_capacity(1024);
    every_kind(&mut f, &mut p, 1);
    let before = allocs();
    every_kind(&mut f, &mut p, 1000);
    assert_eq!(allocs() - before, 0);
}

#[test]
fn bybit_preparation_allocates_nothing() {
    let mut b = Budget::builder();
    let auth = bybit::Auth::new("key", b"secret", 5000).unwrap();
    let mut v = Bybit::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        bybit::Config::default(),
    )
    .unwrap()
    .with_auth(auth);
    let mut p = Prepared::with_capacity(4096);
    every_kind(&mut v, &mut p, 1);
    let before = allocs();
    every_kind(&mut v, &mut p, 1000);
    assert_eq!(allocs() - before, 0);
}

#[test]
fn okx_preparation_allocates_nothing() {
    let mut b = Budget::builder();
    let auth = okx::Auth::new("key", b"secret", "pass", 5000).unwrap();
    let mut v = Okx::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        okx::Config::default(),
    )
    .unwrap()
    .with_auth(auth);
    let mut p = Prepared::with_capacity(4096);
    every_kind(&mut v, &mut p, 1);
    let before = allocs();
    every_kind(&mut v, &mut p, 1000);
    assert_eq!(allocs() - before, 0);
}

struct Fixed;

impl Signer for Fixed {
    fn address(&self) -> &str {
        "0x0000000000000000000000000000000000000abc"
    }
    fn sign(&mut self, _: Action<'_>, _: &[u8], _: u64, _: u64) -> Result<Signature, Error> {
        Ok(Signature {
            r: [1; 32],
            s: [2; 32],
            v: 28,
        })
    }
}

#[test]
fn hyperliquid_preparation_allocates_nothing() {
    let mut b = Budget::builder();
    let venue = Hyperliquid::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        hyperliquid::Config::default(),
    )
    .unwrap();
    let mut ex = Exchange::new(venue, Fixed, &[("BTCUSDT", 0)], 5000).unwrap();
    let mut p = Prepared::with_capacity(4096);
    every_kind_ids(&mut ex, &mut p, 1, true);
    let before = allocs();
    every_kind_ids(&mut ex, &mut p, 1000, true);
    assert_eq!(allocs() - before, 0);
}

#[test]
fn hyperliquid_signing_with_the_built_in_wallet_allocates_nothing() {
    use ergon_venues::hyperliquid::sign::{Network, Wallet};
    let mut b = Budget::builder();
    let venue = Hyperliquid::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        hyperliquid::Config::default(),
    )
    .unwrap();
    let key = b"0x0123456789012345678901234567890123456789012345678901234567890123";
    let wallet = Wallet::from_key_text(key, Network::Mainnet)
        .unwrap()
        .for_vault("0x1719884eb866cb12b2287399b15f7db5e7d775ea")
        .unwrap();
    let mut ex = Exchange::new(venue, wallet, &[("BTCUSDT", 0)], 5000).unwrap();
    let mut p = Prepared::with_capacity(4096);
    every_kind_ids(&mut ex, &mut p, 1, true);
    let before = allocs();
    every_kind_ids(&mut ex, &mut p, 100, true);
    assert_eq!(allocs() - before, 0);
}
