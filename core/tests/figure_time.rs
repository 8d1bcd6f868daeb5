//! A usage figure the venue stamped with its own time of counting
//! (`Budget::observe_used_at`): on a fixed window, a figure whose answer arrives
//! after a boundary belongs to the window it was counted in, not to the one its
//! answer arrived in. Within the guard of a boundary it may be either, so both
//! are raised.
//!
//! The property test keeps the venue's truth apart from the budget. The venue's
//! clock is ours plus an offset; the budget's windows are aligned on an
//! estimate of it (off by less than a third of the guard), and stamps are
//! mapped back with that same estimate: the contract of `observe_used_at`, which
//! the gateway keeps by re-anchoring its venue clock and realigning the windows
//! on one time read. Each request is counted by the venue at its own time (sent
//! plus a delay under half the guard) and stamped then or a little later (the
//! matching engine's `transactTime` follows the API's count, by less than a
//! third of the guard here); the venue's window also holds units of another
//! sender, and each answer carries the venue's count of the window the request
//! was counted in and its stamp, read any time later. At every admission, every
//! window the venue may count it in holds at most the limit: our units, plus the
//! other sender's units that a figure read so far revealed in that window.

use std::collections::BTreeMap;

#[path = "support/one.rs"]
mod one;

use ergon_core::{BucketId, Budget, Class, Part, Spec};
use one::{admits, one, send};
use proptest::prelude::*;

const SEC: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
const GUARD: i64 = 30 * MS;

fn fixed(limit: u64) -> (Budget, BucketId) {
    aligned(limit, 0)
}

/// Windows starting at `phase` (and every second from it).
fn aligned(limit: u64, phase: i64) -> (Budget, BucketId) {
    one(Spec::fixed(limit, SEC).guard(GUARD).phase(phase))
}

/// Window 0 filled at 0.5 s; the answer of an order counted at 0.9 s says 10 and
/// is read at 1.1 s. With its stamp, window 1 is free; read as a figure of now
/// (the stamp unknown), window 1 must be taken as full.
#[test]
fn a_figure_read_after_the_boundary_is_the_window_it_was_counted_in() {
    let (mut budget, f) = fixed(10);
    send(&mut budget, f, 10, SEC / 2);
    let mut unstamped = budget.clone();
    budget.observe_used_at(f, 10, 900 * MS, 1100 * MS).unwrap();
    assert!(admits(&budget, f, 10, 1100 * MS), "window 1 holds nothing");
    unstamped.observe_used(f, 10, 1100 * MS).unwrap();
    assert!(!admits(&unstamped, f, 1, 1100 * MS));
}

/// Stamped 10 ms after the boundary (inside its guard), read 20 ms after it: the
/// venue counts a request before it stamps it, so it may have counted it in
/// window 0; a charge now, inside the guard, counts in both windows.
#[test]
fn a_figure_stamped_within_the_guard_after_a_boundary_raises_both_windows() {
    let (mut budget, f) = fixed(10);
    send(&mut budget, f, 4, SEC / 2);
    budget.observe_used_at(f, 7, 1010 * MS, 1020 * MS).unwrap();
    assert!(admits(&budget, f, 3, 1020 * MS));
    assert!(
        !admits(&budget, f, 4, 1020 * MS),
        "windows 0 and 1 may hold 7"
    );
}

/// Stamped 10 ms before the boundary, read well after it: the venue counted it
/// before it stamped it, in window 0, so window 1 is free. Read without its
/// stamp inside the guard, the figure may be either window's.
#[test]
fn a_figure_stamped_before_a_boundary_is_never_the_next_windows() {
    let (mut budget, f) = fixed(10);
    send(&mut budget, f, 4, SEC / 2);
    let mut unstamped = budget.clone();
    budget.observe_used_at(f, 7, 990 * MS, 1200 * MS).unwrap();
    assert!(admits(&budget, f, 10, 1200 * MS), "window 1 holds nothing");
    unstamped.observe_used(f, 7, 990 * MS).unwrap();
    assert!(!admits(&unstamped, f, 4, 1200 * MS), "window 1 may hold 7");
}

/// A stamp after now (the clock estimate behind the venue's, an answer read at
/// once) still names its window: stamped 5 ms into window 1 and read 20 ms
/// before it starts, the figure is window 1's.
#[test]
fn a_stamp_after_now_still_names_its_window() {
    let (mut budget, f) = fixed(10);
    budget.observe_used_at(f, 7, 1005 * MS, 980 * MS).unwrap();
    assert!(admits(&budget, f, 3, 1100 * MS));
    assert!(!admits(&budget, f, 4, 1100 * MS), "window 1 holds 7");
}

/// Counted in the window the answer arrives in: that window is raised, as a
/// figure of now would raise it.
#[test]
fn a_figure_counted_in_the_current_window_raises_it() {
    let (mut budget, f) = fixed(10);
    send(&mut budget, f, 2, 1050 * MS);
    budget.observe_used_at(f, 9, 1100 * MS, 1300 * MS).unwrap();
    assert!(admits(&budget, f, 1, 1300 * MS));
    assert!(
        !admits(&budget, f, 2, 1300 * MS),
        "7 units of another sender"
    );
}

