//! Bootstrap: the venue's time and published limits, read before the account's
//! budget exists, and the venue clock anchored at the round trip's midpoint.
//!
//! It runs a short loop of its own (a one-bucket budget of 10 requests a second)
//! on the gateway's address and lane, then builds the real budget from what it
//! read, and the gateway's loop and pool over it.
//!
//! A gateway restarted at full load finds the venue's window used up by the one
//! before it: a 429 holds the bootstrap for the venue's wait and it asks again,
//! within [`Start::timeout_ns`]. A ban (a 418, or a wait longer than a bucket may
//! be held) ends start-up with the ban's end ([`StartError::ban_until_ns`]), and
//! so does a ban a previous gateway recorded that outlasts the start deadline
//! ([`Start::ban_until_ns`]): nothing is sent into a ban.

use std::net::SocketAddr;

use ergon_core::{BucketId, Budget, Builder, Class, Flight, Part, Spec, Verdict};
use ergon_venues::adapt::{self, Clock, Request as Kind};
use ergon_venues::response::Response;

use super::driver::Driver;
use super::endpoints::{Account, Boot};
use super::machine::Gateway;
use super::url::{resolve, UrlError};
use super::ws_api::{WsApiStart, WsLane, WsLaneError, CONNECTS_PER_5MIN};
use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
use ergon_io::event_loop::{Context, EventLoop, LoopConfig, LoopError};
use ergon_io::http::Request;
use ergon_io::Culprit;

const SEC: i64 = 1_000_000_000;

/// The name every venue adapter gives its IP gate: the bucket a ban of the IP
/// halts, and the one a ban met during the bootstrap is recorded under.
pub const IP_GATE: &str = "ip";

/// How long past a recorded ban's end a start waits before sending anything:
/// the end was read from a `Retry-After` of whole seconds, on the venue's clock,
/// and a request that meets the ban again is banned again, for longer.
pub const BAN_END_MARGIN_NS: i64 = SEC;

/// A ban whose answer names no end is taken to last this long (Binance's
/// shortest ban, 2 minutes).
const BAN_WITHOUT_END_NS: i64 = 120 * SEC;

/// Where and how a gateway starts.
#[derive(Clone, Debug)]
pub struct Start {
    /// The venue's address (resolved).
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    /// The egress lane (local address to bind), if any.
    pub local_addr: Option<SocketAddr>,
    /// The event loop's configuration (CPU pinning, busy-poll).
    pub loop_cfg: LoopConfig,
    /// Connections kept open to the venue.
    pub connections: usize,
    /// Requests in flight at most (ledger slots).
    pub capacity: usize,
    /// How long the bootstrap may take, holds after a 429 included (the start
    /// deadline).
    pub timeout_ns: i64,
    /// The end of a ban of the IP that a previous gateway recorded, on this
    /// process's clock ([`ergon_io::clock::now_ns`]): the bootstrap sends nothing
    /// before it, and ends at once if it comes after the start deadline.
    pub ban_until_ns: Option<i64>,
    /// Record the gateway's budget calls into this file as an `ergon-replay` trace
    /// ([`super::record`]; [`Gateway::finish_record`] closes it).
    pub record: Option<std::path::PathBuf>,
    /// Order entry and the order stream over the venue's WebSocket API here, where
    /// the venue has one ([`Account::ws_api`]); see [`super::ws_api`].
    pub ws_api: Option<WsApiStart>,
    /// Labels registered before anything is recorded ([`Gateway::label`]), so the
    /// record's declarations name them.
    pub labels: Vec<String>,
    /// The boot epoch of the gateway's client order ids
    /// ([`Gateway::set_boot_epoch`]); None: the start's wall-clock milliseconds.
    pub boot_epoch: Option<u64>,
    /// Charges a previous gateway made (its [`ChargeLog`](crate::shm::ChargeLog),
    /// [`Recent::charged`](crate::shm::Recent::charged)): the budget is built at
    /// the oldest and books each at its time ([`ergon_core::Budget::charge_after`]),
    /// so that they count in their windows. Buckets this budget lacks are skipped.
    pub recent: Vec<crate::shm::Charged>,
    /// The limits the previous gateway's budget declared and what its bootstrap
    /// reads count on them ([`Recent::limits`](crate::shm::Recent::limits)):
    /// with [`Start::recent`], the bootstrap sends nothing before the dead
    /// gateway's charges leave room for its reads ([`boot_room`]).
    pub kept_limits: Vec<crate::shm::KeptLimit>,
}

