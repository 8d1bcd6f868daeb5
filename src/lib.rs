//! ergon keeps a trading process inside its venues' request limits.
//!
//! This facade re-exports the five crates:
//! - [`core`] (`ergon-core`): the sans-IO budget, verdicts and the re-send rule;
//! - [`venues`] (`ergon-venues`): the response view, the JSON reader, the venue
//!   adapters and their typed endpoints;
//! - [`io`] (`ergon-io`): the transports, everything that touches the OS;
//! - [`gateway`] (`ergon-gateway`): one order, start to end, on one venue account;
//! - [`lease`] (`ergon-lease`): account-wide limits shared by several hosts through
//!   etcd.

pub use ergon_core as core;
pub use ergon_gateway as gateway;
pub use ergon_io as io;
pub use ergon_lease as lease;
pub use ergon_venues as venues;
