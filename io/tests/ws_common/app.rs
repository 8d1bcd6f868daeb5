//! A [`WsClient`] of one session run on the event loop, for the loop tests
//! (`ws_loop.rs`, `ws_tls.rs`): the loop watches the session's socket itself and
//! wakes it on its readiness and on its timer, it drives the client, records every event and does what the test's reaction
//! says once `drive` has returned. It must never decide what a test asserts.

use std::time::Instant;

use ergon_io::client::{ClientHandler, Error, RequestId, Sent};
use ergon_io::core::{Budget, Class, Flight};
use ergon_io::event_loop::{Context, EventLoop, LoopConfig, Readiness};
use ergon_io::ws::{ConnectError, Session, Upgrade, WsClient, WsConfig, WsEvent, WsId};
use ergon_venues::response::Response;

use super::{budget_at, Ev, Limits, IO_TIMEOUT};

/// The loop token of the client's first session's socket.
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
    /// Hands the client the readiness of `ready` (or, with None, its timeouts).
    fn pump(&mut self, cx: &mut Context<'_>, ready: Option<(u64, Readiness)>) {
        assert!(
            Instant::now() < self.deadline,
            "timed out: {:?}",
            self.events
        );
        let now = cx.now();
        let mut todo = Vec::new();
        let (events, react) = (&mut self.events, self.react);
        let on: &mut dyn FnMut(WsId, WsEvent<'_>, &mut Budget) = &mut |_, ev, _| {
            let ev = Ev::of(ev);
            todo.push(react(&ev));
            events.push(ev);
        };
        match ready {
            Some((token, ready)) => {
                assert!(self.ws.handle_ready(token, ready, cx.budget(), now, on));
            }
            None => self.ws.handle_timeout(cx.budget(), now, on),
        }
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
    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: Readiness) {
        assert_eq!(token, WS_FD, "the only session's socket");
        self.pump(cx, Some((token, ready)));
    }
    fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
        assert_eq!(token, WS_TIMER);
        self.pump(cx, None);
    }
    fn on_turn(&mut self, cx: &mut Context<'_>) {
        // The first turn: settle a connect that failed at once.
        if self.events.is_empty() {
            self.pump(cx, None);
        }
    }
}

/// A loop with a budget (`budget_at(connects, messages)`) and a client of one
/// session, added by `add` and connected with `req`, its socket watched by the
/// loop under [`WS_FD`].
pub fn on_loop<T>(
    config: WsConfig,
    (connects, messages): (u64, u64),
    req: &Upgrade<'_>,
    add: impl FnOnce(&mut WsClient, Session) -> WsId,
    react: fn(&Ev) -> T,
) -> (EventLoop, App<T>, Limits) {
    let now = ergon_io::clock::now_ns();
    let (budget, limits) = budget_at(connects, messages, now);
    let session = Session::new(
        config,
        &budget,
        &limits.connect_parts(),
        &limits.message_parts(),
        now as u64,
    )
    .unwrap();
    let mut ws = WsClient::new(4);
    let id = add(&mut ws, session);
    let mut lp = EventLoop::new(LoopConfig::default(), budget).unwrap();
    ws.attach(lp.registry().unwrap(), WS_FD);
    let now = lp.now();
    ws.connect(id, req, Class::Normal, lp.budget_mut(), now)
        .unwrap();
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
