//! The dead man's switch kept fed, on jumped time in-process: a strategy flooding
//! the budget never gets a refresh refused; a 429 hold longer than the switch's
//! timeout is reported (`Protection`) before the switch fires (`ProtectionFired`),
//! in that order; Hyperliquid's switch is refreshed well before its time and a
//! lapse is counted against its 10 a day.

use ergon_core::{Budget, Class, Part};
use ergon_gateway::protection::{
    Due, Mode, Note, Protection, ProtectionError, State, Unavailable, AT_RISK_MARGIN_NS,
};
use ergon_venues::adapt::{Clock, Venue};
use ergon_venues::binance_futures::{self, BinanceFutures};
use ergon_venues::binance_spot;
use ergon_venues::classify::{fixtures, HttpFile};
use ergon_venues::endpoint::{Prepared, Symbol};
use ergon_venues::switch::{Switch, SwitchAnswer, SwitchSpec};

const MS: i64 = 1_000_000;
const SEC: i64 = 1_000 * MS;

fn futures() -> (BinanceFutures, Budget) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(0, 1_700_000_000_000);
    let auth = binance_spot::Auth::new("key-1", b"secret-1", 5000).unwrap();
    let v = BinanceFutures::new(&mut b, clock, 0, binance_futures::DEFAULT_TABLE)
        .unwrap()
        .with_auth(auth);
    (v, b.build(0).unwrap())
}

fn fixture(case: &str) -> HttpFile {
    let path = fixtures()
        .join("binance-futures/switch")
        .join(format!("{case}.http"));
    HttpFile::parse(&std::fs::read(path).unwrap()).unwrap()
}

/// The end of a hold or halt on one of the switch's guards.
fn guard_hold(v: &BinanceFutures, budget: &Budget, now: i64) -> Option<i64> {
    v.switch_guards()
        .iter()
        .filter_map(|b| budget.stats(*b).ok())
        .filter_map(|s| {
            if s.halted {
                Some(i64::MAX)
            } else {
                s.held_until_ns.filter(|u| *u > now)
            }
        })
        .max()
}

