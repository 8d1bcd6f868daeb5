//! The decision-to-wire cases (issue 31): a strategy's Binance order from
//! `new_order` (format and HMAC-SHA256 signature) through `Gateway::submit` (checks,
//! charge, ledger) and the sans-IO pool (encode into the connection's buffer) to the
//! bytes handed to `write(2)`, measured stage by stage.
//!
//! Each case adds one stage to the one before it, on the same state, so a stage's
//! cost is the difference of two cases of the same run ([`stages`]):
//!
//! | case | what its calls do, per order |
//! |---|---|
//! | `wire_sign` | the signature alone: `HmacKey::sign` of the order's query (the key's ipad and opad blocks hashed once, at start) |
//! | `wire_sign_naive` | the same MAC keyed on every call (`Hmac::<Sha256>::new_from_slice`) |
//! | `wire_sign_hmac_text` | the REST signature as sent: `binance_spot::signature` of the query with the HMAC key (the MAC and its hex) |
//! | `wire_sign_ed25519` | the same with an Ed25519 key (`SignKey::Ed25519`): the signature, its base64, URL-encoded |
//! | `wire_prepare` | `BinanceSpot::new_order_from` (the order's prepared template) into a reused `Prepared`: format and signature |
//! | `wire_prepare_builder` | the same order from `BinanceSpot::new_order` (parameter by parameter), as before the template |
//! | `wire_charge` | `Budget::try_charge_shape` of the order's shape (the gateway's charge) |
//! | `wire_ledger` | prepare, then `Gateway::submit` to a transport that only takes the ticket |
//! | `wire_encode` | prepare, submit, and the pool's `request` (the order, written as HTTP/1.1 by its template, copied into the connection's buffer with the `Host` line, as the loop's `Context::request_prepared` does), the bytes marked written without a syscall |
//! | `wire_write` | the whole path: the same, with the bytes handed to `write(2)` (a pipe) |
//! | `wire_floor` | `write(2)` of the same bytes alone |
//!
//! Between batches, untimed, every order of the batch is answered through the pool and
//! the gateway (`Gateway::on_response`: Applied), the pipe drained and the budget
//! reset, so every batch starts with idle connections and an empty ledger.

use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd};

use ergon_core::{Budget, Class, Flight, Shape, Ticket};
use ergon_gateway::{Event, Gateway, Prepared, Wire};
use ergon_io::client::{PoolConfig, PoolId, Refused, RequestId};
use ergon_io::http::{with_prepared, Headers, InvalidRequest, Request};
use ergon_io::pool::{ConnId, Pool, PoolEvent, Transmit};
use ergon_venues::adapt::Clock;
use ergon_venues::binance_spot::template::OrderTemplate;
use ergon_venues::binance_spot::{signature, Auth, BinanceSpot};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Ed25519Key, Endpoints, Fill, HmacKey, NewOrder, OrderType, Side,
    SignKey, Symbol, TimeInForce,
};
use ergon_venues::response::Response;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::cases::{Case, Expect, MAX_BATCH};

const SEC: i64 = 1_000_000_000;
/// The loop's clock for every order (a fake clock: the path reads none).
pub(crate) const T0: i64 = 1_000 * SEC;
/// Binance Spot's limits (`exchangeInfo`), as in the gateway's tests, but for
/// orders: 200 per 10 s instead of 100, so that a batch of [`MAX_BATCH`] orders fits
/// what [`Class::Normal`] may use (the headroom above it is Urgent's). The limit's
/// value changes nothing on the path.
pub(crate) const INFO: &[u8] = br#"{"rateLimits":[{"rateLimitType":"REQUEST_WEIGHT","interval":"MINUTE","intervalNum":1,"limit":6000},{"rateLimitType":"ORDERS","interval":"SECOND","intervalNum":10,"limit":200},{"rateLimitType":"RAW_REQUESTS","interval":"MINUTE","intervalNum":5,"limit":61000}]}"#;
/// The secret of Binance's documented signature example (see [`tests`]).
pub const SECRET: &[u8] = b"NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
/// The Ed25519 key of the `wire_sign_ed25519` case (any key signs at the same cost).
const ED25519_SEED: [u8; 32] = [7; 32];
/// One answer, Applied by the gateway.
const REPLY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"orderId\":1}";
/// Ledger slots and connections: one per order of the largest batch, so every order
/// of a batch finds a free slot and an idle connection of its own.
const SLOTS: usize = MAX_BATCH + 1;

