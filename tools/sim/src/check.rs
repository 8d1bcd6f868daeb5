//! The promises, checked from outside the gateway: every request ends with
//! exactly one final event (checked as each event comes), and at the end every
//! final event agrees with what the venue holds, no client order id ran twice,
//! and the venue never counted more than its limits.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use ergon_gateway::{Event, ItemFate, OrderState};
use ergon_venue_sim::report::{OrderView, Report};
use ergon_venue_sim::LimitType;

use crate::rng::Rng;

/// What a request was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A new order.
    Place,
    /// A cancel of one order.
    Cancel,
    /// A cancel-replace: the cancel of `old` (part 1), a new order (part 0).
    Replace,
    /// A batch of new orders, item `i` placing `batch[i]` (two items may name
    /// one client order id: the venue refuses the second).
    Batch,
    /// A batch of cancels (Bybit's `cancel-batch`), item `i` cancelling
    /// `batch[i]` (each order cancelled by this request only).
    BatchCancel,
}

/// An event, owned, reduced to what the checks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Final {
    /// The request's tag.
    pub tag: u64,
    /// What it says.
    pub what: What,
}

/// What an event says of its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum What {
    /// The venue ran it.
    Applied,
    /// Refused by the venue: it did not run.
    Rejected,
    /// Refused locally: the id is live.
    DuplicateId,
    /// Refused locally by the budget: nothing sent.
    Limited,
    /// Surely did not run; not sent again.
    Expired,
    /// A ban: it did not run.
    Halted,
    /// Reconciled: found in this state, or (None) it never ran.
    Reconciled(Option<OrderState>),
    /// Its outcome stays unknown.
    Unresolved,
    /// A batch settled item by item.
    BatchSettled,
    /// After Unresolved: the order showed up.
    Late,
    /// One part of a request of several: its index and fate (not final).
    Item(u8, ItemFate),
}

impl What {
    fn is_final(self) -> bool {
        !matches!(self, What::Late | What::Item(..))
    }
}

impl Final {
    /// The checks' view of `e`; None for a step (Retrying, Reconciling, an item)
    /// or the gateway's own events.
    pub fn of(e: &Event<'_>) -> Option<Final> {
        let (tag, what) = match *e {
            Event::Applied { tag, .. } => (tag, What::Applied),
            Event::Rejected { tag } => (tag, What::Rejected),
            Event::DuplicateId { tag } => (tag, What::DuplicateId),
            Event::Limited { tag, .. } => (tag, What::Limited),
            Event::Expired { tag, .. } => (tag, What::Expired),
            Event::Halted { tag, .. } => (tag, What::Halted),
            Event::Reconciled { tag, found } => (tag, What::Reconciled(found)),
            Event::Unresolved { tag } => (tag, What::Unresolved),
            Event::BatchSettled { tag } => (tag, What::BatchSettled),
            Event::Late { tag, .. } => (tag, What::Late),
            Event::Item { tag, item, fate } => (tag, What::Item(item, fate)),
            _ => return None,
        };
        Some(Final { tag, what })
    }
}

struct Req {
    kind: Kind,
    /// The order it places or cancels (a replace: the new one).
    cid: String,
    /// A replace's cancelled order.
    old: Option<String>,
    /// A batch's (or a batch cancel's) items' client order ids, in the
    /// request's order.
    batch: Vec<String>,
    items: Vec<(u8, ItemFate)>,
    finals: Vec<What>,
    lates: u32,
    /// In flight when the gateway was killed, and not in its journal (a
    /// cancel): the daemon promises it nothing, so it is owed no final event.
    lost: bool,
}

/// A place or replace whose first final event says it ran.
fn ran(r: &Req) -> bool {
    matches!(r.kind, Kind::Place | Kind::Replace)
        && matches!(
            r.finals.first(),
            Some(What::Applied | What::Reconciled(Some(_)))
        )
}

/// The strategy's requests and their events.
#[derive(Default)]
pub struct Ledger {
    next: u64,
    reqs: BTreeMap<u64, Req>,
    /// Orders a cancel or a replace was submitted for (a set: a lookup per request
    /// each time the strategy picks an order, so not a list).
    cancelled: HashSet<String>,
    /// Placed orders by client order id (places and replaces).
    by_cid: HashMap<String, u64>,
    /// The tags [`Ledger::pick_resting`] picks from, in tag order: placed, ran,
    /// not cancelled. Kept as events come, so a pick does not scan every request.
    resting: BTreeSet<u64>,
    /// When the last request ended Unresolved (0: none did).
    last_unresolved_ns: i64,
}

