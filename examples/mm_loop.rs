//! A market-making loop through ergon, against Binance Spot or the venue emulator.
//!
//! ```text
//! cargo run --release --example mm_loop -- [--venue binance-spot] [--base URL]
//!     [--duration SECS] [--demand X] [--cpu N] [--api-key K --api-secret S] [--json]
//!     [--no-stream]
//! ```
//!
//! Without `--base` it starts `ergon-venue-sim` in-process on loopback (no network,
//! no keys). Each cycle it refreshes two quotes (cancel-replace, or a first place),
//! reads the book (Normal), and now and then the account (Bulk) and a protective
//! close (Urgent MARKET order). `--demand 3` offers three times as many cycles as
//! the binding limit admits: the budget refuses the excess locally, so the venue
//! never answers 429.
//!
//! What it shows, each a rule of ergon:
//! - one budget holds the IP scope (gate, weight, raw requests) and the account
//!   scope (order counts), declared from `exchangeInfo` `rateLimits`, fixed windows
//!   aligned on the venue clock (anchored on `/api/v3/time`);
//! - the usage headers are followed (`observe_used`), so another sender on the IP
//!   shows up in the budget;
//! - every request has a deadline (timestamp + recvWindow) and the native client
//!   never re-sends: Unknown is reconciled by client order id (a query), never
//!   re-sent; what surely did not run goes through `Budget::resend`;
//! - order updates and fills come from the user data stream (a listenKey from
//!   `POST /api/v3/userDataStream`, a WebSocket at `/ws/<listenKey>` on the same
//!   host and port as `--base`, `executionReport` events); open orders are read over
//!   REST only every few seconds (Bulk) to check the stream's view, and Unknown
//!   outcomes are still reconciled by client order id. The WebSocket connect charges
//!   the IP gate and a connect bucket (290 per 5 minutes, under Binance's 300);
//!   every frame it writes, automatic pongs included, charges a message bucket of 4
//!   per second (under Binance's 5). `--no-stream` polls open orders instead (twice
//!   a second);
//! - a ban halts the IP gate: no request and no connect until the halt is cleared
//!   (by a person: [`Control::clear_halt`] in-process; the command line has no way
//!   to clear it and keeps reporting the halt).
//!
//! It prints a progress line each second and a final table, or one JSON object with
//! `--json` (progress then goes to stderr). Against an external `--base` it uses
//! only documented Binance Spot paths, parameters and HMAC-SHA256 signing.
//!
//! The example allocates (strings for signed queries, a map of requests in
//! flight): it is a driver to read, not the hot path. The budget and the client it
//! drives do not allocate per request.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_core::{BucketId, Budget, Class, Flight, Part, Resend, Spec, Verdict, Why};
use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
use ergon_io::event_loop::{Config as LoopConfig, Context, EventLoop, Interest, Readiness};
use ergon_io::http::Request;
use ergon_io::ws::{self, Cause, Event as WsEvent, Session, State as WsState, WsClient, WsId};
use ergon_venues::adapt::{self, Clock, Request as Kind, Venue};
use ergon_venues::binance_spot::{self, BinanceSpot, Counts};
use ergon_venues::json;
use ergon_venues::response::Response;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const SYMBOL: &str = "BTCUSDT";

const USAGE: &str = "usage: mm_loop [--venue binance-spot] [--base URL] [--duration SECS] \
[--demand X] [--cpu N] [--api-key K --api-secret S] [--json] [--no-stream]";

/// Loop tokens: timers 1-3 are the cycle, progress and drain timers.
const WS_FD: u64 = 10;
const WS_TIMER: u64 = 11;
const CHECK_TIMER: u64 = 12;
/// Binance Spot: 300 WebSocket connects per 5 minutes per IP; we keep under it.
const WS_CONNECTS: u64 = 290;
const WS_CONNECT_WINDOW: i64 = 300 * SEC;
/// Binance Spot: 5 incoming messages a second per connection, pings and pongs
/// included; we send at most 4 in any second.
const WS_MESSAGES_PER_S: u64 = 4;
/// How often open orders are read over REST: to check the stream, or (without it)
/// as the only source.
const CHECK_WITH_STREAM: i64 = 3 * SEC;
const POLL_WITHOUT_STREAM: i64 = 500 * MS;
/// A stream update this close to a REST read may have crossed it: not compared.
const CROSSING: i64 = 300 * MS;
/// After the last answer, how long stream events still have to arrive.
const STREAM_GRACE: i64 = 300 * MS;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The venue profile; only `binance-spot` is built.
    pub venue: String,
    /// `http://host:port` of a server speaking Binance Spot; None starts the emulator.
    pub base: Option<String>,
    /// How long to offer load, in seconds.
    pub duration_s: f64,
    /// Offered load as a multiple of what the binding limit admits.
    pub demand: f64,
    /// Pin the loop thread here.
    pub cpu: Option<usize>,
    /// API key (needed with `--base`).
    pub api_key: Option<String>,
    /// HMAC secret (needed with `--base`).
    pub api_secret: Option<String>,
    /// One JSON object instead of the table; progress to stderr.
    pub json: bool,
    /// Print no progress and no table (tests).
    pub quiet: bool,
    /// The fixed-window guard around boundaries (clock error plus one-way latency).
    pub guard_ms: i64,
    /// recvWindow of signed requests: their deadline is timestamp + this.
    pub recv_window_ms: i64,
    /// The emulator to start when `base` is None.
    pub sim: ergon_venue_sim::Config,
    /// Take order updates from the user data stream (false: poll open orders).
    pub stream: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            venue: "binance-spot".into(),
            base: None,
            duration_s: 10.0,
            demand: 3.0,
            cpu: None,
            api_key: None,
            api_secret: None,
            json: false,
            quiet: false,
            guard_ms: 30,
            recv_window_ms: 2_000,
            sim: ergon_venue_sim::Config::binance_spot(),
            stream: true,
        }
    }
}

/// A person's hands on a running loop, from another thread.
#[derive(Debug, Default)]
pub struct Control {
    clear_halt: AtomicBool,
    stop: AtomicBool,
}

impl Control {
    /// Clears every halt at the loop's next turn (after a person looked at the ban).
    pub fn clear_halt(&self) {
        self.clear_halt.store(true, Ordering::SeqCst);
    }

