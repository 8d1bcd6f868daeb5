//! libcurl's side of the libcurl transport: one multi handle, a fixed set of
//! transfers (easy handles) per libcurl pool, and what each transfer collects
//! (the response, whether any byte left, how many request heads libcurl wrote).
//! The transport above it ([`super::CurlTransport`]) owns the reporting; this
//! module only talks to libcurl.
#![allow(unsafe_code)] // libcurl opens its sockets through our callback (libc::socket).

use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use curl::easy::{Easy2, Handler, InfoType, List, WriteError};
use curl::multi::{Easy2Handle, Events, Multi};
use ergon_core::Ticket;
use ergon_venues::response::{Header, Response};

use super::idempotent;
use crate::http::{encode, Headers, InvalidRequest, Limits, Request};
use crate::pool::{CurlConfig, CurlError, Error, PoolConfig, RequestId};

/// Collects one transfer's response and whether anything was sent.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    head: Vec<u8>,
    body: Vec<u8>,
    max_body: usize,
    sent_any: bool,
    too_large: bool,
    opened: u32,
    /// `METHOD ` of the transfer's request: what each request head libcurl
    /// writes starts with.
    request_line: String,
    /// Request heads libcurl wrote for this transfer: more than one means it
    /// re-sent the request on its own (`Curl_retry_request`).
    heads: u32,
}

impl Handler for Collector {
    fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        if self.body.len() + data.len() > self.max_body {
            self.too_large = true;
            // Fewer bytes than offered: libcurl fails the transfer.
            return Ok(0);
        }
        self.body.extend_from_slice(data);
        Ok(data.len())
    }

    fn header(&mut self, data: &[u8]) -> bool {
        // Keep only the last response's head (after 1xx, the final one).
        if data.starts_with(b"HTTP/") {
            self.head.clear();
        }
        self.head.extend_from_slice(data);
        true
    }

    fn debug(&mut self, kind: InfoType, data: &[u8]) {
        if matches!(kind, InfoType::HeaderOut | InfoType::DataOut) {
            self.sent_any = true;
        }
        // A head may be logged in pieces if its write was partial; only a piece
        // that starts a request line starts a new copy of the request.
        if matches!(kind, InfoType::HeaderOut)
            && !self.request_line.is_empty()
            && data.starts_with(self.request_line.as_bytes())
        {
            self.heads += 1;
        }
    }

    fn open_socket(&mut self, family: c_int, socktype: c_int, protocol: c_int) -> Option<c_int> {
        // SAFETY: plain syscall; the descriptor goes to libcurl, which owns it.
        let fd = unsafe { libc::socket(family, socktype | libc::SOCK_CLOEXEC, protocol) };
        if fd < 0 {
            return None;
        }
        self.opened += 1;
        Some(fd)
    }
}

#[derive(Debug)]
struct Transfer {
    pool: u16,
    idle: Option<Easy2<Collector>>,
    running: Option<Easy2Handle<Collector>>,
    job: Option<(RequestId, Ticket)>,
    deadline: i64,
    /// How libcurl ended it, or why it failed before reaching libcurl.
    outcome: Option<Result<(), Error>>,
    max_body: usize,
}

/// How one transfer ended, taken out of the client to be reported, with how
/// many extra copies of the request libcurl wrote on its own.
#[derive(Debug)]
pub(crate) enum Ended {
    /// A response: read it with [`Finished::response`].
    Response(RequestId, Ticket, Finished, u32),
    /// An error; whether anything was sent.
    Error(RequestId, Ticket, bool, Error, u32),
}

/// A completed transfer's handle, kept out of the client while reported.
pub(crate) struct Finished {
    k: usize,
    easy: Easy2<Collector>,
    status: u16,
}

impl core::fmt::Debug for Finished {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Finished")
            .field("transfer", &self.k)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Finished {
    /// The response over the collected head and body.
    pub(crate) fn response<'h, 'a: 'h>(&'a self, headers: &'h mut Headers<'a>) -> Response<'h> {
        let c = self.easy.get_ref();
        headers.clear();
        // The first line is the status line; the head ends with an empty line.
        for line in c.head.split(|&b| b == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let header = Header {
                name: &line[..colon],
                value: line[colon + 1..].trim_ascii(),
            };
            if headers.try_push(header).is_err() {
                break;
            }
        }
        Response {
            status: self.status,
            headers,
            body: &c.body,
        }
    }
}

