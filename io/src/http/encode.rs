//! Request encoding into a caller-owned, preallocated buffer.
//!
//! The client owns framing: callers may not set Host, Content-Length,
//! Transfer-Encoding or Connection, so a request can never carry two framings.
//! Encoding never grows the buffer; a request that does not fit is refused.
//!
//! A request its adapter wrote as HTTP/1.1 already ([`Http`], valid on the wire by
//! construction) is copied in as it is, with the `Host` line after its request line:
//! no second encoding, no check per byte per send.

use arrayvec::ArrayVec;
use ergon_venues::endpoint::{Http, Prepared, MAX_HEADERS};

/// One request as the caller describes it. Nothing is copied until it is encoded.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The method token (`GET`, `POST`, `DELETE` ...).
    pub method: &'a str,
    /// The request target: the path and query, starting with `/`.
    pub target: &'a str,
    /// Extra header fields, in order. Host, Content-Length, Transfer-Encoding and
    /// Connection are set by the client and refused here.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body; a Content-Length is sent whenever it is not empty, or the method is
    /// not GET, HEAD, DELETE or OPTIONS.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A GET of `target` with no headers and no body.
    pub const fn get(target: &'a str) -> Self {
        Request {
            method: "GET",
            target,
            headers: &[],
            body: &[],
        }
    }
}

/// Why a request could not be encoded. The caller's mistake, found before any byte
/// is written.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidRequest {
    /// The method is empty or not an HTTP token.
    Method,
    /// The target does not start with `/` (nor is `*` for OPTIONS), or holds a
    /// space, a control byte or a `#`.
    Target,
    /// A header name is empty or not an HTTP token.
    HeaderName,
    /// A header value holds CR, LF or another control byte.
    HeaderValue,
    /// A header the client sets itself (Host, Content-Length, Transfer-Encoding,
    /// Connection).
    ReservedHeader,
    /// The encoded request is larger than the send buffer
    /// ([`Limits::max_request`](super::Limits::max_request)).
    TooLarge,
    /// The connection is not idle (a request is already in flight on it).
    NotIdle,
    /// A prepared request whose signature is still pending (written for a
    /// WebSocket API lane, `Prepared::signature_pending`): its adapter's
    /// `Endpoints::sign_pending` signs it before it may go over HTTP.
    Unsigned,
}

impl core::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            InvalidRequest::Method => "invalid method",
            InvalidRequest::Target => "invalid request target",
            InvalidRequest::HeaderName => "invalid header name",
            InvalidRequest::HeaderValue => "invalid header value",
            InvalidRequest::ReservedHeader => "header set by the client itself",
            InvalidRequest::TooLarge => "request larger than the send buffer",
            InvalidRequest::NotIdle => "connection not idle",
            InvalidRequest::Unsigned => "prepared request not signed yet (signature pending)",
        };
        f.write_str(s)
    }
}

impl std::error::Error for InvalidRequest {}

impl InvalidRequest {
    /// Always [`Culprit::Caller`](crate::Culprit::Caller): found before any byte
    /// is written, in what the caller asked (NotIdle: a send on a connection the
    /// caller's own driver has not seen finish).
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            InvalidRequest::Method
            | InvalidRequest::Target
            | InvalidRequest::HeaderName
            | InvalidRequest::HeaderValue
            | InvalidRequest::ReservedHeader
            | InvalidRequest::TooLarge
            | InvalidRequest::NotIdle
            | InvalidRequest::Unsigned => crate::Culprit::Caller,
        }
    }
}

/// RFC 9110 `tchar`, one lookup a byte (on the send path: method and header
/// names are checked on every request).
const TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    t
};

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| TCHAR[usize::from(b)])
}

/// A header value's bytes: HTAB, or visible and space (no CR, LF or other control).
///
/// The checks below fold every byte without an early exit and without
/// short-circuit operators, so the compiler checks 16 or 32 bytes a step (a
/// byte-at-a-time `all` took ~8 instructions a byte: ~2,100 for a signed Binance
/// order's target and API key, the largest share of the send path's encoding).
fn valid_value(s: &str) -> bool {
    s.bytes().fold(true, |ok, b| {
        ok & ((b == b'\t') | ((b >= 0x20) & (b != 0x7f)))
    })
}

