//! The emulator's venue without sockets, threads or a clock: requests go in as
//! the bytes a client wrote, with the venue's time, and come out as the venue's
//! answer. The deterministic simulator (tools/sim) runs the gateway against this,
//! so the emulator and the simulator share one engine and cannot drift apart.
//!
//! A request is admitted at receipt ([`SansIo::admit`]: limits, bans, signature,
//! the profile's checks) and executed later ([`SansIo::execute`]) or not at all
//! ([`SansIo::drop_unexecuted`]): the network between the two is the caller's.
//! Nothing here reads a clock; the emulator's own faults are off (the caller
//! injects its own).

use std::net::IpAddr;

use crate::config::{Config, Profile};
use crate::dispatch::Op;
use crate::engine::state::{Admission, Venue};
use crate::hashing::Hashing;
use crate::http::{parse_request, Parsed, Response};
use crate::profiles::binance::admit::valid_until_ms;
use crate::report::{OrderView, Report};

/// The venue, driven by hand.
pub struct SansIo {
    pub(crate) venue: Venue,
}

/// A request the venue admitted, waiting to run.
pub struct Admitted {
    op: Op,
    account: usize,
    headers: Vec<(String, String)>,
    admitted_ms: i64,
    valid_until_ms: Option<i64>,
}

/// What [`SansIo::admit`] made of a request.
pub enum Received {
    /// The venue answered at once and runs nothing (a refusal, a read it served).
    Answer(Response),
    /// Admitted: it runs when [`SansIo::execute`] is called.
    Run(Admitted),
}

impl SansIo {
    /// A venue of `config` (its faults are cleared: the caller decides them).
    pub fn new(mut config: Config) -> SansIo {
        config.faults.chances.clear();
        config.faults.script.clear();
        SansIo {
            venue: Venue::new(config, Hashing::fixed()),
        }
    }

    /// Receives the request in `raw` from `ip` at the venue's `now_ms`. A request
    /// that does not parse is answered 400, as over a socket.
    pub fn admit(&mut self, raw: &[u8], ip: IpAddr, now_ms: i64) -> Received {
        let req = match parse_request(raw) {
            Parsed::Complete(r, _) => r,
            Parsed::Bad(status, why) => {
                self.venue.note_malformed();
                return Received::Answer(Response::error(status, -1000, why));
            }
            Parsed::Partial => {
                self.venue.note_malformed();
                return Received::Answer(Response::error(400, -1000, "incomplete request"));
            }
        };
        match self.venue.admit(&req, ip, now_ms) {
            Admission::Final(r) => {
                self.venue.note_status(r.status);
                Received::Answer(r)
            }
            Admission::Run {
                op,
                account,
                headers,
                ..
            } => {
                let valid_until_ms = match self.venue.config().profile {
                    Profile::BinanceSpot | Profile::BinanceFutures => {
                        valid_until_ms(&req.query, &req.body)
                    }
                    _ => None,
                };
                Received::Run(Admitted {
                    op,
                    account,
                    headers,
                    admitted_ms: now_ms,
                    valid_until_ms,
                })
            }
        }
    }

    /// Runs an admitted request at `now_ms` and answers it. A Binance request
    /// whose `timestamp + recvWindow` passed while it waited is refused -1021 by
    /// the matching engine, never executed.
    pub fn execute(&mut self, a: Admitted, now_ms: i64) -> Response {
        if a.valid_until_ms.is_some_and(|t| now_ms > t) {
            self.venue.not_executed(&a.op, a.account, a.admitted_ms);
            let mut r = Response::error(
                400,
                -1021,
                "Timestamp for this request is outside of the recvWindow.",
            );
            r.headers.extend(a.headers);
            self.venue.note_status(400);
            return r;
        }
        let mut r = self.venue.execute(a.op, a.account, now_ms, a.admitted_ms);
        r.headers.extend(a.headers);
        self.venue.note_status(r.status);
        r
    }

    /// An admitted request that never runs (the venue's front end lost it).
    pub fn drop_unexecuted(&mut self, a: Admitted) {
        self.venue.not_executed(&a.op, a.account, a.admitted_ms);
    }

    /// The venue's 5xx answer: after running the request, or without.
    pub fn server_error(&mut self, executed: bool) -> Response {
        self.venue.note_status(503);
        self.venue.server_error(executed)
    }

    /// Bans `ip` from `now_ms` for `duration_ms`, as an automatic ban would (418
    /// with Retry-After to each of its requests until then).
    pub fn ban(&mut self, ip: IpAddr, duration_ms: i64, now_ms: i64) {
        self.venue.ban(ip, duration_ms, now_ms);
    }

    /// The venue's counts so far.
    pub fn report(&self) -> Report {
        self.venue.report()
    }

    /// Every order the venue accepted, oldest first.
    pub fn orders(&self) -> Vec<OrderView> {
        self.venue.orders()
    }
}
