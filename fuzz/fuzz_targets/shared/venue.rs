// Included by every venue fuzz target. Each target reads any bytes as a captured
// response file, the answer to every request kind by one venue's adapter. A file that
// is not HTTP is an error; nothing panics.

use ergon_venues::adapt::Request;
use ergon_venues::classify as common;

pub const REQUESTS: [Request<'static>; 10] = [
    Request::Order,
    Request::Cancel,
    Request::CancelReplace,
    Request::Batch(3),
    Request::Read(5),
    Request::Info("userFills"),
    Request::Info("userRateLimit"),
    Request::Info("fills"),
    Request::Info("public"),
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