/// Every libcurl pool's transfers, on one multi handle.
pub(crate) struct Curl {
    multi: Multi,
    /// libcurl's timer as it last set it: nanoseconds from that call, -1 for none,
    /// `UNCHANGED` once read.
    timer: Arc<AtomicI64>,
    /// When libcurl wants [`Multi::timeout`] called, on the loop's clock.
    timer_at: Option<i64>,
    /// Scratch for validating requests the way the native client encodes them.
    check: Vec<u8>,
    transfers: Vec<Transfer>,
    active: usize,
    failed: usize,
}

impl core::fmt::Debug for Curl {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Curl")
            .field("transfers", &self.transfers.len())
            .field("active", &self.active)
            .finish()
    }
}

/// Epoll tokens of libcurl's sockets: this bit and the descriptor.
pub(crate) const CURL_TOKEN: u64 = 1 << 62;

const UNCHANGED: i64 = i64::MIN;

impl Curl {
    /// libcurl's sockets are watched in the loop's epoll `epfd`, so a loop in
    /// epoll mode parks while transfers wait.
    pub(crate) fn new(epfd: c_int) -> Self {
        let mut multi = Multi::new();
        let _ = multi.socket_function(move |fd, ev, _| {
            if ev.remove() {
                // Already gone if libcurl closed it first; nothing to undo then.
                let _ = crate::sys::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0);
                return;
            }
            let mut bits = 0;
            if ev.input() || ev.input_and_output() {
                bits |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
            }
            if ev.output() || ev.input_and_output() {
                bits |= libc::EPOLLOUT as u32;
            }
            let token = CURL_TOKEN | fd as u64;
            let modified = crate::sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, bits, token);
            if modified == Err(libc::ENOENT) {
                let _ = crate::sys::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, bits, token);
            }
        });
        let timer = Arc::new(AtomicI64::new(UNCHANGED));
        let t = timer.clone();
        let _ = multi.timer_function(move |d| {
            let ns = d.map_or(-1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
            t.store(ns, Ordering::Relaxed);
            true
        });
        Curl {
            multi,
            timer,
            timer_at: None,
            check: Vec::new(),
            transfers: Vec::new(),
            active: 0,
            failed: 0,
        }
    }

    /// `n` transfers (at most `n` requests in flight) for pool `pool`.
    pub(crate) fn add_pool(
        &mut self,
        pool: u16,
        n: usize,
        limits: &Limits,
    ) -> core::ops::Range<usize> {
        // Validation encodes into this, bounded by its capacity as the native
        // connection's send buffer is (the largest pool's bound wins).
        self.check.reserve(limits.max_request);
        let start = self.transfers.len();
        for _ in 0..n {
            let easy = Easy2::new(Collector {
                max_body: limits.max_response,
                ..Collector::default()
            });
            self.transfers.push(Transfer {
                pool,
                idle: Some(easy),
                running: None,
                job: None,
                deadline: i64::MAX,
                outcome: None,
                max_body: limits.max_response,
            });
        }
        start..self.transfers.len()
    }

    /// Checks `req` by the native client's rules (method token, target, header
    /// names and values, no Host or framing headers from the caller), so both
    /// clients refuse the same requests. The target goes into a URL after the
    /// pool's address, so only the origin form passes: `*` (which libcurl's
    /// URL cannot carry) is refused here too.
    pub(crate) fn validate(&mut self, req: &Request<'_>, host: &str) -> Result<(), InvalidRequest> {
        if !req.target.starts_with('/') {
            return Err(InvalidRequest::Target);
        }
        self.check.clear();
        let r = encode(req, host, &mut self.check);
        self.check.clear();
        r
    }

    /// Whether anything is in flight or waits to be reported.
    pub(crate) fn busy(&self) -> bool {
        self.active > 0 || self.failed > 0
    }

    /// When the loop must run next for libcurl: its timer, a transfer's
    /// deadline, or at once for a request that failed before reaching it.
    pub(crate) fn next_deadline(&self) -> Option<i64> {
        if self.failed > 0 {
            return Some(i64::MIN);
        }
        if self.active == 0 {
            return self.timer_at;
        }
        let deadlines = self
            .transfers
            .iter()
            .filter(|t| t.running.is_some())
            .map(|t| t.deadline);
        deadlines.chain(self.timer_at).min()
    }

    /// Takes in a timer libcurl set during the call that just returned.
    fn sync_timer(&mut self, now: i64) {
        match self.timer.swap(UNCHANGED, Ordering::Relaxed) {
            UNCHANGED => {}
            ns if ns < 0 => self.timer_at = None,
            ns => self.timer_at = Some(now.saturating_add(ns)),
        }
    }

    /// Readiness of one of libcurl's sockets.
    pub(crate) fn on_socket(&mut self, fd: c_int, events: u32, now: i64) {
        let mut ev = Events::new();
        ev.input(events & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0);
        ev.output(events & libc::EPOLLOUT as u32 != 0);
        ev.error(events & libc::EPOLLERR as u32 != 0);
        let _ = self.multi.action(fd, &ev);
        self.sync_timer(now);
    }

    /// Free transfers of `range`.
    pub(crate) fn idle(&self, range: core::ops::Range<usize>) -> usize {
        self.transfers[range]
            .iter()
            .filter(|t| t.job.is_none())
            .count()
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.transfers.iter().filter(|t| t.job.is_some()).count()
    }

    /// A free transfer of `range`, if any.
    pub(crate) fn free(&self, range: core::ops::Range<usize>) -> Option<usize> {
        range.into_iter().find(|&k| self.transfers[k].job.is_none())
    }

    /// Starts `req` as request `id` on transfer `k` (one [`free`](Self::free)
    /// gave). A request that fails before reaching libcurl (a refused method, a
    /// setup error) ends at once, reported on the next [`failed_now`](Self::failed_now).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        k: usize,
        cfg: &PoolConfig,
        curl: CurlConfig,
        req: &Request<'_>,
        id: RequestId,
        ticket: Ticket,
        deadline: i64,
        now: i64,
    ) {
        let t = &mut self.transfers[k];
        t.job = Some((id, ticket));
        t.deadline = deadline;
        if !curl.curl_allow_non_idempotent_methods && !idempotent(req.method) {
            t.outcome = Some(Err(Error::CurlResend));
            self.failed += 1;
            return;
        }
        let mut easy = match t.idle.take() {
            Some(e) => e,
            None => Easy2::new(Collector {
                max_body: t.max_body,
                ..Collector::default()
            }),
        };
        let setup = configure(&mut easy, cfg, req, deadline - now);
        match setup.and_then(|()| {
            self.multi
                .add2(easy)
                .map_err(|e| Error::Curl(CurlError::Multi(e.code())))
        }) {
            Ok(mut h) => {
                let _ = h.set_token(k);
                t.running = Some(h);
                self.active += 1;
                self.sync_timer(now);
            }
            Err(e) => {
                t.outcome = Some(Err(e));
                self.failed += 1;
            }
        }
    }

    /// Runs libcurl once and collects the transfers that ended (or failed before
    /// starting, or passed their deadline) into `ended`. Tells `opened` how many
    /// sockets libcurl opened for each pool, to charge as connects.
    pub(crate) fn drive(
        &mut self,
        now: i64,
        ended: &mut Vec<usize>,
        mut opened: impl FnMut(u16, u32),
    ) {
        if self.timer_at.is_some_and(|at| at <= now) {
            self.timer_at = None;
            let _ = self.multi.timeout();
            self.sync_timer(now);
        }
        if self.active > 0 {
            let transfers = &mut self.transfers;
            self.multi.messages(|m| {
                let Some(t) = m.token().ok().and_then(|k| transfers.get_mut(k)) else {
                    return;
                };
                let Some(h) = t.running.as_ref() else {
                    return;
                };
                if let Some(r) = m.result_for2(h) {
                    t.outcome = Some(r.map_err(|e| curl_error(&e, h.get_ref())));
                }
            });
        }
        for (k, t) in self.transfers.iter_mut().enumerate() {
            if let Some(h) = t.running.as_mut() {
                let n = core::mem::take(&mut h.get_mut().opened);
                if n > 0 {
                    opened(t.pool, n);
                }
            }
            if t.job.is_some() && (t.outcome.is_some() || t.deadline <= now) {
                ended.push(k);
            }
        }
    }

    /// Takes transfer `k`'s outcome out (see [`drive`](Self::drive)).
    pub(crate) fn take(&mut self, k: usize) -> Option<Ended> {
        let t = &mut self.transfers[k];
        let (id, ticket) = t.job.take()?;
        let outcome = t.outcome.take();
        t.deadline = i64::MAX;
        let Some(h) = t.running.take() else {
            // Failed before reaching libcurl: nothing was sent.
            self.failed -= 1;
            let e = match outcome {
                Some(Err(e)) => e,
                _ => Error::Closed,
            };
            return Some(Ended::Error(id, ticket, false, e, 0));
        };
        self.active -= 1;
        let removed = self.multi.remove2(h);
        // Removing may change libcurl's timer; it is read on the next call.
        let mut easy = match removed {
            Ok(e) => e,
            // The handle is gone with the error; a fresh one replaces it on the
            // next request. Whether anything left is unknown: say maybe.
            Err(e) => {
                return Some(Ended::Error(
                    id,
                    ticket,
                    true,
                    Error::Curl(CurlError::Multi(e.code())),
                    0,
                ))
            }
        };
        let sent = easy.get_ref().sent_any;
        let resent = easy.get_ref().heads.saturating_sub(1);
        let error = match outcome {
            Some(Ok(())) => {
                let status = easy.response_code().unwrap_or(0);
                match u16::try_from(status) {
                    Ok(status) if (100..1000).contains(&status) => {
                        return Some(Ended::Response(
                            id,
                            ticket,
                            Finished { k, easy, status },
                            resent,
                        ))
                    }
                    _ => Error::Parse(crate::http::ParseError::BadStatus),
                }
            }
            Some(Err(e)) => e,
            // Still running at its deadline: removed, never finished.
            None => Error::Timeout,
        };
        reset(&mut easy);
        t.idle = Some(easy);
        Some(Ended::Error(id, ticket, sent, error, resent))
    }

    /// Returns a reported response's handle to its transfer.
    pub(crate) fn restore(&mut self, f: Finished) {
        let mut easy = f.easy;
        reset(&mut easy);
        self.transfers[f.k].idle = Some(easy);
    }

    /// The transfers that failed before reaching libcurl, into `ended`.
    pub(crate) fn failed_now(&self, ended: &mut Vec<usize>) {
        if self.failed == 0 {
            return;
        }
        ended.extend((0..self.transfers.len()).filter(|&k| {
            let t = &self.transfers[k];
            t.job.is_some() && t.running.is_none() && t.outcome.is_some()
        }));
    }

    /// Ends every transfer with a request (shutdown): each is reported as failed
    /// with [`Error::Closed`] unless it already ended.
    pub(crate) fn abort_all(&mut self, ended: &mut Vec<usize>) {
        for (k, t) in self.transfers.iter_mut().enumerate() {
            if t.job.is_some() {
                t.outcome.get_or_insert(Err(Error::Closed));
                ended.push(k);
            }
        }
    }
}

