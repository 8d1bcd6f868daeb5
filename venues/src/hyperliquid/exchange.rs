//! The exchange and info endpoints of one account: actions written, signed by the
//! caller's [`Signer`], and the readers of their answers.

use super::{Hyperliquid, MS};
use crate::adapt::{Clock, Error, Parts, Request, Venue};
use crate::endpoint::{
    self, Amend, ClientIds, ClientOrderId, Endpoints, IdFormat, Lookup, Method, NewOrder,
    OrderInfo, OrderRef, OrderState, OrderType, Placed, Prepared, Side, Symbol, TimeInForce,
    Writer,
};
use crate::json::{self, Value};
use crate::response::Response;
use ergon_core::{Budget, Verdict};
/// An ECDSA signature over an action, as the exchange endpoint takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// `r`.
    pub r: [u8; 32],
    /// `s`.
    pub s: [u8; 32],
    /// `v` (27 or 28).
    pub v: u8,
}

/// What an exchange request asks for, as the signer sees it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Action<'a> {
    /// `order`: new orders (the asset index of each is in the JSON).
    Order(&'a [NewOrder<'a>]),
    /// `cancelByCloid`.
    Cancel(&'a OrderRef<'a>),
    /// `modify` by client order id.
    Modify(&'a Amend<'a>),
    /// `noop`: marks the nonce used.
    Noop,
    /// `scheduleCancel`: the dead man's switch, armed to fire at `time` (UTC ms),
    /// or disarmed (`None`: the action carries no `time`).
    ScheduleCancel(Option<u64>),
    /// `reserveRequestWeight`: buys this many address requests.
    ReserveRequestWeight(u64),
}

/// Signs Hyperliquid actions. Hyperliquid signs the msgpack of the action with the
/// nonce, the vault and `expiresAfter` (an EIP-712 "phantom agent");
/// `action_json` is the action exactly as it is sent, for signers that hash from
/// it, and `action` the same in typed form. [`sign::Wallet`](super::sign::Wallet)
/// is the built-in one (a private key, k256); a caller may bring its own (a
/// hardware or remote signer).
pub trait Signer {
    /// The account's address (`0x` and 40 hex digits), for info requests.
    fn address(&self) -> &str;

    /// The vault or sub-account traded for (`0x` and 40 hex digits), written as
    /// the request's `vaultAddress`; `None` (the default): the account itself.
    fn vault_address(&self) -> Option<&str> {
        None
    }

    /// Signs one action.
    fn sign(
        &mut self,
        action: Action<'_>,
        action_json: &[u8],
        nonce_ms: u64,
        expires_after_ms: u64,
    ) -> Result<Signature, Error>;
}

/// The exchange and info endpoints of one Hyperliquid account: the adapter, the
/// caller's signer, the asset table (name to index, from `meta`, loaded at start)
/// and the last nonce used.
#[derive(Clone, Debug)]
pub struct Exchange<S> {
    /// The adapter (budget buckets, answers).
    pub venue: Hyperliquid,
    signer: S,
    assets: Vec<(arrayvec::ArrayString<16>, u32)>,
    last_nonce: u64,
    /// This process's nonces are `lane` modulo `lanes` (see
    /// [`Exchange::nonce_lane`]).
    lane: (u64, u64),
    expiry_ms: i64,
    /// The last `scheduleCancel` written: `Some(Some(time))` an arm, `Some(None)`
    /// a disarm. Its answer does not say which, so the reader answers for it.
    pub(super) switch_written: Option<Option<u64>>,
}

