//! ergon-gatewayd: the process an operator runs (binary `ergon-gateway`). It owns
//! the venue connections, the budget and the keys of one IP and one account;
//! strategy processes attach over shared memory ([`shm`]: the hub, the journal
//! and the files beside it) with the client that [`ergon_gateway::shm`] holds.
//! Around the hub: the configuration file ([`config`]), `/metrics` and `/health`
//! ([`metrics`], [`health`]) and the account limits leased through etcd
//! ([`lease`]), and the account's secrets ([`secret`]: files only this uid can
//! read, zeroized). The order path itself is the library, `ergon_gateway`.

// Unsafe only where it is needed, each module saying why: shm::journal (a
// typed view of its mapping), secret (scrubbing the environment, the owner's
// uid) and main (the signal handler, process settings).
// Every unsafe block states its SAFETY reason.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod config;
pub mod exposition;
pub mod health;
mod http;
pub mod lease;
pub mod metrics;
pub mod secret;
pub mod shm;
