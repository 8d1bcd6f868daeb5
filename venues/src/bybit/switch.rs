//! Bybit's dead man's switch, DCP (disconnected-cancel-all).

use super::{dcp_product, Bybit, DCP_PATH};
use crate::adapt::{Error, Parts, Request};
use crate::endpoint::{Method, Prepared, Symbol, Writer};
use crate::response::Response;
use arrayvec::ArrayVec;
use ergon_core::{BucketId, Part};

/// **DCP (Disconnect Cancel All): a window, not a countdown.** `POST
/// /v5/order/disconnected-cancel-all` (`product` `OPTIONS` by default,
/// `DERIVATIVES` or `SPOT`; `timeWindow` 3 to 300 s, an integer) sets how long
/// after the account's private WebSockets subscribed to the DCP topic
/// (`dcp.future`, `dcp.spot`, `dcp.option`; [`super::dcp_topic`]) have all gone
/// that every active order of the product is cancelled. The answer carries
/// nothing but `retCode` 0 ("Response Parameters: None"); it takes effect after
/// "a certain time" (query or set again after 10 s). It must be enabled for the
/// account by Bybit (the client manager; institutional clients only); the API
/// neither turns it on nor off. The window is per product and account-wide: it
/// sets the window of every process trading the account.
///
/// So [`Switch::arm`](crate::switch::Switch::arm) sets the window and
/// [`Switch::read_switch`](crate::switch::Switch::read_switch) reads a taken
/// window as [`SwitchAnswer::Configured`](crate::switch::SwitchAnswer::Configured),
/// never as armed: what arms it is a live private WebSocket subscribed to the
/// topic, which the caller must hold itself. A refresh is the same call (nothing
/// to refresh: the connection's heartbeat keeps it), and there is no disarm
/// ([`Error::Unsupported`]). Bybit documents no error code for an account
/// without DCP; the reader takes the documented permission codes (10003, 10005,
/// 10007, 10010, 10028) as [`Refusal::NotAllowed`](crate::switch::Refusal::NotAllowed)
/// and 10001 (a parameter: the window) as
/// [`Refusal::Timeout`](crate::switch::Refusal::Timeout). The rate-limit page
/// lists no limit of its own for the call: it is charged to the IP's 600 per
/// 5 s only, and sent once, before any order.
///
/// Sources: <https://bybit-exchange.github.io/docs/v5/order/dcp>,
/// <https://bybit-exchange.github.io/docs/v5/websocket/private/dcp>,
/// <https://bybit-exchange.github.io/docs/v5/account/dcp-info>,
/// <https://bybit-exchange.github.io/docs/v5/error> (checked 2026-12-02).
impl crate::switch::Switch for Bybit {
    fn switch_spec(&self) -> crate::switch::SwitchSpec {
        crate::switch::SwitchSpec {
            min_timeout_ms: 3_000,
            max_timeout_ms: 300_000,
            // The venue's default window.
            default_timeout_ms: 10_000,
            refresh_div: 1,
            fires_per_day: None,
            scope: crate::switch::Scope::Account,
            arms: crate::switch::Arms::Connection,
        }
    }

    fn arm<'p>(
        &mut self,
        out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        timeout_ms: u32,
        now: i64,
    ) -> Result<&'p Prepared, Error> {
        let w = Writer::start(out);
        let Some(secs) = self.switch_spec().whole_seconds(timeout_ms) else {
            return Err(Error::BadArgument("timeWindow (3..=300 s, whole seconds)"));
        };
        let product = dcp_product(self.category);
        let (w, deadline) = self.signed_json(w, DCP_PATH, now, |w| {
            w.json(&mut true, "product", product);
            w.s(",\"timeWindow\":");
            w.int(i64::from(secs));
            Ok(())
        })?;
        let mut parts = Parts::new();
        parts.push(Part::new(self.ip, 0));
        parts.push(Part::new(self.ip_5s, 1));
        w.finish_with(parts, Request::Read(0), Method::Post, deadline)
    }

    /// There is none: only Bybit turns DCP off.
    fn disarm<'p>(
        &mut self,
        _out: &'p mut Prepared,
        _symbol: Symbol<'_>,
        _now: i64,
    ) -> Result<&'p Prepared, Error> {
        Err(Error::Unsupported)
    }

    fn read_switch(&self, answer: &Response<'_>) -> crate::switch::SwitchAnswer {
        use crate::switch::{coded, Refusal, SwitchAnswer};
        let Some((_, code)) = coded(answer, "retCode") else {
            return SwitchAnswer::Unknown;
        };
        match code {
            0 if (200..=299).contains(&answer.status) => SwitchAnswer::Configured,
            // Timeout, the time window, rate limits, a busy server: nothing
            // about DCP.
            0 | 10000 | 10002 | 10006 | 10016 | 10018 | 10429 => SwitchAnswer::Unknown,
            10001 => SwitchAnswer::Refused(Refusal::Timeout),
            10003 | 10005 | 10007 | 10010 | 10028 => SwitchAnswer::Refused(Refusal::NotAllowed),
            c => SwitchAnswer::Refused(Refusal::Code(c)),
        }
    }

    fn switch_guards(&self) -> ArrayVec<BucketId, { crate::switch::MAX_GUARDS }> {
        let mut g = ArrayVec::new();
        g.push(self.ip);
        g.push(self.ip_5s);
        g
    }
}
