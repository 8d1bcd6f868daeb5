//! Charges and their receipts: what a request asks for ([`Part`], [`Class`]), what a
//! refusal says ([`Limited`]) and the typestate that makes a refund after sending
//! impossible ([`Ticket`] → [`Flight`]).

use arrayvec::ArrayVec;

use crate::MAX_PARTS;

/// A bucket of one [`Budget`](crate::Budget), as handed out by
/// [`Builder::add`](crate::Builder::add).
///
/// An id carries the tag of its budget: handed to another budget it is refused with
/// an error ([`ForeignId`], or [`Why::Foreign`] from a charge), never read as that
/// budget's bucket of the same index. A clone of a budget is the same budget for
/// this rule (same tag, same ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketId {
    pub(crate) budget: u16,
    pub(crate) index: u8,
}

impl BucketId {
    /// The bucket's index in its budget, in the order the buckets were added.
    pub fn index(self) -> usize {
        usize::from(self.index)
    }
}

/// An id, [`Ticket`], [`Flight`] or [`Shape`](crate::Shape) of another budget was
/// handed to this one: a caller's mistake. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ForeignId;

impl core::fmt::Display for ForeignId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("an id, ticket or flight of another budget")
    }
}

/// A request kind registered once with its budget ([`Budget::shape`](crate::Budget::shape) or
/// [`Builder::shape`](crate::Builder::shape)): place, cancel, a book read ...
///
/// Charged with [`Budget::try_charge_shape`](crate::Budget::try_charge_shape), it costs a compare and a subtraction
/// per bucket, and its [`Ticket`] names the shape instead of copying the parts.
/// Like a [`BucketId`], it carries its budget's tag: another budget refuses it.
///
/// ```
/// use ergon_core::{Budget, Class, Part, Spec};
/// let mut b = Budget::builder();
/// let weight = b.add("weight", Spec::sliding(1200, 60_000_000_000, 60)).unwrap();
/// let orders = b.add("orders", Spec::fixed(50, 10_000_000_000)).unwrap();
/// let ip = b.add("ip", Spec::gate()).unwrap();
/// let place = b.shape(&[Part::new(weight, 1), Part::new(orders, 1), Part::new(ip, 0)]).unwrap();
/// let mut budget = b.build(0).unwrap();
/// let ticket = budget.try_charge_shape(place, Class::Normal, 1).unwrap();
/// assert_eq!(ticket.shape(), Some(place));
/// budget.refund(ticket, 2).unwrap();
/// assert_eq!(budget.stats(weight).unwrap().used, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub(crate) budget: u16,
    pub(crate) index: u8,
}

/// One bucket a request counts against, and how much.
///
/// A cost of 0 on a gate is the usual part: gates count nothing, they only carry
/// holds and halts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Part {
    /// The bucket charged.
    pub bucket: BucketId,
    /// Units charged to it (weight, requests, orders ...).
    pub cost: u32,
}

impl Part {
    /// `cost` units of `bucket`.
    pub const fn new(bucket: BucketId, cost: u32) -> Self {
        Part { bucket, cost }
    }
}

/// Who is asking. Each bucket keeps headroom that only higher classes may use, so a
/// protective close is never starved by background reads. There is no queue: a
/// refused charge is refused at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// May use the whole limit: protective closes, cancels of resting risk.
    Urgent = 0,
    /// May not use the Normal headroom: quoting, decision reads.
    Normal = 1,
    /// May not use the Bulk headroom: background reads, reconciliation sweeps.
    Bulk = 2,
}

impl Class {
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

/// Why a charge was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Why {
    /// The bucket has no room now; it will at `ready_at_ns` if nothing else is charged.
    Full,
    /// The server throttled this scope (a 429 or its body code); the hold ends at
    /// `ready_at_ns`.
    Held,
    /// The scope is halted after a ban. Only [`Budget::clear_halt`](crate::Budget::clear_halt),
    /// a person's action, resumes it; `ready_at_ns` is `i64::MAX`, so a caller that
    /// waits for `ready_at_ns` must also retry once the halt is cleared (watch
    /// [`Budget::halted`](crate::Budget::halted)).
    Halted,
    /// The cost is above what this class may ever use in this bucket: it can never
    /// pass, split the request. `ready_at_ns` is `i64::MAX`.
    TooBig,
    /// The bucket is closed: its limit was set to zero
    /// ([`Budget::set_limit`](crate::Budget::set_limit)), as a leased limit is when
    /// its host may use nothing. Nothing passes until a limit above zero is set;
    /// `ready_at_ns` is `i64::MAX`. Counted in the bucket's `full` refusals (it has
    /// no room).
    Closed,
    /// The charge names a bucket (or is a shape) of another budget: a caller's
    /// mistake, it can never pass here. `ready_at_ns` is `i64::MAX`.
    Foreign,
    /// A part list charged with [`Budget::try_charge`](crate::Budget::try_charge) is
    /// kept in the budget for its tickets (a [`Ticket`] names it, small), the list
    /// charges an in-flight bucket, and every entry holds another such list with
    /// tickets or flights outstanding ([`MAX_LISTS`](crate::MAX_LISTS) distinct
    /// in-flight lists at once; a list that charges no in-flight bucket never meets
    /// it). Nothing was charged.
    /// It passes once some of those tickets come back ([`Budget::refund`](crate::Budget::refund),
    /// [`Budget::complete`](crate::Budget::complete)), not at a time: `ready_at_ns` is
    /// `i64::MAX`. A registered [`Shape`] never meets it. `bucket` is the list's
    /// first part's (an id with index 255 for an empty list); no bucket's stats
    /// count it.
    Receipts,
}

