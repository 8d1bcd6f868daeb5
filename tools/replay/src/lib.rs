//! ergon-replay: a budget configuration against a recorded trace, so a user can try
//! it on their own traffic before going live.
//!
//! Input: JSON Lines, bucket declarations first, then events in time order (see the
//! README of this tool or `ergon-replay --help`). Output: one JSON line per charge,
//! then one `{"summary":{...}}` line. A malformed or out-of-order line stops the
//! replay with an error naming its line number; nothing after it is processed.
//!
//! Besides: the declarations can come from a file of their own ([`config::read`],
//! `--config`), and a replay can keep a [`Timeline`] that [`plot::svg`] draws
//! (`--plot`, `--compare`).

pub mod config;
pub mod plot;
mod replay;
mod timeline;
mod trace;

pub use replay::{run, run_with, Options, ReplayError, Replayed};
pub use timeline::{Refusal, Timeline, Track};
pub use trace::{parse, Declaration, Event, Line};
