//! A prepared request: what a venue's typed endpoint writes into a caller's buffer.
//!
//! The buffers keep their capacity across uses, so a gateway that swaps one with a
//! ledger slot at each submit allocates nothing once every buffer has grown to the
//! largest request it carries.

use arrayvec::ArrayVec;
use ergon_venues::adapt::Request as Kind;

use crate::http::Request;

/// Most header fields one prepared request carries (OKX signs with four).
pub const MAX_HEADERS: usize = 6;

/// A signed request ready to send, with what the gateway needs to charge it,
/// re-send it and reconcile it.
#[derive(Debug)]
pub struct Prepared {
    /// What the request is, for its parts and for reading its answer.
    pub kind: Kind<'static>,
    /// The method token.
    pub method: &'static str,
    /// The path and query, starting with `/`.
    pub target: String,
    headers: [(&'static str, String); MAX_HEADERS],
    n_headers: usize,
    /// The body (empty for GET and DELETE).
    pub body: Vec<u8>,
    /// After this time (the caller's clock) the venue refuses it: it is never sent or
    /// re-sent later.
    pub deadline_ns: i64,
    /// The client order id of a write (empty for reads): what reconcile asks for.
    pub client_order_id: String,
}

impl Prepared {
    /// An empty request whose buffers hold `target` and `body` bytes without growing.
    pub fn with_capacity(target: usize, body: usize) -> Self {
        Prepared {
            kind: Kind::Read(0),
            method: "GET",
            target: String::with_capacity(target),
            headers: core::array::from_fn(|_| ("", String::with_capacity(96))),
            n_headers: 0,
            body: Vec::with_capacity(body),
            deadline_ns: i64::MIN,
            client_order_id: String::with_capacity(40),
        }
    }

    /// Empties it for the next request, keeping every buffer's capacity.
    pub fn clear(&mut self) {
        self.kind = Kind::Read(0);
        self.method = "GET";
        self.target.clear();
        self.n_headers = 0;
        self.body.clear();
        self.deadline_ns = i64::MIN;
        self.client_order_id.clear();
    }

    /// Adds a header field; false (and nothing added) if [`MAX_HEADERS`] are set.
    pub fn header(&mut self, name: &'static str, value: &str) -> bool {
        let Some(slot) = self.headers.get_mut(self.n_headers) else {
            return false;
        };
        slot.0 = name;
        slot.1.clear();
        slot.1.push_str(value);
        self.n_headers += 1;
        true
    }

    /// The header fields set.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.headers[..self.n_headers]
            .iter()
            .map(|(n, v)| (*n, v.as_str()))
    }

    /// Whether it may change state at the venue (an order, cancel or batch).
    pub fn is_write(&self) -> bool {
        self.kind.is_write()
    }

    /// Calls `f` with the request as the client encodes it.
    pub(crate) fn with_request<R>(&self, f: impl FnOnce(&Request<'_>) -> R) -> R {
        let mut h: ArrayVec<(&str, &str), MAX_HEADERS> = ArrayVec::new();
        for (n, v) in self.headers() {
            h.push((n, v));
        }
        f(&Request {
            method: self.method,
            target: &self.target,
            headers: &h,
            body: &self.body,
        })
    }
}

impl Default for Prepared {
    /// Buffers for a typical signed order: 512 bytes of target, 256 of body.
    fn default() -> Self {
        Prepared::with_capacity(512, 256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_fill_up_and_clear_keeps_capacity() {
        let mut p = Prepared::with_capacity(64, 0);
        for i in 0..MAX_HEADERS {
            assert!(p.header("X-A", &i.to_string()));
        }
        assert!(!p.header("X-B", "over"));
        assert_eq!(p.headers().count(), MAX_HEADERS);
        p.target.push_str("/api/v3/order?x=1");
        let cap = p.target.capacity();
        p.clear();
        assert_eq!(p.headers().count(), 0);
        assert_eq!((p.target.len(), p.target.capacity()), (0, cap));
        p.header("X-MBX-APIKEY", "k");
        let n = p.with_request(|r| r.headers.len());
        assert_eq!(n, 1);
    }
}
