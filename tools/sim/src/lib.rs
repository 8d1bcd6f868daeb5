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
//! The venue's clock drifts and steps (inside the gateway's guard, and in a
//! tenth of the runs by 30 to 250 ms, beyond it), and a third
//! of the runs meet a ban (cleared by a person after it ends, or never). Half
//! the runs also have the gateway's own WebSocket API lane (its session over an
//! in-memory pipe, driven by [`ergon_gateway::Gateway::drive_ws`]) against the
//! emulator's sans-IO WebSocket API ([`ergon_venue_sim::sansio_ws`]), whose
//! connection loses frames and answers, delays requests and drops with requests
//! in flight (`ws`).
//!
//! Process faults: in a quarter of the runs (`Params::kills_per_mille`) the
//! gateway keeps the daemon's journal, charges and halts files
//! (`ergon_gatewayd::shm`), is killed at a random step (its gateway, ledger and
//! budget dropped; what it wrote still meets its fate at the venue) and
//! restarts as the daemon does: a fresh budget with the charges replayed, the
//! halts restored, the journal's orders recovered by the daemon's own
//! `Recovery`. A new order in flight at a kill ends by its recovery and is
//! checked against the venue like any other; a cancel dies with the process.
//!
//! A run with the WebSocket lane may have kills and clock steps too: the
//! restarted gateway gets its lane back as the daemon's start builds it, and
//! the lane's answers re-anchor the venue clock. One lane run in twenty signs
//! with an Ed25519 key and logs on with `session.logon`.
//!
//! In an eighth of the runs (`Params::hub`; no WebSocket lane, no gateway
//! kills there) the strategy's orders come from one or two client processes
//! through the real `ShmClient` and the daemon's real `Hub`, driven through
//! `ergon_gateway::Api::hosted` on the simulated clock; a client's process is
//! killed mid-request (at once, after a submit the hub has not taken, with
//! outcomes unread in its ring, halfway through writing a submit slot) and a
//! new one attaches under its name, which must find every outcome kept
//! (`run/hub.rs`).
//!
//! A fifth of the seeds play Bybit v5 linear instead ([`venue::bybit`], picked by
//! [`profile::Profile::draw`] from a stream of its own, so a Binance Spot run is
//! what it was; [`Params::venue`] forces one): the gateway with the Bybit
//! adapter against the emulator's Bybit profile through the same driver
//! ([`run`]'s `Sim`, generic over the adapter) and its faults (the network,
//! bans, clock steps inside the guard, open-orders polls, kills and restarts),
//! its strategy sending batches of 1 to 20 orders
//! (`create-batch`, some items refused alone by the venue) with single orders and
//! cancels near the create limit, each batch item's fate checked against the
//! venue ([`check`]).
//!
//! What it does not simulate (yet): other venues' WebSocket lanes, the hub's
//! files and doorbells, on Bybit clock steps beyond the guard, another sender
//! on the IP, cancel-replace (its amend) and batch cancels.

mod blind;
pub mod check;
pub mod net;
pub mod profile;
pub mod rng;
pub mod run;
pub mod venue;
mod ws;

pub use run::{Outcome, Params};

use profile::Profile;

/// Runs `seed` under `p` on the venue the seed picks ([`Profile::draw`]) or
/// `p.venue` names: Binance Spot ([`run::run`]) or Bybit
/// ([`venue::bybit::run`]).
pub fn run(seed: u64, p: &Params) -> Outcome {
    match p.venue.unwrap_or_else(|| Profile::draw(seed)) {
        Profile::Spot => run::run(seed, p),
        Profile::Bybit => venue::bybit::run(seed, p),
    }
}

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
