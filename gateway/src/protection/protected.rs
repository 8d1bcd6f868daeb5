//! [`Protected`]: a strategy with the venue's switch kept fed around it, on the
//! event loop (the module doc of [`super`] says how).

use arrayvec::ArrayString;
use ergon_core::Class;
use ergon_io::event_loop::Readiness;
use ergon_venues::endpoint::{Prepared, Symbol};
use ergon_venues::response::Response;
use ergon_venues::switch::{Refusal, SwitchAnswer};

use super::{Due, Note, Protection, State, PROTECTION, PROTECTION_TIMER};
use crate::dcp::{DcpLink, LinkState, DCP_LINK};
use crate::driver::{Api, Strategy};
use crate::endpoints::Account;
use crate::events::{wait_ns, Event};
use crate::machine::REJECTED_WORDS;
use crate::ws_api::WsState;

/// What [`Protected::on_change`] calls.
type OnChange = Box<dyn FnMut(&Protection, i64)>;

/// A strategy with the venue's switch kept fed around it: see the module doc.
pub struct Protected<S> {
    /// The strategy.
    pub inner: S,
    /// The switch's state.
    pub machine: Protection,
    /// The connection that arms a switch armed by one (Bybit DCP), if held.
    pub link: Option<DcpLink>,
    /// The switch is armed over the gateway's order lane (Deribit).
    lane: bool,
    req: Prepared,
    symbol: ArrayString<32>,
    stop_when_disarmed: bool,
    stop_when_answered: bool,
    on_change: Option<OnChange>,
    disarm_when: Option<fn(&S) -> bool>,
    shown: (State, Option<i64>),
    /// What the venue said when it last rejected a switch call (its reason: a
    /// wrong passphrase reads as such, not only as "refused").
    venue_said: ArrayString<REJECTED_WORDS>,
    /// The bucket whose halt holds the switch's call back (a ban the halts file
    /// recorded, restored at start): only a person's `clear-halt` lifts it.
    halted_on: Option<ArrayString<32>>,
}

impl<S> Protected<S> {
    /// Wraps `inner`; switch calls name `symbol` where the switch is per symbol.
    pub fn new(inner: S, machine: Protection, symbol: Symbol<'_>) -> Self {
        let mut sym = ArrayString::new();
        let _ = sym.try_push_str(symbol.as_str());
        Protected {
            inner,
            machine,
            link: None,
            lane: false,
            req: Prepared::with_capacity(1024),
            symbol: sym,
            stop_when_disarmed: false,
            stop_when_answered: false,
            on_change: None,
            disarm_when: None,
            shown: (State::Off, None),
            venue_said: ArrayString::new(),
            halted_on: None,
        }
    }

    /// Holds `link`, the connection that arms the venue's switch (Bybit DCP),
    /// and drives it on the loop; None changes nothing.
    pub fn with_link(mut self, link: Option<DcpLink>) -> Self {
        if link.is_some() {
            self.machine = self.machine.with_link();
        }
        self.link = link;
        self
    }

    /// Feeds the machine from the gateway's order lane, when the switch is armed
    /// over it (Deribit's cancel-on-disconnect: [`Protection::for_gateway`]);
    /// nothing otherwise.
    pub fn with_lane(mut self) -> Self {
        if self.machine.over_lane() {
            self.machine = self.machine.with_link();
            self.lane = true;
        }
        self
    }

    /// Drives the link, if held (`ready`: its socket's readiness), and tells the
    /// machine what it knows; or tells it what the order lane knows.
    fn drive_link<E: Account>(&mut self, api: &mut Api<'_, '_, E>, ready: Option<Readiness>) {
        if self.lane {
            let now = api.now();
            match api.ws_api() {
                Some(l) if l.state() == WsState::Unavailable || l.refused() => {
                    self.machine.on_link_unavailable()
                }
                Some(l) => self.machine.on_link(l.set_up_heard(), now),
                None => self.machine.on_link_unavailable(),
            }
            return;
        }
        let Some(link) = &mut self.link else {
            return;
        };
        link.watch(|| api.registry());
        let now = api.now();
        let want = self.machine.wants_link();
        let (venue, budget) = api.venue_and_budget();
        link.drive(venue, budget, now, ready, want);
        if link.state() == LinkState::Unavailable {
            self.machine.on_link_unavailable();
        } else {
            self.machine.on_link(link.live_heard(), now);
        }
    }

