//! `--config FILE`: the trace's declarations are replaced by FILE's. A tighter file
//! admits fewer charges and never lets a window go over its limit; a bucket FILE does
//! not declare stops the replay at the trace's line; a bad FILE names its own line.

mod common;

use std::collections::{HashMap, HashSet};
use std::fs;

use common::{example, fails_at, lines, replay, scratch, stderr};
use serde_json::Value;

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// For each fixed bucket of `config`, the most units the admitted and never
/// refunded charges of `output` put into one of its aligned windows, with its limit.
fn fullest_windows(trace: &[Value], config: &[Value], output: &[Value]) -> Vec<(String, u64, u64)> {
    let admitted: HashSet<&str> = output
        .iter()
        .filter(|l| l["ok"] == true)
        .map(|l| l["id"].as_str().expect("id"))
        .collect();
    let refunded: HashSet<&str> = trace.iter().filter_map(|e| e["refund"].as_str()).collect();
    let charges: Vec<&Value> = trace
        .iter()
        .filter(|e| {
            e["charge"]
                .as_str()
                .is_some_and(|id| admitted.contains(id) && !refunded.contains(id))
        })
        .collect();
    let mut fullest = Vec::new();
    for bucket in config.iter().filter(|d| d["kind"] == "fixed") {
        let name = bucket["bucket"].as_str().expect("name");
        let window = bucket["window_ms"].as_i64().expect("window") * 1_000_000;
        let phase = bucket["phase_ms"].as_i64().unwrap_or(0) * 1_000_000;
        let mut sums: HashMap<i64, u64> = HashMap::new();
        for c in &charges {
            if let Some(cost) = c["parts"][name].as_u64() {
                let t = c["t"].as_i64().expect("t");
                *sums.entry((t - phase).div_euclid(window)).or_default() += cost;
            }
        }
        let most = sums.values().copied().max().unwrap_or(0);
        fullest.push((
            name.to_owned(),
            most,
            bucket["limit"].as_u64().expect("limit"),
        ));
    }
    fullest
}

fn ok_count(output: &[Value]) -> u64 {
    output.last().expect("summary")["summary"]["ok"]
        .as_u64()
        .expect("ok")
}

#[test]
fn a_tighter_config_admits_fewer_and_no_window_goes_over_it() {
    let trace_path = example("binance-spot.jsonl");
    let tight_path = example("binance-spot-tight.jsonl");
    let trace = json_lines(&fs::read_to_string(&trace_path).expect("trace"));
    let tight = json_lines(&fs::read_to_string(&tight_path).expect("config"));
    let trace_arg = trace_path.to_str().expect("path");

    let own = replay(&[trace_arg], "");
    assert!(own.status.success(), "{}", stderr(&own));
    let own = lines(&own);
    let tighter = replay(
        &["--config", tight_path.to_str().expect("path"), trace_arg],
        "",
    );
    assert!(tighter.status.success(), "{}", stderr(&tighter));
    let tighter = lines(&tighter);

    assert!(
        ok_count(&tighter) < ok_count(&own),
        "tighter limits admit fewer: {} vs {}",
        ok_count(&tighter),
        ok_count(&own)
    );
    // The check bites: the trace's own decisions put some window over a tight limit.
    assert!(
        fullest_windows(&trace, &tight, &own)
            .iter()
            .any(|(_, most, limit)| most > limit),
        "the tight file must be tighter than what the trace's own limits admitted"
    );
    for (bucket, most, limit) in fullest_windows(&trace, &tight, &tighter) {
        assert!(
            most <= limit,
            "{bucket}: a window holds {most}, over the limit {limit}"
        );
    }
}

const TRACE: &str = r#"{"bucket":"weight","kind":"sliding","limit":3,"window_ms":1000,"slots":10}
{"bucket":"orders","kind":"fixed","limit":5,"window_ms":1000}
{"t":0,"charge":"a","parts":{"weight":1}}
{"t":1,"charge":"b","parts":{"weight":1}}
{"t":2,"charge":"c","parts":{"weight":1,"orders":1}}
"#;

fn config_file(name: &str, text: &str) -> String {
    let path = scratch(name);
    fs::write(&path, text).expect("config written");
    path.to_str().expect("path").to_owned()
}

