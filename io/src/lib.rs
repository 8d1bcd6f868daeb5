//! ergon-io: everything of ergon that touches the operating system.
//!
//! The budget itself lives in `ergon-core` and never reads a clock or a socket;
//! this crate drives it:
//!
//! - [`http`]: the sans-IO HTTP/1.1 connection (encoding, bounded zero-copy parsing);
//! - [`client`]: the native client and its per-origin pools, which never write a
//!   request twice and always say whether any byte left ([`client::Sent`]);
//! - [`event_loop`]: one pinned thread running epoll, timers, the client, the
//!   budget's idle ticks and the caller's handler;
//! - [`clock`]: the monotonic nanosecond clock everything here shares.
//!
//! ```no_run
//! use ergon_core::{response::Response, Budget, Flight, Spec};
//! use ergon_io::client::{ClientHandler, Error, PoolConfig, RequestId, Sent};
//! use ergon_io::event_loop::{Config, Context, EventLoop};
//!
//! struct Once;
//! impl ClientHandler for Once {
//!     fn on_response(&mut self, cx: &mut Context<'_>, _: RequestId, r: Response<'_>, f: Flight) {
//!         println!("{} {}", r.status, r.body.len());
//!         cx.budget().complete(f, cx.now());
//!         cx.stop();
//!     }
//!     fn on_error(&mut self, cx: &mut Context<'_>, _: RequestId, _: Sent, e: Error) {
//!         println!("error {e}");
//!         cx.stop();
//!     }
//! }
//! ```

#![warn(missing_docs)]

pub use ergon_core as core;

pub mod client;
pub mod clock;
pub mod event_loop;
pub mod http;
mod sys;