/// The origin form (`/path?query`), or `*` for OPTIONS (RFC 9112 §3.2). Anything
/// else could name another host to a proxy or to libcurl's URL parser
/// (`@other-host/x` turns the pool's address into userinfo), so it is refused
/// before a byte is written. No fragment: it is never sent on the wire.
fn valid_target(method: &str, s: &str) -> bool {
    if s == "*" {
        return method == "OPTIONS";
    }
    s.starts_with('/')
        && s.bytes()
            .fold(true, |ok, b| ok & (b > 0x20) & (b != 0x7f) & (b != b'#'))
}

const RESERVED: [&str; 4] = ["host", "content-length", "transfer-encoding", "connection"];

/// Decimal digits of `n` into `out`, returning the used tail.
fn decimal(mut n: usize, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[i..];
        }
    }
}

/// Encodes `req` for `host` into `out` (cleared first), never beyond its capacity.
#[cfg(feature = "curl")]
pub(crate) fn encode(
    req: &Request<'_>,
    host: &str,
    out: &mut Vec<u8>,
) -> Result<(), InvalidRequest> {
    out.clear();
    encode_with(req, host, out.capacity(), |b| out.extend_from_slice(b)).map(|_| ())
}

/// Encodes `req` for `host` into the front of `out`, never beyond it; returns how
/// many bytes it wrote.
pub(crate) fn encode_into(
    req: &Request<'_>,
    host: &str,
    out: &mut [u8],
) -> Result<usize, InvalidRequest> {
    let mut at = 0;
    let len = encode_with(req, host, out.len(), |b| {
        // Always in bounds: the request's length was checked against `out`'s first.
        if let Some(to) = out.get_mut(at..at + b.len()) {
            to.copy_from_slice(b);
        }
        at += b.len();
    })?;
    debug_assert_eq!(at, len);
    Ok(len)
}

/// Checks `req`, then hands its bytes for `host` to `put` piece by piece, in order,
/// if they are at most `room`; returns their length.
fn encode_with(
    req: &Request<'_>,
    host: &str,
    room: usize,
    mut put: impl FnMut(&[u8]),
) -> Result<usize, InvalidRequest> {
    if !is_token(req.method) {
        return Err(InvalidRequest::Method);
    }
    if !valid_target(req.method, req.target) {
        return Err(InvalidRequest::Target);
    }
    let mut len = req.method.len() + 1 + req.target.len() + 11 + 6 + host.len() + 2;
    for (name, value) in req.headers {
        if !is_token(name) {
            return Err(InvalidRequest::HeaderName);
        }
        if !valid_value(value) {
            return Err(InvalidRequest::HeaderValue);
        }
        if RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)) {
            return Err(InvalidRequest::ReservedHeader);
        }
        len += name.len() + 2 + value.len() + 2;
    }
    let bodyless = matches!(req.method, "GET" | "HEAD" | "DELETE" | "OPTIONS");
    let mut digits = [0u8; 20];
    let cl = decimal(req.body.len(), &mut digits);
    let send_length = !req.body.is_empty() || !bodyless;
    if send_length {
        len += 16 + cl.len() + 2;
    }
    len += 2 + req.body.len();
    if len > room {
        return Err(InvalidRequest::TooLarge);
    }
    put(req.method.as_bytes());
    put(b" ");
    put(req.target.as_bytes());
    put(b" HTTP/1.1\r\nHost: ");
    put(host.as_bytes());
    put(b"\r\n");
    for (name, value) in req.headers {
        put(name.as_bytes());
        put(b": ");
        put(value.as_bytes());
        put(b"\r\n");
    }
    if send_length {
        put(b"Content-Length: ");
        put(cl);
        put(b"\r\n");
    }
    put(b"\r\n");
    put(req.body);
    Ok(len)
}

