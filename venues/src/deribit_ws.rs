//! Deribit order entry over its WebSocket (JSON-RPC 2.0): a sans-IO session that
//! writes each request the REST adapter prepared as its WebSocket twin, with an
//! id, matches the answers by id, answers the venue's heartbeat, and says the fate
//! of every id when the connection drops. The twin of
//! [`binance_spot_ws`](crate::binance_spot_ws).
//!
//! Why a WebSocket at all: cancel-on-disconnect is WebSocket only and per
//! connection ("all orders created via this connection will be automatically
//! cancelled when the connection is closed"), so the orders it must cover have to
//! be sent over the connection that enabled it (see [`CodCall`]).
//!
//! Every request charges what its REST twin charges ([`Pending::parts`] are the
//! [`Prepared`] request's parts), and every answer is read by [`Deribit`]'s
//! [`Venue::on_response`], the whole frame as the body (the REST reader reads
//! the same JSON-RPC object an HTTP answer carries) and status 200 for a `result`,
//! 400 for an `error` (what Deribit's HTTP API answers, and what the REST reader's
//! fixtures hold). The body's code decides first, so a `too_many_requests`
//! (10028) holds the request's pool by the REST rules; on a WebSocket the venue
//! also closes the session after it (expect [`Session::on_disconnect`]).
//! `public/auth`, the cancel-on-disconnect calls and `public/test` are
//! non-matching requests ([`Request::Read`]`(1)`, 500 credits of the pool)
//! charged to the adapter's reserve of it ([`Deribit::switch_parts`]): a
//! strategy reading flat out cannot starve the heartbeat's answer.
//!
//! Drive order (one connection):
//! 1. Authenticate first: [`Session::auth`] writes `public/auth` (the
//!    `client_signature` grant) into the caller's buffer and reserves a slot;
//!    the venue refuses private requests on the connection until its answer says
//!    authenticated ([`read_auth`] of the frame whose [`Answer::call`] is
//!    [`Call::Auth`]). Then [`Session::cod`] enables cancel-on-disconnect (and
//!    sets a heartbeat), read with [`CodCall::read`].
//! 2. For each request: the REST adapter prepares it, [`Session::prepare_rest`]
//!    writes its twin and reserves a slot; it returns a [`Pending`] with the parts
//!    to charge, the deadline and the client order id.
//! 3. The caller charges the parts (`Budget::try_charge`). Refused: it calls
//!    [`Session::unsent`] and nothing was charged. Admitted: it writes the frame,
//!    then calls [`Session::sent`] (and `Ticket::sent`).
//! 4. Each text frame that arrives goes to [`Session::on_frame`]: an
//!    [`Incoming::Answer`] carries the verdict of the request with that id
//!    (complete its `Flight`, and `Budget::resend` if it did not run); an
//!    [`Incoming::TestRequest`] must be answered at once with [`Session::test`]
//!    (else the venue closes the connection, and cancel-on-disconnect fires).
//! 5. When the connection drops, [`Session::on_disconnect`] yields every id still
//!    in the table once: [`Fate::Unknown`] for those written (the venue may have
//!    run them: reconcile by label with `private/get_order_state_by_label`; never
//!    re-send), [`Fate::NotWritten`] for those prepared but never written (refund
//!    their `Ticket`). [`Fate`] is [`binance_spot_ws`](crate::binance_spot_ws)'s,
//!    so one driver handles both.
//!
//! Sources (checked 2026-12-02):
//! <https://docs.deribit.com/api-reference/authentication/public-auth> (the
//! `client_signature` grant: `signature` = hex HMAC-SHA256 of the client secret
//! over `timestamp + "\n" + nonce + "\n" + data`),
//! <https://docs.deribit.com/api-reference/session-management/public-set_heartbeat>
//! (the `heartbeat` notification, `type` `heartbeat` or `test_request`, and
//! `public/test` as the answer), <https://docs.deribit.com/articles/json-rpc-overview>
//! (one method set over HTTP and WebSocket; parameters as a JSON object).
//!
//! Nothing here reads a clock, touches a socket or allocates once the caller's
//! frame buffer has held the largest request: the table is allocated at
//! construction, and reading a frame never allocates.

