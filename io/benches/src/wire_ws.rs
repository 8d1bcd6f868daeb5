//! The decision-to-wire cases over Binance's WebSocket API (issue 46): an order
//! frame of a logged-on session (`session.logon`: no `apiKey`, no `signature`)
//! written from its prepared template, charged, framed and masked by ergon-io's
//! WebSocket session, and handed to `write(2)`.
//!
//! | case | what its calls do, per order |
//! |---|---|
//! | `wire_ws` | `binance_spot_ws::Session::prepare_frame` (the frame from its template as `Text`, a slot reserved), `Budget::try_charge_shape` of the order's parts with the connection's message parts (the lane's charge), `ws::Session::send_request_text_charged` (framed, masked into the connection's buffer), `write(2)` of it to a pipe, `handle_written` |
//! | `wire_ws_floor` | `write(2)` of the same masked frame's bytes alone |
//!
//! Not in `wire_ws`: the gateway's ledger (`Gateway::submit`'s checks, record and
//! ledger, the `wire_ledger` stage of the REST path), since the WebSocket lane's
//! session logon is wired by part A of the issue; see `io/benches/wire.md`.
//!
//! Between batches, untimed, every request is answered (the venue's table freed,
//! each io session's pending request resolved), the pipe drained and the budget
//! reset, so every batch starts with idle connections.

use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd};

use base64::Engine as _;
use ergon_core::{Budget, Class, Shape};
use ergon_io::ws::{Session as Ws, Upgrade, WsConfig, WsEvent};
use ergon_venues::adapt::{Clock, Request, Venue};
use ergon_venues::binance_spot::BinanceSpot;
use ergon_venues::binance_spot_ws::{FrameTemplate, Session as Api, Signing};
use ergon_venues::endpoint::{
    ClientOrderId, Decimal, Fill, OrderType, Side, Symbol, Text, TimeInForce,
};
use sha1::{Digest, Sha1};

use crate::cases::{Case, Expect, MAX_BATCH};
use crate::wire::{pipe, write, INFO, SECRET, T0};

/// Requests one io session holds pending (its `MAX_PENDING` is 64): a batch of
/// up to [`MAX_BATCH`] orders is spread over two connections.
const PER_CONN: usize = 50;
const CONNS: usize = MAX_BATCH.div_ceil(PER_CONN);

/// One WebSocket API connection: the venue's side (ids, frames, the table of
/// requests) and the transport's (framing, masking, the budget's tickets).
struct Conn {
    api: Api,
    /// This connection's order template (a template is good for the session
    /// that made it: it keeps the parts it asked that session's adapter for).
    template: FrameTemplate,
    ws: Ws,
    /// Request ids written in this batch, to answer.
    sent: Vec<u64>,
}

/// `wire_ws` or `wire_ws_floor`.
pub struct WsCase {
    floor: bool,
    conns: Vec<Conn>,
    fills: Vec<Fill<'static>>,
    shape: Shape,
    budget: Budget,
    fresh: Budget,
    frame: Text,
    /// The first order's bytes as written (framed and masked): the floor's.
    bytes: Vec<u8>,
    pipe: (OwnedFd, OwnedFd),
    /// Orders written in all (the check that the path did its work).
    pub written: u64,
}

/// Answers the upgrade `ws` wrote, as a server does (RFC 6455 §4.2.2).
fn open(ws: &mut Ws, budget: &mut Budget) {
    let up = Upgrade {
        host: "ws-api.binance.com",
        path: "/ws-api/v3",
        headers: &[],
    };
    ws.connect(&up, Class::Normal, budget, T0)
        .expect("a connect");
    let request = String::from_utf8(ws.poll_transmit().expect("an upgrade").to_vec())
        .expect("an upgrade is text");
    ws.handle_written(request.len(), budget, T0);
    let key = request
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .expect("a key");
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let accept = base64::engine::general_purpose::STANDARD.encode(h.finalize());
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    assert_eq!(ws.handle_input(answer.as_bytes()), answer.len());
    assert_eq!(ws.poll_event(budget, T0), Some(WsEvent::Open));
}