/// The stage a case stops after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Sign,
    SignNaive,
    SignHmacText,
    SignEd25519,
    Prepare,
    PrepareBuilder,
    Charge,
    Ledger,
    Encode,
    Write,
    Floor,
}

/// The transport under the gateway: the budget, the sans-IO pool (one pool of one
/// connection per order of a batch, so each order finds its idle connection first,
/// as in a steady state) and the pipe the bytes are written to.
struct Transport {
    budget: Budget,
    fresh: Budget,
    pool: Pool,
    pools: Vec<PoolId>,
    next_pool: usize,
    stage: Stage,
    /// Write end, read end.
    pipe: (OwnedFd, OwnedFd),
    /// `wire_ledger`: the flights of the orders "sent", to answer.
    kept: Vec<(RequestId, Flight)>,
    next_id: u64,
}

impl Wire for Transport {
    fn now(&self) -> i64 {
        T0
    }

    fn budget(&mut self) -> &mut Budget {
        &mut self.budget
    }

    fn send(
        &mut self,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        if self.stage == Stage::Ledger {
            self.next_id += 1;
            let id = RequestId(self.next_id);
            // Within its capacity: no allocation.
            self.kept.push((id, ticket.sent()));
            return Ok(id);
        }
        let pool = self.pools[self.next_pool];
        self.next_pool += 1;
        let (id, conn) = self
            .pool
            .request(pool, req, ticket, deadline_ns, T0, |_| true)?;
        Ok(self.write(id, conn))
    }

    /// As the loop's `Context::request_prepared`: a request its adapter wrote as
    /// HTTP/1.1 already (the template's order) is copied into the connection's
    /// buffer as it is.
    fn send_prepared(
        &mut self,
        req: &Prepared,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        let Some(h) = req.http().filter(|_| self.stage != Stage::Ledger) else {
            return with_prepared(req, ticket, |r, t| self.send(r, t, deadline_ns))
                .unwrap_or_else(|t| Err(Refused::Invalid(t, InvalidRequest::Method)));
        };
        let pool = self.pools[self.next_pool];
        self.next_pool += 1;
        let (id, conn) = self
            .pool
            .request(pool, &h, ticket, deadline_ns, T0, |_| true)?;
        Ok(self.write(id, conn))
    }
}

impl Transport {
    /// Hands `conn`'s bytes to `write(2)` (or, before the write stage, marks them
    /// written): request `id`.
    #[inline(always)]
    fn write(&mut self, id: RequestId, conn: ConnId) -> RequestId {
        let out = self.pool.transmit(conn);
        let n = if self.stage == Stage::Write {
            write(&self.pipe.0, out)
        } else {
            out.len()
        };
        self.pool.handle_written(conn, n);
        id
    }
}

/// `write(2)` of `bytes` to `fd`; what it wrote (0 on an error: the run then fails
/// its check that every order was answered).
pub(crate) fn write(fd: &OwnedFd, bytes: &[u8]) -> usize {
    // SAFETY: `bytes` is a live slice of `bytes.len()` bytes, `fd` an open descriptor.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    usize::try_from(n).unwrap_or(0)
}

/// A pipe with room for the largest batch, non-blocking on both ends.
pub(crate) fn pipe() -> (OwnedFd, OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    let (w, r) = unsafe { (OwnedFd::from_raw_fd(fds[1]), OwnedFd::from_raw_fd(fds[0])) };
    // 1 MiB: a batch of 99 orders of ~400 bytes never fills it. Best effort: the
    // default 64 KiB holds a batch too.
    // SAFETY: F_SETPIPE_SZ takes an int size.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    (w, r)
}

/// One stage of the decision-to-wire path, as a case.
pub struct WireCase {
    stage: Stage,
    /// The order's shape, registered in the budget every batch starts from (the
    /// gateway finds it there and charges it).
    shape: Shape,
    gateway: Gateway<BinanceSpot>,
    t: Transport,
    req: Prepared,
    /// One order per ledger slot, each with its own client order id (built once:
    /// the strategy's side, not the path's).
    orders: Vec<NewOrder<'static>>,
    /// The orders' template, and what each order fills in.
    template: OrderTemplate,
    fills: Vec<Fill<'static>>,
    /// `wire_sign*` and `wire_floor`: the query signed and the request's bytes, of
    /// the first order.
    query: Vec<u8>,
    bytes: Vec<u8>,
    key: HmacKey,
    /// The REST signature's keys, as `binance_spot::signature` takes them.
    keys: [SignKey; 2],
    /// Orders submitted in this batch (to answer in `prepare`).
    submitted: usize,
    /// Orders answered (Applied) in all.
    pub applied: u64,
}

