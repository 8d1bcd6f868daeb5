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
pub mod rule;

pub use rule::{Allocator, Config, Demand, Entry, Host, Report, RuleError, Snapshot, Table, Write};
