//! Request parameters and HMAC-SHA256 signatures, as Binance reads and checks them.
//!
//! Parameters come from the query string and the `application/x-www-form-urlencoded`
//! body; a parameter sent in both is taken from the query string. The signature is
//! HMAC-SHA256 keyed with the secret over `totalParams`, the raw query string
//! concatenated with the raw body, with the `signature` parameter (which must be the
//! last of its part) removed; it is compared case-insensitively as hex, in constant
//! time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Decoded parameters of one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params {
    query: Vec<(String, String)>,
    body: Vec<(String, String)>,
}

impl Params {
    /// Parses both parts; on bad percent-encoding returns the offending name.
    pub fn parse(query: &str, body: &[u8]) -> Result<Params, String> {
        let body = std::str::from_utf8(body).map_err(|_| "body".to_string())?;
        Ok(Params {
            query: parse_form(query)?,
            body: parse_form(body)?,
        })
    }

    /// Parameters given as name/value pairs (the WebSocket API's `params` object).
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Params {
        Params {
            query: pairs,
            body: Vec::new(),
        }
    }

    /// The value of `name`, the query string's first.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .chain(self.body.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The query string's pairs, decoded, in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.query
    }

    /// The value of `name` if present and non-empty.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }
}

fn parse_form(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for pair in s.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(k).ok_or_else(|| k.to_string())?;
        let v = decode(v).ok_or_else(|| k.clone())?;
        out.push((k, v));
    }
    Ok(out)
}

/// Percent-decodes `s` (`+` is a space), as a form value.
pub(crate) fn decode(s: &str) -> Option<String> {
    // Most names and values have nothing to decode: copied as they are (the
    // loop below would copy them byte by byte to the same text).
    if !s.bytes().any(|c| c == b'+' || c == b'%') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b.get(i + 1..i + 3)?;
                let hi = (hex[0] as char).to_digit(16)?;
                let lo = (hex[1] as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Why a signature was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// No `signature` parameter at the end of the query string or the body.
    Missing,
    /// Present but not the HMAC of `totalParams` under the account's secret.
    Invalid,
}

/// Splits a trailing `signature=...` off one part.
fn split_signature(part: &str) -> (&str, Option<&str>) {
    let idx = if part.starts_with("signature=") {
        Some(0)
    } else {
        part.rfind("&signature=").map(|i| i + 1)
    };
    match idx {
        Some(i) => {
            let sig = &part[i + "signature=".len()..];
            if sig.contains('&') {
                // Not the last parameter: Binance requires it to be the end part.
                (part, None)
            } else {
                (&part[..i.saturating_sub(1)], Some(sig))
            }
        }
        None => (part, None),
    }
}

/// A REST request's signed payload (query string, then body) and its
/// `signature` as sent: `totalParams` without the signature.
pub(crate) fn signed_parts<'a>(
    query: &'a str,
    body: &'a [u8],
) -> Result<(&'a str, &'a str, &'a str), SignatureError> {
    let body = std::str::from_utf8(body).map_err(|_| SignatureError::Invalid)?;
    let (q, qs) = split_signature(query);
    let (b, bs) = split_signature(body);
    // The query string wins when the signature is sent in both parts.
    match (qs, bs) {
        (Some(s), _) => Ok((q, body, s)),
        (None, Some(s)) => Ok((q, b, s)),
        (None, None) => Err(SignatureError::Missing),
    }
}

/// An HMAC-SHA256 key made ready once: its padded key blocks are hashed here,
/// so a signature checked with it costs only its message's blocks (the same
/// MAC as keying it afresh; two of a request's seven or so SHA-256 blocks
/// saved).
#[derive(Clone)]
pub struct MacKey(Option<HmacSha256>);

impl MacKey {
    /// `secret` made ready (HMAC takes a key of any length; None is never
    /// expected, and makes every signature wrong rather than a panic).
    pub fn new(secret: &str) -> MacKey {
        MacKey(HmacSha256::new_from_slice(secret.as_bytes()).ok())
    }

    /// The MAC of the concatenation of `parts`.
    fn mac(&self, parts: &[&[u8]]) -> Option<HmacSha256> {
        let mut mac = self.0.clone()?;
        for p in parts {
            mac.update(p);
        }
        Some(mac)
    }
}

/// Checks the request's signature against `secret`.
pub fn verify(query: &str, body: &[u8], secret: &str) -> Result<(), SignatureError> {
    verify_with(query, body, &MacKey::new(secret))
}

/// Checks the request's signature against a key made ready ([`verify`]).
pub fn verify_with(query: &str, body: &[u8], key: &MacKey) -> Result<(), SignatureError> {
    let (q, b, sig) = signed_parts(query, body)?;
    if sig.is_empty() {
        return Err(SignatureError::Missing);
    }
    let Some(expected) = hex_decode(sig) else {
        return Err(SignatureError::Invalid);
    };
    let mac = key
        .mac(&[q.as_bytes(), b.as_bytes()])
        .ok_or(SignatureError::Invalid)?;
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Invalid)
}

