//! A market-making strategy over the ergon gateway, on Binance Spot, Bybit or OKX or the
//! emulator (in-process without `--base`); the command line is [`USAGE`]. Each cycle
//! refreshes two quotes (cancel-replace), reads the book, now and then the account
//! (Bulk) and sends a protective close (Urgent); orders go over Binance Spot's
//! WebSocket API where the venue answers it (`--order-entry`), with its user data
//! stream, and open orders are polled as a check. `--demand 3` offers three times what
//! the binding limit admits: the gateway refuses the excess locally, so the venue
//! never answers 429. Limits, sending, verdicts, re-sends and reconcile all live in
//! the gateway: this file decides what to quote and reads typed events.

use std::io::{self, Write};
use std::sync::Arc;

use ergon_core::Class::{self, Bulk, Normal, Urgent};
use ergon_core::{BucketId, Part};
use ergon_gateway::protection::{self, Protected};
pub use ergon_gateway::Control;
use ergon_gateway::{
    self as gateway, Account, Api, Event, Gateway, ItemFate, Keys, Label, Prepared, Start, Stats,
    Strategy, WsApiStart,
};
use ergon_gatewayd::secret;
use ergon_venue_sim::Server;
use ergon_venues::adapt::Error as VenueError;
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::bybit::Bybit;
use ergon_venues::endpoint::{
    CancelReplace, ClientOrderId, Decimal, NewOrder, OrderRef, OrderType, Side, Symbol, TimeInForce,
};
use ergon_venues::hyperliquid::{sign::Wallet, Exchange};
use ergon_venues::okx::Okx;

#[path = "mm_loop_cli/mod.rs"]
mod cli;
#[path = "mm_loop_shm/mod.rs"]
mod shm;

use cli::table;
pub use cli::{parse_args, to_json, Options, USAGE};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const POLL_EVERY: i64 = 500 * MS;

/// What each request is for: quotes and cancels, reads of the book and the account, closes.
const LABELS: [&str; 4] = ["trade:order", "mon:book", "mon:account", "trade:close"];

/// The one warning a run without a user data stream prints.
pub const NO_STREAM_WARNING: &str = "warning: no user data stream in the gateway (Binance \
Spot's listenKey stream was discontinued on 2026-02-20); polling open orders instead";

/// What the run did: the gateway's counts and the strategy's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// The gateway's counts (sent, applied, refused locally, unknown, reconciled ...).
    pub gw: Stats,
    /// Quotes the polls showed ended by the venue (filled, expired), quoted afresh.
    pub quotes_ended: u64,
    /// Alerts raised (one per halt).
    pub alerts: u64,
    /// Admitted units over the run's windows, of the binding limit (0..1).
    pub utilization: f64,
    /// The binding limit's bucket name.
    pub binding: String,
    /// Largest drift seen on a weight limit (positive: another sender on the IP).
    pub weight_drift: i64,
    /// Warning lines printed.
    pub warnings: Vec<String>,
    /// The emulator's report, when it ran in-process.
    pub venue: Option<ergon_venue_sim::Report>,
    /// The lines `--labels` printed (breakdowns by label, saturations).
    pub label_lines: Vec<String>,
}

/// Each cycle: two quote refreshes, a book read, the account every fourth cycle
/// (Bulk) and a protective close every twentieth (Urgent).
const CLOSE_EVERY: u64 = 20;
const ACCOUNT_EVERY: u64 = 4;

