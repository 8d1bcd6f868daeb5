//! The session's input side: bytes read from the socket, the handshake's answer,
//! frames, pings and closes, and the events they make.

use ergon_core::{Budget, Verdict};

use super::{
    Cause, CloseInfo, Closed, Deliver, Owed, Session, Src, State, Step, What, WsEvent, WsOutcome,
    MAX_REASON,
};
use crate::ws::frame::{self, close_code_valid, Opcode, Role};
use crate::ws::handshake::{self, Body, HandshakeError};
use crate::ws::ProtocolError;

impl Session {
    /// The free part of the receive buffer: read into it, then call
    /// [`Session::handle_read`]. Empty while a complete frame waits to be polled.
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.rx_start > 0 {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        &mut self.rx[self.rx_end..]
    }

    /// `n` bytes were read into [`Session::read_buf`]. Bytes that arrive while
    /// [`State::Closed`] or [`State::Idle`] are dropped.
    pub fn handle_read(&mut self, n: usize) {
        if matches!(self.state, State::Idle | State::Closed) {
            self.rx_start = 0;
            self.rx_end = 0;
            return;
        }
        self.rx_end = (self.rx_end + n).min(self.rx.len());
    }

    /// Copies as much of `bytes` as the receive buffer takes; returns how much.
    /// Poll events, then hand in the rest.
    pub fn handle_input(&mut self, bytes: &[u8]) -> usize {
        let buf = self.read_buf();
        let n = buf.len().min(bytes.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        self.handle_read(n);
        n
    }

    /// The next event, or `None` when more input (or time) is needed. Handles pings
    /// (queueing the pong, charged), close frames and protocol errors on the way.
    pub fn poll_event(&mut self, budget: &mut Budget, now_ns: i64) -> Option<WsEvent<'_>> {
        self.flush_owed(budget, now_ns);
        loop {
            if !self.outcomes.is_empty() {
                return Some(WsEvent::Outcome(self.outcomes.remove(0)));
            }
            if self.closed_pending {
                self.closed_pending = false;
                let info = &self.last_close;
                let reason =
                    std::str::from_utf8(&info.reason[..usize::from(info.reason_len)]).unwrap_or("");
                return Some(WsEvent::Closed(Closed {
                    cause: info.cause,
                    code: info.code,
                    reason,
                }));
            }
            if self.opened {
                self.opened = false;
                return Some(WsEvent::Open);
            }
            let step = match self.state {
                State::Handshaking => self.step_handshake(budget, now_ns),
                State::Open | State::Closing => self.step_frame(budget, now_ns),
                State::Idle | State::Closed => Step::Need,
            };
            match step {
                Step::Need => return None,
                Step::Again => continue,
                Step::Deliver(d) => {
                    if let Deliver::Text(src, a, b) = d {
                        if std::str::from_utf8(self.slice(src, a, b)).is_err() {
                            self.fail(ProtocolError::InvalidUtf8, budget, now_ns);
                            continue;
                        }
                    }
                    self.stats.messages_received += u64::from(!matches!(d, Deliver::Pong(..)));
                    return Some(self.deliver(d));
                }
            }
        }
    }

    pub(super) fn slice(&self, src: Src, a: usize, b: usize) -> &[u8] {
        match src {
            Src::Rx => &self.rx[a..b],
            Src::Msg => &self.msg[a..b],
        }
    }

