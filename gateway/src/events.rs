//! What the gateway tells its caller: one typed event per step of a request, each
//! carrying the caller's tag.

use ergon_core::Why;
use ergon_venues::endpoint::OrderState;

/// The caller's name for a request, given at submit and carried by its events.
pub type Tag = u64;

/// The tag of [`Event::OpenOrders`]: the gateway's own polls of open orders.
pub const OPEN_ORDERS: Tag = Tag::MAX;

/// A tag as a person reads it: the gateway's own tags by name
/// ([`OPEN_ORDERS`] prints `open-orders`, [`PROTECTION`] `protection`, the
/// shared-memory order updates' `order-update`), a caller's as its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TagName(pub Tag);

impl core::fmt::Display for TagName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            OPEN_ORDERS => f.write_str("open-orders"),
            PROTECTION => f.write_str("protection"),
            ORDER_UPDATE => f.write_str("order-update"),
            t => write!(f, "{t}"),
        }
    }
}

/// A wait as the events carry it: from `now` until `at` on the same clock, in
/// nanoseconds (never negative; `i64::MAX` stays "never by itself"). A duration,
/// not a deadline, so that a strategy in another process (whose clock has its own
/// origin) reads it the same way as one in the gateway's.
pub(crate) fn wait_ns(at: i64, now: i64) -> i64 {
    if at == i64::MAX {
        i64::MAX
    } else {
        at.saturating_sub(now).max(0)
    }
}

/// Why a request that surely did not run is not sent again ([`Event::Expired`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expiry {
    /// Its deadline passed (at submit, or before the budget had room again).
    Deadline,
    /// The venue said "not run" [`MAX_RESENDS`](crate::MAX_RESENDS) times and more:
    /// sending the same request again would only spend the budget.
    Resends,
    /// The venue refused its timestamp and the adapter cannot re-sign it: the same
    /// bytes can never pass.
    Unsigned,
}

/// The tag of the gateway's own dead man's switch calls, and of
/// [`Event::Protection`] and [`Event::ProtectionFired`].
pub const PROTECTION: Tag = Tag::MAX - 1;

/// The tag of [`ShmEvent::OrderUpdate`](crate::shm::ShmEvent::OrderUpdate) (no
/// request's). The gateway's own tags ([`OPEN_ORDERS`], [`PROTECTION`], this)
/// are the top three: a caller's tags stay below them.
pub const ORDER_UPDATE: Tag = Tag::MAX - 2;

/// The fate of one part of a request of several, in an [`Event::Item`]: an item
/// of a batch, or a part of a two-step cancel-replace (item 0 its new order, item
/// 1 its cancel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemFate {
    /// The answer says the venue ran it (the new order placed; the cancel done).
    Applied,
    /// The answer says the venue refused it for a business reason.
    Rejected,
    /// The answer says it did not run (a cancel-replace's new order not
    /// attempted). One part is never sent again by the gateway: the strategy
    /// decides.
    NotRun,
    /// Its outcome was unknown; a query by its own client order id found it. For
    /// a cancel, the order it cancels: CANCELED (the cancel ran, or the order
    /// ended so), or a state of a live or filled order (it did not run). Where
    /// the venue states no time after which a request can no longer run
    /// (Bybit), a live order is asked about again, and a cancel whose order
    /// stays live ends [`ItemFate::Unresolved`]: it may still run.
    Found(OrderState),
    /// Its outcome was unknown; a query sent after the venue could no longer run
    /// it found nothing: it never ran (as [`Event::Reconciled`] with None). For
    /// a cancel: the venue has no such order.
    NeverRan,
    /// Its outcome stays unknown (as [`Event::Unresolved`]); its id is watched and
    /// an [`Event::Late`] with the batch's tag follows if it shows up (never
    /// before the batch's [`Event::BatchSettled`]).
    Unresolved,
}

