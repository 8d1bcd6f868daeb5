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
