//! The WebSocket lane of a run: the gateway's own WebSocket API connection
//! ([`WsLane`], its [`ergon_io::ws::Session`], driven by [`Gateway::drive_ws`],
//! the code the loop's driver runs) over an in-memory transport
//! ([`ergon_io::ws::Pipe`]), against the emulator's own WebSocket API engine
//! ([`ergon_venue_sim::sansio_ws`]), through a network that loses frames, runs
//! requests and loses their answers, delays them, and drops the connection with
//! requests in flight.
//!
//! TCP does not lose one frame and carry the next: a frame lost before the venue,
//! or an answer lost after the venue ran it, is a connection that died there, so
//! both cut the connection (every request written on it ends Unknown at the
//! gateway: reconciled, never re-sent). The connection also drops at random
//! times. Each connection has a generation: bytes of an older one die with it.
//! The venue does not ping (the gateway's own pings, every 5 s, keep the
//! connection heard); its user data stream's events are delivered like answers.

use std::net::IpAddr;

use ergon_core::{BucketId, Budget, Builder};
use ergon_gateway::shm::ShmEvent;
use ergon_gateway::{
    declare_ws_connects, ws_lane_of, Event, Gateway, Wire, WsApiStart, WsIn, WsLane, SILENT_NS,
};
use ergon_venue_sim::sansio::SansIo;
use ergon_venue_sim::sansio_ws::{pong, ClientFrame, Upgraded, WsAdmitted, WsApiConn, WsReceived};
use ergon_venues::binance_spot::BinanceSpot;

use crate::blind::Blind;
use crate::rng::Rng;

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

/// What the network does with one request frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Runs, answered.
    Delivered,
    /// Lost before the venue: the connection died (cut soon after).
    LostBefore,
    /// Runs; the connection dies before its answer.
    AnswerLost,
    /// Held in the venue's queue, then runs (or is refused past its
    /// recvWindow) and is answered, maybe after the gateway gave up on it.
    Delayed,
    /// Held in the venue's queue; the connection dies before it runs, and it
    /// still runs later (within its recvWindow).
    DelayedCut,
}

impl Fate {
    fn draw(rng: &mut Rng, faults: bool) -> Fate {
        if !faults {
            return Fate::Delivered;
        }
        match rng.next_u64() % 100 {
            0..=79 => Fate::Delivered,
            80..=84 => Fate::LostBefore,
            85..=89 => Fate::AnswerLost,
            90..=95 => Fate::Delayed,
            _ => Fate::DelayedCut,
        }
    }
}

/// A step of the lane's network, scheduled by the run.
pub(crate) enum WsStep {
    /// The gateway's bytes of connection `gen` reach the venue (`after_ban`: it
    /// wrote them after it heard a ban no person cleared).
    Arrive {
        gen: usize,
        bytes: Vec<u8>,
        after_ban: bool,
        written_at: i64,
    },
    /// The venue's bytes of connection `gen` reach the gateway (`stamped`: an
    /// answer stamped with the venue's time, to a request written then).
    Deliver {
        gen: usize,
        bytes: Vec<u8>,
        stamped: Option<i64>,
    },
    /// Connection `gen` dies, for both ends.
    Cut(usize),
    /// The gateway's transport takes bytes again (its send buffer drained).
    Room,
    /// A held request of connection `gen` runs; its answer is sent if `answer`.
    Execute {
        gen: usize,
        admitted: Box<WsAdmitted>,
        answer: bool,
        /// Written blind to the venue clock's step ([`Blind`]), at this time.
        blind: bool,
        written_at: i64,
    },
}

/// The venue's end of the lane and the network's state.
pub(crate) struct Lane {
    rng: Rng,
    faults: bool,
    ip: IpAddr,
    /// The venue's end of each connection, by generation - 1 (None: the
    /// upgrade is not read yet, or was refused).
    conns: Vec<Option<Box<WsApiConn>>>,
    /// Connection generations the venue saw end.
    ended: Vec<bool>,
    /// The gateway's transport is up on the newest generation.
    client_up: bool,
    /// When the last bytes each way were scheduled to arrive: TCP delivers a
    /// connection's bytes in order, so a later write never overtakes an
    /// earlier one (a frame written in two parts stays whole).
    up_at: i64,
    down_at: i64,
    /// `session.logon` requests that reached the venue.
    pub(crate) logons: u64,
    /// Order requests that reached the venue without a signature (the
    /// connection's logon authenticates them).
    pub(crate) unsigned_orders: u64,
}

/// The lane's connects bucket, declared as the daemon's start declares it
/// ([`declare_ws_connects`]).
pub(crate) fn declare(b: &mut Builder) -> BucketId {
    declare_ws_connects(b).expect("the connects bucket")
}

