//! One random Binance order, the generator of every property test that writes an
//! order two ways and compares the bytes (the template and the builder: Spot
//! REST, Spot WebSocket, USD-M REST and its WebSocket twin; and in ergon-io,
//! `tests/http_prepared.rs`, which includes this file by path: so it names this
//! crate `ergon_venues`).

use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Fill, NewOrder, OrderType, Side, Symbol, TimeInForce,
};
use proptest::prelude::*;

const SEC: i64 = 1_000_000_000;

/// Any of the order types a template writes.
pub(crate) fn order_type() -> impl Strategy<Value = OrderType> {
    prop_oneof![
        Just(OrderType::Limit(TimeInForce::Gtc)),
        Just(OrderType::Limit(TimeInForce::Ioc)),
        Just(OrderType::Limit(TimeInForce::Fok)),
        Just(OrderType::PostOnly),
        Just(OrderType::Market),
    ]
}

/// One order the template property tests (Spot REST, Spot WebSocket, USD-M
/// REST) write both ways, with the time and the receive window: the generated
/// values, owned (the order and its fill borrow them).
#[derive(Clone, Debug)]
pub(crate) struct Case {
    symbol: String,
    pub(crate) side: Side,
    pub(crate) order_type: OrderType,
    price: String,
    quantity: String,
    id: String,
    pub(crate) now: i64,
    pub(crate) recv_window: i64,
}

impl Case {
    /// The case as an order (`reduce_only` as given) and as a template's fill.
    pub(crate) fn order(&self, reduce_only: bool) -> (NewOrder<'_>, Fill<'_>) {
        let priced = !matches!(self.order_type, OrderType::Market);
        let price = priced.then(|| Decimal::new(&self.price).unwrap());
        let fill = Fill {
            price,
            quantity: Decimal::new(&self.quantity).unwrap(),
            client_order_id: ClientOrderId::new(&self.id).unwrap(),
        };
        let order = NewOrder {
            symbol: Symbol::new(&self.symbol).unwrap(),
            side: self.side,
            order_type: self.order_type,
            price,
            quantity: fill.quantity,
            client_order_id: fill.client_order_id,
            reduce_only,
        };
        (order, fill)
    }
}

/// Any order of any symbol, side and type, at any time, with any receive window.
pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        "[A-Z0-9]{2,20}",
        any::<bool>(),
        order_type(),
        "[0-9]{1,8}(\\.[0-9]{1,8})?",
        "[0-9]{1,8}(\\.[0-9]{1,8})?",
        "[a-zA-Z0-9._:/-]{1,36}",
        0i64..1_000_000 * SEC,
        1i64..=60_000,
    )
        .prop_map(
            |(symbol, buy, order_type, price, quantity, id, now, recv_window)| Case {
                symbol,
                side: if buy { Side::Buy } else { Side::Sell },
                order_type,
                price,
                quantity,
                id,
                now,
                recv_window,
            },
        )
}
