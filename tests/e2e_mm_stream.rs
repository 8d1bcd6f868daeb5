//! End to end: the market-making example taking order updates and fills from the
//! emulator's user data stream (a WebSocket whose limits the emulator enforces),
//! checking over REST only every few seconds.
//!
//! 1. With the stream, at 3x demand: zero 429s, zero bans, zero duplicates, zero
//!    WebSocket cuts, and every order's state from the stream equals the
//!    emulator's registry.
//! 2. The venue pings faster than the client's message limit: pongs are delayed
//!    and coalesced by the budget, the connection is never cut.
//! 3. A resting quote canceled by someone else: the stream tells the loop, which
//!    quotes afresh instead of sending a cancel-replace that would fail.
//! 4. `--no-stream`: no WebSocket at all; open orders are polled instead.
//! 5. A ban halts the IP gate: a stream that drops meanwhile is not reconnected
//!    until a person clears the halt (its connect charges the gate).

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ergon_venue_sim::{
    Config, Interval, LimitType, RateLimit, Report, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET,
};
use hmac::{Hmac, Mac};
use mm_loop::{parse_args, run, to_json, Control, Options, Summary};
use sha2::Sha256;

fn sim() -> Config {
    let mut c = Config::binance_spot();
    c.rate_limits = vec![
        RateLimit::new(LimitType::RequestWeight, Interval::Second, 1, 150),
        RateLimit::new(LimitType::Orders, Interval::Second, 1, 20),
        RateLimit::new(LimitType::Orders, Interval::Day, 1, 1_000_000),
        RateLimit::new(LimitType::RawRequests, Interval::Minute, 5, 1_000_000),
    ];
    // Pings often enough that pongs matter (about 3 a second against the
    // client's 4 and the venue's 5), a pong due within 2 s.
    c.ws.ping_interval_ms = 300;
    c.ws.pong_timeout_ms = 2_000;
    c
}

fn go(duration_s: f64, sim: Config, stream: bool) -> (Summary, Report) {
    let o = Options {
        duration_s,
        demand: 3.0,
        quiet: true,
        sim,
        stream,
        ..Options::default()
    };
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    let r = s.venue.clone().expect("the emulator's report");
    (s, r)
}

fn clean(s: &Summary, r: &Report) {
    assert_eq!(r.throttled + r.order_rate_limited, 0, "venue 429s: {s:?}");
    assert_eq!(r.bans, 0);
    assert_eq!((s.throttled, s.banned), (0, 0));
    assert_eq!(r.duplicates, 0);
    for l in &r.limits {
        assert_eq!(l.windows_over, 0, "{:?} went over", l.rate_limit);
    }
}

#[test]
fn with_the_stream_no_429_no_cut_and_the_stream_matches_the_registry() {
    let (s, r) = go(6.0, sim(), true);
    clean(&s, &r);
    let st = &s.stream;
    assert!(st.enabled);
    assert_eq!(
        (st.connects, st.cuts),
        (1, 0),
        "one connection, never cut: {st:?}"
    );
    assert_eq!(r.ws.connects, 1);
    assert_eq!(r.ws.cuts(), 0, "the venue cut nothing: {:?}", r.ws);
    // The client sends at most 4 in any second by its own clock; delivery jitter
    // on a loaded machine can bunch them, never past the venue's 5.
    assert!(
        (1..=5).contains(&r.ws.messages_peak),
        "within the venue's 5 frames a second: {:?}",
        r.ws
    );
    assert!(r.ws.pings >= 10 && st.pongs >= 10, "pings answered: {st:?}");
    assert!(st.rest_checks >= 2, "open orders checked over REST: {st:?}");
    assert_eq!(st.mismatches, 0, "stream and REST agreed: {st:?}");

    // Every order the venue holds, as the stream reported it.
    let registry = r_orders(&s);
    assert!(registry.len() > 20, "the loop traded: {}", registry.len());
    assert_eq!(st.events, r.ws.events, "every event the venue sent arrived");
    for (cid, status, executed) in &registry {
        let got = st.orders.get(cid);
        assert_eq!(
            got.map(|(s, e)| (s.as_str(), e.as_str())),
            Some((status.as_str(), executed.as_str())),
            "order {cid}"
        );
    }
    assert_eq!(st.orders.len(), registry.len(), "no order the venue lacks");
    let filled = registry.iter().filter(|o| o.1 == "FILLED").count() as u64;
    assert_eq!(
        st.fills, filled,
        "one fill event per filled protective close"
    );
    assert_eq!(s.unknown, 0);
}

/// The registry the emulator reported at the end of the run.
fn r_orders(s: &Summary) -> Vec<(String, String, String)> {
    s.venue_orders
        .iter()
        .map(|o| {
            (
                o.client_id.clone(),
                o.status.clone(),
                o.executed_qty.clone(),
            )
        })
        .collect()
}

#[test]
fn pings_faster_than_the_message_limit_are_answered_within_it() {
    let mut c = sim();
    c.ws.ping_interval_ms = 100; // 10 a second: twice the venue's own limit
    let (s, r) = go(3.0, c, true);
    clean(&s, &r);
    let st = &s.stream;
    assert_eq!(st.cuts, 0, "{st:?}");
    assert_eq!(r.ws.cuts(), 0, "{:?}", r.ws);
    assert!(r.ws.messages_peak <= 5, "{:?}", r.ws);
    assert!(st.pings >= 20, "{st:?}");
    assert!(st.pongs_delayed > 0, "the budget delayed pongs: {st:?}");
    assert!(
        st.pongs < st.pings,
        "later pings answered for earlier ones: {st:?}"
    );
}

