//! Binance's signed requests (Spot and USD-M futures, which sign the same way):
//! the key and receive window ([`Auth`]), the end of a signed query (`recvWindow`,
//! `timestamp`, `signature`, the `X-MBX-APIKEY` header) and its re-signing for a
//! re-send. Sources: "SIGNED (TRADE and USER_DATA) Endpoint security" and "Timing
//! security" of
//! <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>.
//!
//! Two key types: HMAC-SHA256 (the signature is the MAC in hex) and Ed25519,
//! Binance's recommended one ("SIGNED Endpoint Examples for POST /api/v3/order -
//! Ed25519 Keys" on the same page, and "Signature Case Sensitivity": the
//! signature is the base64 of the Ed25519 signature of the payload, and "the
//! signature needs to be URL encoded", so `+`, `/` and `=` go as `%2B`, `%2F`,
//! `%3D`; USD-M futures sign the same way, "SIGNED Endpoint Examples for POST
//! /fapi/v1/order - Ed25519" of
//! <https://developers.binance.com/docs/derivatives/usds-margined-futures/general-info>).
//! Nothing here allocates or reads a clock.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::adapt::{Clock, Error, Parts};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::endpoint::{self, ApiKey, Ed25519Key, HmacKey, Prepared, SignKey, Symbol, Writer};

/// The receive window Binance uses when a request names none, and the adapters'
/// default: a signed request is refused 5000 ms after its `timestamp`.
pub const DEFAULT_RECV_WINDOW_MS: i64 = 5000;

/// A Binance API key and its signing key (an HMAC-SHA256 secret or an Ed25519
/// private key), and the receive window signed requests carry.
#[derive(Clone, Debug)]
pub struct Auth {
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) key: Option<SignKey>,
    pub(crate) recv_window_ms: i64,
    /// New orders, cancels, cancel-replaces (USD-M: modifies) and order queries
    /// are written with their signature pending ([`Auth::defer_signatures`]).
    pub(crate) defer: bool,
    /// A number no other `Auth` made has (its clones share it); 0 for none, with
    /// no key. Its key, signing key and receive window never change, so a number
    /// stands for them: a template compares it instead of the key's text.
    pub(crate) id: u64,
}

impl Default for Auth {
    fn default() -> Self {
        Auth {
            api_key: None,
            key: None,
            recv_window_ms: DEFAULT_RECV_WINDOW_MS,
            defer: false,
            id: 0,
        }
    }
}

/// The next [`Auth::id`] (from 1: 0 is none).
fn auth_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Auth {
    /// The key `api_key` (sent as `X-MBX-APIKEY`) with its `secret`.
    pub fn new(api_key: &str, secret: &[u8], recv_window_ms: i64) -> Result<Self, Error> {
        if !(1..=60_000).contains(&recv_window_ms) {
            return Err(Error::BadArgument("recvWindow (1..=60000 ms)"));
        }
        Ok(Auth {
            api_key: Some(ApiKey::new(api_key)?),
            key: Some(SignKey::Hmac(HmacKey::new(secret))),
            recv_window_ms,
            defer: false,
            id: auth_id(),
        })
    }

    /// The key `api_key` (sent as `X-MBX-APIKEY`) with its Ed25519 private key.
    pub fn ed25519(api_key: &str, key: Ed25519Key, recv_window_ms: i64) -> Result<Self, Error> {
        Auth::with_key(api_key, SignKey::Ed25519(key), recv_window_ms)
    }

    /// The key `api_key` (sent as `X-MBX-APIKEY`) with `key`, of either type.
    pub fn with_key(api_key: &str, key: SignKey, recv_window_ms: i64) -> Result<Self, Error> {
        if !(1..=60_000).contains(&recv_window_ms) {
            return Err(Error::BadArgument("recvWindow (1..=60000 ms)"));
        }
        Ok(Auth {
            api_key: Some(ApiKey::new(api_key)?),
            key: Some(key),
            recv_window_ms,
            defer: false,
            id: auth_id(),
        })
    }

    /// Whether the key is an Ed25519 key.
    pub fn is_ed25519(&self) -> bool {
        self.key.as_ref().is_some_and(SignKey::is_ed25519)
    }

    /// Whether a key was given.
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// The receive window, ms.
    pub fn recv_window_ms(&self) -> i64 {
        self.recv_window_ms
    }

    /// Whether the orders, cancels, cancel-replaces (USD-M: modifies) and order
    /// queries it signs are written with their signature pending, for a WebSocket API lane
    /// that never sends it (see
    /// [`Endpoints::defer_signatures`](crate::endpoint::Endpoints::defer_signatures));
    /// off by default.
    pub fn defer_signatures(&mut self, on: bool) {
        self.defer = on;
    }
}

