//! ergon-io: everything of ergon that touches the operating system.
//!
//! The budget itself lives in `ergon-core` and never reads a clock or a socket;
//! this crate drives it:
//!
//! - [`http`]: the sans-IO HTTP/1.1 connection (encoding, bounded zero-copy parsing);
//! - [`pool`]: the sans-IO pool of keep-alive connections (phases, deadlines,
//!   reconnects, connect charges, lanes) that never writes a request twice and
//!   always says whether any byte left ([`client::Sent`]); no syscall, no clock;
//! - [`client`]: the names callers use: the [`client::Client`] (the pool and the
//!   sockets, TLS and libcurl transports under it) and its [`client::ClientHandler`];
//! - [`event_loop`]: the thin epoll shell on one pinned thread that drives the
//!   client, timers, the budget's idle ticks and the caller's handler;
//! - [`clock`]: the monotonic nanosecond clock everything here shares;
//! - [`Culprit`]: who is at fault for an error (peer, OS, caller, policy,
//!   deadline); every public error type here says it with `culprit()`;
//! - `tls` (feature `tls`, on by default): rustls driven by the same client;
//! - `curl` (feature `curl`): the same contract over libcurl, which refuses the
//!   methods libcurl may send twice on its own;
//! - [`boundary`]: how other threads submit requests to the loop and get answers,
//!   through bounded lock-free queues, an eventfd wake and a seqlock'd stats
//!   snapshot, all loom-checked;
//! - [`ws`]: the WebSocket client whose every frame (automatic pongs included) and
//!   connect attempt is charged, sans-IO, with a TCP shell on the event loop.
//!
//! ```no_run
//! use ergon_core::{Budget, Class, Flight, Part, Spec};
//! use ergon_venues::response::Response;
//! use ergon_io::client::{ClientHandler, Error, PoolConfig, PoolId, RequestId, Sent};
//! use ergon_io::event_loop::{Context, EventLoop, LoopConfig};
//! use ergon_io::http::Request;
//!
//! struct Once {
//!     parts: [Part; 1],
//! }
//!
//! impl ClientHandler for Once {
//!     fn on_ready(&mut self, cx: &mut Context<'_>, pool: PoolId) {
//!         let now = cx.now();
//!         let Ok(ticket) = cx.budget().try_charge(&self.parts, Class::Normal, now) else { return };
//!         if let Err(refused) = cx.request(pool, &Request::get("/time"), ticket, now + 5_000_000_000) {
//!             cx.refund(refused.into_ticket());
//!         }
//!     }
//!     fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
//!         println!("{} {}", r.status, r.body.len());
//!         cx.complete(f);
//!         cx.stop();
//!     }
//!     fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, sent: Sent, e: Error) {
//!         let maybe = cx.settle(sent);
//!         println!("error sent={} {}", if maybe { "maybe" } else { "no" }, e.kind());
//!         cx.stop();
//!     }
//! }
//!
//! let mut b = Budget::builder();
//! let weight = b.add("weight", Spec::sliding(1200, 60_000_000_000, 60)).unwrap();
//! let budget = b.build(ergon_io::clock::now_ns()).unwrap();
//! let cfg = LoopConfig { cpu: Some(1), ..LoopConfig::default() };
//! let mut lp = EventLoop::new(cfg, budget).unwrap();
//! lp.add_pool(PoolConfig::new("127.0.0.1:8080".parse().unwrap(), "127.0.0.1:8080")).unwrap();
//! lp.run(&mut Once { parts: [Part::new(weight, 1)] }).unwrap();
//! ```

#![warn(missing_docs)]
// Unsafe only where it is needed, each module saying why: sys (system calls),
// boundary::ring and boundary::wake (the lock-free queue, the eventfd), curl
// (libcurl's socket callback). Every unsafe block states its SAFETY reason.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use culprit::Culprit;
pub use ergon_core as core;

pub mod boundary;
pub mod client;
pub mod clock;
mod culprit;
#[cfg(feature = "curl")]
pub mod curl;
#[cfg(not(feature = "curl"))]
#[path = "curl_off.rs"]
mod curl;
pub mod event_loop;
mod handler;
pub mod http;
mod output;
pub mod pool;
mod sync;
mod sys;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(not(feature = "tls"))]
#[path = "tls_off.rs"]
mod tls;
mod transport;
pub mod ws;