use std::io::Write as _;

use ergon_core::{Budget, Verdict};

use crate::adapt::{Clock, Error, Parts, Request, Venue};
use crate::deribit::{CodCall, Deribit, VALID_FOR_MS};
use crate::endpoint::{ClientOrderId, Method, Prepared};
pub use crate::inflight::Fate;
use crate::inflight::{Slot, Table};
use crate::json::{self, JsonError, Kind};
use crate::response::Response;

const MS: i64 = 1_000_000;
/// What the session's own calls charge: a non-matching request.
const OWN: Request<'static> = Request::Read(1);
/// The longest number or boolean parameter, decoded.
const MAX_SCALAR: usize = 40;

/// What a request in the table is, so its answer is read by the right reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Call {
    /// The twin of a REST request ([`Session::prepare_rest`]).
    Rest,
    /// `public/auth` ([`Session::auth`]): read the answer with [`read_auth`].
    Auth,
    /// A cancel-on-disconnect or heartbeat call ([`Session::cod`]): read the
    /// answer with [`CodCall::read`].
    Cod(CodCall),
    /// `public/test` ([`Session::test`]), the answer to a heartbeat's
    /// `test_request`.
    Test,
}

/// A request written and waiting to be charged and sent (see the module's drive
/// order). It names its slot by `id`; the caller keeps it beside its `Ticket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The request id the frame carries.
    pub id: u64,
    /// The request kind (what it charges, how its answer is read).
    pub kind: Request<'static>,
    /// What it charges, all or none: the REST twin's parts.
    pub parts: Parts,
    /// The REST twin's deadline (an order's `valid_until`); for the session's own
    /// calls, [`VALID_FOR_MS`] after `now`.
    pub deadline_ns: i64,
    /// The client order id (the `label`) it places, cancels or queries.
    pub client_order_id: Option<ClientOrderId>,
}

/// A session's own call (auth, cancel-on-disconnect, test), prepared.
fn own(id: u64, call: Call, deadline_ns: i64) -> Slot<Call> {
    Slot::prepared(id, OWN, deadline_ns, None, call)
}

/// What the caller did wrong when preparing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrepareError {
    /// The arguments were refused (the adapter's error says which).
    Bad(Error),
    /// Every slot of the table of requests in flight is taken: wait for answers.
    Full,
}

/// What is wrong with a frame from the venue. Nothing of the budget or the table
/// changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// Not JSON.
    Json(JsonError),
    /// Neither an answer with a numeric `id` nor a notification (the venue
    /// answers a frame it could not read with `"id":null`).
    NoId,
    /// An answer whose id is not in flight on this connection.
    UnknownId(u64),
}

impl From<JsonError> for FrameError {
    fn from(e: JsonError) -> Self {
        FrameError::Json(e)
    }
}

/// The answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The request id.
    pub id: u64,
    /// The request kind.
    pub kind: Request<'static>,
    /// What the request was: read an [`Call::Auth`] answer with [`read_auth`], a
    /// [`Call::Cod`] answer with [`CodCall::read`].
    pub call: Call,
    /// The client order id of the request.
    pub client_order_id: Option<ClientOrderId>,
    /// The status the REST reader was given: 200 for a `result`, 400 for an
    /// `error` (see [`as_response`]).
    pub status: u16,
    /// The `error.code`, if an error.
    pub code: Option<i64>,
    /// The verdict by the REST rules ([`Deribit`]'s [`Venue::on_response`]), holds
    /// and halts applied.
    pub verdict: Result<Verdict, Error>,
}

/// One frame from the venue, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Incoming {
    /// The answer to a request in flight (its slot is free again).
    Answer(Answer),
    /// A `heartbeat` notification of type `test_request`: answer it now with
    /// [`Session::test`].
    TestRequest,
    /// A `heartbeat` notification of type `heartbeat`: nothing to do.
    Heartbeat,
    /// Another notification (a `subscription` ...).
    Other,
}

