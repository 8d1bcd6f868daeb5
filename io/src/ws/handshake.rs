//! The opening handshake (RFC 6455 §4.1): the upgrade request we write and the
//! checks on the server's answer.
//!
//! Writes into and reads from the session's buffers: no allocation, no I/O, no panic
//! on any response bytes.

use super::accept::{accept_for, ACCEPT_LEN, KEY_LEN};

/// Most response headers read; more is a malformed answer.
const MAX_HEADERS: usize = 32;

/// What the upgrade request says besides the fixed WebSocket headers.
#[derive(Clone, Copy, Debug)]
pub struct Upgrade<'a> {
    /// The `Host` header (`host` or `host:port`).
    pub host: &'a str,
    /// The request target, starting with `/` (`/ws?streams=...`).
    pub path: &'a str,
    /// Extra headers (an API key, `Origin` ...). The WebSocket headers are ours.
    pub headers: &'a [(&'a str, &'a str)],
}

/// Why the server's answer to the upgrade is refused. The connection is failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandshakeError {
    /// Not a parsable HTTP/1.1 response (or more than 32 headers).
    Malformed,
    /// The response header did not fit the handshake bound.
    TooLarge,
    /// A status other than 101. 429 and 418 are the venue's throttle and ban:
    /// [`Session::rejection`](super::Session::rejection) holds the whole answer
    /// (headers and body) for the venue adapter, which feeds it to the budget.
    ///
    /// [`Culprit::Peer`](crate::Culprit::Peer) like every other variant: the
    /// venue's own rule refused, not ergon's.
    Status(u16),
    /// No `Upgrade: websocket`.
    MissingUpgrade,
    /// No `upgrade` token in `Connection`.
    MissingConnection,
    /// No `Sec-WebSocket-Accept`.
    MissingAccept,
    /// A `Sec-WebSocket-Accept` that is not base64(SHA-1(key + GUID)), or two of them.
    BadAccept,
    /// An extension or subprotocol we did not offer.
    Unrequested,
}

impl core::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HandshakeError::Malformed => f.write_str("malformed upgrade response"),
            HandshakeError::TooLarge => f.write_str("upgrade response header too large"),
            HandshakeError::Status(s) => write!(f, "upgrade answered with status {s}"),
            HandshakeError::MissingUpgrade => f.write_str("no Upgrade: websocket"),
            HandshakeError::MissingConnection => f.write_str("no Connection: upgrade"),
            HandshakeError::MissingAccept => f.write_str("no Sec-WebSocket-Accept"),
            HandshakeError::BadAccept => f.write_str("wrong Sec-WebSocket-Accept"),
            HandshakeError::Unrequested => f.write_str("extension or subprotocol not offered"),
        }
    }
}

impl std::error::Error for HandshakeError {}

impl HandshakeError {
    /// Always [`Culprit::Peer`](crate::Culprit::Peer): the server's answer.
    pub fn culprit(&self) -> crate::Culprit {
        match self {
            HandshakeError::Malformed
            | HandshakeError::TooLarge
            | HandshakeError::Status(_)
            | HandshakeError::MissingUpgrade
            | HandshakeError::MissingConnection
            | HandshakeError::MissingAccept
            | HandshakeError::BadAccept
            | HandshakeError::Unrequested => crate::Culprit::Peer,
        }
    }
}

/// A request field with a byte that would end a line or a header early.
fn clean(s: &str) -> bool {
    !s.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
}

fn token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `req` can be written as it is: no line breaks, a path starting with `/`
/// and without spaces, header names that are tokens and not our own.
pub(crate) fn valid(req: &Upgrade<'_>) -> bool {
    let ours = [
        "host",
        "upgrade",
        "connection",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
    ];
    !req.host.is_empty()
        && clean(req.host)
        && !req.host.contains(' ')
        && req.path.starts_with('/')
        && clean(req.path)
        && !req.path.contains(' ')
        && req.headers.iter().all(|(name, value)| {
            token(name) && clean(value) && !ours.iter().any(|o| name.eq_ignore_ascii_case(o))
        })
}

/// Bytes `req` takes once written.
pub(crate) fn request_len(req: &Upgrade<'_>) -> usize {
    let fixed = "GET  HTTP/1.1\r\nHost: \r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Key: \r\nSec-WebSocket-Version: 13\r\n\r\n"
        .len();
    fixed
        + req.path.len()
        + req.host.len()
        + KEY_LEN
        + req
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum::<usize>()
}

