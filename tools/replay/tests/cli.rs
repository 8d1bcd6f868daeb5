//! The `ergon-replay` command line, run as a user runs it: a real process, a trace on
//! stdin or in a file, JSON lines out.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn replay_stdin(trace: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ergon-replay"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ergon-replay starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(trace.as_bytes())
        .expect("trace written");
    child.wait_with_output().expect("ergon-replay ends")
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect()
}

const DECLARE: &str = r#"{"bucket":"weight","kind":"sliding","limit":3,"window_ms":1000,"slots":10}
{"bucket":"orders10s","kind":"fixed","limit":50,"window_ms":10000,"phase_ms":0,"guard_ms":20}
{"bucket":"smooth","kind":"token","rate_per_s":20,"burst":40}
{"bucket":"conc","kind":"inflight","limit":10}
{"bucket":"ip","kind":"gate","headroom":{"normal":0,"bulk":0}}
"#;

#[test]
fn decides_each_charge_and_summarises() {
    let trace = format!(
        "{DECLARE}{}",
        r#"{"t":1000,"charge":"r1","class":"normal","parts":{"weight":1,"orders10s":1,"ip":0}}
{"t":2000,"charge":"r2","class":"normal","parts":{"weight":2}}
{"t":3000,"charge":"r3","class":"normal","parts":{"weight":1}}
{"t":4000,"refund":"r3"}
{"t":5000,"refund":"r2"}
{"t":6000,"charge":"r4","class":"bulk","parts":{"weight":2,"ip":0}}
{"t":7000,"sent":"r1"}
{"t":9000,"complete":"r1"}
{"t":10000,"banned":"ip"}
{"t":11000,"charge":"r5","class":"urgent","parts":{"ip":0}}
{"t":12000,"clear_halt":"ip"}
{"t":13000,"charge":"r6","class":"urgent","parts":{"weight":9}}
"#
    );
    let out = replay_stdin(&trace);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = lines(&out);
    let expect: Vec<Value> = [
        r#"{"id":"r1","t":1000,"ok":true}"#,
        r#"{"id":"r2","t":2000,"ok":true}"#,
        // weight is at 3 of 3: r3 waits until r1's slot [0, 100ms) has fully left.
        r#"{"id":"r3","t":3000,"ok":false,"bucket":"weight","why":"full","ready_at":1100000000}"#,
        r#"{"id":"r4","t":6000,"ok":true}"#,
        r#"{"id":"r5","t":11000,"ok":false,"bucket":"ip","why":"halted","ready_at":null}"#,
        r#"{"id":"r6","t":13000,"ok":false,"bucket":"weight","why":"too_big","ready_at":null}"#,
    ]
    .iter()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect();
    assert_eq!(got[..expect.len()], expect[..]);
    assert_eq!(got.len(), expect.len() + 1, "one summary line last");
    let summary = &got[expect.len()]["summary"];
    assert_eq!(summary["charges"], 6);
    assert_eq!(summary["refused"], 3);
    assert_eq!(
        summary["ignored"]["refund"], 1,
        "r3 was refused: its refund is ignored"
    );
    let weight = &summary["buckets"]["weight"];
    assert_eq!(weight["admitted"], 5);
    assert_eq!(weight["refunds"], 1);
    assert_eq!(weight["refusals"]["full"], 1);
    assert_eq!(weight["refusals"]["too_big"], 1);
    assert_eq!(summary["buckets"]["ip"]["refusals"]["halted"], 1);
    assert_eq!(summary["buckets"]["ip"]["bans"], 1);
}

#[test]
fn throttle_holds_then_releases() {
    let trace = format!(
        "{DECLARE}{}",
        r#"{"t":0,"throttled":"weight","wait_ms":5}
{"t":54999999,"charge":"a","parts":{"weight":1}}
{"t":55000000,"charge":"b","parts":{"weight":1}}
{"t":55000001,"observe":"weight","used":3}
{"t":55000002,"charge":"c","parts":{"weight":1}}
{"t":55000003,"extra":"smooth","cost":40}
{"t":55000004,"charge":"d","parts":{"smooth":1}}
{"t":55000005,"tick":true}
"#
    );
    let out = replay_stdin(&trace);
    assert!(out.status.success());
    let got = lines(&out);
    assert_eq!(got[0]["why"], "held");
    // The wait plus the budget's default hold guard of 50 ms.
    assert_eq!(got[0]["ready_at"], 55_000_000);
    assert_eq!(got[1]["ok"], true);
    assert_eq!(
        got[2]["why"], "full",
        "the server's count of 3 fills the bucket"
    );
    assert_eq!(got[3]["bucket"], "smooth");
    assert_eq!(got[3]["why"], "full");
}