/// The strategy's handle on the gateway, and how it prepares one request.
type A<'a, 'c, E> = Api<'a, 'c, E>;
type Prep<'f, E> =
    &'f mut dyn for<'p> FnMut(&mut E, &'p mut Prepared, i64) -> Result<&'p Prepared, VenueError>;

const QUOTE: u64 = 1 << 56; // Tags: the high byte says what a request is for (+ slot).
const READ: u64 = 2 << 56;
const CLOSE: u64 = 3 << 56;
const CANCEL: u64 = 4 << 56;

/// One side's quote: the order resting (and since when), and a place or replace in
/// flight (its id and the order it replaces).
#[derive(Default)]
struct Quote {
    resting: Option<(ClientOrderId, i64)>,
    pending: Option<(ClientOrderId, Option<ClientOrderId>)>,
    /// The pending replace's parts as they end: its new quote's, its cancel's.
    parts: [Option<ItemFate>; 2],
}

#[derive(Default)]
struct Mm {
    symbol: Option<Symbol<'static>>,
    req: Prepared,
    quotes: [Quote; 2],
    cycle: u64,
    period_ns: i64,
    next_cycle: i64,
    started: i64,
    end_at: i64,
    next_progress: i64,
    /// The binding limit: its bucket, window, limit and admitted count at the start.
    binding: Option<(BucketId, i64, u64, u64)>,
    alerted: bool,
    /// Progress lines to stderr (true), stdout (false), or none.
    progress: Option<bool>,
    labels: [Label; LABELS.len()],
    s: Summary,
    /// `--etcd`: the leased limits, applied each turn.
    leases: Option<ergon_gatewayd::lease::Leases>,
    /// Hyperliquid: a book of 20 levels, no cancel-replace (a cancel, then a new
    /// order), no market order (the close is an IOC at a worst price).
    hl: bool,
}

impl Mm {
    /// A new order of `qty` under a client order id the gateway issued (its boot
    /// epoch and a sequence: never one of an earlier run); None if it has none to
    /// give.
    fn order<'a, E: Account>(
        &mut self,
        api: &mut A<E>,
        side: Side,
        ty: OrderType,
        price: Option<Decimal<'a>>,
        qty: &'a str,
    ) -> Option<NewOrder<'a>> {
        let client_order_id = api.next_client_order_id().ok()?;
        let symbol = self.symbol.expect("set");
        let quantity = Decimal::new(qty).expect("decimal");
        Some(NewOrder {
            symbol,
            side,
            order_type: ty,
            price,
            quantity,
            client_order_id,
            reduce_only: false,
        })
    }

    /// Prepares a request with the venue's endpoints and submits it; a refusal (or
    /// arguments the endpoint refused) is its final event, handled at once.
    fn send<E: Account>(&mut self, api: &mut A<E>, class: Class, tag: u64, prep: Prep<E>) {
        let now = api.now();
        let label = match (tag >> 56, class) {
            (2, Bulk) => 2,
            (k, _) => [0, 0, 1, 3, 0][(k as usize).min(4)],
        };
        let r = match prep(api.venue_mut(), &mut self.req, now) {
            Ok(_) => {
                self.req.set_label(self.labels[label]);
                api.submit(&mut self.req, class, tag)
            }
            Err(_) => Err(Event::Rejected { tag }),
        };
        if let Err(e) = r {
            self.on_event(api, e);
        }
    }

    fn cycle<E: Account>(&mut self, api: &mut A<E>) {
        self.cycle += 1;
        let wiggle = (self.cycle % 7) as i64;
        let symbol = self.symbol.expect("set at start");
        for slot in 0..2 {
            if self.quotes[slot].pending.is_some() {
                continue;
            }
            // Prices on a tick of 0.10, the coarsest of the venues it runs on
            // (Bybit's and OKX's BTC perpetuals): the venue refuses any other.
            let (side, cents) = match slot {
                0 => (Side::Buy, 5_000_000 - 500 - 10 * wiggle),
                _ => (Side::Sell, 5_000_000 + 500 + 10 * wiggle),
            };
            let price = format!("{}.{:02}", cents / 100, cents % 100);
            let gtc = OrderType::Limit(TimeInForce::Gtc);
            let price = Decimal::new(&price).ok();
            let Some(new) = self.order(api, side, gtc, price, "0.010") else {
                continue;
            };
            let old = self.quotes[slot].resting.take().map(|(c, _)| c);
            self.quotes[slot].pending = Some((new.client_order_id, old));
            let tag = QUOTE + slot as u64;
            match old {
                Some(cancel) if self.hl => {
                    // No cancel-replace: the cancel on its own, then the new order.
                    self.quotes[slot].pending = Some((new.client_order_id, None));
                    let it = OrderRef {
                        symbol,
                        client_order_id: cancel,
                    };
                    self.send(api, Normal, CANCEL, &mut |v, r, t| v.cancel(r, &it, t));
                    self.send(api, Normal, tag, &mut |v, r, t| v.new_order(r, &new, t));
                }
                Some(cancel) => self.send(api, Normal, tag, &mut |v, r, t| {
                    v.cancel_replace(r, &CancelReplace { cancel, new }, t)
                }),
                None => self.send(api, Normal, tag, &mut |v, r, t| v.new_order(r, &new, t)),
            }
        }
        let depth = if self.hl { 20 } else { 100 };
        self.send(api, Normal, READ, &mut |v, r, t| {
            v.book(r, symbol, depth, t)
        });
        if self.cycle % ACCOUNT_EVERY == 0 {
            self.send(api, Bulk, READ, &mut |v, r, t| v.account(r, t));
        }
        if self.cycle % CLOSE_EVERY == 0 {
            let (ty, worst) = match self.hl {
                true => (
                    OrderType::Limit(TimeInForce::Ioc),
                    Decimal::new("45000").ok(),
                ),
                false => (OrderType::Market, None),
            };
            if let Some(close) = self.order(api, Side::Sell, ty, worst, "0.001") {
                self.send(api, Urgent, CLOSE, &mut |v, r, t| v.new_order(r, &close, t));
            }
        }
    }

    /// A quote's request ended. `rests`: whether its new order rests (None: surely
    /// nothing ran, the old one still rests). An old order whose fate is unclear is
    /// canceled (a cancel of an order already gone is only refused).
    fn settle_quote<E: Account>(&mut self, api: &mut A<E>, slot: usize, rests: Option<bool>) {
        let now = api.now();
        let Some((cid, old)) = self.quotes[slot].pending.take() else {
            return;
        };
        match (rests, old) {
            (Some(true), _) => self.quotes[slot].resting = Some((cid, now)),
            (Some(false), Some(old)) => {
                let symbol = self.symbol.expect("set at start");
                let it = OrderRef {
                    symbol,
                    client_order_id: old,
                };
                self.send(api, Normal, CANCEL, &mut |v, r, t| v.cancel(r, &it, t));
            }
            (Some(false), None) => {}
            (None, old) => self.quotes[slot].resting = old.map(|o| (o, now)),
        }
    }

    fn on_poll<E: Account>(&mut self, api: &A<E>, sent_at: i64, body: &[u8]) {
        for q in &mut self.quotes {
            let Some((cid, since)) = q.resting else {
                continue;
            };
            let mut open = false;
            api.venue()
                .open_ids(body, &mut |id| open |= id == cid.as_str().as_bytes());
            // Only a quote that rested before the poll was sent can be missing.
            if !open && since < sent_at {
                q.resting = None;
                self.s.quotes_ended += 1;
            }
        }
    }

    /// Once per halt: what a person must look at.
    fn alert<E: Account>(&mut self, api: &mut A<E>) {
        if !std::mem::replace(&mut self.alerted, true) {
            self.s.alerts += 1;
            for a in ergon_venues::adapt::alerts(api.budget()) {
                eprintln!("ALERT: {} halted (ban #{})", a.name, a.bans);
            }
        }
    }

    fn progress<E: Account>(&mut self, api: &mut A<E>) {
        let now = api.now();
        self.measure(api);
        if now < self.next_progress {
            return;
        }
        self.next_progress += SEC;
        let Some(to_stderr) = self.progress else {
            return;
        };
        let (g, t) = (api.stats(), (now - self.started) / SEC);
        let u = self.s.utilization * 100.0;
        let refused = g.limited_full + g.limited_held + g.limited_halted;
        let line = format!("t={t:>3}s sent={} applied={} refused={refused} busy={} throttled={} banned={} unknown={} reconciled={} util={u:.0}%",
            g.sent, g.applied, g.busy, g.throttled, g.banned, g.unknown, g.reconciled);
        let _ = match to_stderr {
            true => writeln!(io::stderr(), "{line}"),
            false => writeln!(io::stdout(), "{line}"),
        };
    }

    /// The binding limit's use over the run so far (admitted units over what its
    /// windows allow), and the largest drift on any limit (another sender).
    fn measure<E: Account>(&mut self, api: &mut A<E>) {
        let now = api.now().min(self.end_at);
        let Some((bucket, window_ns, limit, admitted0)) = self.binding else {
            return;
        };
        let b = api.budget();
        let units = (b.stats(bucket).unwrap_or_default().admitted - admitted0) as f64;
        let windows = ((now - self.started) as f64 / window_ns as f64).max(1e-9);
        self.s.utilization = (units / (limit as f64 * windows)).min(1.0);
        for l in b.ids() {
            let drift = b.stats(l).unwrap_or_default().drift;
            self.s.weight_drift = self.s.weight_drift.max(drift);
        }
    }
}

