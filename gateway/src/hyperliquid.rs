//! Hyperliquid as the gateway drives it: an account signed by the built-in
//! wallet ([`ergon_venues::hyperliquid::sign::Wallet`]: the account's key, or an
//! API wallet acting for it, optionally for a vault), the venue's time from
//! `exchangeStatus` and its asset table from `meta` (both `POST /info`: the
//! venue has no GET), `scheduleCancel` as the dead man's switch, and reconcile
//! by `cloid` bounded by each action's `expiresAfter`.

use ergon_core::{BucketId, Builder, Part};
use ergon_io::http::Request;
use ergon_venues::adapt::{self, Clock, Request as Kind, Venue};
use ergon_venues::endpoint::Prepared;
use ergon_venues::hyperliquid::sign::{Network, SignError, Wallet};
use ergon_venues::hyperliquid::{self, Exchange, Hyperliquid};
use ergon_venues::json;

use super::endpoints::{Account, AddressBudget, Boot, DeclareError, Keys, NOT_FOUND_MARGIN_NS};
use super::venues::each_string;

const SEC: i64 = 1_000_000_000;

/// An action is refused by the venue this long after its nonce
/// (`expiresAfter`): the bound after which a lost one can no longer run.
pub const EXPIRES_AFTER_MS: i64 = 5_000;

/// `userRateLimit` is read this often: the issue's "once a minute at most".
pub const SYNC_EVERY_NS: i64 = 60 * SEC;

/// What signs for a Hyperliquid account.
#[derive(Clone, Copy, Debug)]
pub struct HlKeys<'a> {
    /// The private key's text (64 hex digits, `0x` optional): the account's own
    /// key or an API wallet's.
    pub key: &'a [u8],
    /// Mainnet or testnet signatures.
    pub network: Network,
    /// The master account an API wallet trades for (`0x` and 40 hex digits);
    /// None: the key is the account's own.
    pub account: Option<&'a str>,
    /// The vault or sub-account traded for; None: the account itself.
    pub vault: Option<&'a str>,
}

fn keys_error(e: SignError) -> DeclareError {
    DeclareError::Keys(e.into())
}

/// The asset table in `meta`'s answer: each `universe` entry's `name` with its
/// index, as the venue numbers assets.
pub fn assets(meta: &[u8]) -> Result<Vec<(String, u32)>, adapt::Error> {
    let v = json::parse(meta)?;
    let universe = v
        .get("universe")?
        .ok_or(adapt::Error::BadField("universe"))?;
    let mut out = Vec::new();
    for (i, a) in universe.items()?.enumerate() {
        let mut buf = [0u8; 32];
        let name = a
            .get("name")?
            .ok_or(adapt::Error::BadField("universe[].name"))?
            .decode_str(&mut buf)
            .map_err(|_| adapt::Error::BadField("universe[].name"))?;
        let i = u32::try_from(i).map_err(|_| adapt::Error::BadField("universe"))?;
        out.push((name.to_string(), i));
    }
    Ok(out)
}

/// Declares the adapter's documented limits ([`hyperliquid::Config::default`])
/// and the endpoints signed with `k`, the assets from the bootstrap's `meta`.
pub fn declare(
    boot: &Boot,
    b: &mut Builder,
    k: &HlKeys<'_>,
) -> Result<Exchange<Wallet>, DeclareError> {
    let mut wallet = Wallet::from_key_text(k.key, k.network).map_err(keys_error)?;
    if let Some(account) = k.account {
        wallet = wallet.acting_for(account).map_err(keys_error)?;
    }
    if let Some(vault) = k.vault {
        wallet = wallet.for_vault(vault).map_err(keys_error)?;
    }
    let meta = boot
        .limits
        .as_deref()
        .ok_or(DeclareError::Limits(adapt::Error::BadField("meta")))?;
    let table = assets(meta).map_err(DeclareError::Limits)?;
    let table: Vec<(&str, u32)> = table.iter().map(|(n, i)| (n.as_str(), *i)).collect();
    let venue = Hyperliquid::new(b, boot.clock, hyperliquid::Config::default())
        .map_err(DeclareError::Buckets)?;
    Exchange::new(venue, wallet, &table, EXPIRES_AFTER_MS).map_err(DeclareError::Buckets)
}

impl Account for Exchange<Wallet> {
    /// The key in `secret`; `api_key`, if not empty, the master account an API
    /// wallet trades for; mainnet, no vault (the daemon calls [`declare`] for
    /// the rest).
    fn declare(
        boot: &Boot,
        b: &mut Builder,
        k: &Keys<'_>,
        _guard: i64,
    ) -> Result<Self, DeclareError> {
        let keys = HlKeys {
            key: k.secret,
            network: Network::Mainnet,
            account: (!k.api_key.is_empty()).then_some(k.api_key),
            vault: None,
        };
        declare(boot, b, &keys)
    }

    /// The minute's weight and the short window in front of it.
    fn windows(&self) -> Vec<(BucketId, i64)> {
        let burst = hyperliquid::Config::default().burst_window_ns;
        vec![(self.venue.weight, 60 * SEC), (self.venue.burst, burst)]
    }

