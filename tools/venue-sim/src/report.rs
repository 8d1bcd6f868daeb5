//! The final report: what the emulator saw and did, as counts a test can assert on
//! and one JSON object a person can read.
//!
//! Counts come from the emulator's own registry (executions by client order id,
//! windows by venue-clock start), never from what a client says about itself.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::config::{Fault, RateLimit};

/// How often each fault was injected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// [`Fault::CloseBeforeExecute`].
    pub close_before_execute: u64,
    /// [`Fault::ExecuteThenClose`].
    pub execute_then_close: u64,
    /// [`Fault::Delay`].
    pub delay: u64,
    /// ... of which the wait ended and the request was answered (a test that
    /// jumps the venue's clock waits for these to equal `delay` first: a delayed
    /// action still asleep would run on the jumped clock).
    pub delay_settled: u64,
    /// [`Fault::ServerErrorAfterExecute`].
    pub server_error_after_execute: u64,
    /// [`Fault::ServerErrorNoExecute`].
    pub server_error_no_execute: u64,
}

impl FaultCounts {
    pub(crate) fn bump(&mut self, f: Fault) {
        match f {
            Fault::CloseBeforeExecute => self.close_before_execute += 1,
            Fault::ExecuteThenClose => self.execute_then_close += 1,
            Fault::Delay => self.delay += 1,
            Fault::ServerErrorAfterExecute => self.server_error_after_execute += 1,
            Fault::ServerErrorNoExecute => self.server_error_no_execute += 1,
        }
    }

    /// The count for one fault.
    pub fn get(&self, f: Fault) -> u64 {
        match f {
            Fault::CloseBeforeExecute => self.close_before_execute,
            Fault::ExecuteThenClose => self.execute_then_close,
            Fault::Delay => self.delay,
            Fault::ServerErrorAfterExecute => self.server_error_after_execute,
            Fault::ServerErrorNoExecute => self.server_error_no_execute,
        }
    }
}

/// Usage of one configured limit over the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitUsage {
    /// The limit as configured and served.
    pub rate_limit: RateLimit,
    /// Highest count any one key (IP or account) reached in any window. Requests the
    /// venue refused still count, so this can exceed the limit.
    pub peak: u64,
    /// Windows (per key) whose count went above the limit.
    pub windows_over: u64,
    /// `(window start on the venue clock in ms, highest count of any key in it)`,
    /// oldest first, the most recent [`crate::Config::history_cap`] windows.
    pub windows: Vec<(i64, u64)>,
}

/// Distinct `METHOD /path` keys [`Report::by_endpoint`] counts apart.
pub const MAX_ENDPOINTS: usize = 256;

/// Everything the emulator counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The profile played.
    pub profile: String,
    /// TCP connections accepted.
    pub connections: u64,
    /// Complete requests received (parsed, whatever happened next).
    pub requests: u64,
    /// The same, by `METHOD /path` (the first [`MAX_ENDPOINTS`] seen; the
    /// rest under `other`): what a client spent on what.
    pub by_endpoint: BTreeMap<String, u64>,
    /// Byte streams that were not acceptable HTTP requests.
    pub malformed: u64,
    /// Responses written, by status code.
    pub responses: BTreeMap<u16, u64>,
    /// 429s for IP limits (code -1003).
    pub throttled: u64,
    /// 429s for order-count limits (code -1015).
    pub order_rate_limited: u64,
    /// IP bans imposed (automatic and forced).
    pub bans: u64,
    /// Requests answered 418 because their IP was banned.
    pub banned_requests: u64,
    /// Requests refused with -1021 (timestamp outside recvWindow or ahead of the venue).
    pub timestamp_rejects: u64,
    /// Requests refused with -1022 (bad signature).
    pub signature_rejects: u64,
    /// Requests refused for a missing or unknown API key (-2014, -2015).
    pub api_key_rejects: u64,
    /// Orders the matching engine accepted (placements and the new half of
    /// cancel-replaces).
    pub executions: u64,
    /// Executions of a client order id that had already executed once.
    pub duplicates: u64,
    /// Placements refused with -2010 because an open order had the same client id
    /// (a re-send that the venue caught).
    pub duplicate_rejects: u64,
    /// Cancels that found their order open and canceled it.
    pub cancels: u64,
    /// Futures modifications applied to a resting order.
    pub modifies: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Usage of each configured limit.
    pub limits: Vec<LimitUsage>,
    /// The WebSocket endpoint's counts.
    pub ws: WsCounts,
    /// Connections refused at once for the per-IP limit on open connections
    /// (Deribit: HTTP 429).
    pub connections_refused: u64,
    /// The credit pools' use (the `deribit` profile), matching engine first.
    pub credits: Vec<CreditUsage>,
    /// Dead man's switches that fired (each cancelled its scope's open orders).
    pub switch_fires: u64,
    /// Bybit's private WebSocket (`/v5/private`).
    pub bybit_private: BybitPrivateCounts,
    /// Deribit's JSON-RPC WebSocket (`/ws/api/v2`).
    pub deribit_ws: DeribitWsCounts,
    /// Hyperliquid: requests bought with `reserveRequestWeight`, all accounts.
    pub reserved_requests: u64,
    /// Hyperliquid: what they cost, USDC in units of 1e-8.
    pub reserve_paid_e8: u128,
    /// Hyperliquid: orders admitted with a `cloid` the venue had admitted
    /// before in another order action (ran or not): a client sent again what
    /// the venue had taken.
    pub resubmitted: u64,
    /// Hyperliquid's WebSocket (`/ws`).
    pub hl_ws: HlWsCounts,
}