/// A Deribit WebSocket order-entry session: see the module doc for the drive
/// order. Its `Debug` shows no secret (the adapter's keys print as `..`).
#[derive(Clone, Debug)]
pub struct Session {
    adapter: Deribit,
    slots: Table<Call>,
}

fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
}

/// Appends `bytes` as the inside of a JSON string: `"` and `\` escaped, control
/// characters as `\u00XX`.
fn escaped(out: &mut Vec<u8>, bytes: impl IntoIterator<Item = u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for c in bytes {
        match c {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', c]),
            0..=0x1f => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 15)],
            ]),
            c => out.push(c),
        }
    }
}

fn unhex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The percent-decoded bytes of a query value, `None` for a bad escape; a `+`
/// (a space in form encoding, itself elsewhere) is refused as ambiguous.
fn decoded(v: &[u8]) -> impl Iterator<Item = Option<u8>> + '_ {
    let mut i = 0;
    core::iter::from_fn(move || {
        let c = *v.get(i)?;
        Some(match c {
            b'%' => {
                let b = v
                    .get(i + 1)
                    .and_then(|&h| unhex(h))
                    .zip(v.get(i + 2).and_then(|&l| unhex(l)));
                i = if b.is_some() { i + 3 } else { v.len() };
                b.map(|(h, l)| h << 4 | l)
            }
            b'+' => {
                i = v.len();
                None
            }
            c => {
                i += 1;
                Some(c)
            }
        })
    })
}

/// How a parameter's value is written: the names the REST adapter (and
/// Deribit's order methods) give numbers and booleans; every other is a string.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Number,
    Bool,
    Str,
}

fn type_of(name: &str) -> Type {
    match name {
        "amount" | "contracts" | "price" | "trigger_price" | "trigger_offset" | "max_show"
        | "valid_until" | "depth" => Type::Number,
        "post_only" | "reject_post_only" | "reduce_only" | "mmp" => Type::Bool,
        _ => Type::Str,
    }
}

/// Writes one query value as JSON of its type; `Err` names what it could not
/// convert. On `Err`, `out` holds a partial write (the caller clears it).
fn put_value(out: &mut Vec<u8>, ty: Type, value: &str) -> Result<(), &'static str> {
    if ty == Type::Str {
        out.push(b'"');
        let at = out.len();
        for c in decoded(value.as_bytes()) {
            escaped(out, [c.ok_or("a parameter's percent-encoding")?]);
        }
        if core::str::from_utf8(&out[at..]).is_err() {
            return Err("a parameter that is not UTF-8");
        }
        out.push(b'"');
        return Ok(());
    }
    let mut buf = [0u8; MAX_SCALAR];
    let mut n = 0;
    for c in decoded(value.as_bytes()) {
        let slot = buf.get_mut(n).ok_or("a number or boolean too long")?;
        *slot = c.ok_or("a parameter's percent-encoding")?;
        n += 1;
    }
    let v = &buf[..n];
    if ty == Type::Bool {
        return match v {
            b"true" | b"false" => {
                out.extend_from_slice(v);
                Ok(())
            }
            _ => Err("a boolean parameter (true or false)"),
        };
    }
    // A JSON number: an optional `-`, digits without leading zeros (dropped
    // here: `007` is 7), an optional `.` and digits.
    let (minus, v) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    let (int, frac) = match v.iter().position(|&c| c == b'.') {
        Some(dot) => (&v[..dot], Some(&v[dot + 1..])),
        None => (v, None),
    };
    let digits = |d: &[u8]| !d.is_empty() && d.iter().all(u8::is_ascii_digit);
    if !digits(int) || !frac.map_or(true, digits) {
        return Err("a number parameter (digits with at most one `.`)");
    }
    let zeros = int.iter().take_while(|&&c| c == b'0').count();
    let int = &int[zeros.min(int.len() - 1)..];
    if minus {
        out.push(b'-');
    }
    out.extend_from_slice(int);
    if let Some(f) = frac {
        out.push(b'.');
        out.extend_from_slice(f);
    }
    Ok(())
}

/// The JSON-RPC method of a REST target's path: `/api/v2/private/buy` →
/// `private/buy`.
fn rest_method(path: &str) -> Option<&str> {
    let m = path.strip_prefix("/api/v2/")?;
    let ok = (m.starts_with("public/") || m.starts_with("private/"))
        && m.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'/');
    ok.then_some(m)
}

