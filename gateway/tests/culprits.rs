//! Every public error type of the gateway says who is at fault ([`Culprit`]): one
//! test per type walks every variant and checks its culprit against the mapping
//! the variants' docs state, and a few failures are produced for real (a slot
//! that does not decode, a full remote, a gateway that cannot start against a
//! loopback venue) to check the culprit they come back with.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

use ergon_core::Class;
use ergon_gateway::shm::{decode_call, decode_event, BadMessage, ShmSubmitError};
use ergon_gateway::{remote, Gateway, LabelError, Prepared, RemoteError, Start};
use ergon_io::Culprit::{self, Caller, Deadline, Peer, Policy};
use ergon_venues::binance_spot::BinanceSpot;

/// Asserts each `(error, culprit)` pair, naming the error that disagrees.
fn check<E: core::fmt::Debug>(cases: &[(E, Culprit)], culprit: impl Fn(&E) -> Culprit) {
    for (e, want) in cases {
        assert_eq!(culprit(e), *want, "{e:?}");
    }
}

#[test]
fn gateway_errors() {
    check(
        &[
            (ShmSubmitError::Busy, Policy),
            (ShmSubmitError::Full, Policy),
            (ShmSubmitError::TooBig, Caller),
            (ShmSubmitError::Gone, Peer),
        ],
        ShmSubmitError::culprit,
    );
    check(
        &[(LabelError::BadName, Caller), (LabelError::Full, Caller)],
        LabelError::culprit,
    );
    let cases = [
        (
            RemoteError::Busy(Box::new(Prepared::with_capacity(8))),
            Policy,
        ),
        (
            RemoteError::Full(Box::new(Prepared::with_capacity(8))),
            Policy,
        ),
    ];
    for (e, want) in cases {
        assert_eq!(e.culprit(), want, "{e:?}");
    }
    // Produced for real: a handle with two requests in flight refuses a third.
    let (_remote, mut handle) = remote(2, 64).unwrap();
    for tag in 1..=2 {
        let req = handle.buffer();
        handle.submit(req, Class::Normal, tag).unwrap();
    }
    let third = handle.buffer();
    let e = handle.submit(third, Class::Normal, 3).unwrap_err();
    assert!(matches!(e, RemoteError::Busy(_)), "{e:?}");
    assert_eq!(e.culprit(), Policy);
}

/// Every BadMessage, its culprit and the text it printed when it was a
/// `&'static str` (the hub and tools print `bad message: <text>`).
#[test]
fn bad_message() {
    use BadMessage::*;
    let cases = [
        (Short, "short"),
        (Text, "text"),
        (Symbol, "symbol"),
        (ClientOrderId, "client order id"),
        (Decimal, "decimal"),
        (Side, "side"),
        (OrderType, "order type"),
        (Price, "price"),
        (Class, "class"),
        (Depth, "depth"),
        (CallKind, "call kind"),
        (TrailingBytes, "trailing bytes"),
        (OrderState, "order state"),
        (Filled, "filled"),
        (VenueOrderId, "venue order id"),
        (LongOrderUpdate, "long order update"),
        (ShortEvent, "short event"),
        (Why, "why"),
        (Bucket, "bucket"),
        (EventKind, "event kind"),
    ];
    for (e, text) in cases {
        assert_eq!(e.culprit(), Peer, "{e:?}");
        assert_eq!(e.to_string(), format!("bad message: {text}"));
    }
    // Produced for real, by decoding slots another process could have written.
    assert_eq!(decode_call(&[]).unwrap_err(), Short);
    assert_eq!(decode_call(&[9]).unwrap_err(), Class);
    let mut call = vec![1u8];
    call.extend_from_slice(&7u64.to_le_bytes());
    call.push(99);
    assert_eq!(decode_call(&call).unwrap_err(), CallKind);
    call.pop();
    call.push(7);
    assert!(decode_call(&call).is_ok());
    call.push(0);
    assert_eq!(decode_call(&call).unwrap_err(), TrailingBytes);
    assert_eq!(decode_event(&[1]).unwrap_err(), ShortEvent);
    assert_eq!(decode_event(&[0; 64]).unwrap_err(), EventKind);
}

/// A loopback "venue" that answers each request with what `answer` returns for
/// its request line (None: read and never answer).
fn venue(answer: fn(&str) -> Option<String>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&got[..end]).into_owned();
                        got.drain(..end + 4);
                        let line = head.lines().next().unwrap_or("").to_owned();
                        if let Some(body) = answer(&line) {
                            let resp = format!("HTTP/1.1 {body}",);
                            if conn.write_all(resp.as_bytes()).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    at
}

fn start(at: SocketAddr, timeout_ns: i64) -> Start {
    let mut s = Start::new(at, at.to_string());
    s.timeout_ns = timeout_ns;
    s
}

fn declare_fails(
    _: &ergon_gateway::Boot,
    _: &mut ergon_core::Builder,
) -> Result<BinanceSpot, String> {
    Err("no account for this test".into())
}

#[test]
fn gateway_start_venue_refuses() {
    let at = venue(|_| Some("503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy".into()));
    let e = Gateway::start(&start(at, 5_000_000_000), "BTCUSDT", declare_fails)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.culprit(), Peer, "{e}");
    assert!(e.to_string().contains("answered 503"), "{e}");
}