/// The WebSocket API's signature payload: every parameter but `signature`, sorted
/// by name, written `name=value` (values as sent, not percent-encoded) and joined
/// by `&` ("SIGNED request example (HMAC)" in `web-socket-api.md`).
pub fn sorted_payload(p: &Params) -> String {
    let mut pairs: Vec<&(String, String)> =
        p.query.iter().filter(|(k, _)| k != "signature").collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Checks a WebSocket API request's `signature` (hex, any case) against `secret`.
pub fn verify_sorted(p: &Params, secret: &str) -> Result<(), SignatureError> {
    verify_sorted_with(p, &MacKey::new(secret))
}

/// [`verify_sorted`] with a key made ready.
pub fn verify_sorted_with(p: &Params, key: &MacKey) -> Result<(), SignatureError> {
    let sig = match p.get("signature") {
        None | Some("") => return Err(SignatureError::Missing),
        Some(s) => s,
    };
    let Some(expected) = hex_decode(sig) else {
        return Err(SignatureError::Invalid);
    };
    let mac = key
        .mac(&[sorted_payload(p).as_bytes()])
        .ok_or(SignatureError::Invalid)?;
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Invalid)
}

/// The lowercase hex HMAC-SHA256 of `payload` under `secret`: what a client appends
/// as `signature=`.
pub fn sign(payload: &str, secret: &str) -> String {
    sign_parts(&[payload.as_bytes()], &MacKey::new(secret))
}

