//! Venue adapters for Binance Spot, Binance USD-M futures, Bybit v5, OKX v5 and
//! Hyperliquid, and a program that shows what ergon makes of their answers.
//!
//! ```text
//! cargo run -p ergon-io --example venues
//! cargo run -p ergon-io --example venues -- classify --venue binance-spot \
//!     --request order --now-utc-ms 1700000000000 FILE.http
//! ```
//!
//! Without arguments it prints the decision for every shipped fixture
//! (`io/tests/fixtures/venues/<venue>/CASES` lists them, with the request each
//! answers and the documentation page it was written from). `classify` prints one
//! line for one captured response: the verdict, then `bucket=NAME` and
//! `until_ms=MS` (relative to now) where they apply. A file that is not an HTTP
//! response is an error (exit 1); a body that is not the venue's JSON is a verdict.
//!
//! Venue tables live here, not in the published crates: venues change them without
//! notice. They are tested like library code by `io/tests/example_venues.rs`.

// The adapters are library code: the program uses part of their API, the tests the rest.
#[allow(dead_code)]
mod binance_futures;
#[allow(dead_code)]
mod binance_spot;
#[allow(dead_code)]
mod bybit;
#[allow(dead_code)]
mod common;
#[allow(dead_code)]
mod hyperliquid;
#[allow(dead_code)]
mod okx;

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    match common::run(&args, &mut out, &mut err) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            ExitCode::FAILURE
        }
    }
}
