//! The gateway on the event loop: a [`Strategy`] receives typed events and submits
//! through an [`Api`]; the [`Driver`] is the loop's handler that joins the two.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ergon_core::{Budget, Class, Flight};
use ergon_venues::adapt;
use ergon_venues::response::Response;

use super::endpoints::Account;
use super::events::{Event, Tag};
use super::machine::{Gateway, Stats, WsIn};
use super::wire::{LoopWire, Wire};
use super::ws_api::{WsLane, WS_API};
use ergon_io::client::{ClientHandler, Error, PoolId, RequestId, Sent};
use ergon_io::event_loop::{Context, LoopError, Readiness};
use ergon_venues::binance_spot_ws::Execution;
use ergon_venues::endpoint::Prepared;

/// The timer token the driver keeps for the gateway's due work; a strategy's
/// tokens must differ.
pub const GATEWAY_TIMER: u64 = u64::MAX;

/// A person's hands on a running gateway, from another thread: clear the halts
/// after looking at a ban, or ask the strategy to stop.
#[derive(Debug, Default)]
pub struct Control {
    clear_halt: AtomicBool,
    stop: AtomicBool,
}

impl Control {
    /// Clears every halt at the loop's next turn.
    pub fn clear_halt(&self) {
        self.clear_halt.store(true, Ordering::SeqCst);
    }

    /// Asks the strategy to stop ([`Api::stop_asked`] says so from then on).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What a strategy does with the gateway, from inside a loop call.
pub struct Api<'a, 'c, E> {
    gw: &'a mut Gateway<E>,
    cx: Cx<'a, 'c>,
    control: &'a Control,
}

/// What drives a strategy outside the event loop (the deterministic
/// simulator): the gateway's transport on its own clock, and the loop's timers
/// and stop. No descriptor can be watched through it ([`Api::registry`] is None).
pub trait Host: Wire {
    /// Sets the strategy's timer `token` at `at_ns`.
    fn set_timer(&mut self, token: u64, at_ns: i64);
    /// Ends the drive after this turn.
    fn stop(&mut self);
}

/// Where an [`Api`]'s calls go: the event loop's context on the gateway's pool,
/// or a [`Host`].
enum Cx<'a, 'c> {
    Loop(LoopWire<'a, 'c>),
    Host(&'a mut dyn Host),
}

impl Wire for Cx<'_, '_> {
    fn now(&self) -> i64 {
        match self {
            Cx::Loop(w) => w.now(),
            Cx::Host(h) => h.now(),
        }
    }

    fn budget(&mut self) -> &mut Budget {
        match self {
            Cx::Loop(w) => w.budget(),
            Cx::Host(h) => h.budget(),
        }
    }

    fn send(
        &mut self,
        req: &ergon_io::http::Request<'_>,
        ticket: ergon_core::Ticket,
        deadline_ns: i64,
    ) -> Result<RequestId, ergon_io::client::Refused> {
        match self {
            Cx::Loop(w) => w.send(req, ticket, deadline_ns),
            Cx::Host(h) => h.send(req, ticket, deadline_ns),
        }
    }

    fn connects(&self) -> (u64, u64) {
        match self {
            Cx::Loop(w) => w.connects(),
            Cx::Host(h) => h.connects(),
        }
    }
}

impl<'a, E: Account> Api<'a, 'static, E> {
    /// The [`Api`] a strategy is given by a [`Host`] instead of the event loop:
    /// what it submits goes to `host`'s transport, on `host`'s clock.
    pub fn hosted(gw: &'a mut Gateway<E>, host: &'a mut dyn Host, control: &'a Control) -> Self {
        Api {
            gw,
            cx: Cx::Host(host),
            control,
        }
    }
}

impl<E: Account> Api<'_, '_, E> {
    /// This turn's time.
    pub fn now(&self) -> i64 {
        self.cx.now()
    }

    /// The transport's reconnect backoff: connect failures in a row of the slot
    /// that failed last (0: connected), and when it tries again (0: not waiting).
    pub fn reconnect(&self) -> (u32, i64) {
        match &self.cx {
            Cx::Loop(w) => {
                let c = w.cx.client().counters();
                (c.failing_in_row, c.retry_at_ns)
            }
            Cx::Host(_) => (0, 0),
        }
    }

