//! What a run is asked to do ([`Params`]) and what it saw ([`Outcome`]).

use super::hub;

/// What one run does.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Simulated seconds the strategy acts for.
    pub seconds: i64,
    /// Network faults on (else every request is delivered).
    pub faults: bool,
    /// Stop the strategy after this many actions (the shrinker's knob).
    pub max_actions: u64,
    /// Bans injected (in a third of the runs, with faults on).
    pub bans: bool,
    /// A ban in every run instead: from this second of the run, for this many
    /// seconds, and whether a person clears the halt after it (a directed test).
    pub force_ban: Option<(i64, i64, bool)>,
    /// Runs, per mille, whose gateway is killed and restarted on the daemon's
    /// journal, charges and halts files (with faults on; 1,000: every run).
    pub kills_per_mille: u64,
    /// A venue clock step in every run instead: at this ms of the run, by this
    /// many ms (a directed test).
    pub force_step: Option<(i64, i64)>,
    /// The WebSocket API lane in this run or not, instead of the seed's draw (a
    /// directed test; the draw is made either way, so the rest of the run is the
    /// seed's).
    pub ws_lane: Option<bool>,
    /// The shared-memory hub and its client processes in this run or not,
    /// instead of the seed's draw (a directed test; `hub::draw`).
    pub hub: Option<bool>,
    /// The account's key is Ed25519 (the lane logs on with `session.logon`
    /// and sends orders unsigned) or HMAC, instead of the seed's draw (one
    /// lane run in twenty; a directed test).
    pub ed25519: Option<bool>,
    /// The venue this run plays, instead of the seed's draw
    /// ([`crate::profile::Profile::draw`]).
    pub venue: Option<crate::profile::Profile>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            seconds: 20,
            faults: true,
            max_actions: u64::MAX,
            bans: true,
            force_ban: None,
            kills_per_mille: 250,
            force_step: None,
            ws_lane: None,
            hub: None,
            ed25519: None,
            venue: None,
        }
    }
}

/// What one run saw.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Steps taken (network and strategy events).
    pub steps: u64,
    /// Strategy actions taken.
    pub actions: u64,
    /// Requests the gateway wrote.
    pub writes: u64,
    /// Broken promises, in the order found (empty: the run passed).
    pub violations: Vec<String>,
    /// Bans the run injected.
    pub bans: u64,
    /// Book reads another sender on the IP made (0: it had none).
    pub other_reads: u64,
    /// 429s the gateway was answered.
    pub throttled: u64,
    /// Times the gateway was killed (and restarted).
    pub kills: u64,
    /// Orders a restarted gateway's journal held, queried (and of them, found).
    pub recovered: (u64, u64),
    /// Of the venue's 429s, the ones no gateway could have avoided (weight,
    /// orders): to a request that reached the venue after its clock stepped and
    /// was written before any answer the venue sent after the step came back.
    pub blind_throttled: (u64, u64),
    /// Bans answered to such requests (each excuses at most one ban).
    pub blind_bans: u64,
    /// Requests by kind and final event (`Place Applied`, `Cancel Rejected` ...).
    pub tally: std::collections::BTreeMap<String, u64>,
    /// What the WebSocket API lane did, in the runs that have one.
    pub ws: Option<ergon_gateway::WsApiStats>,
    /// What the shared-memory hub's client processes went through, in the runs
    /// that have it.
    pub clients: Option<hub::HubRun>,
    /// A hash of what the run did, in order (its steps, the bytes written, the
    /// answers read, the events heard): equal digests, the same run.
    pub digest: u64,
    /// Over the lane, `session.logon` requests and order requests without a
    /// signature that reached the venue (an Ed25519 key's runs).
    pub ws_logons: (u64, u64),
}