/// Ends a Binance signed request: appends `recvWindow` and `timestamp` (the UTC of
/// `now` on `clock`), signs the query from `query_at` ([`signature`]), appends
/// `signature`, closes the target and writes `X-MBX-APIKEY`. Returns the deadline:
/// timestamp + recvWindow on the caller's clock.
pub(crate) fn sign(
    w: &mut Writer<'_>,
    first: &mut bool,
    auth: &Auth,
    clock: &Clock,
    query_at: usize,
    now: i64,
) -> Result<i64, Error> {
    end_signed(w, first, auth, clock, (query_at, false), now)
}

/// [`sign`] for the requests a WebSocket API lane carries (new orders, cancels,
/// cancel-replaces, USD-M modifies, order queries): with [`Auth::defer_signatures`] on, the
/// same request but for `&signature=…`, left pending
/// ([`Prepared::signature_pending`]) for [`sign_pending`].
pub(crate) fn sign_order(
    w: &mut Writer<'_>,
    first: &mut bool,
    auth: &Auth,
    clock: &Clock,
    query_at: usize,
    now: i64,
) -> Result<i64, Error> {
    end_signed(w, first, auth, clock, (query_at, auth.defer), now)
}

/// [`sign`], its signature left pending when `defer`.
fn end_signed(
    w: &mut Writer<'_>,
    first: &mut bool,
    auth: &Auth,
    clock: &Clock,
    (query_at, defer): (usize, bool),
    now: i64,
) -> Result<i64, Error> {
    let (Some(api_key), Some(key)) = (&auth.api_key, &auth.key) else {
        return Err(Error::NoKey);
    };
    let ts = clock.utc_ms(now);
    if !core::mem::take(first) {
        w.s("&");
    }
    w.s("recvWindow=");
    w.int(auth.recv_window_ms);
    w.s("&timestamp=");
    w.int(ts);
    let end = w.pos();
    if defer {
        w.defer_signature(query_at..end);
    } else {
        w.s("&signature=");
        match key {
            SignKey::Hmac(k) => {
                let mac = k.sign(&[w.bytes(query_at..end)]);
                w.hex(&mac);
            }
            SignKey::Ed25519(_) => {
                let mut text = arrayvec::ArrayString::new();
                signature(key, w.bytes(query_at..end), &mut text);
                w.s(&text);
            }
        }
    }
    w.close_target();
    w.header("X-MBX-APIKEY", api_key.as_str().as_bytes())?;
    Ok(clock.now_ns_at(ts.saturating_add(auth.recv_window_ms)))
}

/// Signs a request whose signature is pending ([`sign_order`], or a template's
/// order with signatures deferred) with `auth`'s key: byte for byte the request
/// a signing preparation writes (the same timestamp, so the same deadline).
/// Nothing pending: `Ok`, nothing changed. No key: [`Error::NoKey`], `p` left as
/// it was. Allocates nothing.
pub(crate) fn sign_pending(p: &mut Prepared, auth: &Auth) -> Result<(), Error> {
    let Some(payload) = p.unsigned_payload() else {
        return Ok(());
    };
    let Some(key) = &auth.key else {
        return Err(Error::NoKey);
    };
    let mut text = arrayvec::ArrayString::new();
    signature(key, payload, &mut text);
    p.insert_signature(&text)
}