    /// Submits a prepared request (see [`Gateway::submit`]); `req` comes back empty.
    pub fn submit(
        &mut self,
        req: &mut Prepared,
        class: Class,
        tag: Tag,
    ) -> Result<(), Event<'static>> {
        self.gw.submit(&mut self.cx, req, class, tag)
    }

    /// Submits a request `prepare` writes straight into the ledger slot it will
    /// take (see [`Gateway::submit_with`]): the fast path, no buffer swapped.
    pub fn submit_with(
        &mut self,
        class: Class,
        tag: Tag,
        prepare: impl for<'p> FnOnce(&mut E, &'p mut Prepared) -> Result<&'p Prepared, adapt::Error>,
    ) -> Result<(), Event<'static>> {
        self.gw.submit_with(&mut self.cx, class, tag, prepare)
    }

    /// Reconciles an order a previous gateway left in flight (see
    /// [`Gateway::recover`]); `query` comes back empty.
    pub fn recover(&mut self, query: &mut Prepared, tag: Tag) -> Result<(), Event<'static>> {
        self.gw.recover(&mut self.cx, query, tag)
    }

    /// A client order id no earlier one carried (see
    /// [`Gateway::next_client_order_id`]).
    pub fn next_client_order_id(
        &mut self,
    ) -> Result<ergon_venues::endpoint::ClientOrderId, crate::ids::IdError> {
        self.gw.next_client_order_id()
    }

    /// Takes `n` client order ids out of the gateway's issuer (see
    /// [`Gateway::id_block`]).
    pub fn id_block(&mut self, n: u64) -> Result<crate::ids::IdIssuer, crate::ids::IdError> {
        self.gw.id_block(n)
    }

    /// Asks the venue for its open orders once, as soon as the budget has room
    /// ([`Gateway::poll_open_orders_once`]): an [`Event::OpenOrders`] follows.
    pub fn poll_open_orders_once(&mut self) {
        let now = self.now();
        self.gw.poll_open_orders_once(now);
    }

    /// Whether the periodic open-orders poll is wanted
    /// ([`Gateway::want_open_orders`]).
    pub fn want_open_orders(&mut self, wanted: bool) {
        self.gw.want_open_orders(wanted);
    }

    /// The units the open-orders polls charged so far, by bucket
    /// ([`Gateway::open_orders_spent`]).
    pub fn open_orders_spent(&self) -> &[(ergon_core::BucketId, u64)] {
        self.gw.open_orders_spent()
    }

    /// The venue's endpoints.
    pub fn venue(&self) -> &E {
        self.gw.venue()
    }

    /// The venue's endpoints, to prepare requests.
    pub fn venue_mut(&mut self) -> &mut E {
        self.gw.venue_mut()
    }

    /// The gateway's WebSocket API connection, if it has one.
    pub fn ws_api(&self) -> Option<&WsLane> {
        self.gw.ws_api()
    }

    /// The symbol the gateway's reconcile queries name.
    pub fn symbol(&self) -> ergon_venues::endpoint::Symbol<'_> {
        self.gw.symbol()
    }

    /// The budget (read its stats; charge ad-hoc work).
    pub fn budget(&mut self) -> &mut Budget {
        self.cx.budget()
    }

    /// What the gateway did so far.
    pub fn stats(&self) -> &Stats {
        self.gw.stats()
    }

    /// What the venue said rejecting the request of `tag`, if it is the last
    /// one rejected ([`Gateway::rejected`]).
    pub fn rejected(&self, tag: crate::events::Tag) -> Option<&str> {
        self.gw.rejected(tag)
    }

    /// Publishes the counters by label at once (where a reader was taken): for a
    /// strategy that publishes the budget's counters, so that a reader of both
    /// never sees the labels older than the counters.
    pub fn publish_labels(&mut self) {
        let now = self.cx.now();
        self.gw.publish_labels(now, true);
    }

    /// Requests accepted and not yet settled.
    pub fn in_flight(&self) -> usize {
        self.gw.in_flight()
    }

    /// Clears every halt: a person's action, after looking at the ban.
    pub fn clear_halts(&mut self) -> usize {
        self.gw.clear_halts(&mut self.cx)
    }

    /// The loop's registry, to watch a descriptor under a strategy's token
    /// ([`Strategy::on_fd`]); None if the loop cannot give one.
    pub fn registry(&self) -> Option<ergon_io::event_loop::Registry> {
        match &self.cx {
            Cx::Loop(w) => w.cx.registry().ok(),
            Cx::Host(_) => None,
        }
    }

    /// The venue's adapter and the budget together (a connection that writes
    /// the venue's frames and charges them).
    pub fn venue_and_budget(&mut self) -> (&E, &mut Budget) {
        (self.gw.venue(), self.cx.budget())
    }

    /// Sets the strategy's timer `token` (not [`GATEWAY_TIMER`]).
    pub fn set_timer(&mut self, token: u64, at_ns: i64) -> Result<(), LoopError> {
        match &mut self.cx {
            Cx::Loop(w) => w.cx.set_timer(token, at_ns),
            Cx::Host(h) => {
                h.set_timer(token, at_ns);
                Ok(())
            }
        }
    }

    /// Ends the loop after this turn.
    pub fn stop(&mut self) {
        match &mut self.cx {
            Cx::Loop(w) => w.cx.stop(),
            Cx::Host(h) => h.stop(),
        }
    }

    /// Whether a person asked to stop ([`Control::stop`]).
    pub fn stop_asked(&self) -> bool {
        self.control.stop.load(Ordering::SeqCst)
    }
}

