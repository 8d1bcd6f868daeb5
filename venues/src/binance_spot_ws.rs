//! Binance Spot over the WebSocket API (`/ws-api/v3`): a sans-IO session that writes
//! JSON request frames with ids, matches the answers by id, and says the fate of
//! every id when the connection drops.
//!
//! Sources (`web-socket-api.md` of
//! <https://github.com/binance/binance-spot-api-docs>, commit of 2026-07-21):
//! "Request format", "Response format", "SIGNED request example (HMAC)" (the
//! signature is HMAC-SHA256, hex, over every parameter but `signature`, sorted by
//! name, `name=value` joined by `&`), "Rate limits" (each answer's `rateLimits`;
//! a 429 or 418 carries `error.data.retryAfter`, a UTC ms timestamp), and each
//! method's weight: `time` 1, `exchangeInfo` 20, `order.place` 1 (+1 ORDERS),
//! `order.cancel` 1, `order.cancelReplace` 1 (+1 ORDERS), `order.status` 4,
//! `openOrders.status` 6 for one symbol and 80 for all, `account.status` 20,
//! `userDataStream.subscribe.signature` 2, `userDataStream.unsubscribe` 2.
//!
//! Every request charges what its REST twin charges: the parts come from
//! [`BinanceSpot`]'s [`Venue::parts`], and every answer is read by
//! [`BinanceSpot`]'s [`Venue::on_response`] (the `error` object as the body, the
//! status as the status, `retryAfter` as the wait), so a 429 holds and a 418 halts
//! the IP gate by the REST rules. The `rateLimits` array is fed to
//! [`Budget::observe_used`](ergon_core::Budget::observe_used) the way the `X-MBX-USED-WEIGHT-*` and
//! `X-MBX-ORDER-COUNT-*` headers are.
//!
//! Drive order (one connection):
//! 1. [`Session::prepare`] writes the frame into the caller's buffer and reserves
//!    a slot in the table of requests in flight; it returns a [`Pending`] with the
//!    parts to charge, the deadline and the client order id.
//! 2. The caller charges the parts (`Budget::try_charge`). Refused: it calls
//!    [`Session::unsent`] and nothing was charged. Admitted: it writes the frame,
//!    then calls [`Session::sent`] (and `Ticket::sent`).
//! 3. Each text frame that arrives goes to [`Session::on_frame`]: an [`Incoming::Answer`]
//!    carries the verdict of the request with that id (complete its `Flight`, and
//!    `Budget::resend` if it did not run); an [`Incoming::Execution`] is an order
//!    update of the user data stream.
//! 4. When the connection drops, [`Session::on_disconnect`] yields every id still in
//!    the table once: [`Fate::Unknown`] for those written (the venue may have run
//!    them: reconcile by client order id with `order.status` on the next connection
//!    or over REST; never re-send), [`Fate::NotWritten`] for those prepared but never
//!    written (refund their `Ticket` with `Budget::refund`: the venue never saw them).
//!
//! On ergon-io's WebSocket session the charge is made by `ws::Session::send_request`
//! (with [`Pending::parts`]), which knows whether a byte of the frame left: its
//! `Event::Outcome` refunds a request never written (`NotRun`) by itself, so call
//! [`Session::sent`] once `send_request` queued the frame, and on a drop take the
//! refund from ergon-io and the client order id to reconcile from [`Fate`] (a frame
//! queued but never written is then reconciled needlessly, never re-sent).
//! `tests/e2e_ws_api_session.rs` drives the two over a socket.
//!
//! Nothing here reads a clock, touches a socket or allocates once the caller's frame
//! buffer has held the largest request: the table is allocated at construction.

use std::io::Write as _;

use arrayvec::{ArrayString, ArrayVec};
use ergon_core::Verdict;

use crate::adapt::{Error, Parts, Request};
use crate::binance_auth::DEFAULT_RECV_WINDOW_MS;
use crate::binance_spot::BinanceSpot;
use crate::endpoint::{
    Amend, ApiKey, ClientOrderId, HmacKey, NewOrder, OrderRef, OrderState, OrderType, Prepared,
    Side, SignKey, Symbol, TimeInForce,
};
use crate::inflight::{Slot, Table};
use crate::json::JsonError;

