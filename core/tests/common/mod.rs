//! Test support: random configurations and operation sequences, a plain reference
//! model, and a driver that runs both side by side and checks the invariants.
//!
//! The reference model keeps, per bucket, a log of `(time, cost)` events: every
//! admitted charge, every `charge_after`, and what `observe_used` booked. No rings, no
//! windows: each invariant is checked by summing the log over the intervals the
//! invariant names. Refunds remove their event (a refunded request never reached the
//! venue), except on token buckets when another event came after it: the budget then
//! keeps the charge (it cannot undo it without minting), and so does the model.
//!
//! Each test file uses only part of this module.
#![allow(dead_code)]

pub mod venue;

use ergon_core::{
    BucketId, Budget, Class, Flight, Limited, Part, Resend, Shape, Spec, Stats, Ticket, Verdict,
    Why,
};
use proptest::prelude::*;
use venue::Venue;

/// Caps on generated costs: every bucket's limit is at most this.
pub const MAX_LIMIT: u64 = 12;

/// One bucket as the tests declare it.
#[derive(Clone, Copy, Debug)]
pub enum RKind {
    Sliding { window: i64, slots: u32 },
    Fixed { window: i64, phase: i64, guard: i64 },
    Token { interval: i64 },
    InFlight,
    Gate,
}

#[derive(Clone, Copy, Debug)]
pub struct BSpec {
    pub kind: RKind,
    /// Limit (burst for token buckets; unused for gates).
    pub limit: u64,
    /// Headroom Normal, Bulk.
    pub headroom: (u64, u64),
}

impl BSpec {
    pub fn spec(&self) -> Spec {
        let s = match self.kind {
            RKind::Sliding { window, slots } => Spec::sliding(self.limit, window, slots),
            RKind::Fixed {
                window,
                phase,
                guard,
            } => Spec::fixed(self.limit, window).phase(phase).guard(guard),
            RKind::Token { interval } => Spec::token_every(interval, self.limit),
            RKind::InFlight => Spec::in_flight(self.limit),
            RKind::Gate => Spec::gate(),
        };
        if matches!(self.kind, RKind::Gate) {
            s
        } else {
            s.headroom(self.headroom.0, self.headroom.1)
        }
    }

    /// Units `class` may use.
    pub fn allowance(&self, class: Class) -> u64 {
        match class {
            Class::Urgent => self.limit,
            Class::Normal => self.limit - self.headroom.0,
            Class::Bulk => self.limit - self.headroom.1,
        }
    }

    /// How long a throttle without a server wait holds the bucket.
    pub fn hold_without_wait(&self) -> i64 {
        match self.kind {
            RKind::Sliding { window, .. } | RKind::Fixed { window, .. } => window,
            RKind::Token { interval } => interval * self.limit as i64,
            RKind::InFlight | RKind::Gate => 1_000_000_000,
        }
    }

    pub fn is_gate(&self) -> bool {
        matches!(self.kind, RKind::Gate)
    }
}

#[derive(Clone, Debug)]
pub struct Cfg {
    pub buckets: Vec<BSpec>,
    pub hold_guard: i64,
    pub start: i64,
}

impl Cfg {
    pub fn build(&self) -> (Budget, Vec<BucketId>) {
        let mut b = Budget::builder();
        b.hold_guard(self.hold_guard).unwrap();
        let ids = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, s)| b.add(&format!("b{i}"), s.spec()).unwrap())
            .collect();
        (b.build(self.start).unwrap(), ids)
    }
}

pub fn class_of(c: u8) -> Class {
    match c % 3 {
        0 => Class::Urgent,
        1 => Class::Normal,
        _ => Class::Bulk,
    }
}

fn kind_strategy() -> impl Strategy<Value = RKind> {
    prop_oneof![
        3 => (1i64..40, 1u32..9).prop_map(|(slot, slots)| RKind::Sliding {
            window: slot * i64::from(slots),
            slots
        }),
        3 => (2i64..200, any::<u16>(), any::<u16>()).prop_map(|(window, p, g)| {
            // guard * 2 < window
            let guard = i64::from(g) % ((window + 1) / 2);
            RKind::Fixed { window, phase: i64::from(p) % (2 * window) - window / 2, guard }
        }),
        2 => (1i64..40).prop_map(|interval| RKind::Token { interval }),
        1 => Just(RKind::InFlight),
        1 => Just(RKind::Gate),
    ]
}

pub fn bspec_strategy(kind: impl Strategy<Value = RKind>) -> impl Strategy<Value = BSpec> {
    (kind, 1..=MAX_LIMIT, any::<u8>(), any::<u8>(), 0u8..3).prop_map(|(kind, limit, a, b, hr)| {
        // A third of the buckets get headroom: normal <= bulk < limit.
        let headroom = if hr == 0 && limit > 1 {
            let bulk = u64::from(b) % limit;
            (u64::from(a) % (bulk + 1), bulk)
        } else {
            (0, 0)
        };
        BSpec {
            kind,
            limit,
            headroom,
        }
    })
}

pub fn cfg_strategy() -> impl Strategy<Value = Cfg> {
    cfg_with(kind_strategy())
}