fn head(out: &mut Vec<u8>, id: u64, method: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing a number into a Vec cannot fail.
    let _ = write!(out, "{id}");
    out.extend_from_slice(b",\"method\":\"");
    out.extend_from_slice(method.as_bytes());
    out.extend_from_slice(b"\",\"params\":{");
}

impl Session {
    /// A session over `adapter` (its limits, its clock, its reading of answers,
    /// its credentials for `public/auth`), at most `capacity` requests in flight
    /// (at least 1). [`Error::NoKey`] if the adapter was given no credentials
    /// (`Deribit::with_auth`).
    pub fn over(adapter: Deribit, capacity: usize) -> Result<Self, Error> {
        if adapter.credentials().is_none() {
            return Err(Error::NoKey);
        }
        if capacity == 0 {
            return Err(Error::BadArgument("capacity (at least 1)"));
        }
        Ok(Session {
            adapter,
            slots: Table::new(capacity),
        })
    }

    /// The adapter (its limits and clock).
    pub fn adapter(&self) -> &Deribit {
        &self.adapter
    }

    /// The adapter, to prepare requests and to read an answer that is not a frame
    /// (a refused upgrade).
    pub fn adapter_mut(&mut self) -> &mut Deribit {
        &mut self.adapter
    }

    /// Re-anchors the venue clock `public/auth` is stamped with (the adapter's).
    pub fn set_clock(&mut self, clock: Clock) {
        self.adapter.set_clock(clock);
    }

    /// How many requests are in the table (prepared or written, without an answer).
    pub fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    /// The next id, if its slot is free.
    fn free(&self) -> Result<u64, PrepareError> {
        self.slots.next().ok_or(PrepareError::Full)
    }

    /// Reserves the slot of `s` (prepared) and moves the next id past it.
    fn reserve(&mut self, s: Slot<Call>, parts: Parts) -> Pending {
        self.slots.reserve(s);
        Pending {
            id: s.id,
            kind: s.kind,
            parts,
            deadline_ns: s.deadline_ns,
            client_order_id: s.client_order_id,
        }
    }

    /// Writes `public/auth` with the `client_signature` grant into `out` (cleared
    /// first): the adapter's client id, the venue's UTC ms of `now`, a fresh
    /// nonce (the adapter's sequence), empty `data`, and the hex HMAC-SHA256 of
    /// the client secret over `timestamp\nnonce\ndata`; reserves its slot. A
    /// non-matching request ([`Request::Read`]`(1)`); its deadline is the
    /// timestamp + [`VALID_FOR_MS`]. On `Err`, `out` is empty and nothing is
    /// reserved.
    pub fn auth(&mut self, out: &mut Vec<u8>, now: i64) -> Result<Pending, PrepareError> {
        out.clear();
        let id = self.free()?;
        let parts = self.adapter.switch_parts();
        if self.adapter.credentials().is_none() {
            return Err(PrepareError::Bad(Error::NoKey));
        }
        let nonce = self.adapter.next_nonce();
        let clock = self.adapter.clock();
        let ts = clock.utc_ms(now);
        let Some((client_id, key)) = self.adapter.credentials() else {
            return Err(PrepareError::Bad(Error::NoKey));
        };
        head(out, id, "public/auth");
        out.extend_from_slice(b"\"grant_type\":\"client_signature\",\"client_id\":\"");
        escaped(out, client_id.as_str().bytes());
        out.extend_from_slice(b"\",\"timestamp\":");
        let ts_at = out.len();
        let _ = write!(out, "{ts}");
        let ts_end = out.len();
        out.extend_from_slice(b",\"nonce\":\"");
        let nonce_at = out.len();
        let _ = write!(out, "{nonce}");
        let nonce_end = out.len();
        out.extend_from_slice(b"\",\"data\":\"\",\"signature\":\"");
        let mac = key.sign(&[&out[ts_at..ts_end], b"\n", &out[nonce_at..nonce_end], b"\n"]);
        hex(out, &mac);
        out.extend_from_slice(b"\"}}");
        let deadline = clock.now_ns_at(ts.saturating_add(VALID_FOR_MS));
        Ok(self.reserve(own(id, Call::Auth, deadline), parts))
    }

