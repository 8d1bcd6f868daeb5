//! The WebSocket API lane's test harness: the gateway's own lane ([`WsLane`]
//! over an in-memory pipe, driven by [`Gateway::drive_ws`]) against the
//! emulator's WebSocket API engine (`ergon_venue_sim::sansio_ws`), on jumped
//! time.

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

pub const MS: i64 = 1_000_000;
pub const SEC: i64 = 1_000 * MS;
pub const T0: i64 = 1_000 * SEC;
pub const VENUE_MS0: i64 = 1_700_000_000_000;
pub const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The HTTP side: counts what goes over it (the clock tests expect nothing) and
/// keeps each request as written (HTTP/1.1, with a `Host: sim` line) with its id
/// and flight, for a test to answer.
pub struct NoHttp {
    pub budget: Budget,
    pub now: i64,
    pub sent: u64,
    pub written: Vec<(RequestId, Vec<u8>, Flight)>,
}

impl Wire for NoHttp {
    fn now(&self) -> i64 {
        self.now
    }
    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }
    fn send(&mut self, r: &Request<'_>, t: Ticket, _deadline: i64) -> Result<RequestId, Refused> {
        self.sent += 1;
        let id = RequestId(self.sent);
        self.written.push((id, http_bytes(r), t.sent()));
        Ok(id)
    }
}

/// `r` as an HTTP/1.1 client writes it to the emulator (`Host: sim`).
pub fn http_bytes(r: &Request<'_>) -> Vec<u8> {
    let mut out = format!("{} {} HTTP/1.1\r\nHost: sim\r\n", r.method, r.target);
    for (k, v) in r.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", r.body.len()));
    let mut out = out.into_bytes();
    out.extend_from_slice(r.body);
    out
}

/// The venue, its clock `step_ms` off ours from the start of the test.
pub struct Venue {
    pub engine: SansIo,
    pub conn: Option<Box<WsApiConn>>,
    pub step_ms: i64,
}

impl Venue {
    pub fn ms(&self, now: i64) -> i64 {
        VENUE_MS0 + (now - T0) / MS + self.step_ms
    }
}

pub fn setup() -> (Gateway<BinanceSpot>, NoHttp, Venue) {
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
        written: Vec::new(),
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
pub fn pump(gw: &mut Gateway<BinanceSpot>, w: &mut NoHttp, v: &mut Venue, leg: i64) -> Vec<String> {
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

/// A buy of 0.010 BTCUSDT at 29995.00, client order id `cid`.
pub fn order(cid: &str) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").unwrap(),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("29995.00").unwrap()),
        quantity: Decimal::new("0.010").unwrap(),
        client_order_id: ClientOrderId::new(cid).unwrap(),
        reduce_only: false,
    }
}

/// [`order`] `cid`, as the gateway's adapter prepares it now.
pub fn prepare(gw: &mut Gateway<BinanceSpot>, w: &NoHttp, cid: &str) -> Prepared {
    let mut p = Prepared::with_capacity(512);
    gw.venue_mut()
        .new_order(&mut p, &order(cid), w.now)
        .unwrap();
    p
}

/// [`prepare`]s `cid` and submits it under `tag`.
pub fn place(gw: &mut Gateway<BinanceSpot>, w: &mut NoHttp, cid: &str, tag: u64) {
    let mut p = prepare(gw, w, cid);
    gw.submit(w, &mut p, Class::Normal, tag).expect("submitted");
}