/// One step of a request, for the caller.
///
/// Each submitted request ends with exactly one final event: [`Event::Applied`],
/// [`Event::Rejected`], [`Event::DuplicateId`], [`Event::Reconciled`], [`Event::Unresolved`],
/// [`Event::BatchSettled`], [`Event::Expired`] or [`Event::Halted`] (or its submit returned
/// [`Limited`](ergon_core::Limited) and it never entered the ledger).
/// [`Event::Retrying`] and [`Event::Reconciling`] come before a final one.
/// [`Event::Late`] comes after an [`Event::Unresolved`], at most once, if the order
/// shows up while the gateway still watches its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The venue ran it; `body` is its answer (valid for this call only).
    Applied {
        /// The caller's tag.
        tag: Tag,
        /// The answer's body.
        body: &'a [u8],
    },
    /// The venue refused it for a business reason: it did not run.
    Rejected {
        /// The caller's tag.
        tag: Tag,
    },
    /// Refused locally, nothing charged or sent: a client order id the request
    /// places is live in the gateway (a request in its ledger names it, in flight
    /// or being reconciled; it ended Unresolved and is still watched; or, over
    /// shared memory, its journal holds it), or another order of the same batch
    /// places it too. Placing it again could run a second order under the same
    /// id, or make a reconcile read the wrong one (both items of a batch would
    /// find the one order the venue placed).
    DuplicateId {
        /// The caller's tag.
        tag: Tag,
    },
    /// Refused locally, nothing sent (a request handed over the boundary; a local
    /// submit returns this as its error instead).
    Limited {
        /// The caller's tag.
        tag: Tag,
        /// Why the budget refused.
        why: Why,
        /// In how long from this event the same charge would pass (`i64::MAX`:
        /// never by itself, a halt). A duration: see [`Event::Retrying`].
        ready_in_ns: i64,
    },
    /// It surely did not run and is sent again, under [`ergon_core::Budget::resend`],
    /// in `in_ns` from this event (0: now; later when the budget has room),
    /// inside its deadline.
    ///
    /// Every time an event carries is a duration from the event, never a
    /// deadline on the gateway's clock: a strategy attached over shared memory
    /// runs on a clock of another origin, and a duration means the same in both
    /// modes (read there a little after it was made, it ends late, never early).
    Retrying {
        /// The caller's tag.
        tag: Tag,
        /// In how long it is sent again.
        in_ns: i64,
    },
    /// It surely did not run, and it is not sent again: `why` says why.
    Expired {
        /// The caller's tag.
        tag: Tag,
        /// Why it is not sent again.
        why: Expiry,
    },
    /// Its outcome is unknown: the gateway queries it by client order id (it is
    /// never re-sent).
    Reconciling {
        /// The caller's tag.
        tag: Tag,
    },
    /// The query settled it: `found` is the order's state, None if it never ran.
    /// For a cancel, a live state (New, PartiallyFilled, Pending) says it did
    /// not run; where the venue states no bound (Bybit) it is not said at all:
    /// a cancel whose order stays live ends [`Event::Unresolved`].
    ///
    /// None is said only once the venue can no longer accept the request (its
    /// venue-side validity, [`Account::not_found_after`](super::Account::not_found_after),
    /// has passed) and a query sent after that point still found nothing.
    Reconciled {
        /// The caller's tag.
        tag: Tag,
        /// The order as the venue has it.
        found: Option<OrderState>,
    },
    /// Its outcome stays unknown: the venue states no time after which the request
    /// can no longer run (or every query the gateway may spend on it said nothing).
    /// Its slot is freed; the strategy must not assume it never ran. The gateway
    /// keeps its client order id watched for a while
    /// ([`Gateway::set_watch_ns`](super::Gateway::set_watch_ns)): if the order
    /// appears in the order stream or an open-orders poll, [`Event::Late`] follows.
    Unresolved {
        /// The caller's tag.
        tag: Tag,
    },
    /// The fate of item `item` of a request of several parts: a batch (its index
    /// in the request), or a two-step cancel-replace (Binance Spot: 0 the new
    /// order, 1 the cancel). One per item, then [`Event::BatchSettled`]: first
    /// those the answer settled (read from
    /// [`Venue::batch_items`](ergon_venues::adapt::Venue::batch_items)), then, after
    /// an [`Event::Reconciling`], each unknown one as its own query by its own
    /// client order id settles it (every item when the whole answer was lost). A
    /// request whose answer names no items ends as one ([`Event::Applied`]: a
    /// cancel-replace whose two parts both ran, a batch whose items the adapter
    /// could not read).
    Item {
        /// The batch's tag.
        tag: Tag,
        /// The item's index in the batch.
        item: u8,
        /// What became of it.
        fate: ItemFate,
    },
    /// Every item of a request of several parts has had its [`Event::Item`]: the
    /// request's final event.
    BatchSettled {
        /// The batch's tag.
        tag: Tag,
    },
    /// An order that ended [`Event::Unresolved`] did reach the venue after all.
    /// `found` is its state: from the order stream, the venue's state; from an
    /// open-orders poll, [`OrderState::Other`] (it rests on the book, filled in part
    /// or not).
    Late {
        /// The caller's tag (of the unresolved request).
        tag: Tag,
        /// The order's state as seen.
        found: OrderState,
    },
    /// The answer to the gateway's own poll of open orders (see
    /// [`Gateway::poll_open_orders`](super::Gateway::poll_open_orders)): read it with
    /// [`Account::open_ids`](super::Account::open_ids). Its tag
    /// ([`Event::tag`]) is [`OPEN_ORDERS`]. Over shared memory the body is the
    /// client's own open client order ids, one a line, and only a client that
    /// asked for the polls gets them.
    ///
    /// A venue that answers by pages (Bybit: 50 orders a page) gives one event
    /// a page of the same poll, `page` 0 first: the poll's list is the union of
    /// its pages' events, complete at the one with `more` false. An event with
    /// `more` true not followed by page `page + 1` (the next event is a page 0:
    /// the walk stopped at [`OPEN_PAGES`](super::OPEN_PAGES) or started over) is
    /// a partial list: absence from it says nothing. Over shared memory the
    /// hub gives one event a poll, the pages' ids together.
    OpenOrders {
        /// How long before this event the poll (its first page) was sent: an
        /// order that rested before then and is not listed in the poll has ended.
        age_ns: i64,
        /// The answer's body (this page's).
        body: &'a [u8],
        /// This page's number in the poll (0: the first; always 0 where one
        /// answer lists every open order).
        page: u8,
        /// The venue says a next page follows this one.
        more: bool,
    },
    /// The venue banned a scope: it did not run, and nothing that charges
    /// `bucket` leaves until a person clears the halt
    /// (`ergon-gateway clear-halt NAME`).
    Halted {
        /// The caller's tag.
        tag: Tag,
        /// The halted bucket, by its index in the gateway's budget (the order
        /// its buckets were added: [`BucketId::index`](ergon_core::BucketId::index); its name is
        /// [`Budget::name`](ergon_core::Budget::name) of
        /// [`Budget::ids`](ergon_core::Budget::ids)`().nth(bucket)`, as `--stats`
        /// lists it). An index, so that it reads the same in another process.
        bucket: usize,
    },
    /// The venue's dead man's switch is armed for `fires_in_ns` more, and the
    /// budget cannot fit a refresh before then (a long hold, a ban): unless sending
    /// is allowed again in time, every open order of its scope is cancelled then.
    /// Not about a request: its tag is [`PROTECTION`].
    Protection {
        /// In how long from this event the switch fires (a lower bound).
        fires_in_ns: i64,
    },
    /// The switch's deadline passed without a refresh: the venue cancelled (or is
    /// cancelling) every open order of its scope. Treat them as cancelled-unknown
    /// and reconcile them when sending is allowed again; the gateway re-arms then.
    /// Its tag is [`PROTECTION`].
    ProtectionFired,
}

