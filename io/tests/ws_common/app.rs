//! A [`WsClient`] of one session run on the event loop, for the loop tests
//! (`ws_loop.rs`, `ws_tls.rs`): the loop wakes it on the client's fd and timer,
//! it drives the client, records every event and does what the test's reaction
//! says once `drive` has returned. It must never decide what a test asserts.

use std::time::Instant;

use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
use ergon_io::core::{Class, Flight};
use ergon_io::event_loop::{Config as LoopConfig, Context, EventLoop, Interest, Readiness};
use ergon_io::ws::{Config, ConnectError, Request, Session, WsClient, WsId};
use ergon_venues::response::Response;

use super::{budget_at, Ev, Limits, IO_TIMEOUT};

/// The loop token of the client's fd.
pub const WS_FD: u64 = 7;
/// The loop token of the client's timer.
pub const WS_TIMER: u64 = 8;

/// What a test does on an event: run after `drive` returns, when the session may
/// be used again.
pub trait React: Sized {
    /// Does it, at `now`.
    fn run(self, app: &mut App<Self>, cx: &mut Context<'_>, now: i64);
}

/// The loop handler: one session, its events, the test's reaction to each.
pub struct App<T> {
    pub ws: WsClient,
    pub id: WsId,
    pub events: Vec<Ev>,
    /// Connects a reaction asked for and the client refused.
    pub refused: Vec<ConnectError>,
    /// What to do on an event.
    pub react: fn(&Ev) -> T,
    pub deadline: Instant,
}

impl<T: React> App<T> {
    fn pump(&mut self, cx: &mut Context<'_>) {
        assert!(
            Instant::now() < self.deadline,
            "timed out: {:?}",
            self.events
        );
        let now = cx.now();
        let mut todo = Vec::new();
        let (events, react) = (&mut self.events, self.react);
        self.ws
            .drive(cx.budget(), now, &mut |_, ev, _| {
                let ev = Ev::of(ev);
                todo.push(react(&ev));
                events.push(ev);
            })
            .unwrap();
        for then in todo {
            then.run(self, cx, now);
        }
        if let Some(at) = self.ws.next_deadline() {
            cx.set_timer(WS_TIMER, at).unwrap();
        }
    }
}

impl<T: React> ClientHandler for App<T> {
    fn on_response(&mut self, _: &mut Context<'_>, _: RequestId, _: Response<'_>, _: Flight) {
        unreachable!("no HTTP here");
    }
    fn on_error(&mut self, _: &mut Context<'_>, _: RequestId, _: Sent, _: Error) {
        unreachable!("no HTTP here");
    }
    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, _ready: Readiness) {
        assert_eq!(token, WS_FD);
        self.pump(cx);
    }
    fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
        assert_eq!(token, WS_TIMER);
        self.pump(cx);
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        // The first turn: settle a connect that failed at once.
        if self.events.is_empty() {
            self.pump(cx);
        }
    }
}

/// A loop with a budget (`budget_at(connects, messages)`) and a client of one
/// session, added by `add` and connected with `req`, its fd watched.
pub fn on_loop<T>(
    config: Config,
    (connects, messages): (u64, u64),
    req: &Request<'_>,
    add: impl FnOnce(&mut WsClient, Session) -> WsId,
    react: fn(&Ev) -> T,
) -> (EventLoop, App<T>, Limits) {
    let now = ergon_io::clock::now_ns();
    let (mut budget, limits) = budget_at(connects, messages, now);
    let session = Session::new(
        config,
        &budget,
        &limits.connect_parts(),
        &limits.message_parts(),
        now as u64,
    )
    .unwrap();
    let mut ws = WsClient::new(4).unwrap();
    let id = add(&mut ws, session);
    ws.connect(id, req, Class::Normal, &mut budget, now)
        .unwrap();
    let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
    lp.watch_fd(ws.fd(), WS_FD, Interest::READ).unwrap();
    let app = App {
        ws,
        id,
        events: Vec::new(),
        refused: Vec::new(),
        react,
        deadline: Instant::now() + IO_TIMEOUT,
    };
    (lp, app, limits)
}