#[test]
fn a_long_hold_warns_then_fires_and_a_flood_never_starves_the_refresh() {
    let (mut v, mut budget) = futures();
    let sym = Symbol::new("BTCUSDT").unwrap();
    let weight = budget.bucket("REQUEST_WEIGHT_1M").unwrap();
    let ip = v.limits.ip();
    let spec = v.switch_spec();
    let mut p = Protection::new(Mode::Required, Some(spec), Some(60_000), 0).unwrap();
    let mut req = Prepared::default();
    let armed = fixture("armed");
    let hold = fixture("weight_429_long");

    let (mut flood_refused, mut refreshes, mut refresh_refused) = (0u32, 0u32, 0u32);
    let mut notes: Vec<(i64, Note)> = Vec::new();
    let mut in_flight: Option<i64> = None;
    let mut hold_from = None;
    let mut rearms = 0u32;
    let mut now = 0;
    // 240 s of jumped time, 50 ms a step: bounded, so a never-idle bug fails fast.
    while now <= 240 * SEC {
        // The strategy floods the shared weight limit with Urgent requests.
        loop {
            match budget.try_charge(
                &[Part::new(ip, 0), Part::new(weight, 20)],
                Class::Urgent,
                now,
            ) {
                Ok(t) => {
                    let f = t.sent();
                    budget.complete(f, now).unwrap();
                }
                Err(_) => {
                    flood_refused += 1;
                    break;
                }
            }
        }
        // At 20 s, one of its requests is answered 429 with Retry-After: 120.
        if now == 20 * SEC {
            v.refresh(&mut req, sym, 60_000, now).unwrap();
            let kind = req.kind().unwrap();
            let _ = hold.with_response(|r| v.on_response(kind, r, &mut budget, now));
            hold_from = Some(now);
        }
        // The switch's answer arrives 20 ms after its send.
        if let Some(sent) = in_flight {
            if now >= sent + 20 * MS {
                let a = armed.with_response(|r| v.read_switch(r));
                p.on_answer(Some(a), now);
                rearms += u32::from(p.take_rearmed());
                in_flight = None;
            }
        }
        p.handle_timeout(now);
        while let Some(due) = p.poll_send(now) {
            assert_eq!(due, Due::Arm);
            if let Some(until) = guard_hold(&v, &budget, now) {
                p.on_blocked(now, until);
                continue;
            }
            v.refresh(&mut req, sym, 60_000, now).unwrap();
            match budget.try_charge(req.parts(), Class::Urgent, now) {
                Ok(t) => {
                    let f = t.sent();
                    budget.complete(f, now).unwrap();
                    refreshes += 1;
                    p.on_sent(due, now);
                    in_flight = Some(now);
                }
                Err(l) => {
                    refresh_refused += 1;
                    p.on_blocked(now, l.ready_at_ns);
                }
            }
        }
        while let Some(n) = p.poll_note() {
            notes.push((now, n));
        }
        now += 50 * MS;
    }

    assert!(flood_refused > 1000, "the flood filled the budget");
    assert_eq!(
        refresh_refused, 0,
        "a refresh was refused while the strategy flooded"
    );
    // Armed at 0, refreshed at 15 s; after the hold (140 s) every 15 s again.
    assert!(refreshes >= 2 + 6, "refreshes: {refreshes}");
    let hold_from = hold_from.unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    let (warned_at, Note::AtRisk { armed_until_ns }) = notes[0] else {
        panic!("first note: {notes:?}");
    };
    assert_eq!(notes[1].1, Note::Fired, "{notes:?}");
    let fired_at = notes[1].0;
    // Warned early: as soon as the next refresh met the hold, well before it fires.
    assert!(warned_at >= hold_from && warned_at <= armed_until_ns - AT_RISK_MARGIN_NS);
    assert!(
        armed_until_ns - warned_at >= 30 * SEC,
        "warned only {} ms ahead",
        (armed_until_ns - warned_at) / MS
    );
    // Fired at the deadline, not before, and while the hold still ran.
    assert!(fired_at >= armed_until_ns && fired_at < armed_until_ns + 100 * MS);
    assert!(fired_at < hold_from + 120 * SEC);
    assert_eq!(p.stats().lapses, 1);
    // Re-armed once the hold ended, and said so once (the gateway then asks the
    // venue which quotes still rest); the first arm is no re-arm.
    assert_eq!(rearms, 1, "armed again after the fire, said once");
    assert_eq!(p.state(), State::Armed);
    assert!(p.armed_until_ns().unwrap() > hold_from + 120 * SEC);
}

/// Hyperliquid's `scheduleCancel` as the adapter states it: a time at least 5 s
/// ahead, at most 10 fires a day per account.
fn hyperliquid_spec() -> SwitchSpec {
    let s = ergon_venues::hyperliquid::SWITCH_SPEC;
    assert_eq!((s.min_timeout_ms, s.fires_per_day), (5_000, Some(10)));
    s
}

#[test]
fn hyperliquid_is_refreshed_well_before_its_time_and_a_lapse_is_counted() {
    let mut p = Protection::new(Mode::Auto, Some(hyperliquid_spec()), None, 0).unwrap();
    let armed = SwitchAnswer::Armed {
        trigger_utc_ms: None,
    };
    let mut now = 0;
    let mut least_margin = i64::MAX;
    // An hour of answers 300 ms after each send: never a lapse, and each refresh
    // leaves at least three quarters of the timeout.
    while now < 3600 * SEC {
        p.handle_timeout(now);
        if let Some(due) = p.poll_send(now) {
            if let Some(until) = p.armed_until_ns() {
                least_margin = least_margin.min(until - now);
            }
            p.on_sent(due, now);
            p.on_answer(Some(armed), now + 300 * MS);
        }
        assert_eq!(p.poll_note(), None, "at {} ms", now / MS);
        now = p.poll_timeout().unwrap().max(now + MS);
    }
    assert_eq!(p.stats().lapses, 0);
    assert!(
        least_margin >= 45 * SEC,
        "a refresh left only {} ms",
        least_margin / MS
    );
    assert_eq!(p.fires_left(), Some(10));

    // Then the refreshes go unanswered: it fires once, counted and reported.
    let until = p.armed_until_ns().unwrap();
    let mut notes = Vec::new();
    for _ in 0..10_000 {
        p.handle_timeout(now);
        if let Some(due) = p.poll_send(now) {
            p.on_sent(due, now);
        }
        while let Some(n) = p.poll_note() {
            notes.push(n);
        }
        if p.state() == State::Fired {
            break;
        }
        now = p.poll_timeout().unwrap_or(now + SEC).max(now + MS);
    }
    assert_eq!(
        notes,
        [
            Note::AtRisk {
                armed_until_ns: until
            },
            Note::Fired
        ]
    );
    assert!(now >= until);
    assert_eq!(p.stats().lapses, 1);
    assert_eq!(p.fires_left(), Some(9));
}

