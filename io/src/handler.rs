//! What runs on the loop thread on the caller's behalf: [`ClientHandler`], the
//! [`Context`] each of its calls gets (send, charge, timers, descriptors, stop),
//! and the loop's small types ([`Interest`], [`Readiness`], [`LoopError`]).
//!
//! Between the transports ([`crate::transport`]) and the loop
//! ([`crate::event_loop`]): the loop calls the handler with a [`Context`] over
//! the client only after the client returned an output, so no handler call ever
//! runs while the client is borrowed. Re-exported from [`crate::event_loop`] and
//! [`crate::client`], where callers name them.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;

use arrayvec::ArrayVec;
use ergon_core::{Budget, Flight, Ticket};
use ergon_venues::endpoint::Prepared;
use ergon_venues::response::Response;

use crate::culprit::Culprit;
use crate::http::Request;
use crate::pool::{Error, PoolError, PoolId, Refused, RequestId, Sent};
use crate::sys;
use crate::transport::Client;

/// What the caller does with answers. Every method runs on the loop thread; they
/// may call back into the [`Context`] (send the next request, set timers, stop).
pub trait ClientHandler {
    /// The response to `id`. The view borrows the connection's buffer: copy out what
    /// must outlive the call. Complete (or otherwise settle) the `flight`.
    fn on_response(
        &mut self,
        cx: &mut Context<'_>,
        id: RequestId,
        response: Response<'_>,
        flight: Flight,
    );

    /// Request `id` failed; `sent` says whether any byte left. Its connection is
    /// closed and will not be reused.
    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, error: Error);

    /// libcurl wrote request `id` `copies` more times than asked (it re-sends on
    /// a reused connection that died before any reply byte; see the `curl`
    /// module). Every copy was already charged to the budget on the request's
    /// own parts ([`Budget::charge_after`]): the venue counted each one. Called
    /// just before the request's [`on_response`](Self::on_response) or
    /// [`on_error`](Self::on_error). The native client never calls it.
    fn on_resent(&mut self, _cx: &mut Context<'_>, _id: RequestId, _copies: u32) {}

    /// A new connection of `pool` is open and idle.
    fn on_ready(&mut self, _cx: &mut Context<'_>, _pool: PoolId) {}

    /// A connect of `pool` failed; the pool tries again after its reconnect delay.
    fn on_connect_error(&mut self, _cx: &mut Context<'_>, _pool: PoolId, _error: Error) {}

    /// A timer set with [`Context::set_timer`] is due.
    fn on_timer(&mut self, _cx: &mut Context<'_>, _token: u64) {}

    /// A descriptor watched with
    /// [`EventLoop::watch_fd`](crate::event_loop::EventLoop::watch_fd) is ready.
    fn on_fd(&mut self, _cx: &mut Context<'_>, _token: u64, _ready: Readiness) {}

    /// Once per loop turn, after events, timers and the pools were handled.
    fn on_turn(&mut self, _cx: &mut Context<'_>) {}

    /// The loop is about to block in epoll (never called in busy-poll mode). Return
    /// false if work arrived meanwhile: the loop then polls instead of blocking.
    fn before_park(&mut self, _cx: &mut Context<'_>) -> bool {
        true
    }
}

/// Most timers set at once through [`Context::set_timer`].
pub const MAX_TIMERS: usize = 64;

/// The epoll token bit of descriptors watched for the handler.
pub(crate) const FD_BIT: u64 = 1 << 63;

/// Why the loop could not start or go on.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopError {
    /// An epoll call failed, as the operating system reported it.
    Epoll(std::io::ErrorKind),
    /// The CPU is not one this thread may run on. [`Culprit::Caller`]: the
    /// configuration names a CPU outside the affinity mask the process was given.
    CpuNotAllowed(usize),
    /// Pinning failed, or the thread was found on another CPU afterwards.
    /// [`Culprit::Os`]: the CPU was allowed, the kernel did not keep the thread on it.
    Pin {
        /// The CPU asked for.
        cpu: usize,
        /// Where the thread ran instead, if the kernel said.
        ran_on: Option<usize>,
    },
    /// A pool's configuration is invalid.
    Pool(PoolError),
    /// All timer slots are in use. [`Culprit::Caller`]: the handler set more than
    /// [`MAX_TIMERS`], a documented bound.
    TimersFull,
}

impl core::fmt::Display for LoopError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoopError::Epoll(kind) => write!(f, "epoll: {kind}"),
            LoopError::CpuNotAllowed(c) => {
                write!(f, "CPU {c} is not in this thread's affinity mask")
            }
            LoopError::Pin { cpu, ran_on } => {
                write!(f, "pinned to CPU {cpu} but ran on {ran_on:?}")
            }
            LoopError::Pool(why) => write!(f, "pool: {why}"),
            LoopError::TimersFull => write!(f, "all {MAX_TIMERS} timers in use"),
        }
    }
}

impl std::error::Error for LoopError {}

impl LoopError {
    /// Who is at fault (see each variant's doc where it is not plain).
    pub fn culprit(&self) -> Culprit {
        match self {
            LoopError::Epoll(_) | LoopError::Pin { .. } => Culprit::Os,
            LoopError::CpuNotAllowed(_) | LoopError::TimersFull => Culprit::Caller,
            LoopError::Pool(e) => e.culprit(),
        }
    }
}

/// What a watched descriptor is watched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    /// Readable (and hang-ups).
    pub read: bool,
    /// Writable.
    pub write: bool,
}