    /// Ends the run at the next turn, as if the duration had passed.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What the loop did, counted on its side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Requests handed to the client (the socket write may still have failed).
    pub sent: u64,
    /// Answers read as Done.
    pub done: u64,
    /// Refused locally: no room.
    pub refused_full: u64,
    /// Refused locally: a hold after a throttle.
    pub refused_held: u64,
    /// Refused locally: halted after a ban.
    pub refused_halted: u64,
    /// Refused locally: too big for the limit.
    pub refused_too_big: u64,
    /// Refused by the client: no idle connection.
    pub busy: u64,
    /// Throttled by the venue (429, -1003/-1015).
    pub throttled: u64,
    /// Banned by the venue (418).
    pub banned: u64,
    /// Business rejections.
    pub rejected: u64,
    /// Surely not run (documented), including requests that never left.
    pub not_run: u64,
    /// Refused for the timestamp.
    pub clock_skew: u64,
    /// Outcome unknown: may have run.
    pub unknown: u64,
    /// Unknown outcomes settled by a query by client order id.
    pub reconciled: u64,
    /// ... of which the order existed.
    pub reconciled_found: u64,
    /// Re-sent under `Budget::resend` (only what surely did not run).
    pub resent: u64,
    /// Requests handed to the client while the IP gate was halted (must stay 0).
    pub sent_while_halted: u64,
    /// Halts cleared by a person.
    pub halts_cleared: u64,
    /// Alerts raised (one per halt).
    pub alerts: u64,
    /// Admitted units over the run's windows, of the binding limit (0..1).
    pub utilization: f64,
    /// The binding limit's bucket name.
    pub binding: String,
    /// Largest drift seen on a weight limit: the server's count minus the local one
    /// when a usage header came (positive: another sender on the IP).
    pub weight_drift: i64,
    /// The emulator's report, when it ran in-process.
    pub venue: Option<ergon_venue_sim::Report>,
    /// The user data stream, as the loop saw it.
    pub stream: StreamSummary,
    /// The emulator's order registry at the end, when it ran in-process.
    pub venue_orders: Vec<ergon_venue_sim::OrderView>,
}

/// The user data stream, counted on the loop's side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamSummary {
    /// The stream was used (not `--no-stream`).
    pub enabled: bool,
    /// WebSocket connects admitted by the budget.
    pub connects: u64,
    /// WebSocket connects the budget refused.
    pub connects_refused: u64,
    /// Connections that ended without our close (cut by the venue, transport).
    pub cuts: u64,
    /// Frames written (pongs and closes included).
    pub frames_sent: u64,
    /// Pings received and pongs sent.
    pub pings: u64,
    /// Pongs sent.
    pub pongs: u64,
    /// Pongs the message bucket delayed.
    pub pongs_delayed: u64,
    /// `executionReport` events.
    pub events: u64,
    /// ... of which fills (`x` = `TRADE`).
    pub fills: u64,
    /// Resting quotes the stream showed ended by the venue (filled, expired,
    /// canceled by someone else), quoted afresh.
    pub quotes_ended: u64,
    /// Open-order reads over REST (checks of the stream, or the polls without it).
    pub rest_checks: u64,
    /// Orders whose state the stream and a REST read disagreed on (outside the
    /// crossing margin).
    pub mismatches: u64,
    /// Each order's last state from the stream: client order id -> (status,
    /// executed quantity), as the venue writes them.
    pub orders: BTreeMap<String, (String, String)>,
}

/// `http://host:port` → address and Host header.
fn parse_base(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => {
            return Err("https:// is not supported by the native client yet: http:// only".into())
        }
        _ => return Err(format!("--base {url:?}: expected http://HOST:PORT")),
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '@', '?']) {
        return Err(format!(
            "--base {url:?}: expected http://HOST:PORT with no path"
        ));
    }
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    Ok((addr, authority.to_string()))
}

fn sign(payload: &str, secret: &str) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(), // HMAC takes any key length
    };
    mac.update(payload.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------
// Bootstrap: server time and exchangeInfo, before the real budget exists.

struct Boot {
    pool: PoolId,
    parts: [Part; 1],
    step: u8,
    sent_at: i64,
    deadline: i64,
    anchor: Option<(i64, i64)>,
    info: Option<Vec<u8>>,
    used: Vec<(String, u64)>,
    error: Option<String>,
    /// The API key, to ask for a listenKey (None: no stream).
    stream_key: Option<String>,
    listen_key: Option<String>,
}

impl Boot {
    fn next(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if now > self.deadline {
            self.error = Some("no answer from the venue within 10 s".into());
            cx.stop();
            return;
        }
        let target = match self.step {
            0 => "/api/v3/time",
            1 => "/api/v3/exchangeInfo",
            2 if self.stream_key.is_some() => "/api/v3/userDataStream",
            _ => return,
        };
        let Ok(ticket) = cx.budget().try_charge(&self.parts, Class::Normal, now) else {
            return;
        };
        let key = self.stream_key.clone().unwrap_or_default();
        let headers = [("X-MBX-APIKEY", key.as_str())];
        let req = if self.step == 2 {
            Request {
                method: "POST",
                target,
                headers: &headers,
                body: b"",
            }
        } else {
            Request::get(target)
        };
        match cx.request(self.pool, &req, ticket, self.deadline) {
            Ok(_) => {
                self.sent_at = now;
                self.step += 10; // in flight
            }
            Err(r) => cx.refund(r.into_ticket()),
        }
    }
}

impl ClientHandler for Boot {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
        let now = cx.now();
        cx.complete(f);
        if r.status != 200 {
            let hint = if self.step == 12 {
                " (no user data stream there? --no-stream polls open orders instead)"
            } else {
                ""
            };
            self.error = Some(format!(
                "bootstrap request answered {}: {}{hint}",
                r.status,
                String::from_utf8_lossy(r.body)
            ));
            cx.stop();
            return;
        }
        match self.step {
            10 => {
                let t = json::parse(r.body)
                    .ok()
                    .and_then(|v| v.get("serverTime").ok().flatten())
                    .and_then(|t| t.as_i64().ok());
                let Some(server_ms) = t else {
                    self.error = Some("/api/v3/time: no serverTime".into());
                    cx.stop();
                    return;
                };
                // The server read its clock about half-way through the round trip.
                self.anchor = Some((self.sent_at + (now - self.sent_at) / 2, server_ms));
                self.step = 1;
                self.next(cx);
            }
            11 | 12 => {
                if self.step == 11 {
                    self.info = Some(r.body.to_vec());
                } else {
                    let k = serde_json::from_slice::<serde_json::Value>(r.body)
                        .ok()
                        .and_then(|v| v.get("listenKey")?.as_str().map(str::to_string));
                    match k {
                        Some(k)
                            if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric()) =>
                        {
                            self.listen_key = Some(k)
                        }
                        _ => {
                            self.error = Some("/api/v3/userDataStream: no usable listenKey".into());
                            cx.stop();
                            return;
                        }
                    }
                }
                self.used.clear();
                for h in r.headers_with_prefix("X-MBX-USED-WEIGHT-") {
                    if let Some(v) = adapt::header_u64(h.value) {
                        let suffix = String::from_utf8_lossy(&h.name[18..]).into_owned();
                        self.used.push((suffix, v));
                    }
                }
                self.step -= 9;
                if self.step == 2 && self.stream_key.is_some() {
                    self.next(cx);
                } else {
                    self.step = 3;
                    cx.stop();
                }
            }
            _ => {}
        }
    }

    fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
        cx.settle(sent);
        self.error = Some(format!("bootstrap request failed: {e}"));
        cx.stop();
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: PoolId) {
        self.next(cx);
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        if self.step < 3 {
            self.next(cx);
        }
    }
}

// ---------------------------------------------------------------------------------
// The market-making loop.

#[derive(Debug)]
enum Job {
    /// A quote: a first place (`replaces` None) or a cancel-replace.
    Quote {
        slot: usize,
        cid: String,
        replaces: Option<String>,
    },
    /// A protective close (MARKET, Urgent), with what `resend` needs.
    Close {
        target: String,
        parts: Vec<Part>,
        deadline: i64,
        cid: String,
    },
    /// Cleanup of an order found resting after a reconcile.
    Cancel { cid: String },
    /// A query by client order id after Unknown; `primary` for the id of the request
    /// that was Unknown (a cancel-replace also looks up the order it replaced).
    Reconcile { cid: String, primary: bool },
    /// Depth or account.
    Read,
    /// Open orders over REST, sent at this time (the loop's clock).
    OpenOrders { sent_at: i64 },
}

