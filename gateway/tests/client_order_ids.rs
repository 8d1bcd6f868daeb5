//! Client order ids (issue 26, item 10): the ids the gateway issues never repeat,
//! within a boot or across two, the clock stepping back included, and each fits
//! its venue's documented rule; a strategy-given id that the ledger still holds
//! is refused before anything is charged or sent.
//!
//! On main there was no issuer: the example's ids wrapped every 100 s and the
//! shared-memory example's repeated with the pid; a second order under a live id
//! went to the venue.

use std::collections::HashSet;

use ergon_core::{Budget, Class, Flight, Ticket};
use ergon_gateway::ids::{boot_epoch, IdError, IdIssuer, MAX_EPOCH};
use ergon_gateway::{Event, Gateway, Prepared, Wire};
use ergon_io::client::{Refused, RequestId};
use ergon_io::http::Request;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientIds, ClientOrderId, Decimal, Endpoints, IdFormat, NewOrder, OrderRef, OrderType, Side,
    Symbol, TimeInForce,
};
use ergon_venues::response::Response;
use proptest::prelude::*;

/// A venue's name, the form its adapter declares, and its rule for an id.
type Rule = (&'static str, IdFormat, fn(&str) -> bool);

/// Each venue's rule for a client order id, written from its documentation (the
/// adapter's rustdoc cites the page), and the form its adapter declares.
fn venues() -> Vec<Rule> {
    vec![
        // newClientOrderId: ^[\.A-Z\:/a-z0-9_-]{1,36}$
        ("binance-spot", <BinanceSpot as ClientIds>::ID_FORMAT, |s| {
            (1..=36).contains(&s.len())
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b".:/_-".contains(&c))
        }),
        (
            "binance-futures",
            <ergon_venues::binance_futures::BinanceFutures as ClientIds>::ID_FORMAT,
            |s| {
                (1..=36).contains(&s.len())
                    && s.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b".:/_-".contains(&c))
            },
        ),
        // orderLinkId: at most 36 of letters, digits, - and _.
        (
            "bybit",
            <ergon_venues::bybit::Bybit as ClientIds>::ID_FORMAT,
            |s| {
                (1..=36).contains(&s.len())
                    && s.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"-_".contains(&c))
            },
        ),
        // clOrdId: 1 to 32 case-sensitive letters and digits.
        (
            "okx",
            <ergon_venues::okx::Okx as ClientIds>::ID_FORMAT,
            |s| (1..=32).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_alphanumeric()),
        ),
        // label: at most 64 characters.
        (
            "deribit",
            <ergon_venues::deribit::Deribit as ClientIds>::ID_FORMAT,
            |s| (1..=64).contains(&s.len()),
        ),
        // cloid: a 128-bit hex string, 0x and 32 hex digits.
        (
            "hyperliquid",
            <ergon_venues::hyperliquid::Exchange<NoSigner> as ClientIds>::ID_FORMAT,
            |s| {
                s.len() == 34
                    && s.starts_with("0x")
                    && s[2..].bytes().all(|c| c.is_ascii_hexdigit())
            },
        ),
        // cl_ord_id: long UUID, short UUID (32 hex digits) or free text of <= 18.
        (
            "kraken-spot",
            <ergon_venues::kraken_spot::KrakenSpot as ClientIds>::ID_FORMAT,
            |s| {
                let short = s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit());
                short || is_uuid(s) || s.len() <= 18
            },
        ),
        // cliOrdId: at most 100 characters.
        (
            "kraken-futures",
            <ergon_venues::kraken_futures::KrakenFutures as ClientIds>::ID_FORMAT,
            |s| (1..=100).contains(&s.len()),
        ),
        // client_oid: a UUID.
        (
            "coinbase",
            <ergon_venues::coinbase_exchange::CoinbaseExchange as ClientIds>::ID_FORMAT,
            is_uuid,
        ),
    ]
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && s.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit())
}

