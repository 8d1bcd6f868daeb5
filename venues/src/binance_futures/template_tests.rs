//! The USD-M futures order template writes what `BinanceFutures::new_order` writes,
//! byte for byte.

use proptest::prelude::*;

use super::BinanceFutures;
use crate::adapt::Clock;
use crate::binance_spot::template::case::case;
use crate::binance_spot::template::tests::{seen, API_KEY, SEC, SECRET};
use crate::binance_spot::Auth;
use crate::endpoint::{Endpoints, Prepared};

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
        c in case(),
        reduce_only in any::<bool>(),
    ) {
        let mut fut = futures(c.recv_window);
        let (order, fill) = c.order(reduce_only);
        let t = fut.order_template(order.symbol, c.side, c.order_type, reduce_only).unwrap();
        let mut a = Prepared::default();
        let mut b = Prepared::with_capacity(1024);
        fut.new_order(&mut a, &order, c.now).unwrap();
        // Twice into the same request: the second written over the first (when
        // the timestamp has 13 digits both times) keeps only what is the same.
        fut.new_order_from(&t, &mut b, &fill, c.now / 2).unwrap();
        fut.new_order_from(&t, &mut b, &fill, c.now).unwrap();
        prop_assert_eq!(seen(&a), seen(&b));
        let mut f = Prepared::default();
        fut.new_order_from(&t, &mut f, &fill, c.now).unwrap();
        prop_assert_eq!(b.parts_key(), f.parts_key());
        prop_assert!(b.target().starts_with("/fapi/v1/order?"));
    }
}