/// A stamp more than a guard after now is no stamp, read at now; one older than
/// every window tracked raises only the previous one, never lowers a count.
#[test]
fn stamps_out_of_range_are_read_carefully() {
    let (mut budget, f) = fixed(10);
    budget.observe_used_at(f, 6, 5 * SEC, 1100 * MS).unwrap();
    assert!(admits(&budget, f, 4, 1100 * MS));
    assert!(!admits(&budget, f, 5, 1100 * MS), "the figure is now's");
    let (mut budget, f) = fixed(10);
    send(&mut budget, f, 3, 3500 * MS);
    budget.observe_used_at(f, 9, 0, 3600 * MS).unwrap();
    assert!(admits(&budget, f, 7, 3600 * MS));
    assert!(!admits(&budget, f, 8, 3600 * MS), "our 3 stay counted");
}

/// On sliding windows and token buckets the stamp changes nothing: the figure
/// is booked at now, as `observe_used` books it.
#[test]
fn other_kinds_book_the_figure_at_now() {
    for spec in [Spec::sliding(10, SEC, 10), Spec::token(10, 10)] {
        let mut b = Budget::builder();
        let id = b.add("x", spec).unwrap();
        let mut stamped = b.build(0).unwrap();
        let mut plain = stamped.clone();
        stamped.observe_used_at(id, 6, 100 * MS, 900 * MS).unwrap();
        plain.observe_used(id, 6, 900 * MS).unwrap();
        for t in [900 * MS, 1500 * MS, 2 * SEC] {
            for cost in 1..=10 {
                assert_eq!(admits(&stamped, id, cost, t), admits(&plain, id, cost, t));
            }
        }
    }
}

/// One step of a trace: wait `gap`, then send `cost` (refused or admitted); the
/// venue counts it `delay` later (under half the guard), with `foreign` units of
/// another sender counted in the same window just before it, and stamps it `lag`
/// after counting it; its answer is read `late` after the stamp.
#[derive(Clone, Debug)]
struct Step {
    gap: i64,
    cost: u32,
    delay: i64,
    foreign: u64,
    lag: i64,
    late: i64,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..400 * MS,
        1u32..4,
        0..GUARD / 2,
        prop_oneof![3 => Just(0u64), 1 => 0u64..6],
        prop_oneof![1 => Just(0), 1 => 0..GUARD / 3],
        0..600 * MS,
    )
        .prop_map(|(gap, cost, delay, foreign, lag, late)| Step {
            gap,
            cost,
            delay,
            foreign,
            lag,
            late,
        })
}

/// The venue: what it counted per window, ours and the other sender's.
#[derive(Default)]
struct Venue {
    ours: BTreeMap<i64, u64>,
    foreign: BTreeMap<i64, u64>,
}

impl Venue {
    fn window(t: i64) -> i64 {
        t.div_euclid(SEC)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn stamped_figures_never_let_a_window_over_its_limit(
        limit in 4u64..12,
        off in -GUARD / 3..GUARD / 3,
        error in -GUARD / 3..GUARD / 3,
        steps in proptest::collection::vec(step(), 1..120),
    ) {
        // The venue's clock is ours plus `off`; the budget believes `off + error`,
        // for its windows and for stamps alike.
        let (mut budget, f) = aligned(limit, -(off + error));
        let mut venue = Venue::default();
        // What figures read so far revealed of the other sender, per window.
        let mut revealed: BTreeMap<i64, u64> = BTreeMap::new();
        // Answers in flight: (read at, the venue's stamp, the window it counted
        // the request in, figure).
        let mut answers: Vec<(i64, i64, i64, u64)> = Vec::new();
        let mut t = SEC;
        for s in &steps {
            t += s.gap;
            answers.sort_unstable();
            while let Some(&(read, stamp, w, figure)) = answers.first() {
                if read > t {
                    break;
                }
                answers.remove(0);
                let counted = stamp - (off + error);
                budget.observe_used_at(f, figure, counted, read).unwrap();
                let ours = venue.ours.get(&w).copied().unwrap_or(0);
                let seen = revealed.entry(w).or_default();
                *seen = (*seen).max(figure.saturating_sub(ours));
            }
            let Ok(ticket) = budget.try_charge(&[Part::new(f, s.cost)], Class::Urgent, t) else {
                continue;
            };
            let _flight = ticket.sent();
            // Every window the venue may count it in stays within the limit.
            let v = t + off;
            for w in [Venue::window(v), Venue::window(v + GUARD / 2)] {
                let ours = venue.ours.get(&w).copied().unwrap_or(0);
                let seen = revealed.get(&w).copied().unwrap_or(0);
                prop_assert!(
                    ours + u64::from(s.cost) + seen <= limit,
                    "window {w} at {t}: ours {ours} + {} + revealed {seen} > {limit}",
                    s.cost
                );
            }
            let w = Venue::window(v + s.delay);
            *venue.foreign.entry(w).or_default() += s.foreign;
            *venue.ours.entry(w).or_default() += u64::from(s.cost);
            let figure = venue.ours[&w] + venue.foreign[&w];
            let stamp = v + s.delay + s.lag;
            answers.push((t + s.delay + s.lag + s.late, stamp, w, figure));
        }
    }
}
