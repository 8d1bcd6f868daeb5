//! The loop's side of the boundary: a [`ClientHandler`] that takes submissions,
//! charges the budget on the loop thread, sends, and delivers every outcome to the
//! submitting handle's mailbox.
//!
//! Drive order inside the event loop's turn: `before_park` announces the park
//! (and declines it if a submission is already waiting) → epoll → `on_fd` drains
//! the eventfd → responses and errors are delivered as they come → `on_turn`
//! takes up to [`BoundaryConfig::per_turn`](super::BoundaryConfig::per_turn)
//! submissions, publishes stats when due, and stops the loop if asked.
//!
//! Every submission taken ends in exactly one delivery: `Limited`, `Refused`, a
//! response or a failure, or `Refused(Shutdown)` from [`Service::shutdown`].
//!
//! What this must never do: block, allocate per request (the in-flight table is
//! reserved for every credit there is), or deliver twice.

use ergon_core::{Budget, Flight, Part};
use ergon_venues::response::Response;

use super::handle::{Exchange, Outcome, Refusal, SentKind, Submission};
use super::mailbox::{Credit, Outbox};
use super::ring::Consumer;
use super::stats::{ClientCounters, StatsPublisher};
use super::wake::Parker;
use crate::client::{ClientHandler, Error, Refused, RequestId, Sent};
use crate::event_loop::{Context, EventLoop, LoopError, Readiness};
use crate::sync::{Arc, AtomicU8, Ordering};

/// What the venue's answer says about the budget, applied on the loop thread
/// before the answer goes back: usage headers ([`Budget::observe_used`]), throttles
/// ([`Budget::throttled`]), bans ([`Budget::banned`]). Submitting threads cannot
/// reach the budget; this is where a venue adapter's reading of a response runs.
pub trait Settle: Send {
    /// Called with every complete response, the parts its request charged, and the
    /// loop's `now`. Must not block.
    fn on_response(
        &mut self,
        budget: &mut Budget,
        parts: &[Part],
        response: &Response<'_>,
        now_ns: i64,
    );
}

/// The token the boundary's eventfd is registered under (see [`Service::attach`]).
pub const WAKE_TOKEN: u64 = 0x4552_474F_4E57_414B;

pub(crate) struct Pending {
    id: RequestId,
    handle: u16,
    credit: Credit,
    ex: Box<Exchange>,
}

/// The loop's half; pass it to [`EventLoop::run`] as the handler.
pub struct Service {
    pub(crate) submit: Consumer<Submission>,
    pub(crate) parker: Parker,
    pub(crate) outboxes: Vec<Outbox<Box<Exchange>>>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) stats: StatsPublisher,
    pub(crate) stats_every_ns: i64,
    pub(crate) last_stats_ns: i64,
    pub(crate) per_turn: usize,
    pub(crate) stamp: bool,
    pub(crate) parked: bool,
    pub(crate) stop: Arc<AtomicU8>,
    pub(crate) taken: u64,
    pub(crate) settle: Option<Box<dyn Settle>>,
}

impl core::fmt::Debug for Service {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Service")
            .field("handles", &self.outboxes.len())
            .field("pending", &self.pending.len())
            .field("taken", &self.taken)
            .finish()
    }
}

impl Service {
    /// Registers the boundary's eventfd with `lp` (under [`WAKE_TOKEN`]). Call once
    /// before [`EventLoop::run`].
    pub fn attach(&self, lp: &mut EventLoop) -> Result<(), LoopError> {
        #[cfg(not(ergon_loom))]
        return lp.watch_fd(
            self.parker.fd(),
            WAKE_TOKEN,
            crate::event_loop::Interest::READ,
        );
        // The loom build's eventfd is a model with no descriptor: nothing to poll.
        #[cfg(ergon_loom)]
        {
            let _ = lp;
            Err(LoopError::Epoll(std::io::ErrorKind::Unsupported))
        }
    }

    /// Runs `settle` on every response, on the loop thread, before it is delivered.
    pub fn settle_with(&mut self, settle: Box<dyn Settle>) {
        self.settle = Some(settle);
    }

    /// Submissions taken from the queue so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// After [`EventLoop::run`] returned: fails what is in flight (each reported
    /// through the client as closed, `Sent::Maybe` or `Sent::No` as it stands), then
    /// answers every submission still queued with `Refused(Shutdown)`. Submits that
    /// race this call may still land in the queue; call it again after the last
    /// handle stopped submitting to answer those too.
    pub fn shutdown(&mut self, lp: &mut EventLoop) {
        lp.close_all(self);
        while let Some(sub) = self.submit.pop() {
            self.taken += 1;
            self.deliver(
                sub.handle,
                sub.credit,
                sub.ex,
                Outcome::Refused(Refusal::Shutdown),
            );
        }
    }