mod from_rest;
mod template;
pub(crate) mod venue;
pub use from_rest::MAX_TEMPLATES;
pub use template::{FrameTemplate, Signing};
pub use venue::WsVenue;

const MS: i64 = 1_000_000;
/// Most parameters one request carries (a cancel-replace: 12).
const MAX_PARAMS: usize = 16;

/// One WebSocket API call with its typed arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Call<'a> {
    /// `time`: weight 1.
    Time,
    /// `exchangeInfo`, of one symbol or all: weight 20.
    ExchangeInfo(Option<Symbol<'a>>),
    /// `order.place`: weight 1, one order.
    Place(NewOrder<'a>),
    /// `order.cancel` by `origClientOrderId`: weight 1.
    Cancel(OrderRef<'a>),
    /// `order.cancelReplace` with `STOP_ON_FAILURE`: weight 1, one order.
    CancelReplace {
        /// The order to cancel.
        cancel: ClientOrderId,
        /// The order to place.
        new: NewOrder<'a>,
    },
    /// `order.status` by `origClientOrderId`: weight 4.
    Status(OrderRef<'a>),
    /// `openOrders.status`: weight 6 for one symbol, 80 for all.
    OpenOrders(Option<Symbol<'a>>),
    /// `account.status` with `omitZeroBalances`: weight 20.
    Account,
    /// `userDataStream.subscribe.signature`: weight 2.
    Subscribe,
    /// `userDataStream.unsubscribe` of one subscription, or all: weight 2.
    Unsubscribe(Option<u64>),
    /// `session.logon` with the session's Ed25519 key: weight 2. Once its answer
    /// says so ([`read_logon`], [`Session::set_logged_on`]), signed calls go
    /// without `apiKey` and `signature`, and [`Call::Subscribe`] is
    /// `userDataStream.subscribe`.
    Logon,
    /// `session.status`: which key (if any) the connection is logged on with:
    /// weight 2.
    SessionStatus,
    /// `session.logout`: weight 2.
    Logout,
    /// `order.modify` of USD-M futures (price and quantity of an open order, by
    /// `origClientOrderId`; both required): as a new order on the ORDERS limits,
    /// weight 0. Spot has none ([`Error::Unsupported`]).
    Modify(Amend<'a>),
}

impl Call<'_> {
    /// The method name the frame carries.
    pub fn method(&self) -> &'static str {
        match self {
            Call::Time => "time",
            Call::ExchangeInfo(_) => "exchangeInfo",
            Call::Place(_) => "order.place",
            Call::Cancel(_) => "order.cancel",
            Call::CancelReplace { .. } => "order.cancelReplace",
            Call::Status(_) => "order.status",
            Call::OpenOrders(_) => "openOrders.status",
            Call::Account => "account.status",
            Call::Subscribe => "userDataStream.subscribe.signature",
            Call::Unsubscribe(_) => "userDataStream.unsubscribe",
            Call::Logon => "session.logon",
            Call::SessionStatus => "session.status",
            Call::Logout => "session.logout",
            Call::Modify(_) => "order.modify",
        }
    }

    /// The request kind: what the REST twin charges and how its answer is read
    /// (Spot's weights; a venue's session asks [`WsVenue::call_kind`]).
    pub fn kind(&self) -> Request<'static> {
        match self {
            Call::Modify(_) => Request::CancelReplace,
            Call::Time => Request::Read(1),
            Call::ExchangeInfo(_) | Call::Account => Request::Read(20),
            Call::Place(_) => Request::Order,
            Call::Cancel(_) => Request::Cancel,
            Call::CancelReplace { .. } => Request::CancelReplace,
            Call::Status(_) => Request::Read(4),
            Call::OpenOrders(Some(_)) => Request::Read(6),
            Call::OpenOrders(None) => Request::Read(80),
            Call::Subscribe
            | Call::Unsubscribe(_)
            | Call::Logon
            | Call::SessionStatus
            | Call::Logout => Request::Read(2),
        }
    }

    fn signed(&self) -> bool {
        !matches!(
            self,
            Call::Time
                | Call::ExchangeInfo(_)
                | Call::Unsubscribe(_)
                | Call::SessionStatus
                | Call::Logout
        )
    }
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
    /// The end of the venue's acceptance window (timestamp + recvWindow) on the
    /// caller's clock; for unsigned reads `now` + the receive window.
    pub deadline_ns: i64,
    /// The client order id it places, cancels or queries.
    pub client_order_id: Option<ClientOrderId>,
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
    /// Neither an answer with a numeric `id` nor a user data stream event (the
    /// venue answers a frame it could not read with `"id":null`).
    NoId,
    /// An answer whose id is not in flight on this connection.
    UnknownId(u64),
    /// An event whose field is missing or bad; names the field.
    BadEvent(&'static str),
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
    /// The client order id of the request.
    pub client_order_id: Option<ClientOrderId>,
    /// The answer's `status`.
    pub status: u16,
    /// The `error.code`, if an error.
    pub code: Option<i64>,
    /// The verdict by the REST rules, holds and halts applied; `Err(BadHeader)`
    /// names a `rateLimits` entry or `retryAfter` that could not be read, with the
    /// verdict it left standing.
    pub verdict: Result<Verdict, Error>,
}

/// An `executionReport` of the user data stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The `subscriptionId` it came on.
    pub subscription_id: u64,
    /// `c`: the client order id of the order (of the cancel, for a cancel).
    pub client_order_id: ClientOrderId,
    /// `C`: the cancelled order's client order id (`None` when empty).
    pub orig_client_order_id: Option<ClientOrderId>,
    /// `X`: the order's state.
    pub state: OrderState,
    /// `z`: the cumulative filled quantity, as the venue wrote it.
    pub filled: ArrayString<40>,
    /// `i`: the venue's order id.
    pub venue_order_id: ArrayString<64>,
}

/// One frame from the venue, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Incoming {
    /// The answer to a request in flight (its slot is free again).
    Answer(Answer),
    /// An order update of the user data stream.
    Execution(Execution),
    /// Another user data stream event (`outboundAccountPosition`,
    /// `eventStreamTerminated` ...), of this subscription.
    OtherEvent(u64),
    /// The venue revoked the connection's `session.logon` (an error with `"id":
    /// null`, -2015, when the key became invalid: "Session Authentication",
    /// "Regarding API key revocation"): the session is no longer logged on and
    /// orders over it would be refused; the code is the venue's.
    Revoked(i64),
}

pub use crate::inflight::Fate;

mod read;
pub use read::{as_response, read_order, read_placed};

/// A Binance WebSocket API session: see the module doc for the drive order. Spot's
/// by default; USD-M futures' is [`crate::binance_futures_ws::Session`].
#[derive(Clone, Debug)]
pub struct Session<V: WsVenue = BinanceSpot> {
    adapter: V,
    api_key: Option<ApiKey>,
    key: Option<SignKey>,
    recv_window_ms: i64,
    slots: Table<()>,
    /// The connection is logged on (`session.logon` answered): signed calls go
    /// without `apiKey` and `signature`.
    logged_on: bool,
    /// Which limits the adapter holds, for the parts a template keeps
    /// ([`template::limits_id`]): new with the session and with every
    /// [`Session::adapter_mut`].
    limits_id: u64,
    /// The order templates of [`Session::prepare_rest_order`].
    templates: from_rest::Templates,
}

/// A parameter value: text (already checked: no character to escape) or a number.
#[derive(Clone, Copy)]
enum Val<'a> {
    Str(&'a str),
    Int(i64),
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Buy => "BUY",
        Side::Sell => "SELL",
    }
}

