//! The dead man's switch, kept fed: the venue's cancel-on-disconnect armed before
//! the first order leaves, refreshed on the venue's schedule through the budget,
//! and reported to the strategy before it fires when the budget cannot fit a
//! refresh in time.
//!
//! Two parts:
//!
//! - [`Protection`], the switch's state as a value: no socket, no clock, no
//!   allocation. Drive order: [`Protection::handle_timeout`] with `now`, then
//!   [`Protection::poll_send`] until it says nothing is due, reporting each send
//!   with [`Protection::on_sent`], [`Protection::on_blocked`] (the budget refused,
//!   ready at ...) and later [`Protection::on_answer`]; then drain
//!   [`Protection::poll_note`]; then wait until [`Protection::poll_timeout`].
//! - [`Protected`], a [`Strategy`](crate::Strategy) wrapper that does exactly that on the event
//!   loop: it prepares the venue's [`Switch`](ergon_venues::switch::Switch) calls, submits them under the tag
//!   [`PROTECTION`] (their events never reach the strategy), and hands the
//!   strategy [`Event::Protection`](crate::Event::Protection) and [`Event::ProtectionFired`](crate::Event::ProtectionFired).
//!
//! **Where its budget comes from.** Each switch call charges the venue adapter's
//! own `switch` bucket (see [`ergon_venues::switch`]): a share of the venue's limit
//! that no strategy request charges, whatever its class, so a strategy that floods
//! the budget cannot starve a refresh. It is submitted as [`Class::Urgent`](ergon_core::Class::Urgent), and it
//! is not sent while a hold or a halt is in force on one of the buckets the venue
//! counts it on ([`switch_guards`](ergon_venues::switch::Switch::switch_guards)): that is when the strategy hears
//! [`Event::Protection`](crate::Event::Protection).
//!
//! **When it fires.** The switch's deadline is taken as the time the arm or
//! refresh was sent plus its timeout: never later than the venue's own countdown,
//! which starts when the venue receives it. If no refresh is answered by then,
//! [`Event::ProtectionFired`](crate::Event::ProtectionFired) follows: the strategy's quotes are gone at the
//! venue, and its open orders are to be treated as cancelled-unknown and
//! reconciled when sending is allowed again.
//!
//! **A switch armed by a connection** (Bybit's DCP: the window call only sets the
//! window; the account's private WebSockets subscribed to `dcp` arm it). The
//! gateway holds that connection itself ([`crate::dcp::DcpLink`], handed to
//! [`Protected::with_link`] and from one phase to the next): once the venue took
//! the window, the switch is armed while the connection is subscribed, until
//! the last frame heard plus the window ([`Protection::on_link`]); a connection
//! gone is a refresh that cannot be sent (at risk, then fired, as above).
//! Without it, a taken window leaves the switch [`State::Unavailable`].
//!
//! A crash leaves the switch armed: that is the point. A clean stop cancels, then
//! disarms ([`Protection::stop`]); for a switch armed by a connection, closing it
//! is the disarm.
//!
//! **A switch that may fire only so often** (Hyperliquid: 10 times a day per
//! account, counted from 00:00 UTC) is never armed so that it fires needlessly.
//! Each fire is counted against the UTC day of its deadline (on the venue's
//! clock, [`Protection::with_clock`]) and reported ([`ProtectionStats`], the
//! `--stats` line's `fires_left=`, and [`Event::ProtectionFired`](crate::Event::ProtectionFired)). After a fire
//! the switch is armed again only once whatever kept the refreshes from the
//! venue has ended, and no sooner than one timeout after the fire, doubled with
//! each fire of the day: re-arming at once under the same trouble would let it
//! lapse again, a loop that spends the day's count in minutes. Once the day's
//! count is spent, it is not armed until 00:00 UTC: the venue would refuse it,
//! and each refusal costs a request.

use arrayvec::{ArrayString, ArrayVec};
use ergon_venues::switch::{Arms, Refusal, SwitchAnswer, SwitchSpec};

use crate::endpoints::Account;
pub use crate::endpoints::Unavailable;
pub use crate::events::PROTECTION;

mod phases;
mod protected;

pub use phases::{arm_at_start, stop_and_disarm, Shutdown, Startup};
pub use protected::Protected;

