//! The event loop: the thin epoll shell on one thread (optionally pinned to a
//! CPU) that drives the client's transports, timers, the budget's idle ticks and
//! the caller's handler.
//!
//! Drive invariant, one turn: wait in epoll (not at all in busy-poll mode, else
//! until the earliest of the client's [`poll_timeout`](crate::pool::Pool::poll_timeout),
//! the timers and [`Budget::poll_timeout`]) → read the clock once, that is `now`
//! for the whole turn → handle every ready descriptor → fire due timers → let the
//! client expire deadlines and reopen connections → [`Budget::tick`] if the turn
//! was idle or the budget's deadline is reached → the handler's
//! [`on_turn`](ClientHandler::on_turn). After every one of those inputs the loop
//! drains the client's outputs (responses, failures, connects) into the handler
//! until none is left, so a failure found inside a handler call (a write error in
//! [`Context::request`]) reaches the handler as soon as that call returns, and no
//! handler call ever runs while the client is borrowed.
//!
//! Seams for what plugs in later: [`EventLoop::watch_fd`] (or
//! [`Context::watch_fd`] from a handler) adds a descriptor (the eventfd of the
//! cross-thread boundary) whose readiness reaches [`ClientHandler::on_fd`];
//! [`EventLoop::registry`] lends the loop's epoll to a transport the handler owns
//! (a [`WsClient`](crate::ws::WsClient)'s sockets), whose readiness reaches
//! [`ClientHandler::on_fd`] too; [`ClientHandler::on_turn`] and
//! [`ClientHandler::before_park`] run every turn and before blocking.
//!
//! Nothing here allocates after [`EventLoop::new`] and [`EventLoop::add_pool`].

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::raw::c_int;

use arrayvec::ArrayVec;
use ergon_core::Budget;

use crate::handler::{epoll_error, watch, Ctl, FD_BIT};
use crate::http::Headers;
use crate::pool::{PoolConfig, PoolId};
use crate::transport::{Client, Output};
use crate::{clock, sys};

pub use crate::handler::{
    ClientHandler, Context, Interest, LoopError, Readiness, Registry, MAX_TIMERS,
};
pub use crate::sys::{allowed_cpus, current_cpu};

/// How the loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// Pin the loop thread to this CPU in [`EventLoop::run`] (and verify it runs
    /// there). None leaves the thread where the OS puts it.
    pub cpu: Option<usize>,
    /// Never sleep: poll epoll with a zero timeout every turn. Burns the CPU, saves
    /// the wake-up latency.
    pub busy_poll: bool,
    /// Events taken from epoll per turn.
    pub max_events: usize,
    /// How often an idle loop calls [`Budget::tick`], and the shortest gap between
    /// two ticks.
    pub idle_tick_ns: i64,
    /// Longest a parked loop sleeps with nothing due.
    pub max_park_ns: i64,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            cpu: None,
            busy_poll: false,
            max_events: 64,
            idle_tick_ns: 1_000_000,
            max_park_ns: 100_000_000,
        }
    }
}

/// The loop: owns the epoll instance, the client and the budget.
#[derive(Debug)]
pub struct EventLoop {
    cfg: LoopConfig,
    client: Client,
    budget: Budget,
    ctl: Ctl,
    events: Vec<libc::epoll_event>,
    now: i64,
    last_tick: i64,
    /// The next wait polls instead of blocking (the first turn of a run: the
    /// handler has not had a turn yet).
    poll_next: bool,
    /// The loop's epoll instance (the client holds its raw descriptor); closed
    /// when the loop drops, after the client's sockets (fields drop in order).
    epoll: OwnedFd,
}

