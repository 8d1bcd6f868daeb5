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

/// One connection, one request after another: each answer is read by its own
/// request (a HEAD's has no body, a GET's has, whatever came before), from a
/// decoder made ready when the exchange before it ended.
#[test]
fn a_reused_connection_reads_each_answer_by_its_own_request() {
    use ergon_io::http::{Conn, Headers, Limits, Progress, Request};
    let mut conn = Conn::new(Limits::default());
    let exchanges: [(&str, &[u8], &[u8]); 4] = [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b""),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            b"ok",
        ),
        (
            "GET",
            b"HTTP/1.1 201 OK\r\nContent-Length: 3\r\n\r\nabc",
            b"abc",
        ),
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", b""),
    ];
    for (method, answer, body) in exchanges {
        let req = Request {
            method,
            target: "/",
            headers: &[],
            body: b"",
        };
        conn.send(&req, "h").unwrap();
        assert!(conn.transmit().starts_with(method.as_bytes()));
        conn.handle_written(conn.transmit().len());
        conn.recv_buf()[..answer.len()].copy_from_slice(answer);
        assert_eq!(
            conn.handle_recv(answer.len()),
            Ok(Progress::Complete),
            "{method}"
        );
        let mut hs = Headers::new();
        let r = conn.response(&mut hs).unwrap();
        assert_eq!(r.body, body, "{method}");
        assert_eq!(r.status, if body == b"abc" { 201 } else { 200 });
        drop(hs);
        assert!(conn.finish(), "{method}: reusable");
    }
}