const MS: i64 = 1_000_000;
const DAY_MS: i64 = 86_400_000;

/// The event loop's timer token of [`Protected`].
pub const PROTECTION_TIMER: u64 = (1 << 62) - 3;

/// How long before the deadline a refresh the budget holds back is reported as at
/// risk at the latest: the round trip it still needs.
pub const AT_RISK_MARGIN_NS: i64 = 1_000 * MS;

/// How soon an unanswered or unreadable switch call is tried again.
pub const RETRY_NS: i64 = 1_000 * MS;

/// What the operator asked for (`--protection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Arm where the venue has a switch; warn where it has none.
    #[default]
    Auto,
    /// Arm, or refuse to start.
    Required,
    /// Never arm.
    Off,
}

impl Mode {
    /// Reads `auto`, `required` or `off`.
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "auto" => Mode::Auto,
            "required" => Mode::Required,
            "off" => Mode::Off,
            _ => return None,
        })
    }
}

/// Why the protection cannot be set up as asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtectionError {
    /// `--protection required` on a venue without a switch.
    NoSwitch,
    /// The timeout is outside the venue's range (ms: asked, min, max).
    Timeout(u32, u32, u32),
    /// The venue refused to arm it, and `--protection required` is set.
    Refused(Refusal),
    /// `--protection required`, and the venue's switch cannot cover this
    /// gateway's orders.
    Unavailable(Unavailable),
}

impl core::fmt::Display for ProtectionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProtectionError::NoSwitch => {
                f.write_str("--protection required: this venue has no cancel-on-disconnect switch")
            }
            ProtectionError::Timeout(t, lo, hi) => write!(
                f,
                "--protection-timeout {} s: the venue takes {} to {} s",
                f64::from(*t) / 1e3,
                f64::from(*lo) / 1e3,
                f64::from(*hi) / 1e3
            ),
            ProtectionError::Refused(r) => write!(
                f,
                "--protection required: the venue refused to arm its switch ({r:?})"
            ),
            ProtectionError::Unavailable(why) => write!(f, "--protection required: {why}"),
        }
    }
}

/// The switch's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// `--protection off`.
    Off,
    /// The venue has no switch.
    Unavailable,
    /// Not yet armed: the first arm is due or in flight.
    Arming,
    /// Armed, refreshed on schedule.
    Armed,
    /// Armed, but the budget cannot fit a refresh before it fires.
    AtRisk,
    /// Its deadline passed without a refresh: the venue cancelled every open order
    /// of its scope. Re-armed when sending is allowed again.
    Fired,
    /// The venue refused the arm (the previous state stands at the venue).
    Refused,
    /// Disarmed on a clean stop.
    Disarmed,
}

impl State {
    /// The state as `--stats` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Off => "off",
            State::Unavailable => "unavailable",
            State::Arming => "arming",
            State::Armed => "armed",
            State::AtRisk => "at-risk",
            State::Fired => "fired",
            State::Refused => "refused",
            State::Disarmed => "disarmed",
        }
    }
}

/// What is due at the venue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Arm, or refresh (the same call).
    Arm,
    /// Disarm (a clean stop).
    Disarm,
}

/// What the strategy is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// The budget cannot fit a refresh before `armed_until_ns`.
    AtRisk {
        /// When the switch fires, on the caller's clock (a lower bound).
        armed_until_ns: i64,
    },
    /// The deadline passed without a refresh.
    Fired,
}

/// The switch's counters, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtectionStats {
    /// Arms and refreshes the venue confirmed.
    pub armed: u64,
    /// Arms the venue refused.
    pub refused: u64,
    /// Sends the budget held back (a hold, a ban, no room).
    pub blocked: u64,
    /// Times it was reported at risk.
    pub at_risk: u64,
    /// Times its deadline passed without a refresh (Hyperliquid counts each
    /// against its 10 a day).
    pub lapses: u32,
    /// Of those, the ones of the current UTC day on the venue's clock (counted
    /// from 00:00 UTC), where the venue limits fires per day.
    pub fires_today: u32,
}