    /// Why the switch is not armed, in words, with what the link saw where it
    /// is the reason (a private stream not served, a refused key).
    pub fn not_armed(&self) -> String {
        let mut why = match self.link.as_ref().and_then(DcpLink::why) {
            Some(link) => format!("{} ({link})", self.machine.not_armed()),
            None => self.machine.not_armed(),
        };
        if self.machine.state() == State::Refused && !self.venue_said.is_empty() {
            why += &format!("; the venue said: {}", self.venue_said.trim_end());
        }
        if let (State::Arming, Some(b)) = (self.machine.state(), self.halted_on) {
            why += &format!(
                ": its call is held back by the halt of bucket {b}, which only a person's clear-halt lifts"
            );
        }
        why
    }

    /// Ends the loop once the first arm is answered (the start-up phase), or
    /// at once if a halt holds its call back: no time passing lifts a halt.
    pub fn stop_when_answered(mut self) -> Self {
        self.stop_when_answered = true;
        self
    }

    /// Calls `f` with the machine and `now` whenever its state or deadline
    /// changes (for `--stats`; never on the send path).
    pub fn on_change(mut self, f: impl FnMut(&Protection, i64) + 'static) -> Self {
        self.on_change = Some(Box::new(f));
        self
    }

    /// Disarms once `ready` says the strategy is done (the stop phase: its
    /// orders are cancelled), then ends the loop.
    pub fn disarm_when(mut self, ready: fn(&S) -> bool) -> Self {
        self.disarm_when = Some(ready);
        self
    }

    /// Feeds the machine, sends what is due, hands the notes to the strategy.
    pub fn pump<E: Account>(&mut self, api: &mut Api<'_, '_, E>)
    where
        S: Strategy<E>,
    {
        let now = api.now();
        self.drive_link(api, None);
        if let Some(ready) = self.disarm_when {
            if !self.stop_when_disarmed && ready(&self.inner) {
                self.machine.stop(now);
                self.stop_when_disarmed = true;
            }
        }
        self.machine.handle_timeout(now);
        while let Some(due) = self.machine.poll_send(now) {
            if let Some((ready_at, bucket)) = guard_hold(api) {
                if ready_at == i64::MAX {
                    let name = api.budget().name(bucket).unwrap_or("?");
                    self.halted_on = ArrayString::from(name).ok();
                }
                self.machine.on_blocked(now, ready_at);
                continue;
            }
            self.halted_on = None;
            if due == Due::Disarm && (self.link.is_some() || self.lane) {
                // Nothing to call: closing the connection is the disarm (the
                // strategy's orders are cancelled by now); the order lane closes
                // with the process.
                if let Some(link) = &mut self.link {
                    link.close(api.budget(), now);
                }
                self.machine.on_sent(due, now);
                self.machine.on_answer(Some(SwitchAnswer::Disarmed), now);
                continue;
            }
            let Ok(symbol) = Symbol::new(self.symbol.as_str()) else {
                break;
            };
            let timeout = self.machine.timeout_ms();
            let prepared = match api.venue_mut().switch_mut() {
                Some(sw) => match due {
                    Due::Arm => sw.refresh(&mut self.req, symbol, timeout, now).is_ok(),
                    Due::Disarm => sw.disarm(&mut self.req, symbol, now).is_ok(),
                },
                None => false,
            };
            if !prepared {
                // Nothing the venue can be asked: no key, or no switch after all.
                self.machine.on_blocked(now, i64::MAX);
                break;
            }
            match api.submit(&mut self.req, Class::Urgent, PROTECTION) {
                Ok(()) => self.machine.on_sent(due, now),
                Err(Event::Limited { ready_in_ns, .. }) => self
                    .machine
                    .on_blocked(now, now.saturating_add(ready_in_ns)),
                Err(_) => {
                    self.machine.on_sent(due, now);
                    self.machine.on_answer(None, now);
                }
            }
        }
        // After a fire, once sending is allowed again: what still rests.
        if self.machine.take_rearmed() {
            api.poll_open_orders_once();
        }
        while let Some(n) = self.machine.poll_note() {
            let ev = match n {
                Note::AtRisk { armed_until_ns } => Event::Protection {
                    fires_in_ns: wait_ns(armed_until_ns, api.now()),
                },
                Note::Fired => Event::ProtectionFired,
            };
            self.inner.on_event(api, ev);
        }
        if self.stop_when_disarmed && self.machine.stopped() {
            api.stop();
        }
        let held = self.machine.state() == State::Arming && self.halted_on.is_some();
        if self.stop_when_answered
            && (held
                || matches!(
                    self.machine.state(),
                    State::Armed | State::Refused | State::Unavailable
                ))
        {
            api.stop();
        }
        let now_shown = (self.machine.state(), self.machine.armed_until_ns());
        if now_shown != self.shown {
            self.shown = now_shown;
            if let Some(f) = &mut self.on_change {
                f(&self.machine, now);
            }
        }
        let link_at = self.link.as_ref().and_then(DcpLink::next_deadline);
        if let Some(at) = [self.machine.poll_timeout(), link_at]
            .into_iter()
            .flatten()
            .min()
        {
            let _ = api.set_timer(PROTECTION_TIMER, at);
        }
    }
}