/// A pool's `Host` header line, `Host: {host}\r\n`, written once when the pool is
/// added: a request its adapter wrote as HTTP/1.1 ([`Http`]) is copied out with it
/// in one piece (it was three: the name, the host, the line's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLine {
    host: Box<str>,
    line: Box<[u8]>,
}

impl HostLine {
    /// The line of `host` (`name` or `name:port`); None if it is empty or has a
    /// byte that is not visible ASCII. Allocates: setup time.
    pub fn new(host: &str) -> Option<HostLine> {
        if host.is_empty() || !host.bytes().all(|b| b > 0x20 && b < 0x7f) {
            return None;
        }
        Some(HostLine {
            host: host.into(),
            line: [b"Host: ", host.as_bytes(), b"\r\n"].concat().into(),
        })
    }

    /// The host, as given.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The whole line, `Host: {host}\r\n`.
    pub fn line(&self) -> &[u8] {
        &self.line
    }
}

/// Copies `req` (a request encoded but for its `Host` line) with `host`'s line into
/// the front of `out`, never beyond it: the request line, `Host`, the rest; returns
/// how many bytes it wrote. The bytes are the ones [`encode_into`] writes for the
/// same request (valid by construction: see [`Http`]); only their size is checked,
/// once.
#[inline]
pub(crate) fn encode_http(
    req: &Http<'_>,
    host: &HostLine,
    out: &mut [u8],
) -> Result<usize, InvalidRequest> {
    let (line, host, rest) = (req.line(), host.line(), req.rest());
    let (line_end, host_end) = (line.len(), line.len() + host.len());
    let Some(out) = out.get_mut(..host_end + rest.len()) else {
        return Err(InvalidRequest::TooLarge);
    };
    let (to_line, out) = out.split_at_mut(line_end);
    let (to_host, to_rest) = out.split_at_mut(host.len());
    to_line.copy_from_slice(line);
    to_host.copy_from_slice(host);
    to_rest.copy_from_slice(rest);
    Ok(host_end + rest.len())
}