impl WsCase {
    fn new(floor: bool) -> Self {
        let mut b = Budget::builder();
        let adapter = |b: &mut ergon_core::Builder| {
            BinanceSpot::from_exchange_info(
                INFO,
                b,
                Clock::anchor(T0, 1_499_827_319_559),
                30_000_000,
            )
            .expect("exchangeInfo")
        };
        // One adapter per connection, on the same buckets (the first declares them).
        let first = adapter(&mut b);
        let connect = first.parts(Request::Read(2)).expect("connect parts");
        let message = first.parts(Request::Connect).expect("message parts");
        let order = first.parts(Request::Order).expect("order parts");
        let mut parts = order.clone();
        parts.extend(message.iter().copied());
        let shape = b.shape(&parts).expect("the order's shape");
        let mut budget = b.build(T0).expect("a budget");
        let key = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A";
        let mut conns = Vec::new();
        let mut spot = Some(first);
        for i in 0..CONNS {
            let venue = spot.take().unwrap_or_else(|| {
                // Later adapters read the same limits into a throwaway builder: they
                // only write frames; the charge is made on `budget` by shape.
                adapter(&mut Budget::builder())
            });
            let api = Api::new(venue, Some((key, SECRET)), 5_000, PER_CONN).expect("a session");
            let mut ws = Ws::new(
                WsConfig::default(),
                &budget,
                &connect,
                &message,
                7 + i as u64,
            )
            .expect("a WebSocket session");
            open(&mut ws, &mut budget);
            let template = api
                .order_template(
                    Symbol::new("LTCBTC").expect("a symbol"),
                    Side::Buy,
                    OrderType::Limit(TimeInForce::Gtc),
                    Signing::Session,
                )
                .expect("a template");
            conns.push(Conn {
                api,
                template,
                ws,
                sent: Vec::with_capacity(PER_CONN),
            });
        }
        let fills = (0..MAX_BATCH)
            .map(|i| Fill {
                price: Some(Decimal::new("0.1").expect("a price")),
                quantity: Decimal::new("1").expect("a quantity"),
                client_order_id: ClientOrderId::new(&format!("mm-{i:06}")).expect("an id"),
            })
            .collect();
        let fresh = budget.clone();
        let mut case = WsCase {
            floor,
            conns,
            fills,
            shape,
            budget,
            fresh,
            frame: Text::with_capacity(1024),
            bytes: Vec::new(),
            pipe: pipe(),
            written: 0,
        };
        // The floor's bytes: the path's own first frame, as it left.
        assert_eq!(case.path(1), 0, "the first order goes out");
        let mut got = vec![0u8; 4096];
        // SAFETY: `got` has room for the bytes read; the pipe is non-blocking.
        let n = unsafe { libc::read(case.pipe.1.as_raw_fd(), got.as_mut_ptr().cast(), got.len()) };
        got.truncate(usize::try_from(n).expect("the frame"));
        case.bytes = got;
        case.settle();
        case
    }

    /// `n` orders down the whole path; how many were refused.
    #[inline(always)]
    fn path(&mut self, n: usize) -> u64 {
        let mut refused = 0;
        for i in 0..n {
            let conn = &mut self.conns[(i / PER_CONN) % CONNS];
            let Ok(p) = conn
                .api
                .prepare_frame(&conn.template, &self.fills[i], &mut self.frame, T0)
            else {
                refused += 1;
                continue;
            };
            let Ok(ticket) = self.budget.try_charge_shape(self.shape, Class::Normal, T0) else {
                conn.api.unsent(p.id);
                refused += 1;
                continue;
            };
            if conn
                .ws
                .send_request_text_charged(p.id, &self.frame, ticket)
                .is_err()
            {
                conn.api.unsent(p.id);
                refused += 1;
                continue;
            }
            conn.api.sent(p.id);
            conn.sent.push(p.id);
            while let Some(out) = conn.ws.poll_transmit() {
                let w = write(&self.pipe.0, out);
                if w == 0 {
                    break;
                }
                conn.ws.handle_written(w, &mut self.budget, T0);
            }
        }
        self.written += (n as u64).saturating_sub(refused);
        refused
    }

