//! The events a strategy process reads over shared memory: the gateway's
//! [`Event`] vocabulary as its event ring carries it, variant for variant and
//! field for field, with the body (of Applied, OpenOrders) beside the event
//! rather than in it, and three cases only a process apart from the gateway
//! meets: [`ShmEvent::NotYours`], [`ShmEvent::Lost`], [`ShmEvent::OrderUpdate`].
//!
//! [`ShmEvent::of`] and [`ShmEvent::event`] map one onto the other; both are
//! exhaustive matches, so a variant added to one and not the other does not
//! compile.

use ergon_core::Why;
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::OrderState;

use crate::events::{Event, Expiry, ItemFate, Tag, OPEN_ORDERS, ORDER_UPDATE, PROTECTION};

/// An event as a strategy process receives it: an [`Event`] (same variants,
/// names and fields; each documented there) with its body beside it, or one of
/// the three cases of a process apart ([`ShmEvent::NotYours`],
/// [`ShmEvent::Lost`], [`ShmEvent::OrderUpdate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmEvent {
    /// [`Event::Applied`]: the venue ran it (the answer is the body).
    Applied {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::Rejected`]: the venue refused it for a business reason.
    Rejected {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::DuplicateId`]: refused by the gateway, nothing charged or sent:
    /// a client order id it places is live there.
    DuplicateId {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::Limited`]: refused by the budget or the client's share, nothing
    /// sent.
    Limited {
        /// The tag.
        tag: Tag,
        /// Why.
        why: Why,
        /// In how long from the event the same charge would pass (`i64::MAX`:
        /// never by itself).
        ready_in_ns: i64,
    },
    /// [`Event::Retrying`]: surely not run, sent again in `in_ns` from the event.
    Retrying {
        /// The tag.
        tag: Tag,
        /// In how long.
        in_ns: i64,
    },
    /// [`Event::Expired`]: surely not run, and not sent again.
    Expired {
        /// The tag.
        tag: Tag,
        /// Why it is not sent again.
        why: Expiry,
    },
    /// [`Event::Reconciling`]: unknown outcome, being queried.
    Reconciling {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::Reconciled`]: the query settled it.
    Reconciled {
        /// The tag.
        tag: Tag,
        /// The order as the venue has it (None: it never ran).
        found: Option<OrderState>,
    },
    /// [`Event::Unresolved`]: its outcome stays unknown; do not assume it never ran.
    Unresolved {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::Item`]: the fate of one part of a request of several. The
    /// gateway sends the parts' fates in the body of the request's final
    /// [`ShmEvent::BatchSettled`] (a final event always has room in the ring;
    /// a step may not); [`ShmClient::poll`](crate::shm::ShmClient::poll) hands
    /// each out as an Item before it, as in-process.
    Item {
        /// The request's tag.
        tag: Tag,
        /// The part's index.
        item: u8,
        /// What became of it.
        fate: ItemFate,
    },
    /// [`Event::BatchSettled`]: every part of a request of several has its
    /// fate, the request's final event. Its body holds each part's fate, in the
    /// order the parts settled (see [`item_fates`](crate::shm::item_fates)).
    BatchSettled {
        /// The tag.
        tag: Tag,
    },
    /// [`Event::Late`]: an unresolved order showed up after all.
    Late {
        /// The tag.
        tag: Tag,
        /// Its state as seen.
        found: OrderState,
    },
    /// [`Event::OpenOrders`]: the gateway's poll of open orders, to a client
    /// that asked for them ([`ShmClient::attach_with`](crate::shm::ShmClient::attach_with));
    /// the body lists the client's own open orders' client order ids, one a line.
    OpenOrders {
        /// How long before this event the poll was sent: an order that rested
        /// before that and is not listed has ended.
        age_ns: i64,
    },
    /// [`Event::Halted`]: a ban halted a bucket (by its index in the gateway's
    /// budget).
    Halted {
        /// The tag.
        tag: Tag,
        /// The bucket's index.
        bucket: usize,
    },
    /// [`Event::Protection`]: the venue's dead man's switch fires in
    /// `fires_in_ns` unless the gateway can refresh it; sent to every client.
    Protection {
        /// In how long from the event.
        fires_in_ns: i64,
    },
    /// [`Event::ProtectionFired`]: the switch fired; sent to every client.
    ProtectionFired,
    /// Over shared memory only: refused by the gateway, nothing charged or
    /// sent: a client order id the call names is not in a block this client was
    /// issued
    /// ([`ShmClient::next_client_order_id`](crate::shm::ShmClient::next_client_order_id)):
    /// another client's order, or an id the gateway did not issue. Final.
    NotYours {
        /// The tag.
        tag: Tag,
    },
    /// Over shared memory only: the gateway went away before this request's
    /// final event: its outcome is unknown (query it by client order id
    /// through a gateway; never re-send it). Final.
    Lost {
        /// The tag.
        tag: Tag,
    },
    /// Over shared memory only: an order update of the gateway's user data
    /// stream (in-process,
    /// [`Strategy::on_order_update`](crate::Strategy::on_order_update)), fixed
    /// size, to the client whose block its client order id (or, for a cancel,
    /// the cancelled order's) comes from, and to no other. Tag [`ORDER_UPDATE`].
    OrderUpdate(Execution),
}

impl ShmEvent {
    /// The tag of its request (the gateway's own tags as [`Event::tag`]).
    pub fn tag(&self) -> Tag {
        match *self {
            ShmEvent::Applied { tag }
            | ShmEvent::Rejected { tag }
            | ShmEvent::DuplicateId { tag }
            | ShmEvent::NotYours { tag }
            | ShmEvent::Limited { tag, .. }
            | ShmEvent::Retrying { tag, .. }
            | ShmEvent::Expired { tag, .. }
            | ShmEvent::Reconciling { tag }
            | ShmEvent::Reconciled { tag, .. }
            | ShmEvent::Unresolved { tag }
            | ShmEvent::Item { tag, .. }
            | ShmEvent::Late { tag, .. }
            | ShmEvent::Halted { tag, .. }
            | ShmEvent::BatchSettled { tag }
            | ShmEvent::Lost { tag } => tag,
            ShmEvent::OpenOrders { .. } => OPEN_ORDERS,
            ShmEvent::Protection { .. } | ShmEvent::ProtectionFired => PROTECTION,
            ShmEvent::OrderUpdate(_) => ORDER_UPDATE,
        }
    }

    /// Whether it ends its request (as [`Event::is_final`]; NotYours and Lost
    /// are final too).
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            ShmEvent::Retrying { .. }
                | ShmEvent::Reconciling { .. }
                | ShmEvent::Late { .. }
                | ShmEvent::Item { .. }
                | ShmEvent::OpenOrders { .. }
                | ShmEvent::Protection { .. }
                | ShmEvent::ProtectionFired
                | ShmEvent::OrderUpdate(_)
        )
    }

    /// The same event about the request `tag` instead (the gateway puts a
    /// client's own tag in place of its own); those not about a request
    /// (OpenOrders, Protection, ProtectionFired, OrderUpdate) unchanged.
    pub fn with_tag(self, tag: Tag) -> ShmEvent {
        let mut ev = self;
        match &mut ev {
            ShmEvent::Applied { tag: t }
            | ShmEvent::Rejected { tag: t }
            | ShmEvent::DuplicateId { tag: t }
            | ShmEvent::NotYours { tag: t }
            | ShmEvent::Limited { tag: t, .. }
            | ShmEvent::Retrying { tag: t, .. }
            | ShmEvent::Expired { tag: t, .. }
            | ShmEvent::Reconciling { tag: t }
            | ShmEvent::Reconciled { tag: t, .. }
            | ShmEvent::Unresolved { tag: t }
            | ShmEvent::Item { tag: t, .. }
            | ShmEvent::Late { tag: t, .. }
            | ShmEvent::Halted { tag: t, .. }
            | ShmEvent::BatchSettled { tag: t }
            | ShmEvent::Lost { tag: t } => *t = tag,
            ShmEvent::OpenOrders { .. }
            | ShmEvent::Protection { .. }
            | ShmEvent::ProtectionFired
            | ShmEvent::OrderUpdate(_) => {}
        }
        ev
    }

    /// `ev` as the event ring carries it (its tag kept; the gateway puts the
    /// client's own tag in its place), and its body.
    pub fn of<'a>(ev: &Event<'a>) -> (ShmEvent, &'a [u8]) {
        let none: &'a [u8] = &[];
        match *ev {
            Event::Applied { tag, body } => (ShmEvent::Applied { tag }, body),
            Event::Rejected { tag } => (ShmEvent::Rejected { tag }, none),
            Event::DuplicateId { tag } => (ShmEvent::DuplicateId { tag }, none),
            Event::Limited {
                tag,
                why,
                ready_in_ns,
            } => (
                ShmEvent::Limited {
                    tag,
                    why,
                    ready_in_ns,
                },
                none,
            ),
            Event::Retrying { tag, in_ns } => (ShmEvent::Retrying { tag, in_ns }, none),
            Event::Expired { tag, why } => (ShmEvent::Expired { tag, why }, none),
            Event::Reconciling { tag } => (ShmEvent::Reconciling { tag }, none),
            Event::Reconciled { tag, found } => (ShmEvent::Reconciled { tag, found }, none),
            Event::Unresolved { tag } => (ShmEvent::Unresolved { tag }, none),
            Event::Item { tag, item, fate } => (ShmEvent::Item { tag, item, fate }, none),
            Event::BatchSettled { tag } => (ShmEvent::BatchSettled { tag }, none),
            Event::Late { tag, found } => (ShmEvent::Late { tag, found }, none),
            Event::OpenOrders { age_ns, body, .. } => (ShmEvent::OpenOrders { age_ns }, body),
            Event::Halted { tag, bucket } => (ShmEvent::Halted { tag, bucket }, none),
            Event::Protection { fires_in_ns } => (ShmEvent::Protection { fires_in_ns }, none),
            Event::ProtectionFired => (ShmEvent::ProtectionFired, none),
        }
    }

    /// The [`Event`] it is, with `body` (its body as polled) where the event
    /// has one; None for the three cases only a process apart meets
    /// ([`ShmEvent::NotYours`], [`ShmEvent::Lost`], [`ShmEvent::OrderUpdate`]).
    /// One strategy core written against [`Event`] so serves both modes.
    pub fn event<'b>(&self, body: &'b [u8]) -> Option<Event<'b>> {
        Some(match *self {
            ShmEvent::Applied { tag } => Event::Applied { tag, body },
            ShmEvent::Rejected { tag } => Event::Rejected { tag },
            ShmEvent::DuplicateId { tag } => Event::DuplicateId { tag },
            ShmEvent::Limited {
                tag,
                why,
                ready_in_ns,
            } => Event::Limited {
                tag,
                why,
                ready_in_ns,
            },
            ShmEvent::Retrying { tag, in_ns } => Event::Retrying { tag, in_ns },
            ShmEvent::Expired { tag, why } => Event::Expired { tag, why },
            ShmEvent::Reconciling { tag } => Event::Reconciling { tag },
            ShmEvent::Reconciled { tag, found } => Event::Reconciled { tag, found },
            ShmEvent::Unresolved { tag } => Event::Unresolved { tag },
            ShmEvent::Item { tag, item, fate } => Event::Item { tag, item, fate },
            ShmEvent::BatchSettled { tag } => Event::BatchSettled { tag },
            ShmEvent::Late { tag, found } => Event::Late { tag, found },
            // The hub gives a poll's pages as one event.
            ShmEvent::OpenOrders { age_ns } => Event::OpenOrders {
                age_ns,
                body,
                page: 0,
                more: false,
            },
            ShmEvent::Halted { tag, bucket } => Event::Halted { tag, bucket },
            ShmEvent::Protection { fires_in_ns } => Event::Protection { fires_in_ns },
            ShmEvent::ProtectionFired => Event::ProtectionFired,
            ShmEvent::NotYours { .. } | ShmEvent::Lost { .. } | ShmEvent::OrderUpdate(_) => {
                return None
            }
        })
    }
}