/// The switch's state as a value: see the module doc for the drive order.
#[derive(Clone, Debug)]
pub struct Protection {
    spec: Option<SwitchSpec>,
    timeout_ms: u32,
    state: State,
    why: Option<Unavailable>,
    armed_until_ns: Option<i64>,
    next_at_ns: i64,
    sent: Option<(i64, Due)>,
    warned: bool,
    stopping: bool,
    /// Armed again after it fired, not yet taken ([`Protection::take_rearmed`]).
    rearmed: bool,
    notes: ArrayVec<Note, 4>,
    stats: ProtectionStats,
    /// The venue's clock, for the UTC day of a fire (None: one day forever).
    clock: Option<ergon_venues::adapt::Clock>,
    /// The UTC day (days since the epoch) [`ProtectionStats::fires_today`] counts.
    fires_day: i64,
    /// After a fire, no arm before this (see the module doc).
    rearm_at_ns: i64,
    /// The caller holds the connection of the venue's own that arms a switch
    /// armed by a connection ([`Protection::with_link`]).
    linked: bool,
    /// The venue took the window of such a switch: the connection arms it.
    configured: bool,
}

impl Protection {
    /// The protection `mode` asks for over a venue whose switch is `spec` (None: it
    /// has none), with `timeout_ms` (None: the venue's recommended one). The first
    /// arm is due at `now_ns`.
    pub fn new(
        mode: Mode,
        spec: Option<SwitchSpec>,
        timeout_ms: Option<u32>,
        now_ns: i64,
    ) -> Result<Self, ProtectionError> {
        let state = match (mode, spec) {
            (Mode::Off, _) => State::Off,
            (Mode::Required, None) => return Err(ProtectionError::NoSwitch),
            (Mode::Auto, None) => State::Unavailable,
            (_, Some(_)) => State::Arming,
        };
        let why = (state == State::Unavailable).then_some(Unavailable::NoSwitch);
        let timeout_ms = match (state, spec) {
            (State::Arming, Some(s)) => {
                let t = timeout_ms.unwrap_or(s.default_timeout_ms);
                if !s.takes(t) {
                    return Err(ProtectionError::Timeout(
                        t,
                        s.min_timeout_ms,
                        s.max_timeout_ms,
                    ));
                }
                t
            }
            _ => 0,
        };
        Ok(Protection {
            spec,
            timeout_ms,
            state,
            why,
            armed_until_ns: None,
            next_at_ns: now_ns,
            sent: None,
            warned: false,
            stopping: false,
            rearmed: false,
            notes: ArrayVec::new(),
            stats: ProtectionStats::default(),
            clock: None,
            fires_day: 0,
            rearm_at_ns: i64::MIN,
            linked: false,
            configured: false,
        })
    }

    /// The protection `mode` asks for over a venue whose switch is there but
    /// cannot cover this gateway's orders (`why`): nothing is ever sent.
    pub fn unavailable(mode: Mode, why: Unavailable) -> Result<Self, ProtectionError> {
        let mut p = Protection::new(Mode::Off, None, None, 0)?;
        match mode {
            Mode::Off => {}
            Mode::Required => return Err(ProtectionError::Unavailable(why)),
            Mode::Auto => {
                p.state = State::Unavailable;
                p.why = Some(why);
            }
        }
        Ok(p)
    }

    /// The protection `mode` asks for over `account`'s venue: its switch, or why
    /// it has none this gateway can use.
    pub fn for_account<E: Account>(
        mode: Mode,
        account: &E,
        timeout_ms: Option<u32>,
        now_ns: i64,
    ) -> Result<Self, ProtectionError> {
        match account.switch_unavailable() {
            Some(why) => Protection::unavailable(mode, why),
            None => Protection::new(mode, account.switch_spec(), timeout_ms, now_ns),
        }
    }

    /// The protection `mode` asks for over `gw`'s venue
    /// ([`Protection::for_account`]); a switch armed over the order lane
    /// ([`Arms::Lane`]) covers nothing without one (`--order-entry rest`), and
    /// is unavailable then. Hand a lane-armed machine to
    /// [`Protected::with_lane`].
    pub fn for_gateway<E: Account>(
        mode: Mode,
        gw: &crate::Gateway<E>,
        timeout_ms: Option<u32>,
        now_ns: i64,
    ) -> Result<Self, ProtectionError> {
        let p = Protection::for_account(mode, gw.venue(), timeout_ms, now_ns)?;
        if !p.calls() && p.state == State::Arming && gw.ws_api().is_none() {
            return Protection::unavailable(mode, Unavailable::OtherConnection);
        }
        Ok(p)
    }

