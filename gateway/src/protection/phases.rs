//! The two phases around the served one: [`Startup`] arms the switch before the
//! strategies attach ([`arm_at_start`]), [`Shutdown`] cancels every open order
//! before the disarm ([`stop_and_disarm`]).

use arrayvec::ArrayString;
use ergon_core::Class;
use ergon_venues::endpoint::{Prepared, Symbol};

use super::{Mode, Protected, Protection, State};
use crate::dcp::DcpLink;
use crate::driver::{Api, Strategy};
use crate::endpoints::Account;
use crate::events::{Event, Tag};

/// The strategy of the start-up phase: nothing but the first arm, on the loop
/// before the strategies attach, so the switch is armed before the first order.
/// The loop stops once the venue answered, or at `deadline_ns`.
#[derive(Debug)]
pub struct Startup {
    deadline_ns: i64,
}

impl Startup {
    /// Gives up at `deadline_ns` (the loop's clock).
    pub fn new(deadline_ns: i64) -> Self {
        Startup { deadline_ns }
    }
}

impl<E: Account> Strategy<E> for Startup {
    fn on_event(&mut self, _api: &mut Api<'_, '_, E>, _event: Event<'_>) {}

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        if api.now() >= self.deadline_ns {
            api.stop();
        }
    }
}

/// The strategy of the clean stop: cancels every open order of the symbol (read
/// from the venue, by client order id), then lets [`Protected`] disarm the switch
/// and stop the loop; it gives up at its deadline.
#[derive(Debug)]
pub struct Shutdown {
    deadline_ns: i64,
    req: Prepared,
    asked: bool,
    listed: bool,
    pending: u32,
    /// Cancels the venue answered.
    pub cancelled: u32,
    /// Cancels that failed or could not be sent.
    pub failed: u32,
    done: bool,
}

/// The tag of the open-orders read of [`Shutdown`].
const LIST: Tag = 1;
/// The tag of its cancels.
const CANCEL: Tag = 2;

impl Shutdown {
    /// Gives up at `deadline_ns` (the loop's clock).
    pub fn new(deadline_ns: i64) -> Self {
        Shutdown {
            deadline_ns,
            req: Prepared::with_capacity(1024),
            asked: false,
            listed: false,
            pending: 0,
            cancelled: 0,
            failed: 0,
            done: false,
        }
    }

    /// Whether every open order was cancelled (or none was open).
    pub fn done(&self) -> bool {
        self.done
    }
}

impl<E: Account> Strategy<E> for Shutdown {
    fn on_event(&mut self, api: &mut Api<'_, '_, E>, event: Event<'_>) {
        if !event.is_final() {
            return;
        }
        match (event.tag(), event) {
            (LIST, Event::Applied { body, .. }) => {
                self.listed = true;
                let mut ids: Vec<ergon_venues::endpoint::ClientOrderId> = Vec::new();
                api.venue().open_ids(body, &mut |id| {
                    if let Some(id) = core::str::from_utf8(id)
                        .ok()
                        .and_then(|s| ergon_venues::endpoint::ClientOrderId::new(s).ok())
                    {
                        ids.push(id);
                    }
                });
                let now = api.now();
                let mut sym = ArrayString::<32>::new();
                let _ = sym.try_push_str(api.symbol().as_str());
                for id in ids {
                    let Ok(symbol) = Symbol::new(sym.as_str()) else {
                        break;
                    };
                    let o = ergon_venues::endpoint::OrderRef {
                        symbol,
                        client_order_id: id,
                    };
                    let sent = api.venue_mut().cancel(&mut self.req, &o, now).is_ok()
                        && api.submit(&mut self.req, Class::Urgent, CANCEL).is_ok();
                    if sent {
                        self.pending += 1;
                    } else {
                        self.failed += 1;
                    }
                }
            }
            (LIST, _) => {
                self.listed = true;
                self.failed += 1;
            }
            (CANCEL, ev) => {
                self.pending = self.pending.saturating_sub(1);
                match ev {
                    Event::Applied { .. } => self.cancelled += 1,
                    _ => self.failed += 1,
                }
            }
            _ => {}
        }
        if self.listed && self.pending == 0 {
            self.done = self.failed == 0;
        }
    }

