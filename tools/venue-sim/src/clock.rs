//! The venue's clock: the one place the emulator reads the host's time.

use std::time::{SystemTime, UNIX_EPOCH};

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
