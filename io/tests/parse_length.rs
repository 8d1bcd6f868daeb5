//! Responses framed by Content-Length.

mod common;

use common::{complete, parse, parse_limits, Outcome};
use ergon_io::http::{Limits, ParseError};

#[test]
fn body_of_content_length_in_any_split() {
    let r = complete(parse(
        "GET",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-MBX-USED-WEIGHT-1M: 17\r\n\r\nhello",
        false,
    ));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello");
    assert!(r.reusable);
    assert_eq!(r.headers[1], ("X-MBX-USED-WEIGHT-1M".into(), "17".into()));
}

#[test]
fn zero_length_is_complete_at_once() {
    let r = complete(parse(
        "POST",
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
        false,
    ));
    assert_eq!((r.status, r.body.len(), r.reusable), (201, 0, true));
}

#[test]
fn a_short_body_is_partial_and_truncated_at_eof() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
    assert_eq!(parse("GET", bytes, false), Outcome::Partial);
    assert_eq!(parse("GET", bytes, true), Outcome::Truncated);
}

#[test]
fn equal_duplicate_lengths_pass_and_differing_ones_fail() {
    let same = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(complete(parse("GET", same, false)).body, b"ok");
    let differ = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!";
    assert_eq!(
        parse("GET", differ, false),
        Outcome::Error(ParseError::BadContentLength)
    );
}

#[test]
fn malformed_lengths_fail() {
    for v in ["-1", "+2", "0x10", "", "1 2", "99999999999999999999"] {
        let bytes = format!("HTTP/1.1 200 OK\r\nContent-Length: {v}\r\n\r\n");
        assert_eq!(
            parse("GET", bytes.as_bytes(), false),
            Outcome::Error(ParseError::BadContentLength),
            "{v:?}"
        );
    }
}

#[test]
fn length_and_transfer_encoding_together_fail() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    assert_eq!(
        parse("GET", bytes, false),
        Outcome::Error(ParseError::BadFraming)
    );
}

#[test]
fn a_length_above_the_buffer_fails_before_reading_it() {
    let limits = Limits {
        max_response: 1024,
        ..Limits::default()
    };
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\nabc";
    assert_eq!(
        parse_limits(limits, "GET", bytes, false),
        Outcome::Error(ParseError::ResponseTooLarge)
    );
}