/// The parameters of new order `o` as venue `V` names them.
fn order_params<'a, V: WsVenue>(
    p: &mut ArrayVec<(&'static str, Val<'a>), MAX_PARAMS>,
    o: &'a NewOrder<'a>,
) -> Result<(), Error> {
    if o.reduce_only && !V::REDUCE_ONLY {
        return Err(Error::BadArgument("reduce_only (Spot has no positions)"));
    }
    p.push(("symbol", Val::Str(o.symbol.as_str())));
    p.push(("side", Val::Str(side(o.side))));
    match o.order_type {
        OrderType::Limit(tif) => {
            p.push(("type", Val::Str("LIMIT")));
            let tif = match tif {
                TimeInForce::Gtc => "GTC",
                TimeInForce::Ioc => "IOC",
                TimeInForce::Fok => "FOK",
            };
            p.push(("timeInForce", Val::Str(tif)));
        }
        OrderType::PostOnly => {
            let (kind, tif) = V::POST_ONLY;
            p.push(("type", Val::Str(kind)));
            if let Some(tif) = tif {
                p.push(("timeInForce", Val::Str(tif)));
            }
        }
        OrderType::Market => p.push(("type", Val::Str("MARKET"))),
    }
    p.push(("quantity", Val::Str(o.quantity.as_str())));
    match (o.order_type, o.price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return Err(Error::BadArgument("price of a market order")),
        (_, Some(px)) => p.push(("price", Val::Str(px.as_str()))),
        (_, None) => return Err(Error::BadArgument("price of a limit order")),
    }
    p.push(("newClientOrderId", Val::Str(o.client_order_id.as_str())));
    if o.reduce_only {
        p.push(("reduceOnly", Val::Str("true")));
    }
    Ok(())
}

