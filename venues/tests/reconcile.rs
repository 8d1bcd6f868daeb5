//! The order lookups by client id of the Deribit, Kraken and Coinbase adapters: each
//! documented state, an order the venue does not know, and answers that settle
//! nothing (an error, a body that is not the venue's JSON) as errors to ask again.

use ergon_venues::coinbase_exchange::CoinbaseExchange;
use ergon_venues::deribit::Deribit;
use ergon_venues::kraken_futures::KrakenFutures;
use ergon_venues::kraken_spot::KrakenSpot;
use ergon_venues::reconcile::{Lookup, ReadError};
use ergon_venues::response::Response;

type Reader = fn(&Response<'_>) -> Result<Lookup, ReadError>;

fn read(reader: Reader, status: u16, body: &str) -> Result<Lookup, ReadError> {
    reader(&Response {
        status,
        headers: &[],
        body: body.as_bytes(),
    })
}

#[test]
fn deribit_order_state_by_label() {
    let r = Deribit::read_order as Reader;
    let one = |state: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":[{{"order_id":"ETH-1","label":"c1","order_state":"{state}"}}]}}"#
        )
    };
    assert_eq!(read(r, 200, &one("open")), Ok(Lookup::Open));
    assert_eq!(read(r, 200, &one("untriggered")), Ok(Lookup::Open));
    assert_eq!(read(r, 200, &one("filled")), Ok(Lookup::Filled));
    assert_eq!(read(r, 200, &one("cancelled")), Ok(Lookup::Cancelled));
    assert_eq!(read(r, 200, &one("rejected")), Ok(Lookup::Rejected));
    // get_order_state answers one object, not a list.
    assert_eq!(
        read(
            r,
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":{"order_state":"filled"}}"#
        ),
        Ok(Lookup::Filled)
    );
    assert_eq!(
        read(r, 200, r#"{"jsonrpc":"2.0","id":1,"result":[]}"#),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(
            r,
            400,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":10004,"message":"order_not_found"}}"#
        ),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(
            r,
            400,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":10028,"message":"too_many_requests"}}"#
        ),
        Err(ReadError::NoAnswer(400))
    );
    assert_eq!(
        read(r, 200, &one("weird")),
        Err(ReadError::Body("order_state"))
    );
    assert_eq!(read(r, 200, "{\"result\":[{"), Err(ReadError::Body("JSON")));
}

#[test]
fn kraken_spot_query_orders() {
    let r = KrakenSpot::read_order as Reader;
    let one = |status: &str| {
        format!(
            r#"{{"error":[],"result":{{"OQCLML-BW3P3-BUCMWZ":{{"cl_ord_id":"c1","status":"{status}","vol_exec":"0"}}}}}}"#
        )
    };
    assert_eq!(read(r, 200, &one("pending")), Ok(Lookup::Open));
    assert_eq!(read(r, 200, &one("open")), Ok(Lookup::Open));
    assert_eq!(read(r, 200, &one("closed")), Ok(Lookup::Filled));
    assert_eq!(read(r, 200, &one("canceled")), Ok(Lookup::Cancelled));
    assert_eq!(read(r, 200, &one("expired")), Ok(Lookup::Cancelled));
    assert_eq!(
        read(r, 200, r#"{"error":[],"result":{}}"#),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(r, 200, r#"{"error":["EOrder:Unknown order"]}"#),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(r, 200, r#"{"error":["EAPI:Rate limit exceeded"]}"#),
        Err(ReadError::NoAnswer(200))
    );
    assert_eq!(
        read(r, 200, r#"{"error":[7]}"#),
        Err(ReadError::Body("error"))
    );
    assert_eq!(read(r, 502, "<html>"), Err(ReadError::Body("JSON")));
}

#[test]
fn kraken_futures_orders_status() {
    let r = KrakenFutures::read_order as Reader;
    let one = |status: &str| {
        format!(
            r#"{{"result":"success","serverTime":"2023-11-14T22:13:20.000Z","orders":[{{"order":{{"cliOrdId":"c1"}},"status":"{status}"}}]}}"#
        )
    };
    assert_eq!(read(r, 200, &one("ENTERED_BOOK")), Ok(Lookup::Open));
    assert_eq!(read(r, 200, &one("FULLY_EXECUTED")), Ok(Lookup::Filled));
    assert_eq!(read(r, 200, &one("CANCELLED")), Ok(Lookup::Cancelled));
    assert_eq!(read(r, 200, &one("REJECTED")), Ok(Lookup::Rejected));
    assert_eq!(
        read(r, 200, r#"{"result":"success","orders":[]}"#),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(r, 200, r#"{"result":"error","error":"apiLimitExceeded"}"#),
        Err(ReadError::NoAnswer(200))
    );
    assert_eq!(
        read(r, 200, r#"{"result":"success"}"#),
        Err(ReadError::Body("orders"))
    );
}

#[test]
fn coinbase_order_by_client_oid() {
    let r = CoinbaseExchange::read_order as Reader;
    assert_eq!(
        read(r, 200, r#"{"id":"x","status":"pending"}"#),
        Ok(Lookup::Open)
    );
    assert_eq!(
        read(r, 200, r#"{"id":"x","status":"open"}"#),
        Ok(Lookup::Open)
    );
    assert_eq!(
        read(
            r,
            200,
            r#"{"id":"x","status":"done","done_reason":"filled"}"#
        ),
        Ok(Lookup::Filled)
    );
    assert_eq!(
        read(
            r,
            200,
            r#"{"id":"x","status":"done","done_reason":"canceled"}"#
        ),
        Ok(Lookup::Cancelled)
    );
    assert_eq!(
        read(r, 200, r#"{"id":"x","status":"rejected"}"#),
        Ok(Lookup::Rejected)
    );
    assert_eq!(
        read(r, 404, r#"{"message":"NotFound"}"#),
        Ok(Lookup::Absent)
    );
    assert_eq!(
        read(r, 429, r#"{"message":"Rate limit exceeded"}"#),
        Err(ReadError::NoAnswer(429))
    );
    assert_eq!(
        read(r, 200, r#"{"id":"x","status":"done"}"#),
        Err(ReadError::Body("done_reason"))
    );
    assert_eq!(read(r, 200, "garbage"), Err(ReadError::Body("JSON")));
}
