//! A client-side harness: one loop, one pool, requests sent one at a time and run
//! to their end, with a guard timer so a bug fails the test instead of hanging it.

use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
use ergon_io::core::{BucketId, Budget, Class, Flight, Part, Spec};
use ergon_io::event_loop::{Context, EventLoop, LoopConfig};
use ergon_io::http::Request;
use ergon_venues::endpoint::Prepared;
use ergon_venues::response::Response;
use std::net::SocketAddr;

pub const SEC: i64 = 1_000_000_000;
const GUARD: u64 = u64::MAX >> 2;

/// How one request ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Response { status: u16, body: Vec<u8> },
    Error { sent: SentKind, error: Error },
}

impl Answer {
    /// A 200 response with `body`.
    pub fn ok(body: &[u8]) -> Answer {
        Answer::Response {
            status: 200,
            body: body.to_vec(),
        }
    }
}

/// `Sent` without the ticket or flight (those went back to the budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SentKind {
    No,
    Maybe,
}

pub struct Driver {
    pub lp: EventLoop,
    pub pool: PoolId,
    pub requests: BucketId,
    pub connects: BucketId,
    /// What `on_resent` said for the last request sent with [`Driver::send`]:
    /// the extra copies libcurl wrote (0 for the native client).
    pub resent: u32,
    /// The id of the last request [`Driver::send`] had accepted.
    pub last_id: Option<RequestId>,
}

impl Driver {
    /// A loop with one pool to `addr`; `tweak` adjusts the pool before it is added.
    pub fn new(addr: SocketAddr, tweak: impl FnOnce(&mut PoolConfig)) -> Driver {
        Driver::with_config(addr, LoopConfig::default(), tweak)
    }

    pub fn with_config(
        addr: SocketAddr,
        cfg: LoopConfig,
        tweak: impl FnOnce(&mut PoolConfig),
    ) -> Driver {
        let mut b = Budget::builder();
        let requests = b
            .add("requests", Spec::sliding(1_000_000, 60 * SEC, 60))
            .unwrap();
        let connects = b
            .add("connects", Spec::sliding(1_000_000, 60 * SEC, 60))
            .unwrap();
        let budget = b.build(ergon_io::clock::now_ns()).unwrap();
        let mut lp = EventLoop::new(cfg, budget).unwrap();
        let mut pc = PoolConfig::new(addr, addr.to_string());
        pc.connect_parts = vec![Part::new(connects, 1)];
        tweak(&mut pc);
        let pool = lp.add_pool(pc).unwrap();
        Driver {
            lp,
            pool,
            requests,
            connects,
            resent: 0,
            last_id: None,
        }
    }

    /// Sends `req` as soon as a connection is ready and runs the loop until it ends.
    /// Returns the answer and how many times the client said Busy first.
    pub fn send(&mut self, req: &Request<'_>, deadline_ns: i64) -> (Answer, u64) {
        self.send_one(Req::Plain(req), deadline_ns)
    }

    /// [`Driver::send`] of a prepared request (`Context::request_prepared`).
    pub fn send_prepared(&mut self, req: &Prepared, deadline_ns: i64) -> (Answer, u64) {
        self.send_one(Req::Prepared(req), deadline_ns)
    }

    fn send_one(&mut self, req: Req<'_, '_>, deadline_ns: i64) -> (Answer, u64) {
        let mut h = One {
            pool: self.pool,
            parts: [Part::new(self.requests, 1)],
            req,
            deadline_ns,
            id: None,
            answer: None,
            busy: 0,
            armed: false,
            resent: 0,
        };
        self.lp.run(&mut h).unwrap();
        self.resent = h.resent;
        self.last_id = h.id;
        let answer = h
            .answer
            .expect("the guard timer fired: the request never ended");
        (answer, h.busy)
    }

