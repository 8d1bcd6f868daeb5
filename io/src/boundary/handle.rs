//! The submitting side: a [`Handle`] per strategy thread, and the [`Answer`]s it
//! takes back.
//!
//! A request and its answer travel in one preallocated [`Exchange`], boxed once at
//! [`build`](super::build) and recycled: the handle fills it, the loop sends from
//! it and writes the answer into it, the handle reads the answer and puts it back
//! on its free list when the [`Answer`] is dropped. Submitting copies the request
//! into that box, pushes one pointer into the submit ring, and writes the loop's
//! eventfd only if the loop is parked. Nothing on that path allocates, locks,
//! blocks or logs.
//!
//! What this must never do: wait for room (a full queue is [`SubmitError::QueueFull`]
//! at once), drop a request it accepted, or hand one answer out twice.

use arrayvec::ArrayVec;
use ergon_core::{Class, Limited, Part, MAX_PARTS};

use super::mailbox::{Credit, Inbox};
use super::ring::{Full, Producer};
use super::wake::Waker;
use crate::client::{Error, PoolId};
use crate::http::{InvalidRequest, Request, MAX_HEADERS};
use crate::sync::{Arc, AtomicU8, Ordering};

/// Most headers a submitted request may carry.
pub const MAX_REQUEST_HEADERS: usize = 32;

/// The id a [`Handle`] gave a submitted request; its [`Answer`] carries it back.
/// Unique per handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubmitId(pub u64);

/// Why [`Handle::submit`] refused. Nothing was queued, charged or sent.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The submit queue is full: the loop is behind. Never waits, never drops.
    QueueFull,
    /// As many answers are owed to this handle as its mailbox holds: take some
    /// with [`Handle::poll`] first. [`Culprit::Policy`](crate::Culprit::Policy)
    /// like QueueFull: a bound waited out, not a wrong call.
    Outstanding,
    /// Method, target, headers and body together exceed the handle's request size.
    TooLarge {
        /// Bytes the request needs.
        need: usize,
        /// Bytes a request may take.
        max: usize,
    },
    /// More headers than [`MAX_REQUEST_HEADERS`].
    TooManyHeaders,
    /// More parts than `ergon_core::MAX_PARTS`.
    TooManyParts,
    /// The loop was asked to stop ([`Stopper::stop`](super::service::Stopper::stop)).
    /// [`Culprit::Policy`](crate::Culprit::Policy): halted on purpose.
    Stopped,
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::QueueFull => f.write_str("submit queue full"),
            SubmitError::Outstanding => f.write_str("every answer slot of this handle is owed"),
            SubmitError::TooLarge { need, max } => {
                write!(
                    f,
                    "request needs {need} bytes, a handle's requests hold {max}"
                )
            }
            SubmitError::TooManyHeaders => {
                write!(f, "more than {MAX_REQUEST_HEADERS} request headers")
            }
            SubmitError::TooManyParts => write!(f, "more than {MAX_PARTS} parts"),
            SubmitError::Stopped => f.write_str("the loop was asked to stop"),
        }
    }
}

impl std::error::Error for SubmitError {}

impl SubmitError {
    /// Who is at fault: the bounds waited out and a stopped loop (QueueFull,
    /// Outstanding, Stopped) are [`Culprit::Policy`](crate::Culprit::Policy); a
    /// request that can never fit (TooLarge, TooManyHeaders, TooManyParts)
    /// [`Culprit::Caller`](crate::Culprit::Caller).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            SubmitError::QueueFull | SubmitError::Outstanding | SubmitError::Stopped => {
                crate::Culprit::Policy
            }
            SubmitError::TooLarge { .. }
            | SubmitError::TooManyHeaders
            | SubmitError::TooManyParts => crate::Culprit::Caller,
        }
    }
}

/// Whether any byte of a failed request left (the boundary's copy of
/// [`Sent`](crate::client::Sent): the ticket or flight itself was settled on the
/// loop thread, refunded or completed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SentKind {
    /// Not one byte left: it surely did not run (the ticket was refunded).
    No,
    /// Bytes left: it may have run. Reconcile; never assume it did not.
    Maybe,
}

