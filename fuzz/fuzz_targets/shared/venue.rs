// Included by every venue fuzz target. The input is structured (`Arbitrary`): a
// status, headers the venues read (with well-formed or odd values), a body (a shipped
// fixture's, edited and cut, or raw bytes), its framing, and the request kinds it
// answers. The response is written as HTTP/1.1 bytes and read by ergon-io's
// production decoder (`ergon_io::http::Conn`), in pieces the input sizes; the
// adapter reads what the decoder hands out, as in production. Nothing may panic;
// `on_response` may only report a bad header; a batch's items are at most its
// orders; the reconcile readers answer every body.

use std::sync::OnceLock;

use ergon_core::Budget;
use ergon_io::http::{Conn, Headers, Limits, Progress, Request as HttpRequest};
use ergon_venues::adapt::{Clock, Error, Request};
use ergon_venues::classify as common;
use ergon_venues::endpoint::Endpoints;
use ergon_venues::response::Response;
use ergon_venues::{binance_futures, binance_spot, bybit, coinbase_exchange, deribit, hyperliquid, kraken_futures, kraken_spot, okx};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};

/// Header names the adapters read.
const NAMES: [&str; 10] = [
    "Retry-After",
    "X-MBX-USED-WEIGHT-1M",
    "X-MBX-ORDER-COUNT-10S",
    "X-MBX-ORDER-COUNT-1D",
    "X-Bapi-Limit",
    "X-Bapi-Limit-Status",
    "X-Bapi-Limit-Reset-Timestamp",
    "Content-Type",
    "Date",
    "X-Other",
];

const STATUSES: [u16; 12] = [200, 400, 401, 403, 404, 408, 418, 429, 500, 502, 503, 504];

const INFO: [&str; 8] = [
    "fills",
    "public",
    "l2Book",
    "userFills",
    "userRateLimit",
    "orderStatus",
    "openOrders",
    "candleSnapshot",
];

/// One fuzz case.
#[derive(Debug)]
pub struct Input {
    status: u16,
    headers: Vec<(usize, Vec<u8>)>,
    body: Vec<u8>,
    /// 0: Content-Length; otherwise chunked in pieces of this size.
    chunk: usize,
    /// The size of each read handed to the decoder.
    step: usize,
    requests: Vec<Request<'static>>,
}

fn fixture_bodies(venue: &str) -> &'static [Vec<u8>] {
    static ALL: OnceLock<Vec<(String, Vec<Vec<u8>>)>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        common::VENUES
            .iter()
            .map(|v| {
                let bodies = common::cases(v)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|c| {
                        let path = common::fixtures().join(v).join(format!("{}.http", c.name));
                        let bytes = std::fs::read(path).ok()?;
                        Some(common::HttpFile::parse(&bytes).ok()?.body)
                    })
                    .collect();
                (v.to_string(), bodies)
            })
            .collect()
    });
    all.iter()
        .find(|(v, _)| v == venue)
        .map_or(&[][..], |(_, b)| b.as_slice())
}

fn value(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    Ok(match u.int_in_range(0..=5)? {
        0 => u64::arbitrary(u)?.to_string().into_bytes(),
        1 => u.int_in_range(0u64..=100_000)?.to_string().into_bytes(),
        // Reset timestamps and ban ends around the fixtures' now, and far ahead.
        2 => u.int_in_range(1_699_000_000_000u64..=4_200_000_000_000)?.to_string().into_bytes(),
        3 => {
            let day = u.int_in_range(1..=28)?;
            let year = u.int_in_range(1990..=2100)?;
            format!("Thu, {day:02} Jan {year} 00:00:00 GMT").into_bytes()
        }
        _ => Vec::<u8>::arbitrary(u)?
            .into_iter()
            .filter(|c| *c != b'\r' && *c != b'\n')
            .take(40)
            .collect(),
    })
}