/// A signer type for naming Hyperliquid's adapter (nothing is signed here).
struct NoSigner;

impl ergon_venues::hyperliquid::Signer for NoSigner {
    fn address(&self) -> &str {
        ""
    }
    fn sign(
        &mut self,
        _: ergon_venues::hyperliquid::Action<'_>,
        _: &[u8],
        _: u64,
        _: u64,
    ) -> Result<ergon_venues::hyperliquid::Signature, ergon_venues::adapt::Error> {
        Err(ergon_venues::adapt::Error::Unsupported)
    }
}

proptest! {
    /// Two boots on one state (the second's wall clock anywhere, behind the first
    /// included), each issuing from its own sequence and from blocks handed to
    /// strategy processes: every id differs from every other, and each fits every
    /// venue's rule in the form its adapter declares.
    #[test]
    fn ids_of_two_boots_never_collide_and_fit_each_venues_rule(
        wall1 in 0u64..=MAX_EPOCH / 2,
        wall2 in 0u64..=MAX_EPOCH / 2,
        last in proptest::option::of(0u64..=MAX_EPOCH / 2),
        n in 1usize..40,
        block in 1u64..8,
        start in prop_oneof![Just(0u64), Just((1u64 << 52) - 4), Just(u64::MAX - 200)],
    ) {
        let e1 = boot_epoch(wall1, last).unwrap();
        // The second boot reads the epoch the first kept, whatever its clock says.
        let e2 = boot_epoch(wall2, Some(e1)).unwrap();
        prop_assert!(e2 > e1);
        for (venue, format, rule) in venues() {
            let mut seen = HashSet::new();
            for epoch in [e1, e2] {
                let mut gw = IdIssuer::range(format, epoch, start, u64::MAX).unwrap();
                let mut client = gw.block(block).unwrap();
                for _ in 0..n {
                    for id in [gw.next_id(), client.next_id()] {
                        let Ok(id) = id else { continue }; // a block runs out
                        prop_assert!(rule(id.as_str()), "{venue}: {}", id.as_str());
                        prop_assert!(seen.insert(id), "{venue}: {} twice", id.as_str());
                    }
                }
            }
        }
    }
}

#[test]
fn a_boot_epoch_is_bounded_and_a_block_cannot_outgrow_its_issuer() {
    assert_eq!(
        boot_epoch(MAX_EPOCH, Some(MAX_EPOCH)),
        Err(IdError::EpochTooLarge)
    );
    assert_eq!(boot_epoch(u64::MAX, None), Err(IdError::EpochTooLarge));
    assert_eq!(boot_epoch(5, Some(u64::MAX)), Err(IdError::EpochTooLarge));
    let mut i = IdIssuer::range(IdFormat::Hex, 7, 10, 12).unwrap();
    assert_eq!(i.block(3), Err(IdError::Exhausted));
    let mut b = i.block(2).unwrap();
    assert_eq!(i.next_id(), Err(IdError::Exhausted));
    assert!(b.next_id().is_ok() && b.next_id().is_ok());
    assert_eq!(b.next_id(), Err(IdError::Exhausted));
}

// ---- the ledger's refusal, on a scripted transport ----

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;
const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":100},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;

struct Script {
    budget: Budget,
    now: i64,
    next: u64,
    sent: Vec<(RequestId, Option<Flight>)>,
}

impl Wire for Script {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, _: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        self.next += 1;
        let id = RequestId(self.next);
        self.sent.push((id, Some(t.sent())));
        Ok(id)
    }
}

fn setup() -> (Gateway<BinanceSpot>, Script) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(T0, 1_700_000_000_000);
    let acct = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30 * MS)
        .unwrap()
        .with_auth(Auth::new("k", b"s", 5_000).unwrap());
    let w = Script {
        budget: b.build(T0).unwrap(),
        now: T0,
        next: 0,
        sent: Vec::new(),
    };
    (Gateway::new(acct, "BTCUSDT", 8, 1024).unwrap(), w)
}