    pub(super) fn deliver(&self, d: Deliver) -> WsEvent<'_> {
        match d {
            // Checked by the caller just before; "" is unreachable.
            Deliver::Text(src, a, b) => {
                WsEvent::Text(std::str::from_utf8(self.slice(src, a, b)).unwrap_or(""))
            }
            Deliver::Binary(src, a, b) => WsEvent::Binary(self.slice(src, a, b)),
            Deliver::Pong(a, b) => WsEvent::Pong(&self.rx[a..b]),
        }
    }

    pub(super) fn step_handshake(&mut self, budget: &mut Budget, now: i64) -> Step {
        let avail = &self.rx[self.rx_start..self.rx_end];
        match handshake::read_response(avail, &self.key) {
            Ok(Some(n)) => {
                self.rx_start += n;
                self.state = State::Open;
                self.deadline_ns = i64::MAX;
                self.opened = true;
                Step::Again
            }
            Ok(None) if avail.len() >= self.config.max_handshake => {
                self.finish(
                    Cause::Handshake(HandshakeError::TooLarge),
                    None,
                    b"",
                    None,
                    budget,
                    now,
                );
                Step::Again
            }
            Ok(None) => Step::Need,
            Err(HandshakeError::Status(_)) => {
                // Not 101: the venue's word (a ban, a throttle with its wait) is in
                // the status, the headers and the body. Wait for the whole body.
                let complete = match handshake::read_rejection(avail) {
                    Some((_, head, Body::Length(n))) => avail.len() >= head.saturating_add(n),
                    Some((_, head, Body::Chunked)) => {
                        handshake::walk_chunks(&avail[head..], |_, _| {}).is_some()
                    }
                    _ => false,
                };
                if complete || avail.len() >= self.config.max_handshake {
                    self.reject(budget, now);
                    return Step::Again;
                }
                Step::Need
            }
            Err(e) => {
                self.finish(Cause::Handshake(e), None, b"", None, budget, now);
                Step::Again
            }
        }
    }

    pub(super) fn step_frame(&mut self, budget: &mut Budget, now: i64) -> Step {
        let avail = &self.rx[self.rx_start..self.rx_end];
        let max = self.config.max_message as u64;
        let (h, hl) = match frame::parse_header(avail, Role::Client, max) {
            Ok(Some(x)) => x,
            Ok(None) => return Step::Need,
            Err(e) => {
                self.fail(e, budget, now);
                return Step::Again;
            }
        };
        // h.len <= max_message, a usize.
        let total = hl + h.len as usize;
        if avail.len() < total {
            return Step::Need;
        }
        let (a, b) = (self.rx_start + hl, self.rx_start + total);
        self.rx_start += total;
        match h.opcode {
            Opcode::Text | Opcode::Binary => {
                if self.frag.is_some() {
                    self.fail(ProtocolError::UnfinishedMessage, budget, now);
                    return Step::Again;
                }
                if h.fin {
                    return Step::Deliver(if h.opcode == Opcode::Text {
                        Deliver::Text(Src::Rx, a, b)
                    } else {
                        Deliver::Binary(Src::Rx, a, b)
                    });
                }
                self.msg[..b - a].copy_from_slice(&self.rx[a..b]);
                self.msg_len = b - a;
                self.frag = Some(h.opcode);
                Step::Again
            }
            Opcode::Continuation => {
                let Some(first) = self.frag else {
                    self.fail(ProtocolError::UnexpectedContinuation, budget, now);
                    return Step::Again;
                };
                let len = b - a;
                if self.msg_len + len > self.config.max_message {
                    self.fail(ProtocolError::MessageTooBig, budget, now);
                    return Step::Again;
                }
                self.msg[self.msg_len..self.msg_len + len].copy_from_slice(&self.rx[a..b]);
                self.msg_len += len;
                if !h.fin {
                    return Step::Again;
                }
                self.frag = None;
                let n = self.msg_len;
                self.msg_len = 0;
                Step::Deliver(if first == Opcode::Text {
                    Deliver::Text(Src::Msg, 0, n)
                } else {
                    Deliver::Binary(Src::Msg, 0, n)
                })
            }
            Opcode::Ping => {
                self.on_ping(a, b, budget, now);
                Step::Again
            }
            Opcode::Pong => Step::Deliver(Deliver::Pong(a, b)),
            Opcode::Close => {
                self.on_close(a, b, budget, now);
                Step::Again
            }
        }
    }

    pub(super) fn on_ping(&mut self, a: usize, b: usize, budget: &mut Budget, now: i64) {
        self.stats.pings_received += 1;
        if self.close_sent {
            // After our close no frame may follow it.
            self.stats.pongs_abandoned += 1;
            return;
        }
        let delayed = match self.pong {
            Some(old) => {
                self.stats.pongs_coalesced += 1;
                old.delayed
            }
            None => false,
        };
        let mut owed = Owed::new(&self.rx[a..b], now, i64::MAX);
        owed.delayed = delayed;
        self.pong = Some(owed);
        self.flush_pong(budget, now);
    }

    pub(super) fn on_close(&mut self, a: usize, b: usize, budget: &mut Budget, now: i64) {
        let (code, reason_at) = match b - a {
            0 => (None, a),
            1 => return self.fail(ProtocolError::BadClosePayload, budget, now),
            _ => {
                let code = u16::from_be_bytes([self.rx[a], self.rx[a + 1]]);
                if !close_code_valid(code) {
                    return self.fail(ProtocolError::BadCloseCode(code), budget, now);
                }
                (Some(code), a + 2)
            }
        };
        let mut reason = [0u8; MAX_REASON];
        let reason_len = b - reason_at;
        reason[..reason_len].copy_from_slice(&self.rx[reason_at..b]);
        if std::str::from_utf8(&reason[..reason_len]).is_err() {
            return self.fail(ProtocolError::InvalidUtf8, budget, now);
        }
        let reason = &reason[..reason_len];
        let cause = if self.close_sent {
            Cause::Local
        } else {
            Cause::Peer
        };
        if self.close_sent && !self.queue.is_empty() {
            // Both sides closed at once and ours (the last frame queued after
            // close()) has not left: it is refunded with the rest, and the echo
            // below takes its place.
            self.close_sent = false;
        }
        if self.close_sent {
            self.finish(cause, code, reason, None, budget, now);
        } else {
            let echo = code.map(u16::to_be_bytes);
            let echo: &[u8] = echo.as_ref().map_or(&[], |c| c.as_slice());
            let mut owed = [0u8; 2];
            owed[..echo.len()].copy_from_slice(echo);
            self.finish(cause, code, reason, Some(&owed[..echo.len()]), budget, now);
        }
    }

    /// Fails the connection for a peer's protocol error: close frame with its code.
    pub(super) fn fail(&mut self, e: ProtocolError, budget: &mut Budget, now: i64) {
        let code = e.close_code();
        self.finish(
            Cause::Protocol(e),
            Some(code),
            b"",
            Some(&code.to_be_bytes()),
            budget,
            now,
        );
    }

    /// Ends the connection: refunds what never left, reports pending requests,
    /// queues the close frame owed (if any and none was sent) and the Closed event.
    pub(super) fn finish(
        &mut self,
        cause: Cause,
        code: Option<u16>,
        reason: &[u8],
        echo: Option<&[u8]>,
        budget: &mut Budget,
        now: i64,
    ) {
        self.drop_unsent(budget, now);
        self.unwritten = 0;
        for p in self.pending.drain(..) {
            self.outcomes.push(WsOutcome {
                id: p.id,
                verdict: Verdict::Unknown,
                flight: Some(p.flight),
            });
        }
        if self.pong.take().is_some() {
            self.stats.pongs_abandoned += 1;
        }
        self.frag = None;
        self.msg_len = 0;
        self.rx_start = 0;
        self.rx_end = 0;
        let mut info = CloseInfo {
            cause,
            code,
            reason: [0; MAX_REASON],
            reason_len: 0,
        };
        let n = reason.len().min(MAX_REASON);
        info.reason[..n].copy_from_slice(&reason[..n]);
        info.reason_len = n as u8;
        self.last_close = info;
        self.closed_pending = true;
        self.state = State::Closed;
        self.deadline_ns = i64::MAX;
        if let (Some(payload), false) = (echo, self.close_sent) {
            let deadline = now.saturating_add(self.config.close_timeout_ns);
            self.close_owed = Some(Owed::new(payload, now, deadline));
            self.flush_close(budget, now);
        }
    }

    /// Drops every queued frame not one byte of which was written: refunds its
    /// charge, and reports a request among them as NotRun.
    pub(super) fn drop_unsent(&mut self, budget: &mut Budget, now: i64) {
        if let Some(first) = self.queue.first() {
            let keep = (first.start - self.tx_written) as usize;
            self.tx_end = self.tx_start + keep;
            self.tx_queued = self.tx_written + keep as u64;
        }
        for q in self.queue.drain(..) {
            let own = budget.refund(q.ticket, now);
            debug_assert!(own.is_ok(), "a session is driven with one budget");
            self.stats.frames_refunded += 1;
            if let What::Request(id) = q.what {
                self.outcomes.push(WsOutcome {
                    id,
                    verdict: Verdict::NotRun,
                    flight: None,
                });
            }
        }
        self.requests_queued = 0;
    }
}
