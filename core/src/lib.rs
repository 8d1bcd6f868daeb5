//! ergon-core: the sans-IO request budget.
//!
//! A [`Budget`] owns a fixed set of buckets, each one limit of one scope (IP weight
//! per minute, orders per 10 s, connects per 5 minutes, requests in flight ...).
//! Before a request goes out, [`Budget::try_charge`] charges every bucket it counts
//! against, all or none. The [`Ticket`] it returns is the receipt: it is refunded if
//! the request never left, or turned into a [`Flight`] by [`Ticket::sent`] once a
//! byte was written, after which no refund exists.
//!
//! After the answer, the venue adapter turns it into a [`Verdict`] and feeds what the
//! server said back in ([`Budget::observe_used`], [`Budget::throttled`],
//! [`Budget::banned`]); [`Budget::resend`] applies the one re-send rule.
//!
//! This crate never reads a clock, never allocates after [`Builder::build`], never
//! locks and never performs I/O: time is always an `i64` nanosecond parameter on the
//! caller's monotonic clock, and the caller decides when to wait and what to send.
//!
//! ```
//! use ergon_core::{Budget, Class, Part, Spec, Why};
//!
//! const SEC: i64 = 1_000_000_000;
//! let mut b = Budget::builder();
//! let weight = b.add("weight", Spec::sliding(1200, 60 * SEC, 60)).unwrap();
//! let orders = b.add("orders10s", Spec::fixed(50, 10 * SEC).guard(20_000_000)).unwrap();
//! let ip = b.add("ip", Spec::gate()).unwrap();
//! let mut budget = b.build(0).unwrap();
//!
//! let order = [Part::new(weight, 1), Part::new(orders, 1), Part::new(ip, 0)];
//! let ticket = budget.try_charge(&order, Class::Normal, SEC).unwrap();
//! let flight = ticket.sent(); // a byte left: from here on no refund exists
//! budget.complete(flight, 2 * SEC).unwrap();
//!
//! budget.banned(ip, 300 * SEC, 3 * SEC).unwrap();
//! let refused = budget.try_charge(&order, Class::Urgent, 4 * SEC).unwrap_err();
//! assert_eq!(refused.why, Why::Halted);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod budget;
mod fixed;
mod gcra;
mod ring;
mod spec;
mod stats;
mod ticket;
mod verdict;

pub use budget::{Budget, Builder, DEFAULT_HOLD_GUARD_NS};
pub use fixed::CountsIn;
pub use spec::{ConfigError, Kind, Spec};
pub use stats::{Refusals, Stats};
pub use ticket::{BucketId, Class, Flight, ForeignId, Limited, Part, Shape, Ticket, Why};
pub use verdict::{Resend, Verdict};

/// Most buckets one [`Budget`] holds.
pub const MAX_BUCKETS: usize = 32;
/// Most parts one charge may name.
pub const MAX_PARTS: usize = 8;
/// Entries of the table in which a [`Budget`] keeps the part lists of the tickets of
/// [`Budget::try_charge`] (one per distinct list, shared by all its tickets). A full
/// table never refuses a list that charges no in-flight bucket: the least recently
/// charged such list gives its entry up, and a refund of one of its older tickets
/// then gives nothing back (an over-count until its windows pass). A new list is
/// refused with [`Why::Receipts`] only while every entry holds a list that charges an
/// in-flight bucket and has tickets or flights outstanding. Shapes
/// ([`Budget::try_charge_shape`]) do not count.
pub const MAX_LISTS: usize = 64;
/// Most [`Shape`]s one [`Budget`] registers.
pub const MAX_SHAPES: usize = 32;
/// Most slots of one sliding window.
pub const MAX_SLOTS: usize = 64;
/// Longest bucket name, in bytes.
pub const MAX_NAME: usize = 32;