/// Re-signs a request [`sign`] ended: the same path and parameters, then a fresh
/// `recvWindow`, `timestamp` and `signature`. Allocates nothing (the target is
/// copied to the stack; one longer than 4 KiB, or with a body, is
/// [`Error::Unsupported`] and left as it was).
pub(crate) fn restamp(p: &mut Prepared, auth: &Auth, clock: &Clock, now: i64) -> Result<(), Error> {
    let t = p.target();
    let (Some(q), Some(cut)) = (t.find('?'), t.rfind("recvWindow=")) else {
        return Err(Error::Unsupported);
    };
    if cut <= q || !p.body().is_empty() {
        return Err(Error::Unsupported);
    }
    let mut head: arrayvec::ArrayVec<u8, 4096> = arrayvec::ArrayVec::new();
    head.try_extend_from_slice(&t.as_bytes()[..cut])
        .map_err(|_| Error::Unsupported)?;
    let (Some(kind), Some(method)) = (p.kind(), p.method()) else {
        return Err(Error::Unsupported);
    };
    let parts: Parts = p.parts().iter().copied().collect();
    let ids: arrayvec::ArrayVec<endpoint::ClientOrderId, { endpoint::MAX_BATCH }> =
        p.client_order_ids().iter().copied().collect();
    let mut symbol = arrayvec::ArrayString::<32>::new();
    if let Some(s) = p.symbol() {
        symbol.push_str(s.as_str());
    }
    let label = p.label();
    let mut w = Writer::start(p);
    if let Ok(s) = Symbol::new(symbol.as_str()) {
        w.symbol(s);
    }
    for id in ids {
        w.id(id)?;
    }
    w.open();
    w.put(&head[..=q]);
    let query_at = w.pos();
    // The parameters, without the '&' that joined them to `recvWindow`.
    let mut first = cut == q + 1;
    w.put(&head[q + 1..cut.saturating_sub(1).max(q + 1)]);
    let deadline = sign(&mut w, &mut first, auth, clock, query_at, now)?;
    w.finish_with(parts, kind, method, deadline)?;
    p.set_label(label);
    Ok(())
}

/// The `signature` of a REST request's `payload` (its query string, or query and
/// body, before `&signature=`) as Binance documents it for each key type: the
/// HMAC-SHA256 in lower-case hex, or the Ed25519 signature in base64,
/// URL-encoded. Written into `out` (at most 120 bytes).
///
/// ```
/// use ergon_venues::binance_spot::signature;
/// use ergon_venues::endpoint::{Ed25519Key, HmacKey, SignKey};
/// let mut out = arrayvec::ArrayString::new();
/// signature(&SignKey::Hmac(HmacKey::new(b"s")), b"a=1", &mut out);
/// assert_eq!(out.len(), 64);
/// signature(&SignKey::Ed25519(Ed25519Key::from_seed(&[7; 32])), b"a=1", &mut out);
/// assert!(out.ends_with("%3D%3D"));
/// ```
pub fn signature(key: &SignKey, payload: &[u8], out: &mut arrayvec::ArrayString<120>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.clear();
    match key {
        SignKey::Hmac(k) => {
            for b in k.sign(&[payload]) {
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        SignKey::Ed25519(k) => {
            let mut b64 = [0u8; 88];
            let n = STANDARD
                .encode_slice(k.sign(payload), &mut b64)
                .unwrap_or(0);
            for &c in &b64[..n] {
                match c {
                    b'+' => out.push_str("%2B"),
                    b'/' => out.push_str("%2F"),
                    b'=' => out.push_str("%3D"),
                    c => out.push(char::from(c)),
                }
            }
        }
    }
}
