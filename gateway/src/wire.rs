//! The one seam between the gateway and a transport: this turn's time, the budget,
//! and a send that either takes the ticket or hands it back unsent.
//!
//! The event loop's [`Context`] is the transport in production; tests drive the
//! gateway through a scripted one on jumped time.

use ergon_core::{Budget, Ticket};
use ergon_venues::endpoint::Prepared;

use ergon_io::client::{PoolId, Refused, RequestId};
use ergon_io::event_loop::Context;
use ergon_io::http::{unsendable, with_prepared, Request};

/// A transport for the gateway's requests.
pub trait Wire {
    /// This turn's time (the loop's monotonic clock).
    fn now(&self) -> i64;
    /// The budget every request is charged in.
    fn budget(&mut self) -> &mut Budget;
    /// Sends `req` now with its `ticket`, or hands the ticket back unsent.
    fn send(
        &mut self,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused>;
    /// Sends the prepared `req` now with its `ticket`, or hands the ticket back
    /// unsent, as [`Wire::send`] does with `req` encoded. Default: `req` encoded
    /// from its method, target, headers and body through [`Wire::send`] (an empty
    /// one refused, [`InvalidRequest::Method`](ergon_io::http::InvalidRequest::Method); one whose signature is pending,
    /// [`InvalidRequest::Unsigned`](ergon_io::http::InvalidRequest::Unsigned)); a transport on the pool overrides
    /// it to copy out a request its adapter wrote as HTTP/1.1 already
    /// ([`Prepared::http`]).
    fn send_prepared(
        &mut self,
        req: &Prepared,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        with_prepared(req, ticket, |r, t| self.send(r, t, deadline_ns))
            .unwrap_or_else(|t| Err(Refused::Invalid(t, unsendable(req))))
    }
    /// The transport's connect charges so far, for the record: (admitted, and the
    /// connect left; refused by the budget). A connect refunded because it never
    /// left is in neither (it changed nothing). Default: a transport that charges
    /// no connects, (0, 0).
    fn connects(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// The event loop's context on one pool: the production [`Wire`].
pub struct LoopWire<'a, 'c> {
    /// The handler call's context.
    pub cx: &'a mut Context<'c>,
    /// The gateway's pool.
    pub pool: PoolId,
}

impl Wire for LoopWire<'_, '_> {
    fn now(&self) -> i64 {
        self.cx.now()
    }

    fn budget(&mut self) -> &mut Budget {
        self.cx.budget()
    }

    fn send(
        &mut self,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        self.cx.request(self.pool, req, ticket, deadline_ns)
    }

    /// Through [`Context::request_prepared`]: a request written as HTTP/1.1
    /// already is copied out as it is.
    fn send_prepared(
        &mut self,
        req: &Prepared,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        self.cx
            .request_prepared(self.pool, req, ticket, deadline_ns)
    }

    /// The client's pools together (a gateway's loop has its one pool).
    fn connects(&self) -> (u64, u64) {
        let c = self.cx.client().counters();
        (c.connects, c.connects_limited)
    }
}

/// Calls `f` with `p` as the client encodes it (None: `p` is empty).
pub(crate) fn encode<R>(p: &Prepared, f: impl FnOnce(&Request<'_>) -> R) -> Option<R> {
    with_prepared(p, (), |r, ()| f(r)).ok()
}
