use super::errors::error_verdict;
use super::*;
use crate::endpoint::{Endpoints, Placed};

/// The age table of docs.kraken.com/exchange/guides/general/ratelimits, row by
/// row, at each edge.
#[test]
fn costs_by_age_follow_the_documented_table() {
    let s = |x: i64| x * SEC;
    let ages = [
        0,
        s(5) - 1,
        s(5),
        s(10) - 1,
        s(10),
        s(15),
        s(45) - 1,
        s(45),
        s(90),
        s(300) - 1,
        s(300),
        s(3600),
    ];
    let cancel = [8, 8, 6, 6, 5, 4, 4, 2, 1, 1, 0, 0];
    let amend = [4, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1];
    let edit = [7, 7, 6, 6, 5, 3, 3, 2, 1, 1, 1, 1];
    for (i, age) in ages.into_iter().enumerate() {
        assert_eq!(cancel_cost(age), cancel[i], "cancel at {age}");
        assert_eq!(amend_cost(age), amend[i], "amend at {age}");
        assert_eq!(edit_cost(age), edit[i], "edit at {age}");
    }
    // A negative age (clock step) is the youngest order.
    assert_eq!(cancel_cost(-1), 8);
    assert_eq!((batch_cost(1), batch_cost(15)), (1, 8));
}

#[test]
fn the_counter_decays_at_the_tier_rate() {
    let mut b = Budget::builder();
    let k = KrakenSpot::new(&mut b, Clock::anchor(0, 0), Config::PRO).unwrap();
    let mut budget = b.build(0).unwrap();
    // 180 of cancels of fresh orders: 22 of them (176), then the 23rd (8) fails.
    for _ in 0..22 {
        let t = budget
            .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 0)
            .unwrap();
        budget.complete(t.sent(), 0).unwrap();
    }
    assert!(budget
        .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 0)
        .is_err());
    // A 2-minute-old order costs 1 and fits.
    let t = budget
        .try_charge(&k.cancel_parts(120 * SEC), ergon_core::Class::Normal, 0)
        .unwrap();
    budget.complete(t.sent(), 0).unwrap();
    // 177 of 180: a fresh cancel (8) needs 5 units to decay, at 3.75 per second
    // 1.33 s.
    assert!(budget
        .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 1_300 * MS)
        .is_err());
    assert!(budget
        .try_charge(&k.cancel_parts(0), ergon_core::Class::Normal, 1_400 * MS)
        .is_ok());
}

/// `EService: Throttled: <UNIX s>` as the REST rate-limit page writes it, and
/// the variants a reader may meet: no space, a fraction (rounded up), nothing
/// readable (`None`: held one window, still not run).
#[test]
fn the_throttle_timestamp_is_read_or_refused() {
    let until = |e: &[u8]| match error_verdict(e, false) {
        Said::Throttled(t) => Some(t),
        _ => None,
    };
    assert_eq!(
        until(b"EService: Throttled: 1700000003"),
        Some(Some(1_700_000_003))
    );
    assert_eq!(
        until(b"EService:Throttled:1700000003"),
        Some(Some(1_700_000_003))
    );
    assert_eq!(
        until(b"EService:Throttled: 1700000003.25"),
        Some(Some(1_700_000_004))
    );
    assert_eq!(
        until(b"EService:Throttled: 1700000003.00"),
        Some(Some(1_700_000_003))
    );
    for bad in [
        &b"EService: Throttled"[..],
        b"EService: Throttled:",
        b"EService: Throttled: soon",
        b"EService: Throttled: 17000x",
        b"EService: Throttled: -5",
        b"EService: Throttled: 99999999999999999999999",
        b"EService: Throttled: 1.2.3",
    ] {
        assert_eq!(until(bad), Some(None), "{}", String::from_utf8_lossy(bad));
    }
    // A cut string's digits are not trusted.
    assert!(matches!(
        error_verdict(b"EService: Throttled: 1700000003", true),
        Said::Throttled(None)
    ));
    assert!(matches!(error_verdict(b"EService:Busy", false), Said::Busy));
    assert!(matches!(
        error_verdict(b"EService:Unavailable", false),
        Said::Busy
    ));
    assert!(matches!(
        error_verdict(b"EGeneral:Internal error:123", false),
        Said::Busy
    ));
}

