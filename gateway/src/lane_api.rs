//! What the gateway's WebSocket order lane ([`crate::ws_api`]) needs from a
//! venue's WebSocket session: each request the REST adapter prepared as its
//! twin frame, the answers read by the REST rules, the setup after each open,
//! and the table of requests in flight. Two venues implement it here:
//!
//! - Binance's WebSocket API ([`binance_spot_ws::Session`], Spot's `/ws-api/v3`
//!   and USD-M futures' `/ws-fapi/v1`, [`ergon_venues::binance_futures_ws`]): with an
//!   Ed25519 key, `session.logon` after the open (`session.status` if its answer
//!   leaves a doubt), then the user data stream (`userDataStream.subscribe`), and
//!   orders only then, without `apiKey` or `signature`, each new order written
//!   from the template of its symbol, side and type; a revocation of the
//!   logon (-2015 with a null id) halts order entry ([`LaneApi::halt_order_entry`]).
//!   With an HMAC key: the stream (`userDataStream.subscribe.signature`) after
//!   the open; orders go at once, each signed. USD-M's user data stream is not on
//!   this connection ([`WsVenue::STREAM`]): its setup is the logon alone.
//! - Deribit's JSON-RPC over WebSocket ([`DeribitLane`]): `public/auth` after
//!   the open, then cancel-on-disconnect enabled for the connection and its
//!   heartbeat set; orders go only once that is done (an order over it before
//!   would be refused, and one not over it is not covered), and each heartbeat
//!   `test_request` is answered with `public/test`.

use ergon_core::{Budget, Verdict};
use ergon_venues::adapt::{self, Clock, Parts, Request as Kind, Venue};
use ergon_venues::binance_spot::Counts;
use ergon_venues::binance_spot_ws::{self, Call, Execution, Incoming, WsVenue};
use ergon_venues::deribit::{self, CodCall, CodScope, Deribit};
use ergon_venues::deribit_ws;
use ergon_venues::endpoint::{Prepared, Text};
use ergon_venues::response::Response;

/// A request of the lane's own written (see [`LaneApi::setup`], [`LaneApi::test_reply`]).
#[derive(Clone, Debug)]
pub struct Framed {
    /// Its request id on the connection.
    pub id: u64,
    /// What it charges.
    pub parts: Parts,
    /// When an answer missing means the connection is dead.
    pub deadline_ns: i64,
}

/// One frame from the venue, read.
#[derive(Clone, Copy, Debug)]
pub enum LaneIn {
    /// The answer to request `id`: its HTTP-like status and its verdict by the
    /// REST rules (holds and halts applied).
    Answer {
        /// The request id.
        id: u64,
        /// The answer's status.
        status: u16,
        /// The verdict; `Err(BadHeader)` names what could not be read, with the
        /// verdict it left standing.
        verdict: Result<Verdict, adapt::Error>,
    },
    /// An order update of the venue's order stream.
    Execution(Execution),
    /// The venue asks for a sign of life (Deribit's heartbeat `test_request`):
    /// answer with [`LaneApi::test_reply`] or the connection is closed.
    TestRequest,
    /// The venue revoked the connection's authentication (Binance: -2015 with
    /// a null id after `session.logon`, when the key became invalid): the
    /// venue's code.
    Revoked(i64),
    /// Anything else of the connection's (another stream event, a heartbeat).
    Other,
}

/// A venue's WebSocket session under the gateway's order lane.
pub trait LaneApi: core::fmt::Debug + Send {
    /// Writes `req` (prepared by the REST adapter) as its twin frame into `out`
    /// and reserves its slot: its id. Err if it has no twin or the table is
    /// full (it goes over HTTP, or waits).
    fn prepare_rest(&mut self, req: &Prepared, out: &mut Vec<u8>) -> Result<u64, Unprepared>;

    /// Writes `req`'s twin frame from a template prepared once for its kind, as
    /// [`Text`] (which the connection takes with no UTF-8 scan), into `out` and
    /// reserves its slot: its id; `Ok(None)` if no template covers it (nothing
    /// reserved: [`LaneApi::prepare_rest`] writes it). Byte for byte what
    /// [`LaneApi::prepare_rest`] writes. Default: none covers any.
    fn prepare_text(&mut self, req: &Prepared, out: &mut Text) -> Result<Option<u64>, Unprepared> {
        let _ = (req, out);
        Ok(None)
    }

    /// Request `id` was written.
    fn sent(&mut self, id: u64);

    /// Request `id` was prepared and not written: its slot is free again.
    fn unsent(&mut self, id: u64);

    /// The connection dropped: the table empties (the connection's own session
    /// reported each request's fate).
    fn on_disconnect(&mut self);

