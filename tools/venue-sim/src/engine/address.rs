//! Per-address and per-signer records for venues that limit an address rather
//! than a key (Hyperliquid): the nonces each signer has used, each account's
//! requests, volume, purchased requests and dead man's switch triggers, and the
//! users each IP's WebSocket subscriptions track. Plain
//! data: the rules that read and write it live in the profile.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

/// One account's address budget and switch count.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddressState {
    /// Requests counted (each order of a batch is one).
    pub(crate) used: u64,
    /// Cumulative traded volume, USDC in units of 1e-8.
    pub(crate) volume_e8: u128,
    /// Requests bought with `reserveRequestWeight`.
    pub(crate) surplus: u64,
    /// What those cost, USDC in units of 1e-8.
    pub(crate) paid_e8: u128,
    /// When the last request went through on the exhausted rate (venue ms).
    pub(crate) last_exhausted_ms: Option<i64>,
    /// The switch armed last: when it fires (venue ms), if it has not yet been
    /// counted as fired.
    pub(crate) switch_at: Option<i64>,
    /// `(UTC day, switch triggers that day)`.
    pub(crate) fires: (i64, u32),
}

/// One user an IP tracks over WebSocket subscriptions: the connections
/// tracking it, or when (venue ms) and by which connection it was freed.
#[derive(Clone, Debug)]
pub(crate) struct UserSlot {
    pub(crate) user: [u8; 20],
    pub(crate) conns: Vec<u64>,
    pub(crate) freed: Option<(i64, u64)>,
}

/// Every signer's kept nonces and every account's budget.
#[derive(Clone, Debug, Default)]
pub(crate) struct AddressBook {
    /// Per signer (20-byte address): its highest nonces, at most the venue's count.
    pub(crate) nonces: HashMap<[u8; 20], BTreeSet<u64>>,
    /// Per account index.
    pub(crate) accounts: Vec<AddressState>,
    /// Every `(account, cloid)` of an order action admitted so far.
    pub(crate) admitted_cloids: HashSet<(usize, String)>,
    /// Per IP: the users its WebSocket subscriptions track.
    pub(crate) ws_users: HashMap<IpAddr, Vec<UserSlot>>,
}

impl AddressBook {
    pub(crate) fn new(accounts: usize) -> Self {
        AddressBook {
            nonces: HashMap::new(),
            accounts: vec![AddressState::default(); accounts],
            admitted_cloids: HashSet::new(),
            ws_users: HashMap::new(),
        }
    }
}
