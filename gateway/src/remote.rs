//! Strategy threads behind the boundary: a [`RemoteHandle`] on another thread
//! submits prepared requests and receives the same typed events (owned), through
//! the boundary's lock-free queues and its never-lost eventfd wake; the loop side,
//! [`Remote`], is a [`Strategy`] over the gateway.
//!
//! The handle bounds its requests in flight so the event queue can never be full
//! (each request gives at most three events: Retrying, Reconciling, a final one).
//! Request buffers travel both ways (a submit hands one in, the gateway's swap
//! hands an empty one back), so preparing allocates nothing once warm; an event
//! that carries an answer body copies it into a buffer of its own.
//!
//! Order updates of the gateway's user data stream ([`Strategy::on_order_update`])
//! cross too, as the fixed-size [`Execution`] itself (`Copy`, no heap), on a queue
//! of their own ([`RemoteHandle::poll_update`]). They are not bounded by the
//! requests in flight (a resting order fills when the venue says): one that finds
//! the queue full is dropped and counted ([`Remote::lost_updates`]); the strategy's
//! periodic open-orders read covers it, as it covers a stream that drops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_core::Class;
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::Prepared;

use super::driver::{Api, Strategy};
use super::endpoints::Account;
use super::events::{Event, Tag};
use ergon_io::boundary::ring::{bounded, CapacityError, Consumer, Producer};
use ergon_io::boundary::wake::{pair, Parker, Waker};
use ergon_io::event_loop::{EventLoop, Interest, LoopError, Readiness};

/// The token under which [`Remote::attach`] watches the wake eventfd.
pub const REMOTE_WAKE: u64 = (1 << 62) + 1;

/// One request handed over: the prepared request, its class and tag.
#[derive(Debug)]
pub struct Submission {
    /// The request.
    pub req: Prepared,
    /// Its class.
    pub class: Class,
    /// Its tag.
    pub tag: Tag,
}

/// An event for a strategy on another thread: [`Event`] with the answer body it
/// carries (Applied, OpenOrders) owned here and left empty in `event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// The event (its `body`, if any, is empty: read [`Delivered::body`]).
    pub event: Event<'static>,
    /// The answer body of an Applied or OpenOrders event.
    pub body: Vec<u8>,
}

struct Shared {
    stop: AtomicBool,
}

/// The loop side: a strategy that takes submissions from the handle and delivers
/// every event of theirs back.
pub struct Remote {
    submit: Consumer<Submission>,
    events: Producer<Delivered>,
    updates: Producer<Execution>,
    spares: Producer<Prepared>,
    parker: Parker,
    parked: bool,
    shared: Arc<Shared>,
    /// Events that found the queue full (must stay 0: the handle bounds its flight).
    pub lost: u64,
    /// Order updates that found their queue full (dropped; the polls cover them).
    pub lost_updates: u64,
}

/// The strategy thread's side.
pub struct RemoteHandle {
    submit: Producer<Submission>,
    events: Consumer<Delivered>,
    updates: Consumer<Execution>,
    spares: Consumer<Prepared>,
    waker: Waker,
    shared: Arc<Shared>,
    in_flight: usize,
    max_in_flight: usize,
    buffer_bytes: usize,
}

/// Why a submit did not go over.
#[derive(Debug)]
pub enum RemoteError {
    /// As many requests as the handle may have in flight are: poll events first.
    /// The request comes back.
    Busy(Box<Prepared>),
    /// The submit queue is full: try again. The request comes back.
    Full(Box<Prepared>),
}

impl RemoteError {
    /// Always [`Culprit::Policy`](ergon_io::Culprit::Policy): a bound waited out.
    pub fn culprit(&self) -> ergon_io::Culprit {
        match self {
            RemoteError::Busy(_) | RemoteError::Full(_) => ergon_io::Culprit::Policy,
        }
    }
}

/// Order updates the queue holds at least (more with more requests in flight).
pub const MIN_UPDATES: usize = 64;

/// Builds both sides for at most `in_flight` requests at once (a power of two,
/// at least 2) with request buffers of `buffer_bytes`; the order updates' queue
/// holds `4 * in_flight` updates, at least [`MIN_UPDATES`].
pub fn remote(
    in_flight: usize,
    buffer_bytes: usize,
) -> Result<(Remote, RemoteHandle), CapacityError> {
    let (sp, sc) = bounded(in_flight)?;
    let (ep, ec) = bounded(in_flight * 4)?;
    let (bp, bc) = bounded(in_flight)?;
    let (up, uc) = bounded((in_flight * 4).max(MIN_UPDATES))?;
    let (parker, waker) = pair().map_err(|_| CapacityError::Invalid(0))?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
    });
    Ok((
        Remote {
            submit: sc,
            events: ep,
            updates: up,
            spares: bp,
            parker,
            parked: false,
            shared: Arc::clone(&shared),
            lost: 0,
            lost_updates: 0,
        },
        RemoteHandle {
            submit: sp,
            events: ec,
            updates: uc,
            spares: bc,
            waker,
            shared,
            in_flight: 0,
            max_in_flight: in_flight,
            buffer_bytes,
        },
    ))
}