/// Writes the upgrade request into `out`, which holds [`request_len`] bytes.
pub(crate) fn write_request(req: &Upgrade<'_>, key: &[u8; KEY_LEN], out: &mut [u8]) -> usize {
    let mut w = Cursor { out, at: 0 };
    w.put(b"GET ");
    w.put(req.path.as_bytes());
    w.put(b" HTTP/1.1\r\nHost: ");
    w.put(req.host.as_bytes());
    w.put(b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
    w.put(key);
    w.put(b"\r\nSec-WebSocket-Version: 13\r\n");
    for (name, value) in req.headers {
        w.put(name.as_bytes());
        w.put(b": ");
        w.put(value.as_bytes());
        w.put(b"\r\n");
    }
    w.put(b"\r\n");
    w.at
}

struct Cursor<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    fn put(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
}

/// Whether the comma-separated header value `list` holds `tok` (case-insensitive).
fn has_token(list: &[u8], tok: &str) -> bool {
    list.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(tok.as_bytes()))
}

/// Reads the server's answer at the start of `buf`. `Ok(Some(n))`: a valid 101
/// whose header is the first `n` bytes (what follows is frames). `Ok(None)`: more
/// bytes needed; the caller fails with [`HandshakeError::TooLarge`] once its bound
/// is reached.
pub(crate) fn read_response(
    buf: &[u8],
    key: &[u8; KEY_LEN],
) -> Result<Option<usize>, HandshakeError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let n = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HandshakeError::Malformed),
    };
    let code = resp.code.ok_or(HandshakeError::Malformed)?;
    if code != 101 {
        return Err(HandshakeError::Status(code));
    }
    let expected: [u8; ACCEPT_LEN] = accept_for(key);
    let (mut upgrade, mut connection, mut accepts, mut accepted) = (false, false, 0, false);
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= h.value.trim_ascii().eq_ignore_ascii_case(b"websocket");
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= has_token(h.value, "upgrade");
        } else if name.eq_ignore_ascii_case("sec-websocket-accept") {
            accepts += 1;
            accepted = h.value.trim_ascii() == expected;
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions")
            || name.eq_ignore_ascii_case("sec-websocket-protocol")
        {
            return Err(HandshakeError::Unrequested);
        }
    }
    if !upgrade {
        return Err(HandshakeError::MissingUpgrade);
    }
    if !connection {
        return Err(HandshakeError::MissingConnection);
    }
    match (accepts, accepted) {
        (0, _) => Err(HandshakeError::MissingAccept),
        (1, true) => Ok(Some(n)),
        _ => Err(HandshakeError::BadAccept),
    }
}

/// How the body of a non-101 answer is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// `Content-Length` bytes.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends with the connection.
    UntilClose,
}

/// A non-101 answer's status, head length and body framing, once its head is
/// complete at the start of `buf`; None before (or if it is not parsable).
pub(crate) fn read_rejection(buf: &[u8]) -> Option<(u16, usize, Body)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(n)) = resp.parse(buf) else {
        return None;
    };
    let code = resp.code.filter(|&c| c != 101)?;
    let mut body = Body::UntilClose;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") && has_token(h.value, "chunked") {
            body = Body::Chunked;
            break;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let len = core::str::from_utf8(h.value.trim_ascii())
                .ok()
                .and_then(|v| v.parse::<usize>().ok());
            match len {
                Some(len) => body = Body::Length(len),
                // A length we cannot read: take the body as it comes.
                None => body = Body::UntilClose,
            }
        }
    }
    Some((code, n, body))
}

