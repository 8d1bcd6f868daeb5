//! Token buckets take any positive finite rate (`"rate_per_s": 2.5`, Hyperliquid's
//! 0.1 per second) or its inverse (`"interval_ms"`); every other rate is refused with
//! the line number.

mod common;

use common::{fails_at, lines, replay};

/// One token bucket declared by `fields`, then charges of 1 at each time (ns).
fn trace(fields: &str, at: &[i64]) -> String {
    let mut t = format!("{{\"bucket\":\"hl\",\"kind\":\"token\",{fields}}}\n");
    for (i, ns) in at.iter().enumerate() {
        t.push_str(&format!(
            "{{\"t\":{ns},\"charge\":\"c{i}\",\"parts\":{{\"hl\":1}}}}\n"
        ));
    }
    t
}

/// The `ok` of each charge, and the `ready_at` of the refused ones.
fn decisions(fields: &str, at: &[i64]) -> Vec<(bool, Option<i64>)> {
    let out = replay(&[], &trace(fields, at));
    assert!(out.status.success(), "{}", common::stderr(&out));
    let got = lines(&out);
    got[..got.len() - 1]
        .iter()
        .map(|l| (l["ok"] == true, l["ready_at"].as_i64()))
        .collect()
}

const S: i64 = 1_000_000_000;

#[test]
fn a_fractional_rate_drains_one_unit_per_inverse_rate() {
    // 2.5 per second: one unit every 400 ms, burst 1.
    let got = decisions(
        r#""rate_per_s":2.5,"burst":1"#,
        &[0, 400_000_000 - 1, 400_000_000],
    );
    assert_eq!(
        got,
        [(true, None), (false, Some(400_000_000)), (true, None)]
    );
}

#[test]
fn hyperliquids_tenth_of_a_unit_per_second() {
    let got = decisions(r#""rate_per_s":0.1,"burst":2"#, &[0, 0, 10 * S - 1, 10 * S]);
    assert_eq!(
        got,
        [
            (true, None),
            (true, None),
            (false, Some(10 * S)),
            (true, None)
        ]
    );
}

#[test]
fn interval_ms_is_the_same_bucket_written_the_other_way() {
    let at = [0, 1, 250_000_000 - 1, 250_000_000, 300_000_000];
    let by_interval = decisions(r#""interval_ms":250,"burst":1"#, &at);
    assert_eq!(by_interval, decisions(r#""rate_per_s":4,"burst":1"#, &at));
    assert_eq!(by_interval[3], (true, None));
    let fractional = decisions(r#""interval_ms":0.5,"burst":1"#, &[0, 499_999, 500_000]);
    assert_eq!(
        fractional,
        [(true, None), (false, Some(500_000)), (true, None)]
    );
}

#[test]
fn zero_negative_nan_both_or_neither_are_refused_with_the_line_number() {
    for (fields, needle) in [
        (r#""rate_per_s":0,"burst":1"#, "positive number"),
        (r#""rate_per_s":0.0,"burst":1"#, "positive number"),
        (r#""rate_per_s":-2.5,"burst":1"#, "positive number"),
        (r#""rate_per_s":"NaN","burst":1"#, "positive number"),
        (r#""rate_per_s":NaN,"burst":1"#, "not JSON"),
        (r#""rate_per_s":null,"burst":1"#, "positive number"),
        (r#""interval_ms":0,"burst":1"#, "positive number"),
        (r#""interval_ms":-1,"burst":1"#, "positive number"),
        (r#""rate_per_s":1e-300,"burst":1"#, "too long"),
        (r#""rate_per_s":2,"interval_ms":500,"burst":1"#, "not both"),
        (r#""burst":1"#, "needs \"rate_per_s\""),
    ] {
        let gate = "{\"bucket\":\"ip\",\"kind\":\"gate\"}\n";
        let out = replay(&[], &format!("{gate}{}", trace(fields, &[0])));
        fails_at(&out, 2, needle);
    }
}
