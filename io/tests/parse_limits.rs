//! Bounds on what a response may be, and garbage: always an error, never a panic.

mod common;

use common::{feed, parse, parse_limits, Outcome};
use ergon_io::http::{Limits, ParseError};

#[test]
fn an_oversize_head_fails() {
    let limits = Limits {
        max_head: 256,
        ..Limits::default()
    };
    let bytes = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "v".repeat(400));
    assert_eq!(
        parse_limits(limits, "GET", bytes.as_bytes(), false),
        Outcome::Error(ParseError::HeadTooLarge)
    );
    // Also when the end of the head never comes.
    let bytes = format!("HTTP/1.1 200 OK\r\nX-Big: {}", "v".repeat(400));
    assert_eq!(
        parse_limits(limits, "GET", bytes.as_bytes(), false),
        Outcome::Error(ParseError::HeadTooLarge)
    );
}

#[test]
fn an_oversize_header_line_fails() {
    let limits = Limits {
        max_line: 100,
        ..Limits::default()
    };
    let bytes = format!(
        "HTTP/1.1 200 OK\r\nX-Long: {}\r\nContent-Length: 0\r\n\r\n",
        "v".repeat(200)
    );
    assert_eq!(
        parse_limits(limits, "GET", bytes.as_bytes(), false),
        Outcome::Error(ParseError::LineTooLong)
    );
}

#[test]
fn too_many_headers_fail() {
    let limits = Limits {
        max_headers: 8,
        ..Limits::default()
    };
    let mut bytes = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..9 {
        bytes.push_str(&format!("X-{i}: v\r\n"));
    }
    bytes.push_str("\r\n");
    assert_eq!(
        parse_limits(limits, "GET", bytes.as_bytes(), false),
        Outcome::Error(ParseError::TooManyHeaders)
    );
}

#[test]
fn a_response_larger_than_the_buffer_fails() {
    let limits = Limits {
        max_response: 128,
        ..Limits::default()
    };
    let bytes = format!("HTTP/1.1 200 OK\r\n\r\n{}", "b".repeat(500));
    assert_eq!(
        parse_limits(limits, "GET", bytes.as_bytes(), true),
        Outcome::Error(ParseError::ResponseTooLarge)
    );
}

#[test]
fn malformed_heads_fail() {
    let cases: [(&[u8], ParseError); 6] = [
        (b"garbage\r\n\r\n", ParseError::BadVersion),
        (b"HTTP/2.0 200 OK\r\n\r\n", ParseError::BadVersion),
        (b"HTTP/1.1 2000 OK\r\n\r\n", ParseError::BadStatus),
        (b"HTTP/1.1 abc OK\r\n\r\n", ParseError::BadStatus),
        (
            b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n",
            ParseError::BadHead,
        ),
        (b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", ParseError::BadHead),
    ];
    for (bytes, want) in cases {
        assert_eq!(
            parse("GET", bytes, false),
            Outcome::Error(want),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    // A deterministic xorshift: the same million bytes on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let prefixes: [&[u8]; 4] = [
        b"",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n",
    ];
    let limits = Limits {
        max_response: 512,
        max_head: 256,
        max_line: 128,
        ..Limits::default()
    };
    let alphabet = b"HTP/1.0 2\r\n:;abcdef-\t xX";
    for round in 0..4000 {
        let mut bytes = prefixes[round % prefixes.len()].to_vec();
        let len = (next() % 200) as usize;
        for _ in 0..len {
            let r = next();
            // Mostly bytes that look like HTTP, so the parser gets deep; some raw.
            bytes.push(if r % 4 == 0 {
                (r >> 8) as u8
            } else {
                alphabet[(r >> 8) as usize % alphabet.len()]
            });
        }
        let step = 1 + (next() % 9) as usize;
        let _ = feed(limits, "GET", &bytes, step, round % 2 == 0);
    }
}