impl Start {
    /// Defaults: no lane, 4 connections, 256 ledger slots, a 10 s bootstrap.
    pub fn new(addr: SocketAddr, host: impl Into<String>) -> Self {
        Start {
            addr,
            host: host.into(),
            local_addr: None,
            loop_cfg: LoopConfig::default(),
            connections: 4,
            capacity: 256,
            timeout_ns: 10 * SEC,
            ban_until_ns: None,
            record: None,
            ws_api: None,
            labels: Vec::new(),
            boot_epoch: None,
            recent: Vec::new(),
            kept_limits: Vec::new(),
        }
    }
}

impl Start {
    /// Defaults for the venue at `http://HOST:PORT` (resolved here, once). Errors
    /// say what is wrong with the address; `https://` is refused until the native
    /// client's TLS pools are wired into the gateway.
    pub fn from_base(url: &str) -> Result<Self, UrlError> {
        const EXPECTED: &str = "http://HOST:PORT";
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => return Err(UrlError::Tls("https")),
            _ => return Err(UrlError::form(url, EXPECTED)),
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains(['/', '@', '?']) {
            return Err(UrlError::form(url, "http://HOST:PORT with no path"));
        }
        let addr = resolve(authority)?;
        Ok(Start::new(addr, authority))
    }
}

/// Why a gateway did not start: who is at fault, and what happened in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartError {
    culprit: Culprit,
    why: String,
    ban_until_ns: Option<i64>,
}

impl StartError {
    fn new(culprit: Culprit, why: impl Into<String>) -> Self {
        StartError {
            culprit,
            why: why.into(),
            ban_until_ns: None,
        }
    }

    /// The venue's end of a ban of the IP it answered during start-up, on this
    /// process's clock ([`ergon_io::clock::now_ns`]): the caller keeps the halt
    /// of [`IP_GATE`] (the gateway's halts file) for the next start. None for
    /// every other error, a ban already recorded ([`Start::ban_until_ns`])
    /// included.
    pub fn ban_until_ns(&self) -> Option<i64> {
        self.ban_until_ns
    }

    /// A configuration the caller gave (the budget's specs, the venue's parts,
    /// the capacity, `declare`'s own error, the WebSocket API lane) was refused.
    fn caller(why: &dyn core::fmt::Display) -> Self {
        StartError::new(Culprit::Caller, why.to_string())
    }

    /// Who is at fault. The venue's answers during bootstrap (a status other
    /// than 200, no time in it, a failed request) are the peer's or the failed
    /// request's own culprit; no answer before the bootstrap timeout is
    /// [`Culprit::Deadline`]; the event loop's errors are theirs
    /// ([`LoopError::culprit`]); a `--record` file that cannot be opened is
    /// [`Culprit::Os`]; everything else is a configuration the caller gave
    /// ([`Culprit::Caller`]), `declare`'s own error included (its function, its
    /// judgement of what it read).
    pub fn culprit(&self) -> Culprit {
        self.culprit
    }
}

impl From<LoopError> for StartError {
    fn from(e: LoopError) -> Self {
        StartError::new(e.culprit(), e.to_string())
    }
}

impl core::fmt::Display for StartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for StartError {}

