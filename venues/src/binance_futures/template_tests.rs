//! The USD-M futures order template writes what `BinanceFutures::new_order` writes,
//! byte for byte.

use proptest::prelude::*;

use super::BinanceFutures;
use crate::adapt::Clock;
use crate::binance_spot::template::tests::{order_type, seen, API_KEY, SEC, SECRET};
use crate::binance_spot::Auth;
use crate::endpoint::{
    ClientOrderId, Decimal, Endpoints, Fill, NewOrder, OrderType, Prepared, Side, Symbol,
};

fn futures(recv_window_ms: i64) -> BinanceFutures {
    let mut b = ergon_core::Budget::builder();
    BinanceFutures::new(
        &mut b,
        Clock::anchor(10 * SEC, 1_499_827_319_559),
        0,
        super::DEFAULT_TABLE,
    )
    .unwrap()
    .with_auth(Auth::new(API_KEY, SECRET, recv_window_ms).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// USD-M futures: the same template machinery, its own path, `GTX` for a
    /// post-only order and `reduceOnly` after the client order id.
    #[test]
    fn the_futures_template_writes_what_futures_new_order_writes(
        symbol in "[A-Z0-9]{2,20}",
        buy in any::<bool>(),
        reduce_only in any::<bool>(),
        order_type in order_type(),
        price in "[0-9]{1,8}(\\.[0-9]{1,8})?",
        quantity in "[0-9]{1,8}(\\.[0-9]{1,8})?",
        id in "[a-zA-Z0-9._:/-]{1,36}",
        now in 0i64..1_000_000 * SEC,
        recv_window in 1i64..=60_000,
    ) {
        let mut fut = futures(recv_window);
        let symbol = Symbol::new(&symbol).unwrap();
        let side = if buy { Side::Buy } else { Side::Sell };
        let priced = !matches!(order_type, OrderType::Market);
        let price = priced.then(|| Decimal::new(&price).unwrap());
        let fill = Fill {
            price,
            quantity: Decimal::new(&quantity).unwrap(),
            client_order_id: ClientOrderId::new(&id).unwrap(),
        };
        let order = NewOrder {
            symbol,
            side,
            order_type,
            price,
            quantity: fill.quantity,
            client_order_id: fill.client_order_id,
            reduce_only,
        };
        let t = fut.order_template(symbol, side, order_type, reduce_only).unwrap();
        let mut a = Prepared::default();
        let mut b = Prepared::with_capacity(1024);
        fut.new_order(&mut a, &order, now).unwrap();
        fut.new_order_from(&t, &mut b, &fill, now).unwrap();
        prop_assert_eq!(seen(&a), seen(&b));
        prop_assert!(b.target().starts_with("/fapi/v1/order?"));
    }
}
