//! A market-making strategy over the ergon gateway, against Binance Spot or the
//! venue emulator.
//!
//! ```text
//! cargo run --release --example mm_loop -- [--venue binance-spot] [--base URL]
//!     [--duration SECS] [--demand X] [--cpu N] [--api-key K --api-secret S] [--json]
//!     [--no-stream]
//! ```
//!
//! Without `--base` it starts `ergon-venue-sim` in-process on loopback (no network,
//! no keys). Each cycle it refreshes two quotes (cancel-replace, or a first place),
//! reads the book (Normal), now and then the account (Bulk) and sends a protective
//! close (Urgent MARKET order); it polls open orders twice a second to learn which
//! quotes the venue ended. `--demand 3` offers three times as many cycles as the
//! binding limit admits: the gateway refuses the excess locally, so the venue never
//! answers 429.
//!
//! Everything about limits, sending, verdicts, re-sends and reconcile lives in the
//! gateway ([`ergon_io::gateway`]): this file only decides what to quote and reads
//! the typed events. Binance Spot's user data stream (listenKey) was discontinued
//! on 2026-02-20, so open orders come from polling; `--no-stream` says so without
//! the warning.
//!
//! It prints a progress line each second and a final table, or one JSON object with
//! `--json` (progress then goes to stderr).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_core::{BucketId, Class};
use ergon_io::event_loop::Config as LoopConfig;
use ergon_io::gateway::{
    self, Api, BinanceSpotAccount, Event, Gateway, OrderState, Prepared, Px, Side, Start, Stats,
    Strategy,
};
use ergon_venues::binance_spot::Counts;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;
const SYMBOL: &str = "BTCUSDT";
const POLL_EVERY: i64 = 500 * MS;
const QTY: Px = Px(10, 3);

const USAGE: &str = "usage: mm_loop [--venue binance-spot] [--base URL] [--duration SECS] \
[--demand X] [--cpu N] [--api-key K --api-secret S] [--json] [--no-stream]";

/// The one warning a run without a user data stream prints.
pub const NO_STREAM_WARNING: &str = "warning: Binance Spot's user data stream (listenKey) \
was discontinued on 2026-02-20; polling open orders instead";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The venue profile.
    pub venue: String,
    /// `http://host:port` of the venue; None starts the emulator.
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
    /// The emulator to start when `base` is None.
    pub sim: ergon_venue_sim::Config,
    /// Asked for the user data stream (false: `--no-stream`).
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

/// What the run did: the gateway's counts and the strategy's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// The gateway's counts (sent, applied, refused locally, unknown, reconciled ...).
    pub gw: Stats,
    /// Quotes the polls showed ended by the venue (filled, expired), quoted afresh.
    pub quotes_ended: u64,
    /// Open-order polls answered.
    pub polls: u64,
    /// Halts cleared by a person.
    pub halts_cleared: u64,
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
}

/// What each cycle offers: two quote refreshes (weight 1, one order each), a depth
/// read (weight 5), an account read every fourth cycle (weight 20), a close every
/// twentieth (weight 1, one order).
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

/// Tags: the high byte says what a request is for.
const QUOTE: u64 = 1 << 56; // + slot
const READ: u64 = 2 << 56;
const CLOSE: u64 = 3 << 56;
const CANCEL: u64 = 4 << 56;
const POLL: u64 = 5 << 56;

/// One side's quote: what rests, and what is on its way.
#[derive(Default)]
struct Quote {
    /// The order resting (its client order id), and since when.
    resting: Option<(String, i64)>,
    /// A place or replace in flight: its id and the order it replaces.
    pending: Option<(String, Option<String>)>,
}

struct Mm {
    req: Prepared,
    quotes: [Quote; 2],
    seq: u64,
    run_tag: String,
    cycle: u64,
    period_ns: i64,
    next_cycle: i64,
    next_poll: i64,
    poll_sent_at: Option<i64>,
    started: i64,
    end_at: i64,
    drain_until: i64,
    next_progress: i64,
    binding: BucketId,
    binding_window_ms: i64,
    binding_limit: u64,
    /// Admitted units of the binding limit per window of it: (window start, units).
    windows: Vec<(i64, u64)>,
    admitted_at: (i64, u64),
    /// The binding limit's admitted count at the start and at the last turn.
    admitted: (u64, u64),
    alerted: bool,
    control: Arc<Control>,
    quiet: bool,
    progress_to_stderr: bool,
    s: Summary,
}

