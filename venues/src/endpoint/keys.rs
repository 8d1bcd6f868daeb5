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