/// What Hyperliquid's WebSocket (`/ws`) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HlWsCounts {
    /// Upgrades accepted.
    pub connects: u64,
    /// Connections over (their users freed).
    pub ends: u64,
    /// `post` requests received.
    pub posts: u64,
    /// Subscriptions refused for the IP's tracked-user limit.
    pub users_refused: u64,
}

/// What Deribit's JSON-RPC WebSocket (`/ws/api/v2`) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeribitWsCounts {
    /// Upgrades accepted.
    pub connects: u64,
    /// `public/auth` requests that authenticated their connection.
    pub auths: u64,
    /// `public/auth` requests refused (unknown client, bad secret or
    /// signature, stale timestamp, bad params).
    pub auth_refused: u64,
    /// Requests received (text frames), whatever happened next.
    pub requests: u64,
    /// `test_request` heartbeats the venue sent.
    pub heartbeats_sent: u64,
    /// `public/test` requests answered.
    pub test_replies: u64,
    /// Orders cancelled by cancel-on-disconnect when their connection ended.
    pub cod_cancels: u64,
    /// Connections closed for leaving a `test_request` unanswered.
    pub closes_by_heartbeat: u64,
    /// Connections closed after 10 minutes without a message from the client.
    pub closes_by_inactivity: u64,
    /// Connections closed after a `too_many_requests` (10028) answer.
    pub closes_by_rate_limit: u64,
    /// Connections closed by `private/logout`.
    pub logouts: u64,
    /// Connections that ended, for any reason (the emulator stopping included).
    pub disconnects: u64,
}

/// What Bybit's private WebSocket (`/v5/private`) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BybitPrivateCounts {
    /// Upgrades accepted.
    pub connects: u64,
    /// `auth` requests that succeeded.
    pub auths: u64,
    /// `auth` requests refused (unknown key, bad signature, expired, malformed,
    /// repeated).
    pub auth_refused: u64,
    /// Successful subscriptions to a `dcp.*` topic (one per topic and connection).
    pub dcp_subscribed: u64,
    /// Heartbeats answered: `{"op":"ping"}` requests and WebSocket control pings.
    pub pings: u64,
    /// Connections that ended, for any reason (the emulator stopping included).
    pub disconnects: u64,
    /// Connections the venue cut for idling past their `max_active_time`.
    pub idle_cuts: u64,
    /// DCP countdowns armed because the last connection subscribed to
    /// `dcp.future` of an account ended.
    pub dcp_armed: u64,
}

/// How one kind of credit pool was used over the run, over all its owners.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreditUsage {
    /// `matching` (matching-engine requests) or `non-matching`.
    pub pool: String,
    /// The pool's size.
    pub max: u64,
    /// Credits added per second.
    pub refill_per_s: u64,
    /// What one request costs.
    pub cost: u64,
    /// Requests that paid.
    pub paid: u64,
    /// Requests refused with `too_many_requests` (10028).
    pub refused: u64,
    /// The fewest credits any pool of this kind held right after a request paid.
    pub lowest: u64,
}

/// What the WebSocket API saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WsCounts {
    /// Upgrades refused for the per-IP connect limit (429, or 418 once banned).
    pub connects_refused: u64,
    /// Frames received from clients, over all connections.
    pub messages: u64,
    /// Connections cut for leaving a ping unanswered past the pong timeout.
    pub cut_pong: u64,
    /// Connections closed for a protocol error (1002/1009).
    pub protocol_errors: u64,
    /// Events written to streams (`executionReport`).
    pub events: u64,
    /// Pings the server sent.
    pub pings: u64,
    /// WebSocket API (`/ws-api/v3`) upgrades accepted.
    pub api_connects: u64,
    /// WebSocket API requests received (text frames).
    pub api_requests: u64,
    /// WebSocket API user data stream subscriptions started.
    pub api_subscriptions: u64,
    /// WebSocket API `session.logon` requests that logged a connection on.
    pub api_logons: u64,
    /// WebSocket API sessions revoked (their key became invalid).
    pub api_revocations: u64,
    /// WebSocket API requests to signed endpoints without `apiKey` on a
    /// logged-on connection (no signature needed).
    pub api_unsigned: u64,
}

/// One order of the registry, as the venue holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderView {
    /// The account's index in [`crate::Config::accounts`].
    pub account: usize,
    /// The venue's order id.
    pub order_id: u64,
    /// The client order id.
    pub client_id: String,
    /// `NEW`, `FILLED` or `CANCELED`.
    pub status: String,
    /// Executed quantity, as the venue writes it (`0.01000000`).
    pub executed_qty: String,
}

