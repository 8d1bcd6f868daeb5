//! The native HTTP/1.1 client: per-origin pools of keep-alive connections that never
//! write a request twice.
//!
//! [`Context::request`](crate::event_loop::Context::request) returns at once, with a
//! [`RequestId`] or with the [`Ticket`](ergon_core::Ticket) handed back ([`Refused::Busy`]) when no
//! connection of the pool is ready. Every accepted request ends in exactly one
//! call: [`ClientHandler::on_response`] with the [`Flight`](ergon_core::Flight), or
//! [`ClientHandler::on_error`] with [`Sent::No`] (not one byte was written: refund
//! the ticket) or [`Sent::Maybe`] (it may have run: reconcile).
//!
//! Why a request cannot be written twice, by construction: it is encoded once into
//! its connection's send buffer, whose position only moves forward; the ticket (or
//! flight) travels with that connection and leaves it only to be reported; a
//! connection that failed is closed and its buffers reset before it carries
//! anything again; and nothing here keeps a request to send later. There is no
//! retry path to misuse: re-sending is the caller's decision
//! ([`Budget::resend`](ergon_core::Budget::resend)).
//!
//! The send path ([`Client::request`]) allocates nothing, takes no lock and logs
//! nothing; see [`Client`] for the two system calls it makes.
//!
//! A pool with `PoolConfig::curl` set (feature `curl`) sends through libcurl under
//! the same contract instead; see the `curl` module for what it refuses and why.
//!
//! Egress lanes: [`PoolConfig::local_addr`] binds every connection of a pool to a
//! local address before it connects, so trading and monitoring traffic leave from
//! different IPs and each IP gets its own budget. Some stacks silently ignore a
//! binding, so after each connect the client reads the socket's local address back
//! (`getsockname`); if it differs from the one asked, the pool is refused for good
//! ([`Error::LocalAddr`], [`Client::refused`]): no request ever leaves from an IP
//! whose budget is not the one charged. Venues count limits per source IP: two
//! budgets that believe they own the same real IP each spend the whole limit, so
//! together they send twice what the venue allows, a guaranteed 429 storm (and
//! then a ban). One budget per IP, one IP per budget.
//!
//! Module shape: this module only names things. The rules live in the sans-IO
//! [`Pool`](crate::pool::Pool) (phases, deadlines, keep-alive, reconnects,
//! connect charges, lanes; no system call, no clock), the system calls in the
//! transports under it ([`Client`]: sockets, TLS, libcurl), the handler and its
//! [`Context`](crate::event_loop::Context) between them and the loop, and the
//! loop ([`crate::event_loop`]) drives them all. None of them imports one that
//! imports it back (`tools/layout/tests/workspace.rs`).

pub use crate::handler::ClientHandler;
pub use crate::pool::{Counters, Error, PoolConfig, PoolError, PoolId, Refused, RequestId, Sent};
pub use crate::transport::Client;
