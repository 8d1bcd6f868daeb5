//! ergon-lease: account-wide limits shared by several hosts through etcd.
//!
//! IP limits stay per host; an account's limits (Binance's order counts, Bybit's and
//! OKX's per-account endpoint limits, Hyperliquid's address budget) are shared by every
//! host trading the account. Each host's leased bucket has its **grant** as its limit
//! and keeps deciding locally, in nanoseconds: nothing on the send path talks to etcd.
//!
//! - [`rule`]: the allocation rule, sans-IO (no I/O, no clock): the [`Allocator`]
//!   that re-divides the pool by demand, and the [`Host`] side that knows which grant
//!   it may use until when.
//! - [`etcd`]: a small blocking client of etcd's JSON gateway.
//! - [`store`]: the keys of a leased bucket in etcd.
//! - [`LeaseThread`]: the thread that holds the lease, publishes demand, reads
//!   grants and, while it holds the allocator key, allocates.
//! - [`Leased`]: the loop's side: applies the posted limit with
//!   [`ergon_core::Budget::set_limit`] once per turn, and falls back to the safe
//!   share by itself at the renewal deadline. Lock-free; never blocks.
pub mod etcd;
pub mod handoff;
pub mod rule;
pub mod store;
mod sync;
// The lease thread shares std `Arc`s with the loop; under loom only the hand-off
// and the rule are built.
#[cfg(not(ergon_loom))]
pub mod thread;

pub use handoff::{Leased, Shared, View};
pub use rule::{Allocator, Config, Demand, Entry, Host, Report, RuleError, Snapshot, Table, Write};
#[cfg(not(ergon_loom))]
pub use thread::{BucketLease, BucketStatus, LeaseConfig, LeaseError, LeaseThread, Status};
