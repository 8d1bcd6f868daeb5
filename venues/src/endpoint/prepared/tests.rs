use super::*;
use crate::endpoint::{ApiKey, Decimal, HmacKey};

/// Every digit count, both signs, the ends of `i64` and each power of ten's
/// neighbours: the pair table writes what `format!` does.
#[test]
fn int_writes_every_length_as_format_does() {
    let mut cases = vec![
        0i64,
        1,
        -1,
        9,
        10,
        99,
        100,
        i64::MAX,
        i64::MIN,
        i64::MIN + 1,
    ];
    let mut p10 = 1i64;
    for _ in 0..18 {
        p10 *= 10;
        for n in [p10 - 1, p10, p10 + 1, p10 * 9 / 7] {
            cases.extend([n, -n]);
        }
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cases.push(x as i64 >> (x % 64));
    }
    for n in cases {
        let mut p = Prepared::default();
        let mut w = Writer::start(&mut p);
        w.int(n);
        let end = w.pos();
        assert_eq!(w.bytes(0..end), n.to_string().as_bytes(), "{n}");
    }
}

#[test]
fn writer_encodings() {
    let mut p = Prepared::default();
    let mut w = Writer::start(&mut p);
    w.int(-1_499_827_319_559);
    w.s(" ");
    w.int(0);
    w.s(" ");
    w.hex(&[0x0f, 0xa0]);
    w.s(" ");
    for s in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
        w.base64(s);
        w.s("|");
    }
    w.enc("[{\"a\":1}]");
    let n = w.pos();
    assert_eq!(
        w.bytes(0..n),
        &b"-1499827319559 0 0fa0 |Zg==|Zm8=|Zm9v|Zm9vYg==|Zm9vYmE=|Zm9vYmFy|%5B%7B%22a%22%3A1%7D%5D"[..]
    );
}

/// `swap_with` leaves both requests as `mem::swap` would, whichever holds more
/// ids and headers.
#[test]
fn swap_with_is_a_swap() {
    let filled = |ids: usize, headers: usize, tag: &str| {
        let mut p = Prepared::with_capacity(64);
        let mut w = Writer::start(&mut p);
        w.s(tag);
        w.close_target();
        for i in 0..ids {
            w.id(ClientOrderId::new(&format!("{tag}{i}")).unwrap())
                .unwrap();
        }
        for h in ["A", "B", "C"].iter().take(headers) {
            w.open();
            w.s(tag);
            w.close_header(h).unwrap();
        }
        p.deadline_ns = ids as i64;
        p.label = Label::new(headers as u8);
        p
    };
    for (i, j, h, k) in [
        (0, 0, 0, 0),
        (1, 0, 1, 3),
        (0, 3, 2, 0),
        (2, 2, 1, 1),
        (MAX_BATCH, 1, 3, 2),
    ] {
        let (mut a, mut b) = (filled(i, h, "a"), filled(j, k, "b"));
        let (mut x, mut y) = (a.clone(), b.clone());
        a.swap_with(&mut b);
        core::mem::swap(&mut x, &mut y);
        assert_eq!(format!("{a:?}"), format!("{x:?}"), "{i} {j} {h} {k}");
        assert_eq!(format!("{b:?}"), format!("{y:?}"), "{i} {j} {h} {k}");
    }
}

/// Hex is written 32 bytes at a time: every length across those steps gives
/// the byte-by-byte encoding.
#[test]
fn hex_of_every_length_across_its_steps() {
    let src: Vec<u8> = (0..=255u8).rev().collect();
    for n in [0, 1, 31, 32, 33, 64, 65, 100, 256] {
        let mut p = Prepared::default();
        let mut w = Writer::start(&mut p);
        w.hex(&src[..n]);
        let want: String = src[..n].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(w.bytes(0..w.pos()), want.as_bytes(), "{n} bytes");
    }
}

/// The MAC's hex, made at once from its nibbles, is `format!`'s, each way it is
/// written: appended after a lead, appended alone, written over a resumed order's
/// 64 bytes (and not past the end).
fn check_mac_hex(mac: &[u8; 32]) {
    let want: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex32(mac).as_slice(), want.as_bytes(), "{mac:?}");
    let mut p = Prepared::default();
    let mut w = Writer::start(&mut p);
    w.mac_hex("&signature=", mac);
    w.hex(mac);
    w.s("!");
    w.over_mac_hex(11 + 64, &[0; 32]).unwrap();
    w.over_mac_hex(11, mac).unwrap();
    let n = w.pos();
    let zeros = "0".repeat(64);
    assert_eq!(
        w.bytes(0..n),
        format!("&signature={want}{zeros}!").as_bytes()
    );
    assert!(w.over_mac_hex(n - 63, mac).is_err(), "past the end");
}

/// Every byte value at every position of a MAC.
#[test]
fn mac_hex_of_every_byte_at_every_place() {
    for v in 0..=255u8 {
        let mut mac = [0u8; 32];
        for (i, b) in mac.iter_mut().enumerate() {
            *b = v.wrapping_add((i as u8).wrapping_mul(97));
        }
        check_mac_hex(&mac);
    }
}

proptest::proptest! {
    #[test]
    fn mac_hex_of_random_macs(mac in proptest::prelude::any::<[u8; 32]>()) {
        check_mac_hex(&mac);
    }
}

#[test]
fn arguments_are_checked() {
    assert!(ClientOrderId::new(&"x".repeat(36)).is_ok());
    assert!(ClientOrderId::new(&"x".repeat(37)).is_err());
    assert!(ClientOrderId::new("a b").is_err());
    assert!(Symbol::new("BTC-USDT-SWAP").is_ok());
    assert!(Symbol::new("BTC&x=1").is_err());
    assert!(Decimal::new("1.2.3").is_err());
    assert!(Decimal::new("1.").is_err());
    assert!(ApiKey::new("key with space").is_err());
    assert_eq!(format!("{:?}", HmacKey::new(b"secret")), "HmacKey(..)");
}

/// A request is text: bytes that are not UTF-8 never reach it, and the request
/// they were offered to is refused at the end instead of sent with a hole in it.
#[test]
fn bytes_that_are_not_text_fail_the_request() {
    let mut p = Prepared::default();
    let mut w = Writer::start(&mut p);
    w.open();
    w.s("/a?b=");
    w.put(&[0xff, b'c']);
    w.put(b"d");
    w.close_target();
    let parts = crate::adapt::Parts::new();
    assert_eq!(
        w.finish_with(parts, crate::adapt::Request::Order, Method::Post, 0)
            .unwrap_err(),
        Error::BadArgument("bytes that are not text")
    );
    assert!(p.is_empty());
    assert_eq!(p.target(), "/a?b=d");
}