impl<E: Account> Strategy<E> for Mm {
    fn on_event(&mut self, api: &mut A<E>, ev: Event<'_>) {
        let tag = ev.tag();
        if let Event::Halted { .. } = ev {
            self.alert(api);
        }
        match (tag & (0xff << 56), ev) {
            (QUOTE, _) => {
                let slot = (tag & 1) as usize;
                let rests = match ev {
                    Event::Applied { .. } => Some(true),
                    Event::Reconciled { found, .. } => Some(found.is_some_and(|s| !s.is_final())),
                    // Refused before anything left: the old order still rests.
                    Event::Limited { .. } | Event::Halted { .. } | Event::DuplicateId { .. } => {
                        None
                    }
                    // Refused or expired: a replace whose cancel failed leaves the old
                    // order's fate unclear.
                    Event::Rejected { .. } | Event::Expired { .. } => Some(false),
                    // A replace's parts (Binance Spot's two steps): item 0 the new
                    // quote, item 1 the old one's cancel, each with its own fate.
                    Event::Item { item, fate, .. } => {
                        if let Some(p) = self.quotes[slot].parts.get_mut(usize::from(item)) {
                            *p = Some(fate);
                        }
                        return;
                    }
                    Event::BatchSettled { .. } => {
                        let [new, cancel] = core::mem::take(&mut self.quotes[slot].parts);
                        let placed = match new {
                            Some(ItemFate::Applied) => true,
                            Some(ItemFate::Found(s)) => !s.is_final(),
                            _ => false,
                        };
                        let cancelled = match cancel {
                            Some(ItemFate::Applied) => true,
                            Some(ItemFate::Found(s)) => s.is_final(),
                            _ => false,
                        };
                        // The new quote rests and the old one's cancel did not run:
                        // both rest; the old one is cancelled now.
                        if let (true, false, Some((_, Some(old)))) =
                            (placed, cancelled, self.quotes[slot].pending)
                        {
                            let symbol = self.symbol.expect("set at start");
                            let it = OrderRef {
                                symbol,
                                client_order_id: old,
                            };
                            self.send(api, Normal, CANCEL, &mut |v, r, t| v.cancel(r, &it, t));
                        }
                        Some(placed)
                    }
                    _ => return, // Retrying, Reconciling: not over yet
                };
                self.settle_quote(api, slot, rests);
            }
            // A poll of one page only: a paged one's first page is not the
            // whole list (absence from it says nothing).
            (
                _,
                Event::OpenOrders {
                    age_ns,
                    body,
                    page: 0,
                    more: false,
                },
            ) => {
                let sent_at = api.now() - age_ns;
                self.on_poll(api, sent_at, body)
            }
            _ => {}
        }
    }

