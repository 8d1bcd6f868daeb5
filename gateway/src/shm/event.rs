//! The events a strategy process reads over shared memory: the gateway's
//! [`Event`](crate::Event) vocabulary as its event ring carries it.

use ergon_core::Why;
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::OrderState;

use super::codec::ORDER_UPDATE;
use crate::Tag;

/// An event as a strategy process receives it: [`Event`](crate::Event)
/// with the body (Applied, OpenOrders) beside it, a halted bucket by its index,
/// and one more case, [`ShmEvent::Lost`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmEvent {
    /// The venue ran it (the answer is the body).
    Applied {
        /// The tag.
        tag: Tag,
    },
    /// The venue refused it for a business reason.
    Rejected {
        /// The tag.
        tag: Tag,
    },
    /// Refused by the gateway, nothing charged or sent: a client order id it
    /// places is live there (see [`Event::DuplicateId`](crate::Event::DuplicateId)).
    DuplicateId {
        /// The tag.
        tag: Tag,
    },
    /// Refused by the gateway, nothing charged or sent: a client order id the
    /// call names is not in a block this client was issued
    /// ([`ShmClient::next_client_order_id`](crate::shm::ShmClient::next_client_order_id)):
    /// another client's order, or an id the gateway did not issue. Final.
    NotYours {
        /// The tag.
        tag: Tag,
    },
    /// Refused by the budget or the client's share, nothing sent.
    Limited {
        /// The tag.
        tag: Tag,
        /// Why.
        why: Why,
        /// In how long (from the event) the same charge would pass (`i64::MAX`:
        /// never by itself). Relative: each process's clock has its own origin.
        ready_in_ns: i64,
    },
    /// Surely not run, sent again in `in_ns` (from the event).
    Retrying {
        /// The tag.
        tag: Tag,
        /// In how long.
        in_ns: i64,
    },
    /// Surely not run, its deadline passed.
    Expired {
        /// The tag.
        tag: Tag,
    },
    /// Unknown outcome, being queried.
    Reconciling {
        /// The tag.
        tag: Tag,
    },
    /// The query settled it.
    Reconciled {
        /// The tag.
        tag: Tag,
        /// The order as the venue has it (None: it never ran).
        found: Option<OrderState>,
    },
    /// Its outcome stays unknown (see [`Event::Unresolved`](crate::Event::Unresolved)):
    /// do not assume it never ran.
    Unresolved {
        /// The tag.
        tag: Tag,
    },
    /// An unresolved order showed up after all (see [`Event::Late`](crate::Event::Late)).
    Late {
        /// The tag.
        tag: Tag,
        /// Its state as seen.
        found: OrderState,
    },
    /// The gateway's poll of open orders: the body lists the open orders' client
    /// order ids, one per line.
    OpenOrders {
        /// How long before this event the poll was sent: an order that rested
        /// before that and is not listed has ended.
        age_ns: i64,
    },
    /// A ban halted a bucket (by its index in the gateway's budget).
    Halted {
        /// The tag.
        tag: Tag,
        /// The bucket's index.
        bucket: usize,
    },
    /// The gateway went away before this request's final event: its outcome is
    /// unknown (query it by client order id through a gateway; never re-send it).
    Lost {
        /// The tag.
        tag: Tag,
    },
    /// Every part of a request of several (a two-step cancel-replace: item 0 its
    /// new order, item 1 its cancel; a batch's items) has its fate: the
    /// request's final event, as [`Event::BatchSettled`](crate::Event::BatchSettled).
    /// Its body holds each part's fate, in the order the parts settled (see
    /// [`item_fates`]): they travel with the final event, which always has room
    /// in the ring, so none is merged away.
    BatchSettled {
        /// The tag.
        tag: Tag,
    },
    /// An order update of the gateway's user data stream
    /// ([`Strategy::on_order_update`](crate::Strategy::on_order_update)),
    /// fixed size, to the client whose block its client order id (or, for a
    /// cancel, the cancelled order's) comes from, and to no other. Tag
    /// [`ORDER_UPDATE`].
    OrderUpdate(Execution),
}

impl ShmEvent {
    /// The tag of its request.
    pub fn tag(&self) -> Tag {
        match *self {
            ShmEvent::Applied { tag }
            | ShmEvent::Rejected { tag }
            | ShmEvent::DuplicateId { tag }
            | ShmEvent::NotYours { tag }
            | ShmEvent::Limited { tag, .. }
            | ShmEvent::Retrying { tag, .. }
            | ShmEvent::Expired { tag }
            | ShmEvent::Reconciling { tag }
            | ShmEvent::Reconciled { tag, .. }
            | ShmEvent::Unresolved { tag }
            | ShmEvent::Late { tag, .. }
            | ShmEvent::Halted { tag, .. }
            | ShmEvent::BatchSettled { tag }
            | ShmEvent::Lost { tag } => tag,
            ShmEvent::OpenOrders { .. } => crate::OPEN_ORDERS,
            ShmEvent::OrderUpdate(_) => ORDER_UPDATE,
        }
    }

    /// Whether it ends its request.
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            ShmEvent::Retrying { .. }
                | ShmEvent::Reconciling { .. }
                | ShmEvent::Late { .. }
                | ShmEvent::OpenOrders { .. }
                | ShmEvent::OrderUpdate(_)
        )
    }
}
