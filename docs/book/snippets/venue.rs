//! The book's venues snippet (docs/book/src/venues.md includes it): Binance
//! Spot's adapter on its exchangeInfo, one order prepared, charged and its
//! documented answer read, then a reconcile query. `cargo run --example book_venue`.

use ergon_venues::classify::{fixtures, HttpFile, SPOT_EXCHANGE_INFO};

// ANCHOR: venue
use ergon_core::{Budget, Class, Verdict};
use ergon_venues::adapt::{Clock, Venue};
use ergon_venues::binance_spot::{self, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Prepared, Side, Symbol,
    TimeInForce,
};

fn main() {
    let now = 10_000_000_000; // our clock, ns
    let clock = Clock::anchor(now, 1_499_827_319_559); // the venue's ms at that now
    let mut builder = Budget::builder();
    // The limits come from the venue's own exchangeInfo answer.
    let auth = binance_spot::Auth::new("api-key", b"secret", 5000).expect("a key");
    let mut spot = BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut builder, clock, 0)
        .expect("exchangeInfo's rateLimits")
        .with_auth(auth);
    let mut budget = builder.build(now).expect("the venue's buckets");

    let mut p = Prepared::with_capacity(1024);
    let order = NewOrder {
        symbol: Symbol::new("LTCBTC").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new("0.1").ok(),
        quantity: Decimal::new("1").unwrap(),
        client_order_id: ClientOrderId::new("mm-42").unwrap(),
        reduce_only: false,
    };
    spot.new_order(&mut p, &order, now).unwrap(); // signed; p.parts() is what it costs
    let Ok(ticket) = budget.try_charge(p.parts(), Class::Normal, now) else {
        return; // Limited: nothing sent, nothing charged
    };
    let flight = ticket.sent(); // write p.method(), p.target(), p.headers(), p.body()
                                // The answer (here Binance's documented one) goes through the adapter:
    let file = std::fs::read(fixtures().join("binance-spot/order_ok.http")).unwrap();
    let answer = HttpFile::parse(&file).unwrap();
    let verdict =
        answer.with_response(|r| spot.on_response(p.kind().unwrap(), r, &mut budget, now));
    budget.complete(flight, now).unwrap();
    assert_eq!(verdict, Ok(Verdict::Done));
    // An Unknown verdict is reconciled by client order id, never re-sent:
    let mine = OrderRef {
        symbol: order.symbol,
        client_order_id: order.client_order_id,
    };
    spot.query_order(&mut p, &mine, now).unwrap();
}
// ANCHOR_END: venue
