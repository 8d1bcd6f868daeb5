//! A small blocking etcd v3 client over etcd's JSON gRPC gateway (`/v3/...`), on
//! std's `TcpStream`: HTTP/1.1 on one kept-alive connection per endpoint, one
//! request at a time, each with a deadline.
//!
//! Only what the lease thread needs: lease grant, keepalive and revoke, range,
//! put and transactions. Keys and values are base64 in the JSON; 64-bit numbers are
//! strings, and fields at their default value are left out (proto3 JSON), so an
//! absent `TTL` is 0 and an absent `succeeded` is false.
//!
//! Runs on the lease thread only, never on the loop thread: it blocks (up to its
//! timeout per endpoint) and allocates.

use std::fmt;
use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::secure::{Conn, Ready, Security};

/// The longest answer read: a range over one bucket's prefix is a few KiB.
const MAX_ANSWER: usize = 4 << 20;

/// What went wrong talking to etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EtcdError {
    /// An endpoint is not `http://host:port` (or `https://host:port` with TLS).
    BadEndpoint(String),
    /// A TLS file or the user's password file cannot be used; the text names it.
    Security(String),
    /// No endpoint answered within its timeout; the last cause.
    Unreachable(String),
    /// etcd answered with an error (HTTP status and its message).
    Server {
        /// HTTP status.
        status: u16,
        /// etcd's message.
        message: String,
    },
    /// The answer is not what the gateway documents.
    BadAnswer(String),
}

impl fmt::Display for EtcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtcdError::BadEndpoint(e) => write!(
                f,
                "bad etcd endpoint {e:?}: expected http://host:port, or https://host:port \
                 with TLS files"
            ),
            EtcdError::Security(e) => write!(f, "etcd TLS or user: {e}"),
            EtcdError::Unreachable(e) => write!(f, "no etcd endpoint answered: {e}"),
            EtcdError::Server { status, message } => {
                write!(f, "etcd answered {status}: {message}")
            }
            EtcdError::BadAnswer(e) => write!(f, "unexpected answer from etcd: {e}"),
        }
    }
}

impl std::error::Error for EtcdError {}

/// One key as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The revision of its last write.
    pub mod_revision: i64,
    /// The revision of its creation.
    pub create_revision: i64,
    /// The lease it is attached to (0 for none).
    pub lease: i64,
}

/// A compare of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    /// `mod_revision(key) == revision` (0 for an absent key).
    ModRevision(Vec<u8>, i64),
    /// `create_revision(key) == 0`: the key does not exist.
    Absent(Vec<u8>),
    /// `value(key) == value`.
    Value(Vec<u8>, Vec<u8>),
    /// `lease(key) == lease`: the key is attached to that lease (an absent key
    /// compares as lease 0).
    Lease(Vec<u8>, i64),
}

/// An operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Put `value` at `key`, attached to `lease` (0 for none).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease, or 0.
        lease: i64,
    },
}

/// A blocking client over a list of endpoints; a failed endpoint passes the request
/// to the next one. Each endpoint's connection is kept alive between calls; a kept
/// connection the server closed meanwhile is replaced once, when the call failed
/// before any byte of an answer came.
pub struct Client {
    endpoints: Vec<(String, SocketAddr)>,
    conns: Vec<Option<Conn>>,
    current: usize,
    timeout: Duration,
    calls: u64,
    connects: u64,
    security: Ready,
    /// The user's token, once authenticated.
    token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .field("current", &self.current)
            .field("security", &self.security)
            .finish()
    }
}

impl Client {
    /// A client for `endpoints` (`http://host:port`, comma-separated lists are split
    /// by the caller), each request given up on one endpoint after `timeout`.
    pub fn new<S: AsRef<str>>(endpoints: &[S], timeout: Duration) -> Result<Self, EtcdError> {
        Client::with_security(endpoints, timeout, &Security::default())
    }

