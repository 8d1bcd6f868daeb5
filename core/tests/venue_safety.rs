//! The second safety property (issue 24), independent of any model of the budget:
//! at every admission, the units the venue would count in every window the
//! admission lands in (admitted charges not refunded, every `charge_after` unit,
//! every unit a usage figure says the venue holds beyond ours) stay within the
//! limit. `common::venue` keeps what the venue holds, fed only with what was done
//! and what the venue said; it never reads the budget's counts. The driver checks it
//! on every admission of every property test; this file runs it alone on traces
//! dense in server figures and refunds, where a clamp that forgets units shows.

mod common;

use common::*;
use proptest::prelude::*;

const CHECKS: Checks = Checks {
    safety: false,
    all_or_none: false,
    ready_at: false,
    clock_twin: false,
    refund: false,
    holds: false,
    resend: false,
    shapes: false,
};

/// Charges, refunds and server figures, the clock mostly forward.
const FIGURES: Mix = Mix {
    charge: 10,
    lifecycle: 3,
    clock: 6,
    back: 1,
    charge_after: 4,
    tick: 1,
    holds: 0,
    halts: 0,
    observe: 4,
    resend: 0,
};

proptest! {
    #![proptest_config(cases(600))]

    #[test]
    fn the_venue_never_counts_an_admission_over_its_limit(
        cfg in cfg_strategy(),
        ops in ops_strategy(FIGURES, 300),
    ) {
        let mut d = Driver::new(&cfg, CHECKS);
        d.run(&ops);
        prop_assert!(d.admitted > 0 || ops.len() < 20 || d.refused > 0);
    }
}
