//! `mm_loop --gateway NAME`: the same quoting, through a running `ergon-gateway`
//! (over shared memory) instead of the process's own connections. The gateway
//! owns the account and its keys, so there is no `--base`, `--api-key` or
//! `--api-secret`; the strategy cannot see the budget, so `--demand X` offers
//! X times [`CYCLES_PER_S`] cycles a second and the gateway refuses the excess
//! locally. If the gateway goes away, every request in flight comes back Lost:
//! the strategy attaches to the restarted gateway (same name) and queries each
//! lost order by its client order id, never re-sending it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ergon_gateway::shm::{item_fates, AttachOptions, Call, ShmClient, ShmEvent};
use ergon_gateway::ItemFate;

use super::*;

/// Cycles a second offered at `--demand 1` (each: two quote refreshes, a book
/// read, now and then the account and a close).
pub const CYCLES_PER_S: f64 = 10.0;

const RECON: u64 = 5 << 56;
const KIND: u64 = 0xff << 56;

struct Remote<'s> {
    c: ShmClient,
    gateway: &'s str,
    /// The uid the gateway must run as.
    gateway_uid: u32,
    me: String,
    symbol: Symbol<'s>,
    /// Book levels read: 20 on Hyperliquid (its l2Book has no other depth),
    /// 100 elsewhere.
    depth: u32,
    quotes: [Quote; 2],
    /// Orders in flight by tag, for a query if the gateway is lost.
    orders: HashMap<u64, ClientOrderId>,
    unknown: Vec<ClientOrderId>,
    reconciling: std::collections::HashSet<u64>,
    seq: u64,
    cycle: u64,
    s: Summary,
}

