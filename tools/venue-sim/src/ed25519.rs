//! Ed25519 API keys, as Binance checks them: the account's public key (the
//! `PUBLIC KEY` PEM a user registers) and the signature of a request, verified
//! with ring (not the client's ed25519-dalek, so a shared mistake cannot pass
//! both sides).
//!
//! Sources: "SIGNED Endpoint Examples for POST /api/v3/order - Ed25519 Keys" of
//! <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>
//! (REST: the signature is the base64 of the Ed25519 signature of the payload, the
//! query string then the body without `signature`, URL-encoded in the request)
//! and "SIGNED request example (Ed25519)" of
//! <https://developers.binance.com/docs/binance-spot-api-docs/websocket-api/request-security>
//! (WebSocket API: base64 over the sorted payload, as the HMAC one).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::params::{signed_parts, sorted_payload, Params, SignatureError};

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410 §4): the 32-byte
/// key follows it.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The 32-byte public key of a `-----BEGIN PUBLIC KEY-----` PEM (what `openssl
/// pkey -pubout` writes and Binance's key registration takes); `Err` says what
/// is wrong.
pub fn public_key_from_pem(pem: &str) -> Result<[u8; 32], String> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| *l != "-----BEGIN PUBLIC KEY-----")
        .skip(1)
        .take_while(|l| *l != "-----END PUBLIC KEY-----")
        .collect();
    if body.is_empty() {
        return Err("not a PEM public key (-----BEGIN PUBLIC KEY-----)".into());
    }
    let der = STANDARD
        .decode(body)
        .map_err(|_| "the PEM public key is not base64".to_string())?;
    match der.strip_prefix(&SPKI_PREFIX[..]) {
        Some(key) if key.len() == 32 => {
            let mut out = [0u8; 32];
            out.copy_from_slice(key);
            Ok(out)
        }
        _ => Err("not an Ed25519 public key (RFC 8410 SubjectPublicKeyInfo)".into()),
    }
}

fn verify(public_key: &[u8; 32], message: &[u8], sig_b64: &str) -> Result<(), SignatureError> {
    if sig_b64.is_empty() {
        return Err(SignatureError::Missing);
    }
    // Case-sensitive, unlike HMAC's hex ("Signature Case Sensitivity").
    let sig = STANDARD
        .decode(sig_b64)
        .map_err(|_| SignatureError::Invalid)?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public_key)
        .verify(message, &sig)
        .map_err(|_| SignatureError::Invalid)
}

/// Checks a REST request's `signature` (URL-encoded base64) against the account's
/// Ed25519 `public_key`.
pub fn verify_rest(query: &str, body: &[u8], public_key: &[u8; 32]) -> Result<(), SignatureError> {
    let (q, b, sig) = signed_parts(query, body)?;
    let sig = crate::params::decode(sig).ok_or(SignatureError::Invalid)?;
    let message = [q.as_bytes(), b.as_bytes()].concat();
    verify(public_key, &message, &sig)
}

/// Checks a WebSocket API request's `signature` (base64) against the account's
/// Ed25519 `public_key`.
pub fn verify_sorted(p: &Params, public_key: &[u8; 32]) -> Result<(), SignatureError> {
    let sig = p.get("signature").unwrap_or("");
    verify(public_key, sorted_payload(p).as_bytes(), sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAny3I38iivRKuGGf8RcAq5jE4+qqOpU1Lw7CMdMY0mbk=
-----END PUBLIC KEY-----
";

    #[test]
    fn a_pem_public_key_is_read_and_anything_else_refused() {
        let k = public_key_from_pem(PEM).unwrap();
        assert_eq!(&k[..4], &[0x9f, 0x2d, 0xc8, 0xdf]);
        assert!(public_key_from_pem("no key").is_err());
        let rsa = PEM.replace("MCowBQYDK2Vw", "MCowBQYDK2Vx");
        assert!(public_key_from_pem(&rsa).is_err());
    }

    #[test]
    fn a_bad_or_missing_signature_is_refused() {
        let k = public_key_from_pem(PEM).unwrap();
        assert_eq!(verify_rest("a=1", b"", &k), Err(SignatureError::Missing));
        assert_eq!(
            verify_rest("a=1&signature=AAAA", b"", &k),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify_rest("a=1&signature=%%", b"", &k),
            Err(SignatureError::Invalid)
        );
    }
}
