//! When a connection may carry another request after a response.

mod common;

use common::{complete, feed, parse, Outcome};
use ergon_io::http::Limits;

#[test]
fn connection_close_ends_the_connection() {
    let r = complete(parse(
        "GET",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
        false,
    ));
    assert_eq!(r.body, b"x");
    assert!(!r.reusable);
    let r = complete(parse(
        "GET",
        b"HTTP/1.1 200 OK\r\nConnection: foo, Close\r\nContent-Length: 0\r\n\r\n",
        false,
    ));
    assert!(!r.reusable);
}

#[test]
fn http_1_0_closes_unless_keep_alive() {
    let r = complete(parse(
        "GET",
        b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
        false,
    ));
    assert!(!r.reusable);
    let r = complete(parse(
        "GET",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
        false,
    ));
    assert!(r.reusable);
}

#[test]
fn a_body_without_framing_runs_until_close() {
    let bytes = b"HTTP/1.1 200 OK\r\n\r\nall of it";
    assert_eq!(parse("GET", bytes, false), Outcome::Partial);
    let r = complete(parse("GET", bytes, true));
    assert_eq!(r.body, b"all of it");
    assert!(!r.reusable);
}

#[test]
fn bytes_after_the_response_forbid_reuse() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n";
    let r = complete(feed(Limits::default(), "GET", bytes, bytes.len(), false));
    assert_eq!(r.body, b"x");
    assert!(!r.reusable);
}

#[test]
fn keep_alive_is_the_http_1_1_default() {
    let r = complete(parse(
        "GET",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        false,
    ));
    assert!(r.reusable);
}
