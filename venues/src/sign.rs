//! Request signatures of the Kraken and Coinbase Exchange APIs, as each venue
//! documents them (Deribit's is HMAC-SHA256 hex, [`HmacKey`](crate::endpoint::HmacKey)).
//! Nothing here allocates: a [`Secret`] is decoded once, MACs come back as arrays
//! the endpoint writer encodes.
//!
//! - Kraken Spot `API-Sign`: base64(HMAC-SHA512(base64-decoded secret, URI path +
//!   SHA-256(nonce + POST data))) (<https://docs.kraken.com/api/docs/guides/spot-rest-auth>);
//! - Kraken derivatives `Authent`: base64(HMAC-SHA512(base64-decoded secret,
//!   SHA-256(POST data + nonce + endpoint path))), the path without `/derivatives`
//!   (<https://docs.kraken.com/api/docs/guides/futures-rest>);
//! - Coinbase Exchange `CB-ACCESS-SIGN`: base64(HMAC-SHA256(base64-decoded secret,
//!   timestamp + METHOD + request path + body))
//!   (<https://docs.cdp.coinbase.com/exchange/rest-api/authentication>).

use arrayvec::ArrayVec;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::adapt::Error;

/// A base64 API secret, decoded (at most 128 bytes). Its `Debug` shows nothing.
#[derive(Clone)]
pub struct Secret(ArrayVec<u8, 128>);

impl Secret {
    /// Decodes a base64 secret (Kraken's, Coinbase's).
    pub fn from_base64(secret_b64: &str) -> Result<Self, Error> {
        let mut buf = [0u8; 128];
        let n = STANDARD
            .decode_slice(secret_b64.trim(), &mut buf)
            .map_err(|_| Error::BadArgument("secret (base64 of at most 128 bytes)"))?;
        let mut v = ArrayVec::new();
        v.try_extend_from_slice(&buf[..n])
            .map_err(|_| Error::BadArgument("secret (base64 of at most 128 bytes)"))?;
        Ok(Secret(v))
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Secret(..)")
    }
}

fn hmac512(key: &[u8], pieces: &[&[u8]]) -> [u8; 64] {
    // HMAC takes a key of any length: this never fails.
    let Ok(mut mac) = Hmac::<Sha512>::new_from_slice(key) else {
        return [0; 64];
    };
    pieces.iter().for_each(|p| mac.update(p));
    mac.finalize().into_bytes().into()
}

/// Kraken Spot `API-Sign` (before base64) of a private request to `path`
/// (`/0/private/AddOrder`) with `nonce` and the POST data (which carries the nonce
/// too).
pub fn kraken_spot(secret: &Secret, path: &[u8], nonce: &[u8], post_data: &[u8]) -> [u8; 64] {
    let inner = Sha256::new()
        .chain_update(nonce)
        .chain_update(post_data)
        .finalize();
    hmac512(secret.bytes(), &[path, &inner])
}

/// Kraken derivatives `Authent` (before base64) of a request to `endpoint_path`
/// (`/api/v3/sendorder`, without `/derivatives`) with `post_data` (the query of a
/// GET) and `nonce`.
pub fn kraken_futures(
    secret: &Secret,
    endpoint_path: &[u8],
    nonce: &[u8],
    post_data: &[u8],
) -> [u8; 64] {
    let inner = Sha256::new()
        .chain_update(post_data)
        .chain_update(nonce)
        .chain_update(endpoint_path)
        .finalize();
    hmac512(secret.bytes(), &[&inner])
}

/// Coinbase Exchange `CB-ACCESS-SIGN` (before base64) for `timestamp` (seconds, as
/// sent in `CB-ACCESS-TIMESTAMP`), `method` (upper case), `request_path` (with its
/// query) and `body`.
pub fn coinbase(
    secret: &Secret,
    timestamp: &[u8],
    method: &[u8],
    request_path: &[u8],
    body: &[u8],
) -> [u8; 32] {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.bytes()) else {
        return [0; 32];
    };
    for p in [timestamp, method, request_path, body] {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Kraken's Spot REST authentication guide.
    #[test]
    fn kraken_spot_documented_example() {
        let secret = Secret::from_base64("kQH5HW/8p1uGOVjbgWA7FunAmGO8lsSUXNsu3eow76sz84Q18fWxnyRzBHCd3pd5nE9qa99HAZtuZuj6F1huXg==").unwrap();
        let post =
            b"nonce=1616492376594&ordertype=limit&pair=XBTUSD&price=37500&type=buy&volume=1.25";
        let mac = kraken_spot(&secret, b"/0/private/AddOrder", b"1616492376594", post);
        assert_eq!(
            STANDARD.encode(mac),
            "4/dpxb3iT4tp/ZCVEwSnEsLxx0bqyhLpdfOpc6fn7OR8+UClSV5n9E6aSS8MPtnRfp32bAb0nmbRn6H8ndwLUQ=="
        );
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    fn a_secret_that_is_not_base64_is_an_error() {
        assert!(Secret::from_base64("not base64!").is_err());
        assert!(Secret::from_base64(&"A".repeat(400)).is_err());
    }

    #[test]
    fn every_input_is_signed() {
        let s = Secret::from_base64("c2VjcmV0").unwrap();
        let t = Secret::from_base64("c2VjcmVU").unwrap();
        let base = coinbase(&s, b"1700000000", b"POST", b"/orders", b"{}");
        for other in [
            coinbase(&s, b"1700000001", b"POST", b"/orders", b"{}"),
            coinbase(&s, b"1700000000", b"GET", b"/orders", b"{}"),
            coinbase(&s, b"1700000000", b"POST", b"/order", b"{}"),
            coinbase(&s, b"1700000000", b"POST", b"/orders", b"{ }"),
            coinbase(&t, b"1700000000", b"POST", b"/orders", b"{}"),
        ] {
            assert_ne!(base, other);
        }
        let f = kraken_futures(&s, b"/api/v3/sendorder", b"1", b"a=1");
        assert_ne!(f, kraken_futures(&s, b"/api/v3/sendorder", b"2", b"a=1"));
        assert_ne!(f, kraken_futures(&s, b"/api/v3/editorder", b"1", b"a=1"));
    }
}