fn reset(easy: &mut Easy2<Collector>) {
    let c = easy.get_mut();
    c.head.clear();
    c.body.clear();
    c.sent_any = false;
    c.too_large = false;
    c.opened = 0;
    c.heads = 0;
}

fn curl_error(e: &curl::Error, c: &Collector) -> Error {
    if c.too_large {
        Error::Parse(crate::http::ParseError::ResponseTooLarge)
    } else if e.is_operation_timedout() {
        Error::Timeout
    } else {
        Error::Curl(CurlError::Transfer(i64::from(e.code())))
    }
}

fn configure(
    easy: &mut Easy2<Collector>,
    cfg: &PoolConfig,
    req: &Request<'_>,
    left_ns: i64,
) -> Result<(), Error> {
    let err = |e: curl::Error| Error::Curl(CurlError::Transfer(i64::from(e.code())));
    easy.reset();
    let c = easy.get_mut();
    c.request_line.clear();
    c.request_line.push_str(req.method);
    c.request_line.push(' ');
    c.heads = 0;
    // Verbose: the debug callback sees every byte sent (Sent::No vs Maybe) and
    // every request head (the copies libcurl re-sends).
    easy.verbose(true).map_err(err)?;
    easy.tcp_nodelay(true).map_err(err)?;
    let url = format!("http://{}{}", cfg.addr, req.target);
    easy.url(&url).map_err(err)?;
    let mut list = List::new();
    list.append(&format!("Host: {}", cfg.host)).map_err(err)?;
    // No 100-continue round trip.
    list.append("Expect:").map_err(err)?;
    for (k, v) in req.headers {
        list.append(&format!("{k}: {v}")).map_err(err)?;
    }
    easy.http_headers(list).map_err(err)?;
    match req.method {
        "GET" => easy.get(true).map_err(err)?,
        "HEAD" => easy.nobody(true).map_err(err)?,
        "POST" => {
            easy.post(true).map_err(err)?;
            easy.post_fields_copy(req.body).map_err(err)?;
        }
        m => {
            easy.custom_request(m).map_err(err)?;
            if !req.body.is_empty() {
                easy.post_fields_copy(req.body).map_err(err)?;
            }
        }
    }
    let left = Duration::from_nanos(left_ns.max(1_000_000) as u64);
    easy.timeout(left).map_err(err)?;
    easy.connect_timeout(Duration::from_nanos(
        cfg.connect_timeout_ns.max(1_000_000) as u64
    ))
    .map_err(err)?;
    if let Some(local) = cfg.local_addr {
        easy.interface(&local.ip().to_string()).map_err(err)?;
    }
    Ok(())
}