impl Mm {
    fn cid(&mut self, side: &str) -> String {
        self.seq += 1;
        format!("{}{side}{}", self.run_tag, self.seq)
    }

    fn submit(
        &mut self,
        api: &mut Api<'_, '_, BinanceSpotAccount>,
        class: Class,
        tag: u64,
    ) -> bool {
        match api.submit(&mut self.req, class, tag) {
            Ok(()) => true,
            Err(e) => {
                self.on_event(api, e);
                false
            }
        }
    }

    fn cycle(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>) {
        let now = api.now();
        self.cycle += 1;
        let wiggle = (self.cycle % 7) as i64;
        for slot in 0..2 {
            if self.quotes[slot].pending.is_some() {
                continue;
            }
            let (side, price) = match slot {
                0 => (Side::Buy, Px(5_000_000 - 500 - wiggle, 2)),
                _ => (Side::Sell, Px(5_000_000 + 500 + wiggle, 2)),
            };
            let cid = self.cid(if slot == 0 { "b" } else { "a" });
            let old = self.quotes[slot].resting.take().map(|(c, _)| c);
            match &old {
                Some(o) => api
                    .venue()
                    .replace(&mut self.req, side, QTY, price, o, &cid, now),
                None => api
                    .venue()
                    .limit(&mut self.req, side, QTY, price, &cid, now),
            }
            self.quotes[slot].pending = Some((cid, old));
            self.submit(api, Class::Normal, QUOTE + slot as u64);
        }
        api.venue().depth(&mut self.req, 100, now);
        self.submit(api, Class::Normal, READ);
        if self.cycle % ACCOUNT_EVERY == 0 {
            api.venue().account(&mut self.req, now);
            self.submit(api, Class::Bulk, READ);
        }
        if self.cycle % CLOSE_EVERY == 0 {
            let cid = self.cid("x");
            api.venue()
                .market(&mut self.req, Side::Sell, Px(1, 3), &cid, now);
            self.submit(api, Class::Urgent, CLOSE);
        }
    }

    fn cancel(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>, cid: &str) {
        let now = api.now();
        api.venue().cancel(&mut self.req, cid, now);
        self.submit(api, Class::Normal, CANCEL);
    }

    /// A quote's request ended: `rests` is the order now resting for that side
    /// (None: quote afresh). An old order whose fate is unclear is canceled (a
    /// cancel of an order already gone is only refused).
    fn settle_quote(
        &mut self,
        api: &mut Api<'_, '_, BinanceSpotAccount>,
        slot: usize,
        new_rests: Option<bool>,
    ) {
        let now = api.now();
        let Some((cid, old)) = self.quotes[slot].pending.take() else {
            return;
        };
        match new_rests {
            Some(true) => self.quotes[slot].resting = Some((cid, now)),
            Some(false) => {
                if let Some(old) = old {
                    self.cancel(api, &old);
                }
            }
            // Surely nothing ran (refused locally, halted): the old one rests.
            None => self.quotes[slot].resting = old.map(|o| (o, now)),
        }
    }

    fn on_poll(&mut self, api: &Api<'_, '_, BinanceSpotAccount>, body: &[u8]) {
        self.s.polls += 1;
        let Some(sent_at) = self.poll_sent_at.take() else {
            return;
        };
        for q in &mut self.quotes {
            let Some((cid, since)) = &q.resting else {
                continue;
            };
            let mut open = false;
            api.venue()
                .open_ids(body, |id| open |= id == cid.as_bytes());
            // Only a quote that rested before the poll was sent can be missing.
            if !open && *since < sent_at {
                q.resting = None;
                self.s.quotes_ended += 1;
            }
        }
    }

