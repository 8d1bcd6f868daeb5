//! ergon-io: everything of ergon that touches the operating system.
//!
//! The budget itself lives in `ergon-core` and never reads a clock or a socket;
//! this crate drives it.

pub use ergon_core as core;

pub mod ws;
