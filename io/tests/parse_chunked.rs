//! Chunked bodies: extensions, trailers, bad sizes, bounds.

mod common;

use common::{complete, parse, parse_limits, Outcome};
use ergon_io::http::{Limits, ParseError};

const HEAD: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunked(body: &str) -> Vec<u8> {
    format!("{HEAD}{body}").into_bytes()
}

#[test]
fn chunks_join_into_one_body() {
    let r = complete(parse(
        "GET",
        &chunked("5\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n"),
        false,
    ));
    assert_eq!(r.body, b"hello 0123456789");
    assert!(r.reusable);
}

#[test]
fn extensions_are_accepted_and_dropped() {
    let r = complete(parse(
        "GET",
        &chunked("3;name=value;q=\"x y\"\r\nabc\r\n0;last\r\n\r\n"),
        false,
    ));
    assert_eq!(r.body, b"abc");
}

#[test]
fn trailers_are_accepted_and_dropped() {
    let r = complete(parse(
        "GET",
        &chunked("2\r\nok\r\n0\r\nX-Checksum: 1234\r\nX-Other: y\r\n\r\n"),
        false,
    ));
    assert_eq!(r.body, b"ok");
    assert!(r.reusable);
    assert!(r.headers.iter().all(|(n, _)| n != "X-Checksum"));
}

#[test]
fn transfer_encoding_list_ending_in_chunked_is_chunked() {
    let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n";
    assert_eq!(complete(parse("GET", bytes, false)).body, b"z");
}

#[test]
fn bad_chunk_sizes_fail() {
    for body in [
        "x\r\n",
        "\r\n",
        "-1\r\n",
        "1 2\r\nab\r\n",
        "5\nhello\r\n",
        "1\r\r\n",
    ] {
        assert_eq!(
            parse("GET", &chunked(body), false),
            Outcome::Error(ParseError::BadChunkSize),
            "{body:?}"
        );
    }
}

#[test]
fn huge_chunk_sizes_fail() {
    assert_eq!(
        parse("GET", &chunked("1000000000000000000\r\n"), false),
        Outcome::Error(ParseError::ChunkTooLarge)
    );
    let limits = Limits {
        max_chunk: 100,
        ..Limits::default()
    };
    assert_eq!(
        parse_limits(limits, "GET", &chunked("65\r\n"), false),
        Outcome::Error(ParseError::ChunkTooLarge)
    );
}

#[test]
fn chunk_data_must_end_in_crlf() {
    assert_eq!(
        parse("GET", &chunked("2\r\nabc\r\n0\r\n\r\n"), false),
        Outcome::Error(ParseError::BadChunkEnd)
    );
}

#[test]
fn a_malformed_trailer_fails() {
    assert_eq!(
        parse("GET", &chunked("0\r\nnot a header\r\n\r\n"), false),
        Outcome::Error(ParseError::BadTrailer)
    );
}

#[test]
fn a_long_chunk_size_line_fails() {
    let limits = Limits {
        max_line: 64,
        ..Limits::default()
    };
    let ext = "1;".to_string() + &"e".repeat(100);
    assert_eq!(
        parse_limits(limits, "GET", &chunked(&ext), false),
        Outcome::Error(ParseError::LineTooLong)
    );
}

#[test]
fn framing_is_compacted_so_the_body_may_fill_the_buffer() {
    // 300 one-byte chunks take 1800 raw bytes; the body is 300. A 1 KiB buffer holds
    // the body only because framing is squeezed out as it goes.
    let limits = Limits {
        max_response: 1024,
        ..Limits::default()
    };
    let mut body = String::new();
    for _ in 0..300 {
        body.push_str("1\r\nx\r\n");
    }
    body.push_str("0\r\n\r\n");
    let r = complete(parse_limits(limits, "GET", &chunked(&body), false));
    assert_eq!(r.body, vec![b'x'; 300]);
}

#[test]
fn truncated_chunked_body_is_an_incomplete_answer() {
    assert_eq!(parse("GET", &chunked("5\r\nhel"), true), Outcome::Truncated);
}
