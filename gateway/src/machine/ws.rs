//! Order entry and the order stream over the WebSocket API.

use super::reconcile::items_of;
use super::Gateway;
use crate::endpoints::Account;
use crate::events::Event;
use crate::lane_api::LaneIn;
use crate::ledger::Stage;
use crate::wire::Wire;
use crate::ws_api::{Item, SubCharge, WsLane, WsReport, WS_BIT};
use arrayvec::ArrayVec;
use ergon_core::{Class, Verdict};
use ergon_io::client::RequestId;
use ergon_io::event_loop::{Readiness, Registry};
use ergon_venues::adapt;
use ergon_venues::endpoint::Label;
use ergon_venues::json;
use ergon_venues::response::Response;

/// What one item of the WebSocket API connection made.
#[derive(Debug)]
pub enum WsIn<'f> {
    /// An event of a request (or of the gateway's own poll).
    Event(Event<'f>),
    /// An order update of the user data stream.
    Execution(ergon_venues::binance_spot_ws::Execution),
}

/// Order entry and the order stream over the WebSocket API (see
/// [`crate::ws_api`]): the connection's reports go through the same ledger and
/// settle rule as HTTP's.
impl<E: Account> Gateway<E> {
    /// Sends every request with a WebSocket API twin over `lane` while it is open
    /// (HTTP otherwise), and takes the order stream from it.
    pub fn set_ws_api(&mut self, lane: WsLane) {
        self.ws = Some(lane);
    }

    /// The WebSocket API connection, if set.
    pub fn ws_api(&self) -> Option<&WsLane> {
        self.ws.as_ref()
    }

    /// Drops the WebSocket API connection: every request goes over HTTP.
    pub fn drop_ws_api(&mut self) -> Option<WsLane> {
        self.ws.take()
    }

    /// The WebSocket API connection, to move the bytes of its in-memory
    /// transport ([`WsLane::pipe_mut`]).
    pub fn ws_api_mut(&mut self) -> Option<&mut WsLane> {
        self.ws.as_mut()
    }

