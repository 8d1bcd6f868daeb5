//! Server figures (a usage header, an extra cost known from the answer): the venue
//! counts every unit it says it counted until that unit leaves its window, so the
//! budget books all of it. The only bound is what no venue can mean: one figure adds
//! at most a full bucket at `now` (which drains within one window), and a token debt
//! longer than the bucket's `max_wait` halts it as a ban.
//!
//! Issue 24: each scenario of the clamp that forgot units the venue still held.

#[path = "support/one.rs"]
mod one;

use ergon_core::{BucketId, Budget, Class, Part, Spec, Why};
use one::{admits, one, send};

const SEC: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

/// Sliding window, limit 71 over 1 s: 60 units at t0, an answer adds 20 at t0 +
/// 0.5 s. Once the 60 leave the window the venue still holds the 20: 51 more pass,
/// 52 do not (the clamp booked 11 and let 60 through: 80 > 71 at the venue).
#[test]
fn sliding_charge_after_keeps_every_unit_past_the_older_ones() {
    let (mut budget, w) = one(Spec::sliding(71, SEC, 10));
    let t0 = 0;
    send(&mut budget, w, 60, t0);
    budget.charge_after(w, 20, t0 + SEC / 2).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 80, "all 20 units booked");
    // The 60 have left every window (the ring keeps them one slot longer).
    let after = t0 + SEC + SEC / 10;
    assert!(admits(&budget, w, 51, after));
    assert!(!admits(&budget, w, 52, after), "the venue still holds 20");
    // The 20 leave at t0 + 1.5 s (plus one slot).
    assert!(admits(&budget, w, 71, t0 + 3 * SEC / 2 + SEC / 10));
}

/// Fixed window, limit 71, 1 s, guard 50 ms: 60 units at 0.5 s, an answer adds 20
/// in the trailing guard (0.97 s), where the venue may already be in the next
/// window. That window holds all 20: 51 more pass at 1.06 s, 52 do not.
#[test]
fn fixed_charge_after_in_the_guard_keeps_every_unit_in_the_next_window() {
    let (mut budget, f) = one(Spec::fixed(71, SEC).guard(50 * MS));
    send(&mut budget, f, 60, SEC / 2);
    budget.charge_after(f, 20, 970 * MS).unwrap();
    let next = 1060 * MS;
    assert!(admits(&budget, f, 51, next));
    assert!(!admits(&budget, f, 52, next), "the next window holds 20");
}

/// Fixed window: a figure above `limit - used` is kept whole in its window.
#[test]
fn fixed_charge_after_is_not_clamped_to_the_room_left() {
    let (mut budget, f) = one(Spec::fixed(71, SEC));
    send(&mut budget, f, 60, SEC / 10);
    budget.charge_after(f, 20, SEC / 2).unwrap();
    assert_eq!(budget.stats(f).unwrap().used, 80);
    assert!(!admits(&budget, f, 1, SEC / 2));
    assert!(admits(&budget, f, 71, SEC));
}

/// The venue says 26 used on a limit of 24 (another sender on the IP) while 10 of
/// ours are in the window: the count rises to 26, not 24. Once our 10 leave, the
/// venue still holds 16: 8 more pass, 9 do not.
#[test]
fn observe_used_keeps_the_units_above_the_limit() {
    let (mut budget, w) = one(Spec::sliding(24, SEC, 10));
    send(&mut budget, w, 10, 0);
    budget.observe_used(w, 26, SEC / 2).unwrap();
    let s = budget.stats(w).unwrap();
    assert_eq!(s.used, 26, "raised to the whole figure");
    assert_eq!(s.drift, 16);
    let after = SEC + SEC / 10;
    assert!(admits(&budget, w, 8, after));
    assert!(!admits(&budget, w, 9, after), "the venue still holds 16");
}

/// One figure raises the count by at most a full bucket above the local count.
#[test]
fn observe_used_raises_by_at_most_the_limit() {
    let (mut budget, w) = one(Spec::sliding(24, SEC, 10));
    send(&mut budget, w, 10, 0);
    budget.observe_used(w, 1_000, SEC / 2).unwrap();
    let s = budget.stats(w).unwrap();
    assert_eq!(s.used, 34);
    assert_eq!(s.observed, 1_000, "the figure as the venue gave it");
}

/// Token bucket, burst 10 at 10 units/s: an answer adds 50. The venue takes 5 s to
/// forgive them; the clamp forgave them in one burst (1 s).
#[test]
fn token_charge_after_keeps_the_whole_debt() {
    let (mut budget, t) = one(Spec::token(10, 10));
    budget.charge_after(t, 50, 0).unwrap();
    assert!(!budget.is_halted(t).unwrap(), "5 s is a throttle, no ban");
    assert!(!admits(&budget, t, 1, 2 * SEC));
    assert!(!admits(&budget, t, 1, 4 * SEC + 99 * MS));
    assert!(admits(&budget, t, 1, 4 * SEC + 100 * MS));
    assert!(admits(&budget, t, 10, 5 * SEC));
}