struct Read<E> {
    pool: PoolId,
    /// The bootstrap's one bucket, standing for the IP.
    gate: BucketId,
    parts: [Part; 1],
    paths: [Option<Request<'static>>; 2],
    step: usize,
    in_flight: bool,
    sent_at: i64,
    deadline: i64,
    anchor: Option<(i64, i64)>,
    limits: Option<Vec<u8>>,
    /// The headers of the last answer read (its usage figures seed the budget).
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    error: Option<StartError>,
    _venue: core::marker::PhantomData<E>,
}

impl<E: Account> Read<E> {
    fn next(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if now > self.deadline {
            self.error = Some(StartError::new(
                Culprit::Deadline,
                "bootstrap: no answer from the venue in time",
            ));
            cx.stop();
            return;
        }
        if self.in_flight {
            return;
        }
        let Some(req) = self.paths.get(self.step).copied() else {
            cx.stop();
            return;
        };
        let Some(req) = req else {
            self.step += 1;
            return self.next(cx);
        };
        let Ok(ticket) = cx.budget().try_charge(&self.parts, Class::Normal, now) else {
            return;
        };
        match cx.request(self.pool, &req, ticket, self.deadline) {
            Ok(_) => {
                self.sent_at = now;
                self.in_flight = true;
            }
            Err(r) => cx.refund(r.into_ticket()),
        }
    }
}

impl<E: Account> Read<E> {
    /// A 429 holds the bucket for the venue's wait (its `Retry-After`; a window
    /// without one), after which [`Read::next`] asks again, unless the wait ends
    /// after the start deadline. A 418, or a wait the budget takes for a ban
    /// ([`Budget::throttled`]), ends start-up with the ban's end.
    fn limited(&mut self, cx: &mut Context<'_>, path: &str, r: &Response<'_>) {
        let now = cx.now();
        let wall_ms = crate::wall::ms();
        // Only to read an HTTP-date `Retry-After`: the venue's clock is not read yet.
        let retry = adapt::response_retry_after(r, &Clock::anchor(now, wall_ms), now);
        let b = cx.budget();
        let verdict = match r.status {
            418 => {
                let until_ns = now.saturating_add(retry.wait_ns.unwrap_or(BAN_WITHOUT_END_NS));
                let _ = b.banned(self.gate, until_ns, now);
                Verdict::Banned {
                    bucket: self.gate,
                    until_ns,
                }
            }
            _ => b
                .throttled(self.gate, retry.wait_ns, now)
                .unwrap_or(Verdict::Unknown),
        };
        let said = format!(
            "bootstrap: {path} answered {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body[..r.body.len().min(200)])
        );
        let until_ms =
            |until_ns: i64| wall_ms.saturating_add(until_ns.saturating_sub(now) / 1_000_000);
        self.error = match verdict {
            Verdict::Throttled { until_ns, .. } if until_ns <= self.deadline => return self.next(cx),
            Verdict::Throttled { until_ns, .. } => Some(StartError::new(
                Culprit::Deadline,
                format!(
                    "{said}; the venue's wait ends at {}, after the start deadline (--start-timeout)",
                    crate::wall::utc(until_ms(until_ns))
                ),
            )),
            Verdict::Banned { until_ns, .. } => Some(StartError {
                ban_until_ns: Some(until_ns),
                ..StartError::new(
                    Culprit::Peer,
                    format!(
                        "{said}; the venue banned this IP until {}",
                        crate::wall::utc(until_ms(until_ns))
                    ),
                )
            }),
            _ => Some(StartError::new(Culprit::Peer, said)),
        };
        cx.stop();
    }
}

impl<E: Account> ClientHandler for Read<E> {
    fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
        let now = cx.now();
        cx.complete(f);
        self.in_flight = false;
        let path = self.paths[self.step].map_or("", |r| r.target);
        if matches!(r.status, 418 | 429) {
            return self.limited(cx, path, &r);
        }
        if r.status != 200 {
            self.error = Some(StartError::new(
                Culprit::Peer,
                format!(
                    "bootstrap: {path} answered {}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body[..r.body.len().min(200)])
                ),
            ));
            cx.stop();
            return;
        }
        self.headers = r
            .headers
            .iter()
            .map(|h| (h.name.to_vec(), h.value.to_vec()))
            .collect();
        if self.step == 0 {
            let Some(server_ms) = E::read_time(r.body) else {
                self.error = Some(StartError::new(
                    Culprit::Peer,
                    format!("bootstrap: {path}: no time in the answer"),
                ));
                cx.stop();
                return;
            };
            self.anchor = Some((self.sent_at + (now - self.sent_at) / 2, server_ms));
        } else {
            self.limits = Some(r.body.to_vec());
        }
        self.step += 1;
        self.next(cx);
    }

    fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
        cx.settle(sent);
        self.error = Some(StartError::new(
            e.culprit(),
            format!("bootstrap request failed: {e}"),
        ));
        cx.stop();
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: PoolId) {
        self.next(cx);
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.next(cx);
    }
}

