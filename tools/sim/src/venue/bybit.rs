//! A run on Bybit v5 (linear): the real [`Gateway`] with the Bybit adapter, its
//! batches (`POST /v5/order/create-batch`, up to 20 orders, each placed or
//! refused on its own and each counted on the create limit), its batch cancels
//! (`POST /v5/order/cancel-batch`, up to 10 orders here, each cancelled or
//! refused on its own; some name an order never placed, which the venue
//! refuses alone with 110001), single orders and cancels, against the
//! emulator's Bybit profile driven without sockets
//! ([`SansIo`]), through the same driver, faulty network and checks as the
//! Binance Spot runs ([`Sim`], [`Adapter`]), from one seed.
//!
//! The venue's rules are the emulator's (`tools/venue-sim/src/profiles/bybit`):
//! per-UID limits over a rolling second (create 40 orders, an account above
//! the documented default of 10 so that a batch of 20 fits; cancel 10, the
//! real-time query 50, the history 50; over one, HTTP 200 `retCode` 10006), the
//! IP's requests in any 5 s (here 200, lowered from the documented 600 so that
//! the strategy runs near it; over it, a 403 and a ban of 10 minutes), a batch's
//! items placed in order, a refused one (a price off the 0.1 tick, 10001; an
//! `orderLinkId` already used, 110072, also by an earlier item of the same
//! batch) refused alone. Bybit states no time after which a request it accepted
//! can no longer run: an unknown outcome found nowhere ends Unresolved.
//!
//! Faults as on Binance Spot, from the same driver: the network's fates, bans
//! (Bybit's 403), the venue's clock drifting and, in a fifth of the runs,
//! stepping inside the guard; in half the runs open-orders polls
//! (`/v5/order/realtime`, so a Late is owed for an order left Unresolved that
//! rests); in a quarter the gateway killed and restarted on the daemon's
//! journal, charges and halts files (its bootstrap reads `/v5/market/time`;
//! the journal keeps single orders, as the daemon's hub does, not batches).
//!
//! The network's faults apply to a batch cancel as to any request; each of its
//! items' final events is checked against the venue's truth
//! ([`crate::check`]'s `cancels_wrong`).
//!
//! Not here (the Binance Spot runs have them): the WebSocket lanes and the
//! hub, another sender on the IP, venue clock steps beyond the guard (the
//! blind model reads Binance's stamps), and cancel-replace (Bybit's is an
//! amend in place).

use ergon_core::{Budget, Builder, Class};
use ergon_gateway::{Gateway, ItemFate};
use ergon_venue_sim::sansio::SansIo;
use ergon_venue_sim::{Config, Interval, LimitType, RateLimit, BYBIT_LIMITS};
use ergon_venues::adapt::Clock;
use ergon_venues::bybit::{self, Auth, Bybit};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Endpoints, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};

use crate::check::{Final, Kind, What};
use crate::run::adapter::Adapter;
use crate::run::restart::Start;
use crate::run::{Outcome, Params, Sim, Step, GUARD_MS, MS, T0, VENUE_MS0};

/// The IP's requests in any 5 s, the venue's and the adapter's.
const IP_PER_5S: u64 = 200;
/// Orders created per rolling second per UID, the venue's and the adapter's: an
/// account above the documented default of 10 (Bybit raises a UID's limits by
/// its tier, and says each in `X-Bapi-Limit`), so that a batch of 20 fits.
const CREATE_PER_S: u64 = 40;
/// Most orders in one batch (Bybit linear).
const MAX_BATCH: i64 = bybit::MAX_BATCH_ORDERS as i64;
/// Items priced off the tick, per mille (the venue refuses each alone).
const OFF_TICK_PER_MILLE: u64 = 40;
/// Batches that repeat an earlier item's client order id, per mille.
const REPEAT_PER_MILLE: u64 = 50;
/// Most orders in one batch cancel here: the account's cancel limit (the
/// adapter charges a batch cancel on it, one per order; Bybit's own batch
/// cancel limit is 10 orders a second too).
const MAX_CANCELS: usize = 10;
/// Cancels (single or batch) that are batch cancels, per mille.
const BATCH_CANCEL_PER_MILLE: u64 = 400;
/// Batch cancels with an item naming an order never placed, per mille.
const UNKNOWN_ITEM_PER_MILLE: u64 = 300;

/// The venue's limits: Bybit's documented ones ([`BYBIT_LIMITS`]) with the IP's
/// lowered to [`IP_PER_5S`] and the create limit raised to [`CREATE_PER_S`].
fn venue_config() -> Config {
    let mut c = Config::bybit();
    c.rate_limits = BYBIT_LIMITS.to_vec();
    for l in &mut c.rate_limits {
        match l.kind {
            LimitType::RawRequests => {
                *l = RateLimit::new(l.kind, Interval::Second, 5, IP_PER_5S).rolling();
            }
            LimitType::BybitCreate => {
                *l = RateLimit::new(l.kind, Interval::Second, 1, CREATE_PER_S).rolling();
            }
            _ => {}
        }
    }
    c
}