    /// The upgrade was answered `r` instead of 101: read by the REST rules (a ban
    /// halts).
    fn on_refused_upgrade(&mut self, r: &Response<'_>, budget: &mut Budget, now: i64);

    /// Re-anchors the venue clock of every request prepared from now on.
    fn set_clock(&mut self, clock: Clock);

    /// What a connect charges (the venue's connection limits, the IP gate).
    fn connect_parts(&self) -> Result<Parts, adapt::Error>;

    /// What every frame charges besides its request's own parts (the IP gate at
    /// cost 0, so a halt stops it).
    fn message_parts(&self) -> Result<Parts, adapt::Error>;

    /// Reads one text frame; Err if it cannot be read (nothing changed).
    fn on_frame(
        &mut self,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> Result<LaneIn, Unreadable>;

    /// An answer frame as the REST adapter reads a body: its status and body.
    fn as_response<'f>(&self, frame: &'f [u8]) -> Option<(u16, &'f [u8])>;

    /// The verdicts of the parts of the last answer [`LaneApi::on_frame`] read
    /// (a cancel-replace's, a batch's: [`Venue::batch_items`]); empty if it named
    /// none.
    fn items(&self) -> &[Verdict] {
        &[]
    }

    /// The setup request of `step` (0 after the open, then one after each
    /// answer taken by [`LaneApi::setup_answer`]) written into `out`; None once
    /// the setup is done. `stream`: the order stream is wanted.
    fn setup(&mut self, step: u8, stream: bool, out: &mut Vec<u8>, now: i64) -> Option<Framed>;

    /// Whether setup `step` has nothing to send now and is passed over (a
    /// `session.status` that only a doubt calls for). Default: none is.
    fn setup_skip(&self, step: u8) -> bool {
        let _ = step;
        false
    }

    /// Reads the answer to setup `step`: Ok to go on, or why the setup stops.
    fn setup_answer(&mut self, step: u8, verdict: Verdict, frame: &[u8]) -> Result<(), String>;

    /// The venue revoked the connection's authentication ([`LaneIn::Revoked`]):
    /// halts what would be refused from now on in `budget` (a halt only a person
    /// clears), and says what. Default: nothing halted.
    fn halt_order_entry(&mut self, budget: &mut Budget, now: i64) -> String {
        let _ = (budget, now);
        String::new()
    }

    /// Whether orders may go before the setup is done (Binance: yes; a venue
    /// that authenticates the connection first: no).
    fn orders_before_setup(&self) -> bool;

    /// The answer to a [`LaneIn::TestRequest`], written into `out`.
    fn test_reply(&mut self, out: &mut Vec<u8>, now: i64) -> Option<Framed>;
}

/// A frame that could not be read: nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unreadable;

/// Why a request was not prepared as its twin: nothing was reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unprepared {
    /// The table of requests in flight is full: wait for answers.
    Busy,
    /// It has no twin, or its arguments cannot be written as one: HTTP.
    Elsewhere,
}

impl<V: WsVenue> LaneApi for binance_spot_ws::Session<V> {
    fn prepare_rest(&mut self, req: &Prepared, out: &mut Vec<u8>) -> Result<u64, Unprepared> {
        match binance_spot_ws::Session::<V>::prepare_rest(self, req, out) {
            Ok(p) => Ok(p.id),
            Err(binance_spot_ws::PrepareError::Full) => Err(Unprepared::Busy),
            Err(_) => Err(Unprepared::Elsewhere),
        }
    }

    /// A new order, from the template of its symbol, side and type
    /// ([`binance_spot_ws::Session::prepare_rest_text`]): unsigned once logged
    /// on, else signed per request.
    fn prepare_text(&mut self, req: &Prepared, out: &mut Text) -> Result<Option<u64>, Unprepared> {
        match self.prepare_rest_text(req, out) {
            Ok(p) => Ok(p.map(|p| p.id)),
            Err(binance_spot_ws::PrepareError::Full) => Err(Unprepared::Busy),
            Err(_) => Err(Unprepared::Elsewhere),
        }
    }

    fn sent(&mut self, id: u64) {
        binance_spot_ws::Session::<V>::sent(self, id);
    }

    fn unsent(&mut self, id: u64) {
        binance_spot_ws::Session::<V>::unsent(self, id);
    }

    fn on_disconnect(&mut self) {
        for _ in binance_spot_ws::Session::<V>::on_disconnect(self) {}
    }

    fn on_refused_upgrade(&mut self, r: &Response<'_>, budget: &mut Budget, now: i64) {
        let _ = self
            .adapter_mut()
            .on_response(Kind::Connect, r, budget, now);
    }