    /// Whether the switch is armed over the order lane itself ([`Arms::Lane`]).
    pub fn over_lane(&self) -> bool {
        !self.calls()
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Why the switch is [`State::Unavailable`].
    pub fn why(&self) -> Option<Unavailable> {
        self.why
    }

    /// When the switch fires if nothing refreshes it (a lower bound), while armed.
    pub fn armed_until_ns(&self) -> Option<i64> {
        self.armed_until_ns
    }

    /// The state as the metrics and the health check read it: armed (at risk
    /// included) until its deadline; fired, or refused by the venue, as lapsed
    /// (nothing protects the quotes); otherwise absent.
    pub fn published(&self) -> crate::observe::Protection {
        use crate::observe::Protection as P;
        let until = self.armed_until_ns.unwrap_or(0);
        match self.state {
            State::Armed | State::AtRisk => P::Armed {
                armed_until_ns: until,
            },
            State::Fired | State::Refused => P::Lapsed {
                armed_until_ns: until,
            },
            State::Off | State::Unavailable | State::Arming | State::Disarmed => P::Absent,
        }
    }

    /// The timeout each arm asks for, ms (0 when nothing is armed).
    pub fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }

    /// The counters.
    pub fn stats(&self) -> ProtectionStats {
        self.stats
    }

