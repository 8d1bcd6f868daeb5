//! The I/O shell: a loopback listener, one blocking thread per connection, the
//! venue's clock, and the faults that act on connections (close, delay).
//!
//! Every request is handled under one lock on the venue state, which is what makes
//! counts exact; delays are served outside the lock so one held request does not
//! stall the others. The server never binds a non-loopback address.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::binance::{Admission, Venue};
use crate::config::{Config, ConfigError, Fault};
use crate::http::{self, Parsed, Response};
use crate::report::Report;

/// How long a connection may sit idle before the emulator closes it.
const IDLE_CLOSE: Duration = Duration::from_secs(30);
/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The venue's clock: host UTC plus a fixed offset, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VenueClock {
    /// Venue minus host, in milliseconds.
    pub offset_ms: i64,
}

impl VenueClock {
    /// The venue's current time, UTC milliseconds.
    pub fn now_ms(&self) -> i64 {
        let host = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        host.saturating_add(self.offset_ms)
    }
}

pub(crate) struct Shared {
    venue: Mutex<Venue>,
    pub(crate) stop: AtomicBool,
    pub(crate) clock: VenueClock,
    conns: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    pub(crate) fn venue(&self) -> MutexGuard<'_, Venue> {
        // A poisoned lock means a handler panicked; the counts are still the best
        // record there is, so keep serving them.
        self.venue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why the emulator did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration was refused.
    Config(ConfigError),
    /// Binding or spawning failed.
    Io(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "{e}"),
            StartError::Io(e) => write!(f, "cannot start the emulator: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        StartError::Io(e)
    }
}

/// A running emulator. Dropping it stops it; [`Server::stop`] also returns the report.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Validates `config`, binds its loopback address and starts serving.
    pub fn start(config: Config) -> Result<Server, StartError> {
        config.validate()?;
        let listener = TcpListener::bind(config.bind)?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            return Err(ConfigError::NotLoopback(addr).into());
        }
        let shared = Arc::new(Shared {
            clock: VenueClock {
                offset_ms: config.clock_offset_ms,
            },
            venue: Mutex::new(Venue::new(config)),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("venue-sim-accept".into())
            .spawn(move || accept_loop(listener, s))?;
        Ok(Server {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, the base URL a client uses.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The venue's clock.
    pub fn clock(&self) -> VenueClock {
        self.shared.clock
    }

    /// The configuration the emulator runs with.
    pub fn config(&self) -> Config {
        self.shared.venue().config().clone()
    }

    /// The report so far.
    pub fn report(&self) -> Report {
        self.shared.venue().report()
    }

    /// Bans `ip` now for `duration_ms`, as an automatic ban would (418 with
    /// Retry-After to every request from it until then).
    pub fn ban(&self, ip: IpAddr, duration_ms: i64) {
        let now = self.shared.clock.now_ms();
        self.shared.venue().ban(ip, duration_ms, now);
    }

    /// The order registry: every order the engine accepted, oldest first.
    pub fn orders(&self) -> Vec<crate::report::OrderView> {
        self.shared.venue().orders()
    }

    /// Ends every user data stream connection with a close frame (1000), as a
    /// venue's maintenance would; their listenKeys stay valid. Returns how many.
    pub fn close_streams(&self) -> usize {
        self.shared.venue().ws_close_all()
    }

    /// Adds `weight` to `ip`'s current REQUEST_WEIGHT windows: another sender on the
    /// same IP that the client does not know about.
    pub fn add_weight(&self, ip: IpAddr, weight: u64) {
        let now = self.shared.clock.now_ms();
        self.shared.venue().add_weight(ip, weight, now);
    }

    /// Stops accepting, closes every connection, waits for the threads and returns
    /// the final report.
    pub fn stop(mut self) -> Report {
        self.shutdown();
        self.report()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let conns =
            std::mem::take(&mut *self.shared.conns.lock().unwrap_or_else(|e| e.into_inner()));
        for h in conns {
            let _ = h.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.shutdown();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        shared.venue().note_connection();
        let s = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("venue-sim-conn".into())
            .spawn(move || serve(stream, s));
        if let Ok(h) = spawned {
            let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
            conns.retain(|h| !h.is_finished());
            conns.push(h);
        }
    }
}

fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
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
                if crate::ws::is_upgrade(&req) {
                    upgrade(stream, peer.ip(), &req, buf, &shared);
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
    let now = shared.clock.now_ms();
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
            drop(venue);
            sleep_unless_stopped(delay, shared);
            let later = shared.clock.now_ms();
            let mut venue = shared.venue();
            let mut r = venue.execute(op, account, later, now);
            r.headers.extend(headers);
            venue.note_status(r.status);
            drop(venue);
            write(stream, &r, req.close)
        }
    }
}

/// A WebSocket upgrade: admitted (limits, ban, listenKey, handshake) under the
/// lock, then served on this thread until it ends.
fn upgrade(mut stream: TcpStream, ip: IpAddr, req: &http::Request, rest: Vec<u8>, shared: &Shared) {
    let now = shared.clock.now_ms();
    let admitted = shared.venue().admit_ws(req, ip, now);
    match admitted {
        Err(r) => {
            shared.venue().note_status(r.status);
            let _ = stream.write_all(&r.to_bytes(true));
            let _ = stream.shutdown(Shutdown::Both);
        }
        Ok((accept, sub, events)) => {
            let head = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            );
            shared.venue().note_status(101);
            if stream.write_all(head.as_bytes()).is_err() {
                shared.venue().ws_unsubscribe(sub);
                return;
            }
            crate::ws::serve(stream, rest, sub, events, shared);
        }
    }
}

fn sleep_unless_stopped(total: Duration, shared: &Shared) {
    let mut left = total;
    while !left.is_zero() && !shared.stop.load(Ordering::SeqCst) {
        let step = left.min(POLL);
        thread::sleep(step);
        left -= step;
    }
}

fn write(stream: &mut TcpStream, r: &Response, close: bool) -> bool {
    stream.write_all(&r.to_bytes(close)).is_ok() && !close
}