/// A strategy over a gateway: it gets every event of its requests, once per turn a
/// call, and its own timers.
pub trait Strategy<E: Account> {
    /// One event of a request it submitted.
    fn on_event(&mut self, gw: &mut Api<'_, '_, E>, event: Event<'_>);

    /// Once per loop turn, after the gateway's own work.
    fn on_turn(&mut self, gw: &mut Api<'_, '_, E>);

    /// An order update of the venue's user data stream (Binance Spot over the
    /// WebSocket API): the order's client order id, state and fill.
    fn on_order_update(&mut self, _gw: &mut Api<'_, '_, E>, _update: &Execution) {}

    /// A timer it set is due.
    fn on_timer(&mut self, _gw: &mut Api<'_, '_, E>, _token: u64) {}

    /// A descriptor it watched is ready.
    fn on_fd(&mut self, _gw: &mut Api<'_, '_, E>, _token: u64, _ready: Readiness) {}

    /// The loop is about to block; false if work arrived meanwhile (see
    /// [`ClientHandler::before_park`]).
    fn before_park(&mut self, _gw: &mut Api<'_, '_, E>) -> bool {
        true
    }
}

/// The loop's handler: the gateway and the strategy over it.
pub struct Driver<E, S> {
    /// The gateway.
    pub gateway: Gateway<E>,
    /// The strategy.
    pub strategy: S,
    /// The gateway's pool on the loop.
    pub pool: PoolId,
    /// A person's hands on it.
    pub control: Arc<Control>,
}

impl<E: Account, S: Strategy<E>> Driver<E, S> {
    /// Delivers every queued event, then re-arms the gateway's timer.
    /// Records the pool's connect charges the loop made since the gateway last
    /// looked (reconnects happen between the loop's calls).
    fn note_connects(&mut self, cx: &mut Context<'_>) {
        let w = LoopWire {
            cx,
            pool: self.pool,
        };
        self.gateway.note_connects(&w);
    }

    fn drain(&mut self, cx: &mut Context<'_>) {
        while let Some(ev) = self.gateway.poll_event() {
            let mut api = Api {
                gw: &mut self.gateway,
                cx: Cx::Loop(LoopWire {
                    cx,
                    pool: self.pool,
                }),
                control: &self.control,
            };
            self.strategy.on_event(&mut api, ev);
        }
        match self.gateway.poll_timeout() {
            Some(at) => {
                let _ = cx.set_timer(GATEWAY_TIMER, at);
            }
            None => {
                cx.cancel_timer(GATEWAY_TIMER);
            }
        }
    }

    fn deliver(&mut self, cx: &mut Context<'_>, ev: Option<Event<'_>>) {
        if let Some(ev) = ev {
            let mut api = Api {
                gw: &mut self.gateway,
                cx: Cx::Loop(LoopWire {
                    cx,
                    pool: self.pool,
                }),
                control: &self.control,
            };
            self.strategy.on_event(&mut api, ev);
        }
        self.drain(cx);
    }