    /// [`Client::new`] with TLS (`https://host:port` endpoints, every one) and an
    /// etcd user, as `security` says; its files are read now.
    pub fn with_security<S: AsRef<str>>(
        endpoints: &[S],
        timeout: Duration,
        security: &Security,
    ) -> Result<Self, EtcdError> {
        let ready = security.ready().map_err(EtcdError::Security)?;
        let scheme = if ready.tls.is_some() {
            "https://"
        } else {
            "http://"
        };
        let mut out = Vec::new();
        for e in endpoints {
            let e = e.as_ref();
            let hostport = e
                .strip_prefix(scheme)
                .map(|h| h.trim_end_matches('/'))
                .filter(|h| !h.is_empty() && !h.contains('/'))
                .ok_or_else(|| EtcdError::BadEndpoint(e.to_owned()))?;
            let addr = hostport
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| EtcdError::BadEndpoint(e.to_owned()))?;
            out.push((hostport.to_owned(), addr));
        }
        if out.is_empty() {
            return Err(EtcdError::BadEndpoint(String::new()));
        }
        if timeout.is_zero() {
            return Err(EtcdError::BadEndpoint("a timeout of zero".into()));
        }
        Ok(Client {
            conns: out.iter().map(|_| None).collect(),
            endpoints: out,
            current: 0,
            timeout,
            calls: 0,
            connects: 0,
            security: ready,
            token: None,
        })
    }

    /// Calls made and TCP connections opened, over the client's life.
    pub fn counts(&self) -> (u64, u64) {
        (self.calls, self.connects)
    }

    /// POSTs `body` to `path` on the current endpoint, then on each other one until
    /// one answers. An answer with an error status from etcd is returned as is (the
    /// next endpoint would say the same), except 5xx (a member without a leader).
    /// With a user, the first call authenticates, and a call refused for its token
    /// (expired) authenticates again once.
    pub fn call(&mut self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        if self.security.user.is_some() && self.token.is_none() {
            self.authenticate()?;
        }
        match self.call_once(path, body) {
            Err(EtcdError::Server { status, message })
                if self.security.user.is_some()
                    && (status == 401 || message.contains("auth token")) =>
            {
                self.authenticate()?;
                self.call_once(path, body)
            }
            other => other,
        }
    }

    /// Trades the user's name and password for a token.
    fn authenticate(&mut self) -> Result<(), EtcdError> {
        let Some((name, password)) = self.security.user.clone() else {
            return Ok(());
        };
        self.token = None;
        let v = self.call_once(
            "/v3/auth/authenticate",
            &json!({ "name": name, "password": password }),
        )?;
        let token = v["token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| EtcdError::BadAnswer("authenticate: no token".into()))?;
        self.token = Some(token.to_owned());
        Ok(())
    }

    fn call_once(&mut self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let body = body.to_string();
        let mut last = String::new();
        self.calls += 1;
        for i in 0..self.endpoints.len() {
            let at = (self.current + i) % self.endpoints.len();
            let host = self.endpoints[at].0.clone();
            match self.post(at, path, &body) {
                Ok((200, v)) => {
                    self.current = at;
                    return Ok(v);
                }
                Ok((status, v)) if status < 500 => {
                    self.current = at;
                    let message = v["message"].as_str().unwrap_or("").to_owned();
                    return Err(EtcdError::Server { status, message });
                }
                Ok((status, v)) => last = format!("{host}: {status} {v}"),
                Err(e) => last = format!("{host}: {e}"),
            }
        }
        Err(EtcdError::Unreachable(last))
    }

    /// Grants a lease of `ttl_s` seconds: its id and the TTL etcd gave.
    pub fn lease_grant(&mut self, ttl_s: i64) -> Result<(i64, i64), EtcdError> {
        let v = self.call("/v3/lease/grant", &json!({ "TTL": ttl_s }))?;
        if let Some(e) = v["error"].as_str().filter(|e| !e.is_empty()) {
            return Err(EtcdError::Server {
                status: 200,
                message: e.to_owned(),
            });
        }
        Ok((int(&v["ID"])?, int(&v["TTL"])?))
    }

    /// Renews lease `id` once: the TTL left in seconds, 0 if the lease is gone.
    pub fn keepalive(&mut self, id: i64) -> Result<i64, EtcdError> {
        let v = self.call("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?;
        int(&v["result"]["TTL"])
    }

    /// Compacts the store's history below `revision` (every key's, etcd keeps one
    /// history): the current value of each key stays. A revision already compacted
    /// is no error.
    pub fn compact(&mut self, revision: i64) -> Result<(), EtcdError> {
        match self.call(
            "/v3/kv/compaction",
            &json!({ "revision": revision.to_string() }),
        ) {
            Err(EtcdError::Server { message, .. }) if message.contains("compacted") => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Revokes lease `id`: its keys go at once.
    pub fn lease_revoke(&mut self, id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", &json!({ "ID": id.to_string() }))
            .map(|_| ())
    }

    /// Every key under `prefix`, and the store's revision.
    pub fn range_prefix(&mut self, prefix: &[u8]) -> Result<(Vec<Kv>, i64), EtcdError> {
        let v = self.call(
            "/v3/kv/range",
            &json!({ "key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix)) }),
        )?;
        kvs(&v)
    }

    /// Puts `value` at `key`, attached to `lease` (0 for none).
    pub fn put(&mut self, key: &[u8], value: &[u8], lease: i64) -> Result<(), EtcdError> {
        self.call("/v3/kv/put", &put_json(key, value, lease))
            .map(|_| ())
    }

    /// One transaction: if every compare holds, the operations apply. Whether they did.
    pub fn txn(&mut self, compares: &[Compare], ops: &[Op]) -> Result<bool, EtcdError> {
        let compare: Vec<Value> = compares
            .iter()
            .map(|c| match c {
                Compare::ModRevision(k, r) => json!({
                    "key": B64.encode(k), "target": "MOD", "result": "EQUAL",
                    "mod_revision": r.to_string() }),
                Compare::Absent(k) => json!({
                    "key": B64.encode(k), "target": "CREATE", "result": "EQUAL",
                    "create_revision": "0" }),
                Compare::Value(k, v) => json!({
                    "key": B64.encode(k), "target": "VALUE", "result": "EQUAL",
                    "value": B64.encode(v) }),
                Compare::Lease(k, l) => json!({
                    "key": B64.encode(k), "target": "LEASE", "result": "EQUAL",
                    "lease": l.to_string() }),
            })
            .collect();
        let success: Vec<Value> = ops
            .iter()
            .map(|Op::Put { key, value, lease }| json!({ "request_put": put_json(key, value, *lease) }))
            .collect();
        let v = self.call(
            "/v3/kv/txn",
            &json!({ "compare": compare, "success": success }),
        )?;
        Ok(v["succeeded"].as_bool().unwrap_or(false))
    }
}

fn put_json(key: &[u8], value: &[u8], lease: i64) -> Value {
    let mut v = json!({ "key": B64.encode(key), "value": B64.encode(value) });
    if lease != 0 {
        v["lease"] = Value::String(lease.to_string());
    }
    v
}

/// The end of the range of every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A proto3 JSON int64: a string, a number, or absent (0).
fn int(v: &Value) -> Result<i64, EtcdError> {
    match v {
        Value::Null => Ok(0),
        Value::String(s) => s
            .parse()
            .map_err(|_| EtcdError::BadAnswer(format!("not an integer: {s:?}"))),
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| EtcdError::BadAnswer(format!("not an integer: {n}"))),
        other => Err(EtcdError::BadAnswer(format!("not an integer: {other}"))),
    }
}

fn bytes(v: &Value) -> Result<Vec<u8>, EtcdError> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => B64
            .decode(s)
            .map_err(|_| EtcdError::BadAnswer(format!("not base64: {s:?}"))),
        other => Err(EtcdError::BadAnswer(format!("not base64: {other}"))),
    }
}

fn kvs(v: &Value) -> Result<(Vec<Kv>, i64), EtcdError> {
    let revision = int(&v["header"]["revision"])?;
    let mut out = Vec::new();
    if let Some(list) = v["kvs"].as_array() {
        for kv in list {
            out.push(Kv {
                key: bytes(&kv["key"])?,
                value: bytes(&kv["value"])?,
                mod_revision: int(&kv["mod_revision"])?,
                create_revision: int(&kv["create_revision"])?,
                lease: int(&kv["lease"])?,
            });
        }
    }
    Ok((out, revision))
}

impl Client {
    /// One POST to endpoint `at` on its kept connection (or a new one): the status
    /// and the JSON body. A kept connection that fails before any byte of an answer
    /// (the server closed it while idle) is replaced once.
    fn post(&mut self, at: usize, path: &str, body: &str) -> Result<(u16, Value), String> {
        let (host, addr) = self.endpoints[at].clone();
        let auth = self
            .token
            .as_ref()
            .map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             {auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        for _ in 0..2 {
            let (mut s, kept) = match self.conns[at].take() {
                Some(s) => (s, true),
                None => {
                    self.connects += 1;
                    let tcp = connect(addr, self.timeout)?;
                    (Conn::new(tcp, &host, self.security.tls.as_ref())?, false)
                }
            };
            match exchange(&mut s, request.as_bytes(), self.timeout) {
                Ok((status, v, close)) => {
                    if !close {
                        self.conns[at] = Some(s);
                    }
                    return Ok((status, v));
                }
                Err((e, false)) if kept => {
                    let _ = e; // stale: once more on a new connection
                }
                Err((e, _)) => return Err(e),
            }
        }
        Err("the kept connection and a new one both failed".into())
    }
}

fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).ok();
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

/// Writes `request` and reads one answer: (status, body, whether the server closes
/// the connection after it). An error says whether any byte of an answer came.
fn exchange(
    s: &mut Conn,
    request: &[u8],
    timeout: Duration,
) -> Result<(u16, Value, bool), (String, bool)> {
    let deadline = Instant::now() + timeout;
    s.write_all(request)
        .map_err(|e| (format!("write: {e}"), false))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    let mut closed = false;
    loop {
        let got = !answer.is_empty();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(("timed out".into(), got));
        }
        s.tcp()
            .set_read_timeout(Some(left))
            .map_err(|e| (e.to_string(), got))?;
        match s.read(&mut buf) {
            Ok(0) if !got => return Err(("closed before answering".into(), false)),
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.len() > MAX_ANSWER {
                    return Err(("answer too long".into(), true));
                }
                if complete(&answer) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((format!("read: {e}"), got)),
        }
    }
    let (status, body) = parse_response(&answer).map_err(|e| (e, true))?;
    let v = serde_json::from_slice(&body).map_err(|e| {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        (format!("json: {e}: status {status}, {text:?}"), true)
    })?;
    let end = find(&answer, b"\r\n\r\n").unwrap_or(0);
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let close = closed || header(&head, "connection").is_some_and(|v| v.contains("close"));
    Ok((status, v, close))
}

/// Whether `answer` holds a whole response (by its length or its last chunk).
fn complete(answer: &[u8]) -> bool {
    let Some(end) = find(answer, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let body = &answer[end + 4..];
    if let Some(n) = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()) {
        return body.len() >= n;
    }
    header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked"))
        && dechunk(body).is_ok()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then_some(v.trim())
    })
}

