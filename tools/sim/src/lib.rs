//! ergon-sim: the deterministic simulator. One `u64` seed is one run, in one
//! thread on a simulated clock, of the real gateway ([`ergon_gateway::Gateway`]:
//! its machine, ledger, budget and the Binance Spot adapter, no double of our
//! own code) driven by a random strategy that places and cancels near the
//! limits, against the emulator's venue engine
//! ([`ergon_venue_sim::sansio::SansIo`]) through a network that loses, delays
//! and fails requests ([`net::Fate`]). The promises ([`check`]) are checked as
//! events come and at the end; a failure is shrunk to the fewest strategy
//! actions that still fail it ([`shrink`]) and replays bit for bit from its seed.
//!
//! The venue's clock drifts and steps inside the gateway's guard, and a third
//! of the runs meet a ban (cleared by a person after it ends, or never). Half
//! the runs also have the gateway's own WebSocket API lane (its session over an
//! in-memory pipe, driven by [`ergon_gateway::Gateway::drive_ws`]) against the
//! emulator's sans-IO WebSocket API ([`ergon_venue_sim::sansio_ws`]), whose
//! connection loses frames and answers, delays requests and drops with requests
//! in flight (`ws`).
//!
//! What it does not simulate (yet): other venues' WebSocket lanes, batches, the
//! shared-memory daemon and its restarts, venue clock steps beyond the guard.

pub mod check;
pub mod net;
pub mod rng;
pub mod run;
mod ws;

pub use run::{run, Outcome, Params};

/// The fewest strategy actions with which `seed` still fails under `p`, and that
/// run's outcome; None if `seed` passes.
pub fn shrink(seed: u64, p: &Params) -> Option<(u64, Outcome)> {
    let full = run(seed, p);
    if full.violations.is_empty() {
        return None;
    }
    // A prefix of actions replays the same steps up to its end: bisect on it.
    let (mut lo, mut hi) = (0, full.actions);
    let mut best = (full.actions, full);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        let o = run(
            seed,
            &Params {
                max_actions: mid,
                ..*p
            },
        );
        match o.violations.is_empty() {
            true => lo = mid,
            false => {
                hi = mid;
                best = (mid, o);
            }
        }
    }
    Some(best)
}