fn bybit() -> ergon_venues::bybit::Bybit {
    let mut b = Budget::builder();
    let clock = Clock::anchor(0, 1_700_000_000_000);
    let auth = ergon_venues::bybit::Auth::new("key-1", b"secret-1", 5000).unwrap();
    ergon_venues::bybit::Bybit::new(&mut b, clock, ergon_venues::bybit::Config::default())
        .unwrap()
        .with_auth(auth)
}

/// Bybit's DCP window call, answered from the adapter's fixtures: a taken window
/// arms nothing (only a private WebSocket subscribed to `dcp` does, which the
/// gateway does not hold), and a refusal means the account has none; either
/// way the switch is unavailable, said why, never armed, and never asked again.
#[test]
fn bybit_dcp_is_unavailable_whether_its_window_is_taken_or_refused() {
    let v = bybit();
    let read = |case: &str| {
        let path = fixtures().join("bybit/switch").join(format!("{case}.http"));
        let file = HttpFile::parse(&std::fs::read(path).unwrap()).unwrap();
        file.with_response(|r| v.read_switch(r))
    };
    for (case, why) in [
        ("configured", Unavailable::OtherConnection),
        ("refused_10005", Unavailable::Refused),
    ] {
        let mut p = Protection::new(Mode::Auto, Some(v.switch_spec()), None, 0).unwrap();
        assert_eq!(p.timeout_ms(), 10_000, "the venue's default window");
        assert_eq!(p.poll_send(0), Some(Due::Arm));
        p.on_sent(Due::Arm, 0);
        p.on_answer(Some(read(case)), 200 * MS);
        assert_eq!(p.state(), State::Unavailable, "{case}");
        assert_eq!(p.why(), Some(why), "{case}");
        assert_eq!(p.armed_until_ns(), None);
        assert!(p
            .line(SEC)
            .starts_with(&format!("protection unavailable why={}", why.as_str())));
        // An hour later: nothing was sent again, nothing was told the strategy.
        let mut now = 200 * MS;
        for _ in 0..1_000 {
            p.handle_timeout(now);
            assert_eq!(p.poll_send(now), None, "{case} at {} ms", now / MS);
            assert_eq!(p.poll_note(), None);
            now = p
                .poll_timeout()
                .unwrap_or(now + 3600 * SEC / 1_000)
                .max(now + MS);
        }
        assert!(now >= 3600 * SEC);
        assert_eq!(p.stats().armed, 0);
    }
    // A throttled answer says nothing: asked again.
    let mut p = Protection::new(Mode::Auto, Some(v.switch_spec()), None, 0).unwrap();
    p.on_sent(Due::Arm, 0);
    p.on_answer(Some(read("rate_10006")), 0);
    assert_eq!(p.state(), State::Arming);
    assert!(p.poll_send(2 * SEC).is_some());
    // Required: nothing it can arm.
    assert_eq!(
        Protection::unavailable(Mode::Required, Unavailable::OtherConnection).unwrap_err(),
        ProtectionError::Unavailable(Unavailable::OtherConnection)
    );
}

