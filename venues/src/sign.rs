//! Request signatures of the Deribit, Kraken and Coinbase Exchange APIs, as each
//! venue documents them. Nothing here allocates: secrets are decoded into stack
//! buffers, signatures come back as fixed-capacity strings.
//!
//! - Kraken Spot `API-Sign`: base64(HMAC-SHA512(base64-decoded secret, URI path +
//!   SHA-256(nonce + POST data))) (<https://docs.kraken.com/api/docs/guides/spot-rest-auth>);
//! - Kraken derivatives `Authent`: base64(HMAC-SHA512(base64-decoded secret,
//!   SHA-256(POST data + nonce + endpoint path))), the path without `/derivatives`
//!   (<https://docs.kraken.com/api/docs/guides/futures-rest>);
//! - Coinbase Exchange `CB-ACCESS-SIGN`: base64(HMAC-SHA256(base64-decoded secret,
//!   timestamp + METHOD + request path + body))
//!   (<https://docs.cdp.coinbase.com/exchange/rest-api/authentication>);
//! - Deribit `deri-hmac-sha256`: hex(HMAC-SHA256(secret, timestamp + "\n" + nonce +
//!   "\n" + METHOD + "\n" + URI + "\n" + body + "\n"))
//!   (<https://docs.deribit.com/articles/authentication>).

use arrayvec::ArrayString;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Why a request could not be signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignError {
    /// The secret is not base64, or longer than 128 bytes decoded.
    Secret,
}

impl core::fmt::Display for SignError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the API secret is not base64 of at most 128 bytes")
    }
}

/// A base64 HMAC-SHA512 signature (88 characters).
pub type Sig512 = ArrayString<88>;
/// A base64 HMAC-SHA256 signature (44 characters).
pub type Sig256 = ArrayString<44>;
/// A hex HMAC-SHA256 signature (64 characters).
pub type Hex256 = ArrayString<64>;

fn decode_secret(secret_b64: &[u8], buf: &mut [u8; 128]) -> Result<usize, SignError> {
    STANDARD
        .decode_slice(secret_b64, buf)
        .map_err(|_| SignError::Secret)
}

fn b64<const N: usize>(bytes: &[u8]) -> ArrayString<N> {
    let mut out = [0u8; N];
    let n = STANDARD.encode_slice(bytes, &mut out).unwrap_or(0);
    let mut s = ArrayString::new();
    // Base64 is ASCII, and N is its exact length for the digest given.
    if let Ok(text) = core::str::from_utf8(&out[..n]) {
        let _ = s.try_push_str(text);
    }
    s
}

/// Kraken Spot `API-Sign` of a private request to `path` (`/0/private/AddOrder`)
/// with `nonce` and the url-encoded `post_data` (which carries the nonce too).
pub fn kraken_spot(
    secret_b64: &[u8],
    path: &str,
    nonce: &str,
    post_data: &[u8],
) -> Result<Sig512, SignError> {
    let mut key = [0u8; 128];
    let n = decode_secret(secret_b64, &mut key)?;
    let inner = Sha256::new()
        .chain_update(nonce.as_bytes())
        .chain_update(post_data)
        .finalize();
    let mut mac = Hmac::<Sha512>::new_from_slice(&key[..n]).map_err(|_| SignError::Secret)?;
    mac.update(path.as_bytes());
    mac.update(&inner);
    Ok(b64(&mac.finalize().into_bytes()))
}

/// Kraken derivatives `Authent` of a request to `endpoint_path`
/// (`/api/v3/sendorder`, without `/derivatives`) with `post_data` and `nonce`.
pub fn kraken_futures(
    secret_b64: &[u8],
    endpoint_path: &str,
    nonce: &str,
    post_data: &[u8],
) -> Result<Sig512, SignError> {
    let mut key = [0u8; 128];
    let n = decode_secret(secret_b64, &mut key)?;
    let inner = Sha256::new()
        .chain_update(post_data)
        .chain_update(nonce.as_bytes())
        .chain_update(endpoint_path.as_bytes())
        .finalize();
    let mut mac = Hmac::<Sha512>::new_from_slice(&key[..n]).map_err(|_| SignError::Secret)?;
    mac.update(&inner);
    Ok(b64(&mac.finalize().into_bytes()))
}