    fn set_clock(&mut self, clock: Clock) {
        binance_spot_ws::Session::<V>::set_clock(self, clock);
    }

    /// "Connecting to WebSocket API costs 2 weight", on every weight limit.
    fn connect_parts(&self) -> Result<Parts, adapt::Error> {
        self.adapter().parts(Kind::Read(2))
    }

    fn message_parts(&self) -> Result<Parts, adapt::Error> {
        self.adapter().parts(Kind::Connect)
    }

    fn on_frame(
        &mut self,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> Result<LaneIn, Unreadable> {
        match binance_spot_ws::Session::<V>::on_frame(self, frame, budget, now) {
            Ok(Incoming::Answer(a)) => Ok(LaneIn::Answer {
                id: a.id,
                status: a.status,
                verdict: a.verdict,
            }),
            Ok(Incoming::Execution(x)) => Ok(LaneIn::Execution(x)),
            Ok(Incoming::Revoked(code)) => Ok(LaneIn::Revoked(code)),
            Ok(_) => Ok(LaneIn::Other),
            Err(_) => Err(Unreadable),
        }
    }

    fn as_response<'f>(&self, frame: &'f [u8]) -> Option<(u16, &'f [u8])> {
        binance_spot_ws::as_response(frame)
    }

    fn items(&self) -> &[Verdict] {
        self.adapter().batch_items()
    }

    /// With an Ed25519 key, `session.logon` (step 0, weight 2), `session.status`
    /// if the logon's answer left a doubt (1, weight 2); then the user data
    /// stream's subscription, if wanted (2, weight 2:
    /// `userDataStream.subscribe` once logged on, else
    /// `userDataStream.subscribe.signature`).
    fn setup(&mut self, step: u8, stream: bool, out: &mut Vec<u8>, now: i64) -> Option<Framed> {
        let call = match step {
            0 => Call::Logon,
            1 => Call::SessionStatus,
            2 if stream && V::STREAM => Call::Subscribe,
            _ => return None,
        };
        let p = self.prepare(&call, out, now).ok()?;
        Some(Framed {
            id: p.id,
            parts: p.parts,
            deadline_ns: p.deadline_ns,
        })
    }

    /// No logon with an HMAC key; no `session.status` once the logon's answer
    /// said the key is logged on.
    fn setup_skip(&self, step: u8) -> bool {
        match step {
            0 => !self.can_log_on(),
            1 => !self.can_log_on() || self.logged_on(),
            _ => false,
        }
    }

    fn setup_answer(&mut self, step: u8, verdict: Verdict, frame: &[u8]) -> Result<(), String> {
        let text = || String::from_utf8_lossy(&frame[..frame.len().min(200)]).into_owned();
        let key = self.api_key().unwrap_or("").to_string();
        match (step, binance_spot_ws::read_logon(frame, &key)) {
            (0 | 1, Ok(())) => {
                self.set_logged_on(true);
                return Ok(());
            }
            // No code and no logon: in doubt, `session.status` says.
            (0, Err(0)) => return Ok(()),
            (0, Err(code)) => return Err(format!("session.logon refused ({code}): {}", text())),
            (1, Err(_)) => return Err(format!("session.status: not logged on: {}", text())),
            _ => {}
        }
        let subscribed = binance_spot_ws::as_response(frame)
            .filter(|_| verdict == Verdict::Done)
            .and_then(|(_, body)| {
                ergon_venues::json::parse(body)
                    .ok()?
                    .get("subscriptionId")
                    .ok()??
                    .as_u64()
                    .ok()
            });
        match subscribed {
            Some(_) => Ok(()),
            None if self.logged_on() => Err(format!("userDataStream.subscribe: {}", text())),
            None => Err(format!("userDataStream.subscribe.signature: {}", text())),
        }
    }

    /// With an HMAC key, every order is signed: it goes at once. With an Ed25519
    /// key, orders wait for the logon and go without signature.
    fn orders_before_setup(&self) -> bool {
        !self.can_log_on()
    }

    /// Halts the account's order counts (`ORDERS` buckets): no new order leaves,
    /// over the lane or REST, until a person clears the halts; cancels and
    /// queries are still tried.
    fn halt_order_entry(&mut self, budget: &mut Budget, now: i64) -> String {
        let mut n = 0;
        for l in self.adapter().limits().of(Counts::Orders) {
            if budget.banned(l.bucket, i64::MAX, now).is_ok() {
                n += 1;
            }
        }
        format!(
            "the venue revoked the WebSocket API session (session.logon, -2015: the API key is no longer valid): order entry halted ({n} order-count buckets) until a person clears the halts"
        )
    }