/// The user data stream: one WebSocket session and the order states it reported.
struct Stream {
    client: WsClient,
    id: WsId,
    host: String,
    path: String,
    /// Connect (again) no earlier than this.
    retry_at: i64,
    /// We started the close at the end of the run.
    closing: bool,
    /// When the stream first opened (None: not yet).
    opened_at: Option<i64>,
    /// Client order id -> (status, executed quantity, when the stream said so).
    orders: HashMap<String, (String, String, i64)>,
}

struct Pending {
    kind: Kind<'static>,
    job: Job,
}

/// Per-cycle cost of the mix, to find the binding limit: two quote refreshes
/// (weight 1, one order each), one depth read (weight 5), an account read every
/// fourth cycle (weight 20), a protective close every twentieth (weight 1, one order).
const CLOSE_EVERY: u64 = 20;
const ACCOUNT_EVERY: u64 = 4;
fn cycle_cost(counts: Counts) -> f64 {
    let closes = 1.0 / CLOSE_EVERY as f64;
    match counts {
        Counts::Weight => 2.0 + 5.0 + 20.0 / ACCOUNT_EVERY as f64 + closes,
        Counts::Orders => 2.0 + closes,
        Counts::Raw => 3.0 + 1.0 / ACCOUNT_EVERY as f64 + closes,
    }
}

struct Mm {
    pool: PoolId,
    venue: BinanceSpot,
    clock: Clock,
    key: String,
    secret: String,
    recv_window_ms: i64,
    period_ns: i64,
    next_cycle: i64,
    end_at: i64,
    drain_until: i64,
    cycle: u64,
    seq: u64,
    run_tag: String,
    slots: [Option<String>; 2],
    slot_busy: [bool; 2],
    /// When each slot's order was known to rest (its answer came).
    slot_since: [i64; 2],
    inflight: HashMap<RequestId, Pending>,
    reconcile: VecDeque<(String, bool)>,
    cleanup: VecDeque<String>,
    s: Summary,
    control: Arc<Control>,
    started: i64,
    next_progress: i64,
    quiet: bool,
    progress_to_stderr: bool,
    alerted: bool,
    binding: BucketId,
    /// Units of the binding limit sent, per window of it (venue clock, ms).
    windows: Vec<(i64, u64)>,
    /// The user data stream (None with `--no-stream`).
    stream: Option<Stream>,
    /// Next open-orders read over REST.
    next_check: i64,
    check_in_flight: bool,
    /// An open-orders answer waiting to be compared: open orders (client order id
    /// -> venue time placed), when the read was sent, when to compare.
    pending_check: Option<(HashMap<String, i64>, i64, i64)>,
    /// The run waits for the stream to open before it quotes, at most until then.
    wait_stream_until: i64,
    /// Settled at this time; the stream then has [`STREAM_GRACE`] for late events.
    settled_at: Option<i64>,
}

impl Mm {
    fn cid(&mut self, tag: &str) -> String {
        self.seq += 1;
        format!("{}{tag}{}", self.run_tag, self.seq)
    }

    fn signed_target(&self, path: &str, params: &str, now: i64) -> (String, i64) {
        let ts = self.clock.utc_ms(now);
        let payload = format!("{params}&recvWindow={}&timestamp={ts}", self.recv_window_ms);
        let sig = sign(&payload, &self.secret);
        let deadline = self.venue.deadline_ns(ts, self.recv_window_ms);
        (format!("{path}?{payload}&signature={sig}"), deadline)
    }

