//! HTTP/1.1 framing for the emulator: one request out of a byte buffer, one response
//! into bytes.
//!
//! Parsing is bounded (header block, header count, body length) and never panics on
//! bad bytes; chunked request bodies are refused (no Binance client sends them).
//! This module never touches a socket.

/// Largest header block accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// One parsed request, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Method, e.g. `POST`.
    pub method: String,
    /// Path without the query, e.g. `/api/v3/order`.
    pub path: String,
    /// The raw query string (after `?`), possibly empty.
    pub query: String,
    /// The raw body.
    pub body: Vec<u8>,
    /// The `X-MBX-APIKEY` header, if sent.
    pub api_key: Option<String>,
    /// Every header whose value is UTF-8: name lowercased, value trimmed.
    pub headers: Vec<(String, String)>,
    /// The client asked to close after this request (`Connection: close` or HTTP/1.0).
    pub close: bool,
}

impl Request {
    /// The first header named `name` (compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request and the bytes it used.
    Complete(Request, usize),
    /// More bytes needed.
    Partial,
    /// The bytes are not an acceptable request; answer with this status and close.
    Bad(u16, &'static str),
}

/// Parses the first request in `buf`.
pub fn parse_request(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD {
                return Parsed::Bad(431, "request header block too large");
            }
            return Parsed::Partial;
        }
        Err(httparse::Error::TooManyHeaders) => return Parsed::Bad(431, "too many headers"),
        Err(_) => return Parsed::Bad(400, "malformed HTTP request"),
    };
    if head_len > MAX_HEAD {
        return Parsed::Bad(431, "request header block too large");
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Bad(400, "malformed HTTP request");
    };
    let mut content_length: Option<usize> = None;
    let mut api_key = None;
    let mut all = Vec::with_capacity(req.headers.len());
    let mut close = version == 0;
    for h in req.headers.iter() {
        if let Ok(v) = std::str::from_utf8(h.value) {
            all.push((h.name.to_ascii_lowercase(), v.trim().to_string()));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let Some(n) = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
            else {
                return Parsed::Bad(400, "bad Content-Length");
            };
            if content_length.is_some_and(|old| old != n) {
                return Parsed::Bad(400, "conflicting Content-Length headers");
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Bad(501, "chunked request bodies are not accepted");
        } else if h.name.eq_ignore_ascii_case("x-mbx-apikey") {
            match std::str::from_utf8(h.value) {
                Ok(v) => api_key = Some(v.trim().to_string()),
                Err(_) => return Parsed::Bad(400, "X-MBX-APIKEY is not UTF-8"),
            }
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = h.value;
            if v.eq_ignore_ascii_case(b"close") {
                close = true;
            } else if v.eq_ignore_ascii_case(b"keep-alive") {
                close = false;
            }
        }
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_BODY {
        return Parsed::Bad(413, "request body too large");
    }
    let total = head_len + body_len;
    if buf.len() < total {
        return Parsed::Partial;
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    Parsed::Complete(
        Request {
            method: method.to_string(),
            path,
            query,
            body: buf[head_len..total].to_vec(),
            api_key,
            headers: all,
            close,
        },
        total,
    )
}

/// One response to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Extra headers (usage, Retry-After).
    pub headers: Vec<(String, String)>,
    /// The body (JSON unless [`Response::content_type`] says otherwise).
    pub body: String,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// Close the connection after this answer (`Connection: close`).
    pub close: bool,
}

/// A JSON value's compact text, byte for byte what its `Display` writes,
/// serialized straight into the string (`Display` goes through a formatter for
/// every piece: about twice the instructions, on every answer the emulator writes).
pub fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| v.to_string())
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, body: String) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body,
            content_type: "application/json;charset=UTF-8",
            close: false,
        }
    }

    /// An HTML page, as a front web server (nginx) answers without the API.
    pub fn html(status: u16, body: String) -> Self {
        Response {
            content_type: "text/html",
            ..Response::json(status, body)
        }
    }

    /// Binance's error payload `{"code":..,"msg":..}`.
    pub fn error(status: u16, code: i32, msg: &str) -> Self {
        let mut body = String::with_capacity(msg.len() + 24);
        crate::json_write::Obj::new(&mut body)
            .int("code", i64::from(code))
            .str("msg", msg)
            .end();
        Response::json(status, body)
    }

    /// Serializes status line, headers and body; `close` adds `Connection: close`.
    pub fn to_bytes(&self, close: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(v);
            out.push_str("\r\n");
        }
        if close {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(self.body.as_bytes());
        bytes
    }
}

/// The reason phrase of every status the profiles answer (RFC 9110 §15).
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        410 => "Gone",
        413 => "Payload Too Large",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_request_with_body_and_key() {
        let raw = b"POST /api/v3/order?symbol=BTCUSDT HTTP/1.1\r\nHost: x\r\nX-MBX-APIKEY: k\r\nContent-Length: 3\r\n\r\na=1GET";
        let Parsed::Complete(r, n) = parse_request(raw) else {
            panic!("not complete")
        };
        assert_eq!(n, raw.len() - 3);
        assert_eq!(r.path, "/api/v3/order");
        assert_eq!(r.query, "symbol=BTCUSDT");
        assert_eq!(r.body, b"a=1");
        assert_eq!(r.api_key.as_deref(), Some("k"));
        assert_eq!(r.header("x-mbx-apikey"), Some("k"));
        assert_eq!(r.header("HOST"), Some("x"));
        assert!(!r.close);
    }

    #[test]
    fn waits_for_the_body_and_refuses_junk() {
        let raw = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
        assert_eq!(parse_request(raw), Parsed::Partial);
        assert!(matches!(
            parse_request(b"\x00\x01 junk\r\n\r\n"),
            Parsed::Bad(400, _)
        ));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse_request(chunked), Parsed::Bad(501, _)));
        let big = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert!(matches!(parse_request(big.as_bytes()), Parsed::Bad(413, _)));
        let long = vec![b'a'; MAX_HEAD + 10];
        assert!(matches!(parse_request(&long), Parsed::Bad(400 | 431, _)));
    }

    #[test]
    fn every_status_a_profile_answers_has_its_reason_phrase() {
        // Bybit's ban (403), Bybit's and OKX's 5xx faults (500).
        assert_eq!(reason(403), "Forbidden");
        assert_eq!(reason(500), "Internal Server Error");
        let mut r = Response::json(403, String::new()).to_bytes(false);
        r.truncate(30);
        assert!(String::from_utf8_lossy(&r).starts_with("HTTP/1.1 403 Forbidden\r\n"));
    }

    /// json_text is the Display text byte for byte: escapes, control and non-ASCII
    /// characters, nesting, numbers of every kind, empty containers.
    #[test]
    fn errors_are_the_maps_text() {
        for (status, code, msg) in [
            (400, -2013, "Order does not exist."),
            (418, 0, "q\"\n\u{1}é"),
        ] {
            let r = Response::error(status, code, msg);
            let want = serde_json::json!({ "code": code, "msg": msg }).to_string();
            assert_eq!((r.status, r.body), (status, want));
        }
    }

    #[test]
    fn json_text_is_the_display_text() {
        let v = serde_json::json!({
            "s": "q\"b\\c\u{1}d\u{e9}\u{1F600}/",
            "n": [0, -1, 18446744073709551615u64, 1.5, -0.000001, 1e300],
            "o": {"a": null, "b": true, "c": false, "e": {}, "f": []},
        });
        for v in [
            v.clone(),
            v["n"].clone(),
            v["s"].clone(),
            serde_json::json!(null),
        ] {
            assert_eq!(json_text(&v), v.to_string());
        }
    }
}