/// Bybit's DCP with the gateway's own private WebSocket (`ergon_gateway::dcp`):
/// the taken window waits for the connection; subscribed, the switch is armed
/// until the last frame heard plus the window, moving with each frame; once the
/// connection is gone that deadline stands, reported at risk a margin before it
/// and fired at it; subscribed again, armed again and said so once; a
/// connection heard too long ago arms nothing; a stop disarms without a call.
#[test]
fn bybit_dcp_held_by_the_gateways_connection_is_armed_while_it_is_heard() {
    let v = bybit();
    let read = |case: &str| {
        let path = fixtures().join("bybit/switch").join(format!("{case}.http"));
        let file = HttpFile::parse(&std::fs::read(path).unwrap()).unwrap();
        file.with_response(|r| v.read_switch(r))
    };
    let spec = v.switch_spec();
    let mut p = Protection::new(Mode::Required, Some(spec), Some(10_000), 0)
        .unwrap()
        .with_link();
    assert!(!p.wants_link(), "no connection before the window is taken");
    assert_eq!(p.poll_send(0), Some(Due::Arm));
    p.on_sent(Due::Arm, 0);
    p.on_answer(Some(read("configured")), 100 * MS);
    assert_eq!(p.state(), State::Arming);
    assert!(p.wants_link());
    assert_eq!(p.poll_send(200 * MS), None, "nothing more to call");
    // Not subscribed yet: nothing armed.
    p.on_link(None, 250 * MS);
    assert_eq!(p.state(), State::Arming);
    // Subscribed, heard at 300 ms.
    p.on_link(Some(300 * MS), 300 * MS);
    assert_eq!(p.state(), State::Armed);
    assert_eq!(p.armed_until_ns(), Some(10_300 * MS));
    assert_eq!(p.stats().armed, 1);
    // Heard on every ping (a quarter of the window): the deadline moves, no note.
    let mut t = 300 * MS;
    for _ in 0..8 {
        t += 2_500 * MS;
        p.handle_timeout(t);
        p.on_link(Some(t), t);
        assert_eq!(p.armed_until_ns(), Some(t + 10 * SEC));
        assert_eq!(p.poll_note(), None);
        assert_eq!(p.poll_send(t), None);
    }
    assert_eq!(p.stats().armed, 1, "refreshed, not armed again");
    // The connection drops after the frame heard at `t`: the deadline stands.
    let until = t + 10 * SEC;
    p.on_link(None, t + SEC);
    assert_eq!(p.state(), State::Armed);
    assert_eq!(p.poll_timeout(), Some(until - AT_RISK_MARGIN_NS));
    p.handle_timeout(until - AT_RISK_MARGIN_NS - 1);
    assert_eq!(p.poll_note(), None);
    p.handle_timeout(until - AT_RISK_MARGIN_NS);
    assert_eq!(
        p.poll_note(),
        Some(Note::AtRisk {
            armed_until_ns: until
        })
    );
    assert_eq!(p.state(), State::AtRisk);
    p.handle_timeout(until);
    assert_eq!(p.poll_note(), Some(Note::Fired));
    assert_eq!(p.state(), State::Fired);
    assert_eq!(p.stats().lapses, 1);
    // A connection heard before the fire arms nothing.
    p.on_link(Some(t), until + MS);
    assert_eq!(p.state(), State::Fired);
    // The window is set again, then the connection is subscribed again.
    assert_eq!(p.poll_send(until), Some(Due::Arm));
    p.on_sent(Due::Arm, until);
    p.on_answer(Some(read("configured")), until + 100 * MS);
    assert_eq!(p.state(), State::Fired);
    p.on_link(Some(until + 200 * MS), until + 200 * MS);
    assert_eq!(p.state(), State::Armed);
    assert_eq!(p.armed_until_ns(), Some(until + 10_200 * MS));
    assert!(p.take_rearmed(), "what still rests is asked for once");
    assert!(!p.take_rearmed());
    assert_eq!(p.stats().armed, 2);
    // A clean stop: the disarm is due, and taken without a venue call.
    p.stop(until + SEC);
    assert!(!p.wants_link());
    assert_eq!(p.poll_send(until + SEC), Some(Due::Disarm));
    p.on_sent(Due::Disarm, until + SEC);
    p.on_answer(Some(SwitchAnswer::Disarmed), until + SEC);
    assert_eq!(p.state(), State::Disarmed);
    assert!(p.stopped());
    // A connection the venue does not serve: unavailable, said why.
    let mut p = Protection::new(Mode::Auto, Some(spec), None, 0)
        .unwrap()
        .with_link();
    p.on_sent(Due::Arm, 0);
    p.on_answer(Some(read("configured")), 100 * MS);
    p.on_link_unavailable();
    assert_eq!(p.state(), State::Unavailable);
    assert_eq!(p.why(), Some(Unavailable::OtherConnection));
}

