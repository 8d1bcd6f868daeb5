//! The I/O shell: a loopback listener, one blocking thread per connection, the
//! venue's clock, and the faults that act on connections (close, delay).
//!
//! Every request is handled under one lock on the venue state, which is what makes
//! counts exact; delays are served outside the lock so one held request does not
//! stall the others. The server never binds a non-loopback address.

mod bybit_private_conn;
mod deribit_ws_conn;
mod hl_ws_conn;
mod http_conn;
pub(crate) mod shared;
pub(crate) mod ws_api_conn;
pub(crate) mod ws_control;

use std::io::Write;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::clock::VenueClock;
use crate::config::{Config, ConfigError};
use crate::engine::state::Venue;
use crate::hashing::Hashing;
use crate::http::Response;
use crate::report::Report;
use shared::Shared;

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
            offset_ms: AtomicI64::new(config.clock_offset_ms),
            venue: Mutex::new(Venue::new(config, Hashing::keyed())),
            changed: std::sync::Condvar::new(),
            waiters: std::sync::atomic::AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            private_cuts: std::sync::atomic::AtomicU64::new(0),
            deribit_cuts: std::sync::atomic::AtomicU64::new(0),
        });
        // The venue's switch countdowns run out whether or not a request comes.
        let s = Arc::clone(&shared);
        let ticker = thread::Builder::new()
            .name("venue-sim-switch".into())
            .spawn(move || {
                while !s.stop.load(Ordering::SeqCst) {
                    let now = s.now_ms();
                    s.venue().expire_switches(now);
                    thread::sleep(Duration::from_millis(crate::engine::switch::TICK_MS));
                }
            })?;
        shared
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ticker);
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

    /// The venue's clock as it stands: a copy, which a later
    /// [`Server::advance_clock`] does not move (read it again after one).
    pub fn clock(&self) -> VenueClock {
        self.shared.clock()
    }

    /// Moves the venue's clock `ms` forward (a test's jump of time, instead of
    /// waiting it out): windows roll and switch countdowns due by then fire at
    /// the switch thread's next look, as if that time had passed. Never backward:
    /// a negative `ms` moves nothing.
    pub fn advance_clock(&self, ms: i64) {
        self.shared.offset_ms.fetch_add(ms.max(0), Ordering::SeqCst);
    }

    /// The configuration the emulator runs with.
    pub fn config(&self) -> Config {
        self.shared.venue().config().clone()
    }

    /// The report so far.
    pub fn report(&self) -> Report {
        self.shared.venue().report()
    }

    /// Waits until `done` holds of the report, looked at now and after each
    /// change of the venue's state (no polling: the change wakes the wait), or
    /// until `limit` has passed; the last report either way, for the caller to
    /// assert on. `done` runs with the venue locked: it must not call the server.
    pub fn wait_report(&self, limit: Duration, mut done: impl FnMut(&Report) -> bool) -> Report {
        let mut last = None;
        self.shared.wait(limit, |v| {
            let r = v.report();
            let held = done(&r);
            last = Some(r);
            held
        });
        last.unwrap_or_else(|| self.report())
    }

    /// Waits like [`Server::wait_report`] until `done` holds of the orders
    /// (every order the engine accepted, oldest first); the last orders.
    pub fn wait_orders(
        &self,
        limit: Duration,
        mut done: impl FnMut(&[crate::report::OrderView]) -> bool,
    ) -> Vec<crate::report::OrderView> {
        let mut last = None;
        self.shared.wait(limit, |v| {
            let o = v.orders();
            let held = done(&o);
            last = Some(o);
            held
        });
        last.unwrap_or_else(|| self.orders())
    }

    /// Bans `ip` now for `duration_ms`, as an automatic ban would (418 with
    /// Retry-After to every request from it until then).
    pub fn ban(&self, ip: IpAddr, duration_ms: i64) {
        let now = self.shared.now_ms();
        self.shared.venue().ban(ip, duration_ms, now);
    }

    /// The order registry: every order the engine accepted, oldest first.
    pub fn orders(&self) -> Vec<crate::report::OrderView> {
        self.shared.venue().orders()
    }

    /// The armed dead man's switches (after firing those that are due).
    pub fn switches(&self) -> Vec<crate::engine::switch::SwitchView> {
        let now = self.shared.now_ms();
        let mut v = self.shared.venue();
        v.expire_switches(now);
        v.switches()
    }

    /// Cuts every open Bybit private WebSocket (`/v5/private`) at its thread's
    /// next look, as a network cut would: the socket closed without a close
    /// frame, the end handed to the venue (DCP counts it like any other).
    pub fn drop_bybit_private(&self) {
        self.shared.private_cuts.fetch_add(1, Ordering::SeqCst);
    }

    /// Cuts every open Deribit WebSocket (`/ws/api/v2`) at its thread's next
    /// look, as a network cut would: the socket closed without a close frame,
    /// the end handed to the venue (cancel-on-disconnect applies as to any
    /// other disconnection).
    pub fn drop_deribit_ws(&self) {
        self.shared.deribit_cuts.fetch_add(1, Ordering::SeqCst);
    }

    /// Revokes the API key `api_key` (as a user deleting it, or an IP whitelist
    /// change, would): every request with it is refused -2015 from now on, and a
    /// WebSocket API connection logged on with it is told `{"id":null,..,-2015}`
    /// at its next request. Whether the key is one of the accounts'.
    pub fn revoke_api_key(&self, api_key: &str) -> bool {
        let mut v = self.shared.venue();
        let Some(i) = v.cfg.accounts.iter().position(|a| a.api_key == api_key) else {
            return false;
        };
        v.revoked[i] = true;
        true
    }

    /// Adds `weight` to `ip`'s current REQUEST_WEIGHT windows: another sender on the
    /// same IP that the client does not know about.
    pub fn add_weight(&self, ip: IpAddr, weight: u64) {
        let now = self.shared.now_ms();
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
        let Ok(mut stream) = stream else { continue };
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        let ip = peer.ip();
        if !shared.venue().note_connection(ip) {
            // Deribit: "a 33rd connection from the same IP will be rejected with an
            // HTTP 429"; the body is the emulator's.
            let r = Response::json(
                429,
                r#"{"message":"too many connections from this IP"}"#.to_string(),
            );
            shared.venue().note_status(429);
            let _ = stream.write_all(&r.to_bytes(true));
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let s = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("venue-sim-conn".into())
            .spawn(move || {
                http_conn::serve(stream, Arc::clone(&s));
                s.venue().note_disconnection(ip);
            });
        if let Ok(h) = spawned {
            let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
            conns.retain(|h| !h.is_finished());
            conns.push(h);
        }
    }
}