impl<S: Signer> Exchange<S> {
    /// The endpoints of `venue` signed by `signer`; `assets` names each asset's
    /// index (`meta.universe` order: `("BTC", 0)`, `("ETH", 1)` ...); an action
    /// expires `expiry_ms` after its nonce (`expiresAfter`).
    pub fn new(
        venue: Hyperliquid,
        signer: S,
        assets: &[(&str, u32)],
        expiry_ms: i64,
    ) -> Result<Self, Error> {
        if !(1..=86_400_000).contains(&expiry_ms) {
            return Err(Error::BadArgument("expiresAfter window (1 ms to 1 day)"));
        }
        let assets = assets
            .iter()
            .map(|(n, i)| {
                arrayvec::ArrayString::from(n)
                    .map(|n| (n, *i))
                    .map_err(|_| Error::BadArgument("asset name"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Exchange {
            venue,
            signer,
            assets,
            last_nonce: 0,
            lane: (0, 1),
            expiry_ms,
            switch_written: None,
        })
    }

    /// Re-anchors the venue clock: every nonce and `expiresAfter` written from
    /// now on, and their deadlines.
    pub fn set_clock(&mut self, clock: Clock) {
        self.venue.clock = clock;
    }

    /// The signer.
    pub fn signer(&self) -> &S {
        &self.signer
    }

    /// The signer.
    pub fn signer_mut(&mut self) -> &mut S {
        &mut self.signer
    }

    fn asset(&self, s: &Symbol<'_>) -> Result<u32, Error> {
        self.assets
            .iter()
            .find(|(n, _)| n.as_str() == s.as_str())
            .map(|(_, i)| *i)
            .ok_or(Error::BadArgument("asset not in the table"))
    }

    /// Shares one signer between `lanes` processes: this one takes the nonces
    /// equal to `lane` modulo `lanes`, so two processes signing with one key (the
    /// venue keeps nonces per signer) can never write the same nonce, with no
    /// shared state between them. One process (the default, `0` of `1`) takes
    /// every nonce. The venue's own advice is one API wallet per process; lanes
    /// are for when that cannot be. Each process still keeps to the venue's
    /// window (a nonce within 2 days before and 1 day after its time, above the
    /// least of the 100 highest used): nonces follow the clock, so lanes cost a
    /// process at most `lanes - 1` ms of lead.
    pub fn nonce_lane(mut self, lane: u16, lanes: u16) -> Result<Self, Error> {
        if lanes == 0 || lane >= lanes {
            return Err(Error::BadArgument("nonce lane (lane < lanes)"));
        }
        self.lane = (u64::from(lane), u64::from(lanes));
        Ok(self)
    }

    /// The next nonce: now in UTC ms, or one more than the last if that is later
    /// (nonces must be unique and are best increasing), rounded up into this
    /// process's lane.
    pub(super) fn nonce(&mut self, now: i64) -> u64 {
        let ms = u64::try_from(self.venue.clock.utc_ms(now)).unwrap_or(0);
        let next = ms.max(self.last_nonce.saturating_add(1));
        let (lane, lanes) = self.lane;
        let up = (lane + lanes - next % lanes) % lanes;
        self.last_nonce = next.saturating_add(up);
        self.last_nonce
    }

    /// Ends an exchange request whose action JSON is in the body from `action_at`:
    /// signs it and closes `{"action":..,"nonce":..,"signature":..,"expiresAfter":..}`.
    fn exchange<'p>(
        &mut self,
        w: Writer<'p>,
        action_at: usize,
        action: Action<'_>,
        kind: Request<'static>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let nonce = self.nonce(now);
        self.signed_exchange(w, action_at, action, kind, nonce, None)
    }

    /// [`Exchange::exchange`] with its nonce taken already (an action that names
    /// a time after it), charging `parts` instead of the kind's where given.
    pub(super) fn signed_exchange<'p>(
        &mut self,
        mut w: Writer<'p>,
        action_at: usize,
        action: Action<'_>,
        kind: Request<'static>,
        nonce: u64,
        parts: Option<Parts>,
    ) -> Result<&'p Prepared, Error> {
        let end = w.pos();
        let expires = nonce.saturating_add(self.expiry_ms.unsigned_abs());
        let sig = self
            .signer
            .sign(action, w.bytes(action_at..end), nonce, expires)?;
        w.s(",\"nonce\":");
        w.int(i64::try_from(nonce).unwrap_or(i64::MAX));
        w.s(",\"signature\":{\"r\":\"0x");
        w.hex(&sig.r);
        w.s("\",\"s\":\"0x");
        w.hex(&sig.s);
        w.s("\",\"v\":");
        w.int(i64::from(sig.v));
        w.s("}");
        if let Some(vault) = self.signer.vault_address() {
            w.s(",\"vaultAddress\":\"");
            w.s(vault);
            w.s("\"");
        }
        w.s(",\"expiresAfter\":");
        let expires = i64::try_from(expires).unwrap_or(i64::MAX);
        w.int(expires);
        w.s("}");
        w.close_body();
        w.header("Content-Type", b"application/json")?;
        let deadline = self.venue.clock.now_ns_at(expires);
        match parts {
            Some(parts) => w.finish_with(parts, kind, Method::Post, deadline),
            None => w.finish(&self.venue, kind, Method::Post, deadline),
        }
    }