/// Deribit's cancel-on-disconnect, armed over the gateway's order lane
/// (`Arms::Lane`): nothing to call; armed while the lane is set up, until the
/// last frame heard plus the heartbeat interval; the lane gone, it fires at once
/// (the venue cancels the lane's orders when it sees the close, not a window
/// later); set up again, armed again and said so once; a stop disarms without a
/// call. Without a lane the gateway makes it unavailable
/// (`Protection::for_gateway`, tested end to end in `e2e_protection`).
#[test]
fn deribit_cod_is_armed_over_the_order_lane_and_fires_when_it_closes() {
    let mut b = Budget::builder();
    let d = ergon_venues::deribit::Deribit::new(
        &mut b,
        Clock::anchor(0, 1_700_000_000_000),
        ergon_venues::deribit::Config::default(),
    )
    .unwrap();
    let p = Protection::for_account(Mode::Required, &d, None, 0).unwrap();
    assert_eq!(p.state(), State::Arming);
    assert_eq!(p.timeout_ms(), 10_000, "the shortest heartbeat");
    assert!(p.over_lane());
    assert_eq!(
        Protection::for_account(Mode::Required, &d, Some(20_000), 0).unwrap_err(),
        ProtectionError::Timeout(20_000, 10_000, 10_000)
    );
    let mut p = p.with_link();
    assert_eq!(p.poll_send(0), None, "nothing to call");
    p.on_link(None, 10 * MS);
    assert_eq!(p.state(), State::Arming);
    assert_eq!(p.poll_note(), None);
    p.on_link(Some(20 * MS), 20 * MS);
    assert_eq!(p.state(), State::Armed);
    assert_eq!(p.armed_until_ns(), Some(10_020 * MS));
    p.on_link(Some(5 * SEC), 5 * SEC);
    assert_eq!(p.armed_until_ns(), Some(15 * SEC));
    assert_eq!(p.poll_note(), None);
    // The lane drops: the venue cancels its orders now.
    p.on_link(None, 6 * SEC);
    assert_eq!(
        p.poll_note(),
        Some(Note::AtRisk {
            armed_until_ns: 6 * SEC
        })
    );
    assert_eq!(p.poll_note(), Some(Note::Fired));
    assert_eq!(p.state(), State::Fired);
    assert_eq!(p.stats().lapses, 1);
    assert_eq!(p.poll_send(6 * SEC), None, "still nothing to call");
    p.on_link(Some(7 * SEC), 7 * SEC);
    assert_eq!(p.state(), State::Armed);
    assert!(p.take_rearmed());
    p.stop(8 * SEC);
    assert_eq!(p.poll_send(8 * SEC), Some(Due::Disarm));
    p.on_sent(Due::Disarm, 8 * SEC);
    p.on_answer(Some(SwitchAnswer::Disarmed), 8 * SEC);
    assert!(p.stopped());
    let off = Protection::for_account(Mode::Off, &d, None, 0).unwrap();
    assert_eq!(off.state(), State::Off);
}

