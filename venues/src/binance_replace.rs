//! Binance Spot's cancel-replace (`POST /api/v3/order/cancelReplace`,
//! `order.cancelReplace`): two operations in one request, a cancel then a new
//! order, each with its own fate.
//!
//! `cancelReplaceMode` decides what the venue does when the cancel fails:
//! `STOP_ON_FAILURE` does not attempt the new order, `ALLOW_FAILURE` places it
//! anyway. The answer says what ran: HTTP 200 (both succeeded), or an error
//! carrying `data` with `cancelResult` and `newOrderResult` (`SUCCESS`,
//! `FAILURE`, `NOT_ATTEMPTED`) and `cancelResponse` / `newOrderResponse` (the
//! part's own answer: its order, or its own `code` and `msg`):
//! - `-2022` "Order cancel-replace failed.": neither ran (the cancel failed, and
//!   the new order failed or was not attempted);
//! - `-2021` "Order cancel-replace partially failed.": one ran, the other did not
//!   (`STOP_ON_FAILURE`: the cancel ran and the new order failed; `ALLOW_FAILURE`
//!   also: the cancel failed and the new order was placed).
//!
//! [`parts`] reads each part's verdict from that answer. A part whose own code
//! says its status is unknown (-1006, -1007, -1008) stays Unknown: the gateway
//! queries it by its own client order id. Nothing here allocates.
//!
//! Source (checked 2026-12-06): <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/trading-endpoints#cancel-an-existing-order-and-send-a-new-order-trade>
//! (the modes, the result values and the -2021/-2022 examples),
//! <https://developers.binance.com/docs/binance-spot-api-docs/errors> (the codes).

use arrayvec::ArrayVec;
use ergon_core::Verdict;

use crate::json::Value;

/// `cancelReplaceMode`: what the venue does when the cancel fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplaceMode {
    /// `STOP_ON_FAILURE`: the new order is not attempted if the cancel fails
    /// (the default: a quote is never doubled).
    #[default]
    StopOnFailure,
    /// `ALLOW_FAILURE`: the new order is placed whether the cancel succeeds or not.
    AllowFailure,
}

impl ReplaceMode {
    /// The parameter's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplaceMode::StopOnFailure => "STOP_ON_FAILURE",
            ReplaceMode::AllowFailure => "ALLOW_FAILURE",
        }
    }
}

/// The adapter's cancel-replace state: the mode it sends and the parts of the
/// last answer it read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Replace {
    pub(crate) mode: ReplaceMode,
    /// The last cancel-replace answer's parts, in the order of the request's
    /// client order ids: the new order, then the cancel. Empty when the last
    /// answer was not a cancel-replace with readable parts.
    pub(crate) parts: ArrayVec<Verdict, 2>,
}

impl Replace {
    /// Reads a cancel-replace answer's `code` and parsed `body`: the request's
    /// verdict, with [`Replace::parts`] set where the answer names each part's
    /// fate. `None`: not a -2021/-2022 answer, the caller's rules apply.
    pub(crate) fn read(&mut self, code: Option<i64>, body: Option<Value<'_>>) -> Option<Verdict> {
        self.parts.clear();
        let whole = match code? {
            -2022 => Verdict::NotRun,
            -2021 => Verdict::Unknown,
            _ => return None,
        };
        let Some(p) = body.and_then(|v| parts(&v)) else {
            return Some(whole);
        };
        self.parts.extend(p);
        // Nothing ran: the whole request may go again under the re-send rule.
        // Otherwise each part has its fate, and the request is never re-sent
        // whole.
        Some(match p.iter().all(|v| *v == Verdict::NotRun) {
            true => Verdict::NotRun,
            false => Verdict::Done,
        })
    }
}

/// Each part's verdict from a -2021/-2022 body (`{"code":..,"data":{..}}`), the
/// new order's then the cancel's; `None` if `data` does not say both results.
pub fn parts(body: &Value<'_>) -> Option<[Verdict; 2]> {
    let data = body.get("data").ok()??;
    let part = |result: &str, response: &str| -> Option<Verdict> {
        let r = data.get(result).ok()??;
        if r.str_eq("SUCCESS").ok()? {
            return Some(Verdict::Done);
        }
        if r.str_eq("NOT_ATTEMPTED").ok()? {
            return Some(Verdict::NotRun);
        }
        if !r.str_eq("FAILURE").ok()? {
            return None;
        }
        let code = data
            .get(response)
            .ok()
            .flatten()
            .and_then(|v| v.get("code").ok().flatten())
            .and_then(|c| c.as_i64().ok());
        Some(failed(code))
    };
    Some([
        part("newOrderResult", "newOrderResponse")?,
        part("cancelResult", "cancelResponse")?,
    ])
}