    /// A quote the stream says ended is quoted afresh (the polls check it).
    fn on_order_update(&mut self, _: &mut A<E>, x: &Execution) {
        for q in &mut self.quotes {
            if x.state.is_final() && q.resting.is_some_and(|(c, _)| c == x.client_order_id) {
                (q.resting, self.s.quotes_ended) = (None, self.s.quotes_ended + 1);
            }
        }
    }

    fn on_turn(&mut self, api: &mut A<E>) {
        let now = api.now();
        if let Some(l) = &mut self.leases {
            l.on_turn(api.budget(), now);
        }
        self.alerted &= api.budget().halted().next().is_some();
        if api.stop_asked() {
            self.end_at = self.end_at.min(now);
        }
        if now < self.end_at {
            // Offer cycles at the demanded rate; after a stall, do not burst.
            self.next_cycle = self.next_cycle.max(now - SEC);
            while self.next_cycle <= now {
                self.cycle(api);
                self.next_cycle += self.period_ns;
            }
            let _ = api.set_timer(1, self.next_cycle.min(self.end_at));
        }
        self.progress(api);
        let _ = api.set_timer(2, self.next_progress);
        if now >= self.end_at {
            if api.in_flight() == 0 || now >= self.end_at + 3 * SEC {
                api.stop();
            } else {
                let _ = api.set_timer(3, now + 50 * MS);
            }
        }
    }
}

