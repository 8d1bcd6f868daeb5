//! The libcurl transport (feature `curl`): the same
//! [`ClientHandler`](crate::client::ClientHandler) contract as the native
//! client, over a libcurl multi handle driven on the loop thread.
//!
//! A pool whose [`PoolConfig::curl`] is set sends through libcurl instead of the
//! native connections: requests go through
//! [`Context::request`](crate::event_loop::Context::request) as usual and end in
//! exactly one [`on_response`](crate::client::ClientHandler::on_response) or
//! [`on_error`](crate::client::ClientHandler::on_error). Whether any byte left
//! is taken from libcurl's debug stream (a header or data byte sent): none seen
//! is [`Sent::No`].
//!
//! Why this client refuses most methods: libcurl re-sends a request, POST
//! included, when a reused connection dies before any reply byte
//! (`Curl_retry_request` in lib/transfer.c), and no option turns that off. A
//! re-sent order is a duplicated order. So every method but GET, HEAD, OPTIONS
//! and DELETE fails at once with [`Error::CurlResend`] (and [`Sent::No`]) unless
//! [`CurlConfig::curl_allow_non_idempotent_methods`] is set by a caller who
//! accepts that. The native client has no such path.
//!
//! Even a GET or DELETE re-sent counts at the venue (a late duplicate DELETE can
//! cancel a newer order). So every request head libcurl writes is counted (the
//! debug callback sees each one); each copy beyond the first is charged to the
//! budget after the fact, on the ticket's own parts
//! ([`Budget::charge_after`]), counted in
//! [`Counters::resent`](crate::client::Counters::resent) and reported with
//! [`ClientHandler::on_resent`](crate::client::ClientHandler::on_resent) just
//! before the request's answer.
//!
//! Limits of this client, by design of libcurl: it allocates per request, it
//! opens connections on its own (each socket it opens is charged to the pool's
//! connect parts after the fact, with [`Budget::charge_after`]), it speaks plain
//! HTTP here (libcurl is built from the crate's bundled source without a TLS
//! library, so a fresh machine needs nothing installed). Its sockets are watched
//! in the loop's epoll and its timer is one of the loop's deadlines, so a loop in
//! epoll mode parks while libcurl waits. What it must never do: re-send a
//! request of a method it refuses, or report `Sent::No` after a byte left.
//!
//! Shape: a sibling of the native transport, not a branch inside it. The client
//! (`transport`) holds both and asks one then the other, verb by verb
//! (`request`, `handle_event`, `handle_timeout`, `poll_timeout`, `has_output`,
//! `poll_output`, the body's view and restore, `idle`, `in_flight`,
//! `close_all`); the [`Pool`] knows nothing of libcurl beyond giving a libcurl
//! pool no connection slots. The two share:
//!
//! - the output type: both report in the crate's one `Output` type (module `output`), a response's
//!   body being a finished transfer here and a connection's buffer there; the
//!   client wraps both in one body type, so the loop and the handler cannot
//!   tell the transports apart;
//! - the [`RequestId`] space and the [`Counters`](crate::client::Counters): the
//!   [`Pool`] keeps both, and this transport takes its ids from the same counter
//!   (`Pool::next_id`) and counts into the same counters, so ids are
//!   unique across transports and the counters tell one story;
//! - the epoll: libcurl's sockets carry epoll tokens with the `CURL_TOKEN` bit,
//!   which no native connection slot has, so an event goes to exactly one
//!   transport;
//! - the pool ids: a libcurl pool is added to the [`Pool`] like any other (its
//!   configuration checked the same way, its [`PoolId`] from the same
//!   sequence), and this transport keeps a copy of its configuration.
//!
//! Without the feature, `curl_off.rs` stands in: a transport that carries no
//! pool, so every libcurl branch of the client compiles to nothing.

use std::os::raw::c_int;

use ergon_core::{Budget, Ticket};
use ergon_venues::response::Response;

use crate::http::{Headers, Request};
use crate::output::Output;
pub use crate::pool::{CurlConfig, CurlError};
use crate::pool::{Error, Pool, PoolConfig, PoolId, Refused, RequestId, Sent};

mod transfer;

pub(crate) use transfer::Finished;
use transfer::{Curl, Ended, CURL_TOKEN};