/// A figure the venue stamped is replayed as stamped (`"counted"`): one read 10 ms
/// after a boundary but stamped 10 ms before it is the previous window's, and the
/// next window, 100 ms in, is free; the same figure unstamped may be either
/// window's, so it fills both.
#[test]
fn a_stamped_figure_is_replayed_in_its_stamps_window() {
    let declare = r#"{"bucket":"orders","kind":"fixed","limit":10,"window_ms":1000,"phase_ms":0,"guard_ms":20}
"#;
    let decide = |observe: &str| {
        let trace = format!(
            "{declare}{observe}\n{}",
            r#"{"t":1100000000,"charge":"a","parts":{"orders":1}}
"#
        );
        let out = replay_stdin(&trace);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        lines(&out)[0]["ok"].as_bool().expect("a decision")
    };
    assert!(decide(
        r#"{"t":1010000000,"observe":"orders","used":10,"counted":990000000}"#
    ));
    assert!(!decide(r#"{"t":1010000000,"observe":"orders","used":10}"#));
}

fn fails_at(trace: &str, line: usize, needle: &str) -> Vec<Value> {
    let out = replay_stdin(trace);
    assert_eq!(out.status.code(), Some(1), "a bad line is a non-zero exit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("line {line}:")) && err.contains(needle),
        "stderr {err:?} should name line {line} and say {needle:?}"
    );
    lines(&out)
}

#[test]
fn a_bad_line_stops_the_replay_and_names_its_number() {
    let declared = DECLARE.lines().count();
    let out = fails_at(
        &format!(
            "{DECLARE}{}",
            r#"{"t":5,"charge":"a","parts":{"weight":1}}
{"t":4,"charge":"b","parts":{"weight":1}}
{"t":6,"charge":"c","parts":{"weight":1}}
"#
        ),
        declared + 2,
        "out of order",
    );
    assert_eq!(
        out.len(),
        1,
        "nothing after the bad line is processed: {out:?}"
    );
    let cases = [
        (r#"{"t":1,"charge":"a","parts":{"weight":1}"#, "not JSON"),
        (r#"{"t":1.5,"tick":true}"#, "integer"),
        (r#"{"t":1,"refund":"ghost"}"#, "never charged"),
        (
            r#"{"t":1,"charge":"a","parts":{"nope":1}}"#,
            "no bucket named",
        ),
        (
            r#"{"t":1,"charge":"a","class":"vip","parts":{"weight":1}}"#,
            "unknown class",
        ),
        (r#"{"t":1,"charge":"a","parts":{"weight":-1}}"#, "cost"),
        (r#"{"t":1,"tick":true,"colour":"red"}"#, "unknown field"),
        (r#"{"t":1,"tick":true,"refund":"a"}"#, "one event per line"),
        (r#"[1,2]"#, "object"),
        (
            r#"{"bucket":"late","kind":"gate"}"#,
            "declarations must come before",
        ),
    ];
    for (bad, needle) in cases {
        let lead = r#"{"t":0,"tick":true}"#;
        fails_at(&format!("{DECLARE}{lead}\n{bad}\n"), declared + 2, needle);
    }
}

#[test]
fn lifecycle_errors_follow_the_ticket_rules() {
    let declared = DECLARE.lines().count();
    let charge = r#"{"t":1,"charge":"a","parts":{"weight":1}}"#;
    for (bad, needle) in [
        (
            "{\"t\":2,\"sent\":\"a\"}\n{\"t\":3,\"refund\":\"a\"}",
            "never refunded",
        ),
        (
            "{\"t\":2,\"complete\":\"a\"}\n{\"t\":3,\"tick\":true}",
            "never sent",
        ),
        (
            "{\"t\":2,\"refund\":\"a\"}\n{\"t\":3,\"refund\":\"a\"}",
            "already ended",
        ),
        (
            "{\"t\":2,\"tick\":true}\n{\"t\":3,\"charge\":\"a\",\"parts\":{}}",
            "used twice",
        ),
    ] {
        let line = if needle == "never sent" { 2 } else { 3 };
        fails_at(
            &format!("{DECLARE}{charge}\n{bad}\n"),
            declared + line,
            needle,
        );
    }
}

#[test]
fn bad_declarations_say_what_to_fix() {
    for (bad, needle) in [
        (
            r#"{"bucket":"w","kind":"sliding","limit":0,"window_ms":1000,"slots":10}"#,
            "limit is zero",
        ),
        (
            r#"{"bucket":"w","kind":"sliding","limit":5,"window_ms":1000,"slots":7}"#,
            "do not divide",
        ),
        (
            r#"{"bucket":"w","kind":"fixed","limit":5,"window_ms":1000,"guard_ms":600}"#,
            "guard",
        ),
        (r#"{"bucket":"w","kind":"leaky"}"#, "unknown kind"),
        (
            r#"{"bucket":"w","kind":"inflight","limit":5,"headroom":{"normal":3,"bulk":1}}"#,
            "headroom",
        ),
    ] {
        fails_at(&format!("{bad}\n"), 1, needle);
    }
    fails_at(
        "{\"bucket\":\"w\",\"kind\":\"gate\"}\n{\"bucket\":\"w\",\"kind\":\"gate\"}\n",
        2,
        "same name",
    );
}

#[test]
fn the_shipped_trace_replays_from_a_file() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/traces/binance-spot.jsonl"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ergon-replay"))
        .arg(path)
        .output()
        .expect("ergon-replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = lines(&out);
    let summary = &got.last().expect("output")["summary"];
    assert!(
        summary["refused"].as_u64().unwrap() > 0,
        "the trace asks for more than the limits"
    );
    for close in got
        .iter()
        .filter(|l| l["id"].as_str().is_some_and(|i| i.starts_with("close")))
    {
        assert_eq!(close["ok"], true, "urgent closes use the headroom: {close}");
    }
    let orders = &summary["buckets"]["ORDERS_10S"];
    assert!(orders["refusals"]["full"].as_u64().unwrap() > 0);
}