impl Report {
    /// Counts one request of `method` to `path` in [`Report::by_endpoint`].
    pub fn count_endpoint(&mut self, method: &str, path: &str) {
        let key = format!("{method} {path}");
        let key =
            match self.by_endpoint.contains_key(&key) || self.by_endpoint.len() < MAX_ENDPOINTS {
                true => key,
                false => "other".to_string(),
            };
        *self.by_endpoint.entry(key).or_default() += 1;
    }

    /// The report as one JSON value.
    pub fn to_json(&self) -> Value {
        let responses: serde_json::Map<String, Value> = self
            .responses
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let faults: serde_json::Map<String, Value> = Fault::ALL
            .iter()
            .map(|f| (f.name().to_string(), json!(self.faults.get(*f))))
            .collect();
        let limits: Vec<Value> = self
            .limits
            .iter()
            .map(|l| {
                json!({
                    "rateLimitType": l.rate_limit.kind.name(),
                    "interval": l.rate_limit.interval.name(),
                    "intervalNum": l.rate_limit.interval_num,
                    "limit": l.rate_limit.limit,
                    "scope": if l.rate_limit.kind.per_ip() { "ip" } else { "account" },
                    "peak": l.peak,
                    "windowsOver": l.windows_over,
                    "windows": l.windows.iter().map(|&(s, u)| json!([s, u])).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "profile": self.profile,
            "connections": self.connections,
            "requests": self.requests,
            "byEndpoint": self.by_endpoint,
            "malformed": self.malformed,
            "responses": responses,
            "throttled429": self.throttled,
            "orderRateLimited429": self.order_rate_limited,
            "bans": self.bans,
            "bannedRequests418": self.banned_requests,
            "timestampRejects": self.timestamp_rejects,
            "signatureRejects": self.signature_rejects,
            "apiKeyRejects": self.api_key_rejects,
            "executions": self.executions,
            "duplicates": self.duplicates,
            "duplicateRejects": self.duplicate_rejects,
            "cancels": self.cancels,
            "modifies": self.modifies,
            "faults": faults,
            "limits": limits,
            "connectionsRefused": self.connections_refused,
            "credits": self.credits.iter().map(|c| json!({
                "pool": c.pool,
                "max": c.max,
                "refillPerSecond": c.refill_per_s,
                "cost": c.cost,
                "paid": c.paid,
                "refused": c.refused,
                "lowest": c.lowest,
            })).collect::<Vec<_>>(),
            "ws": {
                "connectsRefused": self.ws.connects_refused,
                "messages": self.ws.messages,
                "cutForPong": self.ws.cut_pong,
                "protocolErrors": self.ws.protocol_errors,
                "events": self.ws.events,
                "pings": self.ws.pings,
                "apiConnects": self.ws.api_connects,
                "apiRequests": self.ws.api_requests,
                "apiSubscriptions": self.ws.api_subscriptions,
                "apiLogons": self.ws.api_logons,
                "apiRevocations": self.ws.api_revocations,
                "apiUnsigned": self.ws.api_unsigned,
            },
            "bybitPrivate": {
                "connects": self.bybit_private.connects,
                "auths": self.bybit_private.auths,
                "authRefused": self.bybit_private.auth_refused,
                "dcpSubscribed": self.bybit_private.dcp_subscribed,
                "pings": self.bybit_private.pings,
                "disconnects": self.bybit_private.disconnects,
                "idleCuts": self.bybit_private.idle_cuts,
                "dcpArmed": self.bybit_private.dcp_armed,
            },
            "deribitWs": {
                "connects": self.deribit_ws.connects,
                "auths": self.deribit_ws.auths,
                "authRefused": self.deribit_ws.auth_refused,
                "requests": self.deribit_ws.requests,
                "heartbeatsSent": self.deribit_ws.heartbeats_sent,
                "testReplies": self.deribit_ws.test_replies,
                "codCancels": self.deribit_ws.cod_cancels,
                "closesByHeartbeat": self.deribit_ws.closes_by_heartbeat,
                "closesByInactivity": self.deribit_ws.closes_by_inactivity,
                "closesByRateLimit": self.deribit_ws.closes_by_rate_limit,
                "logouts": self.deribit_ws.logouts,
                "disconnects": self.deribit_ws.disconnects,
            },
            "reservedRequests": self.reserved_requests,
            "reservePaidE8": self.reserve_paid_e8.to_string(),
            "resubmitted": self.resubmitted,
            "hyperliquidWs": {
                "connects": self.hl_ws.connects,
                "ends": self.hl_ws.ends,
                "posts": self.hl_ws.posts,
                "usersRefused": self.hl_ws.users_refused,
            },
        })
    }

    /// The usage record of the first limit equal to `limit`.
    pub fn limit(&self, limit: &RateLimit) -> Option<&LimitUsage> {
        self.limits.iter().find(|l| &l.rate_limit == limit)
    }
}
