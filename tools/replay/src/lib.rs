//! ergon-replay: a budget configuration against a recorded trace, so a user can try
//! it on their own traffic before going live.
//!
//! Input: JSON Lines, bucket declarations first, then events in time order (see the
//! README of this tool or `ergon-replay --help`). Output: one JSON line per charge,
//! then one `{"summary":{...}}` line. A malformed or out-of-order line stops the
//! replay with an error naming its line number; nothing after it is processed.

mod replay;
mod trace;

pub use replay::{run, ReplayError};
pub use trace::{parse, Event, Line};