    /// Starts an exchange request: the target and `{"action":`.
    pub(super) fn start_exchange(w: &mut Writer<'_>) -> usize {
        w.open();
        w.s("/exchange");
        w.close_target();
        w.open();
        w.s("{\"action\":");
        w.pos()
    }

    /// An info request `{"type":TYPE,...}` whose fields after the type `fields` writes.
    fn info<'p>(
        &self,
        mut w: Writer<'p>,
        kind: &'static str,
        now: i64,
        fields: impl FnOnce(&mut Writer<'_>, &str),
    ) -> Result<&'p Prepared, Error> {
        w.open();
        w.s("/info");
        w.close_target();
        w.open();
        w.s("{\"type\":\"");
        w.s(kind);
        w.s("\"");
        fields(&mut w, self.signer.address());
        w.s("}");
        w.close_body();
        w.header("Content-Type", b"application/json")?;
        let deadline = now.saturating_add(self.expiry_ms.saturating_mul(MS));
        w.finish(&self.venue, Request::Info(kind), Method::Post, deadline)
    }

    /// `userRateLimit` of the account: info weight 20. Its answer, read by the
    /// adapter, is the address budget's server figure ([`super::Address`]).
    pub fn user_rate_limit<'p>(
        &mut self,
        out: &'p mut Prepared,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.info(w, "userRateLimit", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\"");
        })
    }

    /// A `noop` action: uses a nonce and does nothing else. Hyperliquid keeps the
    /// highest nonces of each address and refuses a nonce at or below the least
    /// of them once they are full, so a noop with a later nonce settles an
    /// in-flight action whose answer was lost: it may still land only if its nonce
    /// is among the kept ones; after its `expiresAfter` it never lands. Weight 1.
    pub fn noop<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"noop\"}");
        self.exchange(w, at, Action::Noop, Request::Cancel, now)
    }
}

impl<S: Signer> Exchange<S> {
    /// A `reserveRequestWeight` action: buys `weight` address requests at
    /// 0.0005 USDC each, paid from the account
    /// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint#reserve-additional-actions>).
    /// Weight 1 on the IP; not counted in, nor held by, the address budget it
    /// buys (an exhausted address can still buy its way back).
    pub fn reserve_request_weight<'p>(
        &mut self,
        out: &'p mut Prepared,
        weight: u64,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let weight = i64::try_from(weight).map_err(|_| Error::BadArgument("weight"))?;
        let mut w = Writer::start(out);
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"reserveRequestWeight\",\"weight\":");
        w.int(weight);
        w.s("}");
        let nonce = self.nonce(now);
        let parts = self.venue.weight_parts(1, false);
        self.signed_exchange(
            w,
            at,
            Action::ReserveRequestWeight(weight.unsigned_abs()),
            Request::Read(1),
            nonce,
            Some(parts),
        )
    }
}

/// One order's wire object: `a` asset, `b` buy, `p` price, `s` size, `r` reduce
/// only, `t` type, `c` client order id.
fn order_wire(w: &mut Writer<'_>, asset: u32, o: &NewOrder<'_>) -> Result<(), Error> {
    let cloid = hl_cloid(&o.client_order_id)?;
    let tif = match o.order_type {
        OrderType::Limit(TimeInForce::Gtc) => "Gtc",
        OrderType::Limit(TimeInForce::Ioc) | OrderType::Market => "Ioc",
        OrderType::Limit(TimeInForce::Fok) => {
            return Err(Error::BadArgument("Hyperliquid has no FOK"))
        }
        OrderType::PostOnly => "Alo",
    };
    // A market order is an IOC limit at the caller's worst price.
    let price = o.price.ok_or(Error::BadArgument(
        "Hyperliquid orders need a price (IOC at the worst price for a market order)",
    ))?;
    w.s("{\"a\":");
    w.int(i64::from(asset));
    w.s(if o.side == Side::Buy {
        ",\"b\":true"
    } else {
        ",\"b\":false"
    });
    w.s(",\"p\":\"");
    w.s(price.as_str());
    w.s("\",\"s\":\"");
    w.s(o.quantity.as_str());
    w.s(if o.reduce_only {
        "\",\"r\":true"
    } else {
        "\",\"r\":false"
    });
    w.s(",\"t\":{\"limit\":{\"tif\":\"");
    w.s(tif);
    w.s("\"}},\"c\":\"");
    w.s(cloid);
    w.s("\"}");
    w.id(o.client_order_id)
}