impl EventLoop {
    /// A loop driving `budget`, built on the [`clock`].
    pub fn new(cfg: LoopConfig, budget: Budget) -> Result<Self, LoopError> {
        let epoll = sys::epoll_create().map_err(epoll_error)?;
        let now = clock::now_ns();
        Ok(EventLoop {
            cfg,
            client: Client::new(epoll.as_raw_fd()),
            budget,
            ctl: Ctl {
                stop: false,
                timers: ArrayVec::new(),
                cpu: None,
            },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; cfg.max_events.max(1)],
            now,
            last_tick: now,
            poll_next: true,
            epoll,
        })
    }

    /// Adds a pool; its connections open on the next turns, each connect charged.
    pub fn add_pool(&mut self, cfg: PoolConfig) -> Result<PoolId, LoopError> {
        self.client.add_pool(cfg, self.now).map_err(LoopError::Pool)
    }

    /// Watches `fd` (level-triggered) for `interest`; each turn it is ready,
    /// [`ClientHandler::on_fd`] gets `token` and the [`Readiness`]. The caller keeps
    /// owning `fd` and calls [`unwatch_fd`](Self::unwatch_fd) before closing it.
    /// `token` must be below 2^63. Handlers do the same through
    /// [`Context::watch_fd`].
    pub fn watch_fd(&mut self, fd: c_int, token: u64, interest: Interest) -> Result<(), LoopError> {
        watch(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd,
            token,
            interest,
        )
    }

    /// Changes what a watched `fd` is watched for.
    pub fn rewatch_fd(
        &mut self,
        fd: c_int,
        token: u64,
        interest: Interest,
    ) -> Result<(), LoopError> {
        watch(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_MOD,
            fd,
            token,
            interest,
        )
    }

    /// Stops watching `fd`.
    pub fn unwatch_fd(&mut self, fd: c_int) -> Result<(), LoopError> {
        sys::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, 0, 0).map_err(epoll_error)
    }

    /// The loop's epoll for a transport the handler owns (a
    /// [`WsClient`](crate::ws::WsClient), see [`Registry`]): the loop watches its
    /// sockets. Fails only if no descriptor is left.
    pub fn registry(&self) -> Result<Registry, LoopError> {
        Registry::new(self.epoll.as_raw_fd())
    }

    /// The budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The budget, to change between runs.
    pub fn budget_mut(&mut self) -> &mut Budget {
        &mut self.budget
    }

    /// The client (counters, idle connections).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The time of the last turn.
    pub fn now(&self) -> i64 {
        self.now
    }

    /// The CPU the loop is pinned to and was verified on, once [`run`](Self::run)
    /// started with [`LoopConfig::cpu`] set.
    pub fn cpu(&self) -> Option<usize> {
        self.ctl.cpu
    }

    /// Pins the calling thread (per [`LoopConfig::cpu`]), then runs turns until the
    /// handler calls [`Context::stop`].
    pub fn run<H: ClientHandler + ?Sized>(&mut self, h: &mut H) -> Result<(), LoopError> {
        if let Some(cpu) = self.cfg.cpu {
            self.ctl.cpu = Some(pin_current_thread(cpu)?);
        }
        self.ctl.stop = false;
        self.poll_next = true;
        while !self.ctl.stop {
            self.turn(h)?;
        }
        Ok(())
    }

    /// One turn (see the module doc for its order).
    pub fn turn<H: ClientHandler + ?Sized>(&mut self, h: &mut H) -> Result<(), LoopError> {
        // The budget's next deadline, read once: it parks the loop and, after the
        // wait, says whether the turn ticks the budget.
        let mut budget_next = None;
        let timeout = if self.cfg.busy_poll || self.ctl.stop || core::mem::take(&mut self.poll_next)
        {
            0
        } else {
            let budget = self.budget.poll_timeout(self.now);
            budget_next = Some(budget);
            let next = [
                self.client.poll_timeout(),
                self.ctl.timers.iter().map(|t| t.1).min(),
                self.budget_deadline(budget),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(i64::MAX);
            let wait = next.saturating_sub(self.now).clamp(0, self.cfg.max_park_ns);
            let park = wait > 0
                && h.before_park(&mut Context::new(
                    &mut self.client,
                    &mut self.budget,
                    &mut self.ctl,
                    self.now,
                ));
            if park {
                // Round up: waking early would only spin.
                ((wait + 999_999) / 1_000_000) as c_int
            } else {
                0
            }
        };
        let n = sys::epoll_wait(self.epoll.as_raw_fd(), &mut self.events, timeout)
            .map_err(epoll_error)?;
        self.handle(h, n, clock::now_ns(), budget_next);
        Ok(())
    }

    /// One turn at the caller's `now` instead of the [`clock`]'s: epoll is polled
    /// without waiting, then the turn runs as [`turn`](Self::turn) does. For a
    /// driver that owns time (a test that jumps to a deadline, a replay). `now`
    /// is on the loop's clock; one earlier than the last turn's counts as the
    /// last turn's (time never runs backwards here).
    pub fn turn_at<H: ClientHandler + ?Sized>(
        &mut self,
        h: &mut H,
        now: i64,
    ) -> Result<(), LoopError> {
        self.poll_next = false;
        let n =
            sys::epoll_wait(self.epoll.as_raw_fd(), &mut self.events, 0).map_err(epoll_error)?;
        self.handle(h, n, now.max(self.now), None);
        Ok(())
    }

    /// The turn after the wait: `n` ready descriptors, at `now`; `budget_next` is
    /// the budget's deadline if the wait was computed from it.
    fn handle<H: ClientHandler + ?Sized>(
        &mut self,
        h: &mut H,
        n: usize,
        now: i64,
        budget_next: Option<Option<i64>>,
    ) {
        self.now = now;
        for k in 0..n {
            let ev = self.events[k];
            let (token, bits) = (ev.u64, ev.events);
            if token & FD_BIT != 0 {
                h.on_fd(
                    &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                    token & !FD_BIT,
                    Readiness(bits),
                );
            } else {
                self.client.handle_event(token, bits, &mut self.budget, now);
            }
            self.dispatch(h, now);
        }
        // Timers due now; one set again for now fires next turn, not in a loop here.
        let mut due = self.ctl.timers.len();
        while due > 0 {
            due -= 1;
            let Some(i) = self.ctl.timers.iter().position(|t| t.1 <= now) else {
                break;
            };
            let (token, _) = self.ctl.timers.swap_remove(i);
            h.on_timer(
                &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                token,
            );
            self.dispatch(h, now);
        }
        self.client.handle_timeout(&mut self.budget, now);
        self.dispatch(h, now);
        // Tick when idle or when the budget's own deadline is reached, at most once
        // per `idle_tick_ns` (a deadline a tick did not move cannot spin the loop).
        let next = budget_next.unwrap_or_else(|| self.budget.poll_timeout(now));
        let due = next.is_some_and(|t| t <= now);
        if (n == 0 || due) && now - self.last_tick >= self.cfg.idle_tick_ns {
            self.budget.tick(now);
            self.last_tick = now;
        }
        h.on_turn(&mut Context::new(
            &mut self.client,
            &mut self.budget,
            &mut self.ctl,
            now,
        ));
        self.dispatch(h, now);
    }

    /// Hands every output the client has to the handler, one call each, until
    /// none is left (outputs a handler call causes included).
    fn dispatch<H: ClientHandler + ?Sized>(&mut self, h: &mut H, now: i64) {
        while self.client.has_output() {
            let Some(out) = self.client.poll_output(&mut self.budget, now) else {
                break;
            };
            match out {
                Output::Response { id, flight, body } => {
                    {
                        let mut headers = Headers::new();
                        let response = self.client.view(&body, &mut headers);
                        self.client.release(&body, now);
                        h.on_response(
                            &mut Context::new(
                                &mut self.client,
                                &mut self.budget,
                                &mut self.ctl,
                                now,
                            ),
                            id,
                            response,
                            flight,
                        );
                    }
                    self.client.restore(body);
                }
                Output::Failed { id, sent, error } => h.on_error(
                    &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                    id,
                    sent,
                    error,
                ),
                #[cfg(feature = "curl")]
                Output::Resent { id, copies } => h.on_resent(
                    &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                    id,
                    copies,
                ),
                Output::Ready(pool) => h.on_ready(
                    &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                    pool,
                ),
                Output::ConnectError(pool, error) => h.on_connect_error(
                    &mut Context::new(&mut self.client, &mut self.budget, &mut self.ctl, now),
                    pool,
                    error,
                ),
            }
        }
    }

    /// When the budget next needs the loop, from `next` = [`Budget::poll_timeout`] (the next
    /// instant a lane closes, a hold ends or a window rolls), where the turn then
    /// calls [`Budget::tick`] so the deadline moves on. Never sooner than
    /// [`LoopConfig::idle_tick_ns`] after the last tick: a deadline already past that
    /// a tick did not move parks for that long instead of spinning.
    fn budget_deadline(&self, next: Option<i64>) -> Option<i64> {
        next.map(|t| t.max(self.last_tick.saturating_add(self.cfg.idle_tick_ns)))
    }

    /// Closes every connection; requests still in flight are reported to `h` as
    /// failed with [`Error::Closed`](crate::client::Error::Closed).
    pub fn close_all<H: ClientHandler + ?Sized>(&mut self, h: &mut H) {
        let now = self.now;
        self.client.close_all(now);
        self.dispatch(h, now);
    }
}