fn request(u: &mut Unstructured<'_>) -> arbitrary::Result<Request<'static>> {
    Ok(match u.int_in_range(0..=6)? {
        0 => Request::Order,
        1 => Request::Cancel,
        2 => Request::CancelReplace,
        3 => Request::Batch(u.int_in_range(1..=30)?),
        4 => Request::Read(u.int_in_range(0..=300)?),
        5 => Request::Info(*u.choose(&INFO)?),
        _ => Request::Connect,
    })
}

impl Input {
    pub fn arbitrary_for(venue: &str, u: &mut Unstructured<'_>) -> arbitrary::Result<Self> {
        let status = if bool::arbitrary(u)? {
            *u.choose(&STATUSES)?
        } else {
            u.int_in_range(100..=999)?
        };
        let n = u.int_in_range(0..=5)?;
        let mut headers = Vec::with_capacity(n);
        for _ in 0..n {
            headers.push((u.choose_index(NAMES.len())?, value(u)?));
        }
        let fixtures = fixture_bodies(venue);
        let body = if !fixtures.is_empty() && u.ratio(4, 5)? {
            let mut b = u.choose(fixtures)?.clone();
            for _ in 0..u.int_in_range(0..=3)? {
                if !b.is_empty() {
                    let i = u.choose_index(b.len())?;
                    b[i] = u8::arbitrary(u)?;
                }
            }
            if u.ratio(1, 5)? {
                let cut = u.int_in_range(0..=b.len())?;
                b.truncate(cut);
            }
            b
        } else {
            Vec::<u8>::arbitrary(u)?.into_iter().take(600).collect()
        };
        let chunk = if bool::arbitrary(u)? { 0 } else { u.int_in_range(1..=64)? };
        let step = u.int_in_range(1..=512)?;
        let n = u.int_in_range(1..=4)?;
        let mut requests = Vec::with_capacity(n);
        for _ in 0..n {
            requests.push(request(u)?);
        }
        Ok(Input { status, headers, body, chunk, step, requests })
    }

    /// The response as HTTP/1.1 bytes.
    fn bytes(&self) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} X\r\n", self.status).into_bytes();
        for (n, v) in &self.headers {
            out.extend_from_slice(NAMES[*n].as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        if self.chunk == 0 {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes());
            out.extend_from_slice(&self.body);
        } else {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for piece in self.body.chunks(self.chunk) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
        out
    }
}

/// A signer with no key: the fuzz target checks reading, not signing.
struct NoKey;

impl hyperliquid::Signer for NoKey {
    fn address(&self) -> &str {
        "0x0000000000000000000000000000000000000000"
    }
    fn sign(&mut self, _: hyperliquid::Action<'_>, _: &[u8], _: u64, _: u64) -> Result<hyperliquid::Signature, Error> {
        Err(Error::NoKey)
    }
}

/// The reconcile readers of `venue` on `r`: they answer every body.
fn readers(venue: &str, r: &Response<'_>) {
    let mut b = Budget::builder();
    let clock = Clock::anchor(common::NOW_NS, common::FIXTURE_NOW_UTC_MS);
    let e: Box<dyn Endpoints> = match venue {
        "binance-spot" => Box::new(binance_spot::BinanceSpot::from_exchange_info(common::SPOT_EXCHANGE_INFO, &mut b, clock, 0).unwrap()),
        "binance-futures" => Box::new(binance_futures::BinanceFutures::new(&mut b, clock, 0, binance_futures::DEFAULT_TABLE).unwrap()),
        "bybit" => Box::new(bybit::Bybit::new(&mut b, clock, bybit::Config::default()).unwrap()),
        "okx" => Box::new(okx::Okx::new(&mut b, clock, okx::Config::default()).unwrap()),
        "deribit" => Box::new(deribit::Deribit::new(&mut b, clock, deribit::Config::default()).unwrap()),
        "kraken-spot" => Box::new(kraken_spot::KrakenSpot::new(&mut b, clock, kraken_spot::Config::default()).unwrap()),
        "kraken-futures" => Box::new(kraken_futures::KrakenFutures::new(&mut b, clock, kraken_futures::Config::default()).unwrap()),
        "coinbase-exchange" => Box::new(coinbase_exchange::CoinbaseExchange::new(&mut b, clock, coinbase_exchange::Config::default()).unwrap()),
        _ => {
            let v = hyperliquid::Hyperliquid::new(&mut b, clock, hyperliquid::Config::default()).unwrap();
            Box::new(hyperliquid::Exchange::new(v, NoKey, &[("BTC", 0)], 5000).unwrap())
        }
    };
    let _ = e.read_order(r);
    let _ = e.read_placed(r);
}

/// Feeds `input`'s response, through the production decoder, to `venue`'s adapter
/// as the answer to each of its requests.
pub fn run(venue: &str, input: &Input) {
    // One connection per process, reset per case, with the production limits: a
    // fresh one zeroes its 4 MiB receive buffer, which would be most of each run.
    thread_local! {
        static CONN: std::cell::RefCell<Conn> = std::cell::RefCell::new(Conn::new(Limits::default()));
    }
    CONN.with(|c| {
        let mut conn = c.borrow_mut();
        conn.reset();
        decode_and_read(venue, input, &mut conn);
    });
}

fn decode_and_read(venue: &str, input: &Input, conn: &mut Conn) {
    let bytes = input.bytes();
    let req = HttpRequest { method: "POST", target: "/", headers: &[], body: b"" };
    conn.send(&req, "venue").expect("a valid request");
    let n = conn.transmit().len();
    conn.handle_written(n);
    let mut at = 0;
    loop {
        let buf = conn.recv_buf();
        let n = input.step.min(bytes.len() - at).min(buf.len());
        if n == 0 {
            return; // the decoder wants more than there is, or has no room
        }
        buf[..n].copy_from_slice(&bytes[at..at + n]);
        at += n;
        match conn.handle_recv(n) {
            Ok(Progress::Partial) => {}
            Ok(Progress::Complete) => break,
            Err(_) => return, // not HTTP the decoder accepts: no answer to read
        }
    }
    let mut hs = Headers::new();
    let r = conn.response(&mut hs).expect("a complete response");
    let (mut adapter, mut budget) =
        common::venue(venue, common::NOW_NS, common::FIXTURE_NOW_UTC_MS).unwrap();
    for (i, req) in input.requests.iter().enumerate() {
        let now = common::NOW_NS + i as i64;
        let Ok(parts) = adapter.parts(*req) else { continue };
        let Ok(ticket) = budget.try_charge(&parts, ergon_core::Class::Urgent, now) else { continue };
        let flight = ticket.sent();
        match adapter.on_response(*req, &r, &mut budget, now) {
            Ok(_) | Err(Error::BadHeader { .. }) => {}
            Err(e) => panic!("on_response may only report a bad header: {e}"),
        }
        let items = adapter.batch_items().len();
        match req {
            Request::Batch(n) => assert!(items <= usize::from(*n).max(ergon_venues::adapt::MAX_ITEMS)),
            _ => assert!(items <= ergon_venues::adapt::MAX_ITEMS),
        }
        let _ = budget.complete(flight, now);
    }
    readers(venue, &r);
}