impl Event<'_> {
    /// The tag of the request it is about.
    pub fn tag(&self) -> Tag {
        match *self {
            Event::Applied { tag, .. }
            | Event::Rejected { tag }
            | Event::DuplicateId { tag }
            | Event::Limited { tag, .. }
            | Event::Retrying { tag, .. }
            | Event::Expired { tag, .. }
            | Event::Reconciling { tag }
            | Event::Reconciled { tag, .. }
            | Event::Unresolved { tag }
            | Event::Late { tag, .. }
            | Event::Item { tag, .. }
            | Event::BatchSettled { tag }
            | Event::Halted { tag, .. } => tag,
            Event::OpenOrders { .. } => OPEN_ORDERS,
            Event::Protection { .. } | Event::ProtectionFired => PROTECTION,
        }
    }

    /// Whether it ends a request in flight (its slot is free after it): the
    /// final events. Not the steps before one ([`Event::Retrying`],
    /// [`Event::Reconciling`]), nor what comes about no request in flight: an
    /// [`Event::Late`] (its request ended [`Event::Unresolved`] already), the
    /// open-orders poll's answer and the switch's notes. A caller counting slots
    /// by final events (a bounded queue, a ring) counts right only so.
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            Event::Retrying { .. }
                | Event::Reconciling { .. }
                | Event::Late { .. }
                | Event::Item { .. }
                | Event::OpenOrders { .. }
                | Event::Protection { .. }
                | Event::ProtectionFired
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ends_of_a_request_are_final() {
        let ends = [
            Event::Rejected { tag: 1 },
            Event::DuplicateId { tag: 1 },
            Event::Unresolved { tag: 1 },
            Event::Reconciled {
                tag: 1,
                found: None,
            },
            Event::BatchSettled { tag: 1 },
        ];
        assert!(ends.iter().all(Event::is_final));
        // On main a Late, an open-orders answer and the switch's notes counted as
        // final: a remote handle freed a slot for each, and could then overfill
        // its queues.
        let not = [
            Event::Retrying { tag: 1, in_ns: 0 },
            Event::Reconciling { tag: 1 },
            Event::Late {
                tag: 1,
                found: OrderState::New,
            },
            Event::OpenOrders {
                age_ns: 0,
                body: b"[]",
                page: 0,
                more: false,
            },
            Event::Item {
                tag: 1,
                item: 0,
                fate: ItemFate::Applied,
            },
            Event::ProtectionFired,
        ];
        for e in not {
            assert!(!e.is_final(), "{e:?}");
        }
    }
}
