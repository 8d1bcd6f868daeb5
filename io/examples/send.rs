//! Sends one request N times over one keep-alive pool, one at a time, and prints one
//! line per attempt as soon as it ends.
//!
//! ```text
//! cargo run --release -p ergon-io --example send -- [--method POST] [--header 'K: V']
//!     [--body TEXT] [--repeat N] [--interval-ms MS] [--timeout-ms MS] [--cafile PATH] URL
//! ```
//!
//! URL is `http://` or `https://` (TLS, the certificate verified against the
//! compiled-in Mozilla roots, or only against the PEM certificates of `--cafile`).
//! A certificate that does not verify sends nothing: `error sent=no tls`.
//!
//! Each attempt has a deadline (default 5000 ms) and prints exactly one line:
//! `response STATUS BODY_BYTES RTT_US`, or `error sent=no|maybe KIND`. It never
//! re-sends on its own: N attempts are at most N requests on the wire. An attempt
//! that finds no open connection before its deadline sends nothing and reports
//! `error sent=no` with the last connect error's kind (or `timeout`).

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use ergon_core::{Budget, Class, Flight, Part, Spec};
use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
use ergon_io::event_loop::{Context, EventLoop, LoopConfig};
use ergon_io::http::{Conn, Limits, Request};
use ergon_venues::response::Response;

const USAGE: &str = "usage: send [--method M] [--header 'K: V']... [--body TEXT] [--repeat N] \
[--interval-ms MS] [--timeout-ms MS] [--cafile PATH] http[s]://HOST[:PORT][/PATH]";

struct Args {
    method: String,
    headers: Vec<(String, String)>,
    body: String,
    repeat: u64,
    interval_ms: i64,
    timeout_ms: i64,
    cafile: Option<String>,
    url: String,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        method: "GET".into(),
        headers: Vec::new(),
        body: String::new(),
        repeat: 1,
        interval_ms: 0,
        timeout_ms: 5000,
        cafile: None,
        url: String::new(),
    };
    let mut url = None;
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--method" => a.method = value("--method")?,
            "--header" => {
                let h = value("--header")?;
                let (k, v) = h
                    .split_once(':')
                    .ok_or_else(|| format!("--header {h:?}: expected 'K: V'"))?;
                a.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--body" => a.body = value("--body")?,
            "--repeat" => a.repeat = number(&value("--repeat")?, "--repeat")?,
            "--interval-ms" => a.interval_ms = number(&value("--interval-ms")?, "--interval-ms")?,
            "--timeout-ms" => a.timeout_ms = number(&value("--timeout-ms")?, "--timeout-ms")?,
            "--cafile" => a.cafile = Some(value("--cafile")?),
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            _ if url.is_some() => return Err(format!("one URL only, got a second: {arg}")),
            _ => url = Some(arg),
        }
    }
    a.url = url.ok_or("missing URL")?;
    if a.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    if a.timeout_ms <= 0 {
        return Err("--timeout-ms must be positive".into());
    }
    Ok(a)
}

fn number<T: std::str::FromStr + PartialOrd + Default>(s: &str, name: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n >= T::default() => Ok(n),
        _ => Err(format!("{name} {s:?}: expected a non-negative integer")),
    }
}

/// A parsed URL.
struct Url {
    addr: SocketAddr,
    /// The Host header value.
    host: String,
    target: String,
    /// The TLS server name, for https.
    tls_name: Option<String>,
}

/// `http[s]://host[:port][/path]`.
fn parse_url(url: &str) -> Result<Url, String> {
    let (rest, tls, port) = match url.split_once("://") {
        Some(("http", rest)) => (rest, false, 80),
        Some(("https", rest)) => (rest, true, 443),
        _ => return Err(format!("{url:?}: expected http[s]://HOST[:PORT][/PATH]")),
    };
    let (authority, target) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{url:?}: expected a host (no user info)"));
    }
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:{port}")
    };
    let name = with_port.rsplit_once(':').map_or("", |(n, _)| n);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    Ok(Url {
        addr,
        host: authority.to_string(),
        target,
        tls_name: tls.then(|| name.to_string()),
    })
}

#[cfg(feature = "tls")]
fn tls_config(name: &str, cafile: Option<&str>) -> Result<ergon_io::tls::TlsConfig, String> {
    use ergon_io::tls::{roots_from_pem_file, TlsConfig};
    match cafile {
        Some(path) => {
            let roots =
                roots_from_pem_file(std::path::Path::new(path)).map_err(|e| e.to_string())?;
            TlsConfig::with_roots(roots, name).map_err(|e| e.to_string())
        }
        None => TlsConfig::webpki_roots(name).map_err(|e| e.to_string()),
    }
}

enum Phase {
    /// Waiting for `start_at`, then for a connection until `deadline`.
    Waiting {
        start_at: i64,
        deadline: Option<i64>,
    },
    InFlight {
        id: RequestId,
        sent_at: i64,
    },
}

struct Send<'a> {
    pool: PoolId,
    parts: [Part; 1],
    req: Request<'a>,
    timeout_ns: i64,
    interval_ns: i64,
    left: u64,
    phase: Phase,
    connect_error: Option<Error>,
}

