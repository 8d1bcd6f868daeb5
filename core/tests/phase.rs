//! `Budget::set_phase` never mints: after a fixed bucket's windows are realigned,
//! the window holding the change (old alignment) and every window of the new
//! alignment that admits anything after it hold at most the limit, counting every
//! unit admitted before the change too. Checked against a log of admissions.

mod common;

use common::cases;
use ergon_core::{Budget, Class, Part, Spec};
use proptest::prelude::*;

const WINDOW: i64 = 1_000;
const LIMIT: u64 = 5;

/// Units admitted in `[start, start + WINDOW)`.
fn in_window(log: &[(i64, u64)], start: i64) -> u64 {
    log.iter()
        .filter(|(t, _)| (start..start + WINDOW).contains(t))
        .map(|(_, c)| c)
        .sum()
}

/// Run: charges at increasing times, the phase moves to `new_phase` before the
/// charge numbered `at`; returns the log of admissions and the change's instant.
fn run(
    steps: &[(i64, u32)],
    old_phase: i64,
    new_phase: i64,
    guard: i64,
    at: usize,
) -> (Vec<(i64, u64)>, i64) {
    let mut b = Budget::builder();
    let w = b
        .add(
            "w",
            Spec::fixed(LIMIT, WINDOW).phase(old_phase).guard(guard),
        )
        .unwrap();
    let mut budget = b.build(0).unwrap();
    let (mut t, mut log, mut change) = (0, Vec::new(), 0);
    for (k, &(dt, cost)) in steps.iter().enumerate() {
        t += dt;
        if k == at {
            assert_eq!(budget.set_phase(w, new_phase, t), Ok(true));
            change = t;
        }
        if let Ok(ticket) = budget.try_charge(&[Part::new(w, cost)], Class::Urgent, t) {
            // A rate limit keeps the charge; the ticket is not needed further.
            drop(ticket);
            log.push((t, u64::from(cost)));
        }
    }
    (log, change)
}

proptest! {
    #![proptest_config(cases(200))]

    #[test]
    fn a_phase_change_never_over_admits(
        steps in prop::collection::vec((0i64..400, 1u32..=3), 2..40),
        old_phase in 0i64..WINDOW,
        shift in 1i64..WINDOW,
        guard in prop_oneof![Just(0i64), 1i64..WINDOW / 2],
        at in any::<prop::sample::Index>(),
    ) {
        let new_phase = (old_phase + shift) % WINDOW;
        let at = at.index(steps.len());
        let (log, change) = run(&steps, old_phase, new_phase, guard, at);
        // The old window holding the change.
        let old_start = old_phase + (change - old_phase).div_euclid(WINDOW) * WINDOW;
        prop_assert!(in_window(&log, old_start) <= LIMIT, "old window {old_start}: {log:?}");
        // Every new window that admitted something at or after the change.
        for &(t, _) in log.iter().filter(|(t, _)| *t >= change) {
            let start = new_phase + (t - new_phase).div_euclid(WINDOW) * WINDOW;
            prop_assert!(in_window(&log, start) <= LIMIT, "new window {start}: {log:?}");
        }
    }
}

/// A full window realigned to end earlier stays full until its old end, then the
/// new alignment admits again at its next boundary.
#[test]
fn a_full_window_stays_full_until_the_later_end() {
    let mut b = Budget::builder();
    let w = b.add("w", Spec::fixed(LIMIT, WINDOW)).unwrap();
    let mut budget = b.build(0).unwrap();
    let t = budget.try_charge(&[Part::new(w, LIMIT as u32)], Class::Urgent, 10);
    assert!(t.is_ok());
    // New windows at 300 + n·1000: the new window holding 100 ends at 300.
    assert_eq!(budget.set_phase(w, 300, 100), Ok(true));
    assert_eq!(budget.fixed_window(w), Ok(Some((WINDOW, 300))));
    for now in [300, 999, 1_299] {
        assert!(
            budget
                .try_charge(&[Part::new(w, 1)], Class::Urgent, now)
                .is_err(),
            "admitted at {now}"
        );
    }
    assert!(budget
        .try_charge(&[Part::new(w, 1)], Class::Urgent, 1_300)
        .is_ok());
    // A bucket without fixed windows is left alone.
    let mut b = Budget::builder();
    let s = b.add("s", Spec::sliding(5, WINDOW, 10)).unwrap();
    let mut budget = b.build(0).unwrap();
    assert_eq!(budget.set_phase(s, 300, 100), Ok(false));
    assert_eq!(budget.fixed_window(s), Ok(None));
}
