//! A plain std TcpStream client for the emulator's tests: no HTTP library, so the
//! tests see exactly the bytes the emulator writes.
#![allow(dead_code)]

pub mod ws;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ergon_venue_sim::params::sign;
use ergon_venue_sim::{Report, Server, DEFAULT_API_KEY, DEFAULT_API_SECRET};
use serde_json::Value;

/// One answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_u64(&self, name: &str) -> u64 {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} header in {self:?}"))
            .parse()
            .unwrap()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn code(&self) -> i64 {
        self.json()["code"].as_i64().unwrap_or(0)
    }
}

pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Self::with_timeout(addr, Duration::from_secs(10))
    }

    pub fn with_timeout(addr: SocketAddr, timeout: Duration) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(timeout)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends one request; an Err means no complete answer came (closed or timed out).
    pub fn send(
        &mut self,
        method: &str,
        target: &str,
        key: Option<&str>,
        body: &str,
    ) -> io::Result<Resp> {
        let mut req = format!("{method} {target} HTTP/1.1\r\nHost: sim\r\n");
        if let Some(k) = key {
            req.push_str(&format!("X-MBX-APIKEY: {k}\r\n"));
        }
        if !body.is_empty() {
            req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.stream.write_all(req.as_bytes())?;
        self.read_response()
    }

    /// Sends one request with arbitrary headers.
    pub fn send_with(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> io::Result<Resp> {
        let mut req = format!("{method} {target} HTTP/1.1\r\nHost: sim\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.stream.write_all(req.as_bytes())?;
        self.read_response()
    }

    pub fn get(&mut self, target: &str) -> Resp {
        self.send("GET", target, None, "").expect("answer")
    }

    /// A signed request with the default key: `params` get timestamp and signature.
    pub fn signed(
        &mut self,
        server: &Server,
        method: &str,
        path: &str,
        params: &str,
    ) -> io::Result<Resp> {
        let q = signed_query(server, params);
        self.send(method, &format!("{path}?{q}"), Some(DEFAULT_API_KEY), "")
    }

    pub fn read_response(&mut self) -> io::Result<Resp> {
        let mut chunk = [0u8; 8192];
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = r.parse(&self.buf) {
                let hs: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let len: usize = hs
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.parse().unwrap())
                    .unwrap_or(0);
                if self.buf.len() >= n + len {
                    let body = String::from_utf8(self.buf[n..n + len].to_vec()).unwrap();
                    let status = r.code.unwrap();
                    self.buf.drain(..n + len);
                    return Ok(Resp {
                        status,
                        headers: hs,
                        body,
                    });
                }
            }
            let got = self.stream.read(&mut chunk)?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed without a reply",
                ));
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }
}

/// `params&timestamp=NOW&signature=HMAC` with the default secret and venue time.
pub fn signed_query(server: &Server, params: &str) -> String {
    let ts = server.clock().now_ms();
    let p = if params.is_empty() {
        format!("timestamp={ts}")
    } else {
        format!("{params}&timestamp={ts}")
    };
    format!("{p}&signature={}", sign(&p, DEFAULT_API_SECRET))
}

pub fn order_params(cid: &str) -> String {
    format!("symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=49000&newClientOrderId={cid}")
}

/// Jumps the venue clock ([`Server::advance_clock`]) to just after the start of
/// the next window of `window_ms`, so a short sequence of requests lands in one
/// window, without waiting for it: the emulator's clock is the only one these
/// tests' requests are judged by (the client stamps them with it).
pub fn at_window_start(server: &Server, window_ms: i64) {
    let now = server.clock().now_ms();
    let next = (now.div_euclid(window_ms) + 1) * window_ms;
    server.advance_clock(next - now + 20);
}

/// The report's order counts: (executions, cancels, modifies, duplicate rejects).
pub fn order_counts(rep: &Report) -> (u64, u64, u64, u64) {
    (
        rep.executions,
        rep.cancels,
        rep.modifies,
        rep.duplicate_rejects,
    )
}

/// What `f` finds once it finds it, or None after `limit`: the emulator's
/// connection threads see a client's close on their own time (its clock is
/// jumped with `advance_clock`, never waited out).
pub fn until<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = std::time::Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return Some(t);
        }
        if std::time::Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
