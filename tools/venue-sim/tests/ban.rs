//! Bans: an IP that keeps sending into a 429 gets 418 with Retry-After, bans escalate
//! for repeat offenders, and a forced ban refuses everything until it ends.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{at_window_start, order_params, Client, Resp};
use ergon_venue_sim::{BanPolicy, Config, Interval, LimitType, RateLimit, Server};

fn banned_until(r: &Resp) -> i64 {
    let msg = r.json()["msg"].as_str().unwrap().to_string();
    let rest = msg.split("IP banned until ").nth(1).expect("ban message");
    rest.split('.').next().unwrap().parse().unwrap()
}

/// Fills the window, takes a 429, then sends into it until the 418.
fn flood_until_banned(s: &Server, c: &mut Client) -> (Resp, i64) {
    at_window_start(s, 1_000);
    for _ in 0..5 {
        assert_eq!(c.get("/api/v3/ping").status, 200);
    }
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 429);
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 429, "first request into the 429 is one violation");
    let before = s.clock().now_ms();
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 418, "second violation bans: {}", r.body);
    assert_eq!(r.code(), -1003);
    (r, before)
}

#[test]
fn sending_into_a_429_is_banned_and_bans_escalate() {
    let mut cfg = Config::binance_spot();
    cfg.rate_limits = vec![RateLimit::new(
        LimitType::RequestWeight,
        Interval::Second,
        1,
        5,
    )];
    cfg.ban = BanPolicy {
        after_violations: 2,
        first_ms: 1_200,
        max_ms: 10_000,
    };
    let s = Server::start(cfg).unwrap();
    let mut c = Client::connect(s.addr());

    let (r, before) = flood_until_banned(&s, &mut c);
    let first = banned_until(&r) - before;
    assert!((1_200..2_000).contains(&first), "first ban {first} ms");
    assert_eq!(r.header_u64("Retry-After"), 2);
    // Still banned: every request is 418, orders included, and nothing executes.
    let o = c
        .signed(&s, "POST", "/api/v3/order", &order_params("b1"))
        .unwrap();
    assert_eq!(o.status, 418);

    // Past the first ban's end, on the venue's clock.
    s.advance_clock(1_300);
    let (r, before) = flood_until_banned(&s, &mut c);
    let second = banned_until(&r) - before;
    assert!(
        (2_300..=2_500).contains(&second),
        "second ban {second} ms: doubles"
    );
    assert_eq!(r.header_u64("Retry-After"), 3);

    let rep = s.stop();
    assert_eq!(rep.bans, 2);
    assert_eq!(rep.executions, 0);
    assert_eq!(rep.banned_requests, 3);
    assert_eq!(rep.throttled, 4);
}

#[test]
fn a_forced_ban_refuses_everything_until_it_ends() {
    let s = Server::start(Config::binance_spot()).unwrap();
    let mut c = Client::connect(s.addr());
    assert_eq!(c.get("/api/v3/ping").status, 200);
    s.ban(IpAddr::V4(Ipv4Addr::LOCALHOST), 800);
    let r = c.get("/api/v3/ping");
    assert_eq!(r.status, 418);
    assert_eq!(r.header_u64("Retry-After"), 1);
    let o = c
        .signed(&s, "POST", "/api/v3/order", &order_params("f1"))
        .unwrap();
    assert_eq!(o.status, 418);
    s.advance_clock(900);
    assert_eq!(c.get("/api/v3/ping").status, 200);
    let rep = s.stop();
    assert_eq!(rep.bans, 1);
    assert_eq!(rep.banned_requests, 2);
    assert_eq!(rep.executions, 0);
}

#[test]
fn default_ban_policy_is_two_minutes_to_three_days() {
    let p = BanPolicy::default();
    assert_eq!(p.duration_ms(0), 2 * 60_000);
    assert_eq!(p.duration_ms(20), 3 * 86_400_000);
    let mut last = 0;
    for level in 0..20 {
        let d = p.duration_ms(level);
        assert!(d >= last, "never shorter for a repeat offender");
        last = d;
    }
}