/// The gateway's WebSocket API lane for `acct` on an in-memory transport, built
/// as the daemon's start builds it ([`ws_lane_of`]).
pub(crate) fn lane(acct: &BinanceSpot, connects: BucketId, budget: &Budget, seed: u64) -> WsLane {
    let at = WsApiStart {
        addr: "127.0.0.1:9".parse().expect("an address"),
        host: "sim".into(),
        path: "/ws-api/v3".into(),
        stream: true,
        silent_ns: SILENT_NS,
    };
    let mut lane = ws_lane_of(acct, 1024, &at, connects, budget, None, seed)
        .expect("lane")
        .expect("Binance Spot has a WebSocket API");
    lane.use_pipe();
    lane
}

impl Lane {
    /// The network of a run from `seed` (`faults` off: nothing is lost).
    pub(crate) fn new(seed: u64, faults: bool, ip: IpAddr) -> Lane {
        Lane {
            rng: Rng::new(seed),
            faults,
            ip,
            conns: Vec::new(),
            ended: Vec::new(),
            client_up: false,
            up_at: 0,
            down_at: 0,
            logons: 0,
            unsigned_orders: 0,
        }
    }

    /// A random drop at some time in `0..span` from `now`, if faults are on.
    pub(crate) fn drop_at(&mut self, now: i64, span: i64) -> Option<i64> {
        match self.faults {
            true => Some(now + self.rng.range(0, span)),
            false => None,
        }
    }

    /// Latency of one leg, 0.2 to 3 ms.
    fn leg(&mut self) -> i64 {
        self.rng.range(200_000, 3 * MS)
    }

    /// Drives the gateway's lane once (what it reported goes to `take`), then
    /// sends what it wrote on its way.
    pub(crate) fn drive<W: Wire>(
        &mut self,
        gw: &mut Gateway<BinanceSpot>,
        w: &mut W,
        ban_heard: bool,
        take: &mut dyn FnMut(Event<'static>),
        sched: &mut Vec<(i64, WsStep)>,
    ) {
        let now = w.now();
        gw.drive_ws(w, &mut |got| {
            if let Some(e) = match got {
                WsIn::Event(e) => detached(&e),
                _ => None,
            } {
                take(e);
            }
        });
        let Some(pipe) = gw.ws_api_mut().and_then(WsLane::pipe_mut) else {
            return;
        };
        match (pipe.is_connected(), self.client_up) {
            (true, false) => {
                self.conns.push(None);
                self.ended.push(false);
                self.client_up = true;
            }
            (false, true) => {
                // The gateway gave the connection up (a deadline, silence): its
                // socket closes, and the venue sees it end.
                self.client_up = false;
                let gen = self.conns.len();
                let t = now + self.leg();
                sched.push((t, WsStep::Cut(gen)));
            }
            _ => {}
        }
        let bytes = pipe.take_written();
        // One time in ten the send buffer fills: the next frames are written
        // in part or not at all until it drains 1-50 ms later (a drop before
        // then leaves them unwritten: refunded, sent again).
        if self.faults && !bytes.is_empty() && self.rng.chance(100) {
            let room = self.rng.range(0, 300) as usize;
            pipe.set_room(room);
            let t = now + self.rng.range(MS, 50 * MS);
            sched.push((t, WsStep::Room));
        }
        if !bytes.is_empty() && self.client_up {
            let gen = self.conns.len();
            let t = (now + self.leg()).max(self.up_at);
            self.up_at = t;
            sched.push((
                t,
                WsStep::Arrive {
                    gen,
                    bytes,
                    after_ban: ban_heard,
                    written_at: now,
                },
            ));
        }
    }

    /// One step of the lane's network at our `now` and the venue's `now_ms`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn step(
        &mut self,
        s: WsStep,
        gw: &mut Gateway<BinanceSpot>,
        venue: &mut SansIo,
        (now, now_ms): (i64, i64),
        ban_heard: &mut bool,
        blind: &mut Blind,
        sched: &mut Vec<(i64, WsStep)>,
        violations: &mut Vec<String>,
    ) {
        match s {
            WsStep::Arrive {
                gen,
                bytes,
                after_ban,
                written_at,
            } => {
                let at = Arrival {
                    now,
                    now_ms,
                    written_at,
                    after_ban,
                };
                self.arrive(gen, &bytes, at, venue, blind, sched, violations)
            }
            WsStep::Deliver {
                gen,
                bytes,
                stamped,
            } => {
                if gen != self.conns.len() || !self.client_up {
                    return;
                }
                // A ban's 418 reaches the gateway with this frame.
                *ban_heard |= contains(&bytes, b"\"status\":418");
                if stamped.is_some_and(|w| blind.dates(w, now)) {
                    blind.seen(now);
                }
                if let Some(p) = gw.ws_api_mut().and_then(WsLane::pipe_mut) {
                    p.deliver(&bytes);
                }
            }
            WsStep::Room => {
                if let Some(p) = gw.ws_api_mut().and_then(WsLane::pipe_mut) {
                    p.set_room(usize::MAX);
                }
            }
            WsStep::Cut(gen) => {
                self.end(gen, venue);
                if gen == self.conns.len() && self.client_up {
                    if let Some(p) = gw.ws_api_mut().and_then(WsLane::pipe_mut) {
                        p.cut();
                    }
                }
            }
            WsStep::Execute {
                gen,
                admitted,
                answer,
                blind: was_blind,
                written_at,
            } => {
                let Some(c) = self.conns.get_mut(gen - 1).and_then(Option::as_mut) else {
                    venue.ws_api_drop_unexecuted(*admitted);
                    return;
                };
                let frame = venue.ws_api_execute(c, *admitted, now_ms);
                let stamped = seen_by(&frame, was_blind, written_at, blind);
                if answer {
                    self.send(gen, frame, now, stamped, sched);
                }
                self.events(gen, now, sched);
            }
        }
    }