/// A part that failed with its own `code`: unknown where the code says its
/// execution status is unknown, not run where it was refused before it was
/// looked at (limits, timestamp), refused otherwise (-2010 the new order
/// rejected, -2011 the cancel rejected, filters ...). Failed without a code: not
/// run.
fn failed(code: Option<i64>) -> Verdict {
    match code {
        // -1006 UNEXPECTED_RESP, -1007 TIMEOUT, -1008 SERVER_BUSY.
        Some(-1008..=-1006) => Verdict::Unknown,
        // Limits and the timestamp: refused before it was looked at.
        None | Some(-1003 | -1015 | -1021) => Verdict::NotRun,
        Some(_) => Verdict::Rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn read(body: &str) -> (Option<Verdict>, Vec<Verdict>) {
        let mut r = Replace::default();
        let v = json::parse(body.as_bytes()).ok();
        let code = v.and_then(|v| v.get("code").ok().flatten()?.as_i64().ok());
        let v = r.read(code, v);
        (v, r.parts.to_vec())
    }

    /// The documentation's examples (REST, "Response when Cancel-Replace
    /// partially/fully failed"), trimmed to the fields read.
    #[test]
    fn each_documented_outcome_names_each_part() {
        use Verdict::*;
        // STOP_ON_FAILURE, the cancel failed: the new order was not attempted.
        let stop_cancel_failed = r#"{"code":-2022,"msg":"Order cancel-replace failed.","data":{"cancelResult":"FAILURE","newOrderResult":"NOT_ATTEMPTED","cancelResponse":{"code":-2011,"msg":"Unknown order sent."},"newOrderResponse":null}}"#;
        assert_eq!(
            read(stop_cancel_failed),
            (Some(Done), vec![NotRun, Rejected])
        );
        // STOP_ON_FAILURE, the cancel ran, the new order failed.
        let stop_new_failed = r#"{"code":-2021,"msg":"Order cancel-replace partially failed.","data":{"cancelResult":"SUCCESS","newOrderResult":"FAILURE","cancelResponse":{"symbol":"BTCUSDT","origClientOrderId":"DnLo3vTAQcjha43lAZhZ0y","orderId":9,"status":"CANCELED"},"newOrderResponse":{"code":-2010,"msg":"Order would immediately match and take."}}}"#;
        assert_eq!(read(stop_new_failed), (Some(Done), vec![Rejected, Done]));
        // ALLOW_FAILURE, the cancel failed, the new order was placed.
        let allow_cancel_failed = r#"{"code":-2021,"msg":"Order cancel-replace partially failed.","data":{"cancelResult":"FAILURE","newOrderResult":"SUCCESS","cancelResponse":{"code":-2011,"msg":"Unknown order sent."},"newOrderResponse":{"symbol":"BTCUSDT","orderId":11,"clientOrderId":"new1","status":"NEW"}}}"#;
        assert_eq!(
            read(allow_cancel_failed),
            (Some(Done), vec![Done, Rejected])
        );
        // ALLOW_FAILURE, both failed.
        let allow_both_failed = r#"{"code":-2022,"msg":"Order cancel-replace failed.","data":{"cancelResult":"FAILURE","newOrderResult":"FAILURE","cancelResponse":{"code":-2011,"msg":"Unknown order sent."},"newOrderResponse":{"code":-2010,"msg":"Order would immediately match and take."}}}"#;
        assert_eq!(
            read(allow_both_failed),
            (Some(Done), vec![Rejected, Rejected])
        );
    }

    #[test]
    fn a_part_of_unknown_status_is_unknown_and_nothing_ran_may_go_again() {
        use Verdict::*;
        let new_unknown = r#"{"code":-2021,"data":{"cancelResult":"SUCCESS","newOrderResult":"FAILURE","cancelResponse":{"status":"CANCELED"},"newOrderResponse":{"code":-1007,"msg":"Timeout waiting for response from backend server. Send status unknown; execution status unknown."}}}"#;
        assert_eq!(read(new_unknown), (Some(Done), vec![Unknown, Done]));
        // Both failed without their own codes: nothing ran.
        let bare = r#"{"code":-2022,"msg":"Order cancel-replace failed.","data":{"cancelResult":"FAILURE","newOrderResult":"NOT_ATTEMPTED"}}"#;
        assert_eq!(read(bare), (Some(NotRun), vec![NotRun, NotRun]));
        // Without data: the code alone.
        assert_eq!(read(r#"{"code":-2021,"msg":"x"}"#), (Some(Unknown), vec![]));
        assert_eq!(read(r#"{"code":-2022,"msg":"x"}"#), (Some(NotRun), vec![]));
        // A result it does not know: the code alone.
        let odd = r#"{"code":-2021,"data":{"cancelResult":"MAYBE","newOrderResult":"SUCCESS"}}"#;
        assert_eq!(read(odd), (Some(Unknown), vec![]));
        assert_eq!(read(r#"{"code":-2010,"msg":"x"}"#), (None, vec![]));
        assert!(parts(&json::parse(b"{}").unwrap()).is_none());
    }
}
