//! The Hyperliquid profile: what happens to one request.
//!
//! - `POST /info` (`exchangeStatus`, `meta`, `allMids`, `l2Book`, `clearinghouseState`,
//!   `openOrders`, `frontendOpenOrders`, `orderStatus`, `userFills`,
//!   `userRateLimit`) and `POST /exchange` (`order`, `cancel`, `cancelByCloid`,
//!   `modify`, `batchModify`, `scheduleCancel`, `noop`, `updateLeverage`,
//!   `reserveRequestWeight`).
//! - The IP limit: weight per rolling minute (1200) and a short rolling window
//!   in front of it ([`crate::HYPERLIQUID_LIMITS`], configurable), counted at
//!   receipt; over either, HTTP 429. Info weights 2 (`l2Book`, `allMids`,
//!   `clearinghouseState`, `orderStatus`), 20 the rest, `userFills` one more per
//!   20 items returned (charged after the answer); an exchange action weighs
//!   1 + floor(n / 40) for a batch of n.
//! - Every exchange request's signer is recovered from its signature
//!   (`verify`); the signer must be the account (or the vault named by
//!   `vaultAddress`) itself or an API wallet registered for it
//!   ([`crate::Hyperliquid::agents`]), else "User or API Wallet ... does not
//!   exist."; `expiresAfter` in the past refuses the action; the nonce rules of
//!   the signer apply.
//! - The address budget: 10,000 requests plus one per USDC traded plus those
//!   bought (`reserveRequestWeight`, 0.0005 USDC a request from the account's
//!   value, refused whole past it); each order of a batch counts one; once
//!   spent, one request per 10 s; cancels may go on to `min(cap + 100000,
//!   cap × 2)`. Refusals answer `{"status":"err","response":"Too many
//!   cumulative requests sent ..."}`.
//! - Open orders per account are capped (1,000); `scheduleCancel` must be at
//!   least 5 s ahead and may trigger 10 times a UTC day; when it fires, every
//!   open order of the account is cancelled (`crate::engine::switch`).
//! - Answers: `{"status":"ok","response":{"type":..,"data":{"statuses":[..]}}}`
//!   with `resting`/`filled`/`error` per order, `"success"` per cancel; a refused
//!   action is `{"status":"err","response":TEXT}`; a body that does not parse is
//!   HTTP 422. A 5xx fault answers 502 (the venue's proxy says nothing of
//!   whether the action ran).
//! - The WebSocket (`/ws`): the `post` channel (info and actions, run as the
//!   endpoints run them) and the IP's tracked-user slots ([`ws`]).
//! - Not emulated: the volume an account needs before `scheduleCancel` is
//!   allowed.
//!
//! Sources (checked 2026-12-06):
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/rate-limits-and-user-limits>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/exchange-endpoint>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/info-endpoint>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/info-endpoint/perpetuals>,
//! <https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/nonces-and-api-wallets>.
//!
//! It never touches a socket or reads a clock.

mod exchange;
mod info;
mod verify;
pub(crate) mod ws;

use std::net::IpAddr;

use serde_json::{json, Value};

use crate::config::LimitType;
use crate::engine::state::{Admission, Venue};
use crate::http::{Request, Response};
use crate::limits::Key;

pub(crate) use exchange::ExchangeOp;
pub(crate) use info::InfoOp;

/// An admitted Hyperliquid request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HlOp {
    /// `POST /info`.
    Info(InfoOp),
    /// `POST /exchange`.
    Exchange(ExchangeOp),
}

impl HlOp {
    fn changes_orders(&self) -> bool {
        matches!(self, HlOp::Exchange(e) if e.changes_orders())
    }
}

/// `{"status":"err","response":TEXT}`, HTTP 200, as the venue refuses an action.
pub(crate) fn err(text: &str) -> Response {
    Response::json(
        200,
        json!({ "status": "err", "response": text }).to_string(),
    )
}

/// A body the venue cannot read: HTTP 422, its plain-text answer.
fn unreadable() -> Response {
    Response {
        content_type: "text/plain",
        ..Response::json(
            422,
            "Failed to deserialize the JSON body into the target type".to_string(),
        )
    }
}

/// The answer of a 5xx fault: the venue's proxy, executed or not.
pub(crate) fn server_error(_executed: bool) -> Response {
    Response::html(502, "<html><body>502 Bad Gateway</body></html>".to_string())
}

/// The weight of an info request by its `type`.
fn info_weight(kind: &str) -> u64 {
    match kind {
        "l2Book" | "allMids" | "clearinghouseState" | "orderStatus" | "exchangeStatus" => 2,
        _ => 20,
    }
}

impl Venue {
    /// Charges `weight` to every IP weight window; false if any is over.
    pub(crate) fn hl_charge_ip(&mut self, ip: IpAddr, weight: u64, now: i64) -> bool {
        let mut ok = true;
        for l in &mut self.limits {
            if l.spec.kind == LimitType::RequestWeight
                && l.charge(Key::Ip(ip), weight, now) > l.spec.limit
            {
                ok = false;
            }
        }
        ok
    }

    /// The account whose address is `user` (`0x` and 40 hex digits).
    pub(crate) fn hl_account_of(&self, user: &[u8; 20]) -> Option<usize> {
        self.cfg.accounts.iter().position(|a| {
            verify::parse_address(&a.api_key.to_ascii_lowercase()).as_ref() == Some(user)
        })
    }

    /// Everything Hyperliquid decides at receipt.
    pub(crate) fn admit_hyperliquid(
        &mut self,
        req: &Request,
        ip: IpAddr,
        now: i64,
    ) -> Admission<HlOp> {
        if req.method != "POST" || !matches!(req.path.as_str(), "/info" | "/exchange") {
            return Admission::Final(Response {
                content_type: "text/plain",
                ..Response::json(404, "Not Found".to_string())
            });
        }
        let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&req.body) else {
            return Admission::Final(unreadable());
        };
        let admitted = if req.path == "/info" {
            self.admit_info(&body, Some(ip), now).map(HlOp::Info)
        } else {
            self.admit_exchange(&body, Some(ip), now)
                .map(HlOp::Exchange)
        };
        let op = match admitted {
            Ok(op) => op,
            Err(r) => return Admission::Final(r),
        };
        let account = match &op {
            HlOp::Exchange(e) => e.account,
            HlOp::Info(i) => i.account.unwrap_or(0),
        };
        let fault = self.draw_fault(op.changes_orders());
        Admission::Run {
            op,
            account,
            headers: Vec::new(),
            fault,
        }
    }

    /// The IP's 429: over the minute or the short window.
    fn hl_throttled(&mut self) -> Response {
        self.report.throttled += 1;
        Response::json(429, "null".to_string())
    }

    /// Runs an admitted Hyperliquid request.
    pub(crate) fn execute_hyperliquid(&mut self, op: HlOp, now: i64) -> Response {
        match op {
            HlOp::Info(i) => self.execute_info(i, now),
            HlOp::Exchange(e) => self.execute_exchange(e, now),
        }
    }
}