impl Remote<'_> {
    /// It reads the polls of open orders (they are opt-in).
    fn attach_options(&self) -> AttachOptions {
        AttachOptions::new()
            .gateway_uid(self.gateway_uid)
            .open_orders(true)
    }

    fn tag(&mut self, kind: u64) -> u64 {
        self.seq += 1;
        kind | self.seq
    }

    fn submit(&mut self, call: &Call<'_>, class: Class, tag: u64) -> bool {
        match self.c.submit(call, class, tag) {
            Ok(()) => {
                self.s.gw.sent += 1;
                true
            }
            Err(_) => {
                self.s.gw.busy += 1;
                false
            }
        }
    }

    fn order(&mut self, kind: u64, side: Side, ty: OrderType, price: Option<&str>, qty: &str) {
        // From the block the gateway handed out at attach: never an id of an
        // earlier run, of this process or another.
        let Ok(cid) = self.c.next_client_order_id() else {
            return;
        };
        let o = NewOrder {
            symbol: self.symbol,
            side,
            order_type: ty,
            price: price.and_then(|p| Decimal::new(p).ok()),
            quantity: match Decimal::new(qty) {
                Ok(d) => d,
                Err(_) => return,
            },
            client_order_id: cid,
            reduce_only: false,
        };
        let tag = self.tag(kind);
        let slot = ((kind >> 48) & 1) as usize;
        let replaced = match kind & KIND {
            QUOTE => self.quotes[slot].resting.take().map(|(c, _)| c),
            _ => None,
        };
        let call = match replaced {
            Some(cancel) => Call::CancelReplace(CancelReplace { cancel, new: o }),
            None => Call::NewOrder(o),
        };
        let class = if kind == CLOSE { Urgent } else { Normal };
        if self.submit(&call, class, tag) {
            self.orders.insert(tag, cid);
            if kind & KIND == QUOTE {
                self.quotes[slot].pending = Some((cid, replaced));
            }
        } else if kind & KIND == QUOTE {
            self.quotes[slot].resting = replaced.map(|c| (c, 0));
        }
    }

    fn cycle(&mut self) {
        self.cycle += 1;
        let wiggle = (self.cycle % 7) as i64;
        for slot in 0..2u64 {
            if self.quotes[slot as usize].pending.is_some() {
                continue;
            }
            let (side, cents) = match slot {
                0 => (Side::Buy, 5_000_000 - 500 - wiggle),
                _ => (Side::Sell, 5_000_000 + 500 + wiggle),
            };
            let price = format!("{}.{:02}", cents / 100, cents % 100);
            let gtc = OrderType::Limit(TimeInForce::Gtc);
            self.order(QUOTE | (slot << 48), side, gtc, Some(&price), "0.010");
        }
        let (symbol, depth, read) = (self.symbol, self.depth, self.tag(READ));
        self.submit(&Call::Book { symbol, depth }, Normal, read);
        if self.cycle % ACCOUNT_EVERY == 0 {
            let t = self.tag(READ);
            self.submit(&Call::Account, Bulk, t);
        }
        if self.cycle % CLOSE_EVERY == 0 {
            self.order(CLOSE, Side::Sell, OrderType::Market, None, "0.001");
        }
    }

    fn on_event(&mut self, ev: ShmEvent, body: &[u8], now: i64) {
        let tag = ev.tag();
        let g = &mut self.s.gw;
        match ev {
            ShmEvent::Applied { .. } => g.applied += 1,
            // NotYours: an id of another client's block (never, with its own ids).
            ShmEvent::Rejected { .. } | ShmEvent::NotYours { .. } => g.rejected += 1,
            ShmEvent::DuplicateId { .. } => g.duplicate_ids += 1,
            ShmEvent::Limited { .. } => g.limited_full += 1,
            ShmEvent::Expired { .. } => g.expired += 1,
            ShmEvent::Retrying { .. } => g.resent += 1,
            ShmEvent::Reconciling { .. } => {
                g.unknown += 1;
                self.reconciling.insert(tag);
            }
            ShmEvent::Reconciled { found, .. } => {
                g.reconciled += 1;
                g.reconciled_found += u64::from(found.is_some());
            }
            ShmEvent::Halted { .. } => {
                g.halted += 1;
                self.s.alerts += 1;
                eprintln!("ALERT: a bucket of gateway {} halted (ban)", self.gateway);
            }
            // An unknown order (a lost read is harmless: reading again is).
            ShmEvent::Lost { .. } if !self.reconciling.contains(&tag) => {
                g.unknown += u64::from(self.orders.contains_key(&tag));
            }
            ShmEvent::Lost { .. } => {}
            // A cancel-replace's parts each ended (read below, with the quote).
            ShmEvent::BatchSettled { .. } => {}
            // Its outcome stays unknown: kept with the lost ones, asked again.
            ShmEvent::Unresolved { .. } => g.unknown += 1,
            // An unresolved order showed up: the polls and the stream manage it.
            // A part's fate: read with its BatchSettled's body, below. The
            // switch's notes: the polls tell which quotes it cancelled.
            ShmEvent::Late { .. }
            | ShmEvent::Item { .. }
            | ShmEvent::Protection { .. }
            | ShmEvent::ProtectionFired => return,
            ShmEvent::OpenOrders { age_ns } => {
                g.polls += 1;
                // On this process's clock, a millisecond early for the hand-over.
                return self.on_poll(now - age_ns - MS, body);
            }
            // The stream says a quote ended: quoted afresh (the polls check it).
            ShmEvent::OrderUpdate(x) => {
                for q in &mut self.quotes {
                    if x.state.is_final() && q.resting.is_some_and(|(c, _)| c == x.client_order_id)
                    {
                        (q.resting, self.s.quotes_ended) = (None, self.s.quotes_ended + 1);
                    }
                }
                return;
            }
        }
        if !ev.is_final() {
            return;
        }
        self.reconciling.remove(&tag);
        let cid = self.orders.remove(&tag);
        if let (ShmEvent::Lost { .. } | ShmEvent::Unresolved { .. }, Some(cid)) = (ev, cid) {
            self.unknown.push(cid);
        }
        match tag & KIND {
            // A query lost with its gateway: asked again after the next attach.
            RECON if matches!(ev, ShmEvent::Lost { .. }) => {}
            RECON => {
                let found = matches!(ev, ShmEvent::Applied { .. });
                self.s.gw.reconciled += 1;
                self.s.gw.reconciled_found += u64::from(found);
                // Found: it may rest unmanaged; cancel it (refused if it ended).
                if let (true, Some(cid)) = (found, cid) {
                    let it = OrderRef {
                        symbol: self.symbol,
                        client_order_id: cid,
                    };
                    let t = self.tag(CANCEL);
                    self.submit(&Call::Cancel(it), Normal, t);
                }
            }
            QUOTE => {
                let slot = ((tag >> 48) & 1) as usize;
                let Some((cid, old)) = self.quotes[slot].pending.take() else {
                    return;
                };
                let rests = match ev {
                    ShmEvent::Applied { .. } => Some(true),
                    // Its parts: item 0 the new quote, item 1 the old one's cancel.
                    // The new one rests if it was placed; an old one whose cancel
                    // did not run still rests, and is cancelled.
                    ShmEvent::BatchSettled { .. } => {
                        let fates = || item_fates(body).flatten();
                        let placed = fates().any(|(i, f)| {
                            i == 0
                                && match f {
                                    ItemFate::Applied => true,
                                    ItemFate::Found(s) => !s.is_final(),
                                    _ => false,
                                }
                        });
                        let cancelled = fates().any(|(i, f)| {
                            i == 1
                                && match f {
                                    ItemFate::Applied => true,
                                    ItemFate::Found(s) => s.is_final(),
                                    _ => false,
                                }
                        });
                        if let (true, false, Some(old)) = (placed, cancelled, old) {
                            let it = OrderRef {
                                symbol: self.symbol,
                                client_order_id: old,
                            };
                            let t = self.tag(CANCEL);
                            self.submit(&Call::Cancel(it), Normal, t);
                        }
                        Some(placed)
                    }
                    ShmEvent::Reconciled { found, .. } => {
                        Some(found.is_some_and(|s| !s.is_final()))
                    }
                    ShmEvent::Limited { .. }
                    | ShmEvent::Halted { .. }
                    | ShmEvent::DuplicateId { .. }
                    | ShmEvent::NotYours { .. } => None,
                    _ => Some(false),
                };
                match (rests, old) {
                    (Some(true), _) => self.quotes[slot].resting = Some((cid, now)),
                    (Some(false), Some(old)) => {
                        let it = OrderRef {
                            symbol: self.symbol,
                            client_order_id: old,
                        };
                        let t = self.tag(CANCEL);
                        self.submit(&Call::Cancel(it), Normal, t);
                    }
                    (Some(false), None) => {}
                    (None, old) => self.quotes[slot].resting = old.map(|o| (o, now)),
                }
            }
            _ => {}
        }
    }

    fn on_poll(&mut self, sent_at: i64, ids: &[u8]) {
        for q in &mut self.quotes {
            let Some((cid, since)) = q.resting else {
                continue;
            };
            let open = ids
                .split(|&b| b == b'\n')
                .any(|l| l == cid.as_str().as_bytes());
            if !open && since < sent_at {
                q.resting = None;
                self.s.quotes_ended += 1;
            }
        }
    }

    fn drain(&mut self, now: i64) {
        while let Some((ev, body)) = self.c.poll() {
            let body = body.to_vec();
            self.on_event(ev, &body, now);
        }
    }

    /// The gateway went away: attach to the restarted one and query every
    /// request whose outcome is unknown (never re-send it).
    fn recover(&mut self, now: i64) -> Result<(), String> {
        self.drain(now);
        let until = Instant::now() + Duration::from_secs(30);
        self.c = loop {
            match ShmClient::attach_with(self.gateway, &self.me, self.attach_options()) {
                Ok(c) => break c,
                Err(e) if Instant::now() > until => return Err(format!("gateway lost: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        eprintln!(
            "mm_loop: gateway {} back; querying {} unknown orders",
            self.gateway,
            self.unknown.len()
        );
        self.quotes = Default::default();
        for cid in std::mem::take(&mut self.unknown) {
            let it = OrderRef {
                symbol: self.symbol,
                client_order_id: cid,
            };
            let t = self.tag(RECON);
            if self.submit(&Call::Query(it), Urgent, t) {
                self.orders.insert(t, cid);
            }
        }
        Ok(())
    }
}

/// Runs the strategy through the gateway `gateway` for `o.duration_s`.
pub fn run(o: &Options, gateway: &str) -> Result<Summary, String> {
    if o.base.is_some() || o.api_key.is_some() || o.api_secret.is_some() {
        return Err(
            "--gateway takes no --base, --api-key or --api-secret: the gateway owns the account"
                .into(),
        );
    }
    let symbol = match o.venue.as_str() {
        "okx" => "BTC-USDT-SWAP",
        "hyperliquid" => "BTC",
        _ => "BTCUSDT",
    };
    let me = format!("mm_loop-{}", std::process::id());
    let gateway_uid = o.gateway_uid.unwrap_or_else(ergon_gateway::shm::own_uid);
    // The polls of open orders are opt-in: this loop reads them to tell which
    // quotes ended.
    let with = AttachOptions::new()
        .gateway_uid(gateway_uid)
        .open_orders(true);
    let c = ShmClient::attach_with(gateway, &me, with).map_err(|e| e.to_string())?;
    let mut r = Remote {
        c,
        gateway_uid,
        gateway,
        me,
        symbol: Symbol::new(symbol).map_err(|e| e.to_string())?,
        depth: if o.venue == "hyperliquid" { 20 } else { 100 },
        quotes: Default::default(),
        orders: HashMap::new(),
        unknown: Vec::new(),
        reconciling: Default::default(),
        seq: 0,
        cycle: 0,
        s: Summary {
            binding: format!("gateway {gateway} (ergon-gateway --stats --name {gateway})"),
            ..Summary::default()
        },
    };
    let t0 = Instant::now();
    let now = || t0.elapsed().as_nanos() as i64;
    let end = (o.duration_s * SEC as f64) as i64;
    let period = ((SEC as f64 / (CYCLES_PER_S * o.demand)) as i64).max(1);
    let (mut next, mut progress) = (0i64, SEC);
    // Requests still in flight at the end are waited for: 3 s, or on
    // Hyperliquid 10 s (a lost action is found or not found only after its
    // `expiresAfter`, 5 s, and the gateway's margin).
    let grace = if o.venue == "hyperliquid" { 10 } else { 3 } * SEC;
    while now() < end || (r.c.in_flight() > 0 && now() < end + grace) {
        let t = now();
        if r.c.is_gone() {
            r.recover(t)?;
        }
        next = next.max(t - SEC);
        while t < end && next <= t {
            r.cycle();
            next += period;
        }
        r.drain(t);
        if t >= progress && !o.quiet {
            progress += SEC;
            let g = &r.s.gw;
            let line = format!(
                "t={:>3}s sent={} applied={} refused={} unknown={} reconciled={}",
                t / SEC,
                g.sent,
                g.applied,
                g.limited_full,
                g.unknown,
                g.reconciled
            );
            match o.json {
                true => eprintln!("{line}"),
                false => println!("{line}"),
            }
        }
        r.c.wait(1);
    }
    Ok(r.s)
}