const TICK: u64 = 1;

fn line(s: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    // A closed stdout ends nothing here: the attempt's outcome was still settled.
    let _ = out.write_fmt(s);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

impl Send<'_> {
    fn ended(&mut self, cx: &mut Context<'_>) {
        self.left -= 1;
        if self.left == 0 {
            cx.stop();
            return;
        }
        let start_at = cx.now() + self.interval_ns;
        self.phase = Phase::Waiting {
            start_at,
            deadline: None,
        };
        let _ = cx.set_timer(TICK, start_at);
    }

    fn attempt(&mut self, cx: &mut Context<'_>) {
        let Phase::Waiting { start_at, deadline } = self.phase else {
            return;
        };
        let now = cx.now();
        if now < start_at {
            return;
        }
        let deadline = deadline.unwrap_or(now + self.timeout_ns);
        self.phase = Phase::Waiting {
            start_at,
            deadline: Some(deadline),
        };
        let ticket = match cx.budget().try_charge(&self.parts, Class::Normal, now) {
            Ok(t) => t,
            Err(l) => {
                line(format_args!("error sent=no limited-{:?}", l.why));
                self.ended(cx);
                return;
            }
        };
        match cx.request(self.pool, &self.req, ticket, deadline) {
            Ok(id) => self.phase = Phase::InFlight { id, sent_at: now },
            Err(refused) => {
                cx.refund(refused.into_ticket());
                if now >= deadline {
                    let kind = self.connect_error.map_or("timeout", |e| e.kind());
                    line(format_args!("error sent=no {kind}"));
                    self.ended(cx);
                } else {
                    // Look again at the deadline; a connection becoming ready wakes
                    // the loop sooner.
                    let _ = cx.set_timer(TICK, deadline);
                }
            }
        }
    }
}

impl ClientHandler for Send<'_> {
    fn on_response(
        &mut self,
        cx: &mut Context<'_>,
        id: RequestId,
        r: Response<'_>,
        flight: Flight,
    ) {
        let now = cx.now();
        cx.complete(flight);
        if let Phase::InFlight { id: mine, sent_at } = self.phase {
            debug_assert_eq!(mine, id);
            line(format_args!(
                "response {} {} {}",
                r.status,
                r.body.len(),
                (now - sent_at) / 1000
            ));
        }
        self.ended(cx);
    }

    fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, sent: Sent, error: Error) {
        let word = match sent {
            Sent::No(t) => {
                cx.refund(t);
                "no"
            }
            Sent::Maybe(f) => {
                cx.complete(f);
                "maybe"
            }
        };
        line(format_args!("error sent={word} {}", error.kind()));
        self.ended(cx);
    }

    fn on_ready(&mut self, _: &mut Context<'_>, _: PoolId) {
        self.connect_error = None;
    }

    fn on_connect_error(&mut self, _: &mut Context<'_>, _: PoolId, error: Error) {
        self.connect_error = Some(error);
    }

    fn on_turn(&mut self, cx: &mut Context<'_>) {
        self.attempt(cx);
    }
}

fn run(a: Args) -> Result<(), String> {
    let Url {
        addr,
        host,
        target,
        tls_name,
    } = parse_url(&a.url)?;
    if a.cafile.is_some() && tls_name.is_none() {
        return Err("--cafile needs an https:// URL".into());
    }
    let headers: Vec<(&str, &str)> = a
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let req = Request {
        method: &a.method,
        target: &target,
        headers: &headers,
        body: a.body.as_bytes(),
    };
    let limits = Limits::default();
    // Refuse a request that cannot be encoded before connecting anywhere.
    Conn::new(Limits {
        max_response: 64,
        ..limits
    })
    .send(&req, &host)
    .map_err(|e| format!("request: {e}"))?;

    let mut b = Budget::builder();
    let requests = b
        .add("requests", Spec::sliding(u32::MAX as u64, 1_000_000_000, 1))
        .map_err(|e| e.to_string())?;
    let budget = b
        .build(ergon_io::clock::now_ns())
        .map_err(|e| e.to_string())?;
    let mut lp = EventLoop::new(LoopConfig::default(), budget).map_err(|e| e.to_string())?;
    let mut pc = PoolConfig::new(addr, host);
    pc.connect_timeout_ns = a.timeout_ms * 1_000_000;
    pc.limits = limits;
    if let Some(name) = tls_name {
        #[cfg(feature = "tls")]
        {
            pc.tls = Some(tls_config(&name, a.cafile.as_deref())?);
        }
        #[cfg(not(feature = "tls"))]
        return Err(format!("https://{name}: built without the tls feature"));
    }
    let pool = lp.add_pool(pc).map_err(|e| e.to_string())?;
    let mut h = Send {
        pool,
        parts: [Part::new(requests, 1)],
        req,
        timeout_ns: a.timeout_ms * 1_000_000,
        interval_ns: a.interval_ms * 1_000_000,
        left: a.repeat,
        phase: Phase::Waiting {
            start_at: 0,
            deadline: None,
        },
        connect_error: None,
    };
    lp.run(&mut h).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("send: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("send: {e}");
            ExitCode::from(2)
        }
    }
}