    /// Charges, sends, and records; false if it was not sent.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        cx: &mut Context<'_>,
        kind: Kind<'static>,
        class: Class,
        method: &str,
        target: &str,
        deadline: i64,
        job: Job,
    ) -> bool {
        let now = cx.now();
        let Ok(parts) = self.venue.parts(kind) else {
            return false;
        };
        let ticket = match cx.budget().try_charge(&parts, class, now) {
            Ok(t) => t,
            Err(l) => {
                match l.why {
                    Why::Full => self.s.refused_full += 1,
                    Why::Held => self.s.refused_held += 1,
                    Why::Halted => self.s.refused_halted += 1,
                    // Neither can ever pass: split the request / a bug in the ids.
                    Why::TooBig | Why::Foreign => self.s.refused_too_big += 1,
                }
                return false;
            }
        };
        self.dispatch(cx, kind, method, target, deadline, job, ticket)
    }

    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &mut self,
        cx: &mut Context<'_>,
        kind: Kind<'static>,
        method: &str,
        target: &str,
        deadline: i64,
        job: Job,
        ticket: ergon_core::Ticket,
    ) -> bool {
        let headers = [("X-MBX-APIKEY", self.key.as_str())];
        let req = Request {
            method,
            target,
            headers: &headers,
            body: b"",
        };
        // The IP gate is the budget's own; an error would mean it is not: stop too.
        if cx.budget().is_halted(self.venue.limits.ip).unwrap_or(true) {
            self.s.sent_while_halted += 1;
        }
        let units: u64 = ticket
            .parts()
            .iter()
            .filter(|p| p.bucket == self.binding)
            .map(|p| u64::from(p.cost))
            .sum();
        match cx.request(self.pool, &req, ticket, deadline) {
            Ok(id) => {
                self.s.sent += 1;
                if units > 0 {
                    let w = self.binding_window_ms();
                    let start = self.clock.utc_ms(cx.now()).div_euclid(w) * w;
                    match self.windows.last_mut() {
                        Some((s, u)) if *s == start => *u += units,
                        _ => self.windows.push((start, units)),
                    }
                }
                self.inflight.insert(id, Pending { kind, job });
                true
            }
            Err(refused) => {
                self.s.busy += 1;
                cx.refund(refused.into_ticket());
                false
            }
        }
    }

    /// Connects the stream if it is down and its retry time has come. A refusal by
    /// the budget (a halt, the connect bucket) waits for the bucket's ready time.
    fn stream_connect(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let ending = now >= self.end_at;
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let state = st.client.session(st.id).state();
        if ending
            || st.closing
            || now < st.retry_at
            || !matches!(state, WsState::Idle | WsState::Closed)
        {
            return;
        }
        let req = ws::Request {
            host: &st.host,
            path: &st.path,
            headers: &[],
        };
        match st
            .client
            .connect(st.id, &req, Class::Normal, cx.budget(), now)
        {
            Ok(()) => {
                self.s.stream.connects += 1;
                st.retry_at = now + SEC;
            }
            Err(ws::ConnectError::Limited(l)) => {
                self.s.stream.connects_refused += 1;
                // A halt has no ready time (a person clears it): look again soon,
                // the budget refuses locally at no cost.
                st.retry_at = if l.why == Why::Halted {
                    now + 100 * MS
                } else {
                    l.ready_at_ns.max(now + 100 * MS)
                };
            }
            Err(_) => st.retry_at = now + 100 * MS,
        }
        let _ = cx.set_timer(WS_TIMER, st.retry_at);
        self.stream_pump(cx);
    }

    /// Reads what the stream has, applies its events, writes what it owes.
    fn stream_pump(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let mut texts: Vec<String> = Vec::new();
        let mut opened = false;
        let mut ended: Option<Cause> = None;
        let _ = st.client.drive(cx.budget(), now, &mut |_, ev, _| match ev {
            WsEvent::Open => opened = true,
            WsEvent::Text(t) => texts.push(t.to_string()),
            WsEvent::Closed(c) => ended = Some(c.cause),
            _ => {}
        });
        if opened && st.opened_at.is_none() {
            st.opened_at = Some(now);
        }
        for t in &texts {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(t) else {
                eprintln!("warning: stream message is not JSON");
                continue;
            };
            if v.get("e").and_then(|e| e.as_str()) != Some("executionReport") {
                continue;
            }
            let f = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
            self.s.stream.events += 1;
            // A cancel names the canceled order in `C`; everything else in `c`.
            let cid = if f("x") == "CANCELED" { f("C") } else { f("c") };
            if f("x") == "TRADE" {
                self.s.stream.fills += 1;
            }
            st.orders.insert(
                cid.to_string(),
                (f("X").to_string(), f("z").to_string(), now),
            );
            // A resting quote the venue ended on its own (a fill, an expiry, a
            // cancel by someone else): quote afresh instead of replacing it.
            for slot in 0..2 {
                if !self.slot_busy[slot]
                    && f("X") != "NEW"
                    && self.slots[slot].as_deref() == Some(cid)
                {
                    self.slots[slot] = None;
                    self.s.stream.quotes_ended += 1;
                }
            }
        }
        if let Some(cause) = ended {
            if !(st.closing && cause == Cause::Local) {
                self.s.stream.cuts += 1;
                eprintln!("warning: user data stream ended ({cause:?}); reconnecting");
                st.retry_at = now + SEC;
                let _ = cx.set_timer(WS_TIMER, st.retry_at);
            }
        }
        if let Some(at) = st.client.next_deadline() {
            let _ = cx.set_timer(WS_TIMER, at);
        }
        let stats = st.client.session(st.id).stats();
        let ss = &mut self.s.stream;
        ss.frames_sent = stats.frames_sent;
        ss.pings = stats.pings_received;
        ss.pongs = stats.pongs_sent;
        ss.pongs_delayed = stats.pongs_delayed;
    }

    /// Whether the stream is done for the run: after the grace for late events,
    /// closes it and waits for the close to finish.
    fn stream_finished(&mut self, cx: &mut Context<'_>) -> bool {
        let now = cx.now();
        let settled_at = *self.settled_at.get_or_insert(now);
        let Some(st) = self.stream.as_mut() else {
            return true;
        };
        let state = st.client.session(st.id).state();
        if matches!(state, WsState::Idle | WsState::Closed) {
            return true;
        }
        if now < settled_at + STREAM_GRACE {
            let _ = cx.set_timer(3, settled_at + STREAM_GRACE);
            return false;
        }
        if st.closing {
            return false;
        }
        if state != WsState::Open {
            return true; // still handshaking at the end: nothing to close
        }
        match st
            .client
            .session_mut(st.id)
            .close(1000, "", Class::Urgent, cx.budget(), now)
        {
            Ok(()) => {
                st.closing = true;
                st.client.flush(st.id, cx.budget(), now);
                false
            }
            // The message bucket is full: close when it has room.
            Err(ws::SendError::Limited(l)) => {
                let _ = cx.set_timer(3, l.ready_at_ns);
                false
            }
            Err(_) => true,
        }
    }

    /// Reads open orders over REST: a check of the stream, or the poll without it.
    fn check_open_orders(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if self.check_in_flight || now < self.next_check || now >= self.end_at {
            return;
        }
        let (t, deadline) =
            self.signed_target("/api/v3/openOrders", &format!("symbol={SYMBOL}"), now);
        let class = if self.stream.is_some() {
            Class::Bulk
        } else {
            Class::Normal
        };
        let job = Job::OpenOrders { sent_at: now };
        if self.send(cx, Kind::Read(6), class, "GET", &t, deadline, job) {
            self.check_in_flight = true;
            self.next_check = now
                + if self.stream.is_some() {
                    CHECK_WITH_STREAM
                } else {
                    POLL_WITHOUT_STREAM
                };
        } else {
            // Refused (the weight is shared with the quotes' reads): try again soon.
            self.next_check = now + 20 * MS;
        }
        let _ = cx.set_timer(CHECK_TIMER, self.next_check);
    }

    /// Keeps an open-orders answer to compare with the stream's view once the
    /// events that may have crossed it had time to arrive (the answer can overtake
    /// an event the venue published before it).
    fn on_open_orders(&mut self, body: &[u8], sent_at: i64, now: i64) {
        self.s.stream.rest_checks += 1;
        let Ok(serde_json::Value::Array(list)) = serde_json::from_slice(body) else {
            return;
        };
        let mut open: HashMap<String, i64> = HashMap::new();
        for o in &list {
            if let (Some(c), Some(t)) = (
                o.get("clientOrderId").and_then(|c| c.as_str()),
                o.get("time").and_then(|t| t.as_i64()),
            ) {
                open.insert(c.to_string(), t);
            }
        }
        self.pending_check = Some((open, sent_at, now + CROSSING));
    }

    /// Compares a kept open-orders answer with the stream's view when it is due;
    /// disagreements outside the crossing margin are counted and REST wins.
    fn compare_open_orders(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        match &self.pending_check {
            Some((_, _, due)) if *due > now => {
                let _ = cx.set_timer(CHECK_TIMER, *due);
                return;
            }
            Some(_) => {}
            None => return,
        }
        let Some((open, sent_at, _)) = self.pending_check.take() else {
            return;
        };
        let Some(st) = self.stream.as_mut() else {
            return;
        };
        let sent_ms = self.clock.utc_ms(sent_at);
        let settled = |at: i64| at < sent_at - CROSSING;
        let mut wrong: Vec<(String, &'static str)> = Vec::new();
        for (cid, (status, _, at)) in &st.orders {
            if status == "NEW" && settled(*at) && !open.contains_key(cid) {
                wrong.push((cid.clone(), "CLOSED?"));
            }
        }
        for (cid, placed_ms) in &open {
            let ours = st.orders.get(cid);
            let crossing = ours.is_some_and(|(_, _, at)| !settled(*at))
                || (ours.is_none() && *placed_ms >= sent_ms - CROSSING / MS);
            if !crossing && !ours.is_some_and(|(s, _, _)| s == "NEW") {
                wrong.push((cid.clone(), "NEW"));
            }
        }
        for (cid, status) in wrong {
            self.s.stream.mismatches += 1;
            eprintln!("warning: stream and REST disagree on {cid}: REST says {status}");
            if status == "NEW" {
                let executed = st.orders.get(&cid).map(|o| o.1.clone()).unwrap_or_default();
                st.orders.insert(cid, ("NEW".into(), executed, sent_at));
            } else {
                self.reconcile.push_back((cid, false));
            }
        }
    }

    /// Without the stream, a poll of open orders is how the loop learns that a
    /// resting quote ended (filled, expired, canceled by someone else).
    fn on_polled_orders(&mut self, body: &[u8], sent_at: i64) {
        self.s.stream.rest_checks += 1;
        let Ok(serde_json::Value::Array(list)) = serde_json::from_slice(body) else {
            return;
        };
        let open: Vec<&str> = list
            .iter()
            .filter_map(|o| o.get("clientOrderId")?.as_str())
            .collect();
        for slot in 0..2 {
            let Some(cid) = self.slots[slot].as_deref() else {
                continue;
            };
            // Only a quote that rested before the poll was sent can be missing.
            if !self.slot_busy[slot] && self.slot_since[slot] < sent_at && !open.contains(&cid) {
                self.slots[slot] = None;
                self.s.stream.quotes_ended += 1;
            }
        }
    }

    fn cycle(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        self.cycle += 1;
        let mid: i64 = 5_000_000; // cents
        let wiggle = (self.cycle % 7) as i64;
        for slot in 0..2 {
            if self.slot_busy[slot] {
                continue;
            }
            let (side, price) = if slot == 0 {
                ("BUY", mid - 500 - wiggle)
            } else {
                ("SELL", mid + 500 + wiggle)
            };
            let price = format!("{}.{:02}", price / 100, price % 100);
            let cid = self.cid(if slot == 0 { "b" } else { "a" });
            let replaces = self.slots[slot].clone();
            let (kind, path, params) = match &replaces {
                Some(old) => (
                    Kind::CancelReplace,
                    "/api/v3/order/cancelReplace",
                    format!("symbol={SYMBOL}&side={side}&type=LIMIT&timeInForce=GTC&quantity=0.010&price={price}&cancelReplaceMode=STOP_ON_FAILURE&cancelOrigClientOrderId={old}&newClientOrderId={cid}&newOrderRespType=ACK"),
                ),
                None => (
                    Kind::Order,
                    "/api/v3/order",
                    format!("symbol={SYMBOL}&side={side}&type=LIMIT&timeInForce=GTC&quantity=0.010&price={price}&newClientOrderId={cid}&newOrderRespType=ACK"),
                ),
            };
            let (target, deadline) = self.signed_target(path, &params, now);
            let job = Job::Quote {
                slot,
                cid,
                replaces,
            };
            if self.send(cx, kind, Class::Normal, "POST", &target, deadline, job) {
                self.slot_busy[slot] = true;
            }
        }
        // Decision read.
        let d = format!("/api/v3/depth?symbol={SYMBOL}&limit=100");
        self.send(
            cx,
            Kind::Read(5),
            Class::Normal,
            "GET",
            &d,
            now + 2 * SEC,
            Job::Read,
        );
        // Background read.
        if self.cycle % ACCOUNT_EVERY == 0 {
            let (t, deadline) = self.signed_target("/api/v3/account", "omitZeroBalances=true", now);
            self.send(
                cx,
                Kind::Read(20),
                Class::Bulk,
                "GET",
                &t,
                deadline,
                Job::Read,
            );
        }
        // Protective close.
        if self.cycle % CLOSE_EVERY == 0 {
            let cid = self.cid("x");
            let params = format!("symbol={SYMBOL}&side=SELL&type=MARKET&quantity=0.001&newClientOrderId={cid}&newOrderRespType=ACK");
            let (target, deadline) = self.signed_target("/api/v3/order", &params, now);
            let parts = self
                .venue
                .parts(Kind::Order)
                .map(|p| p.to_vec())
                .unwrap_or_default();
            let job = Job::Close {
                target: target.clone(),
                parts,
                deadline,
                cid,
            };
            self.send(
                cx,
                Kind::Order,
                Class::Urgent,
                "POST",
                &target,
                deadline,
                job,
            );
        }
    }

    fn housekeeping(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        while let Some((cid, primary)) = self.reconcile.front().cloned() {
            let (t, deadline) = self.signed_target(
                "/api/v3/order",
                &format!("symbol={SYMBOL}&origClientOrderId={cid}"),
                now,
            );
            let job = Job::Reconcile { cid, primary };
            if !self.send(cx, Kind::Read(4), Class::Normal, "GET", &t, deadline, job) {
                break;
            }
            self.reconcile.pop_front();
        }
        while let Some(cid) = self.cleanup.front().cloned() {
            let (t, deadline) = self.signed_target(
                "/api/v3/order",
                &format!("symbol={SYMBOL}&origClientOrderId={cid}"),
                now,
            );
            let job = Job::Cancel { cid: cid.clone() };
            if !self.send(cx, Kind::Cancel, Class::Normal, "DELETE", &t, deadline, job) {
                break;
            }
            self.cleanup.pop_front();
        }
    }

    fn alert(&mut self, cx: &mut Context<'_>) {
        if self.alerted {
            return;
        }
        self.alerted = true;
        self.s.alerts += 1;
        let now = cx.now();
        for a in adapt::alerts(cx.budget()) {
            eprintln!(
                "ALERT: bucket {} halted after ban #{} (venue's end of ban in {} ms); \
                 no request and no connect until a person clears it",
                a.name,
                a.bans,
                a.ban_until_ns.map_or(-1, |u| (u - now) / MS)
            );
        }
    }

    /// `answered`: the venue's answer gave the verdict (false: the client's error did).
    fn on_verdict(&mut self, cx: &mut Context<'_>, job: Job, verdict: Verdict, answered: bool) {
        match verdict {
            Verdict::Done => self.s.done += 1,
            Verdict::Rejected => self.s.rejected += 1,
            Verdict::Throttled { .. } => self.s.throttled += 1,
            Verdict::Banned { .. } => {
                self.s.banned += 1;
                self.alert(cx);
            }
            Verdict::NotRun => self.s.not_run += 1,
            Verdict::ClockSkew => self.s.clock_skew += 1,
            // Only a write can leave an order in an unknown state.
            Verdict::Unknown
                if !matches!(
                    job,
                    Job::Reconcile { .. } | Job::Read | Job::OpenOrders { .. }
                ) =>
            {
                self.s.unknown += 1
            }
            Verdict::Unknown => {}
        }
        match job {
            Job::Quote {
                slot,
                cid,
                replaces,
            } => {
                self.slot_busy[slot] = false;
                match verdict {
                    Verdict::Done => {
                        // The stream may have told its end before this answer came.
                        let ended = self
                            .stream
                            .as_ref()
                            .and_then(|st| st.orders.get(&cid))
                            .is_some_and(|o| o.0 != "NEW");
                        if ended {
                            self.s.stream.quotes_ended += 1;
                            self.slots[slot] = None;
                        } else {
                            self.slots[slot] = Some(cid);
                            self.slot_since[slot] = cx.now();
                        }
                    }
                    Verdict::Unknown => {
                        // Neither half is known: look both up, quote afresh.
                        self.slots[slot] = None;
                        self.reconcile.push_back((cid, true));
                        if let Some(old) = replaces {
                            self.reconcile.push_back((old, false));
                        }
                    }
                    // Nothing ran. The old quote still rests if the request never
                    // left or was throttled, banned or stamped wrong; if the venue
                    // refused it (a cancel-replace whose cancel failed: -2022), the
                    // old one is gone: quote afresh.
                    Verdict::NotRun | Verdict::Rejected if answered => self.slots[slot] = None,
                    _ => {
                        if let Some(old) = replaces {
                            self.slots[slot] = Some(old);
                        }
                    }
                }
            }
            Job::Close {
                target,
                parts,
                deadline,
                cid,
            } => match verdict {
                Verdict::Unknown => self.reconcile.push_back((cid, true)),
                Verdict::Throttled { .. } | Verdict::NotRun | Verdict::ClockSkew => {
                    let now = cx.now();
                    match cx
                        .budget()
                        .resend(&verdict, &parts, Class::Urgent, deadline, now)
                    {
                        Resend::Send(ticket) => {
                            self.s.resent += 1;
                            let job = Job::Close {
                                target: target.clone(),
                                parts,
                                deadline,
                                cid,
                            };
                            self.dispatch(cx, Kind::Order, "POST", &target, deadline, job, ticket);
                        }
                        Resend::Wait(_) | Resend::Stale | Resend::Reconcile | Resend::Final => {}
                    }
                }
                _ => {}
            },
            Job::Cancel { cid } => {
                if verdict == Verdict::Unknown {
                    self.reconcile.push_back((cid, true));
                }
            }
            Job::Read => {}
            Job::OpenOrders { .. } => self.check_in_flight = false,
            Job::Reconcile { cid, primary } => {
                if matches!(
                    verdict,
                    Verdict::Unknown | Verdict::NotRun | Verdict::Throttled { .. }
                ) {
                    // The query itself did not settle anything: ask again later.
                    self.reconcile.push_back((cid, primary));
                }
            }
        }
    }

    fn progress(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if now < self.next_progress {
            return;
        }
        self.next_progress += SEC;
        self.s.utilization = self.utilization(cx.budget(), now);
        if self.quiet {
            return;
        }
        let s = &self.s;
        let line = format!(
            "t={:>3}s sent={} done={} refused full={} held={} halted={} busy={} throttled={} banned={} unknown={} reconciled={} util={:.0}%",
            (now - self.started) / SEC,
            s.sent,
            s.done,
            s.refused_full,
            s.refused_held,
            s.refused_halted,
            s.busy,
            s.throttled,
            s.banned,
            s.unknown,
            s.reconciled,
            s.utilization * 100.0
        );
        if self.progress_to_stderr {
            eprintln!("{line}");
        } else {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
    }

    fn binding_window_ms(&self) -> i64 {
        self.venue
            .limits
            .limits
            .iter()
            .find(|l| l.bucket == self.binding)
            .map_or(1_000, |l| (l.window_ns / MS).max(1))
    }

    /// Mean use of the binding limit over the windows that lay wholly inside the
    /// run; over the run as a whole if none did.
    fn utilization(&self, budget: &Budget, now: i64) -> f64 {
        let w = self.binding_window_ms();
        let (from, to) = (
            self.clock.utc_ms(self.started),
            self.clock.utc_ms(now.min(self.end_at)),
        );
        // Every id here is the loop budget's own: `stats` answers it.
        let limit = budget.stats(self.binding).unwrap_or_default().limit.max(1) as f64;
        let full: Vec<f64> = self
            .windows
            .iter()
            .filter(|(s, _)| *s >= from && s + w <= to)
            .map(|(_, u)| (*u as f64 / limit).min(1.0))
            .collect();
        if !full.is_empty() {
            return full.iter().sum::<f64>() / full.len() as f64;
        }
        let st = budget.stats(self.binding).unwrap_or_default();
        let Some(limit) = self
            .venue
            .limits
            .limits
            .iter()
            .find(|l| l.bucket == self.binding)
        else {
            return 0.0;
        };
        let windows =
            ((now.min(self.end_at) - self.started) as f64 / limit.window_ns as f64).max(1e-9);
        (st.admitted as f64 / (st.limit as f64 * windows)).min(1.0)
    }
}

impl ClientHandler for Mm {
    fn on_response(&mut self, cx: &mut Context<'_>, id: RequestId, r: Response<'_>, f: Flight) {
        let now = cx.now();
        let Some(p) = self.inflight.remove(&id) else {
            cx.complete(f);
            return;
        };
        let verdict = match self.venue.on_response(p.kind, &r, cx.budget(), now) {
            Ok(v) => v,
            Err(adapt::Error::BadHeader { verdict, header }) => {
                eprintln!("warning: venue header {header} unreadable");
                verdict
            }
            Err(_) => Verdict::Unknown,
        };
        cx.complete(f);
        for l in self.venue.limits.of(Counts::Weight) {
            self.s.weight_drift = self
                .s
                .weight_drift
                .max(cx.budget().stats(l.bucket).unwrap_or_default().drift);
        }
        if let Job::OpenOrders { sent_at } = p.job {
            self.check_in_flight = false;
            if r.status == 200 && self.stream.is_some() {
                self.on_open_orders(r.body, sent_at, now);
            } else if r.status == 200 {
                self.on_polled_orders(r.body, sent_at);
            }
        }
        if let Job::Reconcile { cid, primary } = &p.job {
            let m = binance_spot::Msg::read(r.body);
            if r.status == 200 {
                if *primary {
                    self.s.reconciled += 1;
                    self.s.reconciled_found += 1;
                }
                let open = m
                    .json
                    .and_then(|v| v.get("status").ok().flatten())
                    .is_some_and(|s| s.str_eq("NEW").unwrap_or(false));
                if open
                    && !self
                        .slots
                        .iter()
                        .any(|s| s.as_deref() == Some(cid.as_str()))
                {
                    self.cleanup.push_back(cid.clone());
                }
                return;
            }
            if m.code == Some(-2013) {
                if *primary {
                    self.s.reconciled += 1;
                }
                return;
            }
        }
        self.on_verdict(cx, p.job, verdict, true);
    }

    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, _e: Error) {
        let Some(p) = self.inflight.remove(&id) else {
            cx.settle(sent);
            return;
        };
        let verdict = if cx.settle(sent) {
            Verdict::Unknown
        } else {
            Verdict::NotRun
        };
        let verdict = if p.kind.is_write() || verdict == Verdict::NotRun {
            verdict
        } else {
            // A read that may have been answered: nothing to reconcile.
            Verdict::NotRun
        };
        self.on_verdict(cx, p.job, verdict, false);
    }

    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, _ready: Readiness) {
        if token == WS_FD {
            self.stream_pump(cx);
        }
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
        if token == WS_TIMER {
            self.stream_pump(cx);
        }
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if self.control.clear_halt.swap(false, Ordering::SeqCst) {
            let halted: Vec<BucketId> = cx.budget().halted().collect();
            for b in halted {
                // `halted()` yields the budget's own ids: none is refused.
                if cx.budget().clear_halt(b).is_ok() {
                    self.s.halts_cleared += 1;
                }
                eprintln!(
                    "halt on {} cleared by a person",
                    cx.budget().name(b).unwrap_or("?")
                );
            }
            self.alerted = false;
        }
        if self.control.stop.swap(false, Ordering::SeqCst) {
            self.end_at = self.end_at.min(now);
            self.drain_until = now + 3 * SEC;
        }
        self.stream_connect(cx);
        if self.wait_stream_until > 0 {
            // Quote only once the stream is open, so it misses no order's NEW; a
            // stream that does not open in time is left to reconnect on its own.
            let open = !self
                .stream
                .as_ref()
                .is_some_and(|st| st.opened_at.is_none());
            if !open && now < self.wait_stream_until && now < self.end_at {
                let _ = cx.set_timer(3, (now + 20 * MS).min(self.wait_stream_until));
                return;
            }
            self.wait_stream_until = 0;
            let d = now - self.started;
            self.started = now;
            self.end_at += d;
            self.drain_until += d;
            self.next_cycle = now;
            self.next_progress = now + SEC;
            self.next_check = now;
        }
        if now < self.end_at {
            self.check_open_orders(cx);
            // Offer cycles at the demanded rate; after a stall, do not burst.
            if self.next_cycle < now - SEC {
                self.next_cycle = now;
            }
            while self.next_cycle <= now {
                self.cycle(cx);
                self.next_cycle += self.period_ns;
            }
            let _ = cx.set_timer(1, self.next_cycle.min(self.end_at));
        }
        self.compare_open_orders(cx);
        self.housekeeping(cx);
        self.progress(cx);
        let _ = cx.set_timer(2, self.next_progress);
        let settled = self.inflight.is_empty()
            && self.reconcile.is_empty()
            && self.cleanup.is_empty()
            && self.pending_check.is_none();
        if now >= self.end_at && ((settled && self.stream_finished(cx)) || now >= self.drain_until)
        {
            self.s.utilization = self.utilization(cx.budget(), now);
            cx.stop();
        } else if now >= self.end_at {
            let _ = cx.set_timer(3, (now + 50 * MS).min(self.drain_until));
        }
    }
}

