// Included by every venue fuzz target: the adapters name each other from the crate
// root, so they are included, not a module. Each target reads any bytes as a captured
// response file, the answer to every request kind by one venue's adapter. A file that
// is not HTTP is an error; nothing panics.

#[path = "../../../io/examples/venues/binance_futures.rs"]
#[allow(dead_code)]
mod binance_futures;
#[path = "../../../io/examples/venues/binance_spot.rs"]
#[allow(dead_code)]
mod binance_spot;
#[path = "../../../io/examples/venues/bybit.rs"]
#[allow(dead_code)]
mod bybit;
#[path = "../../../io/examples/venues/common.rs"]
#[allow(dead_code)]
mod common;
#[path = "../../../io/examples/venues/hyperliquid.rs"]
#[allow(dead_code)]
mod hyperliquid;
#[path = "../../../io/examples/venues/okx.rs"]
#[allow(dead_code)]
mod okx;

use ergon_core::adapt::Request;

pub const REQUESTS: [Request<'static>; 8] = [
    Request::Order,
    Request::Cancel,
    Request::CancelReplace,
    Request::Batch(3),
    Request::Read(5),
    Request::Info("userFills"),
    Request::Info("userRateLimit"),
    Request::Connect,
];

/// Feeds `data` to `venue`'s adapter as the answer to each of [`REQUESTS`].
pub fn run(venue: &str, data: &[u8]) {
    let Ok(file) = common::HttpFile::parse(data) else {
        return;
    };
    let (mut adapter, mut budget) =
        common::venue(venue, common::NOW_NS, common::FIXTURE_NOW_UTC_MS).unwrap();
    for (i, req) in REQUESTS.into_iter().enumerate() {
        let now = common::NOW_NS + i as i64;
        let _ = file.with_response(|r| adapter.on_response(req, r, &mut budget, now));
    }
}