    /// Answers every request of the batch, drains the pipe.
    fn settle(&mut self) {
        for c in &mut self.conns {
            for id in c.sent.drain(..) {
                let answered = c.ws.resolve(id, &mut self.budget, T0);
                debug_assert!(answered, "a written request is pending");
            }
            // The venue's table: every request answered or dropped, emptied.
            for _ in c.api.on_disconnect() {}
        }
        let mut sink = [0u8; 1 << 16];
        // SAFETY: `sink` has room for the bytes read; the pipe is non-blocking.
        while unsafe {
            libc::read(
                self.pipe.1.as_raw_fd(),
                sink.as_mut_ptr().cast(),
                sink.len(),
            )
        } > 0
        {}
    }
}

impl Case for WsCase {
    fn name(&self) -> &'static str {
        if self.floor {
            "wire_ws_floor"
        } else {
            "wire_ws"
        }
    }

    fn what(&self) -> &'static str {
        if self.floor {
            "write(2) of the same masked WebSocket API order frame alone"
        } else {
            "WS API order of a logged-on session: template, charge, frame + mask, write(2)"
        }
    }

    fn expect(&self) -> Expect {
        Expect::Admit
    }

    fn prepare(&mut self) {
        self.settle();
        self.budget = self.fresh.clone();
    }

    #[inline(never)]
    fn timed_calls(&mut self, n: usize) -> u64 {
        if !self.floor {
            return self.path(n);
        }
        let mut refused = 0;
        for _ in 0..n {
            refused += u64::from(write(&self.pipe.0, black_box(&self.bytes)) == 0);
        }
        refused
    }
}

/// Both cases.
pub fn all() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(WsCase::new(false)) as Box<dyn Case>,
        Box::new(WsCase::new(true)),
    ]
}

/// The WebSocket rows of the report from per-call figures by case name.
pub fn print(unit: &str, get: &dyn Fn(&str) -> Option<f64>) {
    let (Some(path), Some(floor)) = (get("wire_ws"), get("wire_ws_floor")) else {
        return;
    };
    println!("decision to wire over the WebSocket API (logged-on session: no signature), {unit} per order:");
    println!("  whole path (wire_ws)                       {path:>9.1}");
    println!("  floor: write(2) of the frame alone          {floor:>9.1}");
    if unit == "instructions" {
        println!(
            "  target < 1500 instructions: {}",
            if path < 1500.0 { "met" } else { "missed" }
        );
    } else {
        let r = path / floor;
        println!(
            "  wire_ws / wire_ws_floor = {r:.2} (target <= 2: {})",
            if r <= 2.0 { "met" } else { "missed" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_writes_a_masked_logged_on_frame_and_every_batch_is_answered() {
        let mut c = WsCase::new(false);
        // Frame header: FIN + text, the mask bit, a 16-bit length; then the key.
        assert_eq!(c.bytes[0], 0x81);
        assert_eq!(c.bytes[1], 0x80 | 126);
        let len = usize::from(u16::from_be_bytes([c.bytes[2], c.bytes[3]]));
        assert_eq!(c.bytes.len(), 4 + 4 + len);
        let key = [c.bytes[4], c.bytes[5], c.bytes[6], c.bytes[7]];
        let text: Vec<u8> = c.bytes[8..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("{\"id\":1,\"method\":\"order.place\",\"params\":{\"newClientOrderId\":\"mm-000000\""), "{text}");
        assert!(
            !text.contains("apiKey") && !text.contains("signature"),
            "{text}"
        );
        for _ in 0..3 {
            c.prepare();
            assert_eq!(c.timed_calls(MAX_BATCH), 0);
        }
        c.prepare();
        assert_eq!(c.written, 1 + 3 * MAX_BATCH as u64);
        assert_eq!(c.budget.receipts_outstanding(), 0);
    }
}