    /// Counts fires per UTC day on the venue's `clock` (without one, every fire
    /// counts against one day).
    pub fn with_clock(mut self, clock: ergon_venues::adapt::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The caller holds the connection of the venue's own that arms a switch
    /// armed by a connection (Bybit DCP: [`crate::dcp::DcpLink`]): a taken window
    /// waits for [`Protection::on_link`] instead of making the switch
    /// unavailable.
    pub fn with_link(mut self) -> Self {
        self.linked = true;
        if !self.calls() {
            // Armed over the order lane itself: nothing to call first.
            self.configured = true;
            self.next_at_ns = i64::MAX;
        }
        self
    }

    /// Whether the switch has a call (all but one armed over the order lane
    /// itself, Deribit's cancel-on-disconnect: [`Arms::Lane`]).
    fn calls(&self) -> bool {
        !self.spec.is_some_and(|s| s.arms == Arms::Lane)
    }

    /// Whether the caller's connection is wanted: the window is taken and the
    /// switch is not being stopped.
    pub fn wants_link(&self) -> bool {
        self.linked && self.configured && !self.stopping
    }

    /// The caller's connection, at `now_ns`: subscribed and last heard at
    /// `heard_ns`, or not (None). While it lives, the switch is armed until the
    /// last frame heard plus the window (the venue cannot have seen it dead
    /// before); when it is gone, that deadline stands and the switch is reported
    /// at risk, then fired, as a refresh that cannot be sent.
    ///
    /// A switch armed over the order lane ([`Arms::Lane`]) fires when that
    /// connection closes, not a window later: the lane gone, its deadline is
    /// now.
    pub fn on_link(&mut self, heard_ns: Option<i64>, now_ns: i64) {
        if heard_ns.is_none() && !self.calls() {
            if self.armed_until_ns.is_some_and(|u| u > now_ns) {
                self.armed_until_ns = Some(now_ns);
            }
            self.handle_timeout(now_ns);
            return;
        }
        if let (Some(h), true) = (heard_ns, self.configured && !self.stopping) {
            let until = h.saturating_add(i64::from(self.timeout_ms) * MS);
            if until <= now_ns {
                // Heard too long ago to arm anything: the connection is silent.
                self.check_risk(now_ns);
                return;
            }
            if !matches!(self.state, State::Armed | State::AtRisk) {
                self.stats.armed += 1;
                self.rearmed |= self.state == State::Fired;
            }
            if self.armed_until_ns.map_or(true, |u| until > u) {
                self.armed_until_ns = Some(until);
                self.state = State::Armed;
                self.warned = false;
            }
        }
        self.check_risk(now_ns);
    }

    /// The caller's connection can never arm the switch (the venue does not
    /// serve it, or refused it).
    pub fn on_link_unavailable(&mut self) {
        if self.linked && !self.stopping {
            self.unusable(Unavailable::OtherConnection);
        }
    }

    /// Fires left today where the venue limits them (Hyperliquid: 10 a day),
    /// counting this process's lapses of the current UTC day.
    pub fn fires_left(&self) -> Option<u32> {
        let per_day = self.spec?.fires_per_day?;
        Some(per_day.saturating_sub(self.stats.fires_today))
    }

    /// Starts the count again when `ns` is on a later UTC day.
    fn roll_day(&mut self, ns: i64) {
        let day = self.utc_day(ns);
        if day > self.fires_day {
            self.fires_day = day;
            self.stats.fires_today = 0;
        }
    }

    /// The UTC day of `ns` on the venue's clock.
    fn utc_day(&self, ns: i64) -> i64 {
        self.clock.map_or(0, |c| c.utc_ms(ns).div_euclid(DAY_MS))
    }

    /// Counts a fire at `until` against its UTC day; returns when the switch may
    /// be armed again, at the earliest (see the module doc).
    fn count_fire(&mut self, until: i64) -> i64 {
        self.stats.lapses += 1;
        let Some(per_day) = self.spec.and_then(|s| s.fires_per_day) else {
            return i64::MIN;
        };
        self.roll_day(until);
        let day = self.fires_day;
        self.stats.fires_today += 1;
        if self.stats.fires_today >= per_day {
            // Spent: not before the venue's next day.
            return match self.clock {
                Some(c) => c.now_ns_at((day + 1) * DAY_MS),
                None => i64::MAX,
            };
        }
        let doubled = 1i64 << (self.stats.fires_today - 1).min(20);
        until.saturating_add((i64::from(self.timeout_ms) * MS).saturating_mul(doubled))
    }

    fn active(&self) -> bool {
        matches!(
            self.state,
            State::Arming | State::Armed | State::AtRisk | State::Fired | State::Refused
        )
    }

    fn refresh_every_ns(&self) -> i64 {
        self.spec
            .map_or(i64::MAX, |s| s.refresh_every_ns(self.timeout_ms))
    }

    /// When the next send may go: after a fire, not before its back-off.
    fn send_at_ns(&self) -> i64 {
        if self.state == State::Fired && !self.stopping {
            self.next_at_ns.max(self.rearm_at_ns)
        } else {
            self.next_at_ns
        }
    }

    /// What is due at `now_ns`, if anything (one call in flight at a time).
    pub fn poll_send(&mut self, now_ns: i64) -> Option<Due> {
        if self.sent.is_some() || now_ns < self.send_at_ns() {
            return None;
        }
        if self.stopping {
            return (self.active() && self.state != State::Disarmed).then_some(Due::Disarm);
        }
        self.active().then_some(Due::Arm)
    }

    /// The call [`Protection::poll_send`] gave was sent at `now_ns`.
    pub fn on_sent(&mut self, due: Due, now_ns: i64) {
        self.sent = Some((now_ns, due));
    }

    /// The budget refused the call until `ready_at_ns` (`i64::MAX`: a halt).
    pub fn on_blocked(&mut self, now_ns: i64, ready_at_ns: i64) {
        self.stats.blocked += 1;
        self.next_at_ns = ready_at_ns.max(now_ns.saturating_add(MS));
        self.check_risk(now_ns);
    }

    /// The venue answered the call sent last (None: no answer, or the request
    /// ended without one; it is tried again).
    pub fn on_answer(&mut self, answer: Option<SwitchAnswer>, now_ns: i64) {
        let Some((sent_at, due)) = self.sent.take() else {
            return;
        };
        let by_connection = self.spec.is_some_and(|s| s.arms == Arms::Connection);
        match (answer, due) {
            // Nothing is armed, and asking again changes nothing: only a
            // connection of the venue's own (which this gateway does not hold)
            // would arm it, or the venue does not allow it for the account.
            // Armed by the caller's connection from here ([`Protection::on_link`]):
            // nothing more to send.
            (Some(SwitchAnswer::Configured), Due::Arm) if self.linked => {
                self.configured = true;
                self.next_at_ns = i64::MAX;
            }
            (Some(SwitchAnswer::Configured), Due::Arm) => {
                self.unusable(Unavailable::OtherConnection)
            }
            (Some(SwitchAnswer::Refused(_)), Due::Arm) if by_connection => {
                self.stats.refused += 1;
                self.unusable(Unavailable::Refused);
            }
            (Some(SwitchAnswer::Armed { .. }), Due::Arm) => {
                self.stats.armed += 1;
                self.rearmed |= self.state == State::Fired;
                let until = sent_at.saturating_add(i64::from(self.timeout_ms) * MS);
                self.armed_until_ns = Some(until);
                self.state = State::Armed;
                self.warned = false;
                self.next_at_ns = sent_at.saturating_add(self.refresh_every_ns());
            }
            (Some(SwitchAnswer::Disarmed), _) if self.stopping => {
                self.armed_until_ns = None;
                self.state = State::Disarmed;
            }
            (Some(SwitchAnswer::Refused(_)), Due::Arm) => {
                self.stats.refused += 1;
                if self.armed_until_ns.is_none() {
                    self.state = State::Refused;
                }
                self.next_at_ns = now_ns.saturating_add(self.refresh_every_ns());
            }
            _ => self.next_at_ns = now_ns.saturating_add(RETRY_NS),
        }
        self.check_risk(now_ns);
    }

    fn unusable(&mut self, why: Unavailable) {
        self.state = State::Unavailable;
        self.why = Some(why);
        self.armed_until_ns = None;
    }

    /// Whether the switch was armed again after it fired, once: sending is allowed
    /// again, and which of the strategy's orders the venue cancelled is unknown
    /// (the caller asks the venue for its open orders).
    pub fn take_rearmed(&mut self) -> bool {
        core::mem::take(&mut self.rearmed)
    }

    /// Advances to `now_ns`: reports a switch whose next send cannot come in time,
    /// and one whose deadline passed.
    pub fn handle_timeout(&mut self, now_ns: i64) {
        self.roll_day(now_ns);
        if let Some(until) = self.armed_until_ns {
            if now_ns >= until {
                if !self.warned {
                    self.note(Note::AtRisk {
                        armed_until_ns: until,
                    });
                }
                self.note(Note::Fired);
                self.rearm_at_ns = self.count_fire(until);
                self.armed_until_ns = None;
                self.warned = false;
                self.state = State::Fired;
                if self.calls() {
                    self.next_at_ns = self.next_at_ns.min(now_ns);
                }
                return;
            }
        }
        self.check_risk(now_ns);
    }

    fn check_risk(&mut self, now_ns: i64) {
        let Some(until) = self.armed_until_ns else {
            return;
        };
        if self.warned || self.stopping {
            return;
        }
        // The next send (or the answer to the one in flight, or the next frame
        // of the caller's connection) cannot arrive in time.
        let next = match self.sent {
            Some(_) => now_ns,
            None if self.configured => now_ns,
            None => self.next_at_ns.max(now_ns),
        };
        if next.saturating_add(AT_RISK_MARGIN_NS) >= until {
            self.warned = true;
            self.state = State::AtRisk;
            self.note(Note::AtRisk {
                armed_until_ns: until,
            });
        }
    }

    fn note(&mut self, n: Note) {
        if n != Note::Fired {
            self.stats.at_risk += 1;
        }
        // At most two are ever queued between drains (AtRisk then Fired).
        let _ = self.notes.try_push(n);
    }

    /// The next note for the strategy, in order.
    pub fn poll_note(&mut self) -> Option<Note> {
        if self.notes.is_empty() {
            None
        } else {
            Some(self.notes.remove(0))
        }
    }

    /// When to call [`Protection::handle_timeout`] and [`Protection::poll_send`]
    /// next, if ever.
    pub fn poll_timeout(&self) -> Option<i64> {
        let send =
            (self.sent.is_none() && (self.active() || self.stopping)).then_some(self.send_at_ns());
        let risk = self
            .armed_until_ns
            .filter(|_| !self.warned)
            .map(|u| u.saturating_sub(AT_RISK_MARGIN_NS));
        let fire = self.armed_until_ns;
        [send, risk, fire].into_iter().flatten().min()
    }

    /// A clean stop: what is due next is the disarm (after the caller cancelled
    /// its orders).
    pub fn stop(&mut self, now_ns: i64) {
        self.stopping = true;
        if self.sent.is_none() {
            self.next_at_ns = now_ns;
        }
    }

    /// Whether a stop finished: disarmed, or nothing was ever armed.
    pub fn stopped(&self) -> bool {
        self.stopping && !(self.active() && self.state != State::Disarmed)
    }

    /// Why the switch is not armed, in words (the start-up's warning or refusal).
    pub fn not_armed(&self) -> String {
        match self.why {
            Some(why) => why.to_string(),
            None => format!(
                "the venue's cancel-on-disconnect switch is not armed ({})",
                self.state.as_str()
            ),
        }
    }

    /// The one-line summary `--stats` and the start-up warning print.
    pub fn line(&self, now_ns: i64) -> ArrayString<96> {
        use core::fmt::Write;
        let mut s = ArrayString::new();
        let _ = write!(s, "protection {}", self.state.as_str());
        if let Some(why) = self.why {
            let _ = write!(s, " why={}", why.as_str());
        }
        if let Some(u) = self.armed_until_ns {
            let _ = write!(s, " armed_until_in_ms={}", (u - now_ns) / MS);
        }
        let _ = write!(s, " lapses={}", self.stats.lapses);
        if let Some(left) = self.fires_left() {
            let _ = write!(s, " fires_left={left}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ergon_venues::switch::Scope;

    const SEC: i64 = 1_000 * MS;

    fn spec() -> SwitchSpec {
        SwitchSpec {
            min_timeout_ms: 10_000,
            max_timeout_ms: 120_000,
            default_timeout_ms: 60_000,
            refresh_div: 4,
            fires_per_day: None,
            scope: Scope::Account,
            arms: ergon_venues::switch::Arms::Call,
        }
    }

    #[test]
    fn modes_and_ranges() {
        assert_eq!(
            Protection::new(Mode::Required, None, None, 0).unwrap_err(),
            ProtectionError::NoSwitch
        );
        let p = Protection::new(Mode::Auto, None, None, 0).unwrap();
        assert_eq!(p.state(), State::Unavailable);
        assert_eq!(p.poll_timeout(), None);
        let p = Protection::new(Mode::Off, Some(spec()), None, 0).unwrap();
        assert_eq!(p.state(), State::Off);
        assert_eq!(
            Protection::new(Mode::Auto, Some(spec()), Some(5_000), 0).unwrap_err(),
            ProtectionError::Timeout(5_000, 10_000, 120_000)
        );
        let mut p = Protection::new(Mode::Auto, Some(spec()), None, 7).unwrap();
        assert_eq!(p.timeout_ms(), 60_000);
        assert_eq!(p.poll_send(6), None);
        assert_eq!(p.poll_send(7), Some(Due::Arm));
    }

    #[test]
    fn armed_then_refreshed_on_schedule() {
        let mut p = Protection::new(Mode::Auto, Some(spec()), None, 0).unwrap();
        p.on_sent(Due::Arm, 0);
        assert_eq!(p.poll_send(0), None, "one call in flight at a time");
        p.on_answer(
            Some(SwitchAnswer::Armed {
                trigger_utc_ms: None,
            }),
            SEC / 10,
        );
        assert_eq!(p.state(), State::Armed);
        assert_eq!(p.armed_until_ns(), Some(60 * SEC));
        assert_eq!(p.poll_timeout(), Some(15 * SEC));
        assert_eq!(p.poll_send(15 * SEC), Some(Due::Arm));
        assert_eq!(p.poll_note(), None);
    }

    #[test]
    fn a_stop_disarms() {
        let mut p = Protection::new(Mode::Auto, Some(spec()), None, 0).unwrap();
        p.on_sent(Due::Arm, 0);
        p.on_answer(
            Some(SwitchAnswer::Armed {
                trigger_utc_ms: None,
            }),
            0,
        );
        p.stop(SEC);
        assert!(!p.stopped());
        assert_eq!(p.poll_send(SEC), Some(Due::Disarm));
        p.on_sent(Due::Disarm, SEC);
        p.on_answer(Some(SwitchAnswer::Disarmed), SEC);
        assert_eq!(p.state(), State::Disarmed);
        assert!(p.stopped());
        assert_eq!(p.poll_send(2 * SEC), None);
    }
}