/// Runs the loop; `control` lets another thread clear halts or stop it. With no
/// `base` it talks to `sim` if given (a test scripts it meanwhile), else it starts
/// the emulator of `o.sim` and stops it at the end.
pub fn run(
    o: &Options,
    control: Arc<Control>,
    sim: Option<Arc<ergon_venue_sim::Server>>,
) -> Result<Summary, String> {
    if o.venue != "binance-spot" {
        return Err(format!(
            "--venue {:?}: only binance-spot is built into this example",
            o.venue
        ));
    }
    if !(o.demand > 0.0 && o.demand.is_finite()) {
        return Err("--demand must be a positive number".into());
    }
    let (sim, own_sim) = match (&o.base, sim) {
        (Some(_), _) => (None, false),
        (None, Some(s)) => (Some(s), false),
        (None, None) => (
            Some(Arc::new(
                ergon_venue_sim::Server::start(o.sim.clone()).map_err(|e| e.to_string())?,
            )),
            true,
        ),
    };
    let (addr, host) = match (&o.base, &sim) {
        (Some(url), _) => parse_base(url)?,
        (None, Some(s)) => (s.addr(), s.addr().to_string()),
        (None, None) => unreachable!("the emulator started above"),
    };
    let (key, secret) = match (&o.api_key, &o.api_secret, &sim) {
        (Some(k), Some(s), _) => (k.clone(), s.clone()),
        (None, None, Some(s)) => {
            let a = &s.config().accounts[0];
            (a.api_key.clone(), a.secret.clone())
        }
        (None, None, None) => return Err("--base needs --api-key and --api-secret".into()),
        _ => return Err("--api-key and --api-secret go together".into()),
    };
    let loop_cfg = LoopConfig {
        cpu: o.cpu,
        ..LoopConfig::default()
    };

    // 1. Bootstrap: the venue's time and limits.
    let boot_budget = {
        let mut b = Budget::builder();
        let any = b
            .add("bootstrap", Spec::sliding(10, SEC, 1))
            .map_err(|e| e.to_string())?;
        (
            b.build(ergon_io::clock::now_ns())
                .map_err(|e| e.to_string())?,
            any,
        )
    };
    let mut lp = EventLoop::new(loop_cfg, boot_budget.0).map_err(|e| e.to_string())?;
    let pool = lp
        .add_pool(PoolConfig::new(addr, host.clone()))
        .map_err(|e| e.to_string())?;
    let mut boot = Boot {
        pool,
        parts: [Part::new(boot_budget.1, 1)],
        step: 0,
        sent_at: 0,
        deadline: ergon_io::clock::now_ns() + 10 * SEC,
        anchor: None,
        info: None,
        used: Vec::new(),
        error: None,
        stream_key: o.stream.then(|| key.clone()),
        listen_key: None,
    };
    lp.run(&mut boot).map_err(|e| e.to_string())?;
    drop(lp);
    if let Some(e) = boot.error {
        return Err(e);
    }
    let (Some((anchor_ns, server_ms)), Some(info)) = (boot.anchor, boot.info) else {
        return Err("bootstrap did not finish".into());
    };
    let clock = Clock::anchor(anchor_ns, server_ms);

    // 2. One budget: the IP scope and the account scope, from exchangeInfo.
    let mut builder = Budget::builder();
    let venue = BinanceSpot::from_exchange_info(&info, &mut builder, clock, o.guard_ms * MS)
        .map_err(|e| format!("exchangeInfo: {e}"))?;
    // The stream's buckets: connects per IP, frames per connection.
    let ws_buckets = match &boot.listen_key {
        Some(_) => Some((
            builder
                .add(
                    "ws_connects",
                    Spec::sliding(WS_CONNECTS, WS_CONNECT_WINDOW, 60),
                )
                .map_err(|e| e.to_string())?,
            builder
                .add("ws_messages", Spec::sliding(WS_MESSAGES_PER_S, SEC, 10))
                .map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let now = ergon_io::clock::now_ns();
    let mut budget = builder.build(now).map_err(|e| e.to_string())?;
    for (suffix, used) in &boot.used {
        if let Some(l) = venue
            .limits
            .of(Counts::Weight)
            .find(|l| l.suffix.eq_ignore_ascii_case(suffix))
        {
            budget
                .observe_used(l.bucket, *used, now)
                .map_err(|e| e.to_string())?;
        }
    }

    // The binding limit: the one the mix exhausts first over this run. A window
    // longer than the run admits its whole limit within the run.
    let mut binding = None;
    let mut cycles_per_s = f64::INFINITY;
    let horizon_ns = ((o.duration_s * SEC as f64) as i64).max(1);
    for l in &venue.limits.limits {
        let limit = budget.stats(l.bucket).unwrap_or_default().limit as f64;
        let span_s = l.window_ns.min(horizon_ns) as f64 / SEC as f64;
        let per_s = limit / span_s / cycle_cost(l.counts);
        if per_s < cycles_per_s {
            cycles_per_s = per_s;
            binding = Some(l.bucket);
        }
    }
    let binding = binding.ok_or("exchangeInfo declares no limit")?;
    let offered = cycles_per_s * o.demand;
    let period_ns = ((SEC as f64 / offered) as i64).max(1);

    let mut lp = EventLoop::new(loop_cfg, budget).map_err(|e| e.to_string())?;
    let host_header = host.clone();
    let mut pc = PoolConfig::new(addr, host);
    pc.connections = 4;
    pc.connect_parts = vec![Part::new(venue.limits.ip, 0)];
    pc.connect_class = Class::Urgent;
    let pool = lp.add_pool(pc).map_err(|e| e.to_string())?;
    let stream = match (&boot.listen_key, ws_buckets) {
        (Some(listen_key), Some((connects, messages))) => {
            let session = Session::new(
                ws::Config::default(),
                lp.budget(),
                &[Part::new(venue.limits.ip, 0), Part::new(connects, 1)],
                // Frames are not requests: a halted IP gate does not stop the pongs
                // an open connection owes (the venue would cut it).
                &[Part::new(messages, 1)],
                // The masking keys need no secrecy here (loopback, a test venue);
                // take the seed from the OS in production.
                (ergon_io::clock::now_ns() as u64) ^ u64::from(std::process::id()),
            )
            .map_err(|e| format!("WebSocket session: {e:?}"))?;
            let mut client = WsClient::new(1).map_err(|e| format!("epoll: errno {e}"))?;
            let id = client.add(session, addr);
            lp.watch_fd(client.fd(), WS_FD, Interest::READ)
                .map_err(|e| e.to_string())?;
            Some(Stream {
                client,
                id,
                host: host_header.clone(),
                path: format!("/ws/{listen_key}"),
                retry_at: 0,
                closing: false,
                opened_at: None,
                orders: HashMap::new(),
            })
        }
        _ => None,
    };
    let started = lp.now();
    let end_at = started + (o.duration_s * SEC as f64) as i64;
    let binding_name = lp.budget().name(binding).unwrap_or("?").to_string();
    let mut mm = Mm {
        pool,
        venue,
        clock,
        key,
        secret,
        recv_window_ms: o.recv_window_ms,
        period_ns,
        next_cycle: started,
        end_at,
        drain_until: end_at + 3 * SEC,
        cycle: 0,
        seq: 0,
        run_tag: format!("mm{}", server_ms % 100_000),
        slots: [None, None],
        slot_busy: [false, false],
        slot_since: [0, 0],
        inflight: HashMap::new(),
        reconcile: VecDeque::new(),
        cleanup: VecDeque::new(),
        s: Summary {
            binding: binding_name,
            ..Summary::default()
        },
        control,
        started,
        next_progress: started + SEC,
        quiet: o.quiet,
        progress_to_stderr: o.json,
        alerted: false,
        binding,
        windows: Vec::new(),
        next_check: started,
        check_in_flight: false,
        pending_check: None,
        wait_stream_until: started + 5 * SEC,
        settled_at: None,
        stream,
    };
    mm.s.stream.enabled = mm.stream.is_some();
    lp.run(&mut mm).map_err(|e| e.to_string())?;
    drop(lp);
    if let Some(st) = mm.stream.take() {
        mm.s.stream.orders = st
            .orders
            .into_iter()
            .map(|(cid, (status, executed, _))| (cid, (status, executed)))
            .collect();
    }
    let mut s = mm.s;
    if let Some(srv) = &sim {
        s.venue_orders = srv.orders();
    }
    s.venue = sim.map(|srv| match Arc::try_unwrap(srv) {
        Ok(srv) if own_sim => srv.stop(),
        Ok(srv) => srv.report(),
        Err(shared) => shared.report(),
    });
    Ok(s)
}

fn table(s: &Summary) -> String {
    let mut out = String::new();
    let mut row = |k: &str, v: String| out.push_str(&format!("{k:<28}{v}\n"));
    row("requests sent", s.sent.to_string());
    row("done", s.done.to_string());
    row("refused locally: full", s.refused_full.to_string());
    row("refused locally: held", s.refused_held.to_string());
    row("refused locally: halted", s.refused_halted.to_string());
    row("refused locally: too big", s.refused_too_big.to_string());
    row("no idle connection", s.busy.to_string());
    row("throttled by the venue", s.throttled.to_string());
    row("banned by the venue", s.banned.to_string());
    row("rejected", s.rejected.to_string());
    row("not run", s.not_run.to_string());
    row("clock skew", s.clock_skew.to_string());
    row("unknown", s.unknown.to_string());
    row(
        "reconciled (found)",
        format!("{} ({})", s.reconciled, s.reconciled_found),
    );
    row("re-sent (surely not run)", s.resent.to_string());
    row(
        "utilization",
        format!("{:.1}% of {}", s.utilization * 100.0, s.binding),
    );
    if s.stream.enabled {
        let st = &s.stream;
        row(
            "stream: events (fills)",
            format!("{} ({})", st.events, st.fills),
        );
        row(
            "stream: ws connects (cuts)",
            format!("{} ({})", st.connects, st.cuts),
        );
        row(
            "stream: REST checks",
            format!("{} ({} mismatches)", st.rest_checks, st.mismatches),
        );
    } else {
        row("open-order polls", s.stream.rest_checks.to_string());
    }
    if let Some(v) = &s.venue {
        row("venue: requests", v.requests.to_string());
        row(
            "venue: 429s",
            (v.throttled + v.order_rate_limited).to_string(),
        );
        row("venue: bans", v.bans.to_string());
        row("venue: executions", v.executions.to_string());
        row("venue: duplicates", v.duplicates.to_string());
    }
    out
}

/// The summary as the one JSON object `--json` prints.
pub fn to_json(s: &Summary) -> serde_json::Value {
    serde_json::json!({
        "sent": s.sent,
        "done": s.done,
        "refused": {
            "full": s.refused_full,
            "held": s.refused_held,
            "halted": s.refused_halted,
            "tooBig": s.refused_too_big,
            "busy": s.busy,
        },
        "throttled": s.throttled,
        "banned": s.banned,
        "rejected": s.rejected,
        "notRun": s.not_run,
        "clockSkew": s.clock_skew,
        "unknown": s.unknown,
        "reconciled": s.reconciled,
        "reconciledFound": s.reconciled_found,
        "resent": s.resent,
        "alerts": s.alerts,
        "utilization": s.utilization,
        "binding": s.binding,
        "stream": {
            "enabled": s.stream.enabled,
            "connects": s.stream.connects,
            "connectsRefused": s.stream.connects_refused,
            "cuts": s.stream.cuts,
            "framesSent": s.stream.frames_sent,
            "pings": s.stream.pings,
            "pongs": s.stream.pongs,
            "pongsDelayed": s.stream.pongs_delayed,
            "events": s.stream.events,
            "fills": s.stream.fills,
            "quotesEnded": s.stream.quotes_ended,
            "restChecks": s.stream.rest_checks,
            "mismatches": s.stream.mismatches,
        },
        "venue": s.venue.as_ref().map(|v| v.to_json()),
    })
}

/// The command line, as the usage line says.
pub fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--venue" => o.venue = value()?,
            "--base" => o.base = Some(value()?),
            "--duration" => {
                let v = value()?;
                o.duration_s = v
                    .parse::<f64>()
                    .ok()
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .ok_or_else(|| format!("--duration {v:?}: expected positive seconds"))?;
            }
            "--demand" => {
                let v = value()?;
                o.demand = v
                    .parse::<f64>()
                    .ok()
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .ok_or_else(|| format!("--demand {v:?}: expected a positive number"))?;
            }
            "--cpu" => {
                let v = value()?;
                o.cpu = Some(
                    v.parse()
                        .map_err(|_| format!("--cpu {v:?}: expected a CPU number"))?,
                );
            }
            "--api-key" => o.api_key = Some(value()?),
            "--api-secret" => o.api_secret = Some(value()?),
            "--json" => o.json = true,
            "--no-stream" => o.stream = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> std::process::ExitCode {
    let o = match parse_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("mm_loop: {e}");
            }
            eprintln!("{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&o, Arc::new(Control::default()), None) {
        Ok(s) => {
            if o.json {
                println!("{}", to_json(&s));
            } else {
                print!("{}", table(&s));
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mm_loop: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