/// Hyperliquid's switch over a link that delivers each arm but no refresh (the
/// worst case: every arm lapses), for two days on jumped time: each fire is
/// counted against its UTC day and told the strategy; a re-arm waits one timeout
/// after a fire, doubled with each fire of the day; no arm goes out once the
/// day's ten are spent, until 00:00 UTC, when the count starts again.
#[test]
fn hyperliquid_fires_are_counted_per_utc_day_and_never_spent_in_a_loop() {
    // Monotonic 0 is 2023-11-14 22:13:20 UTC: the first day ends 6,400 s in.
    let clock = Clock::anchor(0, 1_700_000_000_000);
    let day_of = |ns: i64| clock.utc_ms(ns).div_euclid(86_400_000);
    let mut p = Protection::new(Mode::Auto, Some(hyperliquid_spec()), None, 0)
        .unwrap()
        .with_clock(clock);
    let timeout = i64::from(p.timeout_ms()) * MS;
    assert_eq!(timeout, 60 * SEC);
    let armed = SwitchAnswer::Armed {
        trigger_utc_ms: None,
    };
    let mut now = 0;
    let mut pending: Option<(i64, bool)> = None; // (answer at, armed?)
    let mut fires: Vec<i64> = Vec::new(); // deadline of each fire
    let mut arms_after_fire: Vec<i64> = Vec::new();
    let mut fired_notes = 0;
    let mut last_fires_today = 0;
    while now < 48 * 3600 * SEC {
        if let Some((at, ok)) = pending {
            if now >= at {
                pending = None;
                p.on_answer(ok.then_some(armed), now);
            }
        }
        let before = p.state();
        let until = p.armed_until_ns();
        p.handle_timeout(now);
        if p.state() == State::Fired && before != State::Fired {
            fires.push(until.unwrap());
            let today = p.stats().fires_today;
            assert!(today == last_fires_today + 1 || today == 1, "{today}");
            last_fires_today = today;
        }
        if let Some(due) = p.poll_send(now) {
            assert_eq!(due, Due::Arm);
            // An arm (not a refresh) goes through; refreshes are lost.
            let is_arm = matches!(p.state(), State::Fired | State::Arming);
            if p.state() == State::Fired {
                arms_after_fire.push(now);
                assert_ne!(p.fires_left(), Some(0), "armed with the day's count spent");
            }
            p.on_sent(due, now);
            pending = Some(if is_arm {
                (now + 300 * MS, true)
            } else {
                (now + 2 * SEC, false)
            });
        }
        while let Some(n) = p.poll_note() {
            fired_notes += usize::from(n == Note::Fired);
        }
        let next = [p.poll_timeout(), pending.map(|(at, _)| at)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + SEC);
        now = next.max(now + MS);
    }
    assert_eq!(fired_notes, fires.len(), "each fire told");
    assert_eq!(p.stats().lapses as usize, fires.len());
    // Per UTC day: at most ten, and the spent count is what stopped it (the
    // back-off alone would not).
    let mut per_day = std::collections::BTreeMap::new();
    for f in &fires {
        *per_day.entry(day_of(*f)).or_insert(0u32) += 1;
    }
    assert_eq!(per_day.len(), 3, "{per_day:?}");
    assert!(per_day.values().all(|n| *n <= 10), "{per_day:?}");
    assert_eq!(per_day[&(day_of(0) + 1)], 10, "{per_day:?}");
    // The back-off: the k-th fire of a day is followed by a re-arm no sooner
    // than k doublings of the timeout.
    for (i, f) in fires.iter().enumerate() {
        let k = fires[..=i]
            .iter()
            .filter(|g| day_of(**g) == day_of(*f))
            .count() as u32;
        if let Some(a) = arms_after_fire.iter().find(|a| **a > *f) {
            assert!(
                *a - f >= timeout << (k - 1),
                "fire {k} of its day at {} s, re-armed {} s later",
                f / SEC,
                (*a - f) / SEC
            );
        }
    }
    // The tenth fire of the second day: nothing until the third day's 00:00.
    let tenth = fires
        .iter()
        .filter(|f| day_of(**f) == day_of(0) + 1)
        .nth(9)
        .unwrap();
    let next_arm = arms_after_fire.iter().find(|a| *a > tenth).unwrap();
    assert!(day_of(*next_arm) == day_of(0) + 2, "re-armed the same day");
    assert!(p.line(now).contains(" fires_left="), "{}", p.line(now));
}