/// A refused charge. Nothing was charged anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limited {
    /// The bucket that refused (for Full and Held, the one that is ready last).
    pub bucket: BucketId,
    /// The earliest time at which this same charge passes if nothing else is charged,
    /// on the caller's clock; `i64::MAX` for Halted, TooBig and in-flight limits.
    pub ready_at_ns: i64,
    /// Why.
    pub why: Why,
}

/// The parts of one charge, as they were charged.
pub(crate) type Charged = ArrayVec<Part, MAX_PARTS>;

/// The `shape` of a ticket charged from a part list.
pub(crate) const NO_SHAPE: u8 = u8::MAX;
/// The `list` of a shape's ticket.
pub(crate) const NO_LIST: u8 = u8::MAX;

/// The receipt of an admitted charge whose request has not left yet.
///
/// Consume it exactly once: [`Budget::refund`](crate::Budget::refund) if the request was
/// never written, or [`Ticket::sent`] as soon as one byte was. There is no way back
/// from a [`Flight`] to a refund.
///
/// It is small (24 bytes) and copies no part: a shape's ticket names its shape, a
/// part list's names the entry its budget keeps the list in (see [`Why::Receipts`]).
/// [`Budget::ticket_parts`](crate::Budget::ticket_parts) gives the parts either way.
#[must_use = "a ticket is refunded if never sent, or turned into a Flight by sent()"]
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    pub(crate) at_ns: i64,
    pub(crate) seq: u64,
    /// The tag of the budget that charged it.
    pub(crate) budget: u16,
    /// The shape charged, or [`NO_SHAPE`] for a part list (then `list` names it).
    pub(crate) shape: u8,
    /// The budget's entry holding the part list charged, or [`NO_LIST`] for a shape.
    pub(crate) list: u8,
    /// The entry's generation when charged.
    pub(crate) gen: u32,
}

impl Ticket {
    /// At least one byte of the request was written: from now on the venue may have
    /// counted or executed it, and no refund exists.
    pub fn sent(self) -> Flight {
        Flight {
            at_ns: self.at_ns,
            budget: self.budget,
            shape: self.shape,
            list: self.list,
            gen: self.gen,
        }
    }

    /// The shape this ticket charged, if it was charged as one.
    pub fn shape(&self) -> Option<Shape> {
        (self.shape != NO_SHAPE).then_some(Shape {
            budget: self.budget,
            index: self.shape,
        })
    }

    /// When it was charged, on the budget's clock.
    pub fn charged_at_ns(&self) -> i64 {
        self.at_ns
    }
}

/// A request that has (at least partly) left. Hand it to
/// [`Budget::complete`](crate::Budget::complete) when its answer arrives or its
/// outcome is settled, to release in-flight limits. Small like its [`Ticket`]:
/// [`Budget::flight_parts`](crate::Budget::flight_parts) gives its parts.
#[must_use = "a flight is completed when its answer arrives, to release in-flight limits"]
#[derive(Debug, PartialEq, Eq)]
pub struct Flight {
    pub(crate) at_ns: i64,
    pub(crate) budget: u16,
    pub(crate) shape: u8,
    pub(crate) list: u8,
    pub(crate) gen: u32,
}

impl Flight {
    /// The shape its ticket charged, if it was charged as one.
    pub fn shape(&self) -> Option<Shape> {
        (self.shape != NO_SHAPE).then_some(Shape {
            budget: self.budget,
            index: self.shape,
        })
    }

    /// When it was charged, on the budget's clock.
    pub fn charged_at_ns(&self) -> i64 {
        self.at_ns
    }
}
