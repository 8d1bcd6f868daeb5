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

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// UTC when the shipped fixtures were answered: Tue, 14 Nov 2023 22:13:20 GMT.
pub const FIXTURE_NOW_UTC_MS: i64 = 1_700_000_000_000;

const USAGE: &str = "usage: venues [classify --venue VENUE --request REQUEST --now-utc-ms MS FILE]
  VENUE:   binance-spot | binance-futures | bybit | okx | hyperliquid
  REQUEST: order | cancel | cancel-replace | batch:N | read:W | info:TYPE";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/venues")
}

/// One line of a `CASES` file: `case request source-url`.
struct Case {
    name: String,
    request: String,
}

fn cases(venue: &str) -> Result<Vec<Case>, String> {
    let path = fixtures().join(venue).join("CASES");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(name), Some(request), Some(_source)) => out.push(Case {
                name: name.into(),
                request: request.into(),
            }),
            _ => return Err(format!("{}: bad line {line:?}", path.display())),
        }
    }
    Ok(out)
}

fn show_fixtures() -> Result<(), String> {
    for venue in common::VENUES {
        for case in cases(venue)? {
            let path = fixtures().join(venue).join(format!("{}.http", case.name));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let d = common::classify(venue, &case.request, FIXTURE_NOW_UTC_MS, &bytes)
                .map_err(|e| format!("{venue}/{}: {e}", case.name))?;
            let warn = d.warning.map(|w| format!("  ({w})")).unwrap_or_default();
            println!("{venue}/{} [{}]: {}{warn}", case.name, case.request, d.line);
        }
    }
    Ok(())
}

fn classify(args: &[String]) -> Result<String, String> {
    let (mut venue, mut request, mut now, mut file) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--venue" => venue = Some(value()?),
            "--request" => request = Some(value()?),
            "--now-utc-ms" => {
                let v = value()?;
                now = Some(
                    v.parse::<i64>()
                        .map_err(|_| format!("--now-utc-ms {v:?} is not an integer"))?,
                )
            }
            f if !f.starts_with("--") && file.is_none() => file = Some(f),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    let venue = venue.ok_or("--venue is required")?;
    let request = request.ok_or("--request is required")?;
    let now = now.ok_or("--now-utc-ms is required")?;
    let file = file.ok_or("FILE is required")?;
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    let d = common::classify(venue, request, now, &bytes).map_err(|e| format!("{file}: {e}"))?;
    if let Some(w) = d.warning {
        eprintln!("warning: {file}: {w}");
    }
    Ok(d.line)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => show_fixtures().map(|()| None),
        Some("classify") => classify(&args[1..]).map(Some),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    match result {
        Ok(Some(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
