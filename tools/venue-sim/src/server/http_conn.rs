//! One HTTP/1.1 connection: requests read one at a time, each admitted and run
//! under the venue lock, the faults that act on connections (close, delay), and
//! the hand-over of an upgraded connection to `ws_api_conn` (Binance's
//! `/ws-api/v3`) or `bybit_private_conn` (Bybit's `/v5/private`, on the `bybit`
//! profile while [`crate::Config::bybit_private_ws`] holds; otherwise that
//! path is an ordinary request, which Bybit's router answers 404) or
//! `hl_ws_conn` (Hyperliquid's `/ws`, on the `hyperliquid` profile) or
//! `deribit_ws_conn` (Deribit's `/ws/api/v2`, on the `deribit` profile; on any
//! other profile an ordinary request).

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Fault, Profile};
use crate::engine::state::Admission;
use crate::http::{self, Parsed, Response};
use crate::profiles::binance::admit::valid_until_ms;
use crate::profiles::binance::ws_api::{WS_API_PATH, WS_FAPI_PATH};
use crate::profiles::bybit::private::PRIVATE_PATH;
use crate::profiles::deribit::ws::WS_PATH as DERIBIT_WS_PATH;
use crate::profiles::hyperliquid::ws::WS_PATH as HL_WS_PATH;
use crate::server::shared::{sleep_unless_stopped, Shared, POLL};
use crate::server::{bybit_private_conn, deribit_ws_conn, hl_ws_conn, ws_api_conn};
use crate::ws::frame;

/// How long a connection may sit idle before the emulator closes it.
const IDLE_CLOSE: Duration = Duration::from_secs(30);