/// Whether libcurl may carry `method` without the caller's explicit consent.
pub fn idempotent(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "DELETE")
}

/// One libcurl pool: its transfers and its configuration.
#[derive(Debug)]
struct Origin {
    transfers: core::ops::Range<usize>,
    cfg: PoolConfig,
    curl: CurlConfig,
}

/// The libcurl transport the client drives beside the native one (see the
/// module doc for what the two share).
///
/// Drive order, as the native side's: after any input (`request`,
/// `handle_event`, `handle_timeout`), drain [`poll_output`](Self::poll_output)
/// while [`has_output`](Self::has_output) says so; park no later than
/// [`poll_timeout`](Self::poll_timeout).
#[derive(Debug)]
pub(crate) struct CurlTransport {
    curl: Curl,
    /// By pool index: `Some` for a libcurl pool, `None` for a native one.
    pools: Vec<Option<Origin>>,
    /// Transfers that ended, reported from `next` on.
    ended: Vec<usize>,
    next: usize,
    /// An end whose re-sent copies were reported, to report next.
    pending: Option<Ended>,
}

impl CurlTransport {
    /// libcurl's sockets are watched in the loop's epoll `epfd`.
    pub(crate) fn new(epfd: c_int) -> Self {
        CurlTransport {
            curl: Curl::new(epfd),
            pools: Vec::new(),
            ended: Vec::new(),
            next: 0,
            pending: None,
        }
    }

    /// Takes pool `id` (just added to `pool`) if it is a libcurl pool: its
    /// `connections` transfers (the most requests in flight). Setup time:
    /// allocates.
    pub(crate) fn add_pool(&mut self, pool: &Pool, id: PoolId) {
        let origin = pool.config(id).and_then(|cfg| {
            let curl = cfg.curl?;
            let transfers = self.curl.add_pool(id.0, cfg.connections, &cfg.limits);
            self.ended.reserve(transfers.len());
            Some(Origin {
                transfers,
                cfg: cfg.clone(),
                curl,
            })
        });
        if self.pools.len() <= id.index() {
            self.pools.resize_with(id.index() + 1, || None);
        }
        self.pools[id.index()] = origin;
    }

    /// Whether `pool` is a libcurl pool (its requests, `idle` and so on are
    /// this transport's).
    #[inline]
    pub(crate) fn carries(&self, pool: PoolId) -> bool {
        self.pools.get(pool.index()).is_some_and(Option::is_some)
    }

    /// Whether epoll token `token` is one of libcurl's sockets.
    #[inline]
    pub(crate) fn owns(&self, token: u64) -> bool {
        token & CURL_TOKEN != 0
    }

    /// How many transfers of `pool` are free now.
    pub(crate) fn idle(&self, pool: PoolId) -> usize {
        match self.pools.get(pool.index()) {
            Some(Some(o)) => self.curl.idle(o.transfers.clone()),
            _ => 0,
        }
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.curl.in_flight()
    }

    /// Starts `req` on a free transfer of `pool`, or hands the ticket back; the
    /// id comes from `books` (the pool's id counter), which also counts it.
    pub(crate) fn request(
        &mut self,
        books: &mut Pool,
        pool: PoolId,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
        now: i64,
    ) -> Result<RequestId, Refused> {
        let Some(Some(o)) = self.pools.get(pool.index()) else {
            return Err(Refused::UnknownPool(ticket));
        };
        if deadline_ns <= now {
            return Err(Refused::Expired(ticket));
        }
        if let Err(e) = self.curl.validate(req, &o.cfg.host) {
            return Err(Refused::Invalid(ticket, e));
        }
        let Some(k) = self.curl.free(o.transfers.clone()) else {
            books.counters.busy += 1;
            return Err(Refused::Busy(ticket));
        };
        // Minted as the native path does, from the same counter.
        let id = RequestId(books.next_id);
        books.next_id += 1;
        self.curl
            .start(k, &o.cfg, o.curl, req, id, ticket, deadline_ns, now);
        books.counters.requests += 1;
        Ok(id)
    }

    /// Readiness of the libcurl socket with epoll token `token`.
    pub(crate) fn handle_event(&mut self, token: u64, events: u32, now: i64) {
        self.curl
            .on_socket((token & !CURL_TOKEN) as c_int, events, now);
    }

