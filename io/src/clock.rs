//! The monotonic clock of ergon-io: `i64` nanoseconds since a process-wide origin.
//!
//! Read through quanta (TSC where it is invariant, the OS clock otherwise). The
//! event loop reads it once per turn and passes that `now` down; nothing below the
//! loop reads it again. Build the [`Budget`](ergon_core::Budget) with [`now_ns`] so
//! both speak the same time.

use std::sync::OnceLock;

static ORIGIN: OnceLock<quanta::Instant> = OnceLock::new();

/// Nanoseconds since this process first asked; never goes backwards.
pub fn now_ns() -> i64 {
    let origin = *ORIGIN.get_or_init(quanta::Instant::now);
    let d = quanta::Instant::now().saturating_duration_since(origin);
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Milliseconds as clock nanoseconds.
pub const fn ms(ms: i64) -> i64 {
    ms * 1_000_000
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic() {
        let a = super::now_ns();
        let b = super::now_ns();
        assert!(a >= 0 && b >= a);
    }
}