/// The cycle's requests (each prepared once, for its parts) and how many of each
/// one cycle holds: what sizes the offered load.
fn mix<E: Account>(v: &mut E, symbol: Symbol<'static>, hl: bool) -> Vec<(Vec<Part>, f64)> {
    let (mut p, mut mix) = (Prepared::with_capacity(1024), Vec::new());
    // Sized, never sent: any id of the venue's form does.
    let new = NewOrder {
        symbol,
        side: Side::Buy,
        order_type: match hl {
            true => OrderType::Limit(TimeInForce::Ioc),
            false => OrderType::Market,
        },
        price: if hl { Decimal::new("45000").ok() } else { None },
        quantity: Decimal::new("1").expect("decimal"),
        client_order_id: E::ID_FORMAT.write([0; 16]),
        reduce_only: false,
    };
    let cid = new.client_order_id;
    let it = OrderRef {
        symbol,
        client_order_id: cid,
    };
    let mut take =
        |r: Result<&Prepared, VenueError>, n: f64| r.map(|p| mix.push((p.parts().to_vec(), n)));
    let replace = CancelReplace { cancel: cid, new };
    if take(v.cancel_replace(&mut p, &replace, 0), 2.0).is_err() {
        // A venue without cancel-replace: a cancel, then a new order.
        let _ = take(v.cancel(&mut p, &it, 0), 2.0);
        let _ = take(v.new_order(&mut p, &new, 0), 2.0);
    }
    let _ = take(v.book(&mut p, symbol, if hl { 20 } else { 100 }, 0), 1.0);
    let _ = take(v.account(&mut p, 0), 1.0 / ACCOUNT_EVERY as f64);
    let _ = take(v.new_order(&mut p, &new, 0), 1.0 / CLOSE_EVERY as f64);
    mix
}

