//! The network between the gateway and the venue, for every profile: each
//! request the gateway wrote meets its [`Fate`] (lost before the venue, run with
//! its answer lost, held past its deadline, queued then cut, 5xx after the run
//! or without it, never written), each leg takes 0.2 to 3 ms, and an answer
//! reaches the gateway unless the request's deadline comes first.

use ergon_io::client::Sent;
use ergon_venue_sim::http::Response as SimResponse;
use ergon_venue_sim::sansio::Received;
use ergon_venues::response::{Header, Response};

use super::adapter::Adapter;
use super::{Sim, Step, IP, MS, SEC};
use crate::net::Fate;

impl<A: Adapter> Sim<A> {
    /// Latency of one leg, 0.2 to 3 ms.
    pub(crate) fn leg(&mut self) -> i64 {
        self.net.rng.range(200_000, 3 * MS)
    }

    /// Schedules what the network does with each request written this step.
    pub(crate) fn schedule_fresh(&mut self) {
        for i in std::mem::take(&mut self.net.fresh) {
            self.out.writes += 1;
            if self.ban_heard && self.net.outs[i].fate != Fate::NotWritten {
                let t = self.net.now;
                self.out.violations.push(format!(
                    "t={t}: a request written after the gateway heard a ban, before a person cleared it"
                ));
            }
            let now = self.net.now;
            self.digest.word(self.net.outs[i].fate as u64);
            self.digest.bytes(&self.net.outs[i].raw);
            match self.net.outs[i].fate {
                Fate::NotWritten => {
                    let t = now + self.leg();
                    self.at(t, Step::Fail(i));
                }
                Fate::LostBefore => {
                    let t = now + self.net.rng.range(MS, 500 * MS);
                    self.at(t, Step::Fail(i));
                }
                _ => {
                    let t = now + self.leg();
                    self.at(t, Step::Arrive(i));
                }
            }
        }
    }

    /// An answer leaves the venue now: it reaches the gateway unless the request's
    /// deadline comes first (then the transport fails it there).
    pub(crate) fn answer(&mut self, i: usize, r: SimResponse) {
        let t = self.net.now + self.leg();
        let deadline = self.net.outs[i].deadline;
        match t > deadline {
            true => self.at(deadline.max(self.net.now), Step::Fail(i)),
            false => self.at(t, Step::Reply(i, r)),
        }
    }

    /// Request `i` reaches the venue: admitted or refused there, then run (or
    /// not) and answered (or not) as its fate says.
    pub(crate) fn arrive(&mut self, i: usize) {
        self.net.outs[i].arrived_at = Some(self.net.now);
        let now_ms = self.venue_ms();
        let fate = self.net.outs[i].fate;
        let a = match self.venue.admit(&self.net.outs[i].raw, IP, now_ms) {
            Received::Answer(r) => return self.answer(i, r),
            Received::Run(a) => a,
        };
        match fate {
            Fate::Queued => {
                let t = self.net.now + self.net.rng.range(10 * MS, 8 * SEC);
                self.at(t, Step::Execute(i, Box::new(a)));
            }
            Fate::QueuedCut => {
                let t = self.net.now + self.net.rng.range(10 * MS, 4 * SEC);
                self.at(t, Step::Execute(i, Box::new(a)));
                let cut = self.net.now + self.leg();
                self.at(cut, Step::Fail(i));
            }
            Fate::AnswerLost => {
                self.venue.execute(a, now_ms);
                let t = self.net.now + self.leg();
                self.at(t, Step::Fail(i));
            }
            Fate::ErrorAfterRun => {
                self.venue.execute(a, now_ms);
                let r = self.venue.server_error(true);
                self.answer(i, r);
            }
            Fate::ErrorNoRun => {
                self.venue.drop_unexecuted(a);
                let r = self.venue.server_error(false);
                self.answer(i, r);
            }
            _ => {
                let r = self.venue.execute(a, now_ms);
                self.answer(i, r);
            }
        }
    }

    /// The venue's answer `r` to request `i` reaches the gateway (unless the
    /// transport reported on it already).
    pub(crate) fn reply(&mut self, i: usize, r: &SimResponse) {
        let o = &mut self.net.outs[i];
        if o.reported {
            return;
        }
        o.reported = true;
        let (id, flight) = (o.id, o.flight.take().expect("a written request"));
        self.ban_heard |= r.status == A::BAN_STATUS;
        self.digest.word(u64::from(r.status));
        self.digest.bytes(r.body.as_bytes());
        self.see_step(i, r);
        let mut hs: Vec<(String, String)> = r.headers.clone();
        hs.push(("Content-Type".into(), r.content_type.into()));
        let headers: Vec<Header<'_>> = hs
            .iter()
            .map(|(k, v)| Header {
                name: k.as_bytes(),
                value: v.as_bytes(),
            })
            .collect();
        let resp = Response {
            status: r.status,
            headers: &headers,
            body: r.body.as_bytes(),
        };
        if let Some(e) = self.gw.on_response(&mut self.net, id, resp, flight) {
            self.on_event(&e);
        }
    }

    /// The transport fails request `i` (never written, or its answer lost).
    pub(crate) fn fail(&mut self, i: usize) {
        let o = &mut self.net.outs[i];
        if o.reported {
            return;
        }
        o.reported = true;
        let sent = match (o.ticket.take(), o.flight.take()) {
            (Some(t), _) => Sent::No(t),
            (None, Some(f)) => Sent::Maybe(f),
            (None, None) => return,
        };
        let id = o.id;
        if let Some(e) = self.gw.on_error(&mut self.net, id, sent) {
            self.on_event(&e);
        }
    }

    /// Tracks what the gateway could know of the venue clock's step (`Blind`)
    /// as answer `i` reaches it.
    fn see_step(&mut self, i: usize, r: &SimResponse) {
        let o = &self.net.outs[i];
        if o.arrived_at
            .is_some_and(|t| self.blind.blind(o.written_at, t))
        {
            self.blind.refused(r.status, A::order_limited(&r.body));
        }
        if A::stamped(&r.body) && self.blind.dates(o.written_at, self.net.now) {
            self.blind.seen(self.net.now);
        }
    }
}
