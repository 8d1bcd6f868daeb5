//! Which venue a run plays: Binance Spot ([`mod@crate::run`]) or Bybit v5 linear
//! with its batches ([`crate::venue::bybit`]). The seed picks the profile from a
//! stream of its own ([`Profile::draw`]): a run that plays Binance Spot is bit
//! for bit the run it was before the second profile existed.

use crate::rng::Rng;

/// Mixed into the seed for the profile's draw (a stream of its own).
const PROFILE_STREAM: u64 = 0x0b7b_17b4_7c4e_0000;

/// Runs, per mille, that play Bybit when the seed picks.
pub const BYBIT_PER_MILLE: u64 = 200;

/// The venue a run plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Binance Spot over HTTP (and in half the runs its WebSocket API).
    Spot,
    /// Bybit v5 linear over HTTP, with batches.
    Bybit,
}

impl Profile {
    /// The profile `seed` plays: Bybit in [`BYBIT_PER_MILLE`] of the seeds.
    pub fn draw(seed: u64) -> Profile {
        match Rng::new(seed ^ PROFILE_STREAM).chance(BYBIT_PER_MILLE) {
            true => Profile::Bybit,
            false => Profile::Spot,
        }
    }

    /// The profile named `s` on the command line (`spot`, `bybit`).
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "spot" => Some(Profile::Spot),
            "bybit" => Some(Profile::Bybit),
            _ => None,
        }
    }
}
