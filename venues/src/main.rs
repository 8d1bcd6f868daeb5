//! `ergon-venues`: what ergon makes of a venue's answers.
//!
//! ```text
//! cargo run -p ergon-venues                          # every shipped fixture
//! cargo run -p ergon-venues -- classify --venue binance-spot \
//!     --request order --now-utc-ms 1700000000000 FILE.http
//! ```
//!
//! Without arguments it prints the decision for every shipped fixture
//! (`venues/tests/fixtures/<venue>/CASES` lists them, with the request each
//! answers and the documentation page it was written from). `classify` prints one
//! line for one captured response: the verdict, then `bucket=NAME` and
//! `until_ms=MS` (relative to now) where they apply; for a batch, one more line
//! per item after it: `item N Verdict [bucket=NAME] [until_ms=MS]`, N from 0 in the
//! request's order. A file that is not an HTTP
//! response is an error (exit 1); a body that is not the venue's JSON is a verdict.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    match ergon_venues::classify::run(&args, &mut out, &mut err) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            ExitCode::FAILURE
        }
    }
}