/// Hyperliquid's `cloid`: `0x` and 32 hex digits (128 bits).
fn hl_cloid(id: &ClientOrderId) -> Result<&str, Error> {
    let s = id.as_str();
    let ok = s.len() == 34 && s.starts_with("0x") && s[2..].bytes().all(|c| c.is_ascii_hexdigit());
    if ok {
        Ok(s)
    } else {
        Err(Error::BadArgument(
            "Hyperliquid cloid: 0x and 32 hex digits",
        ))
    }
}

/// An order's `status` word as a state.
fn hl_state(word: &str) -> OrderState {
    match word {
        "open" | "triggered" => OrderState::New,
        "filled" => OrderState::Filled,
        "rejected" => OrderState::Rejected,
        w if w.ends_with("Rejected") => OrderState::Rejected,
        w if w == "canceled" || w.ends_with("Canceled") => OrderState::Canceled,
        _ => OrderState::Other,
    }
}

impl<S: Signer> Venue for Exchange<S> {
    fn parts(&self, request: Request<'_>) -> Result<Parts, Error> {
        self.venue.parts(request)
    }

    fn on_response(
        &mut self,
        request: Request<'_>,
        r: &Response<'_>,
        budget: &mut Budget,
        now: i64,
    ) -> Result<Verdict, Error> {
        self.venue.on_response(request, r, budget, now)
    }

    fn batch_items(&self) -> &[Verdict] {
        self.venue.batch_items()
    }
}

impl<S: Signer> ClientIds for Exchange<S> {
    /// `cloid`: a 128-bit hex string, `0x` and 32 hex digits
    /// (<https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint>,
    /// "Place an order").
    const ID_FORMAT: IdFormat = IdFormat::Cloid;
}