    /// Writes `call`'s frame ([`CodCall::frame`]: enable or disable
    /// cancel-on-disconnect with its scope, or `public/set_heartbeat`) with the
    /// next id into `out` (cleared first), and reserves its slot. A non-matching
    /// request ([`Request::Read`]`(1)`), its deadline [`VALID_FOR_MS`] after `now`.
    /// Read its answer with [`CodCall::read`]. On `Err`, `out` is empty and
    /// nothing is reserved.
    pub fn cod(
        &mut self,
        call: CodCall,
        out: &mut Vec<u8>,
        now: i64,
    ) -> Result<Pending, PrepareError> {
        out.clear();
        let id = self.free()?;
        let parts = self.adapter.switch_parts();
        let frame = call.frame(id).map_err(PrepareError::Bad)?;
        out.extend_from_slice(frame.as_bytes());
        let deadline = now.saturating_add(VALID_FOR_MS * MS);
        Ok(self.reserve(own(id, Call::Cod(call), deadline), parts))
    }

    /// Writes `public/test`, the answer to a heartbeat's `test_request`
    /// ([`Incoming::TestRequest`]), into `out` (cleared first), and reserves its
    /// slot. A non-matching request ([`Request::Read`]`(1)`), its deadline
    /// [`VALID_FOR_MS`] after `now`. On `Err`, `out` is empty and nothing is
    /// reserved.
    pub fn test(&mut self, out: &mut Vec<u8>, now: i64) -> Result<Pending, PrepareError> {
        out.clear();
        let id = self.free()?;
        let parts = self.adapter.switch_parts();
        head(out, id, "public/test");
        out.extend_from_slice(b"}}");
        let deadline = now.saturating_add(VALID_FOR_MS * MS);
        Ok(self.reserve(own(id, Call::Test, deadline), parts))
    }

    /// Writes the WebSocket twin of a request the REST adapter prepared into `out`
    /// (cleared first; once it has held the largest request this allocates
    /// nothing) and reserves its slot: `GET /api/v2/<method>?a=b&c=d` becomes
    /// `{"jsonrpc":"2.0","id":N,"method":"<method>","params":{"a":"b","c":"d"}}`,
    /// the values percent-decoded, `amount`, `contracts`, `price`,
    /// `trigger_price`, `trigger_offset`, `max_show`, `valid_until` and `depth` as
    /// JSON numbers (leading zeros dropped), `post_only`, `reject_post_only`,
    /// `reduce_only` and `mmp` as booleans, every other as a string. The
    /// `Authorization` header is dropped: the connection is authenticated once
    /// ([`Session::auth`]). The parts, kind, deadline and client order id are the
    /// prepared request's. A request that is not such a GET, or a value that
    /// cannot be converted (a bad escape, a `+`, a number or boolean that is not
    /// one), is refused with [`Error::BadArgument`]. On `Err`, `out` is empty and
    /// nothing is reserved.
    pub fn prepare_rest(
        &mut self,
        p: &Prepared,
        out: &mut Vec<u8>,
    ) -> Result<Pending, PrepareError> {
        out.clear();
        let id = self.free()?;
        let r = write_rest(p, id, out);
        let kind = match r {
            Ok(kind) => kind,
            Err(what) => {
                out.clear();
                return Err(PrepareError::Bad(Error::BadArgument(what)));
            }
        };
        let slot = Slot::prepared(
            id,
            kind,
            p.deadline_ns(),
            p.client_order_id().copied(),
            Call::Rest,
        );
        Ok(self.reserve(slot, p.parts().iter().copied().collect()))
    }

    /// Marks request `id` written (its frame went to the socket); `false` if `id`
    /// is not prepared on this session.
    pub fn sent(&mut self, id: u64) -> bool {
        self.slots.sent(id)
    }