/// Calls `f` with `p` as a [`Request`] (its method, target, headers and body, to
/// encode) and `x`; `Err(x)` (and `f` not called) when `p` is empty or its
/// signature is pending ([`Prepared::signature_pending`]: it must not go out as it
/// is; [`unsendable`] says which).
pub fn with_prepared<T, R>(
    p: &Prepared,
    x: T,
    f: impl FnOnce(&Request<'_>, T) -> R,
) -> Result<R, T> {
    let Some(method) = p
        .method()
        .filter(|_| !p.is_empty() && !p.signature_pending())
    else {
        return Err(x);
    };
    let mut h: ArrayVec<(&str, &str), MAX_HEADERS> = ArrayVec::new();
    for kv in p.headers() {
        if h.try_push(kv).is_err() {
            break;
        }
    }
    let req = Request {
        method: method.as_str(),
        target: p.target(),
        headers: &h,
        body: p.body(),
    };
    Ok(f(&req, x))
}

/// Why [`with_prepared`] refused `p`: [`InvalidRequest::Unsigned`] when its
/// signature is pending, else [`InvalidRequest::Method`] (it is empty).
pub fn unsendable(p: &Prepared) -> InvalidRequest {
    match p.signature_pending() {
        true => InvalidRequest::Unsigned,
        false => InvalidRequest::Method,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(req: &Request<'_>) -> Result<Vec<u8>, InvalidRequest> {
        let mut out = [0; 256];
        encode_into(req, "h:1", &mut out).map(|n| out[..n].to_vec())
    }

    /// The table against RFC 9110's definition, byte by byte.
    #[test]
    fn the_tchar_table_is_rfc_9110s() {
        for b in 0..=255u8 {
            let rfc = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(TCHAR[usize::from(b)], rfc, "byte {b:#04x}");
        }
        assert!(is_token("X-MBX-APIKEY") && !is_token("a b") && !is_token(""));
    }

    #[test]
    fn encodes_get_without_length_and_post_with() {
        assert_eq!(
            enc(&Request::get("/a?b=1")).unwrap(),
            b"GET /a?b=1 HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
        let post = Request {
            method: "POST",
            target: "/o",
            headers: &[("X-K", "v 1")],
            body: b"id=7",
        };
        assert_eq!(
            enc(&post).unwrap(),
            b"POST /o HTTP/1.1\r\nHost: h:1\r\nX-K: v 1\r\nContent-Length: 4\r\n\r\nid=7"
        );
        let empty_post = Request { body: b"", ..post };
        assert!(enc(&empty_post)
            .unwrap()
            .ends_with(b"Content-Length: 0\r\n\r\n"));
    }

    #[test]
    fn refuses_bad_requests() {
        let base = Request::get("/");
        assert_eq!(
            enc(&Request {
                method: "G T",
                ..base
            }),
            Err(InvalidRequest::Method)
        );
        assert_eq!(
            enc(&Request {
                target: "/a b",
                ..base
            }),
            Err(InvalidRequest::Target)
        );
        for target in ["", "@other-host/x", "x", "http://h/x", "*", "/a#b", "/a\tb"] {
            assert_eq!(
                enc(&Request { target, ..base }),
                Err(InvalidRequest::Target),
                "{target:?}"
            );
        }
        let star = Request {
            method: "OPTIONS",
            target: "*",
            ..base
        };
        assert!(enc(&star).is_ok());
        let h = [("X\r\nY", "1")];
        assert_eq!(
            enc(&Request {
                headers: &h,
                ..base
            }),
            Err(InvalidRequest::HeaderName)
        );
        let h = [("X", "1\r\nY: 2")];
        assert_eq!(
            enc(&Request {
                headers: &h,
                ..base
            }),
            Err(InvalidRequest::HeaderValue)
        );
        let h = [("content-LENGTH", "3")];
        assert_eq!(
            enc(&Request {
                headers: &h,
                ..base
            }),
            Err(InvalidRequest::ReservedHeader)
        );
        let big = [0u8; 300];
        assert_eq!(
            enc(&Request {
                method: "POST",
                body: &big,
                ..base
            }),
            Err(InvalidRequest::TooLarge)
        );
    }

    /// Every byte value at every position of a target and a header value longer
    /// than a vector step (the checks fold many bytes at once): refused exactly
    /// when the byte is not allowed there.
    #[test]
    fn every_byte_is_checked_wherever_it_stands() {
        for b in 0..=0x7fu8 {
            for at in [1, 15, 16, 17, 31, 32, 33, 63, 64, 99] {
                let mut target = vec![b'a'; 100];
                target[0] = b'/';
                target[at] = b;
                let t = std::str::from_utf8(&target).unwrap();
                let ok = b > 0x20 && b != 0x7f && b != b'#';
                assert_eq!(valid_target("GET", t), ok, "target byte {b:#04x} at {at}");
                let mut value = vec![b'v'; 100];
                value[at] = b;
                let v = std::str::from_utf8(&value).unwrap();
                let ok = b == b'\t' || (b >= 0x20 && b != 0x7f);
                assert_eq!(valid_value(v), ok, "value byte {b:#04x} at {at}");
            }
        }
        // Bytes above 0x7f (UTF-8) pass both, as before.
        assert!(valid_target("GET", "/é") && valid_value("é"));
    }

    #[test]
    fn never_writes_beyond_the_buffer() {
        let mut out = [b'z'; 96];
        let body = [b'x'; 40];
        let req = Request {
            method: "POST",
            target: "/",
            headers: &[],
            body: &body,
        };
        // 88 bytes with a one-byte host: refused in 87, nothing written.
        assert_eq!(
            encode_into(&req, "h", &mut out[..87]),
            Err(InvalidRequest::TooLarge)
        );
        assert_eq!(out, [b'z'; 96]);
        assert_eq!(encode_into(&req, "h", &mut out[..88]), Ok(88));
        assert!(out[..88].ends_with(&body) && out[88..] == [b'z'; 8]);
    }
}