/// Runs the strategy; `control` lets another thread clear halts or stop it. With no
/// `base` it talks to `sim` if given, else it starts the emulator of `o.sim`.
pub fn run(
    o: &Options,
    control: Arc<Control>,
    sim: Option<Arc<Server>>,
) -> Result<Summary, String> {
    if let Some(g) = &o.gateway {
        return shm::run(o, g);
    }
    let symbol = match o.venue.as_str() {
        "binance-spot" | "bybit" => "BTCUSDT",
        "okx" => "BTC-USDT-SWAP",
        "hyperliquid" => "BTC",
        v => {
            return Err(format!(
                "--venue {v:?}: binance-spot, bybit, okx or hyperliquid"
            ))
        }
    };
    let sim = match (&o.base, sim) {
        (Some(_), _) => None,
        (None, Some(s)) => Some(s),
        (None, None) => Some(Arc::new(
            Server::start(o.sim.clone()).map_err(|e| e.to_string())?,
        )),
    };
    let mut start = match (&o.base, &sim) {
        (Some(url), _) => Start::from_base(url).map_err(|e| e.to_string())?,
        (_, Some(s)) => Start::new(s.addr(), s.addr().to_string()),
        (None, None) => return Err("no venue".into()),
    };
    (start.loop_cfg.cpu, start.record) = (o.cpu, o.record.clone());
    start.labels = LABELS.map(String::from).to_vec();
    let file = match &o.api_secret_file {
        Some(path) => Some(secret::read_secret_file(path, "--api-secret-file")?),
        None => None,
    };
    let given = match (&o.api_secret, file) {
        (Some(_), Some(_)) => return Err("--api-secret and --api-secret-file: give one".into()),
        (Some(s), None) => Some(secret::Secret::new(s.clone().into_bytes())?),
        (None, f) => f,
    };
    let (key, sec, pass) = match (&o.api_key, given, &sim) {
        (Some(k), Some(s), _) => (k.clone(), s, None),
        (None, None, Some(s)) => {
            let c = s.config();
            let a = &c.accounts[0];
            let sec = secret::Secret::new(a.secret.clone().into_bytes())?;
            (a.api_key.clone(), sec, Some(c.passphrase))
        }
        (None, None, None) => return Err("--base needs --api-key and --api-secret".into()),
        _ => return Err("--api-key and --api-secret go together".into()),
    };
    secret::check_key_type(o.key_type, &o.venue, &sec)?;
    let s = Summary::default();
    if o.ws != Some(false) {
        let ws = WsApiStart::of(&start, o.ws_api.as_deref(), o.stream);
        start.ws_api = Some(ws.map_err(|e| e.to_string())?);
    }
    let keys = Keys {
        api_key: &key,
        secret: &sec.0,
        passphrase: pass.as_deref(),
    };
    let mut s = match o.venue.as_str() {
        "bybit" => drive::<Bybit>(o, control, s, &start, &keys, symbol)?,
        "okx" => drive::<Okx>(o, control, s, &start, &keys, symbol)?,
        // The key is the emulator's account's (`--api-secret`: a private key).
        "hyperliquid" => drive::<Exchange<Wallet>>(o, control, s, &start, &keys, symbol)?,
        _ => drive::<BinanceSpot>(o, control, s, &start, &keys, symbol)?,
    };
    // The emulator's counts; one started here stops when dropped.
    s.venue = sim.map(|srv| srv.report());
    Ok(s)
}