    fn alert(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>) {
        if self.alerted {
            return;
        }
        self.alerted = true;
        self.s.alerts += 1;
        for a in ergon_venues::adapt::alerts(api.budget()) {
            eprintln!(
                "ALERT: bucket {} halted after ban #{}; no request and no connect until a person clears it",
                a.name, a.bans
            );
        }
    }

    fn progress(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>) {
        let now = api.now();
        self.track_windows(api);
        if now < self.next_progress {
            return;
        }
        self.next_progress += SEC;
        self.s.utilization = self.utilization(now);
        if self.quiet {
            return;
        }
        let g = api.stats();
        let line = format!(
            "t={:>3}s sent={} applied={} refused full={} held={} halted={} busy={} throttled={} banned={} unknown={} reconciled={} util={:.0}%",
            (now - self.started) / SEC, g.sent, g.applied, g.limited_full, g.limited_held,
            g.limited_halted, g.busy, g.throttled, g.banned, g.unknown, g.reconciled,
            self.s.utilization * 100.0
        );
        if self.progress_to_stderr {
            eprintln!("{line}");
        } else {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    }

    /// Samples the binding limit's admitted count at each of its windows (venue clock).
    fn track_windows(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>) {
        let now = api.now();
        let w = self.binding_window_ms;
        let start = api.venue().adapter.limits.clock.utc_ms(now).div_euclid(w) * w;
        let admitted = api.budget().stats(self.binding).admitted;
        self.admitted.1 = admitted;
        if start != self.admitted_at.0 {
            if self.admitted_at.0 != 0 {
                self.windows
                    .push((self.admitted_at.0, admitted - self.admitted_at.1));
            }
            self.admitted_at = (start, admitted);
        }
        for l in api
            .venue()
            .adapter
            .limits
            .of(Counts::Weight)
            .map(|l| l.bucket)
            .collect::<Vec<_>>()
        {
            self.s.weight_drift = self.s.weight_drift.max(api.budget().stats(l).drift);
        }
    }

    /// Mean use of the binding limit over the windows wholly inside the run; over
    /// the run as a whole if none was.
    fn utilization(&self, now: i64) -> f64 {
        let full = self.windows.iter().skip(1);
        let n = full.clone().count();
        let limit = self.binding_limit.max(1) as f64;
        if n == 0 {
            let windows =
                (now.min(self.end_at) - self.started) as f64 / (self.binding_window_ms * MS) as f64;
            return ((self.admitted.1 - self.admitted.0) as f64 / (limit * windows.max(1e-9)))
                .min(1.0);
        }
        full.map(|(_, u)| (*u as f64 / limit).min(1.0)).sum::<f64>() / n as f64
    }
}

impl Strategy<BinanceSpotAccount> for Mm {
    fn on_event(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>, ev: Event<'_>) {
        let tag = ev.tag();
        if let Event::Halted { .. } = ev {
            self.alert(api);
        }
        match (tag & (0xff << 56), ev) {
            (QUOTE, _) => {
                let slot = (tag & 1) as usize;
                match ev {
                    Event::Applied { .. } => self.settle_quote(api, slot, Some(true)),
                    Event::Reconciled { found, .. } => {
                        self.settle_quote(api, slot, Some(found == Some(OrderState::Open)))
                    }
                    Event::Limited { .. } | Event::Halted { .. } => {
                        self.settle_quote(api, slot, None)
                    }
                    // Refused or expired: a replace whose cancel failed leaves the old
                    // order's fate unclear.
                    Event::Rejected { .. } | Event::Expired { .. } => {
                        self.settle_quote(api, slot, Some(false))
                    }
                    Event::Retrying { .. } | Event::Reconciling { .. } => {}
                }
            }
            (POLL, Event::Applied { body, .. }) => self.on_poll(api, body),
            // Refused locally (the weight is shared with the quotes): try again
            // as soon as it has room, before the next cycle takes it.
            (POLL, Event::Limited { ready_at_ns, .. }) => {
                self.next_poll = ready_at_ns.clamp(api.now() + MS, api.now() + 100 * MS)
            }
            (POLL, e) if e.is_final() => self.poll_sent_at = None,
            _ => {}
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, BinanceSpotAccount>) {
        let now = api.now();
        if self.control.clear_halt.swap(false, Ordering::SeqCst) {
            let n = api.clear_halts();
            self.s.halts_cleared += n as u64;
            eprintln!("{n} halt(s) cleared by a person");
            self.alerted = false;
        }
        if self.control.stop.swap(false, Ordering::SeqCst) {
            self.end_at = self.end_at.min(now);
            self.drain_until = now + 3 * SEC;
        }
        if now < self.end_at {
            if self.poll_sent_at.is_none() && now >= self.next_poll {
                api.venue().open_orders(&mut self.req, now);
                self.next_poll = now + POLL_EVERY;
                if self.submit(api, Class::Normal, POLL) {
                    self.poll_sent_at = Some(now);
                }
            }
            // Offer cycles at the demanded rate; after a stall, do not burst.
            self.next_cycle = self.next_cycle.max(now - SEC);
            while self.next_cycle <= now {
                self.cycle(api);
                self.next_cycle += self.period_ns;
            }
            let _ = api.set_timer(1, self.next_cycle.min(self.end_at).min(self.next_poll));
        }
        self.progress(api);
        let _ = api.set_timer(2, self.next_progress);
        if now >= self.end_at {
            if api.in_flight() == 0 || now >= self.drain_until {
                self.s.utilization = self.utilization(now);
                api.stop();
            } else {
                let _ = api.set_timer(3, now + 50 * MS);
            }
        }
    }
}

/// Runs the strategy; `control` lets another thread clear halts or stop it. With no
/// `base` it talks to `sim` if given, else it starts the emulator of `o.sim`.
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
    let own = o.base.is_none() && sim.is_none();
    let sim = match (&o.base, sim) {
        (Some(_), _) => None,
        (None, Some(s)) => Some(s),
        (None, None) => Some(Arc::new(
            ergon_venue_sim::Server::start(o.sim.clone()).map_err(|e| e.to_string())?,
        )),
    };
    let mut start = match (&o.base, &sim) {
        (Some(url), _) => Start::from_base(url)?,
        (_, Some(s)) => Start::new(s.addr(), s.addr().to_string()),
        (None, None) => return Err("no venue".into()),
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
    let mut s = Summary::default();
    if o.stream {
        eprintln!("{NO_STREAM_WARNING}");
        s.warnings.push(NO_STREAM_WARNING.into());
    }
    start.loop_cfg = LoopConfig {
        cpu: o.cpu,
        ..LoopConfig::default()
    };
    let (mut lp, gw, pool) = Gateway::start(&start, |boot, b| {
        let info = boot.limits.as_deref().unwrap_or_default();
        BinanceSpotAccount::declare(info, b, boot.clock, o.guard_ms * MS, &key, &secret, SYMBOL)
    })
    .map_err(|e| e.to_string())?;

    // The binding limit: the one the mix exhausts first over this run.
    let horizon_ns = ((o.duration_s * SEC as f64) as i64).max(1);
    let limits = &gw.venue().adapter.limits;
    let (mut binding, mut cycles_per_s) = (None, f64::INFINITY);
    for l in &limits.limits {
        let limit = lp.budget().stats(l.bucket).limit as f64;
        let per_s =
            limit / (l.window_ns.min(horizon_ns) as f64 / SEC as f64) / cycle_cost(l.counts);
        if per_s < cycles_per_s {
            (cycles_per_s, binding) = (per_s, Some(l));
        }
    }
    let binding = binding.ok_or("exchangeInfo declares no limit")?;
    s.binding = lp.budget().name(binding.bucket).to_string();
    let started = lp.now();
    let admitted0 = lp.budget().stats(binding.bucket).admitted;
    let end_at = started + (o.duration_s * SEC as f64) as i64;
    let mm = Mm {
        req: Prepared::default(),
        quotes: Default::default(),
        seq: 0,
        run_tag: format!("mm{}", limits.clock.utc_ms(started) % 100_000),
        cycle: 0,
        period_ns: ((SEC as f64 / (cycles_per_s * o.demand)) as i64).max(1),
        next_cycle: started,
        next_poll: started,
        poll_sent_at: None,
        started,
        end_at,
        drain_until: end_at + 3 * SEC,
        next_progress: started + SEC,
        binding: binding.bucket,
        binding_window_ms: (binding.window_ns / MS).max(1),
        binding_limit: lp.budget().stats(binding.bucket).limit,
        windows: Vec::new(),
        admitted_at: (0, 0),
        admitted: (admitted0, admitted0),
        alerted: false,
        control,
        quiet: o.quiet,
        progress_to_stderr: o.json,
        s,
    };
    let d = gateway::run(&mut lp, gw, pool, mm).map_err(|e| e.to_string())?;
    let mut s = d.strategy.s;
    s.gw = *d.gateway.stats();
    drop(lp);
    s.venue = sim.map(|srv| match Arc::try_unwrap(srv) {
        Ok(srv) if own => srv.stop(),
        Ok(srv) => srv.report(),
        Err(shared) => shared.report(),
    });
    Ok(s)
}

fn table(s: &Summary) -> String {
    let g = &s.gw;
    let mut out = String::new();
    let mut row = |k: &str, v: String| out.push_str(&format!("{k:<28}{v}\n"));
    row("requests sent", g.sent.to_string());
    row("applied", g.applied.to_string());
    row("refused locally: full", g.limited_full.to_string());
    row("refused locally: held", g.limited_held.to_string());
    row("refused locally: halted", g.limited_halted.to_string());
    row("refused locally: too big", g.limited_too_big.to_string());
    row("no idle connection", g.busy.to_string());
    row("throttled by the venue", g.throttled.to_string());
    row("banned by the venue", g.banned.to_string());
    row("rejected", g.rejected.to_string());
    row("expired", g.expired.to_string());
    row(
        "clock skew (re-anchors)",
        format!("{} ({})", g.clock_skew, g.reanchors),
    );
    row("unknown", g.unknown.to_string());
    row(
        "reconciled (found)",
        format!("{} ({})", g.reconciled, g.reconciled_found),
    );
    row("re-sent (surely not run)", g.resent.to_string());
    row("open-order polls", s.polls.to_string());
    row(
        "utilization",
        format!("{:.1}% of {}", s.utilization * 100.0, s.binding),
    );
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
    let g = &s.gw;
    serde_json::json!({
        "sent": g.sent, "applied": g.applied,
        "refused": { "full": g.limited_full, "held": g.limited_held, "halted": g.limited_halted,
                     "tooBig": g.limited_too_big, "busy": g.busy, "ledgerFull": g.ledger_full },
        "throttled": g.throttled, "banned": g.banned, "rejected": g.rejected, "expired": g.expired,
        "clockSkew": g.clock_skew, "reanchors": g.reanchors, "unknown": g.unknown,
        "reconciled": g.reconciled, "reconciledFound": g.reconciled_found, "resent": g.resent,
        "polls": s.polls, "quotesEnded": s.quotes_ended, "alerts": s.alerts,
        "utilization": s.utilization, "binding": s.binding,
        "venue": s.venue.as_ref().map(|v| v.to_json()),
    })
}

/// The command line, as the usage line says.
pub fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let positive = |v: String, what: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|d| d.is_finite() && *d > 0.0)
                .ok_or_else(|| format!("{a} {v:?}: expected {what}"))
        };
        match a.as_str() {
            "--venue" => o.venue = value()?,
            "--base" => o.base = Some(value()?),
            "--duration" => o.duration_s = positive(value()?, "positive seconds")?,
            "--demand" => o.demand = positive(value()?, "a positive number")?,
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
        Ok(s) if o.json => println!("{}", to_json(&s)),
        Ok(s) => print!("{}", table(&s)),
        Err(e) => {
            eprintln!("mm_loop: {e}");
            return std::process::ExitCode::from(1);
        }
    }
    std::process::ExitCode::SUCCESS
}