#[test]
fn gateway_start_venue_silent() {
    let at = venue(|_| None);
    let e = Gateway::start(&start(at, 100_000_000), "BTCUSDT", declare_fails)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.culprit(), Deadline, "{e}");
}

#[test]
fn gateway_start_declare_refuses() {
    let at = venue(|line| {
        let body = if line.contains("/api/v3/time") {
            r#"{"serverTime":1700000000000}"#
        } else {
            "{}"
        };
        Some(format!(
            "200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ))
    });
    let e = Gateway::start(&start(at, 5_000_000_000), "BTCUSDT", declare_fails)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.culprit(), Caller, "{e}");
    assert_eq!(e.to_string(), "no account for this test");
}

/// The start-up errors that were `String`s, each variant's culprit and the text
/// it printed as a `String`; and a few produced for real.
#[test]
fn url_declare_and_ws_lane_errors() {
    use ergon_gateway::{Account, Boot, DeclareError, Keys, UrlError, WsApiStart, WsLaneError};
    use ergon_venues::adapt::{Clock, Error as VenueError};

    let url = |url: &str, expected| UrlError::Form {
        url: url.into(),
        expected,
    };
    let cases = [
        (
            UrlError::Tls("https"),
            Caller,
            "https:// is not supported by the gateway yet: http:// only",
        ),
        (
            UrlError::Tls("wss"),
            Caller,
            "wss:// is not supported by the gateway yet",
        ),
        (
            url("ftp://x", "http://HOST:PORT"),
            Caller,
            "\"ftp://x\": expected http://HOST:PORT",
        ),
        (
            UrlError::Resolve {
                authority: "nowhere:1".into(),
                error: "no such host".into(),
            },
            Caller,
            "nowhere:1: no such host",
        ),
        (
            UrlError::NoAddress {
                authority: "nowhere".into(),
            },
            Caller,
            "nowhere: no address",
        ),
    ];
    for (e, want, text) in cases {
        assert_eq!(e.culprit(), want, "{e:?}");
        assert_eq!(e.to_string(), text);
    }
    assert_eq!(
        Start::from_base("https://127.0.0.1:1").unwrap_err(),
        UrlError::Tls("https")
    );
    assert_eq!(
        Start::from_base("http://127.0.0.1:1/api")
            .unwrap_err()
            .to_string(),
        "\"http://127.0.0.1:1/api\": expected http://HOST:PORT with no path"
    );
    assert_eq!(
        WsApiStart::from_url("wss://127.0.0.1:1", true).unwrap_err(),
        UrlError::Tls("wss")
    );
    assert_eq!(
        WsApiStart::from_url("http://127.0.0.1:1", true).unwrap_err(),
        url("http://127.0.0.1:1", "ws://HOST:PORT/PATH")
    );
    assert_eq!(
        Start::from_base("http://127.0.0.1:8080").unwrap().addr,
        "127.0.0.1:8080".parse().unwrap()
    );

    let bad = VenueError::BadArgument("recvWindow (1..=60000 ms)");
    let cases = [
        (DeclareError::Keys(bad), Caller, bad.to_string()),
        (
            DeclareError::Limits(bad),
            Peer,
            format!("exchangeInfo: {bad}"),
        ),
        (DeclareError::Buckets(bad), Caller, bad.to_string()),
        (
            DeclareError::NoPassphrase,
            Caller,
            "OKX needs the API passphrase".into(),
        ),
        (
            DeclareError::SecretNotUtf8,
            Caller,
            "the secret is not UTF-8".into(),
        ),
    ];
    for (e, want, text) in cases {
        assert_eq!(e.culprit(), want, "{e:?}");
        assert_eq!(e.to_string(), text);
    }
    // Produced for real: OKX without a passphrase, exchangeInfo that is no JSON.
    let boot = Boot {
        clock: Clock::anchor(0, 1_700_000_000_000),
        limits: Some(b"not json".to_vec()),
    };
    let keys = Keys {
        api_key: "key",
        secret: b"secret",
        passphrase: None,
    };
    let okx = ergon_venues::okx::Okx::declare(&boot, &mut ergon_core::Budget::builder(), &keys, 0);
    assert_eq!(okx.unwrap_err(), DeclareError::NoPassphrase);
    let binance = BinanceSpot::declare(&boot, &mut ergon_core::Budget::builder(), &keys, 0);
    let e = binance.unwrap_err();
    assert!(matches!(e, DeclareError::Limits(_)), "{e:?}");
    assert_eq!(e.culprit(), Peer);

    let cases = [
        (WsLaneError::Parts(bad), Caller, bad.to_string()),
        (
            WsLaneError::TooManyParts,
            Caller,
            "WebSocket API connect: too many parts".into(),
        ),
        (
            WsLaneError::Session(ergon_io::ws::SetupError::Bounds),
            Caller,
            "WebSocket API session: Bounds".into(),
        ),
        (
            WsLaneError::Lane(ergon_io::ws::ConnectError::UnknownSession),
            Caller,
            "UnknownSession".into(),
        ),
    ];
    for (e, want, text) in cases {
        assert_eq!(e.culprit(), want, "{e:?}");
        assert_eq!(e.to_string(), text);
    }
}