impl Interest {
    /// Readability only (an eventfd, a socket waiting for data).
    pub const READ: Interest = Interest {
        read: true,
        write: false,
    };
    /// Writability only.
    pub const WRITE: Interest = Interest {
        read: false,
        write: true,
    };
    /// Both.
    pub const BOTH: Interest = Interest {
        read: true,
        write: true,
    };

    pub(crate) fn bits(self) -> u32 {
        let mut b = 0;
        if self.read {
            b |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if self.write {
            b |= libc::EPOLLOUT as u32;
        }
        b
    }
}

/// What a watched descriptor is ready for, as epoll reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness(pub(crate) u32);

impl Readiness {
    /// Readable: what a driver outside the event loop (the deterministic
    /// simulator) reports for a descriptor set it polls itself.
    pub const READABLE: Readiness = Readiness(libc::EPOLLIN as u32);

    /// Data (or an end of stream) to read.
    pub fn readable(self) -> bool {
        self.0 & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0
    }
    /// Room to write.
    pub fn writable(self) -> bool {
        self.0 & libc::EPOLLOUT as u32 != 0
    }
    /// The peer hung up (or half-closed its sending side).
    pub fn hangup(self) -> bool {
        self.0 & (libc::EPOLLHUP | libc::EPOLLRDHUP) as u32 != 0
    }
    /// An error is pending on the descriptor.
    pub fn error(self) -> bool {
        self.0 & libc::EPOLLERR as u32 != 0
    }
}

/// A failed epoll call's `errno` as a [`LoopError`].
pub(crate) fn epoll_error(errno: i32) -> LoopError {
    LoopError::Epoll(std::io::Error::from_raw_os_error(errno).kind())
}

pub(crate) fn watch(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    token: u64,
    interest: Interest,
) -> Result<(), LoopError> {
    if token & FD_BIT != 0 {
        return Err(LoopError::Epoll(std::io::ErrorKind::InvalidInput));
    }
    sys::epoll_ctl(epfd, op, fd, interest.bits(), token | FD_BIT).map_err(epoll_error)
}

/// The loop's epoll, lent to a transport the handler owns (a
/// [`WsClient`](crate::ws::WsClient)) so the loop itself watches that
/// transport's sockets: no epoll of its own nested in the loop's. Their readiness
/// reaches [`ClientHandler::on_fd`] under the tokens the transport was given.
/// Made by [`EventLoop::registry`](crate::event_loop::EventLoop::registry) or
/// [`Context::registry`]; a second descriptor of the same epoll instance, so it
/// stays valid however long it lives.
#[derive(Debug)]
pub struct Registry {
    epoll: OwnedFd,
}

impl Registry {
    /// A registry on the epoll instance `epfd`. Fails as `fcntl` did (no
    /// descriptor left).
    pub(crate) fn new(epfd: c_int) -> Result<Self, LoopError> {
        sys::dup(epfd)
            .map(|epoll| Registry { epoll })
            .map_err(epoll_error)
    }

    /// Watches `fd` for `interest` under `token` (below 2^63).
    pub(crate) fn add(&self, fd: c_int, token: u64, interest: Interest) -> Result<(), LoopError> {
        watch(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd,
            token,
            interest,
        )
    }

    /// Changes what a watched `fd` is watched for.
    pub(crate) fn modify(
        &self,
        fd: c_int,
        token: u64,
        interest: Interest,
    ) -> Result<(), LoopError> {
        watch(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_MOD,
            fd,
            token,
            interest,
        )
    }
}

/// Loop state the handler reaches through its [`Context`].
#[derive(Debug)]
pub(crate) struct Ctl {
    pub(crate) stop: bool,
    pub(crate) timers: ArrayVec<(u64, i64), MAX_TIMERS>,
    pub(crate) cpu: Option<usize>,
}

/// What a handler call may do: send, charge, set timers, stop the loop.
pub struct Context<'a> {
    client: &'a mut Client,
    budget: &'a mut Budget,
    ctl: &'a mut Ctl,
    now: i64,
}