/// Walks a chunked body at the start of `buf`, calling `data` with each chunk's
/// byte range. `Some(end)`: the body (last chunk and trailers) ends at `end`;
/// None: incomplete or malformed.
pub(crate) fn walk_chunks(buf: &[u8], mut data: impl FnMut(usize, usize)) -> Option<usize> {
    let line_end = |from: usize| -> Option<usize> {
        buf.get(from..)?
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p)
    };
    let mut at = 0;
    loop {
        let eol = line_end(at)?;
        let size_text = buf[at..eol].split(|&b| b == b';').next()?.trim_ascii();
        let size = core::str::from_utf8(size_text)
            .ok()
            .and_then(|t| usize::from_str_radix(t, 16).ok())?;
        at = eol + 2;
        if size == 0 {
            // Trailers, up to an empty line.
            loop {
                let eol = line_end(at)?;
                let empty = eol == at;
                at = eol + 2;
                if empty {
                    return Some(at);
                }
            }
        }
        let end = at.checked_add(size)?;
        if buf.get(end..end.checked_add(2)?)? != b"\r\n" {
            return None;
        }
        data(at, end);
        at = end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8; KEY_LEN] = b"dGhlIHNhbXBsZSBub25jZQ==";

    fn resp(extra: &str) -> Vec<u8> {
        format!("HTTP/1.1 101 Switching Protocols\r\n{extra}\r\n").into_bytes()
    }

    #[test]
    fn request_is_exactly_its_length() {
        let req = Upgrade {
            host: "stream.example:443",
            path: "/ws?x=1",
            headers: &[("X-MBX-APIKEY", "abc")],
        };
        assert!(valid(&req));
        let mut out = vec![0u8; request_len(&req)];
        let n = write_request(&req, KEY, &mut out);
        assert_eq!(n, out.len());
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.starts_with("GET /ws?x=1 HTTP/1.1\r\nHost: stream.example:443\r\n"));
        assert!(text.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
        assert!(text.ends_with("X-MBX-APIKEY: abc\r\n\r\n"));
    }

    #[test]
    fn request_injection_refused() {
        let bad = [
            Upgrade {
                host: "a\r\nX: y",
                path: "/",
                headers: &[],
            },
            Upgrade {
                host: "a",
                path: "ws",
                headers: &[],
            },
            Upgrade {
                host: "a",
                path: "/ HTTP/1.0",
                headers: &[],
            },
            Upgrade {
                host: "a",
                path: "/",
                headers: &[("Bad Name", "v")],
            },
            Upgrade {
                host: "a",
                path: "/",
                headers: &[("X", "v\nY: z")],
            },
            Upgrade {
                host: "a",
                path: "/",
                headers: &[("Sec-WebSocket-Key", "x")],
            },
        ];
        for req in bad {
            assert!(!valid(&req), "{req:?}");
        }
    }

    #[test]
    fn rejections_are_framed_as_http_says() {
        let r = b"HTTP/1.1 418 I'm a teapot\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(read_rejection(r), Some((418, r.len() - 2, Body::Length(2))));
        assert_eq!(read_rejection(&r[..20]), None);
        let r = b"HTTP/1.1 429 x\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(read_rejection(r), Some((429, r.len(), Body::Chunked)));
        let r = b"HTTP/1.1 403 x\r\n\r\nbody";
        assert_eq!(
            read_rejection(r),
            Some((403, r.len() - 4, Body::UntilClose))
        );
        assert_eq!(read_rejection(b"HTTP/1.1 101 x\r\n\r\n"), None);
        let mut parts = Vec::new();
        let chunked = b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\nnext";
        let end = walk_chunks(chunked, |a, b| parts.push(&chunked[a..b]));
        assert_eq!(end, Some(chunked.len() - 4));
        assert_eq!(parts, [&b"abc"[..], b"de"]);
        for cut in 0..chunked.len() - 4 {
            assert_eq!(walk_chunks(&chunked[..cut], |_, _| {}), None, "{cut}");
        }
        assert_eq!(walk_chunks(b"zz\r\n", |_, _| {}), None);
        assert_eq!(walk_chunks(b"ffffffffffffffffff\r\n", |_, _| {}), None);
    }

    #[test]
    fn response_checks() {
        let good = "Upgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\
                    Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n";
        let r = resp(good);
        assert_eq!(read_response(&r, KEY), Ok(Some(r.len())));
        assert_eq!(read_response(&r[..r.len() - 1], KEY), Ok(None));
        let wrong = good.replace("s3pP", "s3pQ");
        assert_eq!(
            read_response(&resp(&wrong), KEY),
            Err(HandshakeError::BadAccept)
        );
        let twice = format!("{good}Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n");
        assert_eq!(
            read_response(&resp(&twice), KEY),
            Err(HandshakeError::BadAccept)
        );
        let no_up = good.replace("Upgrade: WebSocket\r\n", "");
        assert_eq!(
            read_response(&resp(&no_up), KEY),
            Err(HandshakeError::MissingUpgrade)
        );
        let no_conn = good.replace("keep-alive, Upgrade", "keep-alive");
        assert_eq!(
            read_response(&resp(&no_conn), KEY),
            Err(HandshakeError::MissingConnection)
        );
        let ext = format!("{good}Sec-WebSocket-Extensions: permessage-deflate\r\n");
        assert_eq!(
            read_response(&resp(&ext), KEY),
            Err(HandshakeError::Unrequested)
        );
        let status = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n\r\n";
        assert_eq!(read_response(status, KEY), Err(HandshakeError::Status(429)));
        assert_eq!(
            read_response(b"HTTP/1.1 1x1\r\n\r\n", KEY),
            Err(HandshakeError::Malformed)
        );
        let no_accept = good.replace("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n", "");
        assert_eq!(
            read_response(&resp(&no_accept), KEY),
            Err(HandshakeError::MissingAccept)
        );
    }
}