/// The order every case prepares: the documented example's, with a client order id.
fn order(id: ClientOrderId) -> NewOrder<'static> {
    NewOrder {
        symbol: Symbol::new("LTCBTC").expect("a symbol"),
        side: Side::Buy,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Some(Decimal::new("0.1").expect("a price")),
        quantity: Decimal::new("1").expect("a quantity"),
        client_order_id: id,
        reduce_only: false,
    }
}

impl WireCase {
    fn new(stage: Stage) -> Self {
        let mut b = Budget::builder();
        let clock = Clock::anchor(T0, 1_499_827_319_559);
        let venue = BinanceSpot::from_exchange_info(INFO, &mut b, clock, 30_000_000)
            .expect("exchangeInfo")
            .with_auth(
                Auth::new(
                    "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A",
                    SECRET,
                    5_000,
                )
                .expect("credentials"),
            );
        let fresh = b.build(T0).expect("a budget");
        let mut budget = fresh.clone();
        let mut pool = Pool::new();
        let addr = "127.0.0.1:443".parse().expect("an address");
        let pools: Vec<PoolId> = (0..SLOTS)
            .map(|_| {
                pool.add_pool(PoolConfig::new(addr, "api.binance.com"), T0)
                    .expect("a pool")
            })
            .collect();
        pool.handle_timeout(&mut budget, T0);
        while let Some(t) = pool.poll_transmit() {
            if let Transmit::Connect { conn, .. } = t {
                pool.handle_connect_started(conn, &mut budget, T0);
                pool.handle_connected(conn, T0);
            }
        }
        while pool.poll_event().is_some() {}
        let orders: Vec<NewOrder<'static>> = (0..SLOTS)
            .map(|i| order(ClientOrderId::new(&format!("mm-{i:06}")).expect("an id")))
            .collect();
        let mut gateway = Gateway::new(venue, "LTCBTC", SLOTS, 1024).expect("a gateway");
        let mut req = Prepared::with_capacity(1024);
        // The bench signs where the adapter prepares, as a caller of the adapter
        // does (the gateway's `venue_mut` defers Binance's signatures to its
        // submit, after the charge): the stages below split format and signature.
        let venue = gateway.venue_mut();
        venue.defer_signatures(false);
        venue
            .new_order(
                &mut req,
                &order(ClientOrderId::new("mm-first").expect("id")),
                T0,
            )
            .expect("an order");
        let first = order(ClientOrderId::new("x").expect("id"));
        let template = gateway
            .venue()
            .order_template(first.symbol, first.side, first.order_type)
            .expect("a template");
        let fills = orders
            .iter()
            .map(|o: &NewOrder<'static>| Fill {
                price: o.price,
                quantity: o.quantity,
                client_order_id: o.client_order_id,
            })
            .collect();
        let mut fresh = fresh;
        let shape = fresh.shape(req.parts()).expect("the order's shape");
        assert_eq!(
            budget.shape(req.parts()),
            Ok(shape),
            "the same index in both"
        );
        let target = req.target();
        let query = target
            .split_once('?')
            .and_then(|(_, q)| q.split_once("&signature="))
            .map(|(q, _)| q.as_bytes().to_vec())
            .expect("a signed query");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(
            format!("POST {target} HTTP/1.1\r\nHost: api.binance.com\r\n").as_bytes(),
        );
        for (k, v) in req.headers() {
            bytes.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", req.body().len()).as_bytes());
        bytes.extend_from_slice(req.body());
        WireCase {
            stage,
            shape,
            gateway,
            t: Transport {
                budget,
                fresh,
                pool,
                pools,
                next_pool: 0,
                stage,
                pipe: pipe(),
                kept: Vec::with_capacity(SLOTS),
                next_id: 0,
            },
            req,
            orders,
            template,
            fills,
            query,
            bytes,
            key: HmacKey::new(SECRET),
            keys: [
                SignKey::Hmac(HmacKey::new(SECRET)),
                SignKey::Ed25519(Ed25519Key::from_seed(&ED25519_SEED)),
            ],
            submitted: 0,
            applied: 0,
        }
    }