/// The lowercase hex HMAC-SHA256 of the concatenation of `parts` under a key
/// made ready ([`sign`]; "" if the key is unusable).
pub fn sign_parts(parts: &[&[u8]], key: &MacKey) -> String {
    let Some(mac) = key.mac(parts) else {
        return String::new();
    };
    // Two digits a byte from a table (a format! a byte was 2% of the simulator's
    // instructions, Bybit's verification calling this for every request).
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in mac.finalize().into_bytes() {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

/// The base64 (standard alphabet, padded) HMAC-SHA256 of `payload` under `secret`:
/// OKX's `OK-ACCESS-SIGN`.
pub fn sign_base64(payload: &str, secret: &str) -> String {
    let mut mac = match HmacSha256::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(payload.as_bytes());
    base64(&mac.finalize().into_bytes())
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ` (OKX's `OK-ACCESS-TIMESTAMP`) as UTC milliseconds.
pub fn parse_iso8601_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some((((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + se) * 1000 + ms)
}

/// UTC milliseconds as `YYYY-MM-DDTHH:MM:SS.sssZ`.
pub fn iso8601_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // civil_from_days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|c| {
            let hi = (c[0] as char).to_digit(16)?;
            let lo = (c[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoding as it was, byte by byte (the reference for the fast path).
    fn decode_as_it_was(s: &str) -> Option<String> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = b.get(i + 1..i + 3)?;
                    let hi = (hex[0] as char).to_digit(16)?;
                    let lo = (hex[1] as char).to_digit(16)?;
                    out.push((hi * 16 + lo) as u8);
                    i += 2;
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8(out).ok()
    }

    /// Random texts of plain characters, `+`, `%`, hex digits, bad escapes
    /// and multi-byte characters decode as they did.
    #[test]
    fn decoding_is_as_it_was() {
        let pool: Vec<char> = "aZ09-_.~+%%2F%e9éA€ =&".chars().collect();
        let mut seed = 1u64;
        for _ in 0..5_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let len = (seed >> 60) as usize;
            let s: String = (0..len)
                .map(|k| pool[((seed >> (k * 3 % 56)) % pool.len() as u64) as usize])
                .collect();
            assert_eq!(decode(&s), decode_as_it_was(&s), "{s:?}");
        }
    }

    /// A key made ready signs and verifies as HMAC keyed afresh for each
    /// message (the way before it), over key and message lengths around the
    /// 64-byte block and the message split anywhere.
    #[test]
    fn a_key_made_ready_signs_as_one_keyed_afresh() {
        let text: String = (0..300u32)
            .map(|i| char::from(b'!' + (i * 7 % 90) as u8))
            .collect();
        for klen in [0, 1, 31, 32, 63, 64, 65, 64 * 3 + 1] {
            let secret = &text[..klen];
            let key = MacKey::new(secret);
            for plen in [0, 1, 55, 56, 63, 64, 65, 119, 120, 300] {
                let payload = &text[300 - plen..];
                let mut fresh = HmacSha256::new_from_slice(secret.as_bytes()).unwrap();
                fresh.update(payload.as_bytes());
                let fresh: String = fresh
                    .finalize()
                    .into_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(sign(payload, secret), fresh);
                for cut in [0, plen / 3, plen / 2, plen] {
                    let (a, b) = payload.split_at(cut);
                    let parts = [a.as_bytes(), b"", b.as_bytes()];
                    assert_eq!(sign_parts(&parts, &key), fresh, "{klen} {plen} {cut}");
                }
                let query = format!("x={}&signature={fresh}", payload.len());
                let mut again = HmacSha256::new_from_slice(secret.as_bytes()).unwrap();
                again.update(format!("x={}", payload.len()).as_bytes());
                let good: String = again
                    .finalize()
                    .into_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                let signed = format!("x={}&signature={good}", payload.len());
                assert_eq!(verify_with(&signed, b"", &key), Ok(()));
                assert_eq!(verify(&signed, b"", secret), Ok(()));
                let bad = verify_with(&query, b"", &key);
                assert_eq!(bad, verify(&query, b"", secret));
            }
        }
    }

    #[test]
    fn websocket_api_signatures_match_the_documented_example() {
        // "SIGNED request example (HMAC)" of web-socket-api.md.
        let key = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
        let secret = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
        let sig = "aa1b5712c094bc4e57c05a1a5c1fd8d88dcd628338ea863fec7b88e59fe2db24";
        let pairs = [
            ("symbol", "BTCUSDT"),
            ("side", "SELL"),
            ("type", "LIMIT"),
            ("timeInForce", "GTC"),
            ("quantity", "0.01000000"),
            ("price", "52000.00"),
            ("recvWindow", "100"),
            ("timestamp", "1645423376532"),
            ("apiKey", key),
            ("signature", sig),
        ];
        let p = Params::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(
            sorted_payload(&p),
            format!("apiKey={key}&price=52000.00&quantity=0.01000000&recvWindow=100&side=SELL&symbol=BTCUSDT&timeInForce=GTC&timestamp=1645423376532&type=LIMIT")
        );
        assert_eq!(verify_sorted(&p, secret), Ok(()));
        assert_eq!(sign(&sorted_payload(&p), secret), sig);
        assert_eq!(verify_sorted(&p, "other"), Err(SignatureError::Invalid));
        let upper = Params::from_pairs(vec![("signature".into(), sig.to_uppercase())]);
        assert_eq!(verify_sorted(&upper, secret), Err(SignatureError::Invalid));
        assert_eq!(
            verify_sorted(&Params::default(), secret),
            Err(SignatureError::Missing)
        );
    }

    // The HMAC example of Binance's "SIGNED Endpoint Examples for POST /api/v3/order".
    const SECRET: &str = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j";
    const QUERY: &str = "symbol=LTCBTC&side=BUY&type=LIMIT&timeInForce=GTC&quantity=1&price=0.1&recvWindow=5000&timestamp=1499827319559";
    const SIG: &str = "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71";

    #[test]
    fn binance_documented_example_signs_and_verifies() {
        assert_eq!(sign(QUERY, SECRET), SIG);
        let q = format!("{QUERY}&signature={SIG}");
        assert_eq!(verify(&q, b"", SECRET), Ok(()));
        let upper = format!("{QUERY}&signature={}", SIG.to_uppercase());
        assert_eq!(verify(&upper, b"", SECRET), Ok(()), "case-insensitive");
        // Mixed: part in the query, the rest and the signature in the body.
        let (q1, b1) = QUERY.split_at(QUERY.find("&quantity").unwrap());
        let body = format!(
            "{}&signature={}",
            &b1[1..],
            sign(&format!("{q1}{}", &b1[1..]), SECRET)
        );
        assert_eq!(verify(q1, body.as_bytes(), SECRET), Ok(()));
    }

    #[test]
    fn tampering_and_missing_signatures_are_refused() {
        let q = format!("{QUERY}&signature={SIG}").replace("price=0.1", "price=0.2");
        assert_eq!(verify(&q, b"", SECRET), Err(SignatureError::Invalid));
        assert_eq!(verify(QUERY, b"", SECRET), Err(SignatureError::Missing));
        let not_last = format!("signature={SIG}&{QUERY}");
        assert_eq!(verify(&not_last, b"", SECRET), Err(SignatureError::Missing));
        let junk = format!("{QUERY}&signature=zz");
        assert_eq!(verify(&junk, b"", SECRET), Err(SignatureError::Invalid));
    }

    #[test]
    fn okx_timestamps_and_base64_signatures() {
        assert_eq!(
            parse_iso8601_ms("2020-12-08T09:08:57.715Z"),
            Some(1_607_418_537_715)
        );
        assert_eq!(iso8601_ms(1_607_418_537_715), "2020-12-08T09:08:57.715Z");
        assert_eq!(parse_iso8601_ms("2020-12-08 09:08:57.715Z"), None);
        assert_eq!(parse_iso8601_ms("2020-13-08T09:08:57.715Z"), None);
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(sign_base64("x", "k").len(), 44);
    }

    #[test]
    fn query_wins_over_body_and_decoding_is_checked() {
        let p = Params::parse("a=1&b=x%20y", b"a=2&c=3").unwrap();
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some("x y"));
        assert_eq!(p.get("c"), Some("3"));
        assert_eq!(Params::parse("a=%zz", b""), Err("a".to_string()));
    }
}