pub fn cfg_with(kind: impl Strategy<Value = RKind>) -> impl Strategy<Value = Cfg> {
    (
        prop::collection::vec(bspec_strategy(kind), 1..5),
        0i64..30,
        -1000i64..1000,
    )
        .prop_map(|(buckets, hold_guard, start)| Cfg {
            buckets,
            hold_guard,
            start,
        })
}

/// One step of a scenario. Bucket numbers are taken modulo the number of buckets,
/// ticket and flight numbers modulo those outstanding.
#[derive(Clone, Debug)]
pub enum Op {
    Charge {
        parts: Vec<(u8, u32)>,
        class: u8,
    },
    Refund(usize),
    Sent(usize),
    Complete(usize),
    /// Move the caller's clock by this much (negative: a clock stepping back).
    Clock(i64),
    ChargeAfter(u8, u32),
    Tick,
    Throttled(u8, Option<i64>),
    Banned(u8),
    ClearHalt(u8),
    Observe(u8, u64),
    Resend {
        verdict: u8,
        parts: Vec<(u8, u32)>,
        class: u8,
        deadline: i64,
    },
    Stats(u8),
}

fn parts_strategy() -> impl Strategy<Value = Vec<(u8, u32)>> {
    prop::collection::vec((any::<u8>(), 0u32..=(MAX_LIMIT as u32 / 2 + 1)), 1..5)
}

/// What kinds of operation a scenario may contain, by weight.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub charge: u32,
    pub lifecycle: u32,
    pub clock: u32,
    pub back: u32,
    pub charge_after: u32,
    pub tick: u32,
    pub holds: u32,
    pub halts: u32,
    pub observe: u32,
    pub resend: u32,
}

impl Mix {
    pub const ALL: Mix = Mix {
        charge: 10,
        lifecycle: 4,
        clock: 6,
        back: 2,
        charge_after: 1,
        tick: 1,
        holds: 1,
        halts: 1,
        observe: 1,
        resend: 1,
    };
    /// Charges, refunds, sent/complete and a clock that only moves forward.
    pub const PLAIN: Mix = Mix {
        charge: 10,
        lifecycle: 4,
        clock: 6,
        back: 0,
        charge_after: 0,
        tick: 1,
        holds: 0,
        halts: 0,
        observe: 0,
        resend: 0,
    };
}

pub fn ops_strategy(mix: Mix, len: usize) -> impl Strategy<Value = Vec<Op>> {
    let choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            mix.charge,
            (parts_strategy(), any::<u8>())
                .prop_map(|(parts, class)| Op::Charge { parts, class })
                .boxed(),
        ),
        (mix.lifecycle, any::<usize>().prop_map(Op::Refund).boxed()),
        (mix.lifecycle, any::<usize>().prop_map(Op::Sent).boxed()),
        (mix.lifecycle, any::<usize>().prop_map(Op::Complete).boxed()),
        (
            mix.clock,
            prop_oneof![0i64..4, 0i64..60, 0i64..800]
                .prop_map(Op::Clock)
                .boxed(),
        ),
        (
            mix.back,
            prop_oneof![-4i64..0, -400i64..0]
                .prop_map(Op::Clock)
                .boxed(),
        ),
        (
            mix.charge_after,
            (any::<u8>(), 0u32..=MAX_LIMIT as u32)
                .prop_map(|(b, c)| Op::ChargeAfter(b, c))
                .boxed(),
        ),
        (mix.tick, Just(Op::Tick).boxed()),
        (
            mix.holds,
            (any::<u8>(), prop::option::of(-10i64..300))
                .prop_map(|(b, w)| Op::Throttled(b, w))
                .boxed(),
        ),
        (mix.halts, any::<u8>().prop_map(Op::Banned).boxed()),
        (mix.halts, any::<u8>().prop_map(Op::ClearHalt).boxed()),
        (
            mix.observe,
            (any::<u8>(), 0u64..=MAX_LIMIT + 2)
                .prop_map(|(b, u)| Op::Observe(b, u))
                .boxed(),
        ),
        (
            mix.resend,
            (0u8..7, parts_strategy(), any::<u8>(), -50i64..200)
                .prop_map(|(verdict, parts, class, deadline)| Op::Resend {
                    verdict,
                    parts,
                    class,
                    deadline,
                })
                .boxed(),
        ),
        (1, any::<u8>().prop_map(Op::Stats).boxed()),
    ];
    let choices: Vec<_> = choices.into_iter().filter(|(w, _)| *w > 0).collect();
    prop::collection::vec(prop::strategy::Union::new_weighted(choices), 1..len)
}

/// Which invariants the driver checks on every step.
#[derive(Clone, Copy, Debug, Default)]
pub struct Checks {
    /// 1 and 5: every admission keeps every interval the bucket's kind names within
    /// the class's allowance (so within the limit).
    pub safety: bool,
    /// 3: a refused charge leaves every bucket exactly as it was.
    pub all_or_none: bool,
    /// 7: a refusal's `ready_at_ns` is exact.
    pub ready_at: bool,
    /// 6: a twin budget fed the clamped clock gives the same answers.
    pub clock_twin: bool,
    /// 4: a refund leaves the budget as if the charge never happened.
    pub refund: bool,
    /// 8: holds and halts.
    pub holds: bool,
    /// 9: the re-send rule.
    pub resend: bool,
    /// Shapes: a twin budget that charges every part list as a registered shape
    /// (up to `MAX_SHAPES` distinct lists, then as parts) gives the same answers and
    /// ends in the same state, step by step.
    pub shapes: bool,
}

