//! The binance-spot adapter: any bytes as a captured response file, read as the answer
//! to every request kind. A file that is not HTTP is an error; nothing panics.
#![no_main]

#[path = "../../io/examples/venues/binance_futures.rs"]
#[allow(dead_code)]
mod binance_futures;
#[path = "../../io/examples/venues/binance_spot.rs"]
#[allow(dead_code)]
mod binance_spot;
#[path = "../../io/examples/venues/bybit.rs"]
#[allow(dead_code)]
mod bybit;
#[path = "../../io/examples/venues/common.rs"]
#[allow(dead_code)]
mod common;
#[path = "../../io/examples/venues/hyperliquid.rs"]
#[allow(dead_code)]
mod hyperliquid;
#[path = "../../io/examples/venues/okx.rs"]
#[allow(dead_code)]
mod okx;

use ergon_core::adapt::Request;
use libfuzzer_sys::fuzz_target;

const REQUESTS: [Request<'static>; 8] = [
    Request::Order,
    Request::Cancel,
    Request::CancelReplace,
    Request::Batch(3),
    Request::Read(5),
    Request::Info("userFills"),
    Request::Info("userRateLimit"),
    Request::Connect,
];

fuzz_target!(|data: &[u8]| {
    let Ok(file) = common::HttpFile::parse(data) else {
        return;
    };
    let (mut adapter, mut budget) =
        common::venue("binance-spot", common::NOW_NS, common::FIXTURE_NOW_UTC_MS).unwrap();
    for (i, req) in REQUESTS.into_iter().enumerate() {
        let now = common::NOW_NS + i as i64;
        let _ = file.with_response(|r| adapter.on_response(req, r, &mut budget, now));
    }
});