/// Why the client refused a charged request before writing anything (the ticket
/// was refunded).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// No connection of the pool was ready.
    Busy,
    /// The request cannot be encoded.
    Invalid(InvalidRequest),
    /// No such pool.
    UnknownPool,
    /// Its deadline had passed when the loop took it.
    Expired,
    /// The loop shut down before taking it.
    Shutdown,
}

impl Refusal {
    /// Who is at fault: Busy and Shutdown are
    /// [`Culprit::Policy`](crate::Culprit::Policy), Invalid the request's
    /// [`InvalidRequest::culprit`], UnknownPool
    /// [`Culprit::Caller`](crate::Culprit::Caller), Expired
    /// [`Culprit::Deadline`](crate::Culprit::Deadline).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            Refusal::Busy | Refusal::Shutdown => crate::Culprit::Policy,
            Refusal::Invalid(e) => e.culprit(),
            Refusal::UnknownPool => crate::Culprit::Caller,
            Refusal::Expired => crate::Culprit::Deadline,
        }
    }
}

/// What became of a submitted request. Exactly one per accepted submit.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response: [`Answer::status`], [`Answer::header`], [`Answer::body`].
    Response,
    /// The budget refused the charge: nothing was charged, nothing sent.
    Limited(Limited),
    /// Charged, then refused by the client before any byte left; refunded.
    Refused(Refusal),
    /// Accepted by the client, then failed; `sent` says whether any byte left.
    Failed {
        /// Whether the request may have run.
        sent: SentKind,
        /// What went wrong.
        error: Error,
    },
}

impl Outcome {
    /// Who is at fault, or None for a [`Outcome::Response`] (whatever its status:
    /// an HTTP error status is the venue's answer, read by the venue adapter).
    /// Limited is [`Culprit::Policy`](crate::Culprit::Policy); Refused and Failed
    /// ask the refusal or the error.
    pub fn culprit(&self) -> Option<crate::Culprit> {
        match self {
            Outcome::Response => None,
            Outcome::Limited(_) => Some(crate::Culprit::Policy),
            Outcome::Refused(r) => Some(r.culprit()),
            Outcome::Failed { error, .. } => Some(error.culprit()),
        }
    }
}

/// One request and then its answer, recycled between a handle and the loop.
#[derive(Debug)]
pub struct Exchange {
    pub(crate) id: u64,
    pub(crate) pool: PoolId,
    pub(crate) class: Class,
    pub(crate) deadline_ns: i64,
    pub(crate) parts: ArrayVec<Part, MAX_PARTS>,
    /// Method, target, header names and values, body, back to back.
    req: Vec<u8>,
    method: u32,
    target: u32,
    req_headers: ArrayVec<(u32, u32), MAX_REQUEST_HEADERS>,
    body: u32,
    pub(crate) outcome: Outcome,
    pub(crate) status: u16,
    /// Header names and values, then the body.
    resp: Vec<u8>,
    resp_headers: ArrayVec<(u32, u32), MAX_HEADERS>,
    resp_body: u32,
    pub(crate) sending_at_ns: i64,
    pub(crate) written_at_ns: i64,
}

impl Exchange {
    pub(crate) fn new(max_request: usize, max_response: usize) -> Self {
        Exchange {
            id: 0,
            pool: PoolId(0),
            class: Class::Normal,
            deadline_ns: 0,
            parts: ArrayVec::new(),
            req: Vec::with_capacity(max_request),
            method: 0,
            target: 0,
            req_headers: ArrayVec::new(),
            body: 0,
            outcome: Outcome::Response,
            status: 0,
            resp: Vec::with_capacity(max_response),
            resp_headers: ArrayVec::new(),
            resp_body: 0,
            sending_at_ns: 0,
            written_at_ns: 0,
        }
    }