fn answer(body: &str, request: Request<'_>) -> (Verdict, Budget, KrakenSpot) {
    let mut b = Budget::builder();
    let mut k = KrakenSpot::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        Config::default(),
    )
    .unwrap();
    let mut budget = b.build(0).unwrap();
    let t = budget
        .try_charge(&k.parts(request).unwrap(), ergon_core::Class::Normal, 0)
        .unwrap();
    let flight = t.sent();
    let r = Response {
        status: 200,
        headers: &[],
        body: body.as_bytes(),
    };
    let v = k.on_response(request, &r, &mut budget, 0).unwrap();
    budget.complete(flight, 0).unwrap();
    (v, budget, k)
}

/// A throttle holds the IP gate (a limit of concurrent requests, issue 39:
/// on main it held the request's own counter, the per-pair trading counter
/// for an order): until its second, one far ahead past the cap halts it, an
/// unreadable one holds it as a 429 without a wait does. No counter is held.
#[test]
fn the_throttle_holds_until_its_second() {
    let (v, b, k) = answer(
        r#"{"error":["EService: Throttled: 1700000003"]}"#,
        Request::Order,
    );
    assert_eq!(
        v,
        Verdict::Throttled {
            bucket: k.ip,
            until_ns: 3 * SEC + ergon_core::DEFAULT_HOLD_GUARD_NS
        }
    );
    for id in [k.trading, k.api, k.public] {
        assert_eq!(b.stats(id).unwrap().held_until_ns, None);
    }
    let (v, _, k) = answer(
        r#"{"error":["EService: Throttled: 1800000000"]}"#,
        Request::Read(2),
    );
    assert!(
        matches!(v, Verdict::Banned { bucket, .. } if bucket == k.ip),
        "{v:?}"
    );
    let (v, _, k) = answer(r#"{"error":["EService: Throttled"]}"#, Request::Read(0));
    assert!(
        matches!(v, Verdict::Throttled { bucket, .. } if bucket == k.ip),
        "{v:?}"
    );
}

/// What surely did not run is refused by the placed reader; what may have run
/// stays unknown, a long string included (read by its prefix, never refused
/// as unreadable).
#[test]
fn the_placed_reader_refuses_only_what_did_not_run() {
    let k = {
        let mut b = Budget::builder();
        KrakenSpot::new(&mut b, Clock::anchor(0, 0), Config::default()).unwrap()
    };
    let placed = |body: &str| {
        k.read_placed(&Response {
            status: 200,
            headers: &[],
            body: body.as_bytes(),
        })
    };
    for refused in [
        "EService: Throttled: 1700000003",
        "EService:Deadline elapsed",
        "EService:Market in cancel_only mode",
        "EService:Market in post_only mode",
        "EService:Market in limit_only mode",
        "EGeneral:Too many requests",
        "EOrder:Insufficient funds",
    ] {
        let body = format!(r#"{{"error":["{refused}"]}}"#);
        assert_eq!(placed(&body), Placed::Refused, "{refused}");
    }
    let long = format!("EService:Busy:{}", "x".repeat(200));
    for unknown in [
        "EService:Busy",
        "EService:Unavailable",
        "EGeneral:Internal error",
        &long,
    ] {
        let body = format!(r#"{{"error":["{unknown}"]}}"#);
        assert_eq!(placed(&body), Placed::Unknown, "{unknown}");
    }
    let (v, ..) = answer(&format!(r#"{{"error":["{long}"]}}"#), Request::Order);
    assert_eq!(v, Verdict::Unknown);
}

#[test]
fn a_zero_decay_is_refused() {
    let mut b = Budget::builder();
    let c = Config {
        trading_decay_milli_per_s: 0,
        ..Config::default()
    };
    assert_eq!(
        KrakenSpot::new(&mut b, Clock::anchor(0, 0), c).unwrap_err(),
        Error::BadField("decay")
    );
}