impl Adapter for Bybit {
    const NAME: &'static str = "bybit";
    /// "403, access too frequent": Bybit's ban.
    const BAN_STATUS: u16 = 403;
    const BOOT_READ: &'static [u8] = b"GET /v5/market/time HTTP/1.1\r\nHost: sim\r\n\r\n";
    const REQUEST_BYTES: usize = 4096;

    /// Bybit publishes no limits to read: the account's are configured (the
    /// IP's and the create limit as the venue's here), its rolling windows kept
    /// the daemon's guard longer (`Bybit::guarded`, as its `declare` passes
    /// `--guard-ms`). Bybit has no cancel-replace mode.
    fn open_account(
        _info: &str,
        keys: &(String, String),
        _allow_failure: bool,
        b: &mut Builder,
        now: i64,
        venue_ms: i64,
    ) -> Self {
        let limits = bybit::Config {
            ip_per_5s: IP_PER_5S,
            create_per_s: CREATE_PER_S,
            ..bybit::Config::default()
        };
        let clock = Clock::anchor(now, venue_ms);
        Bybit::guarded(b, clock, limits, GUARD_MS * MS)
            .expect("buckets")
            .with_auth(Auth::new(&keys.0, keys.1.as_bytes(), 5_000).expect("keys"))
    }

    fn act(sim: &mut Sim<Self>) {
        act(sim);
    }

    /// The strategy's view of what rests: each order heard placed once (a
    /// batch repeating an id is refused before it is sent).
    fn heard(sim: &mut Sim<Self>, f: &Final) {
        let placed = match f.what {
            What::Applied | What::Reconciled(Some(_)) => match sim.ledger.kind_of(f.tag) {
                Some(Kind::Place) => sim.ledger.placed_cid(f.tag),
                _ => None,
            },
            // A batch's item (`item_cid` names none of a batch cancel's).
            What::Item(i, ItemFate::Applied | ItemFate::Found(_)) => sim.ledger.item_cid(f.tag, i),
            _ => None,
        };
        if let Some(cid) = placed {
            let cid = cid.to_string();
            sim.resting.push(cid);
        }
    }
}

/// A price on the 0.1 tick that rests on `side`, or (`off_tick`) one 0.05
/// off it.
fn price(sim: &mut Sim<Bybit>, side: Side, off_tick: bool) -> String {
    let k = sim.net.rng.range(0, 1_000);
    let tenths = match side {
        Side::Buy => 499_000 - k,
        Side::Sell => 501_000 + k,
    };
    match off_tick {
        true => format!("{}.{}5", tenths / 10, tenths % 10),
        false => format!("{}.{}", tenths / 10, tenths % 10),
    }
}

fn side(sim: &mut Sim<Bybit>) -> Side {
    match sim.net.rng.chance(500) {
        true => Side::Buy,
        false => Side::Sell,
    }
}

/// A limit order of `cid` at `price` on `side`, resting away from the mid
/// (50,000).
fn order(cid: ClientOrderId, price: &str, side: Side) -> NewOrder<'_> {
    NewOrder {
        symbol: Symbol::new("BTCUSDT").expect("symbol"),
        side,
        order_type: OrderType::Limit(TimeInForce::Gtc),
        price: Decimal::new(price).ok(),
        quantity: Decimal::new("0.010").expect("qty"),
        client_order_id: cid,
        reduce_only: false,
    }
}

/// The strategy: single orders, batches of 1 to 20 orders (some items
/// refused by the venue alone), cancels of what it believes rests.
fn act(sim: &mut Sim<Bybit>) {
    let now = sim.net.now;
    let roll = sim.net.rng.next_u64() % 100;
    let tag = sim.ledger.next_tag();
    let prepared = match roll {
        0..=29 if !sim.resting.is_empty() && sim.net.rng.chance(BATCH_CANCEL_PER_MILLE) => {
            prepare_cancels(sim, tag)
        }
        0..=29 if !sim.resting.is_empty() => {
            let i = sim.net.rng.range(0, sim.resting.len() as i64) as usize;
            let cid = sim.resting.swap_remove(i);
            let cid = ClientOrderId::new(&cid).expect("an id we issued");
            let r = OrderRef {
                symbol: Symbol::new("BTCUSDT").expect("symbol"),
                client_order_id: cid,
            };
            sim.ledger.submitted(tag, Kind::Cancel, cid.as_str());
            sim.gw.venue_mut().cancel(&mut sim.req, &r, now).is_ok()
        }
        0..=64 => prepare_batch(sim, tag),
        _ => {
            let Ok(cid) = sim.gw.next_client_order_id() else {
                return;
            };
            let side = side(sim);
            let off = sim.net.rng.chance(OFF_TICK_PER_MILLE);
            let price = price(sim, side, off);
            let o = order(cid, &price, side);
            sim.ledger.submitted(tag, Kind::Place, cid.as_str());
            sim.gw.venue_mut().new_order(&mut sim.req, &o, now).is_ok()
        }
    };
    if !prepared {
        sim.ledger.unprepared(tag);
        return;
    }
    // A single order goes in the daemon's journal first (a batch does not:
    // the daemon's hub journals new orders and cancel-replaces only).
    if !sim.journal_new(tag) {
        return;
    }
    if let Err(e) = sim
        .gw
        .submit(&mut sim.net, &mut sim.req, Class::Normal, tag)
    {
        sim.on_event(&e);
    }
}

