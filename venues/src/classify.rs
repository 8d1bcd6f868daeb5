//! What the `venues` program, its tests and its fuzz targets share: reading a
//! captured HTTP/1.1 response file, naming venues and requests as the command line
//! does, and the one-line decision format.
//!
//! The file reader is for captured responses and fixtures, not the client's parser
//! (that one lives in `ergon_io`): it may allocate, but never panics on bad bytes.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::adapt::{self, Clock, Request, Venue};
use crate::response::{Header, Response};
use ergon_core::{Budget, Class, Verdict};

use crate::binance_futures::{self, BinanceFutures};
use crate::binance_spot::BinanceSpot;
use crate::bybit::{self, Bybit};
use crate::hyperliquid::{self, Hyperliquid};
use crate::okx::{self, Okx};

const MS: i64 = 1_000_000;

/// The `exchangeInfo` the program loads Binance Spot limits from unless told
/// otherwise (`rateLimits` as documented).
pub const SPOT_EXCHANGE_INFO: &[u8] =
    include_bytes!("../tests/fixtures/binance-spot/exchangeInfo.json");

/// The guard of Binance's fixed windows: clock offset plus one-way latency.
pub const BINANCE_GUARD_NS: i64 = 50 * MS;

/// Where the caller's clock stands when a file is classified: any value works, the
/// output is relative to it.
pub const NOW_NS: i64 = 1_000_000 * MS;

/// The venues, as the command line names them.
pub const VENUES: [&str; 5] = [
    "binance-spot",
    "binance-futures",
    "bybit",
    "okx",
    "hyperliquid",
];

/// Most bytes of a response file.
const MAX_FILE: usize = 4 << 20;

/// A response read from a file: status, headers, de-chunked body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpFile {
    /// The status code.
    pub status: u16,
    /// Header names and values.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpFile {
    /// Reads raw HTTP/1.1 response bytes: status line, headers, blank line, body
    /// (`Content-Length` or chunked; without either, the rest of the file).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_FILE {
            return Err(format!("the file is larger than {MAX_FILE} bytes"));
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(bytes) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                return Err(
                    "not a complete HTTP response head (no blank line after the headers?)".into(),
                )
            }
            Err(e) => return Err(format!("not an HTTP/1.x response: {e}")),
        };
        let status = resp.code.ok_or("no status code")?;
        let headers: Vec<(Vec<u8>, Vec<u8>)> = resp
            .headers
            .iter()
            .map(|h| (h.name.as_bytes().to_vec(), h.value.trim_ascii().to_vec()))
            .collect();
        let find = |name: &'static str| {
            headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v.as_slice())
        };
        let rest = &bytes[head..];
        let chunked =
            find("transfer-encoding").any(|v| v.to_ascii_lowercase().ends_with(b"chunked"));
        let body = if chunked {
            dechunk(rest)?
        } else if let Some(len) = find("content-length").next() {
            let len = adapt::header_u64(len)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or("Content-Length is not a number")?;
            if find("content-length").any(|v| adapt::header_u64(v) != Some(len as u64)) {
                return Err("conflicting Content-Length headers".into());
            }
            if rest.len() < len {
                return Err(format!(
                    "the body is shorter ({}) than its Content-Length ({len})",
                    rest.len()
                ));
            }
            if rest.len() > len {
                return Err(format!(
                    "{} bytes after the body of Content-Length {len}",
                    rest.len() - len
                ));
            }
            rest.to_vec()
        } else {
            rest.to_vec()
        };
        Ok(HttpFile {
            status,
            headers,
            body,
        })
    }

    /// Runs `f` on the [`Response`] view of this file.
    pub fn with_response<R>(&self, f: impl FnOnce(&Response<'_>) -> R) -> R {
        let headers: Vec<Header<'_>> = self
            .headers
            .iter()
            .map(|(n, v)| Header { name: n, value: v })
            .collect();
        f(&Response {
            status: self.status,
            headers: &headers,
            body: &self.body,
        })
    }
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line without CRLF")?;
        let line = &rest[..line_end];
        let size_text = line.split(|&c| c == b';').next().unwrap_or(&[]);
        let size_text =
            std::str::from_utf8(size_text.trim_ascii()).map_err(|_| "bad chunk size")?;
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailers are not expected in captures; the end is CRLF.
            return Ok(body);
        }
        if size > MAX_FILE || rest.len() < size + 2 {
            return Err("a chunk longer than the file".into());
        }
        if &rest[size..size + 2] != b"\r\n" {
            return Err("a chunk not followed by CRLF".into());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Reads a request as the command line writes it: `order`, `cancel`,
/// `cancel-replace`, `batch:N`, `read:W`, `info:TYPE`.
pub fn request(text: &str) -> Result<Request<'_>, String> {
    let bad = || {
        format!("unknown request {text:?}: order | cancel | cancel-replace | batch:N | read:W | info:TYPE")
    };
    Ok(match text.split_once(':') {
        None => match text {
            "order" => Request::Order,
            "cancel" => Request::Cancel,
            "cancel-replace" => Request::CancelReplace,
            _ => return Err(bad()),
        },
        Some(("batch", n)) => Request::Batch(n.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?),
        Some(("read", w)) => Request::Read(w.parse().map_err(|_| bad())?),
        Some(("info", t)) if !t.is_empty() => Request::Info(t),
        Some(_) => return Err(bad()),
    })
}