fn put_val(out: &mut Vec<u8>, v: Val<'_>, quoted: bool) {
    match v {
        Val::Str(s) if quoted => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        Val::Str(s) => out.extend_from_slice(s.as_bytes()),
        // Writing a number into a Vec cannot fail.
        Val::Int(n) => {
            let _ = write!(out, "{n}");
        }
    }
}

/// The signature payload of `params` (sorted by name): `name=value` joined by `&`.
fn payload(out: &mut Vec<u8>, params: &[(&'static str, Val<'_>)]) {
    for (i, (name, v)) in params.iter().enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        put_val(out, *v, false);
    }
}

fn hex(out: &mut Vec<u8>, mac: &[u8; 32]) {
    let mut text = [0u8; 64];
    hex_into(mac, &mut text);
    out.extend_from_slice(&text);
}

/// Lower-case hex of a MAC into `out`.
fn hex_into(mac: &[u8; 32], out: &mut [u8; 64]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (o, b) in out.chunks_exact_mut(2).zip(mac) {
        o[0] = HEX[usize::from(b >> 4)];
        o[1] = HEX[usize::from(b & 15)];
    }
}

/// The HMAC-SHA256 of `params`' signature payload (every parameter but
/// `signature`, sorted by name, as "SIGNED request example (HMAC)" builds it),
/// written as lowercase hex into `out` (cleared first). `params` need not be
/// sorted; a name may appear once; more than 16 are refused (`out` left empty).
///
/// ```
/// use ergon_venues::binance_spot_ws::signature;
/// use ergon_venues::endpoint::HmacKey;
/// let key = HmacKey::new(b"secret");
/// let mut out = Vec::new();
/// signature(&key, &[("b", "2"), ("a", "1")], &mut out).unwrap();
/// let mut again = Vec::new();
/// signature(&key, &[("a", "1"), ("b", "2")], &mut again).unwrap();
/// assert_eq!(out, again);
/// assert_eq!(out.len(), 64);
/// ```
pub fn signature(
    key: &HmacKey,
    params: &[(&'static str, &str)],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    out.clear();
    if params.len() > MAX_PARAMS {
        return Err(Error::BadArgument("more than 16 params"));
    }
    let mut p: ArrayVec<(&'static str, Val<'_>), MAX_PARAMS> =
        params.iter().map(|(n, v)| (*n, Val::Str(v))).collect();
    p.sort_unstable_by_key(|(n, _)| *n);
    out.clear();
    payload(out, &p);
    let mac = key.sign(&[out.as_slice()]);
    out.clear();
    hex(out, &mac);
    Ok(())
}

/// The `signature` parameter of a signature payload (the sorted `name=value`
/// pairs, see [`signature`]) as the WebSocket API takes it for `key`: the
/// HMAC-SHA256 in lower-case hex ("SIGNED request example (HMAC)"), or the
/// Ed25519 signature in base64 ("SIGNED request example (Ed25519)"; JSON carries
/// it as it is, not URL-encoded).
///
/// ```
/// use ergon_venues::binance_spot_ws::signature_text;
/// use ergon_venues::endpoint::{Ed25519Key, SignKey};
/// let key = SignKey::Ed25519(Ed25519Key::from_seed(&[1; 32]));
/// assert_eq!(signature_text(&key, b"apiKey=k&timestamp=1").len(), 88);
/// ```
pub fn signature_text(key: &SignKey, payload: &[u8]) -> ArrayString<88> {
    use base64::Engine;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = ArrayString::new();
    match key {
        SignKey::Hmac(k) => {
            for b in k.sign(&[payload]) {
                s.push(char::from(HEX[usize::from(b >> 4)]));
                s.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        SignKey::Ed25519(k) => {
            let mut b64 = [0u8; 88];
            let engine = base64::engine::general_purpose::STANDARD;
            let n = engine.encode_slice(k.sign(payload), &mut b64).unwrap_or(0);
            // base64 is ASCII.
            s.push_str(core::str::from_utf8(&b64[..n]).unwrap_or(""));
        }
    }
    s
}

/// Whether the answer to [`Call::Logon`] says the connection is logged on: a
/// 200 whose `result.apiKey` is `api_key`. `Err` carries the answer's error code
/// (0 if it has none or is not an answer).
pub fn read_logon(frame: &[u8], api_key: &str) -> Result<(), i64> {
    let v = crate::json::parse(frame).map_err(|_| 0)?;
    let code = v
        .path("error.code")
        .ok()
        .flatten()
        .and_then(|c| c.as_i64().ok());
    if let Some(c) = code {
        return Err(c);
    }
    let ok = v.get("status").ok().flatten().and_then(|s| s.as_u64().ok()) == Some(200)
        && v.path("result.apiKey")
            .ok()
            .flatten()
            .and_then(|k| k.str_eq(api_key).ok())
            == Some(true);
    if ok {
        Ok(())
    } else {
        Err(0)
    }
}

impl<V: WsVenue> Session<V> {
    /// A session over `adapter` (its limits, its clock, its reading of answers),
    /// signing with `api_key`/`secret` (or none: signed calls are then refused with
    /// [`Error::NoKey`]), at most `capacity` requests in flight (at least 1).
    pub fn new(
        adapter: V,
        credentials: Option<(&str, &[u8])>,
        recv_window_ms: i64,
        capacity: usize,
    ) -> Result<Self, Error> {
        if !(1..=60_000).contains(&recv_window_ms) {
            return Err(Error::BadArgument("recvWindow (1..=60000 ms)"));
        }
        if capacity == 0 {
            return Err(Error::BadArgument("capacity (at least 1)"));
        }
        let (api_key, key) = match credentials {
            Some((k, s)) => (Some(ApiKey::new(k)?), Some(SignKey::Hmac(HmacKey::new(s)))),
            None => (None, None),
        };
        Ok(Session {
            adapter,
            api_key,
            key,
            recv_window_ms,
            slots: Table::new(capacity),
            logged_on: false,
            limits_id: template::limits_id(),
            templates: from_rest::Templates::default(),
        })
    }

    /// A session over `adapter` signing with the adapter's own key and receive
    /// window (the REST adapter's `with_auth`), at most `capacity` requests in
    /// flight (at least 1).
    pub fn over(adapter: V, capacity: usize) -> Result<Self, Error> {
        let (api_key, key, recv_window_ms) = adapter.credentials();
        if capacity == 0 {
            return Err(Error::BadArgument("capacity (at least 1)"));
        }
        Ok(Session {
            adapter,
            api_key,
            key,
            recv_window_ms,
            slots: Table::new(capacity),
            logged_on: false,
            limits_id: template::limits_id(),
            templates: from_rest::Templates::default(),
        })
    }

    /// Whether the session's key is an Ed25519 key (what `session.logon` takes).
    pub fn can_log_on(&self) -> bool {
        self.api_key.is_some() && self.key.as_ref().is_some_and(SignKey::is_ed25519)
    }

    /// The API key, if any.
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_ref().map(ApiKey::as_str)
    }

    /// Whether signed calls go without `apiKey` and `signature`.
    pub fn logged_on(&self) -> bool {
        self.logged_on
    }

    /// Says whether the connection is logged on: true once the answer to
    /// [`Call::Logon`] said so ([`read_logon`]); [`Session::on_disconnect`] and a
    /// revocation ([`Incoming::Revoked`]) make it false again.
    pub fn set_logged_on(&mut self, on: bool) {
        self.logged_on = on;
    }

    /// A session with the default receive window (5000 ms).
    pub fn with_defaults(
        adapter: V,
        credentials: Option<(&str, &[u8])>,
        capacity: usize,
    ) -> Result<Self, Error> {
        Session::new(adapter, credentials, DEFAULT_RECV_WINDOW_MS, capacity)
    }

    /// The adapter (its limits and clock).
    pub fn adapter(&self) -> &V {
        &self.adapter
    }

    /// The adapter, to read an answer that is not a frame (a refused upgrade).
    pub fn adapter_mut(&mut self) -> &mut V {
        self.limits_id = template::limits_id();
        &mut self.adapter
    }

    /// How many requests are in the table (prepared or written, without an answer).
    pub fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    /// Writes the frame of `call` into `out` (cleared first; it keeps its capacity,
    /// so once it has held the largest request this allocates nothing), signed with
    /// the venue's UTC of `now`, and reserves its slot. On `Err`, `out` is empty and
    /// nothing is reserved.
    pub fn prepare(
        &mut self,
        call: &Call<'_>,
        out: &mut Vec<u8>,
        now: i64,
    ) -> Result<Pending, PrepareError> {
        out.clear();
        let Some(id) = self.slots.next() else {
            return Err(PrepareError::Full);
        };
        let r = self.write(call, id, out, now);
        let (kind, deadline_ns, client_order_id) = match r {
            Ok(x) => x,
            Err(e) => {
                out.clear();
                return Err(PrepareError::Bad(e));
            }
        };
        let parts = match self.adapter.parts(kind) {
            Ok(p) => p,
            Err(e) => {
                out.clear();
                return Err(PrepareError::Bad(e));
            }
        };
        self.slots
            .reserve(Slot::prepared(id, kind, deadline_ns, client_order_id, ()));
        Ok(Pending {
            id,
            kind,
            parts,
            deadline_ns,
            client_order_id,
        })
    }

    #[allow(clippy::type_complexity)] // the three things a frame fixes
    fn write(
        &self,
        call: &Call<'_>,
        id: u64,
        out: &mut Vec<u8>,
        now: i64,
    ) -> Result<(Request<'static>, i64, Option<ClientOrderId>), Error> {
        // A method the venue does not serve is refused before its arguments.
        let kind = V::call_kind(call)?;
        let mut p: ArrayVec<(&'static str, Val<'_>), MAX_PARAMS> = ArrayVec::new();
        let mut cid = None;
        match call {
            Call::Time
            | Call::Account
            | Call::Subscribe
            | Call::Unsubscribe(None)
            | Call::Logon
            | Call::SessionStatus
            | Call::Logout => {}
            Call::ExchangeInfo(s) | Call::OpenOrders(s) => {
                if let Some(s) = s {
                    p.push(("symbol", Val::Str(s.as_str())));
                }
            }
            Call::Place(o) => {
                order_params::<V>(&mut p, o)?;
                cid = Some(o.client_order_id);
            }
            Call::Cancel(o) | Call::Status(o) => {
                p.push(("symbol", Val::Str(o.symbol.as_str())));
                p.push(("origClientOrderId", Val::Str(o.client_order_id.as_str())));
                cid = Some(o.client_order_id);
            }
            Call::CancelReplace { cancel, new } => {
                order_params::<V>(&mut p, new)?;
                let mode = self.adapter.replace_mode().ok_or(Error::Unsupported)?;
                p.push(("cancelReplaceMode", Val::Str(mode)));
                p.push(("cancelOrigClientOrderId", Val::Str(cancel.as_str())));
                cid = Some(new.client_order_id);
            }
            Call::Modify(a) => {
                let (Some(price), Some(quantity)) = (a.price, a.quantity) else {
                    return Err(Error::BadArgument("modify needs both price and quantity"));
                };
                p.push(("symbol", Val::Str(a.order.symbol.as_str())));
                p.push(("side", Val::Str(side(a.side))));
                p.push(("quantity", Val::Str(quantity.as_str())));
                p.push(("price", Val::Str(price.as_str())));
                p.push((
                    "origClientOrderId",
                    Val::Str(a.order.client_order_id.as_str()),
                ));
                cid = Some(a.order.client_order_id);
            }
            Call::Unsubscribe(Some(n)) => {
                let n = i64::try_from(*n).map_err(|_| Error::BadArgument("subscriptionId"))?;
                p.push(("subscriptionId", Val::Int(n)));
            }
        }
        if matches!(call, Call::Account) {
            p.push(("omitZeroBalances", Val::Str("true")));
        }
        let clock = &self.adapter.limits().clock;
        let mut sig = None;
        // Logged on, the user data stream needs no signature.
        let unsigned_subscribe = self.logged_on && matches!(call, Call::Subscribe);
        let deadline = if call.signed() && !unsigned_subscribe {
            let (Some(api_key), Some(key)) = (&self.api_key, &self.key) else {
                return Err(Error::NoKey);
            };
            if matches!(call, Call::Logon) && !key.is_ed25519() {
                return Err(Error::BadArgument(
                    "session.logon takes only an Ed25519 key",
                ));
            }
            let ts = clock.utc_ms(now);
            let sign = !self.logged_on || matches!(call, Call::Logon);
            if sign {
                p.push(("apiKey", Val::Str(api_key.as_str())));
            }
            p.push(("recvWindow", Val::Int(self.recv_window_ms)));
            p.push(("timestamp", Val::Int(ts)));
            p.sort_unstable_by_key(|(n, _)| *n);
            if sign {
                payload(out, &p);
                sig = Some(signature_text(key, out));
                out.clear();
            }
            clock.now_ns_at(ts.saturating_add(self.recv_window_ms))
        } else {
            p.sort_unstable_by_key(|(n, _)| *n);
            now.saturating_add(self.recv_window_ms.saturating_mul(MS))
        };
        out.extend_from_slice(b"{\"id\":");
        // Writing a number into a Vec cannot fail.
        let _ = write!(out, "{id}");
        out.extend_from_slice(b",\"method\":\"");
        out.extend_from_slice(if unsigned_subscribe {
            b"userDataStream.subscribe"
        } else {
            call.method().as_bytes()
        });
        out.push(b'"');
        if !p.is_empty() {
            out.extend_from_slice(b",\"params\":{");
            for (i, (name, v)) in p.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\":");
                put_val(out, *v, true);
            }
            if let Some(sig) = sig {
                out.extend_from_slice(b",\"signature\":\"");
                out.extend_from_slice(sig.as_bytes());
                out.push(b'"');
            }
            out.push(b'}');
        }
        out.push(b'}');
        Ok((kind, deadline, cid))
    }

    /// Writes the WebSocket API twin of a request the REST adapter prepared (the
    /// same parameters, `timestamp` and `recvWindow`, so the same deadline; the
    /// REST `signature` dropped, `apiKey` added and the whole signed again as the
    /// WebSocket API signs) into `out`, and reserves its slot. The parts, kind,
    /// deadline and client order id are the prepared request's. Twins:
    /// `POST /api/v3/order` → `order.place`, `DELETE /api/v3/order` →
    /// `order.cancel`, `POST /api/v3/order/cancelReplace` → `order.cancelReplace`,
    /// `GET /api/v3/order` → `order.status`, `GET /api/v3/openOrders` →
    /// `openOrders.status`, `GET /api/v3/account` → `account.status`,
    /// `GET /api/v3/time` → `time`; any other request is refused with
    /// [`Error::BadArgument`] (send it over REST). On `Err`, `out` is empty and
    /// nothing is reserved.
    pub fn prepare_rest(
        &mut self,
        p: &Prepared,
        out: &mut Vec<u8>,
    ) -> Result<Pending, PrepareError> {
        out.clear();
        let Some(id) = self.slots.next() else {
            return Err(PrepareError::Full);
        };
        let bad = |what| PrepareError::Bad(Error::BadArgument(what));
        let (Some(kind), Some(m)) = (p.kind(), p.method()) else {
            return Err(bad("an empty request"));
        };
        let (path, query) = p.target().split_once('?').unwrap_or((p.target(), ""));
        let method = V::rest_twin(m, path).ok_or(bad("a request without a WebSocket API twin"))?;
        let api_key = self.api_key;
        let mut params: ArrayVec<(&str, &str), MAX_PARAMS> = ArrayVec::new();
        let mut signed = false;
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (name, value) = kv.split_once('=').unwrap_or((kv, ""));
            if name == "signature" {
                continue;
            }
            signed |= name == "timestamp";
            let ok = name.bytes().all(|c| c.is_ascii_alphanumeric())
                && !value.bytes().any(|c| c == b'"' || c == b'\\' || c < b' ');
            if !ok || params.try_push((name, value)).is_err() {
                return Err(bad("a parameter the WebSocket API cannot carry"));
            }
        }
        // Logged on, the connection's key signs for every request.
        let sign = signed && !self.logged_on;
        if sign {
            let Some(k) = &api_key else {
                return Err(PrepareError::Bad(Error::NoKey));
            };
            if params.try_push(("apiKey", k.as_str())).is_err() {
                return Err(bad("more than 16 params"));
            }
        }
        params.sort_unstable_by_key(|(n, _)| *n);
        let sig = match (&self.key, sign) {
            (Some(key), true) => {
                for (i, (name, value)) in params.iter().enumerate() {
                    if i > 0 {
                        out.push(b'&');
                    }
                    out.extend_from_slice(name.as_bytes());
                    out.push(b'=');
                    out.extend_from_slice(value.as_bytes());
                }
                let sig = signature_text(key, out);
                out.clear();
                Some(sig)
            }
            (None, true) => return Err(PrepareError::Bad(Error::NoKey)),
            _ => None,
        };
        out.extend_from_slice(b"{\"id\":");
        let _ = write!(out, "{id}");
        out.extend_from_slice(b",\"method\":\"");
        out.extend_from_slice(method.as_bytes());
        out.push(b'"');
        if !params.is_empty() {
            out.extend_from_slice(b",\"params\":{");
            for (i, (name, value)) in params.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\":");
                let number = matches!(*name, "timestamp" | "recvWindow")
                    && !value.is_empty()
                    && value.bytes().all(|c| c.is_ascii_digit());
                put_val(out, Val::Str(value), !number);
            }
            if let Some(sig) = sig {
                out.extend_from_slice(b",\"signature\":\"");
                out.extend_from_slice(sig.as_bytes());
                out.push(b'"');
            }
            out.push(b'}');
        }
        out.push(b'}');
        let client_order_id = p.client_order_id().copied();
        self.slots.reserve(Slot::prepared(
            id,
            kind,
            p.deadline_ns(),
            client_order_id,
            (),
        ));
        Ok(Pending {
            id,
            kind,
            parts: p.parts().iter().copied().collect(),
            deadline_ns: p.deadline_ns(),
            client_order_id,
        })
    }

    /// Re-anchors the venue clock the session reads `retryAfter` and stamps its
    /// own calls with.
    pub fn set_clock(&mut self, clock: crate::adapt::Clock) {
        self.adapter.limits_mut().clock = clock;
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
    /// it. [`Fate::Unknown`]: complete its `Flight` and reconcile by client order id
    /// (`order.status` on the next connection, or REST); never re-send it.
    /// [`Fate::NotWritten`]: refund its `Ticket` (`Budget::refund`), the venue never
    /// saw it.
    pub fn on_disconnect(&mut self) -> impl Iterator<Item = Fate> + '_ {
        self.logged_on = false;
        self.slots.drain()
    }
}
