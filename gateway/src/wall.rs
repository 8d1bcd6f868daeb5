//! The wall clock, only for what people and files read: a ban's end in words, the
//! halts file, the boot epoch of client order ids. Nothing that decides a send
//! reads it: the loop's clock is a parameter everywhere else.

/// Milliseconds since the Unix epoch (0 before it).
pub fn ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil from days, Howard Hinnant's).
pub fn utc(unix_ms: i64) -> String {
    let (days, ms) = (
        unix_ms.div_euclid(86_400_000),
        unix_ms.rem_euclid(86_400_000),
    );
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = ms / 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_a_known_instant() {
        assert_eq!(utc(1_764_606_896_123), "2025-12-01T16:34:56.123Z");
    }
}