impl Ledger {
    /// A fresh tag.
    pub fn next_tag(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Request `tag` is submitted.
    pub fn submitted(&mut self, tag: u64, kind: Kind, cid: &str) {
        self.submitted_replace(tag, kind, cid, None);
    }

    /// Request `tag` is submitted; a replace names the order it cancels.
    pub fn submitted_replace(&mut self, tag: u64, kind: Kind, cid: &str, old: Option<&str>) {
        let cancels = match kind {
            Kind::Cancel => Some(cid),
            _ => old,
        };
        if let Some(c) = cancels {
            self.cancelled.insert(c.to_string());
            if let Some(t) = self.by_cid.get(c) {
                self.resting.remove(t);
            }
        }
        if matches!(kind, Kind::Place | Kind::Replace) {
            self.by_cid.insert(cid.to_string(), tag);
        }
        let (finals, lates, cid) = (Vec::new(), 0, cid.to_string());
        let (old, items) = (old.map(str::to_string), Vec::new());
        let r = Req {
            kind,
            cid,
            old,
            batch: Vec::new(),
            items,
            finals,
            lates,
            lost: false,
        };
        self.reqs.insert(tag, r);
    }

    /// Batch `tag` is submitted: its items place `cids`, in order.
    pub fn submitted_batch(&mut self, tag: u64, cids: Vec<String>) {
        self.submitted(tag, Kind::Batch, "");
        if let Some(r) = self.reqs.get_mut(&tag) {
            r.batch = cids;
        }
    }

    /// Batch cancel `tag` is submitted: its items cancel `cids`, in order.
    pub fn submitted_batch_cancel(&mut self, tag: u64, cids: Vec<String>) {
        self.submitted(tag, Kind::BatchCancel, "");
        for c in &cids {
            self.cancelled.insert(c.clone());
            if let Some(t) = self.by_cid.get(c) {
                self.resting.remove(t);
            }
        }
        if let Some(r) = self.reqs.get_mut(&tag) {
            r.batch = cids;
        }
    }

    /// The client order id item `item` of batch `tag` places.
    pub fn item_cid(&self, tag: u64, item: u8) -> Option<&str> {
        let r = self.reqs.get(&tag).filter(|r| r.kind == Kind::Batch)?;
        r.batch.get(usize::from(item)).map(String::as_str)
    }

    /// Request `tag` could not be prepared: it never existed.
    pub fn unprepared(&mut self, tag: u64) {
        if let Some(r) = self.reqs.remove(&tag) {
            let cs: Vec<&String> = match r.kind {
                Kind::Cancel => vec![&r.cid],
                Kind::BatchCancel => r.batch.iter().collect(),
                _ => r.old.iter().collect(),
            };
            for c in cs {
                self.cancelled.remove(c);
                if let Some(&t) = self.by_cid.get(c) {
                    if self.reqs.get(&t).is_some_and(ran) {
                        self.resting.insert(t);
                    }
                }
            }
            if matches!(r.kind, Kind::Place | Kind::Replace) {
                self.by_cid.remove(&r.cid);
            }
        }
    }

    /// A placed order the strategy may believe rests (ran, not yet cancelled).
    pub fn pick_resting(&mut self, rng: &mut Rng) -> Option<String> {
        if self.resting.is_empty() {
            return None;
        }
        let i = rng.range(0, self.resting.len() as i64) as usize;
        let tag = self.resting.iter().nth(i)?;
        self.reqs.get(tag).map(|r| r.cid.clone())
    }

    /// One event, checked: one final event per request, a Late only after an
    /// Unresolved and at most once.
    pub fn on_event(&mut self, f: Final, now: i64) -> Result<(), String> {
        let Some(r) = self.reqs.get_mut(&f.tag) else {
            return Ok(()); // the gateway's own (open orders, the switch)
        };
        if let What::Item(i, fate) = f.what {
            r.items.push((i, fate));
            return match r.items.iter().filter(|(j, _)| *j == i).count() {
                1 => Ok(()),
                _ => Err(format!(
                    "t={now}: tag {}: part {i} has two fates: {:?}",
                    f.tag, r.items
                )),
            };
        }
        if f.what == What::Late {
            r.lates += 1;
            // A batch or replace: one Late at most per part left Unresolved.
            let unresolved_parts = r
                .items
                .iter()
                .filter(|(_, f)| *f == ItemFate::Unresolved)
                .count() as u32;
            return match (r.finals.first(), r.lates) {
                (Some(What::Unresolved), 1) => Ok(()),
                (Some(What::BatchSettled), n) if n <= unresolved_parts => Ok(()),
                // Its final event went unread with its hub client's dropped
                // name; the name's next process still hears its Late (once).
                (None, 1) if r.lost => Ok(()),
                (first, n) => Err(format!(
                    "t={now}: tag {} ({:?} {}): Late #{n} after {first:?}",
                    f.tag, r.kind, r.cid
                )),
            };
        }
        debug_assert!(f.what.is_final());
        if r.lost {
            return Err(format!(
                "t={now}: tag {} ({:?} {}): a final event {:?} after it died with the gateway",
                f.tag, r.kind, r.cid, f.what
            ));
        }
        r.finals.push(f.what);
        if r.finals.len() == 1 && ran(r) && !self.cancelled.contains(&r.cid) {
            self.resting.insert(f.tag);
        }
        if f.what == What::Unresolved {
            self.last_unresolved_ns = self.last_unresolved_ns.max(now);
        }
        match r.finals.len() {
            1 => Ok(()),
            _ => Err(format!(
                "t={now}: tag {} ({:?} {}): a second final event: {:?}",
                f.tag, r.kind, r.cid, r.finals
            )),
        }
    }

    /// The request that placed `cid` (a place or a replace).
    pub fn tag_of(&self, cid: &str) -> Option<u64> {
        self.by_cid.get(cid).copied()
    }

    /// The order request `tag` places (a place, or a replace's new order).
    pub fn placed_cid(&self, tag: u64) -> Option<&str> {
        self.reqs
            .get(&tag)
            .filter(|r| matches!(r.kind, Kind::Place | Kind::Replace))
            .map(|r| r.cid.as_str())
    }

    /// What request `tag` is for.
    pub fn kind_of(&self, tag: u64) -> Option<Kind> {
        self.reqs.get(&tag).map(|r| r.kind)
    }

    /// Request `tag`'s first final event, if it had one.
    pub fn first_final(&self, tag: u64) -> Option<What> {
        self.reqs.get(&tag).and_then(|r| r.finals.first().copied())
    }

    /// What request `tag` heard of part `item`, if anything.
    pub fn item_fate(&self, tag: u64, item: u8) -> Option<ItemFate> {
        let r = self.reqs.get(&tag)?;
        r.items.iter().find(|(i, _)| *i == item).map(|(_, f)| *f)
    }

    /// Whether request `tag` has had a fate for part `item`.
    pub fn has_item(&self, tag: u64, item: u8) -> bool {
        self.reqs
            .get(&tag)
            .is_some_and(|r| r.items.iter().any(|(i, _)| *i == item))
    }

    /// The requests without a final event yet, in tag order.
    pub fn open_tags(&self) -> Vec<u64> {
        self.reqs
            .iter()
            .filter(|(_, r)| r.finals.is_empty() && !r.lost)
            .map(|(t, _)| *t)
            .collect()
    }

    /// Request `tag` died with the gateway and no journal keeps it: it is owed
    /// no final event (and none may come).
    pub fn lost_with_process(&mut self, tag: u64) {
        if let Some(r) = self.reqs.get_mut(&tag) {
            r.lost = true;
        }
    }

    /// How many requests ended with each kind of final event, by name.
    pub fn tally(&self) -> BTreeMap<String, u64> {
        /// A line of the tally before its name is written: counted by value,
        /// each name written once (a `format!` a request was 1 % of a run).
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        enum Line {
            Final(Kind, Option<What>, bool),
            Late(Kind),
            Item(Kind, ItemFate),
        }
        let mut n: HashMap<Line, u64> = HashMap::new();
        for r in self.reqs.values() {
            let first = r.finals.first().copied();
            *n.entry(Line::Final(r.kind, first, r.lost)).or_insert(0) += 1;
            if r.lates > 0 {
                *n.entry(Line::Late(r.kind)).or_insert(0) += 1;
            }
            if matches!(r.kind, Kind::Batch | Kind::BatchCancel) {
                for (_, f) in &r.items {
                    *n.entry(Line::Item(r.kind, *f)).or_insert(0) += 1;
                }
            }
        }
        let mut t = BTreeMap::new();
        for (line, count) in n {
            let key = match line {
                Line::Final(kind, first, lost) => {
                    let name = match first {
                        Some(What::Reconciled(Some(_))) => "Reconciled(found)".to_string(),
                        Some(What::Reconciled(None)) => "Reconciled(never ran)".to_string(),
                        Some(w) => format!("{w:?}"),
                        None if lost => "lost with the process".to_string(),
                        None => "none".to_string(),
                    };
                    format!("{kind:?} {name}")
                }
                Line::Late(kind) => format!("{kind:?} Late"),
                Line::Item(kind, f) => format!("{kind:?} item {f:?}"),
            };
            *t.entry(key).or_insert(0) += count;
        }
        t
    }

    /// When the last request ended Unresolved (0: none did).
    pub fn last_unresolved_ns(&self) -> i64 {
        self.last_unresolved_ns
    }

    /// The requests owed a [`What::Late`]: places that ended Unresolved whose order
    /// rests at the venue (`orders`), and no Late came yet.
    pub fn owed_late(&self, orders: &[OrderView]) -> Vec<u64> {
        // The resting orders' ids once (a scan of the orders a request was
        // quadratic in the run's length).
        let resting: HashSet<&str> = orders
            .iter()
            .filter(|o| o.status == "NEW")
            .map(|o| o.client_id.as_str())
            .collect();
        self.reqs
            .iter()
            .filter(|(_, r)| r.kind == Kind::Place && r.finals.first() == Some(&What::Unresolved))
            .filter(|(_, r)| r.lates == 0)
            .filter(|(_, r)| resting.contains(r.cid.as_str()))
            .map(|(tag, _)| *tag)
            .collect()
    }

    /// Whether request `tag` had its [`What::Late`].
    pub fn has_late(&self, tag: u64) -> bool {
        self.reqs.get(&tag).is_some_and(|r| r.lates > 0)
    }

    /// `owed`: each order whose request ended Unresolved and that rests at the
    /// venue was owed a Late (the gateway polled open orders through its watch).
    pub fn lates_owed(&self, orders: &[OrderView], owed: bool) -> Vec<String> {
        if !owed {
            return Vec::new();
        }
        self.owed_late(orders)
            .into_iter()
            .map(|tag| {
                format!(
                    "tag {tag} (Place {}): Unresolved, rests at the venue, and no Late came through the watch",
                    self.reqs[&tag].cid
                )
            })
            .collect()
    }

    /// The checks at the end, against the venue's truth.
    /// `injected`: bans the run itself made or a burst written blind to a venue
    /// clock step drew (not the gateway's doing); `shared`:
    /// another sender used the IP's weight (its 429s and the windows it filled
    /// are not the gateway's doing either; the order limits are the account's);
    /// `blind`: 429s (weight, orders) to requests written before the gateway
    /// could know of a venue clock step (each excuses itself and at most the
    /// one window it found full).
    pub fn at_end(
        &self,
        report: &Report,
        orders: &[OrderView],
        in_flight: usize,
        injected: u64,
        shared: bool,
        blind: (u64, u64),
    ) -> Vec<String> {
        let mut v = Vec::new();
        if report.duplicates > 0 {
            v.push(format!(
                "{} client order ids executed twice at the venue",
                report.duplicates
            ));
        }
        if in_flight > 0 {
            v.push(format!(
                "{in_flight} requests still in the ledger after the drain"
            ));
        }
        let throttled = match shared {
            true => 0,
            false => report.throttled,
        };
        let unexcused =
            throttled.saturating_sub(blind.0) + report.order_rate_limited.saturating_sub(blind.1);
        if unexcused > 0 || report.bans > injected {
            v.push(format!(
                "the venue answered 429 {} times ({} order-rate), banned {} times",
                report.throttled, report.order_rate_limited, report.bans
            ));
        }
        let mut blind_windows = blind.0 + blind.1;
        for l in &report.limits {
            let weight = l.rate_limit.kind == LimitType::RequestWeight;
            let excused = blind_windows.min(l.windows_over);
            blind_windows -= excused;
            if l.windows_over > excused && !(shared && weight) {
                v.push(format!(
                    "the venue counted over {:?}: {} windows",
                    l.rate_limit, l.windows_over
                ));
            }
        }
        // The first order of each client order id (as a scan from the oldest
        // finds it), indexed once: a scan a request was quadratic.
        let mut first: HashMap<&str, &OrderView> = HashMap::with_capacity(orders.len());
        for o in orders {
            first.entry(o.client_id.as_str()).or_insert(o);
        }
        let find = |cid: &str| first.get(cid).copied();
        // The venue's orders by client order id, for the batches' items (built
        // only in the runs that sent batches).
        let mut held: HashMap<&str, usize> = HashMap::new();
        if self.reqs.values().any(|r| r.kind == Kind::Batch) {
            for o in orders {
                *held.entry(o.client_id.as_str()).or_insert(0) += 1;
            }
        }
        for (tag, r) in &self.reqs {
            let Some(first) = r.finals.first() else {
                if r.lost {
                    continue;
                }
                v.push(format!(
                    "tag {tag} ({:?} {}): no final event",
                    r.kind, r.cid
                ));
                continue;
            };
            let at_venue = find(&r.cid);
            let wrong = match (r.kind, first) {
                (Kind::Place, What::Applied | What::Reconciled(Some(_))) => at_venue.is_none(),
                (
                    Kind::Place,
                    What::Rejected
                    | What::DuplicateId
                    | What::Limited
                    | What::Expired
                    | What::Halted
                    | What::Reconciled(None),
                ) => at_venue.is_some(),
                (Kind::Cancel, What::Applied) => at_venue.map_or(true, |o| o.status != "CANCELED"),
                (Kind::Replace, _) => {
                    let old = r.old.as_deref().and_then(find);
                    let cancelled = old.is_some_and(|o| o.status == "CANCELED");
                    replace_wrong(*first, &r.items, at_venue.is_some(), cancelled)
                }
                (Kind::Batch, _) => {
                    let count = |cid: &str| held.get(cid).copied().unwrap_or(0);
                    if let Some(w) = batch_wrong(*first, &r.items, &r.batch, count) {
                        v.push(format!("tag {tag} (Batch {:?}): {w}", r.batch));
                    }
                    false
                }
                (Kind::BatchCancel, _) => {
                    let cancelled = |cid: &str| find(cid).is_some_and(|o| o.status == "CANCELED");
                    if let Some(w) = cancels_wrong(*first, &r.items, &r.batch, cancelled) {
                        v.push(format!("tag {tag} (BatchCancel {:?}): {w}", r.batch));
                    }
                    false
                }
                _ => false,
            };
            if wrong {
                let old = r.old.as_deref().and_then(find).map(|o| o.status.as_str());
                v.push(format!(
                    "tag {tag} ({:?} {}): final {first:?} (parts {:?}) but the venue holds {:?} (the replaced order: {old:?})",
                    r.kind,
                    r.cid,
                    r.items,
                    at_venue.map(|o| o.status.as_str())
                ));
            }
        }
        v
    }
}

/// Whether a replace's events say other than the venue: `placed`, its new order
/// is at the venue; `cancelled`, its old order is CANCELED (only this request
/// cancels it).
fn replace_wrong(first: What, items: &[(u8, ItemFate)], placed: bool, cancelled: bool) -> bool {
    // What the events say ran (Some(true)), did not (Some(false)), or not known.
    let said = |part: u8| -> Option<bool> {
        if let Some((_, f)) = items.iter().find(|(i, _)| *i == part) {
            return match f {
                // The cancelled order found: cancelled only if its state says so.
                ItemFate::Found(state) if part == 1 => Some(*state == OrderState::Canceled),
                ItemFate::Applied | ItemFate::Found(_) => Some(true),
                ItemFate::Rejected | ItemFate::NotRun | ItemFate::NeverRan => Some(false),
                _ => None,
            };
        }
        match first {
            What::Applied => Some(true),
            What::Rejected
            | What::DuplicateId
            | What::Limited
            | What::Expired
            | What::Halted
            | What::Reconciled(None) => Some(false),
            // Found by the new order's id: says nothing of the cancel.
            What::Reconciled(Some(_)) if part == 0 => Some(true),
            _ => None,
        }
    };
    said(0).is_some_and(|ran| ran != placed) || said(1).is_some_and(|ran| ran != cancelled)
}

/// What a batch item's events say of it: ran (`Some(true)`), did not
/// (`Some(false)`), or not known (None). Its own [`Event::Item`] if it had one,
/// else the batch's one final event (which then holds for every item).
fn item_said(first: What, items: &[(u8, ItemFate)], item: u8) -> Option<bool> {
    if let Some((_, f)) = items.iter().find(|(i, _)| *i == item) {
        return match f {
            ItemFate::Applied | ItemFate::Found(_) => Some(true),
            ItemFate::Rejected | ItemFate::NotRun | ItemFate::NeverRan => Some(false),
            ItemFate::Unresolved => None,
        };
    }
    match first {
        What::Applied | What::Reconciled(Some(_)) => Some(true),
        What::Rejected
        | What::DuplicateId
        | What::Limited
        | What::Expired
        | What::Halted
        | What::Reconciled(None) => Some(false),
        _ => None,
    }
}

/// Whether a batch's events say other than the venue, item by item: for each
/// client order id its items place (`cids`, two items may name one), the items
/// that say it ran are at most the orders the venue holds under it (`count`),
/// and those orders at most the items that ran or may have (so an item refused
/// at the venue, or never sent, placed nothing; and no two items claim one
/// order). A BatchSettled owes every item its own fate.
fn batch_wrong(
    first: What,
    items: &[(u8, ItemFate)],
    cids: &[String],
    count: impl Fn(&str) -> usize,
) -> Option<String> {
    if first == What::BatchSettled {
        if let Some(i) = (0..cids.len()).find(|&i| !items.iter().any(|(j, _)| usize::from(*j) == i))
        {
            return Some(format!("BatchSettled without item {i}'s fate ({items:?})"));
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for cid in cids {
        if seen.contains(&cid.as_str()) {
            continue;
        }
        seen.push(cid);
        let (mut ran, mut maybe) = (0, 0);
        for (i, _) in cids.iter().enumerate().filter(|(_, c)| *c == cid) {
            match item_said(first, items, i as u8) {
                Some(true) => ran += 1,
                Some(false) => {}
                None => maybe += 1,
            }
        }
        let held = count(cid);
        if ran > held || held > ran + maybe {
            return Some(format!(
                "final {first:?}, items {items:?}: {ran} items say {cid} ran, {maybe} may have, the venue holds {held} orders under it"
            ));
        }
    }
    None
}

/// Whether a batch cancel's events say other than the venue, item by item:
/// an item that says its cancel ran (Applied, or its order found cancelled)
/// finds its order CANCELED at the venue, and one that says it did not
/// (Rejected, not run, never ran, its order found in another state) finds it
/// not CANCELED (no other request cancels it). An item's own [`Event::Item`]
/// speaks for it, else the request's one final event speaks for every item
/// (Applied, or Reconciled found cancelled: each cancel ran). Unresolved is the
/// only "don't know". A BatchSettled owes every item its own fate.
fn cancels_wrong(
    first: What,
    items: &[(u8, ItemFate)],
    cids: &[String],
    cancelled: impl Fn(&str) -> bool,
) -> Option<String> {
    if first == What::BatchSettled {
        if let Some(i) = (0..cids.len()).find(|&i| !items.iter().any(|(j, _)| usize::from(*j) == i))
        {
            return Some(format!("BatchSettled without item {i}'s fate ({items:?})"));
        }
    }
    for (i, cid) in cids.iter().enumerate() {
        let own = items
            .iter()
            .find(|(j, _)| usize::from(*j) == i)
            .map(|(_, f)| *f);
        let said = match (own, first) {
            (Some(ItemFate::Applied), _) => Some(true),
            (Some(ItemFate::Found(s)), _) => Some(s == OrderState::Canceled),
            (Some(ItemFate::Rejected | ItemFate::NotRun | ItemFate::NeverRan), _) => Some(false),
            (Some(ItemFate::Unresolved), _) => None,
            (None, What::Applied) => Some(true),
            (None, What::Reconciled(Some(s))) => Some(s == OrderState::Canceled),
            (
                None,
                What::Rejected
                | What::DuplicateId
                | What::Limited
                | What::Expired
                | What::Halted
                | What::Reconciled(None),
            ) => Some(false),
            (None, _) => None,
        };
        let held = cancelled(cid);
        if said.is_some_and(|ran| ran != held) {
            return Some(format!(
                "final {first:?}, items {items:?}: item {i} says its cancel of {cid} ran: {said:?}, the venue holds it cancelled: {held}"
            ));
        }
    }
    None
}