impl<'a> Context<'a> {
    pub(crate) fn new(
        client: &'a mut Client,
        budget: &'a mut Budget,
        ctl: &'a mut Ctl,
        now: i64,
    ) -> Self {
        Context {
            client,
            budget,
            ctl,
            now,
        }
    }

    /// This turn's time, on the [`clock`](crate::clock).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// The budget, to charge before a request and to settle after.
    pub fn budget(&mut self) -> &mut Budget {
        self.budget
    }

    /// Settles an answered request's flight at this turn's time
    /// ([`Budget::complete`]). The flight must be of this loop's budget (a debug
    /// assertion; one of another budget is refused there and changes nothing).
    pub fn complete(&mut self, flight: Flight) {
        let own = self.budget.complete(flight, self.now);
        debug_assert!(own.is_ok(), "a flight of another budget");
    }

    /// Refunds a ticket whose request never left ([`Budget::refund`]). The ticket
    /// must be of this loop's budget, as for [`Context::complete`].
    pub fn refund(&mut self, ticket: Ticket) {
        let own = self.budget.refund(ticket, self.now);
        debug_assert!(own.is_ok(), "a ticket of another budget");
    }

    /// Settles a failed request: refunds [`Sent::No`], completes [`Sent::Maybe`].
    /// Returns whether it may have run (then reconcile it; never assume it did not).
    pub fn settle(&mut self, sent: Sent) -> bool {
        match sent {
            Sent::No(t) => {
                self.refund(t);
                false
            }
            Sent::Maybe(f) => {
                self.complete(f);
                true
            }
        }
    }

    /// The client, for counters and idle connections.
    pub fn client(&self) -> &Client {
        self.client
    }

    /// Sends `req` on `pool` now, or hands the ticket back (see [`Client::request`]).
    pub fn request(
        &mut self,
        pool: PoolId,
        req: &Request<'_>,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        self.client
            .request(pool, req, ticket, deadline_ns, self.now)
    }

    /// Sends a prepared request on `pool` now, or hands the ticket back (see
    /// [`Client::request_prepared`]: copied out as it is when its adapter wrote it
    /// as HTTP/1.1).
    pub fn request_prepared(
        &mut self,
        pool: PoolId,
        req: &Prepared,
        ticket: Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, Refused> {
        self.client
            .request_prepared(pool, req, ticket, deadline_ns, self.now)
    }

    /// Calls [`ClientHandler::on_timer`] with `token` once `at_ns` has passed;
    /// replaces a timer with the same token.
    pub fn set_timer(&mut self, token: u64, at_ns: i64) -> Result<(), LoopError> {
        if let Some(t) = self.ctl.timers.iter_mut().find(|t| t.0 == token) {
            t.1 = at_ns;
            return Ok(());
        }
        self.ctl
            .timers
            .try_push((token, at_ns))
            .map_err(|_| LoopError::TimersFull)
    }

    /// Cancels the timer `token`; false if none was set.
    pub fn cancel_timer(&mut self, token: u64) -> bool {
        match self.ctl.timers.iter().position(|t| t.0 == token) {
            Some(i) => {
                self.ctl.timers.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Watches `fd` from inside the loop (see
    /// [`EventLoop::watch_fd`](crate::event_loop::EventLoop::watch_fd)).
    pub fn watch_fd(&mut self, fd: c_int, token: u64, interest: Interest) -> Result<(), LoopError> {
        watch(self.client.epfd(), libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    /// Changes what `fd` is watched for (see
    /// [`EventLoop::rewatch_fd`](crate::event_loop::EventLoop::rewatch_fd)).
    pub fn rewatch_fd(
        &mut self,
        fd: c_int,
        token: u64,
        interest: Interest,
    ) -> Result<(), LoopError> {
        watch(self.client.epfd(), libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    /// Stops watching `fd`.
    pub fn unwatch_fd(&mut self, fd: c_int) -> Result<(), LoopError> {
        sys::epoll_ctl(self.client.epfd(), libc::EPOLL_CTL_DEL, fd, 0, 0).map_err(epoll_error)
    }

    /// The loop's epoll for a transport the handler owns (see [`Registry`]).
    /// Fails only if no descriptor is left.
    pub fn registry(&self) -> Result<Registry, LoopError> {
        Registry::new(self.client.epfd())
    }

    /// Ends [`EventLoop::run`](crate::event_loop::EventLoop::run) after this turn.
    pub fn stop(&mut self) {
        self.ctl.stop = true;
    }

    /// The CPU the loop was pinned to and verified on, if any.
    pub fn cpu(&self) -> Option<usize> {
        self.ctl.cpu
    }
}