/// A token debt longer than `max_wait` is no throttle but a ban: halted, counted,
/// until a person clears it; then it drains within `max_wait`, not at the end of
/// time.
#[test]
fn token_debt_beyond_max_wait_halts() {
    let (mut budget, t) = one(Spec::token(10, 10).max_wait(10 * SEC));
    budget.charge_after(t, 101, 0).unwrap();
    let s = budget.stats(t).unwrap();
    assert!(s.halted);
    assert_eq!(s.bans, 1);
    assert_eq!(s.ban_until_ns, Some(101 * SEC / 10));
    assert_eq!(s.charged_after, 101);
    let l = budget
        .clone()
        .try_charge(&[Part::new(t, 1)], Class::Urgent, 60 * SEC)
        .unwrap_err();
    assert_eq!(l.why, Why::Halted, "the end of the wait does not resume it");
    budget.clear_halt(t).unwrap();
    assert!(!admits(&budget, t, 1, 9 * SEC));
    assert!(admits(&budget, t, 10, 10 * SEC));
}

/// A debt of exactly `max_wait` is still a throttle.
#[test]
fn token_debt_of_max_wait_is_kept_whole() {
    let (mut budget, t) = one(Spec::token(10, 10).max_wait(10 * SEC));
    budget.charge_after(t, 100, 0).unwrap();
    assert!(!budget.is_halted(t).unwrap());
    assert!(!admits(&budget, t, 1, 9 * SEC));
    assert!(admits(&budget, t, 10, 10 * SEC));
}

fn every_kind() -> (Budget, [BucketId; 5]) {
    let mut b = Budget::builder();
    let t = b.add("t", Spec::token(10, 20)).unwrap(); // 20 units at 0.1 s: 2 s
    let w = b.add("w", Spec::sliding(100, 10 * SEC, 10)).unwrap();
    let f = b.add("f", Spec::fixed(100, 10 * SEC)).unwrap();
    let i = b.add("i", Spec::in_flight(4)).unwrap();
    let g = b.add("g", Spec::gate()).unwrap();
    (b.build(0).unwrap(), [t, w, f, i, g])
}

/// Usage figures of 10^18 and more on every kind: no overflow, a rise of one full
/// bucket per figure at most, drained within one window (the token bucket's burst
/// span); in-flight limits and gates are untouched.
#[test]
fn huge_usage_figures_on_every_kind() {
    for figure in [101, 1_000_000_000_000_000_000, u64::MAX] {
        let (mut budget, [t, w, f, i, g]) = every_kind();
        let at = 5 * SEC;
        for (id, drained) in [(t, at + 2 * SEC), (w, at + 11 * SEC), (f, 10 * SEC)] {
            budget.observe_used(id, figure, at).unwrap();
            let s = budget.stats(id).unwrap();
            assert_eq!(s.used, s.limit, "one figure: one full bucket");
            assert!(s.drift > 0);
            assert!(!s.halted);
            assert!(!admits(&budget, id, 1, at + 1));
            assert!(
                admits(&budget, id, 1, drained),
                "{figure}: not by {drained}"
            );
            // A second figure at once adds at most one more bucket.
            budget.observe_used(id, figure, at).unwrap();
            assert_eq!(budget.stats(id).unwrap().used, figure.min(2 * s.limit));
        }
        for id in [i, g] {
            budget.observe_used(id, figure, at).unwrap();
            assert_eq!(budget.stats(id).unwrap().used, 0);
            assert!(admits(&budget, id, 1, at));
        }
    }
}

/// The largest extra costs on every kind: windows take one full bucket per figure
/// (drained with the window); the token bucket's debt is beyond any wait: a ban.
#[test]
fn huge_extra_costs_on_every_kind() {
    let (mut budget, [t, w, f, i, g]) = every_kind();
    let at = 5 * SEC;
    for id in [t, w, f, i, g] {
        for _ in 0..3 {
            budget.charge_after(id, u32::MAX, at).unwrap();
        }
    }
    for (id, drained) in [(w, at + 11 * SEC), (f, 10 * SEC)] {
        let s = budget.stats(id).unwrap();
        assert_eq!(s.used, 3 * s.limit, "one full bucket per figure");
        assert_eq!(s.charged_after, 3 * u64::from(u32::MAX));
        assert!(!admits(&budget, id, 1, drained - 1));
        assert!(admits(&budget, id, 100, drained));
    }
    let s = budget.stats(t).unwrap();
    assert!(s.halted, "a debt beyond max_wait is a ban");
    assert_eq!(s.bans, 3);
    assert_eq!(s.charged_after, 3 * u64::from(u32::MAX));
    budget.clear_halt(t).unwrap();
    // max_wait defaults to 5 minutes: the cleared bucket drains within it.
    assert!(!admits(&budget, t, 1, at + 298 * SEC));
    assert!(admits(&budget, t, 20, at + 300 * SEC));
    for id in [i, g] {
        assert_eq!(budget.stats(id).unwrap().used, 0);
        assert!(admits(&budget, id, 1, at));
    }
}

/// A figure within the room left is taken as it is.
#[test]
fn a_figure_within_the_limit_is_kept_exactly() {
    let (mut budget, [t, w, f, _, _]) = every_kind();
    budget.observe_used(t, 7, SEC).unwrap();
    budget.observe_used(w, 70, SEC).unwrap();
    budget.observe_used(f, 70, SEC).unwrap();
    budget.charge_after(w, 20, SEC).unwrap();
    assert_eq!(budget.stats(t).unwrap().used, 7);
    assert_eq!(budget.stats(w).unwrap().used, 90);
    assert_eq!(budget.stats(f).unwrap().used, 70);
    // Past the limit too: the venue counts all of it.
    budget.charge_after(w, 20, SEC).unwrap();
    assert_eq!(budget.stats(w).unwrap().used, 110);
}