/// Builds `venue`'s adapter and budget at `now_ns`, the venue's UTC being
/// `now_utc_ms` then.
pub fn venue(name: &str, now_ns: i64, now_utc_ms: i64) -> Result<(Box<dyn Venue>, Budget), String> {
    let clock = Clock::anchor(now_ns, now_utc_ms);
    let mut b = Budget::builder();
    let adapter: Box<dyn Venue> = match name {
        "binance-spot" => Box::new(
            BinanceSpot::from_exchange_info(SPOT_EXCHANGE_INFO, &mut b, clock, BINANCE_GUARD_NS)
                .map_err(|e| e.to_string())?,
        ),
        "binance-futures" => Box::new(
            BinanceFutures::new(
                &mut b,
                clock,
                BINANCE_GUARD_NS,
                binance_futures::DEFAULT_TABLE,
            )
            .map_err(|e| e.to_string())?,
        ),
        "bybit" => Box::new(
            Bybit::new(&mut b, clock, bybit::Config::default()).map_err(|e| e.to_string())?,
        ),
        "okx" => {
            Box::new(Okx::new(&mut b, clock, okx::Config::default()).map_err(|e| e.to_string())?)
        }
        "hyperliquid" => Box::new(
            Hyperliquid::new(&mut b, clock, hyperliquid::Config::default())
                .map_err(|e| e.to_string())?,
        ),
        _ => return Err(format!("unknown venue {name:?}: {}", VENUES.join(" | "))),
    };
    let budget = b.build(now_ns).map_err(|e| e.to_string())?;
    Ok((adapter, budget))
}

/// The decision as one line: the verdict name, then `bucket=NAME` and `until_ms=MS`
/// (relative to `now_ns`) where they apply.
pub fn line(verdict: &Verdict, budget: &Budget, now_ns: i64) -> String {
    let rel = |until: i64| until.saturating_sub(now_ns) / MS;
    match *verdict {
        Verdict::Throttled { bucket, until_ns } => format!(
            "Throttled bucket={} until_ms={}",
            budget.name(bucket).unwrap_or("?"),
            rel(until_ns)
        ),
        Verdict::Banned { bucket, until_ns } => format!(
            "Banned bucket={} until_ms={}",
            budget.name(bucket).unwrap_or("?"),
            rel(until_ns)
        ),
        other => format!("{other:?}"),
    }
}

/// What ergon makes of one response.
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// Its line.
    pub line: String,
    /// For a batch: each item's verdict, in the request's order.
    pub items: Vec<Verdict>,
    /// Their lines: `item N Verdict [bucket=NAME] [until_ms=MS]`, N from 0.
    pub item_lines: Vec<String>,
    /// A header that could not be read (the verdict stands).
    pub warning: Option<String>,
    /// The budget after it.
    pub budget: Budget,
}

/// Charges `request` on a fresh budget of `venue`, sends it, and reads `bytes` as
/// its answer. A file that is not an HTTP response is an error; a body the venue's
/// JSON reader cannot read is a verdict.
pub fn classify(
    venue_name: &str,
    req: &str,
    now_utc_ms: i64,
    bytes: &[u8],
) -> Result<Decision, String> {
    let request = request(req)?;
    let (mut adapter, mut budget) = venue(venue_name, NOW_NS, now_utc_ms)?;
    let file = HttpFile::parse(bytes)?;
    let parts = adapter.parts(request).map_err(|e| format!("{req}: {e}"))?;
    let ticket = budget
        .try_charge(&parts, Class::Urgent, NOW_NS)
        .map_err(|l| {
            format!(
                "{req} cannot be charged on a fresh budget: {:?} at {}",
                l.why,
                budget.name(l.bucket).unwrap_or("?")
            )
        })?;
    let flight = ticket.sent();
    let answer = file.with_response(|r| adapter.on_response(request, r, &mut budget, NOW_NS));
    budget.complete(flight, NOW_NS).map_err(|e| e.to_string())?;
    let (verdict, warning) = match answer {
        Ok(v) => (v, None),
        Err(adapt::Error::BadHeader { verdict, header }) => {
            (verdict, Some(format!("header {header} could not be read")))
        }
        Err(e) => return Err(e.to_string()),
    };
    let items = adapter.batch_items().to_vec();
    let item_lines = items
        .iter()
        .enumerate()
        .map(|(i, v)| format!("item {i} {}", line(v, &budget, NOW_NS)))
        .collect();
    Ok(Decision {
        line: line(&verdict, &budget, NOW_NS),
        items,
        item_lines,
        verdict,
        warning,
        budget,
    })
}