/// Coinbase Exchange `CB-ACCESS-SIGN` for `timestamp` (seconds, as sent in
/// `CB-ACCESS-TIMESTAMP`), `method` (upper case), `request_path` (with its query)
/// and `body`.
pub fn coinbase(
    secret_b64: &[u8],
    timestamp: &str,
    method: &str,
    request_path: &str,
    body: &[u8],
) -> Result<Sig256, SignError> {
    let mut key = [0u8; 128];
    let n = decode_secret(secret_b64, &mut key)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key[..n]).map_err(|_| SignError::Secret)?;
    mac.update(timestamp.as_bytes());
    mac.update(method.as_bytes());
    mac.update(request_path.as_bytes());
    mac.update(body);
    Ok(b64(&mac.finalize().into_bytes()))
}

/// Deribit's `deri-hmac-sha256` signature for `timestamp` (ms), `nonce`, `method`
/// (upper case), `uri` (path and query) and `body`.
pub fn deribit(
    secret: &[u8],
    timestamp_ms: i64,
    nonce: &str,
    method: &str,
    uri: &str,
    body: &[u8],
) -> Hex256 {
    // HMAC accepts a key of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return Hex256::new(),
    };
    let ts = itoa_buf(timestamp_ms);
    mac.update(ts.as_bytes());
    for part in [
        b"\n",
        nonce.as_bytes(),
        b"\n",
        method.as_bytes(),
        b"\n",
        uri.as_bytes(),
        b"\n",
    ] {
        mac.update(part);
    }
    mac.update(body);
    mac.update(b"\n");
    let digest = mac.finalize().into_bytes();
    let mut hex = Hex256::new();
    for byte in digest {
        for nib in [byte >> 4, byte & 0xf] {
            hex.push(char::from(b"0123456789abcdef"[usize::from(nib)]));
        }
    }
    hex
}

fn itoa_buf(v: i64) -> ArrayString<20> {
    let mut s = ArrayString::new();
    let _ = core::fmt::write(&mut s, format_args!("{v}"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Kraken's Spot REST authentication guide.
    #[test]
    fn kraken_spot_documented_example() {
        let secret = b"kQH5HW/8p1uGOVjbgWA7FunAmGO8lsSUXNsu3eow76sz84Q18fWxnyRzBHCd3pd5nE9qa99HAZtuZuj6F1huXg==";
        let post =
            b"nonce=1616492376594&ordertype=limit&pair=XBTUSD&price=37500&type=buy&volume=1.25";
        let sig = kraken_spot(secret, "/0/private/AddOrder", "1616492376594", post).unwrap();
        assert_eq!(
            sig.as_str(),
            "4/dpxb3iT4tp/ZCVEwSnEsLxx0bqyhLpdfOpc6fn7OR8+UClSV5n9E6aSS8MPtnRfp32bAb0nmbRn6H8ndwLUQ=="
        );
    }

    #[test]
    fn a_secret_that_is_not_base64_is_an_error() {
        assert_eq!(
            kraken_spot(b"not base64!", "/", "1", b""),
            Err(SignError::Secret)
        );
        assert_eq!(
            kraken_futures(&[b'A'; 400], "/", "1", b""),
            Err(SignError::Secret)
        );
        assert_eq!(
            coinbase(b"%%", "1", "GET", "/", b""),
            Err(SignError::Secret)
        );
    }

    #[test]
    fn every_input_is_signed() {
        let secret = b"c2VjcmV0";
        let base = coinbase(secret, "1700000000", "POST", "/orders", b"{}").unwrap();
        assert_eq!(base.len(), 44);
        for other in [
            coinbase(secret, "1700000001", "POST", "/orders", b"{}").unwrap(),
            coinbase(secret, "1700000000", "GET", "/orders", b"{}").unwrap(),
            coinbase(secret, "1700000000", "POST", "/order", b"{}").unwrap(),
            coinbase(secret, "1700000000", "POST", "/orders", b"{ }").unwrap(),
            coinbase(b"c2VjcmVU", "1700000000", "POST", "/orders", b"{}").unwrap(),
        ] {
            assert_ne!(base, other);
        }
        let f = kraken_futures(secret, "/api/v3/sendorder", "1", b"a=1").unwrap();
        assert_eq!(f.len(), 88);
        assert_ne!(
            f,
            kraken_futures(secret, "/api/v3/sendorder", "2", b"a=1").unwrap()
        );
        let d = deribit(
            b"secret",
            1_700_000_000_000,
            "abcd",
            "GET",
            "/api/v2/private/get_account_summary?currency=BTC",
            b"",
        );
        assert_eq!(d.len(), 64);
        assert!(d.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(
            d,
            deribit(
                b"secret",
                1_700_000_000_001,
                "abcd",
                "GET",
                "/api/v2/private/get_account_summary?currency=BTC",
                b""
            )
        );
    }
}
