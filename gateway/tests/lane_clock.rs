//! The venue clock re-anchored on the WebSocket API lane's answers: the
//! gateway's own lane ([`WsLane`] over an in-memory pipe, driven by
//! [`Gateway::drive_ws`]) against the emulator's WebSocket API engine
//! (`ergon_venue_sim::sansio_ws`), whose venue clock stepped. An order's answer
//! over the lane carries the venue's `transactTime` in its `result` (Binance
//! Spot WebSocket API, "Place new order (TRADE)", response `result.transactTime`),
//! the same evidence as an HTTP answer's body.

use std::net::{IpAddr, Ipv4Addr};

use ergon_core::{Budget, Class, Flight, Part, Spec, Ticket};
use ergon_gateway::ws_api::CONNECTS_PER_5MIN;
use ergon_gateway::{Account, Gateway, Prepared, Wire, WsApiStart, WsIn, WsLane, SILENT_NS};
use ergon_io::client::{Refused, RequestId};
use ergon_io::http::Request;
use ergon_venue_sim::sansio::{Received, SansIo};
use ergon_venue_sim::sansio_ws::{pong, ClientFrame, Upgraded, WsApiConn, WsReceived};
use ergon_venue_sim::Config;
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::{Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderType, Side, Symbol, TimeInForce,
};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const T0: i64 = 1_000 * SEC;
const VENUE_MS0: i64 = 1_700_000_000_000;
const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The HTTP side: nothing goes over it in this test (every write is the lane's).
struct NoHttp {
    budget: Budget,
    now: i64,
    sent: u64,
}

impl Wire for NoHttp {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, _r: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        self.sent += 1;
        let _f: Flight = t.sent();
        Ok(RequestId(self.sent))
    }
}

/// The venue, its clock `step_ms` off ours from the start of the test.
struct Venue {
    engine: SansIo,
    conn: Option<Box<WsApiConn>>,
    step_ms: i64,
}

impl Venue {
    fn ms(&self, now: i64) -> i64 {
        VENUE_MS0 + (now - T0) / MS + self.step_ms
    }
}

fn setup() -> (Gateway<BinanceSpot>, NoHttp, Venue) {
    let cfg = Config::binance_spot();
    let account = cfg.accounts[0].clone();
    let mut engine = SansIo::new(cfg);
    let raw = b"GET /api/v3/exchangeInfo HTTP/1.1\r\nHost: sim\r\n\r\n";
    let info = match engine.admit(raw, IP, VENUE_MS0) {
        Received::Answer(r) => r.body,
        Received::Run(a) => engine.execute(a, VENUE_MS0).body,
    };
    let mut b = Budget::builder();
    let acct = BinanceSpot::from_exchange_info(
        info.as_bytes(),
        &mut b,
        Clock::anchor(T0, VENUE_MS0),
        30 * MS,
    )
    .unwrap()
    .with_auth(Auth::new(&account.api_key, account.secret.as_bytes(), 5_000).unwrap());
    let connects = b
        .add(
            "WS_API_CONNECTS_5M",
            Spec::sliding(CONNECTS_PER_5MIN, 300 * SEC, 60),
        )
        .unwrap();
    let budget = b.build(T0).unwrap();
    let api = acct.ws_api(64).unwrap();
    let mut connect = api.connect_parts().unwrap();
    connect.try_push(Part::new(connects, 1)).unwrap();
    let message = api.message_parts().unwrap();
    let at = WsApiStart {
        addr: "127.0.0.1:9".parse().unwrap(),
        host: "sim".into(),
        path: "/ws-api/v3".into(),
        stream: false,
        silent_ns: SILENT_NS,
    };
    let mut lane = WsLane::new(api, &at, &budget, &connect, &message, None, 7).unwrap();
    lane.use_pipe();
    let mut gw = Gateway::new(acct, "BTCUSDT", 8, 512).unwrap();
    gw.set_ws_api(lane);
    let w = NoHttp {
        budget,
        now: T0,
        sent: 0,
    };
    let venue = Venue {
        engine,
        conn: None,
        step_ms: 0,
    };
    (gw, w, venue)
}

/// Drives the lane and carries its bytes to the venue and back (each leg
/// `leg` long), until it writes nothing more; the events it reported.
fn pump(gw: &mut Gateway<BinanceSpot>, w: &mut NoHttp, v: &mut Venue, leg: i64) -> Vec<String> {
    let mut events = Vec::new();
    for _ in 0..20 {
        gw.drive_ws(w, &mut |got| {
            if let WsIn::Event(e) = got {
                events.push(format!("{e:?}"));
            }
        });
        while let Some(e) = gw.poll_event() {
            events.push(format!("{e:?}"));
        }
        let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
        let bytes = pipe.take_written();
        if bytes.is_empty() {
            break;
        }
        w.now += leg;
        let now_ms = v.ms(w.now);
        let mut back = Vec::new();
        match v.conn.as_mut() {
            None => match v.engine.ws_api_upgrade(&bytes, IP, now_ms) {
                Upgraded::Open(c, answer) => {
                    v.conn = Some(c);
                    back.extend(answer);
                }
                Upgraded::Refused(a) => panic!("{}", String::from_utf8_lossy(&a)),
            },
            Some(c) => {
                for f in c.read(&bytes) {
                    match f {
                        ClientFrame::Text(t) => match v.engine.ws_api_admit(c, &t, now_ms) {
                            WsReceived::Answer { frame, .. } => back.extend(frame),
                            WsReceived::Run(a) => {
                                back.extend(v.engine.ws_api_execute(c, a, now_ms));
                            }
                        },
                        ClientFrame::Ping(p) => back.extend(pong(&p)),
                        ClientFrame::Close => panic!("the lane closed"),
                    }
                }
            }
        }
        w.now += leg;
        let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
        pipe.deliver(&back);
    }
    events
}