    /// Answers every order of the batch (Applied), drains the pipe.
    fn settle(&mut self) {
        let gw = &mut self.gateway;
        let t = &mut self.t;
        for (id, flight) in std::mem::take(&mut t.kept) {
            let r = Response {
                status: 200,
                headers: &[],
                body: b"{\"orderId\":1}",
            };
            if let Some(Event::Applied { .. }) = gw.on_response(t, id, r, flight) {
                self.applied += 1;
            }
        }
        t.kept = Vec::with_capacity(SLOTS);
        if matches!(self.stage, Stage::Encode | Stage::Write) {
            for &pool in &t.pools[..self.submitted] {
                let conn = ConnId::new(pool.index());
                let buf = t.pool.recv_buf(conn);
                let n = REPLY.len().min(buf.len());
                buf[..n].copy_from_slice(&REPLY[..n]);
                t.pool.handle_recv(conn, n, T0);
            }
            while let Some(ev) = t.pool.poll_event() {
                let PoolEvent::Response { id, conn, flight } = ev else {
                    continue;
                };
                let buf = t.pool.take_buffer(conn);
                let mut headers = Headers::new();
                let r = t.pool.response_in(conn, &buf, &mut headers);
                if let Some(Event::Applied { .. }) = gw.on_response(t, id, r, flight) {
                    self.applied += 1;
                }
                drop(headers);
                t.pool.release(conn, T0);
                t.pool.restore_buffer(conn, buf);
            }
        }
        while gw.poll_event().is_some() {}
        let mut sink = [0u8; 1 << 16];
        // SAFETY: `sink` has room for the bytes read; the pipe is non-blocking.
        while unsafe { libc::read(t.pipe.1.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0
        {
        }
        t.next_pool = 0;
        self.submitted = 0;
    }

    /// The order of slot `i`, prepared from its template into the case's buffer.
    #[inline(always)]
    fn prepare_order(&mut self, i: usize) -> bool {
        self.gateway
            .venue()
            .new_order_from(&self.template, &mut self.req, &self.fills[i], T0)
            .is_ok()
    }
}

impl Case for WireCase {
    fn name(&self) -> &'static str {
        match self.stage {
            Stage::Sign => "wire_sign",
            Stage::SignNaive => "wire_sign_naive",
            Stage::SignHmacText => "wire_sign_hmac_text",
            Stage::SignEd25519 => "wire_sign_ed25519",
            Stage::Prepare => "wire_prepare",
            Stage::PrepareBuilder => "wire_prepare_builder",
            Stage::Charge => "wire_charge",
            Stage::Ledger => "wire_ledger",
            Stage::Encode => "wire_encode",
            Stage::Write => "wire_write",
            Stage::Floor => "wire_floor",
        }
    }

    fn what(&self) -> &'static str {
        match self.stage {
            Stage::Sign => {
                "HMAC-SHA256 of a Binance order's query, key state precomputed (HmacKey::sign)"
            }
            Stage::SignNaive => "the same MAC keyed on every call (Hmac::new_from_slice)",
            Stage::SignHmacText => "the REST signature as sent, HMAC key (binance_spot::signature)",
            Stage::SignEd25519 => "the REST signature as sent, Ed25519 key (base64, URL-encoded)",
            Stage::Prepare => {
                "BinanceSpot::new_order_from (a prepared template) into a reused Prepared: format + signature"
            }
            Stage::PrepareBuilder => "the same order from BinanceSpot::new_order (param by param)",
            Stage::Charge => "Budget::try_charge_shape of the order's shape (the gateway's charge)",
            Stage::Ledger => {
                "prepare + Gateway::submit (checks, charge, ledger), transport takes the ticket"
            }
            Stage::Encode => {
                "prepare + submit + the pool's request (copied into the connection), no syscall"
            }
            Stage::Write => "the whole path: prepare + submit + encode + write(2) to a pipe",
            Stage::Floor => "write(2) of the same request bytes to a pipe alone",
        }
    }

    fn expect(&self) -> Expect {
        Expect::Admit
    }

    fn prepare(&mut self) {
        self.settle();
        self.t.budget = self.t.fresh.clone();
    }