/// UTC when the shipped fixtures were answered: Tue, 14 Nov 2023 22:13:20 GMT.
pub const FIXTURE_NOW_UTC_MS: i64 = 1_700_000_000_000;

/// How to call the program.
pub const USAGE: &str =
    "usage: venues [classify --venue VENUE --request REQUEST --now-utc-ms MS FILE]
  VENUE:   binance-spot | binance-futures | bybit | okx | hyperliquid
  REQUEST: order | cancel | cancel-replace | batch:N | read:W | info:TYPE";

/// The shipped fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One line of a `CASES` file: `case request source-url`.
#[derive(Clone, Debug)]
pub struct Case {
    /// The fixture, `CASE.http`.
    pub name: String,
    /// The request it answers, as the command line writes it.
    pub request: String,
    /// The documentation page it was written from.
    pub source: String,
}

/// The fixtures of `venue`, from its `CASES` file.
pub fn cases(venue: &str) -> Result<Vec<Case>, String> {
    let path = fixtures().join(venue).join("CASES");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some(name), Some(request), Some(source), None) => out.push(Case {
                name: name.into(),
                request: request.into(),
                source: source.into(),
            }),
            _ => return Err(format!("{}: bad line {line:?}", path.display())),
        }
    }
    Ok(out)
}

fn show_fixtures(out: &mut dyn Write) -> Result<(), String> {
    for venue in VENUES {
        for case in cases(venue)? {
            let path = fixtures().join(venue).join(format!("{}.http", case.name));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let d = classify(venue, &case.request, FIXTURE_NOW_UTC_MS, &bytes)
                .map_err(|e| format!("{venue}/{}: {e}", case.name))?;
            let warn = d.warning.map(|w| format!("  ({w})")).unwrap_or_default();
            writeln!(
                out,
                "{venue}/{} [{}]: {}{warn}",
                case.name, case.request, d.line
            )
            .map_err(|e| e.to_string())?;
            for item in &d.item_lines {
                writeln!(out, "  {item}").map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn classify_args(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<(), String> {
    let (mut venue, mut request, mut now, mut file) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--venue" => venue = Some(value()?),
            "--request" => request = Some(value()?),
            "--now-utc-ms" => {
                let v = value()?;
                let ms = v
                    .parse::<i64>()
                    .map_err(|_| format!("--now-utc-ms {v:?} is not an integer"))?;
                now = Some(ms);
            }
            f if !f.starts_with("--") && file.is_none() => file = Some(f),
            other => return Err(format!("unexpected argument {other:?}\n{USAGE}")),
        }
    }
    let venue = venue.ok_or(format!("--venue is required\n{USAGE}"))?;
    let request = request.ok_or(format!("--request is required\n{USAGE}"))?;
    let now = now.ok_or(format!("--now-utc-ms is required\n{USAGE}"))?;
    let file = file.ok_or(format!("FILE is required\n{USAGE}"))?;
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let d = classify(venue, request, now, &bytes).map_err(|e| format!("{file}: {e}"))?;
    if let Some(w) = d.warning {
        let _ = writeln!(err, "warning: {file}: {w}");
    }
    writeln!(out, "{}", d.line).map_err(|e| e.to_string())?;
    for item in &d.item_lines {
        writeln!(out, "{item}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The program: no arguments prints the decision for every shipped fixture;
/// `classify ...` prints one line for one file. `Err` is for a non-zero exit.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<(), String> {
    match args.first().map(String::as_str) {
        None => show_fixtures(out),
        Some("classify") => classify_args(&args[1..], out, err),
        Some("-h" | "--help") => writeln!(out, "{USAGE}").map_err(|e| e.to_string()),
        Some(other) => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}
