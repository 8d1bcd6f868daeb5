//! [`Output`]: the one event type every transport under the client reports in,
//! for the loop to hand to its handler.
//!
//! The native transport (sockets and TLS under the [`Pool`](crate::pool::Pool))
//! and the libcurl transport (feature `curl`) are siblings: each reports what
//! became of its requests as an `Output`, differing only in where a response's
//! bytes are while the handler reads them (the `B` of [`Output::Response`]). The
//! client puts both behind one body type (`transport::Body`), so the loop sees
//! one stream of outputs and never asks which transport made one. A leaf, so
//! both transports can name it without naming each other.

use ergon_core::Flight;

use crate::pool::{Error, PoolId, RequestId, Sent};

/// One output of a transport, with the response's bytes in a `B`.
#[derive(Debug)]
pub(crate) enum Output<B> {
    /// A new connection of the pool is open and idle.
    Ready(PoolId),
    /// A connect of the pool failed.
    ConnectError(PoolId, Error),
    /// A request failed.
    Failed {
        id: RequestId,
        sent: Sent,
        error: Error,
    },
    /// libcurl wrote request `id` `copies` more times (already charged); the
    /// request's own end comes next.
    #[cfg(feature = "curl")]
    Resent { id: RequestId, copies: u32 },
    /// A response: its bytes are in `body` until the handler read them.
    Response {
        id: RequestId,
        flight: Flight,
        body: B,
    },
}

impl<B> Output<B> {
    /// The same output with its body (if any) put into another type.
    #[inline]
    pub(crate) fn map_body<C>(self, f: impl FnOnce(B) -> C) -> Output<C> {
        match self {
            Output::Ready(p) => Output::Ready(p),
            Output::ConnectError(p, e) => Output::ConnectError(p, e),
            Output::Failed { id, sent, error } => Output::Failed { id, sent, error },
            #[cfg(feature = "curl")]
            Output::Resent { id, copies } => Output::Resent { id, copies },
            Output::Response { id, flight, body } => Output::Response {
                id,
                flight,
                body: f(body),
            },
        }
    }
}