    /// Runs the loop until `cond` holds (checked every turn), bounded by the guard.
    pub fn run_until(&mut self, cond: impl FnMut(&mut Context<'_>) -> bool) {
        struct Until<F>(F, bool);
        impl<F: FnMut(&mut Context<'_>) -> bool> ClientHandler for Until<F> {
            fn on_response(
                &mut self,
                _: &mut Context<'_>,
                _: RequestId,
                _: Response<'_>,
                _: Flight,
            ) {
                panic!("no request was sent");
            }
            fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
                panic!("no request was sent");
            }
            fn on_timer(&mut self, _cx: &mut Context<'_>, token: u64) {
                assert_ne!(
                    token, GUARD,
                    "the guard timer fired: the condition never held"
                );
            }
            fn on_turn(&mut self, cx: &mut Context<'_>) {
                if !self.1 {
                    self.1 = true;
                    let at = cx.now() + 20 * SEC;
                    cx.set_timer(GUARD, at).unwrap();
                }
                if (self.0)(cx) {
                    cx.cancel_timer(GUARD);
                    cx.stop();
                }
            }
        }
        self.lp.run(&mut Until(cond, false)).unwrap();
    }

    /// Runs until at least one connection of the pool is idle.
    pub fn wait_ready(&mut self) {
        let pool = self.pool;
        self.run_until(|cx| cx.client().idle(pool) > 0);
    }
}

/// What [`One`] sends.
#[derive(Clone, Copy)]
enum Req<'r, 'a> {
    Plain(&'r Request<'a>),
    Prepared(&'r Prepared),
}

struct One<'r, 'a> {
    pool: PoolId,
    parts: [Part; 1],
    req: Req<'r, 'a>,
    deadline_ns: i64,
    id: Option<RequestId>,
    answer: Option<Answer>,
    busy: u64,
    armed: bool,
    resent: u32,
}

impl ClientHandler for One<'_, '_> {
    fn on_resent(&mut self, _: &mut Context<'_>, id: RequestId, copies: u32) {
        assert_eq!(Some(id), self.id);
        assert!(self.answer.is_none(), "on_resent comes before the answer");
        self.resent += copies;
    }

    fn on_response(
        &mut self,
        cx: &mut Context<'_>,
        id: RequestId,
        r: Response<'_>,
        flight: Flight,
    ) {
        assert_eq!(Some(id), self.id);
        let now = cx.now();
        cx.budget().complete(flight, now).unwrap();
        self.answer = Some(Answer::Response {
            status: r.status,
            body: r.body.to_vec(),
        });
        cx.cancel_timer(GUARD);
        cx.stop();
    }

    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, error: Error) {
        assert_eq!(Some(id), self.id);
        let now = cx.now();
        let sent = match sent {
            Sent::No(t) => {
                cx.budget().refund(t, now).unwrap();
                SentKind::No
            }
            Sent::Maybe(f) => {
                cx.budget().complete(f, now).unwrap();
                SentKind::Maybe
            }
        };
        self.answer = Some(Answer::Error { sent, error });
        cx.cancel_timer(GUARD);
        cx.stop();
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
        if token == GUARD {
            cx.stop();
        }
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if !self.armed {
            self.armed = true;
            cx.set_timer(GUARD, now + 20 * SEC).unwrap();
        }
        if self.id.is_some() || self.answer.is_some() {
            return;
        }
        let ticket = cx
            .budget()
            .try_charge(&self.parts, Class::Normal, now)
            .unwrap();
        let deadline = now + self.deadline_ns;
        let sent = match self.req {
            Req::Plain(r) => cx.request(self.pool, r, ticket, deadline),
            Req::Prepared(p) => cx.request_prepared(self.pool, p, ticket, deadline),
        };
        match sent {
            Ok(id) => self.id = Some(id),
            Err(refused) => {
                self.busy += 1;
                let t = refused.into_ticket();
                cx.budget().refund(t, now).unwrap();
            }
        }
    }
}

/// A POST whose body names it, so a server can count it.
pub fn order(body: &str) -> Request<'_> {
    Request {
        method: "POST",
        target: "/api/v3/order",
        headers: &[("Content-Type", "application/x-www-form-urlencoded")],
        body: body.as_bytes(),
    }
}