#[test]
fn the_config_replaces_the_trace_declarations() {
    let same = config_file(
        "same.jsonl",
        &TRACE.lines().take(2).collect::<Vec<_>>().join("\n"),
    );
    let own = replay(&[], TRACE);
    let with_same = replay(&["--config", &same], TRACE);
    assert!(own.status.success() && with_same.status.success());
    assert_eq!(
        own.stdout, with_same.stdout,
        "the same declarations, the same bytes out"
    );

    let tighter = config_file(
        "tighter.jsonl",
        r#"{"bucket":"weight","kind":"sliding","limit":1,"window_ms":1000,"slots":10}
{"bucket":"orders","kind":"fixed","limit":5,"window_ms":1000}
"#,
    );
    let out = replay(&["--config", &tighter], TRACE);
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Vec<bool> = lines(&out)[..3].iter().map(|l| l["ok"] == true).collect();
    assert_eq!(
        got,
        [true, false, false],
        "the file's limit of 1, not the trace's 3"
    );
}

#[test]
fn an_event_naming_a_bucket_the_config_lacks_stops_at_the_traces_line() {
    let no_orders = config_file(
        "no-orders.jsonl",
        r#"{"bucket":"weight","kind":"sliding","limit":3,"window_ms":1000,"slots":10}"#,
    );
    let out = replay(&["--config", &no_orders], TRACE);
    fails_at(&out, 5, "no bucket named \"orders\"");
    assert_eq!(
        lines(&out).len(),
        2,
        "the two charges before it were decided"
    );
}

#[test]
fn a_bad_config_names_its_file_and_line() {
    for (name, text, line, needle) in [
        (
            "event.jsonl",
            "{\"bucket\":\"w\",\"kind\":\"gate\"}\n{\"t\":1,\"tick\":true}\n",
            2,
            "declarations only",
        ),
        (
            "kind.jsonl",
            "\n{\"bucket\":\"w\",\"kind\":\"leaky\"}\n",
            2,
            "unknown kind",
        ),
        (
            "twice.jsonl",
            "{\"bucket\":\"w\",\"kind\":\"gate\"}\n{\"bucket\":\"w\",\"kind\":\"gate\"}\n",
            2,
            "same name",
        ),
        (
            "rate.jsonl",
            "{\"bucket\":\"w\",\"kind\":\"token\",\"rate_per_s\":0,\"burst\":1}\n",
            1,
            "positive number",
        ),
    ] {
        let path = config_file(name, text);
        let out = replay(&["--config", &path], TRACE);
        fails_at(&out, line, needle);
        assert!(
            stderr(&out).contains(&format!("{path}: line {line}:")),
            "{}",
            stderr(&out)
        );
        assert!(
            out.stdout.is_empty(),
            "nothing is replayed against a bad file"
        );
    }
    let empty = config_file("empty.jsonl", "\n");
    let out = replay(&["--config", &empty], TRACE);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("at least one bucket"),
        "{}",
        stderr(&out)
    );

    let out = replay(&["--config", "/nonexistent/ergon.jsonl"], TRACE);
    assert_eq!(out.status.code(), Some(2), "a file that cannot be opened");
}

#[test]
fn a_compare_file_without_a_bucket_the_trace_names_stops_at_that_line() {
    let no_orders = config_file(
        "compare-no-orders.jsonl",
        r#"{"bucket":"weight","kind":"sliding","limit":3,"window_ms":1000,"slots":10}"#,
    );
    let picture = scratch("compare-no-orders.svg");
    let args = [
        "--plot",
        picture.to_str().expect("path"),
        "--compare",
        &no_orders,
    ];
    let out = replay(&args, TRACE);
    fails_at(
        &out,
        5,
        "with the --compare declarations: no bucket named \"orders\"",
    );
    assert!(!picture.exists(), "no picture of a replay that stopped");
}

#[test]
fn a_bad_trace_line_is_the_traces_error_even_with_a_compare_file() {
    let same = config_file(
        "compare-same.jsonl",
        &TRACE.lines().take(2).collect::<Vec<_>>().join("\n"),
    );
    let picture = scratch("compare-same.svg");
    let trace = format!("{TRACE}{{\"t\":1,\"tick\":true}}\n");
    let out = replay(
        &[
            "--plot",
            picture.to_str().expect("path"),
            "--compare",
            &same,
        ],
        &trace,
    );
    fails_at(&out, 6, "out of order");
    assert!(!stderr(&out).contains("--compare"), "{}", stderr(&out));
    assert_eq!(lines(&out).len(), 3, "the three charges before it");
}