    /// Frees the slot of request `id`, prepared but not written (its charge was
    /// refused, or the caller chose not to send it: refund its `Ticket` if it had
    /// one). `false` if `id` is not prepared, or was written: a written request
    /// leaves the table only by its answer or by [`Session::on_disconnect`].
    pub fn unsent(&mut self, id: u64) -> bool {
        self.slots.unsent(id)
    }

    /// The connection dropped: yields every request in the table once, and empties
    /// it. [`Fate::Unknown`]: complete its `Flight` and reconcile by label
    /// (`private/get_order_state_by_label` on the next connection, or REST); never
    /// re-send it. [`Fate::NotWritten`]: refund its `Ticket` (`Budget::refund`),
    /// the venue never saw it. Cancel-on-disconnect, if enabled, cancels the
    /// orders the connection placed, so a reconcile finds them cancelled or
    /// filled.
    pub fn on_disconnect(&mut self) -> impl Iterator<Item = Fate> + '_ {
        self.slots.drain()
    }

    /// Reads one text frame from the venue: an answer to a request in flight (its
    /// verdict by the REST rules, the frame as the body with status 200 for a
    /// `result` and 400 for an `error`, holds and halts applied to `budget`), or a
    /// notification (`heartbeat`: [`Incoming::TestRequest`] must be answered with
    /// [`Session::test`]). A frame that cannot be read, or an answer to an id not
    /// in flight, is an `Err` and changes nothing. Never allocates.
    pub fn on_frame(
        &mut self,
        frame: &[u8],
        budget: &mut Budget,
        now: i64,
    ) -> Result<Incoming, FrameError> {
        let v = json::parse(frame)?;
        if v.kind() != Kind::Object {
            return Err(FrameError::NoId);
        }
        let id = v.get("id")?.filter(|i| !i.is_null());
        let Some(id) = id else {
            if v.get("method")?.is_none() {
                return Err(FrameError::NoId);
            }
            let heartbeat = v
                .get("method")?
                .is_some_and(|m| m.str_eq("heartbeat") == Ok(true));
            let ty = v.path("params.type")?;
            let is = |t| ty.is_some_and(|v| v.str_eq(t) == Ok(true));
            return Ok(match heartbeat {
                true if is("test_request") => Incoming::TestRequest,
                true if is("heartbeat") => Incoming::Heartbeat,
                _ => Incoming::Other,
            });
        };
        let id = id.as_u64().map_err(|_| FrameError::NoId)?;
        let Some(slot) = self.slots.get(id) else {
            return Err(FrameError::UnknownId(id));
        };
        // Every read that can fail comes before the first change.
        let error = v.get("error")?;
        let code = match error {
            Some(e) => e.get("code")?.and_then(|c| c.as_i64().ok()),
            None => None,
        };
        self.slots.take(id);
        let status = if error.is_some() { 400 } else { 200 };
        let r = Response {
            status,
            headers: &[],
            body: frame,
        };
        let verdict = self.adapter.on_response(slot.kind, &r, budget, now);
        Ok(Incoming::Answer(Answer {
            id,
            kind: slot.kind,
            call: slot.extra,
            client_order_id: slot.client_order_id,
            status,
            code,
            verdict,
        }))
    }
}

/// Writes the twin of `p` with `id`; its kind, or what could not be converted.
fn write_rest(p: &Prepared, id: u64, out: &mut Vec<u8>) -> Result<Request<'static>, &'static str> {
    let (Some(kind), Some(m)) = (p.kind(), p.method()) else {
        return Err("an empty request");
    };
    let (path, query) = p.target().split_once('?').unwrap_or((p.target(), ""));
    let method = rest_method(path)
        .filter(|_| m == Method::Get)
        .ok_or("a request that is not a GET of /api/v2/<method>")?;
    head(out, id, method);
    for (i, kv) in query.split('&').filter(|kv| !kv.is_empty()).enumerate() {
        let (name, value) = kv.split_once('=').unwrap_or((kv, ""));
        let name_ok =
            !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        if !name_ok {
            return Err("a parameter name");
        }
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        put_value(out, type_of(name), value)?;
    }
    out.extend_from_slice(b"}}");
    Ok(kind)
}