    #[inline(never)]
    fn timed_calls(&mut self, n: usize) -> u64 {
        let mut refused = 0;
        match self.stage {
            Stage::Sign => {
                for _ in 0..n {
                    black_box(self.key.sign(&[black_box(&self.query[..])]));
                }
            }
            Stage::SignNaive => {
                for _ in 0..n {
                    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(black_box(SECRET)) else {
                        refused += 1;
                        continue;
                    };
                    mac.update(black_box(&self.query[..]));
                    black_box(<[u8; 32]>::from(mac.finalize().into_bytes()));
                }
            }
            Stage::SignHmacText | Stage::SignEd25519 => {
                let key = &self.keys[usize::from(self.stage == Stage::SignEd25519)];
                let mut out = arrayvec::ArrayString::new();
                for _ in 0..n {
                    signature(key, black_box(&self.query[..]), &mut out);
                    black_box(&out);
                }
            }
            Stage::Prepare => {
                for i in 0..n {
                    refused += u64::from(!self.prepare_order(i));
                }
            }
            Stage::PrepareBuilder => {
                for i in 0..n {
                    let venue = self.gateway.venue_mut();
                    venue.defer_signatures(false);
                    let ok = venue.new_order(&mut self.req, &self.orders[i], T0).is_ok();
                    refused += u64::from(!ok);
                }
            }
            Stage::Charge => {
                for _ in 0..n {
                    match self
                        .t
                        .budget
                        .try_charge_shape(self.shape, Class::Normal, T0)
                    {
                        Ok(ticket) => drop(black_box(ticket)),
                        Err(_) => refused += 1,
                    }
                }
            }
            Stage::Ledger | Stage::Encode | Stage::Write => {
                for i in 0..n {
                    if !self.prepare_order(i) {
                        refused += 1;
                        continue;
                    }
                    match self
                        .gateway
                        .submit(&mut self.t, &mut self.req, Class::Normal, i as u64)
                    {
                        Ok(()) => self.submitted += 1,
                        Err(_) => refused += 1,
                    }
                }
            }
            Stage::Floor => {
                for _ in 0..n {
                    refused += u64::from(write(&self.t.pipe.0, black_box(&self.bytes)) == 0);
                }
            }
        }
        refused
    }
}

/// Every stage, in path order.
pub fn all() -> Vec<Box<dyn Case>> {
    [
        Stage::Sign,
        Stage::SignNaive,
        Stage::SignHmacText,
        Stage::SignEd25519,
        Stage::Prepare,
        Stage::PrepareBuilder,
        Stage::Charge,
        Stage::Ledger,
        Stage::Encode,
        Stage::Write,
        Stage::Floor,
    ]
    .into_iter()
    .map(|s| Box::new(WireCase::new(s)) as Box<dyn Case>)
    .collect()
}

/// One row of the stage table: a stage and its cost per order, from the cases'
/// figures (ns or instructions per call) of one run.
pub struct Row {
    /// The stage.
    pub stage: &'static str,
    /// Its cost per order.
    pub cost: f64,
    /// How it is derived.
    pub how: &'static str,
}