    /// The request, borrowed from the exchange (loop side).
    pub(crate) fn with_request<R>(&self, f: impl FnOnce(&Request<'_>) -> R) -> R {
        let text = |a: u32, b: u32| {
            // Copied from &str at submit, cut at the same boundaries.
            core::str::from_utf8(&self.req[a as usize..b as usize]).unwrap_or("")
        };
        let mut headers: ArrayVec<(&str, &str), MAX_REQUEST_HEADERS> = ArrayVec::new();
        let mut at = self.target;
        for &(name_end, value_end) in &self.req_headers {
            headers.push((text(at, name_end), text(name_end, value_end)));
            at = value_end;
        }
        let req = Request {
            method: text(0, self.method),
            target: text(self.method, self.target),
            headers: &headers,
            body: &self.req[self.body as usize..],
        };
        f(&req)
    }

    /// Copies a response in (loop side). Grows the buffer if the response is larger
    /// than any before: that allocates once, on the receive path, never on a send.
    pub(crate) fn set_response(&mut self, r: &ergon_venues::response::Response<'_>) {
        self.outcome = Outcome::Response;
        self.status = r.status;
        self.resp.clear();
        self.resp_headers.clear();
        for h in r.headers.iter().take(MAX_HEADERS) {
            self.resp.extend_from_slice(h.name);
            let name_end = self.resp.len() as u32;
            self.resp.extend_from_slice(h.value);
            self.resp_headers.push((name_end, self.resp.len() as u32));
        }
        self.resp_body = self.resp.len() as u32;
        self.resp.extend_from_slice(r.body);
    }

    fn fill(
        &mut self,
        id: u64,
        pool: PoolId,
        req: &Request<'_>,
        parts: &[Part],
        class: Class,
        deadline_ns: i64,
    ) {
        self.id = id;
        self.pool = pool;
        self.class = class;
        self.deadline_ns = deadline_ns;
        self.parts.clear();
        self.parts.extend(parts.iter().copied());
        self.req.clear();
        self.req.extend_from_slice(req.method.as_bytes());
        self.method = self.req.len() as u32;
        self.req.extend_from_slice(req.target.as_bytes());
        self.target = self.req.len() as u32;
        self.req_headers.clear();
        for (name, value) in req.headers {
            self.req.extend_from_slice(name.as_bytes());
            let name_end = self.req.len() as u32;
            self.req.extend_from_slice(value.as_bytes());
            self.req_headers.push((name_end, self.req.len() as u32));
        }
        self.body = self.req.len() as u32;
        self.req.extend_from_slice(req.body);
        self.sending_at_ns = 0;
        self.written_at_ns = 0;
    }
}

/// What travels through the submit ring: the exchange, the right to one answer,
/// and which handle's mailbox that answer goes to.
#[derive(Debug)]
pub(crate) struct Submission {
    pub(crate) handle: u16,
    pub(crate) credit: Credit,
    pub(crate) ex: Box<Exchange>,
}

/// A strategy thread's way to the loop: `Send`, not `Clone` (one per thread; build
/// as many as threads with
/// [`BoundaryConfig::handles`](super::BoundaryConfig::handles)).
#[derive(Debug)]
pub struct Handle {
    pub(crate) index: u16,
    pub(crate) submit: Producer<Submission>,
    pub(crate) waker: Waker,
    pub(crate) inbox: Inbox<Box<Exchange>>,
    // Boxed on purpose: an exchange crosses the rings as one pointer, never copied.
    #[allow(clippy::vec_box)]
    pub(crate) free: Vec<Box<Exchange>>,
    pub(crate) next_id: u64,
    pub(crate) max_request: usize,
    pub(crate) stop: Arc<AtomicU8>,
}

impl Handle {
    /// Queues `req` for `pool`: the loop charges `parts` at `class` on its own
    /// thread and sends it, unless `deadline_ns` (on [`crate::clock`]) has passed.
    /// Returns at once; the answer comes from [`Handle::poll`], exactly once.
    pub fn submit(
        &mut self,
        pool: PoolId,
        req: &Request<'_>,
        parts: &[Part],
        class: Class,
        deadline_ns: i64,
    ) -> Result<SubmitId, SubmitError> {
        if self.stop.load(Ordering::Relaxed) != 0 {
            return Err(SubmitError::Stopped);
        }
        if parts.len() > MAX_PARTS {
            return Err(SubmitError::TooManyParts);
        }
        if req.headers.len() > MAX_REQUEST_HEADERS {
            return Err(SubmitError::TooManyHeaders);
        }
        let need = req.method.len()
            + req.target.len()
            + req.body.len()
            + req
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>();
        if need > self.max_request {
            return Err(SubmitError::TooLarge {
                need,
                max: self.max_request,
            });
        }
        let Some(credit) = self.inbox.reserve() else {
            return Err(SubmitError::Outstanding);
        };
        // One exchange per credit: a credit taken means one is free.
        let Some(mut ex) = self.free.pop() else {
            self.inbox.cancel(credit);
            return Err(SubmitError::Outstanding);
        };
        let id = self.next_id;
        ex.fill(id, pool, req, parts, class, deadline_ns);
        let sub = Submission {
            handle: self.index,
            credit,
            ex,
        };
        if let Err(Full(back)) = self.submit.push(sub) {
            self.free.push(back.ex);
            self.inbox.cancel(back.credit);
            return Err(SubmitError::QueueFull);
        }
        self.next_id += 1;
        self.waker.notify();
        Ok(SubmitId(id))
    }

