//! The Bybit profile's runs (issue 43): batches, their items' fates checked
//! against the venue, and the seeds that found bugs.

use ergon_sim::venue::Profile;
use ergon_sim::{run, Params};

fn bybit() -> Params {
    Params {
        venue: Some(Profile::Bybit),
        ..Params::default()
    }
}

/// Seed 0 found it: a batch that repeated an `orderLinkId` went out, Bybit
/// placed the first and refused the second, the answer was lost, and the
/// query of each item by its own id found the one order for both. The gateway
/// now refuses such a batch (DuplicateId) before it is sent.
#[test]
fn a_batch_repeating_an_id_is_refused_before_the_venue_seed_0() {
    let o = run(0, &bybit());
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    assert!(o.tally.get("Batch DuplicateId").is_some_and(|&n| n > 0));
}

/// Seed 682 found it: two creates sent 1,001.9 ms apart reached Bybit 999.2 ms
/// apart (the first's way the slower), and the venue counted 41 orders in one
/// rolling second of 40 (a 10006). The adapter's rolling windows now outlast
/// the venue's by the daemon's guard (`Bybit::guarded`, `--guard-ms`).
#[test]
fn rolling_windows_outlast_the_venues_by_the_guard_seed_682() {
    let o = run(682, &bybit());
    assert!(o.violations.is_empty(), "{:?}", o.violations);
}