/// Builds the budget at the oldest of `recent` (or `now`) and books each of them
/// at its time (never after `now`), oldest first: the budget's clock never goes
/// back, and each charge leaves its window when it would have.
fn replay_charges(
    builder: Builder,
    recent: &[crate::shm::Charged],
    now: i64,
) -> Result<Budget, ergon_core::ConfigError> {
    let mut order: Vec<&crate::shm::Charged> = recent.iter().collect();
    order.sort_by_key(|c| c.at_ns);
    let from = order.first().map_or(now, |c| c.at_ns.min(now));
    let mut budget = builder.build(from)?;
    for c in order {
        if let Some(id) = budget.bucket(&c.bucket) {
            let units = u32::try_from(c.units).unwrap_or(u32::MAX);
            // Its own id: never foreign.
            let _ = budget.charge_after(id, units, c.at_ns.min(now));
        }
    }
    budget.tick(now);
    Ok(budget)
}

/// When a restarted gateway's bootstrap reads fit in the windows the dead one
/// spent in, at `now` or later: each limit it kept (`limits`, the charges
/// file's [`Recent::limits`](crate::shm::Recent::limits)) as a sliding window
/// (never shorter than a fixed one), its charges (`recent`) replayed at their
/// times, and the reads' documented units on each ([`KeptLimit::boot`]) charged
/// at the first instant they all pass, never before the venue's last hold of
/// those buckets ends (a 429's wait the dead gateway was told: the venue bans
/// what comes inside it). `now` when nothing was kept, or when the
/// reads could never fit (more units than a limit: the venue decides, and its
/// 429 is obeyed). The bootstrap, [`Gateway::start`], holds until then; a
/// caller that reads the venue itself (the simulator's restarts) does too.
///
/// [`KeptLimit::boot`]: crate::shm::KeptLimit::boot
pub fn boot_room(
    limits: &[crate::shm::KeptLimit],
    recent: &[crate::shm::Charged],
    now: i64,
) -> i64 {
    let mut b = Budget::builder();
    let mut parts = Vec::new();
    for l in limits.iter().filter(|l| l.boot > 0 && l.window_ns > 0) {
        let slots = if l.window_ns % 20 == 0 { 20 } else { 1 };
        let Ok(id) = b.add(&l.bucket, Spec::sliding(l.limit, l.window_ns, slots)) else {
            return now; // a name twice or a bad spec: not a file this gateway wrote
        };
        parts.push(Part::new(id, u32::try_from(l.boot).unwrap_or(u32::MAX)));
    }
    if parts.is_empty() {
        return now;
    }
    let Ok(mut budget) = replay_charges(b, recent, now) else {
        return now;
    };

    // Not before the venue's last hold of what they count ends.
    let mut at = limits
        .iter()
        .filter(|l| l.boot > 0)
        .filter_map(|l| l.held_until_ns)
        .fold(now, i64::max);
    // Each refusal names the time its bucket has room; another may still lack
    // it then: a few rounds at most (one per bucket).
    for _ in 0..=parts.len() {
        match budget.try_charge(&parts, Class::Urgent, at) {
            Ok(_) => return at,
            Err(l) if l.why == ergon_core::Why::Full && l.ready_at_ns > at => at = l.ready_at_ns,
            Err(_) => return now,
        }
    }
    at
}