/// Pins the calling thread to `cpu` and verifies with `sched_getcpu` that it runs
/// there. Returns the CPU.
pub fn pin_current_thread(cpu: usize) -> Result<usize, LoopError> {
    if !allowed_cpus().contains(&cpu) {
        return Err(LoopError::CpuNotAllowed(cpu));
    }
    if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        return Err(LoopError::Pin {
            cpu,
            ran_on: current_cpu(),
        });
    }
    match current_cpu() {
        Some(c) if c == cpu => Ok(cpu),
        ran_on => Err(LoopError::Pin { cpu, ran_on }),
    }
}

#[cfg(test)]
mod tests {
    //! Failure paths a TCP peer cannot produce on demand, on a Unix socket pair
    //! installed as a pool's connection.

    use std::os::unix::net::UnixStream;

    use ergon_core::{Class, Part, Spec};
    use ergon_venues::response::Response;

    use ergon_core::Flight;

    use super::*;
    use crate::client::{Error, PoolConfig, RequestId, Sent};
    use crate::http::Request;

    struct Fails {
        pool: PoolId,
        parts: [Part; 1],
        deadline_ns: i64,
        sent: bool,
        got: Option<(bool, Error)>,
    }

    impl ClientHandler for Fails {
        fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
            panic!("no response expected");
        }
        fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
            let maybe = cx.settle(sent);
            self.got = Some((maybe, e));
            cx.stop();
        }
        fn on_turn(&mut self, cx: &mut Context<'_>) {
            if self.sent {
                return;
            }
            self.sent = true;
            let now = cx.now();
            let t = cx
                .budget()
                .try_charge(&self.parts, Class::Normal, now)
                .unwrap();
            let req = Request {
                method: "POST",
                target: "/o",
                headers: &[],
                body: b"id=1",
            };
            cx.request(self.pool, &req, t, now + self.deadline_ns)
                .unwrap();
        }
    }

    fn setup(ours: UnixStream, deadline_ns: i64) -> (EventLoop, Fails, ergon_core::BucketId) {
        let mut b = Budget::builder();
        let orders = b
            .add("orders", Spec::sliding(10, 1_000_000_000, 10))
            .unwrap();
        let mut lp =
            EventLoop::new(LoopConfig::default(), b.build(clock::now_ns()).unwrap()).unwrap();
        let pool = lp
            .add_pool(PoolConfig::new("127.0.0.1:9".parse().unwrap(), "h"))
            .unwrap();
        let now = lp.now;
        lp.client.adopt(0, ours.into(), now);
        let h = Fails {
            pool,
            parts: [Part::new(orders, 1)],
            deadline_ns,
            sent: false,
            got: None,
        };
        (lp, h, orders)
    }

    #[test]
    fn a_first_write_that_fails_reports_sent_no_and_the_ticket_comes_back() {
        let (ours, peer) = UnixStream::pair().unwrap();
        // The peer stops reading: our next write fails with EPIPE, while a peek
        // still sees an open, quiet connection.
        peer.shutdown(std::net::Shutdown::Read).unwrap();
        let (mut lp, mut h, orders) = setup(ours, 5_000_000_000);
        lp.run(&mut h).unwrap();
        assert_eq!(
            h.got,
            Some((false, Error::Io(std::io::ErrorKind::BrokenPipe)))
        );
        assert_eq!(lp.client().counters().sent_no, 1);
        // Refunded: the charge is gone.
        assert_eq!(lp.budget().stats(orders).unwrap().used, 0);
        drop(peer);
    }

    #[test]
    fn a_deadline_with_nothing_written_reports_sent_no_on_jumped_time() {
        let (ours, peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        // Fill our send buffer: the request cannot get one byte out.
        let junk = [0u8; 65536];
        while std::io::Write::write(&mut &ours, &junk).is_ok() {}
        let deadline = 50_000_000;
        let (mut lp, mut h, orders) = setup(ours, deadline);
        // The first turn sends at t0; the loop's clock is not read again.
        let t0 = lp.now();
        lp.turn_at(&mut h, t0).unwrap();
        assert!(h.sent && h.got.is_none());
        lp.turn_at(&mut h, t0 + deadline - 1).unwrap();
        assert_eq!(h.got, None, "one nanosecond before its deadline");
        lp.turn_at(&mut h, t0 + deadline).unwrap();
        assert_eq!(h.got, Some((false, Error::Timeout)));
        assert_eq!(lp.client().counters().timeouts, 1);
        assert_eq!(lp.budget().stats(orders).unwrap().used, 0);
        drop(peer);
    }

    /// Counts turns and parks until `until` on the loop's clock.
    struct Idle {
        until: i64,
        turns: u32,
        parks: u32,
    }

    impl ClientHandler for Idle {
        fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
            panic!("no request made");
        }
        fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
            panic!("no request made");
        }
        fn on_turn(&mut self, cx: &mut Context<'_>) {
            self.turns += 1;
            if cx.now() >= self.until {
                cx.stop();
            }
        }
        fn before_park(&mut self, _: &mut Context<'_>) -> bool {
            self.parks += 1;
            true
        }
    }

    // Real time, unavoidably: this loop reads the monotonic clock itself, so the
    // only way to see it wake at the budget's deadline is to let ~350 ms pass.
    #[test]
    fn a_parked_loop_wakes_at_each_window_roll_and_does_not_spin() {
        let mut b = Budget::builder();
        // Sliding window of 1 s in 10 slots: the ring rolls every 100 ms.
        b.add("orders", Spec::sliding(10, 1_000_000_000, 10))
            .unwrap();
        let start = clock::now_ns();
        let cfg = LoopConfig {
            // Longer than the test: without the budget's deadline the loop would
            // park once and never see the rolls.
            max_park_ns: 10_000_000_000,
            ..LoopConfig::default()
        };
        let mut lp = EventLoop::new(cfg, b.build(start).unwrap()).unwrap();
        let mut h = Idle {
            until: start + 350_000_000,
            turns: 0,
            parks: 0,
        };
        lp.run(&mut h).unwrap();
        // Woke at the rolls at 100, 200 and 300 ms, each tick moving the deadline
        // on: a few turns, not thousands, and the budget saw time pass.
        assert!(h.parks >= 3, "parks {}", h.parks);
        assert!(h.turns <= 12, "turns {} (spinning?)", h.turns);
        assert!(lp.budget().now_ns() >= start + 300_000_000);
        assert!(lp.budget().poll_timeout(lp.now()).unwrap() > lp.now());
    }
}