impl<S: Signer> Endpoints for Exchange<S> {
    /// An `order` action of one order: weight 1 and one address action.
    fn new_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &NewOrder<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        self.batch_orders(out, core::slice::from_ref(o), now)
    }

    /// `cancelByCloid`: weight 1 and one address action.
    fn cancel<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let asset = self.asset(&o.symbol)?;
        let cloid = hl_cloid(&o.client_order_id)?;
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"cancelByCloid\",\"cancels\":[{\"asset\":");
        w.int(i64::from(asset));
        w.s(",\"cloid\":\"");
        w.s(cloid);
        w.s("\"}]}");
        w.id(o.client_order_id)?;
        self.exchange(w, at, Action::Cancel(o), Request::Cancel, now)
    }

    /// `modify` by cloid (a whole GTC limit order: side, price and size are all
    /// required): weight 1 and one address action.
    fn amend<'p>(
        &mut self,
        out: &'p mut Prepared,
        a: &Amend<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(a.order.symbol);
        let (Some(price), Some(quantity)) = (a.price, a.quantity) else {
            return Err(Error::BadArgument("modify needs both price and quantity"));
        };
        let asset = self.asset(&a.order.symbol)?;
        let order = NewOrder {
            symbol: a.order.symbol,
            side: a.side,
            order_type: OrderType::Limit(TimeInForce::Gtc),
            price: Some(price),
            quantity,
            client_order_id: a.order.client_order_id,
            reduce_only: false,
        };
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"modify\",\"oid\":\"");
        w.s(hl_cloid(&a.order.client_order_id)?);
        w.s("\",\"order\":");
        order_wire(&mut w, asset, &order)?;
        w.s("}");
        self.exchange(w, at, Action::Modify(a), Request::CancelReplace, now)
    }

    /// `orderStatus` by cloid: info weight 2.
    fn query_order<'p>(
        &mut self,
        out: &'p mut Prepared,
        o: &OrderRef<'_>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(o.symbol);
        let cloid = hl_cloid(&o.client_order_id)?;
        w.id(o.client_order_id)?;
        self.info(w, "orderStatus", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\",\"oid\":\"");
            w.s(cloid);
            w.s("\"");
        })
    }

    /// `openOrders` (every asset: Hyperliquid has no per-asset form): info weight 20.
    fn open_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Option<Symbol<'_>>,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        self.info(w, "openOrders", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\"");
        })
    }

    /// `l2Book` of a coin (20 levels a side, the only depth): info weight 2.
    fn book<'p>(
        &mut self,
        out: &'p mut Prepared,
        symbol: Symbol<'_>,
        depth: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(symbol);
        if depth != 20 {
            return Err(Error::BadArgument(
                "depth (Hyperliquid's l2Book has 20 levels)",
            ));
        }
        self.info(w, "l2Book", now, |w, _| {
            w.s(",\"coin\":\"");
            w.s(symbol.as_str());
            w.s("\"");
        })
    }

    /// `clearinghouseState`: info weight 2.
    fn account<'p>(&mut self, out: &'p mut Prepared, now: i64) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        self.info(w, "clearinghouseState", now, |w, user| {
            w.s(",\"user\":\"");
            w.s(user);
            w.s("\"");
        })
    }

    /// An `order` action of `n` orders: weight 1 + floor(n / 40), each order one
    /// address action.
    fn batch_orders<'p>(
        &mut self,
        out: &'p mut Prepared,
        orders: &[NewOrder<'_>],
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let mut w = Writer::start(out);
        w.symbol(orders.first().map(|o| o.symbol));
        if orders.is_empty() || orders.len() > endpoint::MAX_BATCH {
            return Err(Error::BadArgument("batch of 1 to MAX_BATCH orders"));
        }
        let at = Self::start_exchange(&mut w);
        w.s("{\"type\":\"order\",\"orders\":[");
        for (i, o) in orders.iter().enumerate() {
            if i > 0 {
                w.s(",");
            }
            let asset = self.asset(&o.symbol)?;
            order_wire(&mut w, asset, o)?;
        }
        w.s("],\"grouping\":\"na\"}");
        let kind = if orders.len() == 1 {
            Request::Order
        } else {
            // orders.len() <= MAX_BATCH: the cast cannot truncate.
            Request::Batch(orders.len() as u16)
        };
        self.exchange(w, at, Action::Order(orders), kind, now)
    }

    /// `{"status":"order","order":{"status":..}}`: found; `unknownOid`: not found.
    fn read_order(&self, r: &Response<'_>) -> Lookup {
        let Ok(v) = json::parse(r.body) else {
            return Lookup::Unknown;
        };
        if !(200..=299).contains(&r.status) {
            return Lookup::Unknown;
        }
        match v.get("status") {
            Ok(Some(s)) if s.str_eq("unknownOid").unwrap_or(false) => Lookup::NotFound,
            Ok(Some(s)) if s.str_eq("order").unwrap_or(false) => {
                let mut buf = [0u8; 48];
                let state = match v
                    .path("order.status")
                    .ok()
                    .flatten()
                    .map(|s| s.decode_str(&mut buf))
                {
                    Some(Ok(word)) => hl_state(word),
                    _ => return Lookup::Unknown,
                };
                match v
                    .path("order.order.oid")
                    .ok()
                    .flatten()
                    .and_then(endpoint::json_text)
                {
                    Some(id) => Lookup::Found(OrderInfo {
                        state,
                        venue_order_id: id,
                        filled: None,
                    }),
                    None => Lookup::Unknown,
                }
            }
            _ => Lookup::Unknown,
        }
    }

    /// The first status: `resting` (new) or `filled` with its `oid`: accepted;
    /// `error` or a top-level `err`: refused.
    fn read_placed(&self, r: &Response<'_>) -> Placed {
        let Ok(v) = json::parse(r.body) else {
            return Placed::Unknown;
        };
        if !(200..=299).contains(&r.status) {
            return Placed::Unknown;
        }
        if v.get("status")
            .ok()
            .flatten()
            .is_some_and(|s| s.str_eq("err").unwrap_or(false))
        {
            return Placed::Refused;
        }
        let Ok(Some(first)) = v
            .path("response.data.statuses")
            .map(|s| s.and_then(|s| s.at(0).ok().flatten()))
        else {
            return Placed::Unknown;
        };
        let accepted = |state, o: Option<Value<'_>>| match o
            .and_then(|o| o.get("oid").ok().flatten())
            .and_then(endpoint::json_text)
        {
            Some(id) => Placed::Accepted(OrderInfo {
                state,
                venue_order_id: id,
                filled: None,
            }),
            None => Placed::Unknown,
        };
        if let Ok(Some(o)) = first.get("resting") {
            accepted(OrderState::New, Some(o))
        } else if let Ok(Some(o)) = first.get("filled") {
            accepted(OrderState::Filled, Some(o))
        } else if let Ok(Some(_)) = first.get("error") {
            Placed::Refused
        } else {
            Placed::Unknown
        }
    }
}