/// The budget a gateway starts with, at `now`: `builder`'s buckets with the
/// charges a previous gateway left (`recent`, [`Start::recent`]) replayed, the
/// bootstrap's own reads charged ([`Account::bootstrap_parts`]), and the venue's
/// usage figures in the bootstrap's last answer (`headers`) booked. What
/// [`Gateway::start`] does after its bootstrap; public for a caller that builds
/// its gateway itself on a charges file ([`crate::shm::ChargeLog`]), as the
/// simulator's restarts do.
pub fn start_budget<E: Account>(
    builder: Builder,
    venue: &mut E,
    recent: &[crate::shm::Charged],
    headers: &[ergon_venues::response::Header<'_>],
    now: i64,
) -> Result<Budget, ergon_core::ConfigError> {
    let mut budget = replay_charges(builder, recent, now)?;
    for p in venue.bootstrap_parts() {
        // The venue's own ids: never refused.
        let _ = budget.charge_after(p.bucket, p.cost, now);
    }
    // The venue's usage figures in the bootstrap's last answer (a gateway
    // killed a moment ago, another process on the IP): booked before the
    // first send, read by the adapter as any answer's. Its verdict (a 200 of
    // an unsigned read) says nothing more.
    let seen = Response {
        status: 200,
        headers,
        body: b"{}",
    };
    let _ = venue.on_response(Kind::Read(0), &seen, &mut budget, now);
    Ok(budget)
}

fn pool_cfg(s: &Start) -> PoolConfig {
    let mut pc = PoolConfig::new(s.addr, s.host.clone());
    pc.local_addr = s.local_addr;
    pc
}

impl<E: Account> Gateway<E> {
    /// Starts a gateway: reads the venue's time (anchoring the clock at the round
    /// trip's midpoint) and its published limits on its own connection, lets
    /// `declare` build the venue's buckets and endpoints from them (for `symbol`,
    /// what reconcile queries name), and returns the
    /// loop (owning the budget and the pool) and a [`Driver`]'s gateway half with
    /// its pool. Run it with `EventLoop::run(&mut Driver { gateway, strategy, pool })`.
    ///
    /// `declare`'s error (a [`DeclareError`](crate::DeclareError) from
    /// [`Account::declare`], or any other with a `Display`) becomes a
    /// [`StartError`] with its text, the caller's.
    pub fn start<D: core::fmt::Display>(
        s: &Start,
        symbol: &str,
        declare: impl FnOnce(&Boot, &mut Builder) -> Result<E, D>,
    ) -> Result<(EventLoop, Gateway<E>, PoolId), StartError> {
        let err = StartError::caller;
        let now = ergon_io::clock::now_ns();
        let mut b = Budget::builder();
        let any = b
            .add("bootstrap", Spec::sliding(10, SEC, 1))
            .map_err(|e| err(&e))?;
        let mut budget = b.build(now).map_err(|e| err(&e))?;
        // The dead gateway's charges leave room for these reads first: the
        // venue counts them in the windows it spent in. The start deadline
        // runs from then.
        let room = boot_room(&s.kept_limits, &s.recent, now);
        if room > now {
            let _ = budget.throttled(any, Some(room - now), now);
        }
        let timeout_ns = s.timeout_ns.saturating_add(room - now);
        let ban_until = s.ban_until_ns.map(|u| u.saturating_add(BAN_END_MARGIN_NS));
        if let Some(until_ns) = ban_until.filter(|&u| u > now) {
            if until_ns > now.saturating_add(timeout_ns) {
                let ends = crate::wall::utc(crate::wall::ms() + (until_ns - now) / 1_000_000);
                // Already recorded: not a new ban to record again.
                return Err(StartError::new(
                    Culprit::Peer,
                    format!("bootstrap: the venue's ban of this IP, recorded by the previous gateway, runs until {ends}, after the start deadline (--start-timeout): nothing sent into it"),
                ));
            }
            // Nothing sent before the ban ends: a hold of the bootstrap's bucket.
            let _ = budget.throttled(any, Some(until_ns - now), now);
        }
        let mut lp = EventLoop::new(s.loop_cfg, budget)?;
        let pool = lp.add_pool(pool_cfg(s))?;
        let mut read = Read::<E> {
            pool,
            gate: any,
            parts: [Part::new(any, 1)],
            paths: [Some(E::time_request()), E::limits_request()],
            step: 0,
            in_flight: false,
            sent_at: 0,
            deadline: now.saturating_add(timeout_ns),
            anchor: None,
            limits: None,
            headers: Vec::new(),
            error: None,
            _venue: core::marker::PhantomData,
        };
        lp.run(&mut read)?;
        drop(lp);
        if let Some(e) = read.error {
            return Err(e);
        }
        let Some((anchor_ns, server_ms)) = read.anchor else {
            // The loop stopped with neither an answer nor an error: the venue
            // never gave the time bootstrap needs.
            return Err(StartError::new(Culprit::Peer, "bootstrap did not finish"));
        };
        let boot = Boot {
            clock: Clock::anchor(anchor_ns, server_ms),
            limits: read.limits,
        };
        let mut builder = Budget::builder();
        let mut venue = declare(&boot, &mut builder).map_err(|e| err(&e))?;
        let ws_connects = match &s.ws_api {
            Some(_) => Some(declare_ws_connects(&mut builder).map_err(|e| err(&e))?),
            None => None,
        };
        let now = ergon_io::clock::now_ns();
        let headers: Vec<ergon_venues::response::Header<'_>> = read
            .headers
            .iter()
            .map(|(name, value)| ergon_venues::response::Header { name, value })
            .collect();
        let budget =
            start_budget(builder, &mut venue, &s.recent, &headers, now).map_err(|e| err(&e))?;
        let mut lp = EventLoop::new(s.loop_cfg, budget)?;
        let mut pc = pool_cfg(s);
        pc.connections = s.connections.max(1);
        pc.connect_parts = venue.parts(Kind::Connect).map_err(|e| err(&e))?.to_vec();
        pc.connect_class = Class::Urgent;
        let pool = lp.add_pool(pc)?;
        let lane = match (&s.ws_api, ws_connects) {
            (Some(at), Some(connects)) => ws_lane(&venue, s, at, connects, lp.budget())?,
            _ => None,
        };
        let mut gw = Gateway::new(venue, symbol, s.capacity, 1024).map_err(|e| err(&e))?;
        let epoch = s
            .boot_epoch
            .unwrap_or_else(|| u64::try_from(crate::wall::ms()).unwrap_or(0));
        gw.set_boot_epoch(epoch)
            .map_err(|e| StartError::new(Culprit::Caller, format!("boot epoch {epoch}: {e}")))?;
        if let Some(lane) = lane {
            gw.set_ws_api(lane);
        }
        for name in &s.labels {
            gw.label(name)
                .map_err(|e| StartError::new(e.culprit(), format!("label {name:?}: {e}")))?;
        }
        if let Some(path) = &s.record {
            let writer = gw.record_to(path, lp.budget());
            writer.map_err(|e| {
                StartError::new(Culprit::Os, format!("--record {}: {e}", path.display()))
            })?;
        }
        Ok((lp, gw, pool))
    }
}

/// Declares the WebSocket API lane's own bucket on `b`, before the budget is
/// built: the venue's connection attempts, 300 per 5 minutes
/// ([`CONNECTS_PER_5MIN`]). The daemon's start and every restart (a new
/// process, the same start) declare it so; a driver of its own (the
/// simulator) calls this to build the same lane.
pub fn declare_ws_connects(b: &mut Builder) -> Result<BucketId, ergon_core::ConfigError> {
    b.add(
        "WS_API_CONNECTS_5M",
        Spec::sliding(CONNECTS_PER_5MIN, 300 * SEC, 60),
    )
}

/// The WebSocket order lane of `venue` at `at`, if the venue has one, as the
/// daemon builds it at every start: its connects charge what the venue's
/// session says (Binance: the IP gate and weight 2 on every weight limit;
/// Deribit: a connection and a session) and one on `connects`
/// ([`declare_ws_connects`]); its frames charge the IP gate (requests charge
/// their own parts). `capacity`: requests in flight on it; `local_addr`: the
/// egress lane's address; `seed`: the session's (its WebSocket masks).
pub fn ws_lane_of<E: Account>(
    venue: &E,
    capacity: usize,
    at: &WsApiStart,
    connects: BucketId,
    budget: &Budget,
    local_addr: Option<SocketAddr>,
    seed: u64,
) -> Result<Option<WsLane>, WsLaneError> {
    let Some(api) = venue.ws_api(capacity) else {
        return Ok(None);
    };
    let mut connect = api.connect_parts().map_err(WsLaneError::Parts)?;
    connect
        .try_push(Part::new(connects, 1))
        .map_err(|_| WsLaneError::TooManyParts)?;
    let message = api.message_parts().map_err(WsLaneError::Parts)?;
    WsLane::new(api, at, budget, &connect, &message, local_addr, seed).map(Some)
}

/// The daemon's lane ([`ws_lane_of`]), seeded from the clock and the process.
fn ws_lane<E: Account>(
    venue: &E,
    s: &Start,
    at: &WsApiStart,
    connects: ergon_core::BucketId,
    budget: &Budget,
) -> Result<Option<WsLane>, StartError> {
    let seed = ergon_io::clock::now_ns() as u64 ^ u64::from(std::process::id()) << 32;
    ws_lane_of(venue, s.capacity, at, connects, budget, s.local_addr, seed)
        .map_err(|e| StartError::caller(&e))
}

/// What [`open_ws_api`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WsProbe {
    /// Orders go over the WebSocket API.
    pub order_entry: bool,
    /// The user data stream is subscribed.
    pub stream: bool,
    /// Why not, if not.
    pub why: Option<String>,
}