    /// Runs libcurl and collects what ended; sockets it opened are charged as
    /// connects of their pool, and counted in `books`.
    pub(crate) fn handle_timeout(&mut self, books: &mut Pool, budget: &mut Budget, now: i64) {
        if !self.curl.busy() {
            return;
        }
        let pools = &self.pools;
        self.curl.drive(now, &mut self.ended, |p, n| {
            books.counters.connects += u64::from(n);
            if let Some(Some(o)) = pools.get(usize::from(p)) {
                for part in &o.cfg.connect_parts {
                    let own = budget.charge_after(part.bucket, part.cost.saturating_mul(n), now);
                    debug_assert!(own.is_ok(), "pools charge the budget they are driven with");
                }
            }
        });
    }

    /// The earliest time libcurl needs the loop to wake for.
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<i64> {
        self.curl.next_deadline()
    }

    /// Whether [`poll_output`](Self::poll_output) may have anything.
    #[inline]
    pub(crate) fn has_output(&self) -> bool {
        self.pending.is_some() || self.next < self.ended.len() || self.curl.busy()
    }

    /// The next end of a transfer, its re-sent copies charged to `budget`,
    /// counted in `books` and reported first.
    pub(crate) fn poll_output(
        &mut self,
        books: &mut Pool,
        budget: &mut Budget,
        now: i64,
    ) -> Option<Output<Finished>> {
        if let Some(end) = self.pending.take() {
            return Some(report(books, end));
        }
        loop {
            if self.next >= self.ended.len() {
                self.ended.clear();
                self.next = 0;
                if !self.curl.busy() {
                    return None;
                }
                self.curl.failed_now(&mut self.ended);
                if self.ended.is_empty() {
                    return None;
                }
            }
            let k = self.ended[self.next];
            self.next += 1;
            let Some(end) = self.curl.take(k) else {
                continue;
            };
            let (id, ticket, resent) = match &end {
                Ended::Response(id, ticket, _, n) | Ended::Error(id, ticket, _, _, n) => {
                    (*id, ticket, *n)
                }
            };
            if resent == 0 {
                return Some(report(books, end));
            }
            // The venue counted every copy: charge each, after the fact (a shape's
            // ticket included: its parts are its shape's).
            let parts: arrayvec::ArrayVec<ergon_core::Part, { ergon_core::MAX_PARTS }> = budget
                .ticket_parts(ticket)
                .map(|p| p.iter().copied().take(ergon_core::MAX_PARTS).collect())
                .unwrap_or_default();
            debug_assert!(
                budget.ticket_parts(ticket).is_ok(),
                "pools charge the budget they are driven with"
            );
            for p in parts {
                let own = budget.charge_after(p.bucket, p.cost.saturating_mul(resent), now);
                debug_assert!(own.is_ok(), "pools charge the budget they are driven with");
            }
            books.counters.resent += u64::from(resent);
            self.pending = Some(end);
            return Some(Output::Resent { id, copies: resent });
        }
    }

    /// The response a finished transfer holds.
    #[inline]
    pub(crate) fn view<'h, 'a: 'h>(f: &'a Finished, headers: &'h mut Headers<'a>) -> Response<'h> {
        f.response(headers)
    }

    /// Gives a reported response's handle back to its transfer.
    pub(crate) fn restore(&mut self, f: Finished) {
        self.curl.restore(f);
    }

    /// Ends every transfer with a request (shutdown): each is reported as failed
    /// with [`Error::Closed`] unless it already ended.
    pub(crate) fn close_all(&mut self) {
        self.curl.abort_all(&mut self.ended);
    }
}

/// One transfer's end as an output, counted in `books`.
fn report(books: &mut Pool, end: Ended) -> Output<Finished> {
    let counters = &mut books.counters;
    match end {
        Ended::Response(id, ticket, f, _) => {
            counters.responses += 1;
            Output::Response {
                id,
                flight: ticket.sent(),
                body: f,
            }
        }
        Ended::Error(id, ticket, sent, error, _) => {
            let sent = if sent {
                counters.sent_maybe += 1;
                Sent::Maybe(ticket.sent())
            } else {
                counters.sent_no += 1;
                Sent::No(ticket)
            };
            if error == Error::Timeout {
                counters.timeouts += 1;
            }
            Output::Failed { id, sent, error }
        }
    }
}
