//! The session's output side: frames charged and queued, bytes handed to the
//! socket, owed pongs and closes flushed when the budget has room.

use arrayvec::ArrayVec;
use ergon_core::{Budget, Class, Part, Ticket, MAX_PARTS};
use ergon_venues::endpoint::Text;

use super::{
    Pending, Queued, SendError, Session, State, What, HALT_RETRY_NS, MAX_PENDING, MAX_REASON,
};
use crate::ws::frame::{self, close_code_valid, frame_len, Opcode, MAX_CONTROL};

impl Session {
    /// Bytes waiting to be written, if any.
    pub fn poll_transmit(&self) -> Option<&[u8]> {
        (self.tx_start < self.tx_end).then(|| &self.tx[self.tx_start..self.tx_end])
    }

    /// `n` bytes of [`Session::poll_transmit`] were written at `now_ns`. A frame
    /// whose first byte left is now counted by the venue: its charge is kept, and
    /// a request becomes pending until [`Session::resolve`]; a request whose last
    /// byte left now is sent as of `now_ns` ([`Session::written_at`]).
    pub fn handle_written(&mut self, n: usize, budget: &mut Budget, now_ns: i64) {
        let n = n.min(self.tx_end - self.tx_start);
        self.tx_start += n;
        self.tx_written += n as u64;
        if self.tx_start == self.tx_end {
            self.tx_start = 0;
            self.tx_end = 0;
        }
        while self
            .queue
            .first()
            .is_some_and(|q| q.start < self.tx_written)
        {
            let q = self.queue.remove(0);
            let flight = q.ticket.sent();
            match q.what {
                What::Frame | What::Handshake => {
                    let own = budget.complete(flight, now_ns);
                    debug_assert!(own.is_ok(), "a session is driven with one budget");
                }
                What::Request(id) => {
                    self.requests_queued -= 1;
                    let written_ns = if q.end <= self.tx_written {
                        now_ns
                    } else {
                        self.unwritten += 1;
                        i64::MAX
                    };
                    self.pending.push(Pending {
                        id,
                        flight,
                        end: q.end,
                        written_ns,
                    });
                }
            }
        }
        // Only a request written in part has its time still to come: most
        // writes take whole frames, and the pending list (up to MAX_PENDING) is
        // not walked for them.
        if self.unwritten > 0 {
            for p in self.pending.iter_mut() {
                if p.written_ns == i64::MAX && p.end <= self.tx_written {
                    p.written_ns = now_ns;
                    self.unwritten -= 1;
                }
            }
        }
        // Owed frames waiting for space may fit now.
        for owed in [&mut self.pong, &mut self.close_owed].into_iter().flatten() {
            if owed.ready_ns == i64::MAX {
                owed.ready_ns = now_ns;
            }
        }
        self.flush_owed(budget, now_ns);
    }

    /// The answer to request `id` arrived: releases its in-flight limits. `false` if
    /// no written request has this id (it may not have left yet).
    pub fn resolve(&mut self, id: u64, budget: &mut Budget, now_ns: i64) -> bool {
        match self.pending.iter().position(|p| p.id == id) {
            Some(at) => {
                let p = self.pending.swap_remove(at);
                self.unwritten -= usize::from(p.written_ns == i64::MAX);
                let flight = p.flight;
                let own = budget.complete(flight, now_ns);
                debug_assert!(own.is_ok(), "a session is driven with one budget");
                true
            }
            None => false,
        }
    }