    /// The venue's end of `gen` ends (its subscriptions with it).
    fn end(&mut self, gen: usize, venue: &mut SansIo) {
        if gen == 0 || self.ended[gen - 1] {
            return;
        }
        self.ended[gen - 1] = true;
        if let Some(c) = self.conns[gen - 1].as_mut() {
            venue.ws_api_close(c);
        }
    }

    /// Sends the venue's `frame` on `gen`, unless that connection ended.
    fn send(
        &mut self,
        gen: usize,
        frame: Vec<u8>,
        now: i64,
        stamped: Option<i64>,
        sched: &mut Vec<(i64, WsStep)>,
    ) {
        if self.ended[gen - 1] {
            return;
        }
        let t = (now + self.leg()).max(self.down_at);
        self.down_at = t;
        let bytes = frame;
        sched.push((
            t,
            WsStep::Deliver {
                gen,
                bytes,
                stamped,
            },
        ));
    }

    /// Sends the user data stream's events pushed to `gen`.
    fn events(&mut self, gen: usize, now: i64, sched: &mut Vec<(i64, WsStep)>) {
        let frames = match self.conns.get(gen - 1).and_then(Option::as_ref) {
            Some(c) => c.events(),
            None => return,
        };
        for f in frames {
            self.send(gen, f, now, None, sched);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn arrive(
        &mut self,
        gen: usize,
        bytes: &[u8],
        at: Arrival,
        venue: &mut SansIo,
        blind: &mut Blind,
        sched: &mut Vec<(i64, WsStep)>,
        violations: &mut Vec<String>,
    ) {
        let Arrival {
            now,
            now_ms,
            written_at,
            after_ban,
        } = at;
        let was_blind = blind.blind(written_at, now);
        if self.ended[gen - 1] {
            return;
        }
        if self.conns[gen - 1].is_none() {
            // The upgrade request: the first bytes of a connection.
            match venue.ws_api_upgrade(bytes, self.ip, now_ms) {
                Upgraded::Open(c, answer) => {
                    self.conns[gen - 1] = Some(c);
                    self.send(gen, answer, now, None, sched);
                }
                Upgraded::Refused(answer) => {
                    // The upgrade charges the IP's weight too: its 429 or 418
                    // (an HTTP answer) is the step's doing if written blind.
                    for status in [418, 429] {
                        if was_blind && answer.starts_with(format!("HTTP/1.1 {status} ").as_bytes())
                        {
                            blind.refused(status, false);
                        }
                    }
                    self.send(gen, answer, now, None, sched);
                    let t = now + 5 * MS;
                    sched.push((t, WsStep::Cut(gen)));
                }
            }
            return;
        }
        let frames = match self.conns[gen - 1].as_mut() {
            Some(c) => c.read(bytes),
            None => return,
        };
        for f in frames {
            let text = match f {
                ClientFrame::Ping(p) => {
                    self.send(gen, pong(&p), now, None, sched);
                    continue;
                }
                ClientFrame::Close => {
                    let t = now + self.leg();
                    sched.push((t, WsStep::Cut(gen)));
                    return;
                }
                ClientFrame::Text(t) => t,
            };
            self.logons += u64::from(contains(&text, b"\"session.logon\""));
            let order = contains(&text, b"\"order.");
            self.unsigned_orders += u64::from(order && !contains(&text, b"\"signature\""));
            if after_ban && order {
                violations.push(format!(
                    "t={now}: an order request written over the WebSocket API after the gateway heard a ban, before a person cleared it"
                ));
            }
            let fate = Fate::draw(&mut self.rng, self.faults);
            if fate == Fate::LostBefore {
                // This frame and every later one die with the connection.
                let t = now + self.rng.range(MS, 200 * MS);
                sched.push((t, WsStep::Cut(gen)));
                self.end(gen, venue);
                return;
            }
            let Some(c) = self.conns[gen - 1].as_mut() else {
                return;
            };
            let admitted = match venue.ws_api_admit(c, &text, now_ms) {
                WsReceived::Answer { frame, close } => {
                    let stamped = seen_by(&frame, was_blind, written_at, blind);
                    self.send(gen, frame, now, stamped, sched);
                    if close {
                        let t = now + 5 * MS;
                        sched.push((t, WsStep::Cut(gen)));
                        self.end(gen, venue);
                        return;
                    }
                    continue;
                }
                WsReceived::Run(a) => a,
            };
            match fate {
                Fate::AnswerLost => {
                    let frame = venue.ws_api_execute(c, admitted, now_ms);
                    seen_by(&frame, was_blind, written_at, blind);
                    self.events(gen, now, sched);
                    let t = now + self.leg();
                    sched.push((t, WsStep::Cut(gen)));
                    self.end(gen, venue);
                    return;
                }
                Fate::Delayed | Fate::DelayedCut => {
                    let t = now + self.rng.range(10 * MS, 8 * SEC);
                    let answer = fate == Fate::Delayed;
                    sched.push((
                        t,
                        WsStep::Execute {
                            gen,
                            admitted: Box::new(admitted),
                            answer,
                            blind: was_blind,
                            written_at,
                        },
                    ));
                    if !answer {
                        let t = now + self.leg();
                        sched.push((t, WsStep::Cut(gen)));
                    }
                }
                Fate::Delivered | Fate::LostBefore => {
                    let frame = venue.ws_api_execute(c, admitted, now_ms);
                    let stamped = seen_by(&frame, was_blind, written_at, blind);
                    self.send(gen, frame, now, stamped, sched);
                    self.events(gen, now, sched);
                }
            }
        }
    }

    /// The gateway's process died: its socket closes with it (the venue sees
    /// the connection end a leg later, and nothing reaches the dead process);
    /// the next life's lane opens a connection of its own.
    pub(crate) fn process_died(&mut self, now: i64, sched: &mut Vec<(i64, WsStep)>) {
        if self.client_up {
            self.client_up = false;
            let t = now + self.leg();
            sched.push((t, WsStep::Cut(self.conns.len())));
        }
    }

    /// Cuts the newest connection now (a random drop), if the gateway's is up.
    pub(crate) fn random_drop(&mut self, now: i64, sched: &mut Vec<(i64, WsStep)>) {
        if self.client_up {
            sched.push((now, WsStep::Cut(self.conns.len())));
        }
    }
}

/// When and how one write of the gateway reached the venue.
#[derive(Clone, Copy)]
struct Arrival {
    now: i64,
    now_ms: i64,
    written_at: i64,
    /// Written after the gateway heard a ban no person cleared.
    after_ban: bool,
}

/// The venue's answer `frame` to a request written at `written_at`, blind to
/// its clock's step (`was_blind`) or not: a refusal of a blind one is counted
/// ([`Blind`]); if it is stamped with the venue's time (an order's or a
/// cancel's `result.transactTime`, what the gateway re-anchors on), the
/// request's write time, for [`Blind::dates`] when it reaches the gateway.
fn seen_by(frame: &[u8], was_blind: bool, written_at: i64, blind: &mut Blind) -> Option<i64> {
    if was_blind {
        for status in [418, 429] {
            if contains(frame, format!("\"status\":{status},").as_bytes()) {
                blind.refused(status, contains(frame, b"-1015"));
            }
        }
    }
    let stamped = contains(frame, b"\"status\":200,") && contains(frame, b"\"transactTime\"");
    stamped.then_some(written_at)
}

/// `e` without the answer's bytes (neither the checks nor the process's
/// bookkeeping read them), to hand on after the lane's drive; None for what
/// neither hears (an open-orders answer, a protection's). The shared-memory
/// codec's own map of the variants ([`ShmEvent::of`], then [`ShmEvent::event`]
/// with no body), so that one map serves both.
fn detached(e: &Event<'_>) -> Option<Event<'static>> {
    match e {
        Event::OpenOrders { .. } | Event::Protection { .. } | Event::ProtectionFired => None,
        _ => ShmEvent::of(e).0.event(&[]),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
