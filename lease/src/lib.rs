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
//!
//! # Wiring it into a loop
//!
//! Each host names the account's limit (the same on every host) and its own safe
//! share. The allocator reserves the safe share for the host's process (its name
//! and its first lease) in the grant table, from units nobody holds, and divides
//! the rest (the pool) by demand. The host uses nothing before its reservation is
//! in a table it read: declare the bucket at the safe share and start sending
//! after [`LeaseThread::wait_reserved`]. From then on the safe share is usable
//! whether etcd answers or not, for the hold ([`LeaseConfig::hold`]) after the last
//! table read that showed it; a host stopped for good gives it back with
//! [`store::release_host`] (`ergon-gateway release-host`). A process restarted
//! under the same name gets the reservation only hold + window + margin after the
//! previous one was last seen, unless that one stopped cleanly and handed it over
//! ([`LeaseThread::hand_over`], [`clean_stop`]): then at once, less what it counted
//! in its last window; a second live process of a name gets nothing.
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use ergon_core::{Budget, Spec};
//! use ergon_lease::{BucketLease, LeaseConfig, LeaseThread, Leased};
//!
//! const SEC: i64 = 1_000_000_000;
//! let (account, safe) = (50, 5); // orders per 10 s
//! let mut b = Budget::builder();
//! let orders = b.add("orders10s", Spec::fixed(safe, 10 * SEC)).unwrap();
//! let mut budget = b.build(0).unwrap();
//!
//! let origin = Instant::now();
//! let lease = LeaseThread::spawn(
//!     LeaseConfig {
//!         endpoints: vec!["http://10.0.0.1:2379".into(), "http://10.0.0.2:2379".into()],
//!         security: Default::default(),
//!         prefix: "ergon".into(),
//!         account: "main".into(),
//!         host: "host-a".into(),
//!         ttl: Duration::from_secs(10),
//!         margin: Duration::from_secs(1),
//!         hold: Duration::from_secs(60),
//!         period: Duration::from_secs(2),
//!         timeout: Duration::from_millis(500),
//!         buckets: vec![BucketLease {
//!             name: "orders10s".into(),
//!             limit: account,
//!             safe,
//!             floor: 2,
//!             window: Duration::from_secs(10),
//!         }],
//!     },
//!     origin,
//! )
//! .unwrap();
//! lease.wait_reserved(Duration::from_secs(10)).unwrap();
//! let mut leased = Leased::new(lease.shared(0).unwrap(), orders);
//! // Each turn of the loop, with the instant and the budget time it read:
//! let now = Instant::now();
//! let now_ns = now.duration_since(origin).as_nanos() as i64;
//! leased.poll(&mut budget, now, now_ns).unwrap();
//! let s = budget.stats(orders).unwrap();
//! leased.report(s.admitted, s.refusals.full);
//! // A monitor: lease.shared(0).unwrap().view(Instant::now()).
//! ```
//!
//! The venue's own account-wide counters (Binance's `X-MBX-ORDER-COUNT-10S`) count
//! every host: they must not raise a leased bucket's count through
//! `Budget::observe_used`; compare them with the account limit instead.
pub mod clean_stop;
pub mod etcd;
pub mod handoff;
pub mod rule;
pub mod secure;
pub mod store;
mod sync;
// The lease thread shares std `Arc`s with the loop; under loom only the hand-off
// and the rule are built.
#[cfg(not(ergon_loom))]
pub mod thread;

pub use handoff::{Leased, Shared, View};
pub use rule::{
    Allocator, Config, Demand, Entry, Host, Report, Reserve, RuleError, Snapshot, Table, Write,
};
#[cfg(not(ergon_loom))]
pub use thread::{
    BucketLease, BucketStatus, HandedOver, LeaseConfig, LeaseError, LeaseThread, Status,
};