pub(crate) fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let Ok(peer) = stream.peer_addr() else { return };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(POLL));
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let mut idle = Duration::ZERO;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        match http::parse_request(&buf) {
            Parsed::Complete(req, used) => {
                buf.drain(..used);
                idle = Duration::ZERO;
                if frame::is_upgrade(&req)
                    && [WS_API_PATH, WS_FAPI_PATH].contains(&req.path.as_str())
                {
                    upgrade(stream, peer.ip(), &req, buf, &shared);
                    return;
                }
                if frame::is_upgrade(&req)
                    && req.path == PRIVATE_PATH
                    && serves_bybit_private(&shared)
                {
                    bybit_private_upgrade(stream, peer.ip(), &req, buf, &shared);
                    return;
                }
                if frame::is_upgrade(&req)
                    && req.path == DERIBIT_WS_PATH
                    && shared.venue().config().profile == Profile::Deribit
                {
                    deribit_ws_upgrade(stream, peer.ip(), &req, buf, &shared);
                    return;
                }
                if frame::is_upgrade(&req)
                    && req.path == HL_WS_PATH
                    && shared.venue().config().profile == Profile::Hyperliquid
                {
                    hl_ws_upgrade(stream, peer.ip(), &req, buf, &shared);
                    return;
                }
                if !handle(&mut stream, peer.ip(), &req, &shared) || req.close {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
                continue;
            }
            Parsed::Bad(status, why) => {
                shared.venue().note_malformed();
                let r = Response::error(status, -1000, why);
                let _ = stream.write_all(&r.to_bytes(true));
                shared.venue().note_status(status);
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            Parsed::Partial => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                idle += POLL;
                if idle >= IDLE_CLOSE {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Handles one request; returns whether the connection stays open.
fn handle(stream: &mut TcpStream, ip: IpAddr, req: &http::Request, shared: &Shared) -> bool {
    let now = shared.now_ms();
    let mut venue = shared.venue();
    let (op, account, headers, fault) = match venue.admit(req, ip, now) {
        Admission::Final(r) => {
            venue.note_status(r.status);
            drop(venue);
            return write(stream, &r, req.close);
        }
        Admission::Run {
            op,
            account,
            headers,
            fault,
        } => (op, account, headers, fault),
    };
    let Some(fault) = fault else {
        let mut r = venue.execute(op, account, now, now);
        r.headers.extend(headers);
        venue.note_status(r.status);
        drop(venue);
        return write(stream, &r, req.close);
    };
    venue.note_fault(fault);
    match fault {
        Fault::CloseBeforeExecute => {
            venue.not_executed(&op, account, now);
            false
        }
        Fault::ExecuteThenClose => {
            venue.execute(op, account, now, now);
            false
        }
        Fault::ServerErrorAfterExecute => {
            venue.execute(op, account, now, now);
            let mut r = venue.server_error(true);
            r.headers.extend(headers);
            venue.note_status(503);
            drop(venue);
            write(stream, &r, req.close)
        }
        Fault::ServerErrorNoExecute => {
            venue.not_executed(&op, account, now);
            let mut r = venue.server_error(false);
            r.headers.extend(headers);
            venue.note_status(503);
            drop(venue);
            write(stream, &r, req.close)
        }
        Fault::Delay => {
            let delay = Duration::from_millis(venue.config().faults.delay_ms);
            let valid_until = match venue.config().profile {
                Profile::BinanceSpot | Profile::BinanceFutures => {
                    valid_until_ms(&req.query, &req.body)
                }
                _ => None,
            };
            drop(venue);
            sleep_unless_stopped(delay, shared);
            let later = shared.now_ms();
            let mut venue = shared.venue();
            venue.note_delay_settled();
            // Binance's matching engine refuses a request past its recvWindow.
            if valid_until.is_some_and(|t| later > t) {
                venue.not_executed(&op, account, now);
                let mut r = Response::error(
                    400,
                    -1021,
                    "Timestamp for this request is outside of the recvWindow.",
                );
                r.headers.extend(headers);
                venue.note_status(400);
                drop(venue);
                return write(stream, &r, req.close);
            }
            let mut r = venue.execute(op, account, later, now);
            r.headers.extend(headers);
            venue.note_status(r.status);
            drop(venue);
            write(stream, &r, req.close)
        }
    }
}

/// Answers an upgrade as it was admitted under the lock: the refusal, or the
/// 101 and then `serve` on this thread until the connection ends.
fn answer_upgrade<S>(
    mut stream: TcpStream,
    admitted: Result<(String, S), Response>,
    shared: &Shared,
    serve: impl FnOnce(TcpStream, S),
) {
    match admitted {
        Err(r) => {
            shared.venue().note_status(r.status);
            let _ = stream.write_all(&r.to_bytes(true));
            let _ = stream.shutdown(Shutdown::Both);
        }
        Ok((accept, session)) => {
            shared.venue().note_status(101);
            if stream
                .write_all(frame::switching(&accept).as_bytes())
                .is_ok()
            {
                serve(stream, session);
            }
        }
    }
}

/// A WebSocket API upgrade: admitted (limits, ban, handshake), then served.
fn upgrade(stream: TcpStream, ip: IpAddr, req: &http::Request, rest: Vec<u8>, shared: &Shared) {
    let now = shared.now_ms();
    let admitted = shared.venue().admit_ws_api(req, ip, now).map(|a| (a, ()));
    let limits = !req.query.split('&').any(|p| p == "returnRateLimits=false");
    answer_upgrade(stream, admitted, shared, |s, ()| {
        ws_api_conn::serve(s, rest, ip, limits, shared)
    });
}

/// Whether `/v5/private` upgrades go to Bybit's private stream.
fn serves_bybit_private(shared: &Shared) -> bool {
    let venue = shared.venue();
    let c = venue.config();
    c.profile == Profile::Bybit && c.bybit_private_ws
}

/// A Bybit private stream upgrade: admitted (ban, `max_active_time`,
/// handshake), then served.
fn bybit_private_upgrade(
    stream: TcpStream,
    ip: IpAddr,
    req: &http::Request,
    rest: Vec<u8>,
    shared: &Shared,
) {
    let now = shared.now_ms();
    let admitted = shared.venue().admit_bybit_private(req, ip, now);
    answer_upgrade(stream, admitted, shared, |s, session| {
        bybit_private_conn::serve(s, rest, session, shared)
    });
}

/// A Deribit WebSocket upgrade: admitted (ban, handshake), then served.
fn deribit_ws_upgrade(
    stream: TcpStream,
    ip: IpAddr,
    req: &http::Request,
    rest: Vec<u8>,
    shared: &Shared,
) {
    let now = shared.now_ms();
    let admitted = shared.venue().admit_deribit_ws(req, ip, now);
    answer_upgrade(stream, admitted, shared, |s, session| {
        deribit_ws_conn::serve(s, rest, session, shared)
    });
}

/// A Hyperliquid WebSocket upgrade: the handshake checked, then served.
fn hl_ws_upgrade(
    stream: TcpStream,
    ip: IpAddr,
    req: &http::Request,
    rest: Vec<u8>,
    shared: &Shared,
) {
    let admitted =
        frame::check_handshake(req).map(|accept| (accept, shared.venue().hl_ws_session(ip)));
    answer_upgrade(stream, admitted, shared, |s, session| {
        hl_ws_conn::serve(s, rest, session, shared)
    });
}

fn write(stream: &mut TcpStream, r: &Response, close: bool) -> bool {
    let close = close || r.close;
    stream.write_all(&r.to_bytes(close)).is_ok() && !close
}