/// The shape twin: the same budget and the same operations, charges as shapes.
pub struct Shaped {
    pub budget: Budget,
    pub tickets: Vec<Ticket>,
    pub flights: Vec<Flight>,
    pub shapes: Vec<(Vec<Part>, Shape)>,
    /// Charges made as shapes, for tests that want to see the twin did something.
    pub shaped: u64,
}

impl Shaped {
    fn charge(&mut self, parts: &[Part], class: Class, now: i64) -> Result<Ticket, Limited> {
        let known = self.shapes.iter().find(|(p, _)| p == parts).map(|s| s.1);
        let shape = known.or_else(|| {
            let shape = self.budget.shape(parts).ok()?;
            assert_eq!(self.budget.shape_parts(shape).unwrap().len(), {
                let mut b: Vec<_> = parts.iter().map(|p| p.bucket).collect();
                b.sort();
                b.dedup();
                b.len()
            });
            self.shapes.push((parts.to_vec(), shape));
            Some(shape)
        });
        match shape {
            Some(shape) => {
                self.shaped += 1;
                let r = self.budget.try_charge_shape(shape, class, now);
                if let Ok(t) = &r {
                    assert_eq!(t.shape(), Some(shape));
                    assert_eq!(
                        self.budget.ticket_parts(t).unwrap(),
                        self.budget.shape_parts(shape).unwrap(),
                        "a shape's ticket names its shape"
                    );
                }
                r
            }
            None => self.budget.try_charge(parts, class, now),
        }
    }
}

/// A re-send answer as its whole `Debug` text, as the twins compared it before
/// tickets named a table entry: a ticket's fields but the entry it holds its part
/// list in (`list`, `gen`: where each budget's table put it), then its parts read
/// through `b`, the budget that answered.
pub fn resend_debug(b: &Budget, r: &Resend) -> String {
    match r {
        Resend::Send(t) => {
            let text = format!("{t:?}");
            let fields = text.split(", list: ").next().unwrap_or(&text);
            format!("Send({fields} }}) {:?}", b.ticket_parts(t).unwrap())
        }
        other => format!("{other:?}"),
    }
}

/// A re-send answer as text, a ticket shown by when it was charged and its parts
/// (`b`: the budget that answered).
pub fn resend_view(b: &Budget, r: &Resend) -> String {
    match r {
        Resend::Send(t) => format!(
            "send {} {:?}",
            t.charged_at_ns(),
            b.ticket_parts(t).unwrap()
        ),
        other => format!("{other:?}"),
    }
}

/// Total cost per bucket index of one charge.
pub type Costs = Vec<(usize, u64)>;

#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub t: i64,
    pub cost: u64,
    /// The ticket that charged it (None for charge_after and observe_used).
    pub ticket: Option<u64>,
    /// Booked by observe_used.
    pub observed: bool,
}

pub struct Driver {
    pub cfg: Cfg,
    pub budget: Budget,
    pub ids: Vec<BucketId>,
    /// The caller's clock (may step back).
    pub caller: i64,
    /// The latest time seen.
    pub now: i64,
    pub logs: Vec<Vec<Event>>,
    pub outstanding: Vec<u64>,
    pub hold_until: Vec<i64>,
    pub halted: Vec<bool>,
    /// Tickets with their model id and combined costs per bucket.
    pub tickets: Vec<(Ticket, u64, Costs)>,
    pub flights: Vec<(Flight, Costs)>,
    next_ticket: u64,
    pub checks: Checks,
    /// The clock twin: the same budget fed `max(seen, caller)`.
    twin: Option<(Budget, Vec<Ticket>, Vec<Flight>)>,
    /// The shape twin.
    pub shaped: Option<Shaped>,
    /// What the venue counts, fed only with what was done and said: every admission
    /// is checked against it, whatever the checks.
    pub venue: Venue,
    /// Figures, for tests that want to see the scenarios did something.
    pub admitted: u64,
    pub refused: u64,
}

/// The total cost per bucket of a part list, in first-seen order.
pub fn combine(parts: &[Part], ids: &[BucketId]) -> Vec<(usize, u64)> {
    let mut out: Vec<(usize, u64)> = Vec::new();
    for p in parts {
        let i = ids.iter().position(|id| *id == p.bucket).unwrap();
        match out.iter_mut().find(|(b, _)| *b == i) {
            Some((_, c)) => *c += u64::from(p.cost),
            None => out.push((i, u64::from(p.cost))),
        }
    }
    out
}

