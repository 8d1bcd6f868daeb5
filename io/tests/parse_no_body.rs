//! Responses without a body whatever their headers say, and interim responses.

mod common;

use common::{complete, parse, Outcome};
use ergon_io::http::ParseError;

#[test]
fn head_has_no_body_despite_content_length() {
    let r = complete(parse(
        "HEAD",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
        false,
    ));
    assert_eq!((r.status, r.body.len(), r.reusable), (200, 0, true));
}

#[test]
fn status_204_and_304_have_no_body() {
    for status in [204, 304] {
        let bytes = format!("HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\n");
        let r = complete(parse("GET", bytes.as_bytes(), false));
        assert_eq!((r.status, r.body.len(), r.reusable), (status, 0, true));
    }
}

#[test]
fn interim_responses_are_skipped() {
    let r = complete(parse(
        "POST",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nok",
        false,
    ));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok");
    assert_eq!(
        r.headers,
        vec![
            ("Content-Length".into(), "2".into()),
            ("X-A".into(), "1".into())
        ]
    );
}

#[test]
fn switching_protocols_is_refused() {
    assert_eq!(
        parse(
            "GET",
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            false
        ),
        Outcome::Error(ParseError::Upgrade)
    );
}