    fn on_turn(&mut self, api: &mut Api<'_, '_, E>) {
        if !self.asked {
            self.asked = true;
            let now = api.now();
            let mut sym = ArrayString::<32>::new();
            let _ = sym.try_push_str(api.symbol().as_str());
            let sent = Symbol::new(sym.as_str()).is_ok_and(|s| {
                api.venue_mut()
                    .open_orders(&mut self.req, Some(s), now)
                    .is_ok()
            }) && api.submit(&mut self.req, Class::Urgent, LIST).is_ok();
            if !sent {
                self.listed = true;
                self.failed += 1;
            }
        }
        if api.now() >= self.deadline_ns {
            api.stop();
        }
    }
}

impl Shutdown {
    /// Whether the stop phase may disarm: every open order is cancelled. If the
    /// cancelling failed the switch stays armed: better the venue's late cancel
    /// than quotes left behind.
    pub fn ready_to_disarm(&self) -> bool {
        self.listed && self.pending == 0 && self.failed == 0
    }
}

/// Arms the venue's switch on `lp` before anything else is sent (the start-up
/// phase: [`Startup`] under [`Protected`], up to `within_ns`), with the venue's
/// own connection where a connection arms it (Bybit DCP, on `start`'s venue:
/// [`DcpLink::for_account`]). Returns the gateway, the machine and that
/// connection, to hand to the next [`Protected`]; `Err` if `--protection
/// required` cannot be met (no switch, a timeout out of range, a refusal or no
/// answer). A venue without a switch under `auto` comes back
/// [`State::Unavailable`]: the caller warns.
pub fn arm_at_start<E: Account>(
    lp: &mut ergon_io::event_loop::EventLoop,
    gw: crate::Gateway<E>,
    pool: ergon_io::client::PoolId,
    start: &crate::Start,
    mode: Mode,
    timeout_ms: Option<u32>,
    within_ns: i64,
) -> Result<(crate::Gateway<E>, Protection, Option<DcpLink>), String> {
    let machine =
        Protection::for_gateway(mode, &gw, timeout_ms, lp.now()).map_err(|e| e.to_string())?;
    if machine.state() != State::Arming {
        return Ok((gw, machine, None));
    }
    let link = DcpLink::for_account(gw.venue(), start, None, lp.budget(), machine.timeout_ms())?;
    let sym = gw.symbol().as_str().to_string();
    let symbol = Symbol::new(&sym).map_err(|e| format!("{e:?}"))?;
    let first = Protected::new(Startup::new(lp.now() + within_ns), machine, symbol)
        .with_link(link)
        .with_lane()
        .stop_when_answered();
    let control = std::sync::Arc::new(crate::Control::default());
    let d = crate::run(lp, gw, pool, first, control).map_err(|e| e.to_string())?;
    if d.strategy.machine.state() != State::Armed && mode == Mode::Required {
        return Err(format!("--protection required: {}", d.strategy.not_armed()));
    }
    Ok((d.gateway, d.strategy.machine, d.strategy.link))
}

/// The clean stop: cancels every open order of the symbol, then disarms the switch
/// (the stop phase: [`Shutdown`] under [`Protected`] with `link`, the connection
/// [`arm_at_start`] returned, closed as the disarm; up to `within_ns`). Returns
/// the gateway, the machine and the shutdown's counts; a switch left armed (a
/// cancel failed, no answer) shows in the machine's state.
pub fn stop_and_disarm<E: Account>(
    lp: &mut ergon_io::event_loop::EventLoop,
    gw: crate::Gateway<E>,
    pool: ergon_io::client::PoolId,
    machine: Protection,
    link: Option<DcpLink>,
    within_ns: i64,
) -> Result<(crate::Gateway<E>, Protection, Shutdown), String> {
    if !matches!(machine.state(), State::Armed | State::AtRisk | State::Fired) {
        return Ok((gw, machine, Shutdown::new(0)));
    }
    let sym = gw.symbol().as_str().to_string();
    let symbol = Symbol::new(&sym).map_err(|e| format!("{e:?}"))?;
    let last = Protected::new(Shutdown::new(lp.now() + within_ns), machine, symbol)
        .with_link(link)
        .with_lane()
        .disarm_when(Shutdown::ready_to_disarm);
    let control = std::sync::Arc::new(crate::Control::default());
    let d = crate::run(lp, gw, pool, last, control).map_err(|e| e.to_string())?;
    Ok((d.gateway, d.strategy.machine, d.strategy.inner))
}