/// Prepares a batch of 1 to 20 orders under `tag`: a few items priced off
/// the tick, and in some batches an item that repeats an earlier one's
/// client order id.
fn prepare_batch(sim: &mut Sim<Bybit>, tag: u64) -> bool {
    let n = sim.net.rng.range(1, MAX_BATCH + 1) as usize;
    let mut cids = Vec::with_capacity(n);
    for _ in 0..n {
        match sim.gw.next_client_order_id() {
            Ok(c) => cids.push(c),
            Err(_) => return false,
        }
    }
    if n >= 2 && sim.net.rng.chance(REPEAT_PER_MILLE) {
        let to = sim.net.rng.range(1, n as i64) as usize;
        let from = sim.net.rng.range(0, to as i64) as usize;
        cids[to] = cids[from];
    }
    let mut quotes = Vec::with_capacity(n);
    for _ in 0..n {
        let side = side(sim);
        let off = sim.net.rng.chance(OFF_TICK_PER_MILLE);
        quotes.push((side, price(sim, side, off)));
    }
    let orders: Vec<NewOrder<'_>> = cids
        .iter()
        .zip(&quotes)
        .map(|(c, (side, p))| order(*c, p, *side))
        .collect();
    let names = cids.iter().map(|c| c.as_str().to_string()).collect();
    sim.ledger.submitted_batch(tag, names);
    let now = sim.net.now;
    sim.gw
        .venue_mut()
        .batch_orders(&mut sim.req, &orders, now)
        .is_ok()
}

/// Prepares a batch cancel under `tag` of 1 to [`MAX_CANCELS`] orders the
/// strategy believes rest, one of them in some batches an order never placed
/// (the venue refuses that item alone).
fn prepare_cancels(sim: &mut Sim<Bybit>, tag: u64) -> bool {
    let most = sim.resting.len().min(MAX_CANCELS) as i64;
    let n = sim.net.rng.range(1, most + 1) as usize;
    let mut names = Vec::with_capacity(n + 1);
    for _ in 0..n {
        let i = sim.net.rng.range(0, sim.resting.len() as i64) as usize;
        names.push(sim.resting.swap_remove(i));
    }
    if n < MAX_CANCELS && sim.net.rng.chance(UNKNOWN_ITEM_PER_MILLE) {
        if let Ok(never) = sim.gw.next_client_order_id() {
            let at = sim.net.rng.range(0, n as i64 + 1) as usize;
            names.insert(at, never.as_str().to_string());
        }
    }
    let mut cids = Vec::with_capacity(names.len());
    for name in &names {
        cids.push(ClientOrderId::new(name).expect("an id we issued"));
    }
    let refs: Vec<OrderRef<'_>> = cids
        .iter()
        .map(|&client_order_id| OrderRef {
            symbol: Symbol::new("BTCUSDT").expect("symbol"),
            client_order_id,
        })
        .collect();
    let now = sim.net.now;
    let ok = sim
        .gw
        .venue_mut()
        .batch_cancel(&mut sim.req, &refs, now)
        .is_ok();
    drop(refs);
    sim.ledger.submitted_batch_cancel(tag, names);
    ok
}

/// Runs `seed` under `p` on Bybit.
pub fn run(seed: u64, p: &Params) -> Outcome {
    let cfg = venue_config();
    let account = cfg.accounts[0].clone();
    let venue = SansIo::new(cfg);
    let mut b = Budget::builder();
    let keys = (account.api_key.clone(), account.secret.clone());
    let acct = Bybit::open_account("", &keys, false, &mut b, T0, VENUE_MS0);
    let budget = b.build(T0).expect("budget");
    let gw = Gateway::new(acct, "BTCUSDT", 64, Bybit::REQUEST_BYTES).expect("gateway");
    let mut sim = Sim::new(gw, budget, venue, seed, p);
    // The venue's clock drifts, and in a fifth of the runs steps inside the
    // guard (Bybit counts its rolling windows on its own clock; the adapter's
    // are the guard longer).
    sim.arm_clock(seed, false);
    sim.at(T0, Step::Tick);
    let ban = sim.arm_ban();
    // Half the runs poll the open orders (`/v5/order/realtime`): a Late is
    // owed for an order left Unresolved that rests.
    let polls = sim.arm_polls(seed);
    // A quarter of the runs kill the gateway and restart it on the daemon's
    // journal, charges and halts files.
    let start = Start {
        keys,
        allow_failure: false,
        polls,
    };
    sim.arm_kills(seed, start);
    let settled = sim.drive(polls);
    sim.finish(polls, ban, settled)
}