/// The stage table from per-call figures by case name (`get`): each stage is the
/// difference of two cases that differ by that stage only.
pub fn stages(get: impl Fn(&str) -> Option<f64>) -> Option<Vec<Row>> {
    let sign = get("wire_sign")?;
    let prepare = get("wire_prepare")?;
    let charge = get("wire_charge")?;
    let ledger = get("wire_ledger")?;
    let encode = get("wire_encode")?;
    let write = get("wire_write")?;
    let floor = get("wire_floor")?;
    let mut rows = vec![
        Row {
            stage: "prepare: format",
            cost: prepare - sign,
            how: "wire_prepare - wire_sign",
        },
        Row {
            stage: "prepare: signature",
            cost: sign,
            how: "wire_sign",
        },
        Row {
            stage: "charge",
            cost: charge,
            how: "wire_charge",
        },
        Row {
            stage: "ledger (submit's checks, record, ledger)",
            cost: ledger - prepare - charge,
            how: "wire_ledger - wire_prepare - wire_charge",
        },
        Row {
            stage: "encode (the pool's request)",
            cost: encode - ledger,
            how: "wire_encode - wire_ledger",
        },
        Row {
            stage: "write(2)",
            cost: write - encode,
            how: "wire_write - wire_encode",
        },
        Row {
            stage: "whole path",
            cost: write,
            how: "wire_write",
        },
        Row {
            stage: "all but signature and write(2)",
            cost: encode - sign,
            how: "wire_encode - wire_sign",
        },
        Row {
            stage: "floor: write(2) of the bytes alone",
            cost: floor,
            how: "wire_floor",
        },
    ];
    for (stage, how) in [
        (
            "signature as sent, HMAC-SHA256 (MAC and hex)",
            "wire_sign_hmac_text",
        ),
        (
            "signature as sent, Ed25519 (signature, base64, URL-encoded)",
            "wire_sign_ed25519",
        ),
    ] {
        if let Some(cost) = get(how) {
            rows.push(Row { stage, cost, how });
        }
    }
    if let Some(builder) = get("wire_prepare_builder") {
        rows.push(Row {
            stage: "format with the builder (before the template)",
            cost: builder - sign,
            how: "wire_prepare_builder - wire_sign",
        });
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binance's documented signature example: "SIGNED endpoint examples for POST
    /// /api/v3/order", <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/request-security>.
    const QUERY: &[u8] = b"symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559";
    const SIGNATURE: &str = "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71";

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn both_signatures_give_binances_documented_example() {
        assert_eq!(hex(&HmacKey::new(SECRET).sign(&[QUERY])), SIGNATURE);
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
        mac.update(QUERY);
        assert_eq!(hex(&mac.finalize().into_bytes()), SIGNATURE);
    }

    #[test]
    fn the_signature_cases_sign_the_query_as_binance_takes_it() {
        use base64::Engine as _;
        let c = WireCase::new(Stage::SignEd25519);
        let mut out = arrayvec::ArrayString::new();
        signature(&c.keys[0], &c.query, &mut out);
        assert_eq!(out.as_str(), hex(&c.key.sign(&[&c.query[..]])));
        signature(&c.keys[1], &c.query, &mut out);
        // Ed25519: base64 of the 64-byte signature over the query, URL-encoded.
        let b64 = out
            .replace("%2B", "+")
            .replace("%2F", "/")
            .replace("%3D", "=");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let key = Ed25519Key::from_seed(&ED25519_SEED);
        assert_eq!(raw, key.sign(&c.query).to_vec());
    }

    #[test]
    fn the_floor_writes_what_the_path_writes() {
        // The path's bytes, as the pool encoded and wrote them, are the floor's.
        let mut c = WireCase::new(Stage::Write);
        c.prepare();
        assert_eq!(c.timed_calls(1), 0);
        let mut got = vec![0u8; 4096];
        // SAFETY: `got` has room for the bytes read.
        let n = unsafe { libc::read(c.t.pipe.1.as_raw_fd(), got.as_mut_ptr().cast(), got.len()) };
        got.truncate(usize::try_from(n).unwrap());
        let floor = WireCase::new(Stage::Floor);
        // The same order but for its client order id and signature.
        assert_eq!(
            got.len(),
            floor.bytes.len() - "mm-first".len() + "mm-000000".len()
        );
        assert!(got.starts_with(b"POST /api/v3/order?symbol=LTCBTC&side=BUY&type=LIMIT"));
    }

    #[test]
    fn every_order_of_every_batch_is_answered_and_the_ledger_emptied() {
        for stage in [Stage::Ledger, Stage::Encode, Stage::Write] {
            let mut c = WireCase::new(stage);
            for _ in 0..3 {
                c.prepare();
                assert_eq!(c.timed_calls(MAX_BATCH), 0, "{stage:?}");
                assert_eq!(c.gateway.in_flight(), MAX_BATCH, "{stage:?}");
            }
            c.prepare();
            assert_eq!(c.gateway.in_flight(), 0, "{stage:?}");
            assert_eq!(c.applied, 3 * MAX_BATCH as u64, "{stage:?}");
        }
    }

    #[test]
    fn the_stage_table_adds_up() {
        let figures = |name: &str| {
            Some(match name {
                "wire_sign" => 10.0,
                "wire_prepare" => 15.0,
                "wire_charge" => 2.0,
                "wire_ledger" => 20.0,
                "wire_encode" => 24.0,
                "wire_write" => 30.0,
                "wire_floor" => 5.0,
                _ => return None,
            })
        };
        let rows = stages(figures).unwrap();
        let by = |s: &str| rows.iter().find(|r| r.stage.starts_with(s)).unwrap().cost;
        assert_eq!(by("prepare: format"), 5.0);
        assert_eq!(by("ledger"), 3.0);
        assert_eq!(by("encode"), 4.0);
        assert_eq!(by("write(2)"), 6.0);
        assert_eq!(by("all but"), 14.0);
        let parts: f64 = rows[..6].iter().map(|r| r.cost).sum();
        assert_eq!(parts, by("whole path"));
    }
}
