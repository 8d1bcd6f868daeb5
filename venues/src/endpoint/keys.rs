//! Keys kept for signing: keyed once, never shown by `Debug`.

use arrayvec::ArrayString;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::adapt::Error;

/// An HMAC-SHA256 key, keyed once; each signature clones the keyed state (no
/// allocation). Its `Debug` shows no key material.
#[derive(Clone)]
pub struct HmacKey(Hmac<Sha256>);

impl HmacKey {
    /// Keys HMAC-SHA256 with `secret`.
    pub fn new(secret: &[u8]) -> Self {
        // HMAC takes a key of any length; this never fails.
        HmacKey(Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!()))
    }

    /// The MAC of the concatenation of `pieces`.
    pub fn sign(&self, pieces: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.0.clone();
        for p in pieces {
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }
}

impl core::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacKey(..)")
    }
}

/// An API key as the venue's header carries it: up to 128 bytes of printable ASCII.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ApiKey(ArrayString<128>);

impl ApiKey {
    /// Checks `key`.
    pub fn new(key: &str) -> Result<Self, Error> {
        if key.is_empty() || !key.bytes().all(|c| c.is_ascii_graphic()) {
            return Err(Error::BadArgument("api key"));
        }
        ArrayString::from(key)
            .map(ApiKey)
            .map_err(|_| Error::BadArgument("api key"))
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl core::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ApiKey(..)")
    }
}

/// An Ed25519 private key (Binance's recommended API key type), read from its
/// PKCS#8 form (the `-----BEGIN PRIVATE KEY-----` file `openssl genpkey -algorithm
/// ed25519` writes and Binance's key generator saves). Signing allocates nothing
/// (RFC 8032: deterministic, so equal inputs give equal signatures); the key is
/// wiped when dropped; its `Debug` shows only the public key.
#[derive(Clone)]
pub struct Ed25519Key(ed25519_dalek::SigningKey);

impl Ed25519Key {
    /// Reads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`, unencrypted).
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, Error> {
        use ed25519_dalek::pkcs8::DecodePrivateKey;
        ed25519_dalek::SigningKey::from_pkcs8_pem(pem.trim())
            .map(Ed25519Key)
            .map_err(|_| Error::BadArgument("Ed25519 private key (an unencrypted PKCS#8 PEM)"))
    }

    /// Reads a PKCS#8 DER private key.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, Error> {
        use ed25519_dalek::pkcs8::DecodePrivateKey;
        ed25519_dalek::SigningKey::from_pkcs8_der(der)
            .map(Ed25519Key)
            .map_err(|_| Error::BadArgument("Ed25519 private key (PKCS#8 DER)"))
    }

    /// The key of a 32-byte seed (RFC 8032's private key).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Ed25519Key(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// The signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer;
        self.0.sign(message).to_bytes()
    }

    /// The public key (what the venue is given when the API key is made).
    pub fn public_key(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }
}

impl core::fmt::Debug for Ed25519Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Ed25519Key(public ")?;
        for b in self.public_key() {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// Whether a key file's text is an Ed25519 private key rather than an HMAC
/// secret: a PEM `PRIVATE KEY` block (a secret is never one).
pub fn is_pem_private_key(text: &[u8]) -> bool {
    let t = text.trim_ascii_start();
    t.starts_with(b"-----BEGIN PRIVATE KEY-----")
}

/// The key a venue's signatures are made with: an HMAC secret or an Ed25519
/// private key (Binance takes both, and RSA).
#[derive(Clone, Debug)]
pub enum SignKey {
    /// HMAC-SHA256, keyed once.
    Hmac(HmacKey),
    /// Ed25519.
    Ed25519(Ed25519Key),
}

impl SignKey {
    /// An HMAC key of `secret`, or, if `secret` is a PEM private key
    /// ([`is_pem_private_key`]), the Ed25519 key it holds (Err if it holds none).
    pub fn detect(secret: &[u8]) -> Result<Self, Error> {
        if !is_pem_private_key(secret) {
            return Ok(SignKey::Hmac(HmacKey::new(secret)));
        }
        let pem = core::str::from_utf8(secret)
            .map_err(|_| Error::BadArgument("Ed25519 private key (an unencrypted PKCS#8 PEM)"))?;
        Ed25519Key::from_pkcs8_pem(pem).map(SignKey::Ed25519)
    }

    /// Whether it is an Ed25519 key (what Binance's `session.logon` takes).
    pub fn is_ed25519(&self) -> bool {
        matches!(self, SignKey::Ed25519(_))
    }
}