/// An answer as the REST reader sees it: status 200 for a `result`, 400 for an
/// `error` (Deribit's HTTP API answers an error with 400, and its reader decides
/// by the body's code first), and the whole frame as the body; `None` if the
/// frame is not an answer (not JSON, a notification).
///
/// ```
/// use ergon_venues::deribit_ws::as_response;
/// let f = br#"{"jsonrpc":"2.0","id":7,"error":{"code":10009,"message":"not_enough_funds"}}"#;
/// assert_eq!(as_response(f), Some((400, &f[..])));
/// assert_eq!(as_response(br#"{"jsonrpc":"2.0","id":7,"result":"ok"}"#).map(|r| r.0), Some(200));
/// assert_eq!(as_response(br#"{"jsonrpc":"2.0","method":"heartbeat"}"#), None);
/// ```
pub fn as_response(frame: &[u8]) -> Option<(u16, &[u8])> {
    let v = json::parse(frame).ok()?;
    if v.kind() != Kind::Object {
        return None;
    }
    if v.get("error").ok()?.is_some() {
        return Some((400, frame));
    }
    v.get("result").ok()?.map(|_| (200, frame))
}

/// Reads the answer to [`Session::auth`]: `Ok` if the connection is
/// authenticated (a `result` with an `access_token`), `Err(Some(code))` for the
/// venue's error code (13004 invalid credentials, 13009 unauthorized, 10028 too
/// many requests ...), `Err(None)` if the frame says neither.
pub fn read_auth(frame: &[u8]) -> Result<(), Option<i64>> {
    let v = json::parse(frame).map_err(|_| None)?;
    if let Some(e) = v.get("error").ok().flatten() {
        return Err(e.get("code").ok().flatten().and_then(|c| c.as_i64().ok()));
    }
    match v.path("result.access_token") {
        Ok(Some(t)) if t.kind() == Kind::String => Ok(()),
        _ => Err(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(ty: Type, v: &str) -> Result<String, &'static str> {
        let mut out = Vec::new();
        put_value(&mut out, ty, v)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn values_are_decoded_and_typed() {
        assert_eq!(
            value(Type::Str, "BTC-PERPETUAL"),
            Ok(r#""BTC-PERPETUAL""#.into())
        );
        assert_eq!(
            value(Type::Str, "a%22b%5Cc%0A"),
            Ok(r#""a\"b\\c\u000a""#.into())
        );
        assert_eq!(value(Type::Str, "%C3%A9"), Ok("\"\u{e9}\"".into()));
        assert_eq!(value(Type::Str, ""), Ok(r#""""#.into()));
        assert!(value(Type::Str, "%C3").is_err());
        assert!(value(Type::Str, "%G1").is_err());
        assert!(value(Type::Str, "%4").is_err());
        assert!(value(Type::Str, "a+b").is_err());
        assert_eq!(value(Type::Number, "0.01"), Ok("0.01".into()));
        assert_eq!(value(Type::Number, "007"), Ok("7".into()));
        assert_eq!(value(Type::Number, "000.5"), Ok("0.5".into()));
        assert_eq!(value(Type::Number, "0"), Ok("0".into()));
        assert_eq!(value(Type::Number, "%2D12"), Ok("-12".into()));
        for bad in ["", ".5", "5.", "1e3", "1.2.3", "-", "abc", "1 ", "+1"] {
            assert!(value(Type::Number, bad).is_err(), "{bad}");
        }
        assert!(value(Type::Number, &"1".repeat(41)).is_err());
        assert_eq!(value(Type::Bool, "true"), Ok("true".into()));
        assert_eq!(value(Type::Bool, "false"), Ok("false".into()));
        assert!(value(Type::Bool, "1").is_err());
    }

    #[test]
    fn only_api_v2_methods_have_twins() {
        assert_eq!(rest_method("/api/v2/private/buy"), Some("private/buy"));
        assert_eq!(rest_method("/api/v2/public/test"), Some("public/test"));
        assert_eq!(rest_method("/api/v3/order"), None);
        assert_eq!(rest_method("/api/v2/private/buy\""), None);
        assert_eq!(rest_method("/api/v2/other"), None);
    }
}