fn order(id: ClientOrderId) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("50000").ok(),
        quantity: Decimal::new("0.001").unwrap(),
        client_order_id: id,
        reduce_only: false,
    }
}

/// On main the second order under "mine-1" was charged and sent while the first
/// was still in flight.
#[test]
fn a_strategy_given_id_live_in_the_ledger_is_refused_and_nothing_is_charged() {
    let (mut gw, mut w) = setup();
    let mut p = Prepared::with_capacity(1024);
    let mine = ClientOrderId::new("mine-1").unwrap();
    gw.venue_mut()
        .new_order(&mut p, &order(mine), w.now)
        .unwrap();
    assert_eq!(gw.submit(&mut w, &mut p, Class::Normal, 1), Ok(()));
    let used = w
        .budget
        .ids()
        .map(|b| w.budget.stats(b).unwrap().used)
        .sum::<u64>();

    // The same id again while the first is on the wire: refused, nothing charged.
    gw.venue_mut()
        .new_order(&mut p, &order(mine), w.now)
        .unwrap();
    assert_eq!(
        gw.submit(&mut w, &mut p, Class::Normal, 2),
        Err(Event::DuplicateId { tag: 2 })
    );
    assert_eq!(w.sent.len(), 1, "nothing sent");
    let after = w
        .budget
        .ids()
        .map(|b| w.budget.stats(b).unwrap().used)
        .sum::<u64>();
    assert_eq!(after, used, "nothing charged");
    assert_eq!(gw.stats().duplicate_ids, 1);

    // A cancel of it names it without placing it: not refused.
    let it = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: mine,
    };
    gw.venue_mut().cancel(&mut p, &it, w.now).unwrap();
    assert_eq!(gw.submit(&mut w, &mut p, Class::Normal, 3), Ok(()));

    // Another strategy-given id goes.
    let other = ClientOrderId::new("mine-2").unwrap();
    gw.venue_mut()
        .new_order(&mut p, &order(other), w.now)
        .unwrap();
    assert_eq!(gw.submit(&mut w, &mut p, Class::Normal, 4), Ok(()));

    // Once both requests naming "mine-1" have settled, the ledger no longer holds it.
    let body = br#"{"symbol":"BTCUSDT","orderId":1,"clientOrderId":"mine-1","status":"NEW"}"#;
    for k in [0, 1] {
        let (id, flight) = (w.sent[k].0, w.sent[k].1.take().unwrap());
        w.now += MS;
        let r = Response {
            status: 200,
            headers: &[],
            body,
        };
        let ev = gw.on_response(&mut w, id, r, flight);
        assert!(ev.is_some_and(|e| e.is_final()), "{ev:?}");
    }
    gw.venue_mut()
        .new_order(&mut p, &order(mine), w.now)
        .unwrap();
    assert_eq!(gw.submit(&mut w, &mut p, Class::Normal, 5), Ok(()));
}

/// The gateway issues ids only once it has a boot epoch; they fit the venue and
/// are never refused as its own.
#[test]
fn the_gateway_issues_ids_of_its_boot_epoch() {
    let (mut gw, mut w) = setup();
    assert_eq!(gw.next_client_order_id(), Err(IdError::NoEpoch));
    gw.set_boot_epoch(1_764_600_000_000).unwrap();
    let mut p = Prepared::with_capacity(1024);
    let mut seen = HashSet::new();
    for tag in 0..6 {
        let id = gw.next_client_order_id().unwrap();
        assert!(seen.insert(id));
        assert_eq!(id.as_str().len(), 32, "{}", id.as_str());
        gw.venue_mut().new_order(&mut p, &order(id), w.now).unwrap();
        assert_eq!(gw.submit(&mut w, &mut p, Class::Normal, tag), Ok(()));
    }
    // The same epoch again changes nothing; the sequence goes on.
    gw.set_boot_epoch(1_764_600_000_000).unwrap();
    assert!(seen.insert(gw.next_client_order_id().unwrap()));
}