/// Starts the gateway on `E` and runs the strategy until the duration has passed
/// and every request has settled (or 3 s more).
fn drive<E: Account>(
    o: &Options,
    control: Arc<Control>,
    mut s: Summary,
    start: &Start,
    keys: &Keys<'_>,
    symbol: &'static str,
) -> Result<Summary, String> {
    let declare = |boot: &gateway::Boot, b: &mut _| E::declare(boot, b, keys, o.guard_ms * MS);
    let (mut lp, mut gw, pool) =
        Gateway::start(start, symbol, declare).map_err(|e| e.to_string())?;
    // One warning line per fallback: orders over REST, polling without a stream.
    let warnings = match start.ws_api.is_some() {
        true => {
            let probe;
            (gw, probe) = gateway::open_ws_api(&mut lp, gw, pool, 3 * SEC);
            probe.warnings(o.stream)
        }
        false => o
            .stream
            .then(|| NO_STREAM_WARNING.into())
            .into_iter()
            .collect(),
    };
    s.warnings
        .extend(warnings.into_iter().inspect(|w| eprintln!("{w}")));
    // The venue's dead man's switch, armed before the first quote.
    let (mut gw, machine, link) = protection::arm_at_start(
        &mut lp,
        gw,
        pool,
        start,
        o.protection,
        o.protection_timeout_ms,
        3 * SEC,
    )?;
    match machine.state() {
        protection::State::Unavailable => eprintln!(
            "mm_loop: warning: {}: {}: quotes stay on the book if this process dies",
            o.venue,
            machine.not_armed()
        ),
        protection::State::Refused | protection::State::Arming => eprintln!(
            "mm_loop: warning: {}; trading without it",
            machine.not_armed()
        ),
        _ => {}
    }
    // --etcd: the account's limits at the safe share, then at the grants.
    let host = format!("mm_loop-{}", std::process::id());
    // Up to a minute for etcd to reserve this host's safe share.
    let wait = std::time::Duration::from_secs(60);
    let leases = o
        .lease
        .start(lp.budget_mut(), gw.venue_mut(), &host, wait)?;
    let sym = Symbol::new(symbol).map_err(|e| e.to_string())?;
    let horizon_ns = ((o.duration_s * SEC as f64) as i64).max(1);
    let hl = o.venue == "hyperliquid";
    let mix = mix(gw.venue_mut(), sym, hl);
    let mix: Vec<(&[Part], f64)> = mix.iter().map(|(p, n)| (&p[..], *n)).collect();
    let windows = gw.venue().windows();
    let ((bucket, window_ns), per_s) =
        gateway::binding(lp.budget(), &windows, &mix, horizon_ns).ok_or("no limit binds")?;
    gw.poll_open_orders(POLL_EVERY);
    s.binding = lp.budget().name(bucket).unwrap_or("?").to_string();
    let st = lp.budget().stats(bucket).unwrap_or_default();
    let started = lp.now();
    let labels = LABELS.map(|n| gw.label(n).unwrap_or_default());
    let every = o.labels.map(std::time::Duration::from_secs_f64);
    let monitor = gw
        .monitor_labels(lp.budget(), every)
        .map_err(|e| e.to_string())?;
    let mm = Mm {
        req: Prepared::with_capacity(1024),
        symbol: Some(sym),
        period_ns: ((SEC as f64 / (per_s * o.demand)) as i64).max(1),
        next_cycle: started,
        started,
        end_at: started + (o.duration_s * SEC as f64) as i64,
        next_progress: started + SEC,
        binding: Some((bucket, window_ns.max(1), st.limit.max(1), st.admitted)),
        progress: (!o.quiet).then_some(o.json),
        labels,
        s,
        leases: leases.map(ergon_gatewayd::lease::Leases::new),
        hl,
        ..Mm::default()
    };
    let mm = Protected::new(mm, machine, sym).with_link(link).with_lane();
    let d = gateway::run(&mut lp, gw, pool, mm, control).map_err(|e| e.to_string())?;
    let mut s = d.strategy.inner.s;
    // A clean end: cancel what rests, then disarm.
    let (machine, link) = (d.strategy.machine, d.strategy.link);
    let (mut gw, m, _) =
        protection::stop_and_disarm(&mut lp, d.gateway, pool, machine, link, 3 * SEC)?;
    if !matches!(
        m.state(),
        protection::State::Disarmed | protection::State::Unavailable | protection::State::Off
    ) {
        eprintln!(
            "mm_loop: warning: ended with the switch still {}",
            m.state().as_str()
        );
    }
    let d = Ended { gateway: &mut gw };
    d.gateway.publish_labels(lp.now(), true);
    s.label_lines = monitor.map(|m| m.finish()).unwrap_or_default();
    if let Some(w) = d.gateway.finish_record() {
        s.warnings.extend(w.map_err(|e| e.to_string())?.warning());
    }
    s.gw = *d.gateway.stats();
    Ok(s)
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
        Ok(s) if o.json => println!("{}", to_json(&s)),
        Ok(s) => print!("{}", table(&s)),
        Err(e) => {
            eprintln!("mm_loop: {e}");
            return std::process::ExitCode::from(1);
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The gateway once the run and the stop phase are over.
struct Ended<'g, E> {
    gateway: &'g mut Gateway<E>,
}