    /// Binance pings at the WebSocket level: nothing to answer here.
    fn test_reply(&mut self, _out: &mut Vec<u8>, _now: i64) -> Option<Framed> {
        None
    }
}

/// Deribit's session under the lane: see the module doc. Setup: `public/auth`
/// (step 0), `private/enable_cancel_on_disconnect` in the connection's scope
/// (1), `public/set_heartbeat` at [`deribit::MIN_HEARTBEAT_S`] (2).
#[derive(Debug)]
pub struct DeribitLane(deribit_ws::Session);

impl DeribitLane {
    /// A lane session over `adapter` (its keys), with room for `capacity`
    /// requests in flight.
    pub fn over(adapter: Deribit, capacity: usize) -> Result<Self, adapt::Error> {
        deribit_ws::Session::over(adapter, capacity).map(DeribitLane)
    }
}

fn framed(p: Result<deribit_ws::Pending, deribit_ws::PrepareError>) -> Option<Framed> {
    let p = p.ok()?;
    Some(Framed {
        id: p.id,
        parts: p.parts,
        deadline_ns: p.deadline_ns,
    })
}

impl LaneApi for DeribitLane {
    fn prepare_rest(&mut self, req: &Prepared, out: &mut Vec<u8>) -> Result<u64, Unprepared> {
        match self.0.prepare_rest(req, out) {
            Ok(p) => Ok(p.id),
            Err(deribit_ws::PrepareError::Full) => Err(Unprepared::Busy),
            Err(_) => Err(Unprepared::Elsewhere),
        }
    }

    fn sent(&mut self, id: u64) {
        self.0.sent(id);
    }

    fn unsent(&mut self, id: u64) {
        self.0.unsent(id);
    }

    fn on_disconnect(&mut self) {
        for _ in self.0.on_disconnect() {}
    }

    fn on_refused_upgrade(&mut self, r: &Response<'_>, budget: &mut Budget, now: i64) {
        let _ = self
            .0
            .adapter_mut()
            .on_response(Kind::Connect, r, budget, now);
    }

    fn set_clock(&mut self, clock: Clock) {
        self.0.set_clock(clock);
    }

    /// A connection and a session of the key ("32 connections per IP, 16
    /// sessions per key").
    fn connect_parts(&self) -> Result<Parts, adapt::Error> {
        self.0.adapter().parts(Kind::Connect)
    }

    fn message_parts(&self) -> Result<Parts, adapt::Error> {
        let mut p = Parts::new();
        p.push(ergon_core::Part::new(self.0.adapter().ip, 0));
        Ok(p)
    }

    fn on_frame(
        &mut self,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> Result<LaneIn, Unreadable> {
        match self.0.on_frame(frame, budget, now) {
            Ok(deribit_ws::Incoming::Answer(a)) => Ok(LaneIn::Answer {
                id: a.id,
                status: a.status,
                verdict: a.verdict,
            }),
            Ok(deribit_ws::Incoming::TestRequest) => Ok(LaneIn::TestRequest),
            Ok(_) => Ok(LaneIn::Other),
            Err(_) => Err(Unreadable),
        }
    }

    fn as_response<'f>(&self, frame: &'f [u8]) -> Option<(u16, &'f [u8])> {
        deribit_ws::as_response(frame)
    }

    fn setup(&mut self, step: u8, _stream: bool, out: &mut Vec<u8>, now: i64) -> Option<Framed> {
        match step {
            0 => framed(self.0.auth(out, now)),
            1 => framed(self.0.cod(CodCall::Enable(CodScope::Connection), out, now)),
            2 => framed(
                self.0
                    .cod(CodCall::Heartbeat(deribit::MIN_HEARTBEAT_S), out, now),
            ),
            _ => None,
        }
    }

    fn setup_answer(&mut self, step: u8, verdict: Verdict, frame: &[u8]) -> Result<(), String> {
        let ok = match step {
            0 => deribit_ws::read_auth(frame).is_ok(),
            _ => verdict == Verdict::Done,
        };
        if ok {
            return Ok(());
        }
        let what = match step {
            0 => "public/auth",
            1 => "private/enable_cancel_on_disconnect",
            _ => "public/set_heartbeat",
        };
        let text = String::from_utf8_lossy(&frame[..frame.len().min(200)]);
        Err(format!("{what}: {text}"))
    }

    fn orders_before_setup(&self) -> bool {
        false
    }

    fn test_reply(&mut self, out: &mut Vec<u8>, now: i64) -> Option<Framed> {
        framed(self.0.test(out, now))
    }
}