/// The status and body of a whole HTTP/1.1 response.
fn parse_response(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(answer, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let status = head
        .strip_prefix("http/1.1 ")
        .or_else(|| head.strip_prefix("http/1.0 "))
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or("no status line")?;
    let body = &answer[end + 4..];
    if header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        return Ok((status, dechunk(body)?));
    }
    match header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()) {
        Some(n) if body.len() >= n => Ok((status, body[..n].to_vec())),
        Some(_) => Err("body shorter than its length".into()),
        None => Ok((status, body.to_vec())),
    }
}

/// Decodes a chunked body; an error until the last chunk is there.
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line = find(body, b"\r\n").ok_or("partial chunk size")?;
        let size = std::str::from_utf8(&body[..line])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .ok_or("bad chunk size")?;
        body = &body[line + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size.saturating_add(2) {
            return Err("partial chunk".into());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_and_sized_answers_parse() {
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
        assert!(complete(chunked));
        assert!(!complete(&chunked[..chunked.len() - 5]));
        assert_eq!(
            parse_response(chunked).unwrap(),
            (200, b"{\"a\":1}".to_vec())
        );
        let sized = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(sized).unwrap(), (404, b"{}".to_vec()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(parse_response(b"garbage").is_err());
        assert!(dechunk(b"zz\r\n").is_err());
    }

    proptest::proptest! {
        /// Whatever bytes come back, the parser answers with an error or a body,
        /// never a panic.
        #[test]
        fn any_answer_bytes_are_an_error_or_a_body(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = complete(&bytes);
            let _ = parse_response(&bytes);
            let _ = dechunk(&bytes);
            let mut framed = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            framed.extend_from_slice(&bytes);
            let _ = complete(&framed);
            let _ = parse_response(&framed);
        }
    }

    #[test]
    fn a_huge_chunk_size_is_partial_not_a_panic() {
        assert!(dechunk(b"ffffffffffffffff\r\nab").is_err());
    }

    #[test]
    fn prefix_ends_and_integers() {
        assert_eq!(prefix_end(b"/a/"), b"/a0");
        assert_eq!(prefix_end(&[1, 0xff]), [2]);
        assert_eq!(int(&json!("12")).unwrap(), 12);
        assert_eq!(int(&Value::Null).unwrap(), 0);
        assert!(int(&json!("x")).is_err());
    }

    #[test]
    fn endpoints_are_checked() {
        let t = Duration::from_millis(100);
        assert!(Client::new(&["http://127.0.0.1:2379"], t).is_ok());
        for bad in [
            "127.0.0.1:2379",
            "https://127.0.0.1:2379",
            "http://",
            "http://a/b",
        ] {
            assert!(
                matches!(Client::new(&[bad], t), Err(EtcdError::BadEndpoint(_))),
                "{bad}"
            );
        }
        assert!(Client::new::<&str>(&[], t).is_err());
    }
}
