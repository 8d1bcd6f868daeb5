//! ergon keeps a trading process inside its venues' request limits.
//!
//! This facade re-exports the two crates:
//! - [`core`] (`ergon-core`): the sans-IO budget, verdicts and the re-send rule;
//! - [`io`] (`ergon-io`): everything that touches the OS.

pub use ergon_core as core;
pub use ergon_io as io;
