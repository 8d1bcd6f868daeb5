//! A replay that takes a while says how far it is on stderr, with lines per second;
//! stdout stays the same. The threshold is wall-clock time, injectable as
//! `--progress-ms` so a test needs no slow trace.

mod common;

use common::{replay, stderr};

/// A trace of `n` charges and ticks over a sliding bucket.
fn long_trace(n: usize) -> String {
    let mut t = String::from(
        "{\"bucket\":\"w\",\"kind\":\"sliding\",\"limit\":100,\"window_ms\":1000,\"slots\":10}\n",
    );
    for i in 0..n {
        let at = i as i64 * 1_000_000;
        if i % 2 == 0 {
            t.push_str(&format!(
                "{{\"t\":{at},\"charge\":\"c{i}\",\"parts\":{{\"w\":1}}}}\n"
            ));
        } else {
            t.push_str(&format!("{{\"t\":{at},\"tick\":true}}\n"));
        }
    }
    t
}

#[test]
fn a_long_replay_reports_lines_per_second_on_stderr_only() {
    let trace = long_trace(5000);
    let quiet = replay(&[], &trace);
    let loud = replay(&["--progress-ms", "0"], &trace);
    assert!(quiet.status.success() && loud.status.success());
    assert_eq!(quiet.stdout, loud.stdout, "progress never reaches stdout");
    assert!(
        quiet.stderr.is_empty(),
        "a short replay says nothing: {}",
        stderr(&quiet)
    );
    let err = stderr(&loud);
    let progress: Vec<&str> = err.lines().collect();
    assert!(
        progress
            .first()
            .is_some_and(|l| l.starts_with("ergon-replay: line 1024, ") && l.ends_with(" lines/s")),
        "{err}"
    );
    assert!(
        progress.last().is_some_and(
            |l| l.starts_with("ergon-replay: 5001 lines in ") && l.ends_with(" lines/s")
        ),
        "a last line with the total: {err}"
    );
}