    /// Drives the WebSocket API connection and hands what it reported to the
    /// gateway, item by item, delivering each event; then re-arms its timer.
    fn ws(&mut self, cx: &mut Context<'_>, ready: Option<Readiness>) {
        // The loop watches its socket; without a descriptor for that, it does
        // not connect and this is tried again on the next turn.
        self.gateway.ws_watch(|| cx.registry().ok());
        let mut w = LoopWire {
            cx,
            pool: self.pool,
        };
        let (strategy, control, pool) = (&mut self.strategy, &*self.control, self.pool);
        self.gateway
            .drive_ws_then(&mut w, ready, &mut |gw, w, got| {
                let mut api = Api {
                    gw,
                    cx: Cx::Loop(LoopWire {
                        cx: &mut *w.cx,
                        pool,
                    }),
                    control,
                };
                match got {
                    WsIn::Event(ev) => strategy.on_event(&mut api, ev),
                    WsIn::Execution(x) => strategy.on_order_update(&mut api, &x),
                }
            });
        // What the items queued (a Late, an Unresolved): delivered in the same turn.
        self.drain(cx);
        match self.gateway.ws_deadline() {
            Some(at) => {
                let _ = cx.set_timer(WS_API, at);
            }
            None => {
                cx.cancel_timer(WS_API);
            }
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) {
        let mut w = LoopWire {
            cx,
            pool: self.pool,
        };
        self.gateway.poll(&mut w);
        self.drain(cx);
    }
}

impl<E: Account, S: Strategy<E>> ClientHandler for Driver<E, S> {
    fn on_response(&mut self, cx: &mut Context<'_>, id: RequestId, r: Response<'_>, f: Flight) {
        self.note_connects(cx);
        let mut w = LoopWire {
            cx,
            pool: self.pool,
        };
        let ev = self.gateway.on_response(&mut w, id, r, f);
        self.deliver(cx, ev);
    }

    fn on_error(&mut self, cx: &mut Context<'_>, id: RequestId, sent: Sent, _e: Error) {
        self.note_connects(cx);
        let mut w = LoopWire {
            cx,
            pool: self.pool,
        };
        let ev = self.gateway.on_error(&mut w, id, sent);
        self.deliver(cx, ev);
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _pool: PoolId) {
        self.note_connects(cx);
        self.poll(cx);
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, token: u64) {
        self.note_connects(cx);
        if token == GATEWAY_TIMER {
            self.poll(cx);
            return;
        }
        if token == WS_API {
            self.ws(cx, None);
            self.drain(cx);
            return;
        }
        let mut api = Api {
            gw: &mut self.gateway,
            cx: Cx::Loop(LoopWire {
                cx,
                pool: self.pool,
            }),
            control: &self.control,
        };
        self.strategy.on_timer(&mut api, token);
        self.drain(cx);
    }

    fn on_fd(&mut self, cx: &mut Context<'_>, token: u64, ready: Readiness) {
        self.note_connects(cx);
        if token == WS_API {
            self.ws(cx, Some(ready));
            self.drain(cx);
            return;
        }
        let mut api = Api {
            gw: &mut self.gateway,
            cx: Cx::Loop(LoopWire {
                cx,
                pool: self.pool,
            }),
            control: &self.control,
        };
        self.strategy.on_fd(&mut api, token, ready);
        self.drain(cx);
    }

    fn before_park(&mut self, cx: &mut Context<'_>) -> bool {
        let mut api = Api {
            gw: &mut self.gateway,
            cx: Cx::Loop(LoopWire {
                cx,
                pool: self.pool,
            }),
            control: &self.control,
        };
        self.strategy.before_park(&mut api)
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.note_connects(cx);
        if self.control.clear_halt.swap(false, Ordering::SeqCst) {
            let mut w = LoopWire {
                cx,
                pool: self.pool,
            };
            self.gateway.clear_halts(&mut w);
        }
        if self.gateway.ws_due(cx.now()) {
            self.ws(cx, None);
        }
        self.gateway.publish_labels(cx.now(), false);
        self.poll(cx);
        let mut api = Api {
            gw: &mut self.gateway,
            cx: Cx::Loop(LoopWire {
                cx,
                pool: self.pool,
            }),
            control: &self.control,
        };
        self.strategy.on_turn(&mut api);
        self.drain(cx);
    }
}