    /// One drive of the WebSocket API connection, as the loop's driver makes it
    /// (connect if due, setup, read, timeouts, write), each item it reported
    /// handed to the gateway in order and what that made to `on`; for a driver
    /// without the loop (a simulation over [`WsLane::use_pipe`]). Events the
    /// items queued come out of [`Gateway::poll_event`] after.
    pub fn drive_ws<W: Wire>(&mut self, w: &mut W, on: &mut dyn FnMut(WsIn<'_>)) {
        self.drive_ws_then(w, None, &mut |_, _, got| on(got));
    }

    /// [`Gateway::drive_ws`] with the socket's readiness `ready` (as the loop
    /// reported it), `on` given the gateway and the wire back with each item's
    /// outcome (the loop's driver hands them to the strategy's `Api`).
    pub(crate) fn drive_ws_then<W: Wire>(
        &mut self,
        w: &mut W,
        ready: Option<Readiness>,
        on: &mut dyn FnMut(&mut Self, &mut W, WsIn<'_>),
    ) {
        let Some(mut report) = self.ws_drive(w, ready) else {
            return;
        };
        let mut items = core::mem::take(&mut report.items);
        for item in items.drain(..) {
            if let Some(got) = self.ws_item(w, item, &report.bytes) {
                on(self, w, got);
            }
        }
        report.items = items;
        self.ws_restore(report);
    }

    /// Lets the loop watch the lane's socket, once: `registry` is asked only
    /// while the lane is not watched yet (and tried again on the next drive if it
    /// fails).
    pub(crate) fn ws_watch(&mut self, registry: impl FnOnce() -> Option<Registry>) {
        let Some(lane) = self.ws.as_mut() else { return };
        if !lane.watched {
            if let Some(r) = registry() {
                lane.attach(r);
                lane.watched = true;
            }
        }
    }

    /// Whether the connection wants a drive at `now` outside its descriptor and
    /// timer: never watched yet, or a re-connect due.
    pub(crate) fn ws_due(&self, now: i64) -> bool {
        self.ws
            .as_ref()
            .is_some_and(|l| !l.watched || l.next_deadline().is_some_and(|t| t <= now))
    }

    /// The earliest time the connection wants a drive.
    pub fn ws_deadline(&self) -> Option<i64> {
        self.ws.as_ref().and_then(WsLane::next_deadline)
    }

    /// Records the HTTP pool's connect charges made since the last call (they
    /// happen inside the transport, [`Wire::connects`] counts them): an admitted
    /// one as charged, sent and complete (the connect left), a refused one as
    /// charged. Called after each send and at each of the loop's calls.
    pub(crate) fn note_connects<W: Wire>(&mut self, w: &W) {
        self.trace.connects(w, &self.venue);
    }

    /// Connects if due, then reads and writes: what the connection reported, to
    /// hand to [`Gateway::ws_item`] item by item, then back by
    /// [`Gateway::ws_restore`].
    pub(crate) fn ws_drive<W: Wire>(
        &mut self,
        w: &mut W,
        ready: Option<Readiness>,
    ) -> Option<WsReport> {
        let now = w.now();
        let lane = self.ws.as_mut()?;
        if let Some(ok) = lane.connect_if_due(w.budget(), now) {
            let tid = self
                .trace
                .charge(now, lane.connect_parts(), Class::Urgent, Label::NONE, ok);
            if ok {
                self.trace.ws_connect = tid;
            }
        }
        let setup = lane.setup_due(w.budget(), now);
        self.trace_own(setup, now);
        let lane = self.ws.as_mut()?;
        Some(lane.drive(w.budget(), now, ready))
    }

    /// Gives the report back.
    pub(crate) fn ws_restore(&mut self, report: WsReport) {
        if let Some(lane) = self.ws.as_mut() {
            lane.restore(report);
        }
    }

    /// Records what became of the charge of a request of the lane's own (a
    /// setup request, a heartbeat answer).
    fn trace_own(&mut self, c: SubCharge, now: i64) {
        if c == SubCharge::None {
            return;
        }
        let Some(lane) = self.ws.as_ref() else { return };
        let tid = self.trace.charge(
            now,
            lane.sub_parts(),
            Class::Urgent,
            Label::NONE,
            !matches!(c, SubCharge::Refused(_)),
        );
        match c {
            SubCharge::Sent(_) => self.trace.ws_sub = tid,
            SubCharge::Refunded => self.trace.refund(now, tid),
            _ => {}
        }
    }

    /// Checks the venue clock against the venue's time stamped on a lane answer
    /// to a write (its `result`'s `transactTime`, read as the REST adapter reads
    /// an HTTP body), as [`Gateway::on_response`] does over HTTP: the time the
    /// write's last byte left ([`WsLane::written_at`]) and this read's bound the
    /// offset.
    fn check_lane_clock<W: Wire>(&mut self, w: &mut W, frame: &[u8], now: i64) {
        let Some(lane) = self.ws.as_ref() else { return };
        let Some((_, body)) = lane.api.as_response(frame) else {
            return;
        };
        let id = json::parse(frame)
            .ok()
            .and_then(|v| v.get("id").ok().flatten())
            .and_then(|i| i.as_u64().ok());
        let Some(id) = id else { return };
        let Some(key) = self.ledger.bound(RequestId(WS_BIT | id)) else {
            return;
        };
        let write = self
            .ledger
            .get(key)
            .is_some_and(|e| e.stage != Stage::Query && e.req.kind().is_some_and(|k| k.is_write()));
        // From when its frame's last byte left, not its hand-over to the lane
        // (the frame may have waited in a full send buffer): the venue cannot
        // have stamped it earlier.
        if let Some(sent_ns) = lane.written_at(id).filter(|_| write) {
            self.check_clock_since(w, sent_ns, body, now);
        }
    }

    /// One item the connection reported: an answer (the adapter's verdict, then the
    /// settle rule), a request's fate at a drop (refunded by the session if never
    /// written; Unknown → reconciled), an execution, the open or the drop.
    pub(crate) fn ws_item<'f, W: Wire>(
        &mut self,
        w: &mut W,
        item: Item,
        bytes: &'f [u8],
    ) -> Option<WsIn<'f>> {
        let now = w.now();
        let lane = self.ws.as_mut()?;
        match item {
            Item::Open => {
                // The handshake was written (its charge completed) and answered.
                let tid = core::mem::take(&mut self.trace.ws_connect);
                self.trace.done(now, tid);
                let sub = lane.on_open(w.budget(), now);
                self.trace_own(sub, now);
                None
            }
            Item::Closed(cause) => {
                let tid = core::mem::take(&mut self.trace.ws_connect);
                match lane.connect_refunded() {
                    true => self.trace.refund(now, tid),
                    false => self.trace.done(now, tid),
                }
                lane.on_closed(cause, w.budget(), now);
                None
            }
            Item::Outcome(id, verdict, flight) => {
                let written = flight.is_some();
                if let Some(f) = flight {
                    // Its own flight: never foreign.
                    let _ = w.budget().complete(f, now);
                }
                if lane.sub_req == Some(id) {
                    lane.sub_req = None;
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    match written {
                        true => self.trace.done(now, tid),
                        false => self.trace.refund(now, tid),
                    }
                    return None;
                }
                lane.forget(id);
                let key = self.ledger.unbind(RequestId(WS_BIT | id))?;
                // Never written: the session refunded its ticket.
                match written {
                    true => self.trace.done(now, self.trace.slot(key)),
                    false => self.trace.refund(now, self.trace.slot(key)),
                }
                let ev = self.failed(w, key, verdict == Verdict::Unknown)?;
                Some(WsIn::Event(ev))
            }
            Item::Text(a, b) => {
                let frame = bytes.get(a..b)?;
                // Before the session reads the answer: its usage figures are then
                // mapped on the corrected clock, as over HTTP.
                self.check_lane_clock(w, frame, now);
                let lane = self.ws.as_mut()?;
                let incoming = lane.api.on_frame(frame, w.budget(), now);
                let (id, status, verdict) = match incoming {
                    Ok(LaneIn::Answer {
                        id,
                        status,
                        verdict,
                    }) => (id, status, verdict),
                    Ok(LaneIn::Execution(x)) => {
                        lane.stats.executions += 1;
                        self.seen(x.client_order_id.as_str().as_bytes(), x.state, now);
                        return Some(WsIn::Execution(x));
                    }
                    Ok(LaneIn::TestRequest) => {
                        let c = lane.on_test_request(w.budget(), now);
                        self.trace_own(c, now);
                        return None;
                    }
                    Ok(LaneIn::Revoked(code)) => {
                        lane.on_revoked(code, w.budget(), now);
                        return None;
                    }
                    Ok(LaneIn::Other) => return None,
                    Err(_) => {
                        lane.stats.bad_frames += 1;
                        return None;
                    }
                };
                lane.stats.answers += 1;
                lane.resolve(id, w.budget(), now);
                let verdict = match verdict {
                    Ok(v) => v,
                    Err(adapt::Error::BadHeader { verdict, .. }) => verdict,
                    Err(_) => Verdict::Unknown,
                };
                if lane.test_req == Some(id) {
                    lane.test_req = None;
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    self.trace.done(now, tid);
                    return None;
                }
                if lane.sub_req == Some(id) {
                    self.trace.observed(now, w.budget());
                    self.trace.verdict(now, &verdict);
                    let tid = core::mem::take(&mut self.trace.ws_sub);
                    self.trace.done(now, tid);
                    let c = lane.on_setup_answer(verdict, frame, w.budget(), now);
                    self.trace_own(c, now);
                    return None;
                }
                let key = self.ledger.unbind(RequestId(WS_BIT | id))?;
                self.trace.observed(now, w.budget());
                self.trace.verdict(now, &verdict);
                self.trace.done(now, self.trace.slot(key));
                let (status, body) = lane.api.as_response(frame).unwrap_or((status, &[]));
                let items = match self.ledger.get(key) {
                    Some(e) if e.stage != Stage::Query => items_of(&e.req, lane.api.items()),
                    _ => ArrayVec::new(),
                };
                let r = Response {
                    status,
                    headers: &[],
                    body,
                };
                self.answered(w, key, r, verdict, &items).map(WsIn::Event)
            }
        }
    }
}
