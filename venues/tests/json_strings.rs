//! The reader's strings, scanned eight bytes a step, against the byte-by-byte
//! scan it replaced and against serde_json: any run of plain letters, quotes,
//! backslashes, escapes good and bad, control characters, UTF-8 good and bad
//! (each stop at every offset in an eight-byte word), as a whole body, gives
//! exactly the old result (the same end, the same error at the same byte); in
//! a document serde_json accepts, every lookup past such strings (which skips
//! them by their quotes alone) finds what serde_json finds.

use ergon_venues::json::{self, JsonError};
use proptest::prelude::*;

/// The old scan, byte by byte (before the eight-byte steps), verbatim: the
/// end of the string starting at the quote `i`.
fn old_scan_string(b: &[u8], i: usize) -> Result<usize, JsonError> {
    fn hex4(b: &[u8], i: usize) -> Option<u32> {
        let mut v = 0u32;
        for k in 0..4 {
            let d = char::from(*b.get(i + k)?).to_digit(16)?;
            v = v * 16 + d;
        }
        Some(v)
    }
    let bad = JsonError::BadString { at: i };
    let mut j = i + 1;
    let mut wide = false;
    loop {
        match b.get(j) {
            None => return Err(JsonError::Syntax { at: j }),
            Some(b'"') => break,
            Some(b'\\') => match b.get(j + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                Some(b'u') => {
                    let hi = hex4(b, j + 2).ok_or(bad)?;
                    j += 6;
                    if (0xDC00..0xE000).contains(&hi) {
                        return Err(bad);
                    }
                    if (0xD800..0xDC00).contains(&hi) {
                        if b.get(j..j + 2) != Some(b"\\u") {
                            return Err(bad);
                        }
                        let lo = hex4(b, j + 2).ok_or(bad)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return Err(bad);
                        }
                        j += 6;
                    }
                }
                _ => return Err(bad),
            },
            Some(c) if *c < 0x20 => return Err(bad),
            Some(c) => {
                wide |= *c >= 0x80;
                j += 1;
            }
        }
    }
    if wide {
        let inner = b.get(i + 1..j).ok_or(bad)?;
        std::str::from_utf8(inner).map_err(|_| bad)?;
    }
    Ok(j + 1)
}

/// What the old reader made of a body that starts with a quote: the string's
/// bytes, white space after it skipped, anything else after it an error.
fn old_parse_string(body: &[u8]) -> Result<&[u8], JsonError> {
    let end = old_scan_string(body, 0)?;
    let mut after = end;
    while matches!(body.get(after), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        after += 1;
    }
    if after != body.len() {
        return Err(JsonError::Trailing { at: after });
    }
    Ok(&body[..end])
}

/// Pieces of a string's text: long plain runs, every kind of stop.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => "[a-zA-Z0-9 .:,{}\\[\\]]{1,20}".prop_map(String::into_bytes),
        1 => Just(b"\"".to_vec()),
        1 => Just(b"\\".to_vec()),
        1 => prop::sample::select(vec![
            &b"\\n"[..], b"\\\"", b"\\\\", b"\\/", b"\\t", b"\\u00e9", b"\\u20AC",
            b"\\ud83d\\ude00", b"\\ud800", b"\\udc00", b"\\ud800\\u0041", b"\\x",
            b"\\u12", b"\\uZZZZ",
        ])
        .prop_map(<[u8]>::to_vec),
        1 => (0u8..0x20).prop_map(|c| vec![c]),
        1 => Just(vec![0x7f]),
        1 => prop::sample::select(vec!["é", "€", "😀"]).prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::sample::select(vec![
            &[0x80u8][..], &[0xff], &[0xe2, 0x82], &[0xc3], &[0xed, 0xa0, 0x80],
        ])
        .prop_map(<[u8]>::to_vec),
    ]
}

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..12).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// A body of one string (closed or not, something after it or not): the
    /// same end or the same error as the old scan.
    #[test]
    fn a_string_body_reads_as_the_old_scan_read_it(
        pad in 0usize..8,
        t in text(),
        close in any::<bool>(),
        tail in prop::sample::select(vec![&b""[..], b" ", b"x", b"\"", b"\\"]),
    ) {
        let mut body = vec![b'"'];
        body.extend(std::iter::repeat(b'a').take(pad));
        body.extend_from_slice(&t);
        if close {
            body.push(b'"');
        }
        body.extend_from_slice(tail);
        let ours = json::parse(&body).map(|v| v.raw());
        prop_assert_eq!(ours, old_parse_string(&body));
    }

    /// In a document serde_json accepts, strings as keys and values skipped by
    /// their quotes: every member found by name, and every string decoded, as
    /// serde_json reads them.
    #[test]
    fn lookups_past_any_strings_find_what_serde_json_finds(
        pad in 0usize..8,
        a in text(),
        b in text(),
    ) {
        let a = [vec![b'x'; pad], a].concat();
        let mut body = b"{\"".to_vec();
        body.extend_from_slice(&a);
        body.extend_from_slice(b"\":1,\"k\":\"");
        body.extend_from_slice(&b);
        body.extend_from_slice(b"\",\"z\":[\"");
        body.extend_from_slice(&a);
        body.extend_from_slice(b"\",2]}");
        let theirs = serde_json::from_slice::<serde_json::Value>(&body);
        let ours = json::parse(&body);
        let Ok(theirs) = theirs else {
            prop_assert!(ours.is_err(), "{}", String::from_utf8_lossy(&body));
            return Ok(());
        };
        let ours = ours.expect("serde_json read it");
        let map = theirs.as_object().expect("an object");
        prop_assert_eq!(ours.members().unwrap().count(), map.len());
        let mut buf = [0u8; 512];
        for (name, want) in map {
            let got = ours.get(name).unwrap().expect("present");
            let again: serde_json::Value = serde_json::from_slice(got.raw()).unwrap();
            prop_assert_eq!(&again, want);
        }
        let k = ours.get("k").unwrap().expect("k");
        prop_assert_eq!(Some(k.decode_str(&mut buf).unwrap()), map["k"].as_str());
        let z = ours.get("z").unwrap().expect("z");
        prop_assert_eq!(z.at(1).unwrap().map(|v| v.as_i64().unwrap()), Some(2));
        prop_assert!(z.at(2).unwrap().is_none());
    }
}