    /// The next answer, if one has arrived. Drop it (or let it go out of scope)
    /// before the next `poll`: its buffers go back to this handle.
    pub fn poll(&mut self) -> Option<Answer<'_>> {
        let ex = self.inbox.pop()?;
        Some(Answer {
            ex: Some(ex),
            free: &mut self.free,
        })
    }

    /// Answers owed: submitted and not yet polled.
    pub fn outstanding(&self) -> usize {
        self.inbox.outstanding()
    }

    /// The most answers that can be owed at once.
    pub fn capacity(&self) -> usize {
        self.inbox.capacity()
    }

    /// Eventfd writes all handles of this boundary made so far (each woke a
    /// parked loop); stays 0 against a busy-polling loop.
    pub fn eventfd_writes(&self) -> u64 {
        self.waker.writes()
    }

    /// Parks the loop announced so far.
    pub fn loop_parks(&self) -> u64 {
        self.waker.parks()
    }
}

/// One answer; its buffers return to the [`Handle`] when it is dropped.
#[derive(Debug)]
pub struct Answer<'a> {
    ex: Option<Box<Exchange>>,
    #[allow(clippy::vec_box)]
    free: &'a mut Vec<Box<Exchange>>,
}

impl Answer<'_> {
    fn ex(&self) -> &Exchange {
        // Only `Drop` takes it.
        self.ex.as_deref().expect("answer already recycled")
    }

    /// The id [`Handle::submit`] returned.
    pub fn id(&self) -> SubmitId {
        SubmitId(self.ex().id)
    }

    /// What became of the request.
    pub fn outcome(&self) -> Outcome {
        self.ex().outcome
    }

    /// The status code (0 unless the outcome is [`Outcome::Response`]).
    pub fn status(&self) -> u16 {
        match self.ex().outcome {
            Outcome::Response => self.ex().status,
            _ => 0,
        }
    }

    /// The response's headers, in arrival order (empty unless a response).
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let ex = self.ex();
        let n = if matches!(ex.outcome, Outcome::Response) {
            ex.resp_headers.len()
        } else {
            0
        };
        let mut at = 0usize;
        ex.resp_headers[..n]
            .iter()
            .map(move |&(name_end, value_end)| {
                let (a, b, c) = (at, name_end as usize, value_end as usize);
                at = c;
                (&ex.resp[a..b], &ex.resp[b..c])
            })
    }

    /// The first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The response body (empty unless a response).
    pub fn body(&self) -> &[u8] {
        let ex = self.ex();
        match ex.outcome {
            Outcome::Response => &ex.resp[ex.resp_body as usize..],
            _ => &[],
        }
    }

    /// When the loop, having charged the budget, handed the request to the client,
    /// which encodes and writes it at once ([`crate::clock`] ns; with
    /// [`BoundaryConfig::stamp`](super::BoundaryConfig::stamp), for a request that
    /// was sent).
    pub fn sending_at_ns(&self) -> Option<i64> {
        let t = self.ex().sending_at_ns;
        (t != 0 && self.ex().written_at_ns != 0).then_some(t)
    }

    /// When the client's write of the request had returned ([`crate::clock`] ns),
    /// if the loop was built with
    /// [`BoundaryConfig::stamp`](super::BoundaryConfig::stamp) and it was written. On
    /// a busy machine this includes any preemption during the write.
    pub fn written_at_ns(&self) -> Option<i64> {
        let t = self.ex().written_at_ns;
        (t != 0).then_some(t)
    }
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        if let Some(ex) = self.ex.take() {
            // Capacity was reserved for every exchange of the handle: no allocation.
            self.free.push(ex);
        }
    }
}