impl Remote {
    /// Watches the wake eventfd on `lp` (under [`REMOTE_WAKE`]); call once before
    /// running the loop.
    pub fn attach(&self, lp: &mut EventLoop) -> Result<(), LoopError> {
        lp.watch_fd(self.parker.fd(), REMOTE_WAKE, Interest::READ)
    }

    fn deliver(&mut self, ev: Event<'_>) {
        let (event, body) = match ev {
            Event::Applied { tag, body } => (Event::Applied { tag, body: &[] }, body.to_vec()),
            Event::OpenOrders {
                age_ns,
                body,
                page,
                more,
            } => (
                Event::OpenOrders {
                    age_ns,
                    body: &[],
                    page,
                    more,
                },
                body.to_vec(),
            ),
            Event::Rejected { tag } => (Event::Rejected { tag }, Vec::new()),
            Event::DuplicateId { tag } => (Event::DuplicateId { tag }, Vec::new()),
            Event::Limited {
                tag,
                why,
                ready_in_ns,
            } => (
                Event::Limited {
                    tag,
                    why,
                    ready_in_ns,
                },
                Vec::new(),
            ),
            Event::Retrying { tag, in_ns } => (Event::Retrying { tag, in_ns }, Vec::new()),
            Event::Expired { tag, why } => (Event::Expired { tag, why }, Vec::new()),
            Event::Reconciling { tag } => (Event::Reconciling { tag }, Vec::new()),
            Event::Reconciled { tag, found } => (Event::Reconciled { tag, found }, Vec::new()),
            Event::Unresolved { tag } => (Event::Unresolved { tag }, Vec::new()),
            Event::Late { tag, found } => (Event::Late { tag, found }, Vec::new()),
            Event::Item { tag, item, fate } => (Event::Item { tag, item, fate }, Vec::new()),
            Event::BatchSettled { tag } => (Event::BatchSettled { tag }, Vec::new()),
            Event::Halted { tag, bucket } => (Event::Halted { tag, bucket }, Vec::new()),
            Event::Protection { fires_in_ns } => (Event::Protection { fires_in_ns }, Vec::new()),
            Event::ProtectionFired => (Event::ProtectionFired, Vec::new()),
        };
        if self.events.push(Delivered { event, body }).is_err() {
            self.lost += 1;
        }
    }
}

impl<E: Account> Strategy<E> for Remote {
    fn on_event(&mut self, _api: &mut Api<'_, '_, E>, event: Event<'_>) {
        self.deliver(event);
    }

    fn on_order_update(&mut self, _api: &mut Api<'_, '_, E>, update: &Execution) {
        if self.updates.push(*update).is_err() {
            self.lost_updates += 1;
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        if core::mem::take(&mut self.parked) {
            self.parker.unpark();
        }
        while let Some(mut s) = self.submit.pop() {
            if let Err(ev) = api.submit(&mut s.req, s.class, s.tag) {
                self.deliver(ev);
            }
            // The buffer the ledger handed back goes home (dropped if none is owed).
            let _ = self.spares.push(s.req);
        }
        if self.shared.stop.load(Ordering::Acquire) {
            api.stop();
        }
    }

    fn on_fd(&mut self, _api: &mut Api<'_, '_, E>, token: u64, _ready: Readiness) {
        if token == REMOTE_WAKE {
            self.parker.drain();
        }
    }

    fn before_park(&mut self, _api: &mut Api<'_, '_, E>) -> bool {
        let (submit, shared) = (&self.submit, &self.shared);
        self.parked = self
            .parker
            .prepare_park(|| submit.ready() || shared.stop.load(Ordering::Acquire));
        self.parked
    }
}

impl RemoteHandle {
    /// A request buffer to prepare into: one the loop handed back, else a new one.
    pub fn buffer(&mut self) -> Prepared {
        self.spares
            .pop()
            .unwrap_or_else(|| Prepared::with_capacity(self.buffer_bytes))
    }

    /// Hands `req` to the loop; its events come back through [`RemoteHandle::poll`].
    pub fn submit(&mut self, req: Prepared, class: Class, tag: Tag) -> Result<(), RemoteError> {
        if self.in_flight >= self.max_in_flight {
            return Err(RemoteError::Busy(Box::new(req)));
        }
        if let Err(full) = self.submit.push(Submission { req, class, tag }) {
            return Err(RemoteError::Full(Box::new(full.0.req)));
        }
        self.in_flight += 1;
        self.waker.notify();
        Ok(())
    }

    /// The next event, if one arrived.
    pub fn poll(&mut self) -> Option<Delivered> {
        let d = self.events.pop()?;
        if d.event.is_final() {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        Some(d)
    }

    /// The next order update of the gateway's user data stream, if one arrived.
    pub fn poll_update(&mut self) -> Option<Execution> {
        self.updates.pop()
    }

    /// Requests submitted whose final event has not been polled yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Stops the loop after its current turn.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.waker.notify();
    }
}
