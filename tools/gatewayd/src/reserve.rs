//! `--reserve-budget USDC_PER_DAY` (Hyperliquid): the daemon buys address
//! requests with `reserveRequestWeight` when the forecast says the budget runs
//! out ([`ergon_venues::hyperliquid::reserve`]), never more than this many USDC
//! a UTC day. What was spent today is kept in the runtime directory's
//! `reserve` file (`day=N micro_usdc=M`), written before each purchase leaves,
//! so a restarted gateway goes on from it: the runtime directory outlives the
//! process, not a reboot (it is on tmpfs under `/run`); a record that cannot
//! be read stops the start, naming the file.

use std::path::Path;
use std::sync::Arc;

use ergon_gatewayd::shm::PrivateDir;
use ergon_venues::hyperliquid::reserve::{Reserve, Spent};

/// The file in the runtime directory.
const FILE: &str = "reserve";

/// The most `--reserve-budget` takes: a million USDC a day.
const MOST_USDC: u64 = 1_000_000;

/// Reads `--reserve-budget`'s value: USDC a day, a decimal with at most six
/// places, above 0 and at most a million, as micro-USDC.
pub fn parse_usdc(v: &str) -> Result<u64, String> {
    let bad = || {
        format!("--reserve-budget {v:?}: USDC a day, a decimal above 0 and at most {MOST_USDC} with at most 6 places")
    };
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 6 {
        return Err(bad());
    }
    let whole: u64 = whole.parse().map_err(|_| bad())?;
    let frac: u64 = format!("{frac:0<6}").parse().map_err(|_| bad())?;
    let micro = whole
        .checked_mul(1_000_000)
        .and_then(|w| w.checked_add(frac))
        .ok_or_else(bad)?;
    if micro == 0 || micro > MOST_USDC * 1_000_000 {
        return Err(bad());
    }
    Ok(micro)
}

/// The purchase policy for `cap_micro` micro-USDC a day, going on from the
/// record in `runtime_dir`, and recording there.
pub fn policy(runtime_dir: &Path, cap_micro: u64) -> Result<Reserve, String> {
    let dir = PrivateDir::open(runtime_dir).map_err(|e| format!("runtime directory: {e}"))?;
    let shown = runtime_dir.join(FILE);
    let spent = match dir
        .read(FILE, 256)
        .map_err(|e| format!("--reserve-budget: {e}"))?
    {
        None => Spent::default(),
        Some(text) => Spent::parse(&text)
            .map_err(|e| format!("--reserve-budget: {}: {e}", shown.display()))?,
    };
    let persist = move |s: Spent| match dir.write(FILE, &s.line()) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("ergon-gateway: warning: --reserve-budget: {e}: nothing bought");
            false
        }
    };
    Ok(Reserve::new(cap_micro, spent, Some(Arc::new(persist))))
}

#[cfg(test)]
mod tests {
    use super::parse_usdc;

    #[test]
    fn usdc_a_day_reads_as_micro_usdc_and_refuses_the_rest() {
        assert_eq!(parse_usdc("5"), Ok(5_000_000));
        assert_eq!(parse_usdc("0.0005"), Ok(500));
        assert_eq!(parse_usdc("1000000"), Ok(1_000_000_000_000));
        for bad in [
            "",
            "0",
            "0.0",
            "-1",
            "1e3",
            "1.0000001",
            "1000000.5",
            ".5",
            "x",
            "1.2.3",
        ] {
            let e = parse_usdc(bad).unwrap_err();
            assert!(e.starts_with("--reserve-budget"), "{bad}: {e}");
        }
    }
}