/// Cancels `cid` at the emulator as another process of the same account would.
fn cancel_as_someone_else(server: &Server, cid: &str) -> String {
    let q = format!(
        "symbol=BTCUSDT&origClientOrderId={cid}&timestamp={}",
        server.clock().now_ms()
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(DEFAULT_API_SECRET.as_bytes()).unwrap();
    mac.update(q.as_bytes());
    let sig: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut c = TcpStream::connect(server.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "DELETE /api/v3/order?{q}&signature={sig} HTTP/1.1\r\nHost: sim\r\nX-MBX-APIKEY: {DEFAULT_API_KEY}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

#[test]
fn a_quote_canceled_by_someone_else_is_quoted_afresh() {
    canceled_by_someone_else(true);
}

#[test]
fn without_the_stream_the_poll_finds_the_canceled_quote() {
    canceled_by_someone_else(false);
}

fn canceled_by_someone_else(stream: bool) {
    let server = Arc::new(Server::start(sim()).unwrap());
    let o = Options {
        duration_s: 30.0,
        // With the stream about one cycle a second; without it one every 2 s, so
        // the polls (every 500 ms) come before the next cycle would.
        demand: if stream { 0.1 } else { 0.05 },
        quiet: true,
        stream,
        ..Options::default()
    };
    let control = Arc::new(Control::default());
    let (srv, ctl) = (Arc::clone(&server), Arc::clone(&control));
    let runner = thread::spawn(move || run(&o, ctl, Some(srv)));
    let t0 = Instant::now();
    let resting = loop {
        let open: Vec<String> = server
            .orders()
            .into_iter()
            .filter(|o| o.status == "NEW")
            .map(|o| o.client_id)
            .collect();
        if let Some(cid) = open.first() {
            break cid.clone();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no quote rests");
        thread::sleep(Duration::from_millis(20));
    };
    thread::sleep(Duration::from_millis(100));
    let answer = cancel_as_someone_else(&server, &resting);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The stream tells at once; a poll within 500 ms, before the next cycle.
    thread::sleep(Duration::from_millis(if stream { 2_500 } else { 1_000 }));
    control.stop();
    let s = runner.join().unwrap().unwrap();
    let r = server.report();
    assert_eq!(s.stream.quotes_ended, 1, "{:?}", s.stream);
    assert_eq!(
        s.rejected, 0,
        "no cancel-replace of the canceled quote: {s:?}"
    );
    assert_eq!(s.stream.cuts, 0);
    assert_eq!(r.ws.cuts(), 0);
    if stream {
        assert_eq!(
            s.stream.orders.get(&resting).map(|o| o.0.as_str()),
            Some("CANCELED")
        );
    } else {
        assert_eq!(r.ws.connects, 0);
    }
}

#[test]
fn without_the_stream_open_orders_are_polled() {
    let (s, r) = go(2.0, sim(), false);
    clean(&s, &r);
    assert!(!s.stream.enabled);
    assert_eq!(r.ws.connects + r.ws.listen_keys, 0, "no stream at all");
    // Polls every 500 ms compete with the quotes' reads for weight; some wait.
    assert!(s.stream.rest_checks >= 2, "polled: {:?}", s.stream);
    let o = parse_args(["--no-stream".to_string()].into_iter()).unwrap();
    assert!(!o.stream);
    assert!(
        parse_args(std::iter::empty()).unwrap().stream,
        "on by default"
    );
    let v = to_json(&s);
    assert_eq!(v["stream"]["enabled"], false);
    assert!(v["stream"].get("cuts").is_some());
}

#[test]
fn a_stream_dropped_during_a_ban_reconnects_only_after_the_halt_is_cleared() {
    let server = Arc::new(Server::start(sim()).unwrap());
    let o = Options {
        duration_s: 30.0,
        demand: 1.0,
        quiet: true,
        ..Options::default()
    };
    let control = Arc::new(Control::default());
    let (srv, ctl) = (Arc::clone(&server), Arc::clone(&control));
    let runner = thread::spawn(move || run(&o, ctl, Some(srv)));
    let wait_for = |ms: u64, ok: &dyn Fn(&Report) -> bool| {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(ms) {
            let r = server.report();
            if ok(&r) {
                return r;
            }
            thread::sleep(Duration::from_millis(20));
        }
        server.report()
    };
    let r = wait_for(5_000, &|r| r.executions > 5 && r.ws.connects == 1);
    assert!(
        r.executions > 5 && r.ws.connects == 1,
        "trading with the stream"
    );
    let ban_ms = 1_000;
    let banned_at = Instant::now();
    server.ban(std::net::IpAddr::from([127, 0, 0, 1]), ban_ms);
    let r = wait_for(3_000, &|r| r.banned_requests >= 1);
    assert!(r.banned_requests >= 1, "the loop met the ban");
    assert_eq!(server.close_streams(), 1);
    // The venue's ban ends; the halt stays until a person clears it.
    thread::sleep(Duration::from_millis(ban_ms as u64 + 500).saturating_sub(banned_at.elapsed()));
    let during = server.report();
    assert_eq!(during.ws.connects, 1, "no reconnect while halted");
    assert_eq!(
        during.ws.connects_refused, 0,
        "not even one the venue refused"
    );
    control.clear_halt();
    let after = wait_for(5_000, &|r| r.ws.connects == 2);
    assert_eq!(
        after.ws.connects, 2,
        "reconnected once the halt was cleared"
    );
    control.stop();
    let s = runner.join().unwrap().unwrap();
    assert_eq!(s.sent_while_halted, 0);
    assert_eq!(s.stream.connects, 2, "{:?}", s.stream);
    assert!(
        s.stream.connects_refused > 0,
        "the budget refused: {:?}",
        s.stream
    );
    assert_eq!(s.stream.cuts, 1, "the venue's close");
    assert_eq!(
        server.report().ws.cuts(),
        0,
        "the venue cut nothing for limits"
    );
}