impl WsProbe {
    /// One warning line per fallback: order entry over REST (no WebSocket API),
    /// and polling open orders (no stream, when `stream` was asked for).
    pub fn warnings(&self, stream: bool) -> Vec<String> {
        let why = self.why.as_deref().unwrap_or("not available");
        let mut w = Vec::new();
        if !self.order_entry {
            w.push(format!(
                "warning: no WebSocket API ({why}); orders go over REST"
            ));
        }
        if stream && !self.stream {
            w.push(format!(
                "warning: no user data stream ({why}); polling open orders instead"
            ));
        }
        w
    }
}

struct Probe {
    until: i64,
}

impl<E: Account> super::driver::Strategy<E> for Probe {
    fn on_event(&mut self, _: &mut super::driver::Api<'_, '_, E>, _: super::events::Event<'_>) {}

    fn on_turn(&mut self, api: &mut super::driver::Api<'_, '_, E>) {
        let now = api.now();
        let done = match api.ws_api() {
            None => true,
            Some(l) => match l.state() {
                super::ws_api::WsState::Unavailable => true,
                super::ws_api::WsState::Open => l.is_set_up() || l.why().is_some(),
                _ => l.stats().drops > 0,
            },
        };
        if done || now >= self.until {
            api.stop();
        } else {
            let _ = api.set_timer(0, (now + 5_000_000).min(self.until));
        }
    }
}

/// Opens the gateway's WebSocket API connection (and its stream) before the
/// strategy starts, within `timeout_ns`: if the venue does not answer it, the
/// connection is dropped and every request goes over HTTP. Says what it found.
pub fn open_ws_api<E: Account>(
    lp: &mut EventLoop,
    gateway: Gateway<E>,
    pool: PoolId,
    timeout_ns: i64,
) -> (Gateway<E>, WsProbe) {
    if gateway.ws_api().is_none() {
        let why = Some("the venue has no WebSocket API in the gateway".into());
        return (
            gateway,
            WsProbe {
                why,
                ..WsProbe::default()
            },
        );
    }
    let until = lp.now() + timeout_ns;
    let control = std::sync::Arc::new(super::driver::Control::default());
    let mut d = Driver {
        gateway,
        strategy: Probe { until },
        pool,
        control,
    };
    let ran = lp.run(&mut d);
    let mut gw = d.gateway;
    let lane = gw.ws_api();
    // Open, and taking orders (a lane that authenticates first: set up).
    let open = lane.is_some_and(|l| l.ready());
    let stream = lane.is_some_and(|l| l.streaming());
    let why = match (&ran, lane) {
        (Err(e), _) => Some(format!("the WebSocket API: {e}")),
        (_, Some(l)) if !open => Some(
            l.why()
                .map(str::to_string)
                .unwrap_or_else(|| "the WebSocket API did not open in time".into()),
        ),
        (_, Some(l)) if !stream => Some(
            l.why()
                .map(str::to_string)
                .unwrap_or_else(|| "no answer to the stream's subscribe in time".into()),
        ),
        _ => None,
    };
    if !open {
        gw.drop_ws_api();
    }
    let probe = WsProbe {
        order_entry: open,
        stream,
        why,
    };
    (gw, probe)
}

/// Runs `strategy` over `gateway` until it stops the loop; returns the driver.
pub fn run<E: Account, S: super::driver::Strategy<E>>(
    lp: &mut EventLoop,
    gateway: Gateway<E>,
    pool: PoolId,
    strategy: S,
    control: std::sync::Arc<super::driver::Control>,
) -> Result<Driver<E, S>, ergon_io::event_loop::LoopError> {
    let mut d = Driver {
        gateway,
        strategy,
        pool,
        control,
    };
    lp.run(&mut d)?;
    Ok(d)
}
