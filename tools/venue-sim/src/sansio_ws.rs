//! Binance Spot's WebSocket API (`/ws-api/v3`) of the emulator without sockets,
//! threads or a clock, beside [`crate::sansio`]'s REST: the upgrade, the client's
//! frames and each request go in as bytes with the venue's time, the venue's
//! frames come out as bytes. Admission, execution, answers and the user data
//! stream are the engine's own (`profiles::binance::ws_api`), the ones the
//! emulator's connection thread runs, so the simulator and the emulator cannot
//! drift apart; the network between the client and the venue (loss, delay, a
//! drop) is the caller's.

use std::net::IpAddr;
use std::sync::mpsc::{self, Receiver};

use crate::http::{parse_request, Parsed as HttpParsed};
use crate::profiles::binance::ws_api::{ApiAdmission, ApiRun, ApiSession, WS_API_PATH};
use crate::sansio::SansIo;
use crate::ws::frame::{self, Parsed, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};

/// One WebSocket API connection the venue accepted.
pub struct WsApiConn {
    session: ApiSession,
    events: Receiver<String>,
    buf: Vec<u8>,
    ip: IpAddr,
    closed: bool,
}

/// What the venue made of an upgrade request.
pub enum Upgraded {
    /// Accepted: the connection, and the 101 answer's bytes.
    Open(Box<WsApiConn>, Vec<u8>),
    /// Refused (a ban, the connect limit or weight, a bad handshake): the HTTP
    /// answer's bytes; the connection closes after it.
    Refused(Vec<u8>),
}

/// One frame the client sent.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientFrame {
    /// A text message: a request.
    Text(Vec<u8>),
    /// A ping: the venue answers it with [`pong`].
    Ping(Vec<u8>),
    /// A close, or a frame the venue closes on.
    Close,
}

/// A request the venue admitted, waiting to run.
pub struct WsAdmitted {
    run: Box<ApiRun>,
    admitted_ms: i64,
}

/// What [`SansIo::ws_api_admit`] made of a request.
pub enum WsReceived {
    /// The venue answered at once and runs nothing: the frame's bytes; `close`
    /// the connection after it (a ban).
    Answer {
        /// The answer's frame.
        frame: Vec<u8>,
        /// The venue closes the connection after it.
        close: bool,
    },
    /// Admitted: it runs when [`SansIo::ws_api_execute`] is called.
    Run(WsAdmitted),
}

/// A server pong echoing `payload`.
pub fn pong(payload: &[u8]) -> Vec<u8> {
    frame::encode(OP_PONG, payload)
}

impl WsApiConn {
    /// Takes `bytes` the client wrote; the whole frames among what it wrote so
    /// far, in order. A frame that breaks RFC 6455 ends the reading with
    /// [`ClientFrame::Close`].
    pub fn read(&mut self, bytes: &[u8]) -> Vec<ClientFrame> {
        let mut out = Vec::new();
        if self.closed {
            return out;
        }
        self.buf.extend_from_slice(bytes);
        loop {
            match frame::parse(&self.buf) {
                Parsed::Partial => break,
                Parsed::Bad(_) => {
                    self.closed = true;
                    out.push(ClientFrame::Close);
                    break;
                }
                Parsed::Frame(f, used) => {
                    self.buf.drain(..used);
                    match f.opcode {
                        OP_TEXT => out.push(ClientFrame::Text(f.payload)),
                        OP_PING => out.push(ClientFrame::Ping(f.payload)),
                        OP_CLOSE => {
                            self.closed = true;
                            out.push(ClientFrame::Close);
                            break;
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }

    /// The user data stream's events pushed to this connection since the last
    /// call, as text frames.
    pub fn events(&self) -> Vec<Vec<u8>> {
        self.events
            .try_iter()
            .map(|e| frame::encode(OP_TEXT, e.as_bytes()))
            .collect()
    }
}

impl SansIo {
    /// Receives an upgrade request (`raw`, the bytes the client wrote) from
    /// `ip` at the venue's `now_ms`: the ban, the connect limit and weight, the
    /// handshake, as the emulator's server admits one.
    pub fn ws_api_upgrade(&mut self, raw: &[u8], ip: IpAddr, now_ms: i64) -> Upgraded {
        let req = match parse_request(raw) {
            HttpParsed::Complete(r, _) => r,
            _ => {
                self.venue.note_malformed();
                let r = crate::http::Response::error(400, -1000, "bad upgrade request");
                return Upgraded::Refused(r.to_bytes(true));
            }
        };
        if req.path != WS_API_PATH || !frame::is_upgrade(&req) {
            let r = crate::http::Response::error(404, -1000, "not the WebSocket API");
            return Upgraded::Refused(r.to_bytes(true));
        }
        match self.venue.admit_ws_api(&req, ip, now_ms) {
            Err(r) => {
                self.venue.note_status(r.status);
                Upgraded::Refused(r.to_bytes(true))
            }
            Ok(accept) => {
                self.venue.note_status(101);
                let limits = !req.query.split('&').any(|p| p == "returnRateLimits=false");
                let (tx, events) = mpsc::channel();
                let conn = WsApiConn {
                    session: ApiSession::new(tx, limits, now_ms),
                    events,
                    buf: Vec::new(),
                    ip,
                    closed: false,
                };
                Upgraded::Open(Box::new(conn), frame::switching(&accept).into_bytes())
            }
        }
    }

    /// Receives one request (a text frame's payload) on `c` at `now_ms`.
    pub fn ws_api_admit(&mut self, c: &mut WsApiConn, text: &[u8], now_ms: i64) -> WsReceived {
        match self.venue.ws_api_admit(text, c.ip, now_ms, &mut c.session) {
            ApiAdmission::Answer { text, close } => WsReceived::Answer {
                frame: frame::encode(OP_TEXT, text.as_bytes()),
                close,
            },
            ApiAdmission::Run(run) => WsReceived::Run(WsAdmitted {
                run,
                admitted_ms: now_ms,
            }),
        }
    }

    /// Runs an admitted request at `now_ms` and answers it (a text frame). One
    /// past its `timestamp + recvWindow` is refused -1021, never executed, as
    /// the emulator's connection does with a delayed request.
    pub fn ws_api_execute(&mut self, c: &mut WsApiConn, a: WsAdmitted, now_ms: i64) -> Vec<u8> {
        let run = a.run;
        let r = if run.valid_until.is_some_and(|t| now_ms > t) {
            self.venue
                .binance_not_executed(&run.op, run.account, a.admitted_ms);
            crate::http::Response::error(
                400,
                -1021,
                "Timestamp for this request is outside of the recvWindow.",
            )
        } else {
            self.venue
                .ws_api_run(&run, &mut c.session, now_ms, a.admitted_ms)
        };
        let text = self.venue.ws_api_answer(
            &run.id,
            &r,
            c.ip,
            Some(run.account),
            run.limits,
            run.orders,
            now_ms,
        );
        frame::encode(OP_TEXT, text.as_bytes())
    }

    /// An admitted request that never runs (the venue's front end lost it).
    pub fn ws_api_drop_unexecuted(&mut self, a: WsAdmitted) {
        self.venue
            .binance_not_executed(&a.run.op, a.run.account, a.admitted_ms);
    }

    /// The connection ended: its subscriptions end with it.
    pub fn ws_api_close(&mut self, c: &mut WsApiConn) {
        c.closed = true;
        self.venue.ws_api_end(&mut c.session);
    }
}
