//! Bybit's reconcile finds closed orders (issue 26, item 2): the real-time query
//! lists only the account's 500 most recently closed orders, so the adapter also
//! asks the order history by `orderLinkId`, on that endpoint's own per-UID limit,
//! and reads its answer like the real-time one. The answers are the docs' example
//! (<https://bybit-exchange.github.io/docs/v5/order/order-list>, checked
//! 2026-12-01) and an empty list.

use ergon_core::{Budget, Verdict};
use ergon_venues::adapt::{Clock, Request, Venue};
use ergon_venues::bybit::{self, Bybit};
use ergon_venues::classify::HttpFile;
use ergon_venues::endpoint::{
    ClientOrderId, Endpoints, HmacKey, Lookup, Method, OrderRef, OrderState, Prepared, Symbol,
};

const SEC: i64 = 1_000_000_000;

fn bybit() -> (Bybit, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(10 * SEC, 1_700_000_000_000);
    let auth = bybit::Auth::new("XXXXXXXXXX", b"YYYYYYYYYY", 5000).unwrap();
    let venue = Bybit::new(&mut b, clock, bybit::Config::default())
        .unwrap()
        .with_auth(auth);
    (venue, b.build(0).unwrap())
}

fn read<T>(case: &str, f: impl FnOnce(&ergon_venues::response::Response<'_>) -> T) -> T {
    let path = ergon_venues::classify::fixtures()
        .join("bybit")
        .join(format!("{case}.http"));
    let file = HttpFile::parse(&std::fs::read(path).unwrap()).unwrap();
    file.with_response(f)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `GET /v5/order/history?category=...&symbol=...&orderLinkId=...`, signed like
/// any GET, charged once on the IP's 5 s and once on the history's own limit.
#[test]
fn the_closed_order_query_asks_the_history_on_its_own_limit() {
    let (mut v, budget) = bybit();
    let mut p = Prepared::default();
    let order = OrderRef {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        client_order_id: ClientOrderId::new("YLxaWKMiHU").unwrap(),
    };
    v.query_closed_order(&mut p, &order, 10 * SEC).unwrap();
    assert_eq!(
        (p.method(), p.target()),
        (
            Some(Method::Get),
            "/v5/order/history?category=linear&symbol=BTCUSDT&orderLinkId=YLxaWKMiHU"
        )
    );
    let want = HmacKey::new(b"YYYYYYYYYY").sign(&[
        b"1700000000000XXXXXXXXXX5000category=linear&symbol=BTCUSDT&orderLinkId=YLxaWKMiHU",
    ]);
    assert_eq!(p.header("X-BAPI-SIGN"), Some(hex(&want).as_str()));
    assert_eq!(p.client_order_id().map(|c| c.as_str()), Some("YLxaWKMiHU"));
    assert_eq!(p.kind(), Some(Request::Info(bybit::HISTORY)));
    let mut parts: Vec<_> = p
        .parts()
        .iter()
        .map(|x| (budget.name(x.bucket).unwrap(), x.cost))
        .collect();
    parts.sort();
    assert_eq!(
        parts,
        [("/v5/order/history", 1), ("ip", 0), ("ip_5s", 1)],
        "not on the shared read bucket"
    );
    assert!(Venue::parts(&v, Request::Info("l2Book")).is_err());
}

/// The docs' example answer: a cancelled order is found, with its venue id and
/// filled quantity; an empty list is not found; the usage headers count on the
/// history's bucket.
#[test]
fn the_history_answer_reads_as_found_or_not_found() {
    let (mut v, mut budget) = bybit();
    let found = read("history_closed", |r| v.read_order(r));
    let Lookup::Found(info) = found else {
        panic!("{found:?}")
    };
    assert_eq!(
        (
            info.state,
            info.venue_order_id.as_str(),
            info.filled.as_deref()
        ),
        (
            OrderState::Canceled,
            "14bad3a1-6454-43d8-bcf2-5345896cf74d",
            Some("0.000")
        )
    );
    assert_eq!(
        read("history_not_found", |r| v.read_order(r)),
        Lookup::NotFound
    );
    let kind = Request::Info(bybit::HISTORY);
    let verdict = read("history_not_found", |r| {
        v.on_response(kind, r, &mut budget, 10 * SEC)
    });
    assert_eq!(verdict, Ok(Verdict::Done));
    assert_eq!(
        budget.stats(v.history).unwrap().used,
        2,
        "X-Bapi-Limit 50, status 48"
    );
    assert_eq!(budget.stats(v.read).unwrap().used, 0);
}
