//! ergon-gateway: one venue account on one egress lane, one order from start to end.
//!
//! The caller prepares a typed request (a venue's [`Endpoints`] write it into a
//! [`Prepared`]: parts, signed method/target/headers/body, deadline, client order
//! id) and submits it with a class and a tag. It gets typed [`Event`]s back,
//! each carrying the tag: [`Event::Applied`], [`Event::Rejected`],
//! [`Event::Limited`] (refused locally, nothing sent), [`Event::Retrying`] (only
//! what surely did not run, through [`ergon_core::Budget::resend`], inside its
//! deadline), [`Event::Expired`], [`Event::Reconciling`] then [`Event::Reconciled`]
//! (an unknown outcome, queried by client order id, never re-sent), and
//! [`Event::Halted`] (a ban: nothing that charges the scope leaves until a person
//! clears it), [`Event::DuplicateId`] (the client order id is live: refused, nothing
//! sent). The caller never holds a ticket.
//!
//! Client order ids come from the gateway ([`Gateway::next_client_order_id`], see
//! [`ids`]): a boot epoch and a sequence, so that no restart repeats one. A
//! strategy may still name its own; one the gateway still tracks is refused.
//!
//! ```text
//! let (mut lp, gateway, pool) = Gateway::start(&Start::new(addr, host), "BTCUSDT", |boot, b| {
//!     BinanceSpot::declare(boot, b, &keys, guard) // limits from exchangeInfo: Account::declare
//! })?;
//! // in the strategy (on the loop thread):
//! api.venue_mut().new_order(&mut req, &order, api.now())?;
//! if let Err(final_event) = api.submit(&mut req, Class::Normal, tag) { .. }
//! fn on_event(&mut self, api, ev) { match ev { Event::Applied { tag, body } => .., .. } }
//! ```
//!
//! The fast path prepares straight into the ledger slot the request will take,
//! with no buffer of the caller's and none swapped ([`Gateway::submit_with`],
//! [`Api::submit_with`]); with an order template it rewrites the slot's last
//! order in place:
//! `api.submit_with(Class::Normal, tag, |venue, req| venue.new_order_from(&t, req, &fill, now))`.
//!
//! # Drive order
//!
//! [`Gateway::submit`] (charge all or none → ledger → send) ·
//! [`Gateway::on_response`] / [`Gateway::on_error`] (the transport's report →
//! the adapter's verdict → the settle rule → at most one event, returned) ·
//! [`Gateway::poll`] when [`Gateway::poll_timeout`] has come (due re-sends and
//! reconcile queries) · then drain [`Gateway::poll_event`] until it is empty. The
//! [`Driver`] does exactly this on the event loop after every call; tests do it on
//! jumped time through a scripted [`Wire`].
//!
//! # The settle rule
//!
//! **An accepted request holds one ledger slot from its submit until its one final
//! event, and the budget side of every send is settled at the moment the transport
//! reports on it: never written (handed back, or failed with `Sent::No`) is
//! refunded; written (answered, or failed with `Sent::Maybe`) is completed. What
//! follows is decided by [`ergon_core::Budget::resend`] alone: Done → Applied,
//! Rejected → Rejected, Unknown (a write that may have run) → a query by client
//! order id until it says Found or NotFound, never a re-send; Throttled, NotRun
//! and ClockSkew → charged again and re-sent only before the request's deadline
//! (and at most [`MAX_RESENDS`] times), else Expired; Banned, or a re-send refused
//! by a halt → Halted.** A read whose outcome is unknown counts as not run: reading
//! again is harmless. Requests from strategy threads ([`remote`]) go through the
//! same ledger and rule.
//!
//! # Bootstrap, clock, open orders
//!
//! [`Gateway::start`] reads the venue's time (anchoring the venue clock at the
//! round trip's midpoint) and its published limits on its own connection; two
//! clock-skew answers in a row re-read the time, re-anchor ([`Account::set_clock`])
//! and realign every fixed bucket's windows to the new anchor
//! ([`Budget::set_phase`](ergon_core::Budget::set_phase)).
//! Open orders come from [`Gateway::poll_open_orders`] and, on Binance Spot, from
//! the user data stream of the WebSocket API ([`ws_api`]: with
//! [`Start::ws_api`], orders and reconcile queries go over that connection, in the
//! same ledger under the same rule, and `executionReport`s reach
//! [`Strategy::on_order_update`]). Binance Spot's listenKey stream was
//! discontinued on 2026-02-20, and nothing here ever calls
//! `/api/v3/userDataStream`.
//!
//! Nothing here reads a clock (time is the [`Wire`]'s `now`), and the steady state
//! allocates nothing: the ledger, its request buffers and the event queue are
//! sized at construction.

// Unsafe only where it is needed, each module saying why: shm::os (the system
// calls of the shared regions), shm::region, shm::charges and shm::stats (typed
// views of the mappings). Every unsafe block states its SAFETY reason.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bootstrap;
pub mod dcp;
mod driver;
mod endpoints;
mod events;
pub mod hyperliquid;
pub mod ids;
pub mod labels;
pub mod lane_api;
mod ledger;
mod load;
mod machine;
pub mod observe;
pub mod protection;
pub mod record;
mod shapes;
// The loom build's eventfd is a model with no descriptor to watch.
#[cfg(not(ergon_loom))]
mod remote;
#[cfg(not(ergon_loom))]
pub mod shm;
mod url;
mod venues;
pub mod wall;
mod wire;
pub mod ws_api;

pub use bootstrap::{
    boot_room, declare_ws_connects, open_ws_api, run, start_budget, ws_lane_of, Start, StartError,
    WsProbe, BAN_END_MARGIN_NS, IP_GATE,
};
pub use driver::{Api, Control, Driver, Host, Strategy, GATEWAY_TIMER};
pub use endpoints::NOT_FOUND_MARGIN_NS;
pub use endpoints::{Account, AddressBudget, Boot, DcpSpec, DeclareError, Keys};
pub use events::{Event, Expiry, ItemFate, Tag, TagName, OPEN_ORDERS, ORDER_UPDATE, PROTECTION};
pub use ledger::{Entry, Key, Ledger, Stage};
pub use load::binding;
pub use machine::{
    Gateway, Stats, WsIn, MAX_QUERIES, MAX_RESENDS, OPEN_PAGES, OPEN_PAGE_TRIES,
    QUERY_BACKOFF_MAX_NS, QUERY_BACKOFF_NS, QUERY_CLASS, REFUSED_QUERIES_NS, REJECTED_WORDS,
    RESEND_BACKOFF_MAX_NS, RESEND_BACKOFF_NS, RETRY_GAP_NS, SKEWS_TO_REANCHOR, UNRESOLVED_AFTER_NS,
    WATCH_NS,
};
#[cfg(not(ergon_loom))]
pub use remote::{
    remote, Delivered, Remote, RemoteError, RemoteHandle, Submission, MIN_UPDATES, REMOTE_WAKE,
};
pub use url::UrlError;
pub use wire::{LoopWire, Wire};
pub use ws_api::{WsApiStart, WsApiStats, WsLane, WsLaneError, WsState, SILENT_NS, WS_API};

pub use ergon_venues::endpoint::{Endpoints, Label, OrderState, Prepared};
pub use labels::{LabelError, LabelMonitor, LabelReader, Labels, MAX_LABELS};