    /// When the last byte of request `id`'s frame was written (the time passed to
    /// [`Session::handle_written`]), while it awaits [`Session::resolve`]: the
    /// earliest the peer can have read all of it. `None` if it is not pending or
    /// part of it still waits in the send buffer.
    pub fn written_at(&self, id: u64) -> Option<i64> {
        self.pending
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.written_ns)
            .filter(|&t| t != i64::MAX)
    }

    /// Queues a text message, charging the message parts.
    pub fn send_text(
        &mut self,
        text: &str,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Text,
            text.as_bytes(),
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a binary message, charging the message parts.
    pub fn send_binary(
        &mut self,
        data: &[u8],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Binary,
            data,
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a ping (at most 125 bytes), charging the message parts.
    pub fn send_ping(
        &mut self,
        payload: &[u8],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        self.send(
            Opcode::Ping,
            payload,
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )
    }

    /// Queues a request (a venue's WebSocket API call) as a text message, charging the
    /// message parts and `parts` together, all or none. Call [`Session::resolve`]
    /// when its answer arrives; if the connection ends first, [`super::WsEvent::Outcome`] says
    /// NotRun (never written, refunded) or Unknown (written: reconcile).
    pub fn send_request(
        &mut self,
        id: u64,
        text: &str,
        parts: &[Part],
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        if self.pending.len() + self.requests_queued >= MAX_PENDING {
            return Err(SendError::TooManyPending);
        }
        if self.is_taken(id) {
            return Err(SendError::DuplicateId);
        }
        self.send(
            Opcode::Text,
            text.as_bytes(),
            What::Request(id),
            parts,
            class,
            budget,
            now_ns,
        )?;
        self.requests_queued += 1;
        self.highest_id = Some(self.highest_id.map_or(id, |h| h.max(id)));
        Ok(())
    }

    /// Queues a request under a charge the caller already made: `ticket` covers
    /// the frame (the request's parts, with [`Session::message_parts`] if the venue
    /// counts frames). Otherwise as [`Session::send_request`]: [`Session::resolve`]
    /// on its answer; if the connection ends first, [`super::WsEvent::Outcome`] says NotRun
    /// (never written: the session refunds `ticket`) or Unknown (written:
    /// reconcile). On `Err` nothing was queued and `ticket` comes back, unsent.
    pub fn send_request_charged(
        &mut self,
        id: u64,
        text: &str,
        ticket: Ticket,
    ) -> Result<(), (SendError, Ticket)> {
        self.send_text_charged(id, text.as_bytes(), ticket)
    }

    /// [`Session::send_request_charged`] of a frame a venue adapter wrote as
    /// [`Text`] (text by construction: no UTF-8 scan here either).
    pub fn send_request_text_charged(
        &mut self,
        id: u64,
        text: &Text,
        ticket: Ticket,
    ) -> Result<(), (SendError, Ticket)> {
        self.send_text_charged(id, text.as_bytes(), ticket)
    }

    /// Both of the above: `text` is UTF-8, as their types say.
    fn send_text_charged(
        &mut self,
        id: u64,
        text: &[u8],
        ticket: Ticket,
    ) -> Result<(), (SendError, Ticket)> {
        if self.state != State::Open {
            return Err((SendError::NotOpen, ticket));
        }
        if self.pending.len() + self.requests_queued >= MAX_PENDING {
            return Err((SendError::TooManyPending, ticket));
        }
        if self.is_taken(id) {
            return Err((SendError::DuplicateId, ticket));
        }
        let need = frame_len(text.len(), true);
        if need > self.tx.len() {
            return Err((SendError::TooBig, ticket));
        }
        if self.queue.is_full() || !self.make_room(need) {
            return Err((SendError::Full, ticket));
        }
        self.push_frame(Opcode::Text, text, What::Request(id), ticket);
        self.requests_queued += 1;
        self.highest_id = Some(self.highest_id.map_or(id, |h| h.max(id)));
        Ok(())
    }

    /// Whether request `id` is queued or pending. An id above every id this
    /// session ever queued is neither, without a look (a lane numbers its
    /// requests upwards: the scan of up to [`MAX_PENDING`] requests was ~130
    /// instructions an order with a batch in flight).
    fn is_taken(&self, id: u64) -> bool {
        if !matches!(self.highest_id, Some(h) if id <= h) {
            return false;
        }
        self.queue.iter().any(|q| q.what == What::Request(id))
            || self.pending.iter().any(|p| p.id == id)
    }

    /// What each frame charges (the message bucket and the IP gate, as built).
    pub fn message_parts(&self) -> &[Part] {
        &self.message_parts
    }

    /// Starts the close handshake: queues a close frame with `code` and `reason`
    /// (at most 123 bytes), charged like any frame. The server's answer ends the
    /// connection ([`super::Cause::Local`]); none within the close timeout, [`super::Cause::Timeout`].
    pub fn close(
        &mut self,
        code: u16,
        reason: &str,
        class: Class,
        budget: &mut Budget,
        now_ns: i64,
    ) -> Result<(), SendError> {
        if !close_code_valid(code) {
            return Err(SendError::BadCloseCode(code));
        }
        if reason.len() > MAX_REASON {
            return Err(SendError::TooBig);
        }
        let mut payload = [0u8; MAX_CONTROL];
        payload[..2].copy_from_slice(&code.to_be_bytes());
        payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
        let len = 2 + reason.len();
        self.send(
            Opcode::Close,
            &payload[..len],
            What::Frame,
            &[],
            class,
            budget,
            now_ns,
        )?;
        if self.pong.take().is_some() {
            // No frame may follow our close.
            self.stats.pongs_abandoned += 1;
        }
        self.close_sent = true;
        self.state = State::Closing;
        self.deadline_ns = now_ns.saturating_add(self.config.close_timeout_ns);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn send(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        what: What,
        extra: &[Part],
        class: Class,
        budget: &mut Budget,
        now: i64,
    ) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::NotOpen);
        }
        self.queue_frame(opcode, payload, what, extra, class, budget, now)
    }

    /// Charges and queues one masked frame, in any state.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_frame(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        what: What,
        extra: &[Part],
        class: Class,
        budget: &mut Budget,
        now: i64,
    ) -> Result<(), SendError> {
        let need = frame_len(payload.len(), true);
        if (opcode.is_control() && payload.len() > MAX_CONTROL) || need > self.tx.len() {
            return Err(SendError::TooBig);
        }
        if self.queue.is_full() || !self.make_room(need) {
            return Err(SendError::Full);
        }
        // A ticket holds MAX_PARTS parts: more is the caller's mistake, refused
        // before anything is charged (never a panic on the loop thread).
        let mut parts = ArrayVec::<Part, MAX_PARTS>::new();
        if parts
            .try_extend_from_slice(&self.message_parts)
            .and_then(|()| parts.try_extend_from_slice(extra))
            .is_err()
        {
            return Err(SendError::TooManyParts);
        }
        let ticket = budget
            .try_charge(&parts, class, now)
            .map_err(SendError::Limited)?;
        self.push_frame(opcode, payload, what, ticket);
        Ok(())
    }

    /// Writes one masked frame under `ticket` (room checked by the caller).
    pub(super) fn push_frame(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        what: What,
        ticket: Ticket,
    ) {
        let need = frame_len(payload.len(), true);
        let mask = (self.rng.next_u64() as u32).to_ne_bytes();
        let n = frame::encode(
            &mut self.tx[self.tx_end..],
            true,
            opcode,
            payload,
            Some(mask),
        )
        .unwrap_or(0);
        debug_assert_eq!(n, need, "make_room guaranteed the space");
        self.queue.push(Queued {
            start: self.tx_queued,
            end: self.tx_queued + n as u64,
            what,
            ticket,
        });
        self.tx_end += n;
        self.tx_queued += n as u64;
        self.stats.frames_sent += 1;
    }

    /// Makes `need` contiguous bytes free at the end of the send buffer.
    pub(super) fn make_room(&mut self, need: usize) -> bool {
        if self.tx.len() - self.tx_end >= need {
            return true;
        }
        if self.tx.len() - (self.tx_end - self.tx_start) < need {
            return false;
        }
        self.tx.copy_within(self.tx_start..self.tx_end, 0);
        self.tx_end -= self.tx_start;
        self.tx_start = 0;
        true
    }

    pub(super) fn flush_owed(&mut self, budget: &mut Budget, now: i64) {
        self.flush_pong(budget, now);
        self.flush_close(budget, now);
    }

    /// Sends the owed pong if its time has come and the budget admits it; else
    /// keeps it, with the time to try again.
    pub(super) fn flush_pong(&mut self, budget: &mut Budget, now: i64) {
        let Some(owed) = self.pong else { return };
        if now < owed.ready_ns || self.state != State::Open {
            return;
        }
        let class = self.config.pong_class;
        match self.queue_frame(
            Opcode::Pong,
            owed.payload(),
            What::Frame,
            &[],
            class,
            budget,
            now,
        ) {
            Ok(()) => {
                self.pong = None;
                self.stats.pongs_sent += 1;
            }
            Err(e) => {
                if let Some(p) = self.pong.as_mut() {
                    p.ready_ns = retry_at(e, now);
                    if !p.delayed {
                        p.delayed = true;
                        self.stats.pongs_delayed += 1;
                    }
                }
            }
        }
    }

    /// Sends the owed close frame (an echo, or ours after a protocol error) if the
    /// budget admits it, gives it up at its deadline.
    pub(super) fn flush_close(&mut self, budget: &mut Budget, now: i64) {
        let Some(owed) = self.close_owed else { return };
        if now >= owed.deadline_ns {
            self.close_owed = None;
            self.stats.closes_abandoned += 1;
            return;
        }
        if now < owed.ready_ns {
            return;
        }
        match self.queue_frame(
            Opcode::Close,
            owed.payload(),
            What::Frame,
            &[],
            Class::Urgent,
            budget,
            now,
        ) {
            Ok(()) => {
                self.close_owed = None;
                self.close_sent = true;
            }
            Err(e) => {
                if let Some(c) = self.close_owed.as_mut() {
                    c.ready_ns = retry_at(e, now);
                    if !c.delayed {
                        c.delayed = true;
                        self.stats.closes_delayed += 1;
                    }
                }
            }
        }
    }
}

/// When to try an owed control frame again after `e`: when the budget says, in a
/// second after a halt (a person may clear it), once there is room after a full
/// buffer (`i64::MAX`: [`Session::handle_written`] wakes it).
fn retry_at(e: SendError, now: i64) -> i64 {
    match e {
        SendError::Limited(l) if l.ready_at_ns != i64::MAX => {
            l.ready_at_ns.max(now.saturating_add(1))
        }
        SendError::Limited(_) => now.saturating_add(HALT_RETRY_NS),
        _ => i64::MAX,
    }
}