    fn deliver(&mut self, handle: u16, credit: Credit, mut ex: Box<Exchange>, outcome: Outcome) {
        ex.outcome = outcome;
        let Some(out) = self.outboxes.get(usize::from(handle)) else {
            // Handles are numbered by `build`; another index cannot be made.
            debug_assert!(false, "submission from unknown handle {handle}");
            return;
        };
        // The credit travelled with the request: the mailbox has room.
        let delivered = out.deliver(credit, ex);
        debug_assert!(delivered.is_ok(), "mailbox full despite its credit");
    }

    fn take(&mut self, sub: Submission, cx: &mut Context<'_>) {
        self.taken += 1;
        let Submission { handle, credit, ex } = sub;
        let now = cx.now();
        let ticket = match cx.budget().try_charge(&ex.parts, ex.class, now) {
            Ok(t) => t,
            Err(limited) => return self.deliver(handle, credit, ex, Outcome::Limited(limited)),
        };
        let mut ex = ex;
        if self.stamp {
            ex.sending_at_ns = crate::clock::now_ns();
        }
        let sent = ex.with_request(|req| cx.request(ex.pool, req, ticket, ex.deadline_ns));
        match sent {
            Ok(id) => {
                if self.stamp {
                    ex.written_at_ns = crate::clock::now_ns();
                }
                // Reserved for every credit: never reallocates.
                self.pending.push(Pending {
                    id,
                    handle,
                    credit,
                    ex,
                });
            }
            Err(refused) => {
                let why = match &refused {
                    Refused::Busy(_) => Refusal::Busy,
                    Refused::Invalid(_, e) => Refusal::Invalid(*e),
                    Refused::UnknownPool(_) => Refusal::UnknownPool,
                    Refused::Expired(_) => Refusal::Expired,
                };
                cx.refund(refused.into_ticket());
                self.deliver(handle, credit, ex, Outcome::Refused(why));
            }
        }
    }

    fn pending(&mut self, id: RequestId) -> Option<Pending> {
        let i = self.pending.iter().position(|p| p.id == id)?;
        Some(self.pending.swap_remove(i))
    }

    fn publish(&mut self, cx: &mut Context<'_>) {
        let c = cx.client().counters();
        let client = ClientCounters {
            requests: c.requests,
            sent_no: c.sent_no,
            sent_maybe: c.sent_maybe,
            busy: c.busy,
            timeouts: c.timeouts,
        };
        let now = cx.now();
        self.stats.publish(cx.budget(), &client, now);
        self.last_stats_ns = now;
    }
}

impl ClientHandler for Service {
    fn on_response(
        &mut self,
        cx: &mut Context<'_>,
        id: RequestId,
        response: Response<'_>,
        flight: Flight,
    ) {
        cx.complete(flight);
        if let Some(mut p) = self.pending(id) {
            if let Some(settle) = self.settle.as_mut() {
                let now = cx.now();
                settle.on_response(cx.budget(), &p.ex.parts, &response, now);
            }
            p.ex.set_response(&response);
            self.deliver(p.handle, p.credit, p.ex, Outcome::Response);
        }
    }

    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, error: Error) {
        let sent = if cx.settle(sent) {
            SentKind::Maybe
        } else {
            SentKind::No
        };
        if let Some(p) = self.pending(id) {
            self.deliver(p.handle, p.credit, p.ex, Outcome::Failed { sent, error });
        }
    }

    fn on_fd(&mut self, _cx: &mut Context<'_>, token: u64, _ready: Readiness) {
        if token == WAKE_TOKEN {
            self.parker.drain();
        }
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        if core::mem::take(&mut self.parked) {
            self.parker.unpark();
        }
        for _ in 0..self.per_turn {
            let Some(sub) = self.submit.pop() else { break };
            self.take(sub, cx);
        }
        if cx.now() - self.last_stats_ns >= self.stats_every_ns {
            self.publish(cx);
        }
        if self.stop.load(Ordering::Acquire) != 0 {
            self.publish(cx);
            cx.stop();
        }
    }

    fn before_park(&mut self, _cx: &mut Context<'_>) -> bool {
        if self.stop.load(Ordering::Acquire) != 0 {
            return false;
        }
        let (submit, stop) = (&self.submit, &self.stop);
        // Both things a waker announces: a submission, or a stop.
        self.parked = self
            .parker
            .prepare_park(|| submit.ready() || stop.load(Ordering::Acquire) != 0);
        self.parked
    }
}

/// Asks the loop to stop after its current turn; `Send + Sync`, cheap to clone.
#[derive(Clone)]
pub struct Stopper {
    pub(crate) stop: Arc<AtomicU8>,
    pub(crate) waker: super::wake::Waker,
}

impl core::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stopper")
            .field("stopped", &(self.stop.load(Ordering::Relaxed) != 0))
            .finish()
    }
}

impl Stopper {
    /// Ends [`EventLoop::run`] within a turn (waking a parked loop). Submits from
    /// then on fail with [`SubmitError::Stopped`](super::handle::SubmitError::Stopped);
    /// one racing this call may still be queued, which [`Service::shutdown`] answers
    /// (call it once the submitting threads are done).
    pub fn stop(&self) {
        self.stop.store(1, Ordering::Release);
        self.waker.notify();
    }
}
