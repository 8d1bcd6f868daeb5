//! Binance's signed requests (Spot and USD-M futures, which sign the same way):
//! the key and receive window ([`Auth`]), the end of a signed query (`recvWindow`,
//! `timestamp`, `signature`, the `X-MBX-APIKEY` header) and its re-signing for a
//! re-send. Sources: "SIGNED (TRADE and USER_DATA) Endpoint security" and "Timing
//! security" of
//! <https://developers.binance.com/docs/binance-spot-api-docs/rest-api/endpoint-security-type>.
//! Nothing here allocates or reads a clock.

use crate::adapt::{Clock, Error, Parts};
use crate::endpoint::{self, ApiKey, HmacKey, Prepared, Symbol, Writer};

/// The receive window Binance uses when a request names none, and the adapters'
/// default: a signed request is refused 5000 ms after its `timestamp`.
pub const DEFAULT_RECV_WINDOW_MS: i64 = 5000;

/// A Binance API key and its HMAC-SHA256 secret, and the receive window signed
/// requests carry.
#[derive(Clone, Debug)]
pub struct Auth {
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) key: Option<HmacKey>,
    pub(crate) recv_window_ms: i64,
}

impl Default for Auth {
    fn default() -> Self {
        Auth {
            api_key: None,
            key: None,
            recv_window_ms: DEFAULT_RECV_WINDOW_MS,
        }
    }
}

impl Auth {
    /// The key `api_key` (sent as `X-MBX-APIKEY`) with its `secret`.
    pub fn new(api_key: &str, secret: &[u8], recv_window_ms: i64) -> Result<Self, Error> {
        if !(1..=60_000).contains(&recv_window_ms) {
            return Err(Error::BadArgument("recvWindow (1..=60000 ms)"));
        }
        Ok(Auth {
            api_key: Some(ApiKey::new(api_key)?),
            key: Some(HmacKey::new(secret)),
            recv_window_ms,
        })
    }

    /// Whether a key was given.
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// The receive window, ms.
    pub fn recv_window_ms(&self) -> i64 {
        self.recv_window_ms
    }
}

/// Ends a Binance signed request: appends `recvWindow` and `timestamp` (the UTC of
/// `now` on `clock`), signs the query from `query_at` (HMAC-SHA256, hex), appends
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
    let mac = key.sign(&[w.bytes(query_at..end)]);
    w.s("&signature=");
    w.hex(&mac);
    w.close_target();
    w.header("X-MBX-APIKEY", api_key.as_str().as_bytes())?;
    Ok(clock.now_ns_at(ts.saturating_add(auth.recv_window_ms)))
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