fn place(gw: &mut Gateway<BinanceSpot>, w: &mut NoHttp, cid: &str, tag: u64) {
    let o = NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("29995.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    };
    let mut p = Prepared::with_capacity(512);
    gw.venue_mut().new_order(&mut p, &o, w.now).unwrap();
    gw.submit(w, &mut p, Class::Normal, tag).expect("submitted");
}

/// A step of the venue's clock beyond the guard is corrected by the first
/// stamped answer over the lane, by as much as the stamp proves (within the
/// round trip, never past the truth), in the REST adapter and the lane's
/// session alike; the fixed windows move with it. A stamp read within half
/// the guard moves nothing.
#[test]
fn a_lane_answer_reanchors_a_stepped_venue_clock_at_once() {
    let (mut gw, mut w, mut v) = setup();
    pump(&mut gw, &mut w, &mut v, MS);
    assert!(gw.ws_api().unwrap().ready(), "the lane is up");
    assert_eq!(gw.stats().reanchors, 0);
    let before = gw.venue().limits.clock;
    v.step_ms = -120;
    w.now += 5 * SEC;
    place(&mut gw, &mut w, "lane1", 1);
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 1")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "the order went over the lane");
    assert_eq!(gw.stats().reanchors, 1);
    let c = gw.venue().limits.clock;
    assert_ne!(c, before);
    // Written at `now - 2 ms`, stamped at `now - 1 ms`, read now: the clock is
    // within the round trip of the venue's, never past it.
    let err = c.utc_ms(w.now) - v.ms(w.now);
    assert!((0..=2).contains(&err), "{err} ms off");
    // 10 ms off and read at once: within half the 30 ms guard, left alone.
    v.step_ms += err - 10;
    place(&mut gw, &mut w, "lane2", 2);
    let evs = pump(&mut gw, &mut w, &mut v, MS / 2);
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 2")),
        "{evs:?}"
    );
    assert_eq!((gw.stats().reanchors, gw.venue().limits.clock), (1, c));
}

/// A write whose frame waited in a full send buffer left when its last byte
/// was written, not when the gateway handed it to the lane: the round trip
/// that bounds the venue's stamp starts there. Counted from the hand-over
/// (200 ms earlier), a 120 ms step hides inside the round trip and the
/// windows stay misaligned until some later stamp; counted from the write,
/// the first answer re-anchors at once, within the real 2 ms round trip.
#[test]
fn a_lane_write_held_in_a_full_send_buffer_counts_its_round_trip_from_the_write() {
    let (mut gw, mut w, mut v) = setup();
    pump(&mut gw, &mut w, &mut v, MS);
    assert!(gw.ws_api().unwrap().ready(), "the lane is up");
    v.step_ms = -120;
    w.now += 5 * SEC;
    let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
    pipe.set_room(0);
    place(&mut gw, &mut w, "held1", 1);
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert!(evs.is_empty(), "nothing left yet: {evs:?}");
    let id = 0..1_000u64;
    assert!(
        id.clone()
            .all(|i| gw.ws_api().unwrap().written_at(i).is_none()),
        "a frame still in the send buffer is not written"
    );
    // The socket drains 200 ms later: the frame leaves now.
    w.now += 200 * MS;
    let left = w.now;
    let pipe = gw.ws_api_mut().and_then(WsLane::pipe_mut).unwrap();
    pipe.set_room(usize::MAX);
    // One drive writes the frame; its write time is the drive's.
    gw.drive_ws(&mut w, &mut |_| {});
    let written = id.clone().find_map(|i| gw.ws_api().unwrap().written_at(i));
    let evs = pump(&mut gw, &mut w, &mut v, MS);
    assert_eq!(written, Some(left));
    assert!(
        evs.iter().any(|e| e.starts_with("Applied { tag: 1")),
        "{evs:?}"
    );
    assert_eq!(w.sent, 0, "the order went over the lane");
    assert_eq!(gw.stats().reanchors, 1, "re-anchored on the first stamp");
    let err = gw.venue().limits.clock.utc_ms(w.now) - v.ms(w.now);
    assert!((0..=2).contains(&err), "{err} ms off");
}