/// The end of a hold (or `i64::MAX` for a halt) on a bucket the switch's call is
/// counted on, if one is in force, with its bucket (the latest end's).
fn guard_hold<E: Account>(api: &mut Api<'_, '_, E>) -> Option<(i64, ergon_core::BucketId)> {
    let guards = api.venue_mut().switch_mut()?.switch_guards();
    let now = api.now();
    let budget = api.budget();
    guards
        .iter()
        .filter_map(|b| budget.stats(*b).ok().map(|s| (*b, s)))
        .filter_map(|(b, s)| {
            if s.halted {
                Some((i64::MAX, b))
            } else {
                s.held_until_ns.filter(|u| *u > now).map(|u| (u, b))
            }
        })
        .max_by_key(|(at, _)| *at)
}

impl<E: Account, S: Strategy<E>> Strategy<E> for Protected<S> {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, event: Event<'_>) {
        if event.tag() != PROTECTION || !matches_switch(&event) {
            self.inner.on_event(api, event);
            if self.disarm_when.is_some() {
                self.pump(api);
            }
            return;
        }
        let now = api.now();
        let answer = match event {
            Event::Applied { body, .. } => {
                let r = Response {
                    status: 200,
                    headers: &[],
                    body,
                };
                api.venue_mut().switch_mut().map(|s| s.read_switch(&r))
            }
            Event::Rejected { tag } => {
                self.venue_said.clear();
                let _ = self
                    .venue_said
                    .try_push_str(api.rejected(tag).unwrap_or(""));
                Some(SwitchAnswer::Refused(Refusal::Code(0)))
            }
            Event::Retrying { .. } => return,
            _ => None,
        };
        self.machine.on_answer(answer, now);
        self.pump(api);
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        self.pump(api);
        self.inner.on_turn(api);
    }

    fn on_order_update(
        &mut self,
        api: &mut Api<'_, '_, E>,
        update: &ergon_venues::binance_spot_ws::Execution,
    ) {
        self.inner.on_order_update(api, update);
    }

    fn on_timer(&mut self, api: &mut Api<'_, '_, E>, token: u64) {
        if token == PROTECTION_TIMER {
            self.pump(api);
        } else {
            self.inner.on_timer(api, token);
        }
    }

    fn on_fd(&mut self, api: &mut Api<'_, '_, E>, token: u64, ready: Readiness) {
        if token == DCP_LINK && self.link.is_some() {
            self.drive_link(api, Some(ready));
            self.pump(api);
        } else {
            self.inner.on_fd(api, token, ready);
        }
    }

    fn before_park(&mut self, api: &mut Api<'_, '_, E>) -> bool {
        self.inner.before_park(api)
    }
}

/// Whether an event with the [`PROTECTION`] tag is about a switch call (the
/// strategy's own notes carry the tag too, and go to it).
fn matches_switch(event: &Event<'_>) -> bool {
    !matches!(event, Event::Protection { .. } | Event::ProtectionFired)
}