/// The most units `class` could charge to `bucket` alone at the budget's time (up to
/// `cap`), probed on clones: admission is monotone in the cost.
pub fn available(budget: &Budget, bucket: BucketId, class: Class, cap: u64) -> u64 {
    let now = budget.now_ns();
    let fits = |c: u64| {
        let mut b = budget.clone();
        b.try_charge(&[Part::new(bucket, c as u32)], class, now)
            .is_ok()
    };
    if !fits(0) {
        return u64::MAX; // refused whatever the cost: held, halted
    }
    let (mut lo, mut hi) = (0, cap + 1); // fits(lo), maybe !fits(hi)
    if fits(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Everything observable about the buckets, except counters of refusals: used,
/// hold, halt and what each class could charge now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(pub Vec<(u64, Option<i64>, bool, [u64; 3])>);

pub fn fingerprint(budget: &Budget) -> Fingerprint {
    Fingerprint(
        budget
            .ids()
            .map(|id| {
                let s = budget.stats(id).unwrap();
                let cap = s.limit.max(MAX_LIMIT) + 1;
                let avail = [Class::Urgent, Class::Normal, Class::Bulk]
                    .map(|c| available(budget, id, c, cap));
                (s.used, s.held_until_ns, s.halted, avail)
            })
            .collect(),
    )
}

/// Stats without the refusal counters.
pub fn stats_sans_refusals(s: Stats) -> Stats {
    Stats {
        refusals: Default::default(),
        ..s
    }
}

impl Driver {
    pub fn new(cfg: &Cfg, checks: Checks) -> Self {
        let (budget, ids) = cfg.build();
        let n = cfg.buckets.len();
        let twin = checks.clock_twin.then(|| (budget.clone(), vec![], vec![]));
        let shaped = checks.shapes.then(|| Shaped {
            budget: budget.clone(),
            tickets: vec![],
            flights: vec![],
            shapes: vec![],
            shaped: 0,
        });
        Driver {
            cfg: cfg.clone(),
            budget,
            ids,
            caller: cfg.start,
            now: cfg.start,
            logs: vec![vec![]; n],
            outstanding: vec![0; n],
            hold_until: vec![i64::MIN; n],
            halted: vec![false; n],
            tickets: vec![],
            flights: vec![],
            next_ticket: 0,
            checks,
            twin,
            shaped,
            venue: Venue::new(&cfg.buckets),
            admitted: 0,
            refused: 0,
        }
    }

    fn b(&self, b: u8) -> usize {
        usize::from(b) % self.ids.len()
    }

    fn parts(&self, parts: &[(u8, u32)]) -> Vec<Part> {
        parts
            .iter()
            .map(|&(b, c)| Part::new(self.ids[self.b(b)], c))
            .collect()
    }

    /// Advances the model's clock to the caller's: the latest time seen.
    fn tick_model(&mut self) -> i64 {
        self.now = self.now.max(self.caller);
        self.now
    }

    pub fn run(&mut self, ops: &[Op]) {
        for op in ops {
            self.step(op);
        }
    }

    pub fn step(&mut self, op: &Op) {
        let caller = self.caller;
        match op {
            Op::Clock(d) => {
                self.caller += d;
            }
            Op::Charge { parts, class } => {
                let parts = self.parts(parts);
                self.charge(&parts, class_of(*class));
            }
            Op::Refund(i) => self.refund(*i),
            Op::Sent(i) => {
                if self.tickets.is_empty() {
                    return;
                }
                let i = i % self.tickets.len();
                let (ticket, _, costs) = self.tickets.remove(i);
                self.flights.push((ticket.sent(), costs));
                if let Some((_, tickets, flights)) = &mut self.twin {
                    flights.push(tickets.remove(i).sent());
                }
                if let Some(sh) = &mut self.shaped {
                    let flight = sh.tickets.remove(i).sent();
                    sh.flights.push(flight);
                }
            }
            Op::Complete(i) => {
                if self.flights.is_empty() {
                    return;
                }
                let i = i % self.flights.len();
                let (flight, costs) = self.flights.remove(i);
                self.tick_model();
                self.budget.complete(flight, caller).unwrap();
                for (b, c) in costs {
                    if matches!(self.cfg.buckets[b].kind, RKind::InFlight) {
                        self.outstanding[b] -= c;
                    }
                }
                let now = self.now;
                if let Some((twin, _, flights)) = &mut self.twin {
                    twin.complete(flights.remove(i), now).unwrap();
                }
                if let Some(sh) = &mut self.shaped {
                    let flight = sh.flights.remove(i);
                    sh.budget.complete(flight, caller).unwrap();
                }
            }
            Op::ChargeAfter(b, cost) => {
                let i = self.b(*b);
                let t = self.tick_model();
                let id = self.ids[i];
                self.budget.charge_after(id, *cost, caller).unwrap();
                // The venue counts the whole extra cost at the answer; the one figure
                // no venue can mean is more than a full bucket at one instant.
                let counted = match self.cfg.buckets[i].kind {
                    RKind::Sliding { .. } | RKind::Fixed { .. } => {
                        u64::from(*cost).min(self.cfg.buckets[i].limit)
                    }
                    RKind::Token { .. } => u64::from(*cost),
                    RKind::InFlight | RKind::Gate => 0,
                };
                if counted > 0 {
                    self.logs[i].push(Event {
                        t,
                        cost: counted,
                        ticket: None,
                        observed: false,
                    });
                }
                self.venue.charge_after(i, u64::from(*cost), t);
                self.twin_do(|b, now| b.charge_after(id, *cost, now).unwrap());
                self.shaped_do(|b| b.charge_after(id, *cost, caller).unwrap());
            }
            Op::Tick => {
                self.tick_model();
                self.budget.tick(caller);
                self.twin_do(|b, now| b.tick(now));
                self.shaped_do(|b| b.tick(caller));
            }
            Op::Throttled(b, wait) => {
                let i = self.b(*b);
                let t = self.tick_model();
                let verdict = self.budget.throttled(self.ids[i], *wait, caller).unwrap();
                // A wait of zero or less holds like none: one window.
                let hold = match wait {
                    Some(w) if *w > 0 => *w + self.cfg.hold_guard,
                    _ => self.cfg.buckets[i].hold_without_wait(),
                };
                self.hold_until[i] = self.hold_until[i].max(t + hold);
                let id = self.ids[i];
                assert_eq!(
                    verdict,
                    Verdict::Throttled {
                        bucket: id,
                        until_ns: self.hold_until[i]
                    }
                );
                self.twin_do(|b, now| {
                    b.throttled(id, *wait, now).unwrap();
                });
                self.shaped_do(|b| {
                    b.throttled(id, *wait, caller).unwrap();
                });
                if self.checks.holds {
                    let s = self.budget.stats(id).unwrap();
                    let want = (t < self.hold_until[i]).then_some(self.hold_until[i]);
                    assert_eq!(
                        s.held_until_ns, want,
                        "hold after throttled({wait:?}) at {t}"
                    );
                }
            }
            Op::Banned(b) => {
                let i = self.b(*b);
                self.tick_model();
                self.budget
                    .banned(self.ids[i], caller + 50, caller)
                    .unwrap();
                self.halted[i] = true;
                let id = self.ids[i];
                self.twin_do(|b, now| b.banned(id, caller + 50, now).unwrap());
                self.shaped_do(|b| b.banned(id, caller + 50, caller).unwrap());
                if self.checks.holds {
                    assert!(self.budget.is_halted(id).unwrap());
                    assert!(self.budget.halted().any(|h| h == id));
                }
            }
            Op::ClearHalt(b) => {
                let i = self.b(*b);
                self.budget.clear_halt(self.ids[i]).unwrap();
                self.halted[i] = false;
                let id = self.ids[i];
                self.twin_do(|b, _| b.clear_halt(id).unwrap());
                self.shaped_do(|b| b.clear_halt(id).unwrap());
                if self.checks.holds {
                    assert!(!self.budget.is_halted(id).unwrap());
                }
            }
            Op::Observe(b, used) => {
                let i = self.b(*b);
                let t = self.tick_model();
                let id = self.ids[i];
                let mut before = self.budget.clone();
                before.tick(t);
                let before = before.stats(id).unwrap().used;
                self.budget.observe_used(id, *used, caller).unwrap();
                let after = self.budget.stats(id).unwrap().used;
                let limit = self.cfg.buckets[i].limit;
                match self.cfg.buckets[i].kind {
                    RKind::InFlight | RKind::Gate => assert_eq!(after, before),
                    kind => {
                        // The count rises to the figure, by at most a full bucket:
                        // never clamped below what the venue said it holds. A ring
                        // may take up to its oldest slot more (the slot the venue
                        // may have dropped already).
                        let raised = before.max((*used).min(before + limit));
                        if matches!(kind, RKind::Sliding { .. }) {
                            assert!(
                                raised <= after && after <= before + limit,
                                "observe_used raises to the figure: {before} -> {after}, figure {used}"
                            );
                        } else {
                            assert_eq!(after, raised, "observe_used raises to the figure");
                        }
                        // What the venue holds beyond our own units in its window
                        // came from another sender, at the latest now. Within the
                        // leading guard of a fixed window the figure may be the
                        // previous window's count, already booked there: no single
                        // event says that, so the model books nothing (weaker, never
                        // wrong).
                        let leading_guard = match kind {
                            RKind::Fixed {
                                window,
                                phase,
                                guard,
                            } => (t - phase).rem_euclid(window) < guard,
                            _ => false,
                        };
                        let others = used.saturating_sub(self.model_count(i, t)).min(limit);
                        if others > 0 && !leading_guard {
                            self.logs[i].push(Event {
                                t,
                                cost: others,
                                ticket: None,
                                observed: true,
                            });
                        }
                    }
                }
                self.venue.observe(i, *used, t);
                self.twin_do(|b, now| b.observe_used(id, *used, now).unwrap());
                self.shaped_do(|b| b.observe_used(id, *used, caller).unwrap());
            }
            Op::Resend {
                verdict,
                parts,
                class,
                deadline,
            } => {
                let parts = self.parts(parts);
                self.resend(*verdict, &parts, class_of(*class), caller + deadline);
            }
            Op::Stats(b) => {
                let i = self.b(*b);
                let s = self.budget.stats(self.ids[i]).unwrap();
                assert_eq!(s.halted, self.halted[i]);
                assert_eq!(
                    s.limit,
                    if self.cfg.buckets[i].is_gate() {
                        0
                    } else {
                        self.cfg.buckets[i].limit
                    }
                );
                if matches!(self.cfg.buckets[i].kind, RKind::InFlight) {
                    assert_eq!(s.used, self.outstanding[i]);
                }
            }
        }
        self.compare_twin();
        self.compare_shaped();
    }

    fn shaped_do(&mut self, f: impl FnOnce(&mut Budget)) {
        if let Some(sh) = &mut self.shaped {
            f(&mut sh.budget);
        }
    }

    fn compare_shaped(&self) {
        if let Some(sh) = &self.shaped {
            assert_eq!(sh.budget.now_ns(), self.budget.now_ns());
            assert_eq!(
                sh.budget.receipts_outstanding(),
                self.budget.receipts_outstanding()
            );
            for id in self.budget.ids() {
                assert_eq!(
                    sh.budget.stats(id),
                    self.budget.stats(id),
                    "a shape charged differs from its parts charged"
                );
            }
        }
    }

    fn twin_do(&mut self, f: impl FnOnce(&mut Budget, i64)) {
        let now = self.now;
        if let Some((twin, _, _)) = &mut self.twin {
            f(twin, now);
        }
    }

    fn compare_twin(&self) {
        if let Some((twin, _, _)) = &self.twin {
            assert_eq!(twin.now_ns(), self.budget.now_ns());
            for id in self.budget.ids() {
                assert_eq!(
                    twin.stats(id).unwrap(),
                    self.budget.stats(id).unwrap(),
                    "a budget fed a clock that steps back differs from one fed the latest time"
                );
            }
        }
    }

    /// The expected reason for refusal that needs no counting: (halted, too big, held).
    fn plain_refusal(&self, costs: &[(usize, u64)], class: Class, t: i64) -> (bool, bool, bool) {
        let halted = costs.iter().any(|&(b, _)| self.halted[b]);
        let too_big = costs.iter().any(|&(b, c)| {
            !self.cfg.buckets[b].is_gate() && c > self.cfg.buckets[b].allowance(class)
        });
        let held = costs.iter().any(|&(b, _)| t < self.hold_until[b]);
        (halted, too_big, held)
    }

    /// The units of the model's log the venue counts at `t`: the last window
    /// (sliding), the busiest window within the guard of ours holding `t` (fixed),
    /// the units not yet drained (token).
    fn model_count(&self, b: usize, t: i64) -> u64 {
        let units = self.logs[b].iter().map(|e| (e.t, e.cost));
        venue::counted(self.cfg.buckets[b].kind, units, t)
    }

    /// The safety invariant for admitting `cost` to bucket `b` at `t`: with it, every
    /// interval its kind names holds at most the class's allowance.
    fn check_safe(&self, b: usize, cost: u64, class: Class, t: i64) {
        let spec = self.cfg.buckets[b];
        let allowance = spec.allowance(class);
        let log = &self.logs[b];
        match spec.kind {
            RKind::Sliding { window, .. } => {
                let in_window: u64 = log
                    .iter()
                    .filter(|e| e.t > t - window)
                    .map(|e| e.cost)
                    .sum();
                assert!(
                    in_window + cost <= allowance,
                    "sliding bucket {b}: {in_window} + {cost} in ({}, {t}] > {allowance} ({class:?}); log {log:?}",
                    t - window
                );
            }
            RKind::Fixed { .. } => {
                // The earliest start x <= t of a window [x, x + W) containing t whose
                // boundary is ours shifted by at most the guard.
                let x = venue::window_start(spec.kind, t);
                let in_window: u64 = log.iter().filter(|e| e.t >= x).map(|e| e.cost).sum();
                assert!(
                    in_window + cost <= allowance,
                    "fixed bucket {b}: {in_window} + {cost} in [{x}, {t}] > {allowance} ({class:?}); log {log:?}"
                );
            }
            RKind::Token { interval } => {
                // Over [t_i, t]: at most allowance + (t - t_i) / interval units.
                let mut suffix = cost;
                for e in log.iter().rev() {
                    suffix += e.cost;
                    assert!(
                        (suffix as i128) * (interval as i128)
                            <= (allowance as i128) * (interval as i128) + (t - e.t) as i128,
                        "token bucket {b}: {suffix} units over [{}, {t}] with interval {interval}, burst {allowance}; log {log:?}",
                        e.t
                    );
                }
                assert!(cost <= allowance);
            }
            RKind::InFlight => {
                assert!(
                    self.outstanding[b] + cost <= allowance,
                    "in-flight bucket {b}: {} outstanding + {cost} > {allowance}",
                    self.outstanding[b]
                );
            }
            RKind::Gate => {}
        }
    }

    /// Books an admitted charge in the model.
    fn book(&mut self, costs: &[(usize, u64)], class: Class, t: i64, ticket: Ticket) {
        let id = self.next_ticket;
        self.next_ticket += 1;
        let (halted, too_big, held) = self.plain_refusal(costs, class, t);
        assert!(
            !halted && !too_big && !held,
            "admitted while halted {halted} / too big {too_big} / held {held}"
        );
        assert_eq!(ticket.charged_at_ns(), t);
        for &(b, c) in costs {
            if self.checks.safety {
                self.check_safe(b, c, class, t);
            }
            match self.cfg.buckets[b].kind {
                RKind::Sliding { .. } | RKind::Fixed { .. } | RKind::Token { .. } => self.logs[b]
                    .push(Event {
                        t,
                        cost: c,
                        ticket: Some(id),
                        observed: false,
                    }),
                RKind::InFlight => self.outstanding[b] += c,
                RKind::Gate => {}
            }
        }
        self.venue.admit(costs, id, t);
        self.admitted += 1;
        self.tickets.push((ticket, id, costs.to_vec()));
    }

    fn check_refusal(&self, costs: &[(usize, u64)], class: Class, t: i64, l: &Limited) {
        let (halted, too_big, held) = self.plain_refusal(costs, class, t);
        let b = self
            .ids
            .iter()
            .position(|id| *id == l.bucket)
            .expect("a bucket of the charge");
        assert!(
            costs.iter().any(|&(c, _)| c == b),
            "refusal names a bucket of the charge"
        );
        if halted {
            assert_eq!(l.why, Why::Halted);
        } else if too_big {
            assert_eq!(l.why, Why::TooBig);
        }
        match l.why {
            Why::Halted => {
                assert!(self.halted[b]);
                assert_eq!(l.ready_at_ns, i64::MAX);
            }
            Why::TooBig => {
                let c = costs.iter().find(|&&(c, _)| c == b).unwrap().1;
                assert!(c > self.cfg.buckets[b].allowance(class));
                assert_eq!(l.ready_at_ns, i64::MAX);
            }
            Why::Held => {
                assert!(held && t < self.hold_until[b]);
                assert_eq!(l.ready_at_ns, self.hold_until[b]);
            }
            Why::Foreign => panic!("an own id refused as foreign: {l:?}"),
            Why::Closed => panic!("the model never sets a limit of zero: {l:?}"),
            Why::Receipts => panic!(
                "the model never holds {} lists: {l:?}",
                ergon_core::MAX_LISTS
            ),
            Why::Full => assert!(
                l.ready_at_ns > t,
                "ready_at {} not after {t}",
                l.ready_at_ns
            ),
        }
    }

    fn charge(&mut self, parts: &[Part], class: Class) {
        let caller = self.caller;
        let t = self.tick_model();
        let costs = combine(parts, &self.ids);
        let before = (self.checks.all_or_none || self.checks.ready_at).then(|| {
            let mut b = self.budget.clone();
            b.tick(t);
            b
        });
        let result = self.budget.try_charge(parts, class, caller);
        if let Some(sh) = &mut self.shaped {
            let r = sh.charge(parts, class, caller);
            assert_eq!(
                r.as_ref().map(|t| t.charged_at_ns()),
                result.as_ref().map(|t| t.charged_at_ns()),
                "a shape charged answers as its parts"
            );
            if let Ok(ticket) = r {
                sh.tickets.push(ticket);
            }
        }
        if let Some((twin, tickets, _)) = &mut self.twin {
            let r = twin.try_charge(parts, class, t);
            assert_eq!(
                r.as_ref()
                    .map(|t| (t.charged_at_ns(), twin.ticket_parts(t).unwrap())),
                result
                    .as_ref()
                    .map(|t| (t.charged_at_ns(), self.budget.ticket_parts(t).unwrap()))
            );
            if let Ok(ticket) = r {
                tickets.push(ticket);
            }
        }
        match result {
            Ok(ticket) => self.book(&costs, class, t, ticket),
            Err(l) => {
                self.refused += 1;
                self.check_refusal(&costs, class, t, &l);
                let before = match before {
                    Some(b) => b,
                    None => return,
                };
                if self.checks.all_or_none {
                    assert_eq!(
                        fingerprint(&before),
                        fingerprint(&self.budget),
                        "a refused charge changed a bucket"
                    );
                    for id in self.budget.ids() {
                        assert_eq!(
                            stats_sans_refusals(before.stats(id).unwrap()),
                            stats_sans_refusals(self.budget.stats(id).unwrap())
                        );
                    }
                }
                if self.checks.ready_at
                    && matches!(l.why, Why::Full | Why::Held)
                    && l.ready_at_ns < i64::MAX
                {
                    let mut early = before.clone();
                    let e = early
                        .try_charge(parts, class, l.ready_at_ns - 1)
                        .expect_err("charge 1 ns before ready_at passed");
                    assert!(matches!(e.why, Why::Full | Why::Held), "{e:?}");
                    let mut on_time = before;
                    if let Err(e) = on_time.try_charge(parts, class, l.ready_at_ns) {
                        panic!(
                            "charge at ready_at {} refused: {e:?} (refusal was {l:?})",
                            l.ready_at_ns
                        );
                    }
                }
            }
        }
    }

    fn refund(&mut self, i: usize) {
        if self.tickets.is_empty() {
            return;
        }
        let i = i % self.tickets.len();
        let caller = self.caller;
        let t = self.tick_model();
        let (ticket, id, costs) = self.tickets.remove(i);
        self.venue.refund(id);
        let before: Vec<u64> = if self.checks.refund {
            let mut b = self.budget.clone();
            b.tick(t);
            self.ids
                .iter()
                .map(|&id| b.stats(id).unwrap().used)
                .collect()
        } else {
            vec![]
        };
        self.budget.refund(ticket, caller).unwrap();
        if self.checks.refund {
            for (b, &was) in before.iter().enumerate() {
                let now = self.budget.stats(self.ids[b]).unwrap().used;
                let gives = costs.iter().find(|&&(c, _)| c == b).map_or(0, |&(_, c)| c);
                match self.cfg.buckets[b].kind {
                    RKind::InFlight => assert_eq!(now, was - gives, "in-flight refund"),
                    _ => assert!(
                        now <= was && was - now <= gives,
                        "a refund gives back at most what was charged: {was} -> {now}, charged {gives}"
                    ),
                }
            }
        }
        for (b, c) in costs {
            match self.cfg.buckets[b].kind {
                RKind::Sliding { .. } | RKind::Fixed { .. } => {
                    // A server figure booked after the charge never included it: the
                    // charge stays.
                    let log = &mut self.logs[b];
                    if let Some(k) = log.iter().position(|e| e.ticket == Some(id)) {
                        if !log[k..].iter().any(|e| e.observed) {
                            log.remove(k);
                        }
                    }
                }
                RKind::Token { .. } => {
                    if self.logs[b].last().is_some_and(|e| e.ticket == Some(id)) {
                        self.logs[b].pop();
                    }
                }
                RKind::InFlight => self.outstanding[b] -= c,
                RKind::Gate => {}
            }
        }
        let now = self.now;
        if let Some((twin, tickets, _)) = &mut self.twin {
            twin.refund(tickets.remove(i), now).unwrap();
        }
        if let Some(sh) = &mut self.shaped {
            let ticket = sh.tickets.remove(i);
            sh.budget.refund(ticket, caller).unwrap();
        }
    }

    fn resend(&mut self, verdict: u8, parts: &[Part], class: Class, deadline: i64) {
        let caller = self.caller;
        // The budget's clock moves only if the rule charges again.
        let t = self.now.max(caller);
        let v = match verdict {
            0 => Verdict::Done,
            1 => Verdict::Rejected,
            2 => Verdict::Throttled {
                bucket: parts[0].bucket,
                until_ns: t + 10,
            },
            3 => Verdict::Banned {
                bucket: parts[0].bucket,
                until_ns: t + 10,
            },
            4 => Verdict::NotRun,
            5 => Verdict::Unknown,
            _ => Verdict::ClockSkew,
        };
        let costs = combine(parts, &self.ids);
        if matches!(
            v,
            Verdict::Throttled { .. } | Verdict::NotRun | Verdict::ClockSkew
        ) && t < deadline
        {
            self.tick_model();
        }
        let r = self.budget.resend(&v, parts, class, deadline, caller);
        if let Some(sh) = &mut self.shaped {
            let sr = sh.budget.resend(&v, parts, class, deadline, caller);
            // A ticket names its budget's entry of the part list: compare all
            // else it says, its parts, and the tickets each budget has out.
            assert_eq!(
                resend_debug(&sh.budget, &sr),
                resend_debug(&self.budget, &r)
            );
            assert_eq!(
                sh.budget.receipts_outstanding(),
                self.budget.receipts_outstanding()
            );
            if let Resend::Send(t) = sr {
                sh.tickets.push(t);
            }
        }
        let twin_r = self
            .twin
            .as_mut()
            .map(|(twin, _, _)| twin.resend(&v, parts, class, deadline, t));
        if let Some(tr) = &twin_r {
            let twin = &self.twin.as_ref().unwrap().0;
            assert_eq!(resend_view(twin, tr), resend_view(&self.budget, &r));
        }
        if self.checks.resend {
            match v {
                Verdict::Unknown => assert_eq!(r, Resend::Reconcile),
                Verdict::Done | Verdict::Rejected => assert_eq!(r, Resend::Final),
                Verdict::Banned { bucket, .. } => assert!(
                    matches!(r, Resend::Wait(l) if l.why == Why::Halted && l.bucket == bucket)
                ),
                _ if t >= deadline => assert_eq!(r, Resend::Stale),
                _ => assert!(matches!(r, Resend::Send(_) | Resend::Wait(_)), "{r:?}"),
            }
        }
        match r {
            Resend::Send(ticket) => {
                self.book(&costs, class, t, ticket);
                if let Some(Resend::Send(tt)) = twin_r {
                    self.twin.as_mut().unwrap().1.push(tt);
                }
            }
            Resend::Wait(l) if !matches!(v, Verdict::Banned { .. }) => {
                self.refused += 1;
                self.check_refusal(&costs, class, t, &l);
            }
            _ => {}
        }
    }
}

/// A config with proptest's usual settings with `n` cases scaled by build: in
/// release `5 n` cases (the CI run), a quarter of `n` in a debug build, so that
/// `cargo test` stays quick.
///
/// The seed is fixed so that every run checks the same cases (determinism is a rule
/// of the house); set `PROPTEST_RNG_SEED` to explore others.
pub fn cases(n: u32) -> ProptestConfig {
    let cases = if cfg!(debug_assertions) { n / 4 } else { 5 * n };
    let default = ProptestConfig::default();
    let rng_seed = match default.rng_seed {
        prop::test_runner::RngSeed::Random => prop::test_runner::RngSeed::Fixed(0x0065_7267_6f6e),
        seed => seed,
    };
    ProptestConfig {
        cases,
        rng_seed,
        ..default
    }
}
