//! What a profile's runs do their own way ([`Adapter`]). One driver
//! ([`Sim`]) runs every profile: its clock, network and faults, its bans, the
//! gateway's kills and restarts on the daemon's files, its open-orders polls,
//! the digest and the checks; it asks the profile's adapter for the venue's
//! account and rules, the strategy's requests, and the steps only that profile
//! has (Binance Spot's WebSocket lane, hub and other sender on the IP).

use ergon_core::{BucketId, Budget, Builder};
use ergon_gateway::{Account, Event, WsLane};

use super::{Sim, Step};
use crate::check::Final;

/// A venue adapter the simulator drives, and what its runs do their own way.
pub(crate) trait Adapter: Account + Sized {
    /// The venue's name in the daemon's journal (`JournalOwner`).
    const NAME: &'static str;
    /// The HTTP status of the venue's IP ban (the gateway halts on hearing it).
    const BAN_STATUS: u16;
    /// The read a restart's bootstrap makes before it builds the account (the
    /// venue counts it), as raw HTTP.
    const BOOT_READ: &'static [u8];
    /// The most bytes of one request the gateway prepares.
    const REQUEST_BYTES: usize;

    /// The account, its limits from the bootstrap's answer `info` where the
    /// venue publishes them, its clock anchored at our `now` on the venue's
    /// `venue_ms`, signed with `keys` (API key, secret); `allow_failure`: its
    /// cancel-replaces try the new order whether the cancel ran or not.
    fn open_account(
        info: &str,
        keys: &(String, String),
        allow_failure: bool,
        b: &mut Builder,
        now: i64,
        venue_ms: i64,
    ) -> Self;

    /// One action of the strategy (the driver has counted it and scheduled the
    /// next tick).
    fn act(sim: &mut Sim<Self>);

    /// A final event the checks are about to hear: the strategy's view of it.
    fn heard(_sim: &mut Sim<Self>, _f: &Final) {}

    /// Whether the profile takes event `e` itself (Spot's hub hands its client
    /// processes theirs).
    fn hosted(_sim: &mut Sim<Self>, _e: &Event<'_>) -> bool {
        false
    }

    /// Each turn of the gateway, before its events are read (Spot drives its
    /// WebSocket lane).
    fn before_events(_sim: &mut Sim<Self>) {}

    /// Each turn of the gateway, after its events were read (Spot turns its
    /// hub).
    fn after_events(_sim: &mut Sim<Self>) {}

    /// A step only this profile schedules (another sender on the IP, the
    /// WebSocket lane's network, the hub's processes).
    fn own_step(_sim: &mut Sim<Self>, _s: Step) {}

    /// Whether an answer `body` refuses an order for the order rate (the blind
    /// check of a venue clock step beyond the guard).
    fn order_limited(_body: &str) -> bool {
        false
    }

    /// Whether an answer `body` carries the venue's time of handling it (the
    /// gateway re-anchors its clock on it).
    fn stamped(_body: &str) -> bool {
        false
    }

    /// The WebSocket API lane a restart builds into `budget` with the bucket
    /// `connects` (None: the profile has none).
    fn lane(_acct: &Self, _connects: BucketId, _budget: &Budget, _seed: u64) -> Option<WsLane> {
        None
    }
}