    fn time_path() -> &'static str {
        "/info"
    }

    /// `userRateLimit` once a minute (weight 20, at Bulk): the address budget's
    /// server figure, and two readings make the forecast.
    fn sync_every_ns(&self) -> Option<i64> {
        Some(SYNC_EVERY_NS)
    }

    /// A purchase of address requests if [`hyperliquid::reserve`] decided one
    /// on the last reading (`--reserve-budget`), else `userRateLimit`.
    fn sync_request<'p>(
        &mut self,
        out: &'p mut Prepared,
        now: i64,
    ) -> Result<&'p Prepared, adapt::Error> {
        let ms = self.venue.utc_ms(now);
        if let Some(weight) = self.venue.reserve.take(ms) {
            return match self.reserve_request_weight(out, weight, now) {
                Ok(p) => Ok(p),
                Err(e) => {
                    self.venue.reserve.unsent();
                    Err(e)
                }
            };
        }
        self.user_rate_limit(out, now)
    }

    /// A purchase decided (sent next), or made (read the budget after it).
    fn sync_again(&self) -> bool {
        self.venue.reserve.wants_sync()
    }

    fn sync_unsent(&mut self) {
        self.venue.reserve.unsent();
    }

    /// The last `userRateLimit` reading, with the requests sent since.
    fn address_budget(&self) -> Option<AddressBudget> {
        let a = &self.venue.address;
        let last = a.last()?;
        let remaining = a.remaining()?;
        Some(AddressBudget {
            used: last.allowance().saturating_sub(remaining),
            cap: last.cap,
            surplus: last.surplus,
            forecast_hours: a.hours_to_exhaustion(),
        })
    }

    /// `exchangeStatus` weighs 2.
    fn time_kind() -> Kind<'static> {
        Kind::Info("exchangeStatus")
    }

    /// `exchangeStatus` and `meta` (2 + 20): the venue counts them in the
    /// minute and the short window, and says so in no header.
    fn bootstrap_parts(&self) -> Vec<Part> {
        [Kind::Info("exchangeStatus"), Kind::Info("meta")]
            .into_iter()
            .filter_map(|k| self.parts(k).ok())
            .flat_map(|p| p.to_vec())
            .collect()
    }

    /// `exchangeStatus`: `{"time":MS,...}` (weight 2).
    fn time_request() -> Request<'static> {
        Request {
            method: "POST",
            target: "/info",
            headers: &[("Content-Type", "application/json")],
            body: br#"{"type":"exchangeStatus"}"#,
        }
    }

    fn read_time(body: &[u8]) -> Option<i64> {
        json::parse(body).ok()?.get("time").ok()??.as_i64().ok()
    }

    fn limits_path() -> Option<&'static str> {
        None
    }

    /// `meta`: the asset table (weight 20).
    fn limits_request() -> Option<Request<'static>> {
        Some(Request {
            method: "POST",
            target: "/info",
            headers: &[("Content-Type", "application/json")],
            body: br#"{"type":"meta"}"#,
        })
    }

    /// `meta` weighs 20.
    fn limits_kind() -> Kind<'static> {
        Kind::Info("meta")
    }

    fn set_clock(&mut self, clock: Clock) {
        Exchange::set_clock(self, clock);
    }

    /// An action's `expiresAfter` (its deadline) plus the margin: after it the
    /// venue refuses the action, so a lost one found nowhere never ran.
    fn not_found_after(&self, req: &Prepared) -> Option<i64> {
        req.kind()
            .filter(|k| k.is_write())
            .map(|_| req.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    /// The query's deadline plus the margin: a journal's action expired
    /// [`EXPIRES_AFTER_MS`] after it was signed, before the query's own window
    /// ends (assumes the dead gateway used the same window).
    fn lost_not_found_after(&self, query: &Prepared) -> Option<i64> {
        Some(query.deadline_ns().saturating_add(NOT_FOUND_MARGIN_NS))
    }

    fn switch_mut(&mut self) -> Option<&mut dyn ergon_venues::switch::Switch> {
        Some(self)
    }

    fn switch_spec(&self) -> Option<ergon_venues::switch::SwitchSpec> {
        Some(ergon_venues::switch::Switch::switch_spec(self))
    }

    /// `openOrders`: an array of orders with their `cloid`.
    fn open_ids(&self, body: &[u8], f: &mut dyn FnMut(&[u8])) {
        each_string(body, "", "cloid", f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_time_and_the_asset_table_and_open_orders() {
        let t = br#"{"specialStatuses":null,"time":1700000000127}"#;
        assert_eq!(
            <Exchange<Wallet> as Account>::read_time(t),
            Some(1_700_000_000_127)
        );
        let meta = br#"{"universe":[{"name":"BTC","szDecimals":5},{"name":"ETH","szDecimals":4}]}"#;
        assert_eq!(
            assets(meta).unwrap(),
            vec![("BTC".to_string(), 0), ("ETH".to_string(), 1)]
        );
        assert!(assets(b"{}").is_err());
    }
}
